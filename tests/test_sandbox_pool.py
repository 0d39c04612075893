"""Issue 20: the on-disk cache of the seal's walk, and warm (pre-started) sandboxes handed out one per world."""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import pytest

from tests.helpers import burn

from sandbox import seal


# ---------------------------------------------------------------- the masked-paths cache

@pytest.fixture
def fake_env(tmp_path, monkeypatch):
    """A walk over a fake site-packages (and no /usr) with the cache in tmp_path."""
    site = tmp_path / "site-packages"
    (site / "pkg" / "tests" / "data").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("")
    (site / "pkg" / "ref.h5ad").write_bytes(b"x")
    monkeypatch.setenv("DISCERN_SANDBOX_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(seal, "_walk_roots", lambda: [site])
    walks: list[Path] = []
    real_walk = seal._walk

    def counting_walk(top, masked):
        walks.append(top)
        real_walk(top, masked)

    monkeypatch.setattr(seal, "_walk", counting_walk)
    return site, walks


def test_walk_is_cached_on_disk_and_reused(fake_env):
    site, walks = fake_env
    first = seal.walked_paths()
    assert set(first) == {site / "pkg" / "tests" / "data", site / "pkg" / "ref.h5ad"}
    assert walks == [site]
    files = list(seal.cache_dir().iterdir())
    assert len(files) == 1 and files[0].name.startswith("masked-") and files[0].suffix == ".json", files  # no temp left
    assert seal.walked_paths() == first
    assert walks == [site], "a matching cache is used without walking"


def test_installing_a_package_invalidates_the_cache(fake_env):
    site, walks = fake_env
    seal.walked_paths()
    new = site / "newpkg-1.0.dist-info"  # what pip adds next to the package
    new.mkdir()
    (site / "newpkg").mkdir()
    (site / "newpkg" / "genome.fa").write_text(">x\nACGT\n")
    got = seal.walked_paths()
    assert site / "newpkg" / "genome.fa" in got and len(walks) == 2
    assert seal.walked_paths() == got and len(walks) == 2, "the rewritten cache is used again"


@pytest.mark.parametrize("corrupt", [
    lambda t: "{ not json",
    lambda t: "",
    lambda t: json.dumps([1, 2]),
    lambda t: json.dumps({**json.loads(t), "version": 999}),
    lambda t: json.dumps({**json.loads(t), "key": "0" * 64}),
    lambda t: json.dumps({**json.loads(t), "paths": []}),  # digest no longer matches: a truncated list is not trusted
    lambda t: json.dumps({**json.loads(t), "paths": ["relative/path"]}),
    lambda t: t[: len(t) // 2],
])
def test_corrupt_or_stale_cache_is_recomputed_not_trusted(fake_env, corrupt):
    site, walks = fake_env
    want = seal.walked_paths()
    cache = next(seal.cache_dir().iterdir())
    cache.write_text(corrupt(cache.read_text()))
    assert seal.walked_paths() == want
    assert len(walks) == 2, "the bad cache was walked over again"
    assert seal.walked_paths() == want and len(walks) == 2, "and rewritten"


def test_unwritable_cache_still_masks(fake_env, monkeypatch, tmp_path):
    site, walks = fake_env
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("DISCERN_SANDBOX_CACHE", str(blocker / "cache"))
    assert site / "pkg" / "ref.h5ad" in seal.walked_paths()


def test_fingerprint_tracks_the_real_environment():
    a = seal.walk_fingerprint()
    assert a == seal.walk_fingerprint() and len(a) == 64
    roots = seal._walk_roots()
    assert Path("/usr") in roots and all(r.is_dir() for r in roots)
    assert os.path.realpath(roots[0]) == str(roots[0]), "site folders are walked once, resolved"


# ---------------------------------------------------------------- warm sandboxes (sandbox/pool.py)

import base64  # noqa: E402
import textwrap  # noqa: E402
import time  # noqa: E402

from sandbox import pool as pool_mod  # noqa: E402
from sandbox.bwrap import Limits, Sandbox  # noqa: E402
from sandbox.pool import POOL, WarmPool  # noqa: E402


def _world(root: Path, name: str, files: dict[str, str]) -> Path:
    d = root / name
    for rel, text in files.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)
    d.mkdir(parents=True, exist_ok=True)
    return d


def _warm(world: Path, limits: Limits | None = None, label: str = "task") -> Sandbox:
    assert POOL.wait_for(limits, world, label, timeout=90), POOL.last_error
    sb = Sandbox(world, limits or Limits(), label=label)
    sb.start()
    assert sb.warm, f"expected a pre-started sandbox ({POOL.stats}, {POOL.last_error})"
    return sb


_LIST = "import os; print(sorted(os.path.relpath(os.path.join(d, f), '/workspace') for d, _, fs in os.walk('/workspace') for f in fs))"

_PLANT = textwrap.dedent("""
    import os, sys, numpy
    secret = 'world-A'
    numpy.planted_by_a = True
    sys.modules['planted_by_a'] = sys
    os.environ['PLANTED_BY_A'] = '1'
    os.makedirs('out', exist_ok=True)
    open('out/a_result.txt', 'w').write('A')
    open('/tmp/a_tmp.txt', 'w').write('A')
    open('/dev/shm/a_shm', 'w').write('A')
    print(os.getpid(), os.getppid())
""")

_PROBE = textwrap.dedent("""
    import os, sys, numpy
    print(sorted(k for k in globals() if not k.startswith('__') and k not in ('os', 'sys', 'numpy')),
          hasattr(numpy, 'planted_by_a'), 'planted_by_a' in sys.modules, 'PLANTED_BY_A' in os.environ,
          sorted(os.listdir('/tmp')), sorted(os.listdir('/dev/shm')))
""")


def test_consecutive_worlds_on_warm_sandboxes_share_nothing(tmp_path):
    a_world = _world(tmp_path, "world_a", {"meta.json": '{"w": "A"}\n', "a_only/input.csv": "a,1\n"})
    b_world = _world(tmp_path, "world_b", {"meta.json": '{"w": "B"}\n', "b_only.txt": "b\n"})
    a = _warm(a_world)
    try:
        assert a.run_python(_LIST).stdout.strip() == "['a_only/input.csv', 'meta.json']"
        r = a.run_python(_PLANT)
        assert r.error is None, r.as_text()
        a_proc, a_kernel = a._proc, a._kernel_pid
    finally:
        a.close()
    assert a_proc.poll() is not None, "world A's sandbox is torn down, never returned to the pool"
    assert all(s._kernel_pid != a_kernel for s in POOL.ready())
    b = _warm(b_world)
    try:
        assert b._kernel_pid != a_kernel
        assert b.run_python(_LIST).stdout.strip() == "['b_only.txt', 'meta.json']", "B sees its own files only"
        assert b.run_python("print(open('meta.json').read())").stdout.strip() == '{"w": "B"}'
        r = b.run_python(_PROBE)
        assert r.error is None, r.as_text()
        got = r.stdout.strip()
        assert got.startswith("[] False False False"), got
        assert "a_tmp.txt" not in got and "a_shm" not in got, got
        assert "NameError" in (b.run_python("secret").error or "")
    finally:
        b.close()


def test_warm_sandbox_namespace_is_empty_and_preloads_are_imported(tmp_path):
    sb = _warm(_world(tmp_path, "world", {"meta.json": "{}\n"}))
    try:
        r = sb.run_python("import sys\nprint(sorted(k for k in globals() if k != 'sys'), 'numpy' in sys.modules, 'pandas' in sys.modules)")
        assert r.stdout.strip() == "['__builtins__', '__name__'] True True", r.as_text()
        assert sb.cells == 1 and sb.violations == [] and sb.restarts == 0
        r = sb.run_python("import time; t = time.perf_counter(); import numpy, pandas; print(time.perf_counter() - t < 0.05)")
        assert r.stdout.strip() == "True", r.as_text()
    finally:
        sb.close()


def test_concurrent_warm_and_cold_sandboxes_see_only_their_own_world(tmp_path):
    a_world = _world(tmp_path, "world_a", {"a.txt": "A\n"})
    b_world = _world(tmp_path, "world_b", {"b.txt": "B\n"})
    a = _warm(a_world)
    b = Sandbox(b_world)
    b.start()  # warm if the pool kept up, cold otherwise: the same either way
    try:
        assert a.uid != b.uid
        a.run_python("open('from_a.txt', 'w').write('A')")
        b.run_python("open('from_b.txt', 'w').write('B')")
        assert a.run_python(_LIST).stdout.strip() == "['a.txt', 'from_a.txt']"
        assert b.run_python(_LIST).stdout.strip() == "['b.txt', 'from_b.txt']"
    finally:
        a.close()
        b.close()


def _ready_blank(world: Path) -> Sandbox:
    key = POOL.prewarm(Limits(), world, "task")
    assert POOL.wait_ready(key, 90), POOL.last_error
    blanks = POOL.ready(key)
    assert blanks
    return blanks[0]


def test_blanks_in_the_pool_hold_no_world(tmp_path):
    blank = _ready_blank(tmp_path / "world")
    assert blank.world_dir is None and not blank.warm
    wfd = blank._open_workspace()
    assert wfd is not None
    try:
        assert os.listdir(wfd) == []
    finally:
        os.close(wfd)


def test_a_blank_whose_workspace_is_not_empty_is_never_handed_out(tmp_path):
    world = _world(tmp_path, "world", {"mine.txt": "mine\n"})
    blank = _ready_blank(world)
    blank._put([{"path": "foreign.txt", "data": base64.b64encode(b"not this world's").decode()}])  # as if from another world
    while POOL.ready():  # only the planted blank may be left to take
        if POOL.ready()[0] is blank:
            break
        POOL.ready()[0].close()
        time.sleep(0.1)
    sb = Sandbox(world)
    sb.start()
    try:
        assert not sb.warm and "not empty" in (POOL.last_error or ""), POOL.last_error
        assert sb.run_python(_LIST).stdout.strip() == "['mine.txt']"
        assert blank._proc is None or blank._proc.poll() is not None, "the planted blank was closed"
    finally:
        sb.close()


def test_a_blank_started_with_other_masks_is_not_handed_out(tmp_path, monkeypatch):
    from sandbox import seal

    world = _world(tmp_path, "world", {"x.txt": "x\n"})
    _ready_blank(world)
    licence = next(p for p in sorted(Path("/usr/share/common-licenses").glob("*")) if p.is_file() and p.stat().st_size > 0) \
        if Path("/usr/share/common-licenses").is_dir() else None
    if licence is None:
        pytest.skip("no small /usr file to mask here")
    real = seal.masked_paths()
    monkeypatch.setattr(seal, "masked_paths", lambda: real + (licence,))
    discarded = POOL.stats["discarded"]
    sb = Sandbox(world)
    sb.start()
    try:
        assert not sb.warm and POOL.stats["discarded"] > discarded
        r = sb.run_python(f"try:\n    print(len(open({str(licence)!r}).read()))\nexcept OSError:\n    print(0)")
        assert r.stdout.strip() == "0", f"the new mask holds: {r.as_text()}"
        assert licence.stat().st_size > 0
    finally:
        sb.close()
        monkeypatch.undo()
        POOL.drain()  # blanks built meanwhile carry the extra mask


def test_restart_of_a_warm_sandbox_is_cold_with_its_own_files(tmp_path):
    sb = _warm(_world(tmp_path, "world", {"meta.json": "{}\n"}), Limits(cell_wall_s=3))
    try:
        sb.run_python("open('scratch.txt', 'w').write('x'); y = 1")
        r = sb.run_python("import os; os._exit(3)")
        assert r.restarted and r.violation and r.violation.kind == "crash", r.as_text()
        assert sb.run_python(_LIST).stdout.strip() == "['meta.json']"
        assert "NameError" in (sb.run_python("y").error or "")
    finally:
        sb.close()


def test_preload_follows_the_track_and_the_cpu_budget():
    scrna = pool_mod.preload_for(Path("/x/scrna.L1.integrity.clean"), "scrna.L1.integrity.clean", Limits())
    assert scrna[:2] == ("numpy", "pandas") and "scanpy" in scrna and "sklearn" in scrna and "scikit-learn" not in scrna
    assert pool_mod.preload_for(Path("/tmp/world"), "task", Limits()) == ("numpy", "pandas")
    assert pool_mod.preload_for(Path("/x/scrna.L1.a"), "scrna.L1.a", Limits(cpu_seconds=5)) == ()
    a = pool_mod.pool_key(Limits(), ("numpy",))
    assert a == pool_mod.pool_key(Limits(cell_wall_s=3, task_wall_s=9), ("numpy",)), "host-side clocks do not split keys"
    assert a != pool_mod.pool_key(Limits(memory_bytes=1 << 30), ("numpy",))


def test_every_module_a_blank_preloads_imports_and_the_usual_submodules_come_with_their_package():
    """A preload that cannot import is skipped in silence inside the blank, so a wrong name (histone's `macs3`, a
    module called MACS3) costs every world of the track the import it was meant to save: every track's list must
    import here, and scipy brings scipy.stats, which most tracks' analyses import (0.7 CPU-s)."""
    import importlib.util

    tracks = sorted(p.parent.name for p in (pool_mod.REPO_ROOT / "worlds").glob("*/track.yaml"))
    assert len(tracks) >= 5
    missing = {t: m for t in tracks for m in pool_mod.track_packages(t) if importlib.util.find_spec(m) is None}
    assert missing == {}
    assert "MACS3" in pool_mod.track_packages("histone") and "scipy.stats" in pool_mod.track_packages("histone")
    assert {"pydeseq2.dds", "pydeseq2.ds"} <= set(pool_mod.track_packages("bulkrna"))


def test_a_blank_started_before_the_numba_seed_existed_is_not_handed_out_after(tmp_path, monkeypatch):
    """A blank copies the seed when it starts: once a seed is built (or replaced), blanks made without it have
    another key, so the next world does not compile what the seed holds."""
    from sandbox.numba_seed import seed_dir

    monkeypatch.setenv("DISCERN_SANDBOX_CACHE", str(tmp_path / "cache"))
    before = pool_mod.pool_key(Limits(), ("numpy",))
    seed_dir().mkdir(parents=True)
    after = pool_mod.pool_key(Limits(), ("numpy",))
    assert before != after and dict(after)["numba_seed"] == seed_dir().name and dict(before)["numba_seed"] is None


def test_pool_off_starts_cold(tmp_path, monkeypatch):
    monkeypatch.setenv("DISCERN_SANDBOX_POOL", "0")
    with Sandbox(_world(tmp_path, "world", {"a": "1"})) as sb:
        assert not sb.warm
        assert sb.run_python(_LIST).stdout.strip() == "['a']"
    with Sandbox(_world(tmp_path, "world2", {"b": "1"}), pool=False) as sb:
        assert not sb.warm


def test_shutdown_closes_every_blank(tmp_path):
    p = WarmPool()
    key = p.prewarm(Limits(), tmp_path / "world", "task")
    try:
        assert p.wait_ready(key, 90), p.last_error
        blanks = p.ready(key)
        procs = [b._proc for b in blanks]
        uids = [b.uid for b in blanks]
    finally:
        p.shutdown()
    assert procs and all(pr.poll() is not None for pr in procs)
    assert p.take(key, ()) is None
    if os.geteuid() == 0:
        from sandbox.bwrap import _pids_of_uid, _state

        time.sleep(0.2)
        assert not [q for u in uids for q in _pids_of_uid(u) if _state(q) not in ("Z", "X", None)]


def test_warm_hand_out_copies_big_empty_and_nested_files_exactly(tmp_path):
    import hashlib

    world = _world(tmp_path, "world", {"a/b/c/deep.txt": "deep\n", "empty.txt": ""})
    (world / "empty_dir").mkdir()
    big = os.urandom(1 << 20) * 19  # 19 MiB: three `put` requests, the file split across them
    (world / "a" / "big.bin").write_bytes(big)
    sb = _warm(world)
    try:
        r = sb.run_python(textwrap.dedent("""
            import hashlib, os, stat
            for d, dirs, fs in sorted(os.walk('.')):
                for name in sorted(dirs + fs):
                    p = os.path.join(d, name)
                    st = os.stat(p)
                    h = hashlib.sha256(open(p, 'rb').read()).hexdigest()[:16] if os.path.isfile(p) else '-'
                    print(p, oct(stat.S_IMODE(st.st_mode)), st.st_uid == os.getuid(), st.st_size if os.path.isfile(p) else '-', h)
        """))
        assert r.error is None, r.as_text()
        rows = {ln.split()[0]: ln.split()[1:] for ln in r.stdout.strip().splitlines()}
        assert rows["./a/big.bin"] == ["0o644", "True", str(len(big)), hashlib.sha256(big).hexdigest()[:16]]
        assert rows["./empty.txt"][:3] == ["0o644", "True", "0"] and rows["./a/b/c/deep.txt"][2] == "5"
        assert rows["./empty_dir"][:2] == ["0o755", "True"] and rows["./a/b"][:2] == ["0o755", "True"]
        assert set(rows) == {"./a", "./a/b", "./a/b/c", "./a/b/c/deep.txt", "./a/big.bin", "./empty.txt", "./empty_dir"}
    finally:
        sb.close()
    with Sandbox(world, pool=False) as cold:  # the same tree as bwrap's own --dir/--file copy
        r2 = cold.run_python("import os; print(sorted(os.path.join(d, n) for d, ds, fs in os.walk('.') for n in ds + fs))")
    assert r2.stdout.strip() == str(sorted(rows)), r2.as_text()


@contextlib.contextmanager
def _pool_on_busy_cores(monkeypatch, starve_s: float, seconds: float = 30.0):
    """A fresh pool while every core runs a busy loop for `seconds`; yields (pool, burners)."""
    monkeypatch.setattr(pool_mod, "STARVE_S", starve_s)
    burners = burn(seconds)
    p = WarmPool()
    try:
        time.sleep(0.3)
        yield p, burners
    finally:
        for b in burners:
            b.kill()
        p.shutdown()


def test_no_blank_is_built_while_worlds_keep_every_core_busy(tmp_path, monkeypatch):
    """A blank built on busy cores saves no time and wastes its imports: the builder waits for an idle core (or
    STARVE_S), then builds."""
    with _pool_on_busy_cores(monkeypatch, starve_s=60.0, seconds=3.0) as (p, burners):
        assert pool_mod.idle_cores(0.5) < pool_mod.IDLE_MIN
        key = p.prewarm(Limits(), tmp_path / "world", "task")
        time.sleep(1.5)
        assert p.stats["deferred"] >= 1 and p.stats["built"] == 0 and not p.ready(key)
        for b in burners:
            b.wait()
        assert p.wait_ready(key, 90), p.last_error


def test_a_blank_wanted_for_starve_s_is_built_on_a_busy_machine_too(tmp_path, monkeypatch):
    with _pool_on_busy_cores(monkeypatch, starve_s=1.0) as (p, burners):
        key = p.prewarm(Limits(), tmp_path / "world", "task")
        deadline = time.monotonic() + 25
        while not p.ready(key) and time.monotonic() < deadline:  # polled: a caller in wait_ready gets one at once
            time.sleep(0.2)
        assert p.ready(key), p.last_error
        assert p.stats["deferred"] >= 1 and all(b.poll() is None for b in burners), "built while every core was busy"


def test_a_caller_waiting_for_a_blank_gets_one_on_a_busy_machine(tmp_path, monkeypatch):
    with _pool_on_busy_cores(monkeypatch, starve_s=60.0) as (p, burners):
        key = p.prewarm(Limits(), tmp_path / "world", "task")
        assert p.wait_ready(key, 25), p.last_error
        assert all(b.poll() is None for b in burners), "built while every core was busy"


def test_no_blank_is_built_beyond_the_sandboxes_still_to_come(tmp_path):
    """A run says how many sandboxes it will start (`expect`): once the last has started, the pool builds nothing
    more (a one-world run used to build a blank during its episode and kill it at exit), and a blank being built
    then is killed rather than finished for nobody. Unknown (None) again, it keeps a blank per live sandbox."""
    p = WarmPool()
    try:
        p.expect(1)
        key = p.prewarm(Limits(), tmp_path / "world", "task")
        p.started(key, Limits())  # the run's only world started (cold): nothing more to come
        time.sleep(3.0)
        assert not p.ready(key) and p._building_sb is None, "a blank was built (or kept building) for no world"
        p.expect(None)
        assert p.wait_ready(key, 90), p.last_error
    finally:
        p.shutdown()


def test_the_last_sandbox_starting_while_the_builder_samples_the_cores_stops_the_build(tmp_path):
    """The builder picks a key, then samples the cores (`_may_build`, a quarter second) before it makes the blank.
    The run's last sandbox starting in that window found no blank to kill, and the builder went on to build one for
    nobody (a flaky failure of the test above under load); the builder now looks again as it starts the build."""
    p = WarmPool()
    key = pool_mod.pool_key(Limits(), pool_mod.preload_for(tmp_path / "world", "task", Limits()))
    sampled = []

    def may_build():  # the run's only world starts while the cores are being sampled
        p.started(key, Limits())
        sampled.append(1)
        return True

    p._may_build = may_build
    try:
        p.expect(1)
        assert p.prewarm(Limits(), tmp_path / "world", "task") == key
        deadline = time.monotonic() + 60
        while (not sampled or p._building is not None) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sampled and p._building is None
        assert not p.ready(key) and p.stats["built"] == 0, "a blank was built for no world"
    finally:
        p.shutdown()
