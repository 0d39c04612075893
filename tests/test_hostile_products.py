"""A work product is agent-controlled bytes: reading it must never take the harness down (issue 19, deliverable 1).

Product checks run in a capped worker (graders.capped): a compression bomb, a validator that exhausts memory, hangs
or dies becomes that check's failed credit with its reason, and the next check still runs.
"""
import gzip
import json
import resource

import pytest

from graders.manifest import Check
from graders import capped
from graders.checks import run_check
from graders.product_io import ProductRefused, compression_of, read_bytes_bounded


def _bomb(path, members=4, size=64 << 20):
    member = gzip.compress(b"\0" * size, compresslevel=9)
    path.write_bytes(member * members)
    return path


def _check(validator: str) -> Check:
    return Check(id="p", kind="product", field="output", validator=validator)


def test_a_gzip_bomb_named_like_plain_text_is_refused_without_inflating(tmp_path):
    """The bomb of the issue: gzip members in `fixed.vcf`. Compression is read from the bytes, and a family that
    asked for plain text refuses it before any reader sees it; the harness's memory does not grow."""
    _bomb(tmp_path / "fixed.vcf")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = run_check(Check(id="dups", kind="product_items", field="output", golden="keys"), {"output": "fixed.vcf"},
                  {"keys": ["22:1:A:G"]}, tmp_path)
    assert r.credit == 0.0 and "gzip-compressed" in r.detail and "uncompressed" in r.detail, r.detail
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KiB: nothing was inflated here


def test_bounded_inflation_stops_at_the_ratio_cap(tmp_path):
    p = _bomb(tmp_path / "x.vcf.gz", members=2, size=32 << 20)
    assert compression_of(p) == "gzip"
    with pytest.raises(ProductRefused, match="refused as a bomb"):
        read_bytes_bounded(p)
    ok = tmp_path / "ok.vcf.gz"
    ok.write_bytes(gzip.compress(b"##fileformat=VCFv4.2\n" * 100) + gzip.compress(b"#CHROM\n"))
    assert read_bytes_bounded(ok).endswith(b"#CHROM\n")


@pytest.mark.parametrize("validator,needle", [
    ("test.hog_memory", "memory cap"),
    ("test.die", "worker died"),
])
def test_a_validator_that_exhausts_memory_or_dies_is_a_failed_check(tmp_path, validator, needle):
    import tests.hostile_validators  # noqa: F401 - registers them here; the worker imports the module by name

    (tmp_path / "out.txt").write_text("x\n")
    r = run_check(_check(validator), {"output": "out.txt"}, {}, tmp_path)
    assert r.credit == 0.0 and needle in r.detail, r.detail
    again = run_check(_check("test.ok"), {"output": "out.txt"}, {}, tmp_path)  # a fresh worker takes the next one
    assert again.credit == 1.0, again.detail


def test_a_validator_that_hangs_is_stopped_at_the_deadline(tmp_path, monkeypatch):
    import tests.hostile_validators  # noqa: F401

    monkeypatch.setattr(capped, "WALL_CAP_S", 3.0)
    (tmp_path / "out.txt").write_text("x\n")
    r = run_check(_check("test.hang"), {"output": "out.txt"}, {}, tmp_path)
    assert r.credit == 0.0 and "longer than 3 s" in r.detail, r.detail


def test_a_bomb_in_a_graded_world_fails_its_check_and_the_grade_completes(tmp_path):
    """Through graders.grade on a real world: the clinvar duplicate_records action names a bomb as its product."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.grade import grade

    ref = load_suite().worlds["clinvar.L1.integrity.duplicate_records"]
    _bomb(tmp_path / "dups.txt")
    report = {"assessment": "usable_with_caveats", "summary": "s",
              "issues": [{"category": "duplicate records", "severity": "warning", "where": "calls.vcf.gz",
                          "description": "duplicated variant records", "value": 10, "action": "listed",
                          "output": "dups.txt"}]}
    g = grade(ref, read_golden(ref).values, json.dumps(report), products=tmp_path)
    # the VCF validators read a corrected bgzip copy (the data's original format) with a bounded inflate: the bomb
    # is refused at the cap instead of being inflated
    # is read with a bounded inflate (refused at the cap) and earns nothing; the track's cap is the graders' own
    from graders.product_io import MAX_INFLATED_BYTES
    from worlds.clinvar.solvers import MAX_VCF_INFLATED

    assert MAX_VCF_INFLATED == MAX_INFLATED_BYTES
    acts = [c for c in g.checks if c.id in {a.id for a in ref.world.rubric.actions}]
    assert acts and all(c.credit == 0.0 for c in acts), [c.detail for c in g.checks]
    assert g.status not in ("DIAGNOSE-AND-ACT", "DIAGNOSE-AND-ACT-PARTIAL")


HARNESS_THAT_DIES = r"""
import sys, threading
import tests.hostile_validators  # noqa: F401
from graders.manifest import Check
from graders import capped
from graders.checks import run_check

def grade():
    run_check(Check(id="p", kind="product", field="output", validator="test.hang"), {"output": "out.txt"}, {},
              sys.argv[1])

threading.Thread(target=grade, daemon=True).start()
threading.Event().wait(3600)
"""


def _cmdline(pid: int) -> bytes:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return b""


def _children(pid: int) -> list[int]:
    import os

    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


def test_a_killed_harness_takes_its_grading_worker_with_it(tmp_path):
    """A SIGKILLed harness must not leave its capped worker finishing a check (and starting sandboxes) for nobody:
    the worker is armed with PR_SET_PDEATHSIG, so it dies with the harness thread that spawned it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from sandbox.bwrap import _state

    (tmp_path / "out.txt").write_text("x\n")
    worker = None
    h = subprocess.Popen([sys.executable, "-c", HARNESS_THAT_DIES, str(tmp_path)], cwd=os.getcwd())
    try:
        deadline = time.monotonic() + 60
        while worker is None and time.monotonic() < deadline:  # the worker is running the hanging validator
            kids = [k for k in _children(h.pid) if b"spawn_main" in _cmdline(k)]  # not the resource tracker
            worker = kids[0] if kids else None
            time.sleep(0.1)
        assert worker is not None, "the harness never spawned its grading worker"
        time.sleep(1.0)  # let it receive the check and enter the validator
        h.send_signal(signal.SIGKILL)
        h.wait(10)
        until = time.monotonic() + 10
        while _state(worker) not in (None, "Z", "X") and time.monotonic() < until:
            time.sleep(0.1)
        assert _state(worker) in (None, "Z", "X"), f"grading worker {worker} outlived its SIGKILLed harness"
    finally:
        if h.poll() is None:
            h.kill()
        for k in [worker] if worker else []:  # a worker that survived must not outlive the test either
            try:
                os.kill(k, signal.SIGKILL)
            except OSError:
                pass


def test_a_warm_up_imports_the_validators_beside_the_episode_and_the_next_check_still_answers(tmp_path, monkeypatch):
    """`prestart(modules)` has the worker import a world's validator modules before its first check (an episode
    runs meanwhile); the warm-up gets no answer, so the check after it reads its own result, not a stale one."""
    import sys
    import threading
    import time

    import tests.hostile_validators  # noqa: F401

    marker = tmp_path / "imported"
    (tmp_path / "warm_probe_mod.py").write_text(f"open({str(marker)!r}, 'w').write('yes')\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # the spawned worker inherits sys.path
    capped.close()  # the pool's workers from earlier tests were spawned without it
    (tmp_path / "out.txt").write_text("x\n")
    got = {}

    def episode():  # an episode thread of its own: the warm-up reaches the pool's idle workers
        capped.prestart(["warm_probe_mod", "no_such_module_here"])  # a module that fails is skipped, not fatal
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        got["warm"] = marker.exists()
        got["check"] = run_check(_check("test.ok"), {"output": "out.txt"}, {}, tmp_path)
        capped.close()

    t = threading.Thread(target=episode)
    t.start()
    t.join(120)
    assert got["warm"], "the worker did not import the warm-up module before any check"
    assert got["check"].credit == 1.0 and "read 2 bytes" in got["check"].detail, got["check"].detail
    assert "warm_probe_mod" not in sys.modules  # imported in the worker, not in the harness


def test_validator_modules_names_the_track_module_only_for_worlds_with_product_checks():
    from benchmark.suite.loader import load_suite

    suite = load_suite()
    with_products = suite.worlds["histone.L2.differential.clean"]
    assert capped.validator_modules(with_products) == ["worlds.histone.solvers"]
    assert capped.validator_modules(suite.worlds["scrna.L1.integrity.clean"]) == []


def test_one_pool_of_workers_serves_every_harness_thread_and_outlives_the_thread_that_needed_it(tmp_path,
                                                                                               monkeypatch):
    """Issue 42: one worker per harness thread kept 12 alive at --concurrency 16. Sixteen threads' checks now share
    pool_size() workers (the cores, within the memory budget), and a worker started for a thread that has ended
    serves the next check (PR_SET_PDEATHSIG follows the pool's own spawning thread, not the episode's)."""
    import os
    import threading

    import tests.hostile_validators  # noqa: F401

    capped.close()
    monkeypatch.setattr(capped, "_pool", None)
    monkeypatch.setenv("BENCHMARK_GRADING_MEMORY_GB", "6")  # room for two workers' caps
    (tmp_path / "out.txt").write_text("x\n")
    size = capped.pool_size()
    assert 1 <= size <= 2
    results, peak = [], []

    def spawned() -> set[int]:  # this process's spawned children (other tests' solver pools included)
        return {k for k in _children(os.getpid()) if b"spawn_main" in _cmdline(k)}

    before = spawned()

    def episode():
        results.append(run_check(_check("test.ok"), {"output": "out.txt"}, {}, tmp_path))
        peak.append(len(spawned() - before))

    threads = [threading.Thread(target=episode) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(results) == 16 and all(r.credit == 1.0 for r in results), [r.detail for r in results]
    assert max(peak) <= size, (peak, size)
    workers = {p.proc.pid for p in capped._pool.idle}
    assert workers and len(workers) <= size
    again = run_check(_check("test.ok"), {"output": "out.txt"}, {}, tmp_path)  # every episode thread has ended
    assert again.credit == 1.0 and {p.proc.pid for p in capped._pool.idle} <= workers, again.detail
    capped.close()


def test_harness_threads_starting_workers_at_once_leave_this_process_environment_as_it_was():
    """Each harness thread starts its own capped worker (and a build its pinned solver pool) inside the pinned
    environment. When threads did so at the same time, the one that restored last could put back a pinned copy it
    had saved from another: the harness stayed "pinned" and, through an inherited variable, "in the worker", so
    later product checks ran uncapped in the harness (in CI a hostile validator then killed a pytest worker)."""
    import threading

    from benchmark.suite.freeze import pinned_pool
    from graders.numerics import numerics_pinned, saved_environment

    before = saved_environment()
    start = threading.Barrier(6)
    errors = []

    def harness_thread(i):
        try:
            start.wait(30)
            if i % 3 == 2:
                pinned_pool(1).shutdown()
            else:
                capped.prestart()
                capped.close()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    for _ in range(3):
        threads = [threading.Thread(target=harness_thread, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        assert saved_environment() == before
    assert not numerics_pinned() and not capped.in_worker()


def test_a_tar_product_is_refused_by_its_bytes_and_a_plain_file_named_as_an_archive_by_its_name(tmp_path):
    """Issue 40: a 10 kB `.tar` with a 100 GB sparse member, plain by its first bytes, was opened by pandas from its
    name (compression='infer') and inflated to MemoryError at the worker's cap after 25.7 s. A tar archive is read
    from its bytes ('ustar' at byte 257) and refused whatever its name; a file named as an archive or a compressed
    stream that its bytes are not is refused by name, so no reader infers a format from the name. Neither reaches the
    validator (here one that calls pandas.read_csv on the path)."""
    import io
    import tarfile

    import tests.hostile_validators  # noqa: F401 - registers test.ok

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        data = b"gene,lfc\nA,1.0\n" * 100
        info = tarfile.TarInfo("table.csv")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    for name in ("table.tar", "table.csv"):  # the archive under its own name and under a plain text name
        (tmp_path / name).write_bytes(buf.getvalue())
        assert compression_of(tmp_path / name) == "tar"
        r = run_check(_check("test.ok"), {"output": name}, {}, tmp_path)
        assert r.credit == 0.0 and "tar" in r.detail, (name, r.detail)
    for name in ("plain.tar", "plain.csv.gz", "plain.zip", "plain.tsv.bz2"):
        (tmp_path / name).write_text("gene,lfc\nA,1.0\n")
        r = run_check(_check("test.ok"), {"output": name}, {}, tmp_path)
        assert r.credit == 0.0 and "named as a" in r.detail and "plain" in r.detail, (name, r.detail)
    (tmp_path / "plain.csv").write_text("gene,lfc\nA,1.0\n")
    assert run_check(_check("test.ok"), {"output": "plain.csv"}, {}, tmp_path).credit == 1.0


def test_all_grading_workers_share_one_memory_budget(tmp_path, monkeypatch):
    """Issue 40: each concurrent worker had its own 3 GiB cap, so a high --concurrency could add up past the host's
    memory. Checks now read under one budget: with room for one worker's cap, a second harness thread's check waits
    for the first (here a validator that hangs until its deadline) instead of reading beside it."""
    import threading
    import time

    import tests.hostile_validators  # noqa: F401

    monkeypatch.setenv("BENCHMARK_GRADING_MEMORY_GB", "3")
    capped.close()
    monkeypatch.setattr(capped, "_pool", None)
    monkeypatch.setattr(capped, "WALL_CAP_S", 4.0)
    assert capped.budget_slots() == 1
    monkeypatch.setenv("BENCHMARK_GRADING_MEMORY_GB", "12")
    assert capped.budget_slots() == 4
    monkeypatch.setenv("BENCHMARK_GRADING_MEMORY_GB", "3")
    (tmp_path / "out.txt").write_text("x\n")
    done = {}

    def hang():
        done["hang"] = run_check(_check("test.hang"), {"output": "out.txt"}, {}, tmp_path)
        done["hang_t"] = time.monotonic()

    t = threading.Thread(target=hang)
    t.start()
    time.sleep(0.5)
    ok = run_check(_check("test.ok"), {"output": "out.txt"}, {}, tmp_path)
    finished = time.monotonic()
    t.join()
    assert ok.credit == 1.0 and "longer than 4 s" in done["hang"].detail
    assert finished >= done["hang_t"] - 0.05, "the second check read beside the first, past the budget"
