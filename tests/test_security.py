"""Security and fault probes on the REAL sandbox (issue 11 items 1, 4, 5; issue 10 item 5).

Each test is an attack or a fault an agent (or a crash) can cause; each failed on the sandbox before this suite.
"""
from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from benchmark.suite.loader import REPO_ROOT
from sandbox.bwrap import MAGIC, Limits, Sandbox, _pids_of_uid, _state

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="uid leases, cgroups and the neutral /opt tree need root")
SECRET = "sk-test-SECRET-4f1c9e"


def _live(uid: int, wait_s: float = 5.0) -> list[int]:
    """Live (not zombie) processes of uid, after giving the host init a moment to reap."""
    deadline = time.monotonic() + wait_s
    while True:
        live = [p for p in _pids_of_uid(uid) if _state(p) not in ("Z", "X", None)]
        if not live or time.monotonic() > deadline:
            return live
        time.sleep(0.1)


@pytest.fixture(autouse=True)
def _warm_pool():
    """Let the warm pool (sandbox/pool.py) catch up, so that most sandboxes here are pre-started ones handed to this
    test's world: every check must hold for warm sandboxes as for cold ones (the first and custom-limit ones)."""
    from sandbox.pool import POOL

    POOL.wait_for(timeout=60)
    yield


@pytest.fixture
def world(tmp_path) -> Path:
    d = tmp_path / "world"
    (d / "alignments").mkdir(parents=True)
    (d / "meta.json").write_text('{"mark": "H3K27me3"}\n')
    (d / "alignments" / "chip.bam").write_bytes(b"BAM\1")
    return d


def _tree_bytes(root: Path) -> bytes:
    out = b""
    for p in sorted(root.rglob("*")):
        assert not p.is_symlink(), f"{p} is a symlink in the collected tree"
        if p.is_file():
            out += p.read_bytes()
    return out


def _golden() -> Path:
    p = REPO_ROOT / "worlds" / "scrna" / "L1" / "integrity" / "clean.golden.json"
    return p if p.exists() else sorted(REPO_ROOT.glob("worlds/*/L*/*/*.golden.json"))[0]


# ---------------------------------------------------------------- 1. the host never follows what the agent made

def test_collect_never_follows_planted_links(world, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    golden = _golden()
    with Sandbox(world) as sb:
        r = sb.run_python(textwrap.dedent(f"""
            import os
            for i, target in enumerate(['/proc/self/environ', '/etc/passwd', {str(golden)!r}, '/proc/1/environ',
                                        '../../proc/self/environ', '/root', '/etc']):
                os.symlink(target, f'link{{i}}')
            os.makedirs('out', exist_ok=True)
            os.symlink('/proc/self/environ', 'out/environ.txt')
            open('flagged_barcodes.txt', 'w').write('AAAC-1\\n')
            open('out/genes.csv', 'w').write('g,1\\n')
            print('planted')
        """))
        assert r.stdout.strip() == "planted", r.as_text()
        got = sb.collect(tmp_path / "artifacts")
    assert sorted(got) == ["flagged_barcodes.txt", "out/genes.csv"], (got, sb.collect_log)
    data = _tree_bytes(tmp_path / "artifacts")
    assert SECRET.encode() not in data
    assert b"root:x:0" not in data
    assert golden.read_bytes()[:200] not in data
    assert any("symlink" in line for line in sb.collect_log)


def test_collect_skips_hardlinks_fifos_sockets_devices_and_caps(world, tmp_path):
    with Sandbox(world) as sb:
        r = sb.run_python(textwrap.dedent("""
            import os, socket, stat
            open('a.txt', 'w').write('a\\n'); os.link('a.txt', 'a_hard.txt')
            os.mkfifo('pipe')
            s = socket.socket(socket.AF_UNIX); s.bind('sock')
            try:
                os.mknod('null', stat.S_IFCHR | 0o666, os.makedev(1, 3)); print('mknod ok')
            except OSError as exc:
                print('mknod', exc.errno)
            open('big.bin', 'wb').write(b'0' * (3 << 20))
            for i in range(6):
                open(f'f{i}.txt', 'w').write(str(i))
            open('meta.json', 'w').write('{"mark": "edited"}\\n')  # a changed input is a work product
        """))
        assert "mknod ok" not in r.stdout, "device nodes must be impossible to create"
        got = sb.collect(tmp_path / "a1", max_bytes=2 << 20)
        assert "a.txt" not in got and "a_hard.txt" not in got and "pipe" not in got and "sock" not in got
        assert "big.bin" not in got and "alignments/chip.bam" not in got
        assert set(got) == {"meta.json", *(f"f{i}.txt" for i in range(6))}, (got, sb.collect_log)
        few = sb.collect(tmp_path / "a2", max_files=3)
        assert len(few) == 3
        assert not any(p.is_file() and p.stat().st_size == 3 << 20 for p in (tmp_path / "a1").rglob("*"))


def test_tool_caches_are_not_collected_as_work_products(world, tmp_path):
    """matplotlib and fontconfig write caches under $XDG_CACHE_HOME/$MPLCONFIGDIR; were they in /workspace, every
    plotting run would hand binary caches in as the agent's products (and gaming agents could not replay them)."""
    with Sandbox(world) as sb:
        r = sb.run_python("import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.savefig('fig.png'); print('ok')")
        assert "ok" in r.stdout, r.stderr
        assert sb.collect(tmp_path / "a") == ["fig.png"], sb.collect_log


# ---------------------------------------------------------------- no host path inside

@needs_root
def test_host_paths_are_invisible_and_tools_still_run(world):
    venv = str(Path(sys.prefix).resolve())
    leaks = [str(REPO_ROOT), venv, "/root", str(Path(tempfile.gettempdir()) / "benchmark-sandbox")]
    with Sandbox(world) as sb:
        r = sb.run_python(textwrap.dedent(f"""
            found = []
            for p in ('/proc/1/cmdline', '/proc/self/mountinfo', '/proc/self/environ', '/proc/1/environ',
                      '/proc/self/cmdline', '/proc/1/mountinfo'):
                try:
                    text = open(p, 'rb').read().decode(errors='replace')
                except OSError:
                    continue
                found += [(p, leak, text[max(0, text.find(leak) - 200):text.find(leak) + 200]) for leak in {leaks!r} if leak in text]
            print('leaks', found)
        """))
        assert r.stdout.strip() == "leaks []", r.as_text()
        r = sb.run_python(textwrap.dedent("""
            import subprocess, sys
            import scanpy, pydeseq2, anndata, pysam, pybedtools
            for cmd in (['macs3', '--version'], ['samtools', '--version'], ['bedtools', '--version']):
                out = subprocess.run(cmd, capture_output=True, text=True, errors='replace')
                print(cmd[0], out.returncode, (out.stdout + out.stderr).split()[:2])
            print(sys.prefix, sys.executable)
        """))
        assert r.error is None, r.as_text()
        assert "macs3 0" in r.stdout and "samtools 0" in r.stdout and "bedtools 0" in r.stdout, r.as_text()
        assert "/opt/venv /opt/venv/bin/python" in r.stdout


@needs_root
def test_no_file_under_the_sandboxs_venv_names_the_host_venv_or_the_clone(world):
    """Issue 40: .pyc files record their source path at compile time, activate scripts and an editable install's
    direct_url.json name the clone; none of them may tell agent code where the venv or the repository lives."""
    venv = Path(sys.prefix).resolve()
    if venv == Path(sys.base_prefix).resolve():
        pytest.skip("not in a venv")
    from sandbox.neutral import naming_files
    assert naming_files(venv) == [], "run `python -m sandbox.neutral` (scripts/setup.sh does)"
    needles = sorted({str(venv), str(REPO_ROOT)})
    with Sandbox(world) as sb:
        r = sb.run_python(textwrap.dedent(f"""
            import os
            needles = [n.encode() for n in {needles!r}]
            hits, n = [], 0
            for dp, dn, fn in os.walk('/opt/venv'):
                for f in fn:
                    p = os.path.join(dp, f)
                    if os.path.islink(p):
                        continue
                    try:
                        b = open(p, 'rb').read()
                    except OSError:
                        continue
                    n += 1
                    hits += [p for x in needles if x in b]
            print('files', n, 'hits', hits[:10])
        """))
    assert r.error is None, r.as_text()
    assert "hits []" in r.stdout and int(r.stdout.split()[1]) > 1000, r.as_text()


# ---------------------------------------------------------------- 2. the kernel channel

def _forge(payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    return MAGIC + struct.pack(">Q", len(body)) + body


_REACH = textwrap.dedent("""
    import os, stat, sys, json, struct
    MAGIC = MAGIC_BYTES
    def targets():
        # every descriptor this process holds, and every one it can reopen through /proc (init, parent, itself)
        fds = []
        for fd in range(0, 256):
            try:
                os.fstat(fd); fds.append((fd, None))
            except OSError:
                pass
        for pid in ('1', str(os.getppid()), 'self'):
            try:
                names = os.listdir(f'/proc/{pid}/fd')
            except OSError:
                continue
            for n in names:
                try:
                    fds.append((os.open(f'/proc/{pid}/fd/{n}', os.O_WRONLY | os.O_NONBLOCK), f'/proc/{pid}/fd/{n}'))
                except OSError:
                    pass
        return fds
    def live_nonce():
        # the nonce of this cell: in the kernel's frame (the single-process kernel) or the supervisor's memory
        f = sys._getframe()
        while f is not None:
            if 'nonce' in f.f_locals and isinstance(f.f_locals['nonce'], str):
                return f.f_locals['nonce']
            f = f.f_back
        try:
            with open(f'/proc/{os.getppid()}/mem', 'rb') as fh:
                return 'mem-readable'
        except OSError:
            return 'guess'
    def forge(payload):
        body = json.dumps(payload).encode()
        data = MAGIC + struct.pack('>Q', len(body)) + body
        hit = 0
        for fd, path in targets():
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode):  # not the cell's own stdout/stderr files
                    os.write(fd, data); hit += 1
            except OSError:
                pass
        return hit
""")


def _forger(body: str) -> str:
    return _REACH.replace("MAGIC_BYTES", repr(MAGIC)) + textwrap.dedent(body)


def test_forged_reply_is_caught_on_the_cell_it_forges(world):
    """Probe: agent code read the live nonce from the kernel's frame and wrote a reply with it; the host took the
    forgery as the cell's result and flagged only the next cell, so a forged LAST cell left no trace. Now the reply
    channel is out of the agent's reach: the cell's real output comes back, whatever the cell forged."""
    with Sandbox(world) as sb:
        r = sb.run_python(_forger("""
            n = forge({'nonce': live_nonce(), 'stdout': 'SELF-FORGED', 'stderr': '', 'error': None,
                       'truncated': False, 'killed': 0})
            print('real', n > 0)
        """))
        assert "FORGED" not in r.stdout and r.stdout.strip() == "real True", r.as_text()
        assert r.error is None and not r.restarted, r.as_text()


def test_forged_end_of_cell_is_flagged_on_that_cell(world):
    """The worker's only word to the supervisor is "my cell ended". Agent code that forges it mid-cell is stopped
    right there, and the reply of that very cell says so."""
    with Sandbox(world) as sb:
        r = sb.run_python(textwrap.dedent("""
            import sys, json, struct, os, time
            f = sys._getframe().f_back
            body = json.dumps({'seq': f.f_locals['seq'], 'error': None}).encode()
            os.write(f.f_locals['done_fd'], MAGIC + struct.pack('>Q', len(body)) + body)
            time.sleep(3)
            print('after-forged-end')
        """).replace("MAGIC", repr(MAGIC)))
        assert "after-forged-end" not in r.stdout, r.as_text()
        assert r.violation and r.violation.kind == "forbidden" and "forged" in r.violation.detail, r.as_text()
        r2 = sb.run_python("print('next')")
        assert r2.stdout.strip().endswith("next"), r2.as_text()


def test_forged_frames_are_ignored_and_cells_stay_in_step(world):
    with Sandbox(world) as sb:
        # garbage, a frame with a guessed nonce and a forged header announcing a long body, on everything reachable
        r1 = sb.run_python(_forger("""
            forge({'nonce': 'guess', 'stdout': 'FORGED', 'stderr': '', 'error': None, 'truncated': False})
            for fd, path in targets():
                try:
                    if stat.S_ISFIFO(os.fstat(fd).st_mode):
                        os.write(fd, b'{"stdout": "FORGED"}\\n'); os.write(fd, MAGIC + struct.pack('>Q', 4 << 20))
                except OSError:
                    pass
            print('real1')
        """))
        assert r1.stdout.strip() == "real1" and not r1.restarted, r1.as_text()
        for i in range(2, 5):
            r = sb.run_python(f"print('real{i}')")
            assert r.stdout.strip() == f"real{i}", r.as_text()


def test_threads_outliving_their_cell_are_paused_and_flagged(world, tmp_path):
    """Probe: a thread started by a cell kept running between cells and during collection. Now it is stopped at
    its cell's end (and counted in the cell's result) until the next cell; nothing runs while the host collects."""
    with Sandbox(world) as sb:
        r = sb.run_python(textwrap.dedent("""
            import threading, time, os
            stamps = []
            def tick():
                while True:
                    stamps.append(time.monotonic())
                    with open('/workspace/ticks.txt', 'a') as fh:
                        fh.write('t\\n')
                    time.sleep(0.01)
            threading.Thread(target=tick, daemon=True).start()
            time.sleep(0.3)
            print('started')
        """))
        first = r
        assert "started" in r.stdout, r.as_text()
        n0 = (sb.collect(tmp_path / "c0") and (tmp_path / "c0" / "ticks.txt").read_text().count("t"))
        time.sleep(1.5)
        n1 = (sb.collect(tmp_path / "c1") and (tmp_path / "c1" / "ticks.txt").read_text().count("t"))
        assert n1 == n0, f"the thread wrote {n1 - n0} lines between cells"
        # the resumed thread stamps again once it is scheduled (not before this cell's first line on a loaded machine)
        r = sb.run_python("n = len(stamps)\nwhile len(stamps) == n: time.sleep(0.01)\n"
                          "gaps = [b - a for a, b in zip(stamps, stamps[1:])]; print(round(max(gaps), 1))")
        assert float(r.stdout.split()[-1]) >= 1.4, r.as_text()
        assert getattr(first, "threads", 0) >= 1 and "paused" in first.as_text(), first.as_text()


def test_cpu_of_a_sandbox_is_capped_by_its_cgroup(world):
    """Probe: no CPU cgroup bounded a sandbox, only RLIMIT_CPU per process. Now `Limits.cpus` caps its CPU rate."""
    if not ROOT:
        pytest.skip("cgroups need root")
    with Sandbox(world, Limits(cpus=0.25)) as sb:
        if sb.cgroup_mode is None or not sb.cpu_capped:
            pytest.skip("no writable cpu cgroup here")
        r = sb.run_python(textwrap.dedent("""
            import time
            c0, t0 = time.process_time(), time.monotonic()
            while time.monotonic() - t0 < 2:
                pass
            print(round((time.process_time() - c0) / (time.monotonic() - t0), 2))
        """))
        assert float(r.stdout.split()[-1]) < 0.4, r.as_text()


def _rss_hwm_kb() -> tuple[int, int]:
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def test_flood_on_channel_and_stdout_keeps_host_bounded(world):
    with Sandbox(world, Limits(cell_wall_s=120)) as sb:
        sb.run_python("print('warm')")
        rss0, hwm0 = _rss_hwm_kb()
        t0 = time.monotonic()
        r = sb.run_python(textwrap.dedent("""
            import os, stat, sys
            chunk = b'x' * (1 << 20)
            for fd in range(3, 64):  # every pipe we may write to: the reply channel is one of them
                try:
                    if stat.S_ISFIFO(os.fstat(fd).st_mode):
                        for _ in range(600):
                            os.write(fd, chunk)
                except OSError:
                    pass
            for _ in range(600):
                sys.stdout.buffer.write(chunk)
            sys.stdout.flush()
            print('done')
        """))
        wall = time.monotonic() - t0
        rss1, hwm1 = _rss_hwm_kb()
        assert r.stdout.rstrip().endswith("done") and r.truncated, r.as_text()[:500]
        assert len(r.stdout) < 20000
        assert any(v.kind == "forbidden" for v in sb.violations)
        assert (hwm1 - hwm0) < 100 * 1024, f"host peak RSS grew by {(hwm1 - hwm0) / 1024:.0f} MB"
        assert sb.run_python("print('next')").stdout.strip() == "next"
    print(f"1.2 GB flood: {wall:.1f} s, host RSS {rss0 / 1024:.0f}->{rss1 / 1024:.0f} MB, peak +{(hwm1 - hwm0) / 1024:.1f} MB")


def test_oversized_frames_are_dropped_and_the_host_stays_bounded(world):
    with Sandbox(world) as sb:
        r = sb.run_python(_forger("""
            for fd, path in targets():
                try:
                    if stat.S_ISFIFO(os.fstat(fd).st_mode):
                        os.write(fd, MAGIC + struct.pack('>Q', 1 << 40))
                except OSError:
                    pass
            print('real')
        """))
        assert r.stdout.strip() == "real" and not r.restarted, r.as_text()
        assert sb.run_python("print('fresh')").stdout.strip() == "fresh"


# ---------------------------------------------------------------- 3. isolation between sandboxes

_CHILD = """
import sys, time
from pathlib import Path
from sandbox.bwrap import Sandbox
sb = Sandbox(Path(sys.argv[1])); sb.start()
print(sb.uid, sb._host_tmp, flush=True)
if sys.argv[2] == 'die':
    import os, signal; os.kill(os.getpid(), signal.SIGKILL)
time.sleep(float(sys.argv[2]))
sb.close()
"""


@needs_root
def test_uids_are_distinct_across_sandboxes_and_processes(world):
    with Sandbox(world) as a, Sandbox(world) as b:
        assert a.uid != b.uid
        p = subprocess.Popen([sys.executable, "-c", _CHILD, str(world), "3"], stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
        line = p.stdout.readline()
        p.wait(timeout=60)
        other = int(line.split()[0])
        assert other not in (a.uid, b.uid)
        assert a.run_python("import os; print(os.getuid())").stdout.strip() == str(a.uid)


@needs_root
def test_fork_bomb_in_one_sandbox_does_not_stop_another(world):
    bomb = textwrap.dedent("""
        import os, time
        t = time.time()
        while time.time() - t < 12:
            try:
                if os.fork() == 0:
                    time.sleep(60); os._exit(0)
            except OSError:
                time.sleep(0.01)
    """)
    lim = Limits(processes=64, cell_wall_s=30)  # one campaign: every sandbox gets the same limits
    with Sandbox(world, lim) as a:
        uid = a.uid
        th = threading.Thread(target=a.run_python, args=(bomb,))
        th.start()
        time.sleep(3)
        assert len(_pids_of_uid(a.uid)) >= 32, "the bomb is running"
        t0 = time.monotonic()
        with Sandbox(world, lim) as b:
            r = b.run_python("import subprocess; print(subprocess.run(['echo', 'ok'], capture_output=True, text=True).stdout.strip())")
            assert r.stdout.strip() == "ok", r.as_text()
        assert time.monotonic() - t0 < 30
        th.join()
    assert not _live(uid)


def _cgroups_writable() -> bool:
    v2 = Path("/sys/fs/cgroup/cgroup.controllers")
    if v2.exists():
        return "memory" in v2.read_text() and os.access("/sys/fs/cgroup", os.W_OK)
    return os.access("/sys/fs/cgroup/memory", os.W_OK) and os.access("/sys/fs/cgroup/pids", os.W_OK)


@needs_root
def test_total_memory_of_a_sandbox_is_capped(world):
    hog = "import time; x = b'x' * (1 << 30); time.sleep(4); print('survived')"
    with Sandbox(world, Limits(memory_bytes=2 << 30, cell_wall_s=60)) as sb:
        r = sb.run_python(textwrap.dedent(f"""
            import subprocess, sys
            ps = [subprocess.Popen([sys.executable, '-c', {hog!r}]) for _ in range(3)]
            print([p.wait() for p in ps])
        """))
        if not _cgroups_writable():  # documented fallback: per-process RLIMIT_AS and per-uid RLIMIT_NPROC only
            r = sb.run_python("import resource; print(resource.getrlimit(resource.RLIMIT_AS)[0], resource.getrlimit(resource.RLIMIT_NPROC)[0])")
            assert r.stdout.split() == [str(sb.limits.address_space), str(sb.limits.processes)]
            pytest.skip("no writable cgroup here: the fallback bounds memory by address_space x processes")
        codes = json.loads(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else []
        assert codes and codes.count(0) <= 1 and -9 in codes, r.as_text()
        assert any(v.kind == "memory" for v in sb.violations), sb.violations
        assert sb.run_python("print('alive')").stdout.strip() == "alive"


def test_every_writable_tmpfs_is_capped(world):
    lim = Limits(tmp_bytes=16 << 20, shm_bytes=16 << 20, workspace_bytes=32 << 20)
    with Sandbox(world, lim) as sb:
        r = sb.run_python(textwrap.dedent("""
            import errno, os
            res = {}
            for path in ('/tmp/fill', '/dev/shm/fill', '/workspace/fill', '/fill', '/dev/fill', '/opt/fill'):
                try:
                    with open(path, 'wb') as fh:
                        for _ in range(64):
                            fh.write(b'0' * (1 << 20))
                    res[path] = 'ok'
                except OSError as exc:
                    res[path] = errno.errorcode[exc.errno]
                finally:
                    try:
                        os.unlink(path)
                    except OSError:
                        pass
            print(res)
        """))
        res = eval(r.stdout.strip())  # noqa: S307 - our own cell's dict literal
        assert res["/tmp/fill"] == res["/dev/shm/fill"] == res["/workspace/fill"] == "ENOSPC", res
        assert res["/fill"] in ("EROFS", "ENOSPC") and res["/dev/fill"] in ("EROFS", "ENOSPC"), res
        assert res["/opt/fill"] in ("EROFS", "EACCES", "ENOSPC"), res


def test_background_processes_are_killed_after_each_cell(world):
    with Sandbox(world) as sb:
        r = sb.run_python(textwrap.dedent("""
            import subprocess, sys
            p = subprocess.Popen([sys.executable, '-c', 'while True: pass'])
            subprocess.run(['sh', '-c', 'while :; do :; done >/dev/null 2>&1 &'])
            print('spawned')
        """))
        assert r.stdout.strip() == "spawned", r.as_text()
        r2 = sb.run_python("import os; print(p.poll() is not None, sorted(int(x) for x in os.listdir('/proc') if x.isdigit()) == sorted({1, os.getppid(), os.getpid()}))")
        assert r2.stdout.split() == ["True", "True"], r2.as_text()
        assert r.killed >= 2 and "killed" in r.as_text()
        if ROOT:
            keep = {sb._proc.pid, sb._child_pid, sb._kernel_pid, sb._worker_pid}
            assert set(_pids_of_uid(sb.uid)) <= keep


@needs_root
def test_leftovers_of_a_killed_run_are_cleaned_at_next_start(world):
    p = subprocess.run([sys.executable, "-c", _CHILD, str(world), "die"], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert p.returncode == -signal.SIGKILL
    uid, folder = p.stdout.split()
    assert Path(folder).is_dir(), "the killed run left its folder behind"
    cg = Path(f"/sys/fs/cgroup/pids/discern-sandbox-{uid}")
    with Sandbox(world) as sb:
        assert not Path(folder).exists()
        assert not cg.exists(), "the killed run's cgroup is removed at the next start"
        assert sb.run_python("print(1)").stdout.strip() == "1"
    assert not _live(int(uid))


# ---------------------------------------------------------------- 4. sealed substrates (issue 10 item 5)

def test_package_datasets_and_gold_side_code_are_sealed(world):
    import importlib.util

    spec = importlib.util.find_spec("scanpy")
    pbmc = Path(spec.origin).parent / "datasets" / "10x_pbmc68k_reduced.h5ad"
    assert pbmc.stat().st_size > 1000, "the host still has scanpy's copy (the substrate)"
    with Sandbox(world) as sb:
        r = sb.run_python(textwrap.dedent("""
            import importlib, os, glob
            import scanpy, pybedtools, anndata
            p = os.path.join(os.path.dirname(scanpy.__file__), 'datasets', '10x_pbmc68k_reduced.h5ad')
            try:
                data = open(p, 'rb').read(16)
            except OSError:
                data = b''
            print('pbmc', len(data))
            try:
                scanpy.datasets.pbmc68k_reduced(); print('loaded')
            except Exception as exc:
                print('pbmc68k_reduced fails')
            tdir = os.path.join(os.path.dirname(pybedtools.__file__), 'test', 'data')
            print('pybedtools test data', len(os.listdir(tdir)) if os.path.isdir(tdir) else 0)
            for mod in ('graders', 'worlds', 'benchmark', 'graders.l1', 'worlds.scrna.build'):
                try:
                    importlib.import_module(mod); print('imported', mod)
                except ImportError:
                    pass
            print('ok')
        """))
        assert r.error is None, r.as_text()
        out = r.stdout
        assert "pbmc 0" in out and "pbmc68k_reduced fails" in out, out
        assert "pybedtools test data 0" in out and "imported" not in out and out.rstrip().endswith("ok"), out


def test_seal_probe_reports_nothing_here():
    from sandbox.seal import seal_problems

    assert seal_problems() == []


# ---------------------------------------------------------------- 5. issue 19 item 6: a tighter sandbox

_SYSCALLS = textwrap.dedent("""
    import ctypes, errno, json, subprocess, threading
    libc = ctypes.CDLL(None, use_errno=True)
    def call(nr, *a):
        r = libc.syscall(nr, *a)
        return errno.errorcode.get(ctypes.get_errno(), '?') if r < 0 else 'ok'
    out = {
        'ptrace_attach_init': call(101, 16, 1, 0, 0),       # PTRACE_ATTACH pid 1
        'keyctl': call(250, 0, -3, 0),                      # KEYCTL_GET_KEYRING_ID session
        'add_key': call(248, b'user', b'k', b'v', 1, -3),
        'bpf': call(321, 0, 0, 0),
        'perf_event_open': call(298, 0, 0, -1, -1, 0),
        'mount': call(165, b'none', b'/tmp', b'tmpfs', 0, 0),
        'umount2': call(166, b'/tmp', 0),
        'unshare_user': call(272, 0x10000000),
        'clone_newuser': call(56, 0x10000000 | 17, 0, 0, 0, 0),
        'setns': call(308, 0, 0),
        'process_vm_readv': call(310, 1, 0, 0, 0, 0, 0),
        'open_by_handle_at': call(304, -100, 0, 0),
        'userfaultfd': call(323, 0),
        'init_module': call(175, 0, 0, b''),
        'io_uring_setup': call(425, 1, 0),                  # allowed, it would say EFAULT (NULL params)
        'socket_vsock': call(41, 40, 1, 0),                 # AF_VSOCK, SOCK_STREAM: allowed, an fd or EAFNOSUPPORT
    }
    import shutil
    if shutil.which('unshare') is None:  # the probe itself is missing: say so, so the test cannot pass on it
        out['unshare_Urm'] = 'probe missing'
    else:
        r = subprocess.run(['unshare', '-Urm', 'sh', '-c', 'mount -t tmpfs x /tmp && echo mounted'], capture_output=True, text=True)
        out['unshare_Urm'] = 'mounted' if 'mounted' in r.stdout else 'denied'
    # sockets an analysis may use stay open to it (inside the empty network namespace)
    out['socket_inet'] = call(41, 2, 1, 0)
    out['socket_unix'] = call(41, 1, 1, 0)
    # what an analysis needs still works: fork/exec, threads, subprocesses
    t = threading.Thread(target=lambda: None); t.start(); t.join()
    out['subprocess'] = subprocess.run(['sh', '-c', 'echo hi'], capture_output=True, text=True).stdout.strip()
    print(json.dumps(out))
""")


def test_seccomp_denies_namespaces_mount_ptrace_keyctl_bpf_perf_io_uring_vsock(world):
    """Probe: nested `unshare -Urm` mounted, init could be PTRACE_ATTACHed, keyctl/add_key/clone(NEWUSER) worked;
    issue 40: `socket(AF_VSOCK)` was allowed (the network namespace does not cover vsock) and the test passed where
    the `unshare` binary was missing. The probe binary's absence now fails it."""
    with Sandbox(world) as sb:
        r = sb.run_python(_SYSCALLS)
        assert r.error is None, r.as_text()
        out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out.pop("subprocess") == "hi"
    assert out.pop("socket_inet") == "ok" and out.pop("socket_unix") == "ok", out
    assert out == {**{k: "EPERM" for k in out}, "unshare_Urm": "denied"}, out
    assert sb.seccomp


def test_collection_is_capped_inside_the_task_clock_and_its_log_kept(world, tmp_path):
    """Probe: 300k symlinks in /workspace cost 27 s of host collection outside the task's wall clock, and the
    300k-line collect_log was not kept. Now collection examines at most `collect_entries` entries within
    `collect_wall_s` (taken from the task's clock), its log is bounded, and a cut is a recorded violation."""
    with Sandbox(world) as sb:  # default limits: 20000 entries, 30 s
        r = sb.run_python(textwrap.dedent("""
            import os
            os.makedirs('d', exist_ok=True)
            for i in range(200000):
                os.symlink('/etc/passwd', f'd/l{i}')
            open('result.txt', 'w').write('42\\n')
            print('planted')
        """))
        assert r.stdout.strip() == "planted", r.as_text()
        t0 = time.monotonic()
        got = sb.collect(tmp_path / "a")
        wall = time.monotonic() - t0
        assert len(sb.collect_log) <= 202, len(sb.collect_log)
        assert wall < 10.0, f"collection took {wall:.1f} s"
        assert any("entry cap" in line for line in sb.collect_log), sb.collect_log[-3:]
        cuts = [v for v in sb.violations if v.kind == "collection"]
        assert cuts and "symlink" in cuts[0].detail, sb.violations
        assert sb.collect_summary["entries"] <= 20001 and sb.collect_summary["skipped"]["symlink"] >= 19000
        assert got == [] or got == ["result.txt"]
        sb.collect(tmp_path / "b", max_entries=10 ** 9, wall_s=0.2)
        assert any(v.kind == "collection" and "wall-clock cap" in v.detail for v in sb.violations), sb.violations


def test_collection_time_comes_out_of_the_task_clock(world, tmp_path):
    with Sandbox(world, Limits(task_wall_s=8.0, collect_wall_s=60.0)) as sb:
        r = sb.run_python("import os\nos.makedirs('d')\nfor i in range(100000): os.symlink('x', f'd/l{i}')\nprint('ok')")
        assert r.stdout.strip() == "ok", r.as_text()
        time.sleep(max(0.0, sb._started + 8.0 - time.monotonic()))  # the task's clock is spent: a 2 s floor, not 60 s
        t0 = time.monotonic()
        sb.collect(tmp_path / "a", max_entries=10 ** 9)
        assert time.monotonic() - t0 < 4.0
        assert sb.collect_summary["budget_s"] == 2.0, sb.collect_summary


# ------------------------------------------------------------------ issue 40: records that cannot lie

def test_an_endpoint_that_reports_no_usage_is_counted_by_tokenizer_and_priced_as_an_estimate(tmp_path, monkeypatch):
    """A lying endpoint omitted `usage`: 2 calls were recorded at 0 tokens and a priced model read $0.000 per task.
    Now each such call is counted with the model's tokenizer and flagged, and the leaderboard marks the cost '~'."""
    import datetime as dt

    from benchmark.run.agent import call_model
    from benchmark.score.accounting import Pricing, RateCard
    from benchmark.score.aggregate import Options, aggregate
    from benchmark.score.leaderboard import render_markdown
    from tests.aggregate_helpers import rec, run_input
    from tests.fake_openai import FakeOpenAI, Reply

    body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "fake-model",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": "a reply of some words " * 20},
                                    "finish_reason": "stop"}]}).encode()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    with FakeOpenAI(default=Reply(body=body)) as srv:
        monkeypatch.setenv("OPENAI_API_BASE", srv.url)
        msgs = [{"role": "system", "content": "You are a careful analyst. " * 30}, {"role": "user", "content": "go"}]
        resp, call = call_model("openai/fake-model", msgs, step=0)
    assert call.ok and call.usage_estimated, call
    assert 150 < call.tokens_in < 400 and 60 < call.tokens_out < 200, (call.tokens_in, call.tokens_out)
    # a record carrying such calls is priced, and its cost shown as an estimate
    r = rec("scrna.L1.integrity.clean", "scrna", "L1", model="openai/fake-model", tokens_in=call.tokens_in,
            tokens_out=call.tokens_out).model_copy(update={"usage_estimated_calls": 1})
    card = RateCard(date=dt.date(2026, 1, 1), source="test", models={"openai/fake-model": {"input": 1.0, "output": 2.0}})
    data = aggregate([run_input([r])], {}, Pricing([card]), Options(bootstrap_draws=50, permutation_draws=50))
    md = render_markdown(data)
    acc = data["models"][0]["accounting"]
    assert acc["usd_per_task"] > 0 and acc["usd_estimated"] is True
    assert f"~{acc['usd_per_task']:.3f}" in md and "cost estimated" in md, md


def test_a_ray_gcs_beyond_loopback_without_token_auth_is_warned_about():
    """Issue 40: GCS and the raylet listened on every interface without authentication; the doc warned but the
    harness did not check. `--executor ray` now says so in one sentence, with how to bind or authenticate it."""
    from benchmark.run.ray_executor import gcs_exposure_warning

    warn = gcs_exposure_warning("10.0.3.7:6379", {})
    assert warn and "10.0.3.7:6379" in warn and "RAY_AUTH_MODE=token" in warn and "127.0.0.1" in warn
    assert gcs_exposure_warning("10.0.3.7:6379", {"RAY_AUTH_MODE": "token"}) is None
    assert gcs_exposure_warning("127.0.0.1:6379", {}) is None and gcs_exposure_warning("[::1]:6379", {}) is None
    assert gcs_exposure_warning("node7.cluster:6379", {})


def test_a_request_never_answered_and_a_replaced_attempt_are_counted_as_lost_usage(tmp_path, monkeypatch):
    """Issue 40: a Ray worker killed with kill -9 was re-run and its lost request paid again (7 requests, 6 calls'
    tokens on record). Every paid request is now journaled when sent and when it returns (benchmark.run.journal):
    one that times out counts its prompt (estimated), one refused with an HTTP status counts nothing, and the calls
    of an attempt whose record was lost or replaced are the pair's `lost_usage`, priced into $/task."""
    import datetime as dt

    from benchmark.run.agent import RetryPolicy, call_model
    from benchmark.run.journal import CallJournal, episode_attempt
    from benchmark.run.store import RunStore
    from benchmark.score.accounting import Pricing, RateCard
    from benchmark.score.aggregate import Options, aggregate
    from tests.aggregate_helpers import rec, run_input
    from tests.fake_openai import FakeOpenAI, error, report, slow

    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    key = "scrna.L1.integrity.clean__r0"
    store = RunStore(tmp_path / "run")
    store.root.mkdir()
    msgs = [{"role": "system", "content": "You are a careful analyst. " * 40}, {"role": "user", "content": "go"}]
    # the answered calls get seconds to spare on a busy machine (a 1 s timeout let the first reply time out under the
    # full suite's load: one more estimated call); the unanswered one sleeps twice the timeout
    patient = RetryPolicy(attempts=3, timeout_s=30.0, deadline_s=60.0, base_s=0.01, cap_s=0.02)
    fast = RetryPolicy(attempts=3, timeout_s=3.0, deadline_s=60.0, base_s=0.01, cap_s=0.02)
    with FakeOpenAI(script=[report("first"), slow(6), error(500), report("done")]) as srv:
        monkeypatch.setenv("OPENAI_API_BASE", srv.url)
        with episode_attempt(key, store.journal.write) as lost_attempt:  # its record never comes (a killed worker)
            assert call_model("openai/fake-model", msgs, step=0, policy=patient)[1].ok
        with episode_attempt(key, store.journal.write) as attempt:
            _, call = call_model("openai/fake-model", msgs, step=0, policy=fast)  # timeout, 500, then a reply
        assert len(srv.requests) == 4
    assert call.ok and len(call.attempts) == 3 and lost_attempt != attempt
    lost = CallJournal(store.root).lost_usage(key, attempt)  # read back from calls.jsonl, as after a restart
    assert set(lost) == {"agent"}, lost
    u = lost["agent"]
    assert u.calls == 2 and u.estimated_calls == 1, u  # the lost attempt's reply and the unanswered request
    assert u.tokens_out == 7 and 11 + 200 < u.tokens_in < 11 + 600, u  # 11 reported; the timeout's prompt counted
    # a torn last line (a kill mid-write) is no event, and the next event starts on its own line
    with open(store.journal.path, "ab") as fh:
        fh.write(b'{"key": "' + key.encode() + b'", "attempt": "x", "ca')
    store.journal.write({"key": key, "attempt": "y", "call": 1, "event": "refused", "http_status": 429})
    assert CallJournal(store.root).lost_usage(key, attempt) == lost
    # the row of `attempt` carries it, and a priced model's $/task includes it
    card = RateCard(date=dt.date(2026, 1, 1), source="test", models={"openai/fake-model": {"input": 10.0, "output": 20.0}})
    base = rec("scrna.L1.integrity.clean", "scrna", "L1", model="openai/fake-model", tokens_in=11, tokens_out=7)
    with_lost = base.model_copy(update={"attempt": attempt, "lost_usage": lost})
    cost = {}
    for name, r in (("row", base), ("with_lost", with_lost)):
        data = aggregate([run_input([r])], {}, Pricing([card]), Options(bootstrap_draws=50, permutation_draws=50))
        cost[name] = data["models"][0]["accounting"]
    assert cost["with_lost"]["usd_per_task"] == pytest.approx(
        cost["row"]["usd_per_task"] + (u.tokens_in * 10 + u.tokens_out * 20) / 1e6)
    assert cost["with_lost"]["usd_estimated"] is True and cost["row"]["usd_estimated"] is False

