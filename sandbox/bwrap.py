"""A sealed per-task workspace built with bubblewrap, holding a persistent Python kernel.

What the sandboxed code can see: read-only /usr (samtools, bedtools, ...), the read-only Python environment at
fixed neutral paths (/opt/venv and its base interpreter at /opt/python), a copy of ONE world's public files in a
size-capped tmpfs at /workspace (its working directory), and small capped /tmp and /dev/shm. Nothing else: not the
repository (graders, goldens, locks, manifests), not the world cache, not sibling worlds, not /root or /home, no
package-shipped data set (`sandbox/seal.py` masks them), no host path (see "No host path" below).

How it is sealed (as root; the non-root mode binds the roots where they are and has no uid, cgroup or host-path
guarantees):
  * A distinct unprivileged uid per live sandbox, leased under an flock on `<state>/uid-N.lock`; the kernel drops
    the lock when the owner dies, so a `kill -9`'d harness's uids are reclaimed (orphans of that uid are killed
    first). `setpriv` drops to it before `bwrap` runs, so RLIMIT_NPROC counts this sandbox only. The uid range
    must be unused on the host; `<state>` is /run/discern-bench (as root) or $DISCERN_SANDBOX_STATE.
  * `--unshare-all` (no network but loopback, own pid/ipc/uts namespaces), `--clearenv` (no API keys or host
    variables), `--die-with-parent`, `--new-session`; `/` and `/dev` read-only; `/workspace`, `/tmp` and
    `/dev/shm` are tmpfs with `--size` caps.
  * Totals per sandbox: a cgroup (v2 where delegated, else v1 memory+pids, both found writable under the harness's
    own cgroup) caps memory (tmpfs pages included) and process count. Fallback when neither is writable: RLIMIT_AS
    per process and RLIMIT_NPROC per (unique) uid, so memory is bounded by address_space x processes, not by a
    total; `Sandbox.cgroup_mode` says which holds.
  * A CPU quota of `Limits.cpus` cores for the whole sandbox where a cpu cgroup is writable (`cpu_capped`).
  * A seccomp filter (`sandbox/seccomp.py`, hand-assembled classic BPF, `--seccomp`): no nested namespaces,
    mounts, ptrace/process_vm_*, keyrings, bpf, perf_event_open, userfaultfd, io_uring, module or kexec calls.
  * rlimits: CPU seconds, address space, processes, file size. The harness enforces a wall-clock limit per cell
    and per task, kills the whole sandbox on overrun, and after every cell kills every process of the sandbox but
    its kernel (the kernel does so in its pid namespace; the host does so again by uid).
  * Host folders `benchmark-sandbox-*` carry an owner file; those of dead owners are removed at the next start.

No host path: bwrap reads its arguments from a memfd (`--args`), so /proc/1/cmdline is `bwrap --args N`; the
world's files and the kernel are copied in from descriptors (`--file`, `--ro-bind-data`); the Python roots are
shown through read-only overlays whose layers are bound under a private tmpfs at /opt in a throw-away mount
namespace, so /proc/self/mountinfo names only `/opt/...`. The venv's `pyvenv.cfg`, interpreter links,
console-script shebangs and activate scripts are regenerated for /opt/venv in an upper overlay layer; its .pyc files
record their /opt/venv source paths (`sandbox/neutral.py`, run by setup.sh) and an install's `direct_url.json` that
names the clone is masked, so no file under /opt/venv names the venv's host path (`tests/test_security.py`).
Python itself reports /opt paths (`sys.prefix`, tracebacks: importlib rewrites `co_filename` on load).
What is not scrubbed: a base interpreter installed outside /usr (pyenv, uv) is shown at /opt/python, but its
binaries record their build prefix (the RPATH of `python3.11`, `libpython` and every `lib-dynload` module, and its
`_sysconfigdata*.py`), which names that install's folder (e.g. `/root/.pyenv/versions/3.11.7`); rewriting them
means patching binaries. With the README's interpreter (Debian's, under /usr) there is no such folder. None of
those paths exists inside (the repository, goldens and caches are never mounted; the seal probe checks it), the
collector never resolves a path the agent made, and cell code naming such paths is flagged by the audit.

Kernel channel: two pipes on private descriptors (never the sandbox's stdio, which its dumpable init keeps),
held inside only by the kernel's non-dumpable supervisor; agent code runs in a forked worker that has none of
them, so it cannot write a reply at all (`sandbox/kernel.py`). Frames are length-prefixed, each reply echoes the
request's random nonce; anything else is discarded and recorded, every host buffer is bounded (`_Channel`), and
`run_python` never raises for what agent code does. At each cell's end the supervisor SIGSTOPs the worker (every
thread the cell left running stops until the next cell; `CellResult.threads` counts them) and kills every other
process, so between cells and during collection no agent code runs.

Warm sandboxes (issue 20, `sandbox/pool.py`): `start()` takes, when one is ready, a sandbox the pool started ahead
of time with the same start-time limits: sealed exactly as above, with its own uid, cgroup and tmpfs mounts, an
EMPTY /workspace, and a kernel that has already imported the track's heavy packages. The host checks that its
/workspace is still empty, and the kernel's supervisor writes the world's files into it (`put` requests; see
`sandbox/kernel.py`); the task's wall clock starts then. A pool's sandbox serves one world and is torn down with
it, never returned; restarts after a kill are cold starts. `Sandbox(..., pool=False)` always starts cold.

Artefact collection (`collect`): the host opens `/proc/<init>/root/workspace` once, then walks it by descriptor:
every component is opened with O_NOFOLLOW relative to its parent's descriptor, and only regular files with one
link, on the workspace's own device, are copied (fstat on the opened descriptor, so a swap after the check is
caught), under per-file, total and count caps, and within `Limits.collect_entries` directory entries and
`Limits.collect_wall_s` seconds taken from what is left of the task's wall clock (at least 2 s). Symlinks,
hardlinks, fifos, sockets and devices are skipped and logged in `collect_log` (200 lines per collection, the rest
counted by reason); a cap that cuts collection short is a "collection" violation with that summary, so the
trajectory keeps it. Nothing is ever resolved through a path the agent made.
"""
from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import resource
import secrets
import selectors
import shlex
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from benchmark.errors import BenchmarkError
from sandbox.numba_seed import SANDBOX_DIR as NUMBA_CACHE_DIR
from sandbox.numba_seed import bwrap_args as numba_seed_args
from sandbox.seccomp import program as seccomp_program

KERNEL_SRC = Path(__file__).with_name("kernel.py")
UID_BASE = 61000
UID_COUNT = 2000
GiB = 1 << 30
MiB = 1 << 20
MAGIC = b"\x00\x1eDISCERN-KERNEL-FRAME\x1f"  # same bytes as sandbox/kernel.py
MAX_FRAME = 8 * MiB  # a real reply is < 100 KB (the kernel truncates output)
SANDBOX_PREFIX = "benchmark-sandbox-"
OPT_VENV, OPT_PYTHON = "/opt/venv", "/opt/python"
PUT_CHUNK = 8 * MiB  # raw bytes of world files per `put` request to a warm sandbox's kernel (base64 in a frame)


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandbox. Defaults suit the shipped tracks on a 2-core, 24 GiB machine."""

    cpu_seconds: int = 1200  # RLIMIT_CPU of the kernel and each child, cumulative per process
    address_space: int = 12 * GiB  # RLIMIT_AS per process (numba/LLVM reserve large virtual ranges)
    processes: int = 128  # RLIMIT_NPROC of the sandbox's uid, and pids.max of its cgroup
    cpus: float = 2.0  # CPU rate cap of the whole sandbox (cgroup cpu quota, in cores), where a cpu cgroup is writable
    memory_bytes: int = 8 * GiB  # cgroup memory cap of the whole sandbox, tmpfs pages included
    file_size: int = 1 * GiB  # RLIMIT_FSIZE: largest single file
    workspace_bytes: int = 2 * GiB  # tmpfs size of /workspace
    tmp_bytes: int = 1 * GiB  # tmpfs size of /tmp
    shm_bytes: int = 256 * MiB  # tmpfs size of /dev/shm
    cell_wall_s: float = 300.0  # wall clock per run_python call
    task_wall_s: float = 1800.0  # wall clock for the whole task
    start_wall_s: float = 60.0
    collect_wall_s: float = 30.0  # wall clock of artefact collection, taken from what is left of task_wall_s
    collect_entries: int = 20000  # directory entries collection examines at most (files, links, folders, ...)


ViolationKind = Literal["timeout", "task_timeout", "memory", "cpu", "processes", "disk", "file_size", "crash", "forbidden",
                        "collection"]
COLLECT_LOG_LINES = 200  # detailed collect_log lines kept per collection; the rest are counted by reason


class Violation(BaseModel):
    kind: ViolationKind
    detail: str
    cell: int | None = None


class CellResult(BaseModel):
    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    truncated: bool = False
    wall_s: float = 0.0
    violation: Violation | None = None
    restarted: bool = False
    killed: int = 0  # background processes the cell left running, killed after it
    threads: int = 0  # threads of the kernel's worker besides its main one still alive at the cell's end (paused)

    def as_text(self) -> str:
        """What the agent reads back from run_python."""
        parts = []
        if self.stdout:
            parts.append(self.stdout.rstrip("\n"))
        if self.stderr:
            parts.append("[stderr]\n" + self.stderr.rstrip("\n"))
        if self.error:
            parts.append("[error]\n" + self.error.rstrip("\n"))
        if self.violation:
            parts.append(f"[sandbox] {self.violation.kind}: {self.violation.detail}")
        if self.killed:
            parts.append(f"[sandbox] {self.killed} background process(es) still running after the cell were killed")
        if self.threads:
            parts.append(f"[sandbox] {self.threads} thread(s) still alive after the cell are paused until the next cell")
        return "\n".join(parts) if parts else "(no output)"


_MARKERS: list[tuple[str, ViolationKind]] = [
    ("MemoryError", "memory"),
    ("Cannot allocate memory", "memory"),
    ("No space left on device", "disk"),
    ("File too large", "file_size"),
    ("Resource temporarily unavailable", "processes"),
    ("BlockingIOError", "processes"),
]


def _classify(text: str) -> ViolationKind | None:
    for marker, kind in _MARKERS:
        if marker in text:
            return kind
    return None


# ---------------------------------------------------------------- host-side helpers

def _python_roots() -> list[Path]:
    """The venv and its base interpreter: what must be visible (read-only) for the kernel and the tools."""
    return sorted({Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()})


def _starttime(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat: with the pid, identifies one process across pid reuse."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _pids_of_uid(uid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{name}")
        except OSError:
            continue
        if st.st_uid == uid:
            out.append(int(name))
    return out


def _kill_uid(uid: int, keep: set[int] = frozenset()) -> int:
    """SIGKILL every process of `uid` except `keep`, until none is left (fork races). Returns how many."""
    killed: set[int] = set()
    for _ in range(200):
        pids = [p for p in _pids_of_uid(uid) if p not in keep]
        live = [p for p in pids if _state(p) not in ("Z", "X", None)]
        if not live:
            break
        for p in live:
            try:
                os.kill(p, signal.SIGKILL)
                killed.add(p)
            except OSError:
                pass
        time.sleep(0.005)
    return len(killed)


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


def _state_dir() -> Path:
    """Where uid leases live: shared by every harness process of this machine."""
    base = Path(os.environ.get("DISCERN_SANDBOX_STATE") or ("/run/discern-bench" if os.geteuid() == 0 and Path("/run").is_dir()
                                                             else Path(tempfile.gettempdir()) / f"discern-bench-{os.geteuid()}"))
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    return base


class _UidLease:
    """One uid in [UID_BASE, UID_BASE + UID_COUNT) held through an flock; the kernel frees it if the holder dies."""

    def __init__(self) -> None:
        state = _state_dir()
        start = secrets.randbelow(UID_COUNT)  # spread concurrent allocators; any free uid will do
        for k in range(UID_COUNT):
            uid = UID_BASE + (start + k) % UID_COUNT
            fd = os.open(state / f"uid-{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()} {_starttime(os.getpid())}\n".encode())
            self.uid, self._fd = uid, fd
            if os.geteuid() == 0:
                _kill_uid(uid)  # orphans of a dead holder, if any outlived it
            return
        raise BenchmarkError(f"all {UID_COUNT} sandbox uids from {UID_BASE} are leased (see {state}); close sandboxes or wait")

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # drops the flock
            self._fd = None


def _owner_alive(folder: Path) -> bool:
    try:
        pid_s, start = (folder / "owner").read_text().split()
    except (OSError, ValueError):
        # no owner file: a folder of an older harness; keep it unless it is a day old
        try:
            return time.time() - folder.stat().st_mtime < 86400
        except OSError:
            return False
    return _starttime(int(pid_s)) == start


def _lock_if_free(uid: int) -> int | None:
    """The lease lock of `uid` if nobody holds it (caller closes the fd to release), else None."""
    try:
        fd = os.open(_state_dir() / f"uid-{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except OSError:
        os.close(fd)
        return None


def clean_leftovers(tmp_root: Path | None = None) -> list[Path]:
    """Remove what a `kill -9`'d run left: `benchmark-sandbox-*` folders whose owner process is dead, and (as root)
    `discern-sandbox-<uid>` cgroups whose uid nobody leases. Returns what was removed."""
    removed = []
    for folder in Path(tmp_root or tempfile.gettempdir()).glob(SANDBOX_PREFIX + "*"):
        if folder.is_dir() and not folder.is_symlink() and not _owner_alive(folder):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    if os.geteuid() == 0:
        for ctrl in ("", "memory", "pids", "cpu"):
            own = _Cgroup._own(ctrl)
            if own is None:
                continue
            base = Path("/sys/fs/cgroup") / ctrl / own.lstrip("/") if ctrl else Path("/sys/fs/cgroup") / own.lstrip("/")
            if ctrl == "" and not (Path("/sys/fs/cgroup") / "cgroup.controllers").exists():
                continue
            for d in base.glob("discern-sandbox-*"):
                uid = d.name.rsplit("-", 1)[-1]
                fd = _lock_if_free(int(uid)) if uid.isdigit() else None
                if fd is not None:  # held while removing, so no new lease of this uid can race us
                    try:
                        _Cgroup._remove_dir(d)
                        removed.append(d)
                    finally:
                        os.close(fd)
    return removed


class _Cgroup:
    """The sandbox's cgroup: total memory (tmpfs included) and process count. v2 if delegated, else v1."""

    def __init__(self, mode: str, dirs: list[Path]):
        self.mode, self.dirs = mode, dirs
        self.cpu_capped = False

    def _cap_cpu(self, fs: Path, name: str, limits: Limits) -> None:
        """A CPU quota (limits.cpus cores) for the whole sandbox: cpu.max (v2) or a v1 cpu cgroup. Best effort."""
        period = 100_000
        quota = max(1000, int(limits.cpus * period))
        try:
            if self.mode == "v2":
                d = self.dirs[0]
                try:
                    (d.parent / "cgroup.subtree_control").write_text("+cpu")
                except OSError:
                    pass
                if (d / "cpu.max").exists():
                    (d / "cpu.max").write_text(f"{quota} {period}")
                    self.cpu_capped = True
                return
            own = self._own("cpu")
            if own is None or not (fs / "cpu").is_dir():
                return
            d = fs / "cpu" / own.lstrip("/") / name
            self._remove_dir(d)
            d.mkdir()
            self.dirs.append(d)
            (d / "cpu.cfs_period_us").write_text(str(period))
            (d / "cpu.cfs_quota_us").write_text(str(quota))
            self.cpu_capped = True
        except OSError:
            pass

    @staticmethod
    def _own(controller: str) -> str | None:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            hid, ctrls, path = line.split(":", 2)
            if (controller == "" and hid == "0") or controller in ctrls.split(","):
                return path
        return None

    @classmethod
    def create(cls, name: str, limits: Limits) -> "_Cgroup | None":
        if os.geteuid() != 0:
            return None
        fs = Path("/sys/fs/cgroup")
        try:
            own = cls._own("")
            if (fs / "cgroup.controllers").exists() and own is not None:
                parent = fs / own.lstrip("/")
                d = parent / name
                cls._remove_dir(d)
                try:
                    (parent / "cgroup.subtree_control").write_text("+memory +pids")
                except OSError:
                    pass
                d.mkdir()
                if (d / "memory.max").exists() and (d / "pids.max").exists():
                    (d / "memory.max").write_text(str(limits.memory_bytes))
                    (d / "memory.swap.max").exists() and (d / "memory.swap.max").write_text("0")
                    (d / "pids.max").write_text(str(limits.processes))
                    cg = cls("v2", [d])
                    cg._cap_cpu(fs, name, limits)
                    return cg
                d.rmdir()
            mem, pids = cls._own("memory"), cls._own("pids")
            if mem is not None and pids is not None and (fs / "memory").is_dir() and (fs / "pids").is_dir():
                md, pd = fs / "memory" / mem.lstrip("/") / name, fs / "pids" / pids.lstrip("/") / name
                for d in (md, pd):
                    cls._remove_dir(d)
                    d.mkdir()
                (md / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
                (pd / "pids.max").write_text(str(limits.processes))
                cg = cls("v1", [md, pd])
                cg._cap_cpu(fs, name, limits)
                return cg
        except OSError:
            return None
        return None

    @staticmethod
    def _remove_dir(d: Path) -> None:
        if not d.is_dir():
            return
        for _ in range(100):
            try:
                pids = [int(p) for p in (d / "cgroup.procs").read_text().split()]
            except OSError:
                pids = []
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            try:
                d.rmdir()
                return
            except OSError:
                time.sleep(0.01)

    def join(self) -> None:  # runs in the forked child, before exec
        for d in self.dirs:
            with open(d / "cgroup.procs", "w") as fh:
                fh.write(str(os.getpid()))

    def oom_kills(self) -> int:
        d = self.dirs[0]
        try:
            text = (d / ("memory.events" if self.mode == "v2" else "memory.oom_control")).read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            k, _, v = line.partition(" ")
            if k == "oom_kill":
                return int(v)
        return 0

    def remove(self) -> None:
        for d in self.dirs:
            self._remove_dir(d)


class _Channel:
    """The host end of the kernel's reply pipe: frames only, every buffer bounded, garbage counted and dropped."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buf = bytearray()
        self.discarded = 0  # bytes of unframed data dropped
        self.bad_frames = 0  # well-delimited frames that were not a JSON object

    def read(self, deadline: float) -> tuple[str, dict | int | None]:
        """("frame", obj) | ("timeout", None) | ("eof", None) | ("overflow", length)."""
        hl = len(MAGIC) + 8
        sel = selectors.DefaultSelector()
        sel.register(self.fd, selectors.EVENT_READ)
        try:
            while True:
                i = self.buf.find(MAGIC)
                if i < 0:
                    keep = len(MAGIC) - 1
                    if len(self.buf) > keep:
                        self.discarded += len(self.buf) - keep
                        del self.buf[:-keep]
                else:
                    if i:
                        self.discarded += i
                        del self.buf[:i]
                    if len(self.buf) >= hl:
                        (n,) = struct.unpack(">Q", bytes(self.buf[len(MAGIC):hl]))
                        if n > MAX_FRAME:
                            self.buf.clear()
                            return "overflow", n
                        # a JSON body never holds the raw MAGIC (control bytes are escaped), so a MAGIC inside
                        # the announced body means this header was forged: drop it and resynchronise there
                        j = self.buf.find(MAGIC, len(MAGIC), hl + n)
                        if j > 0:
                            self.bad_frames += 1
                            self.discarded += j
                            del self.buf[:j]
                            continue
                        if len(self.buf) >= hl + n:
                            body = bytes(self.buf[hl:hl + n])
                            del self.buf[:hl + n]
                            try:
                                obj = json.loads(body)
                            except ValueError:
                                obj = None
                            if isinstance(obj, dict):
                                return "frame", obj
                            self.bad_frames += 1
                            continue
                left = deadline - time.monotonic()
                if left <= 0:
                    return "timeout", None
                if not sel.select(left):
                    continue
                chunk = os.read(self.fd, 1 << 20)
                if not chunk:
                    return "eof", None
                self.buf += chunk
        finally:
            sel.close()


def _frame(obj: dict) -> bytes:
    body = json.dumps(obj).encode()
    return MAGIC + struct.pack(">Q", len(body)) + body


def _venv_layer(venv: Path, base: Path, base_to: str, out: Path) -> None:
    """Files that make the venv work at /opt/venv and name no host path: pyvenv.cfg, interpreter links, console-script
    shebangs, activate scripts."""
    repl = [(str(venv), OPT_VENV), (str(base), base_to)]

    def fix(s: str) -> str:
        for a, b in repl:
            s = s.replace(a, b)
        return s

    (out / "bin").mkdir(parents=True)
    cfg = venv / "pyvenv.cfg"
    if cfg.exists():
        lines = [fix(ln) for ln in cfg.read_text().splitlines() if not ln.startswith("command")]
        (out / "pyvenv.cfg").write_text("\n".join(lines) + "\n")
    for p in (venv / "bin").iterdir():
        if p.is_symlink():
            target = os.readlink(p)
            if os.path.isabs(target):
                resolved = str(Path(target).resolve())
                os.symlink(fix(resolved if resolved.startswith(str(base)) else target), out / "bin" / p.name)
            continue
        if not p.is_file():
            continue
        with open(p, "rb") as fh:
            head = fh.read(512)
        if head.startswith(b"#!") and str(venv).encode() in head.split(b"\n", 1)[0]:
            data = p.read_bytes()
            first, _, rest = data.partition(b"\n")
            (out / "bin" / p.name).write_bytes(fix(first.decode(errors="surrogateescape")).encode(errors="surrogateescape") + b"\n" + rest)
            os.chmod(out / "bin" / p.name, 0o755)
        elif b"\0" not in head and p.stat().st_size <= 1 << 20 and str(venv).encode() in (data := p.read_bytes()):
            # activate scripts set VIRTUAL_ENV to the host path
            (out / "bin" / p.name).write_bytes(fix(data.decode(errors="surrogateescape")).encode(errors="surrogateescape"))
            os.chmod(out / "bin" / p.name, p.stat().st_mode & 0o777)


class _BoundedLog:
    """Appends to `lines` up to `cap` lines; after that only counts by reason. `close()` adds one summary line."""

    def __init__(self, lines: list[str], cap: int):
        self.lines, self.cap, self.kept, self.dropped = lines, cap, 0, 0
        self.counts: dict[str, int] = {}
        self.dropped_counts: dict[str, int] = {}

    def append(self, line: str, reason: str = "other") -> None:
        self.counts[reason] = self.counts.get(reason, 0) + 1
        if self.kept < self.cap:
            self.lines.append(line)
            self.kept += 1
        else:
            self.dropped += 1
            self.dropped_counts[reason] = self.dropped_counts.get(reason, 0) + 1

    def close(self) -> None:
        if self.dropped:
            by = ", ".join(f"{n} {k}" for k, n in sorted(self.dropped_counts.items()))
            self.lines.append(f"... and {self.dropped} more line(s) not kept ({by})")
            self.dropped = 0


def _prune_empty(folder: Path, top: Path) -> None:
    """Remove `folder` and its parents up to (not including) `top` while they are empty."""
    while folder != top and top in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def _printable(name: str) -> bool:
    return name.isprintable() and not any(0xDC80 <= ord(c) <= 0xDCFF for c in name)


class Sandbox:
    """One fresh sealed workspace for one task. Use as a context manager; `run_python` keeps state between cells.

    `slot` is accepted for compatibility and ignored: each live sandbox leases its own uid (see module doc).

    `start()` takes a warm sandbox from the pool (`sandbox/pool.py`) when one of the same start-time limits and
    preload list is ready, and falls back to a cold start otherwise; `pool=False` always starts cold. `preload`
    (default: numpy, pandas and the packages of the world's track) is what a warm sandbox has imported ahead of
    time; `warm` says whether this one came from the pool.
    """

    def __init__(self, world_dir: Path | None, limits: Limits = Limits(), slot: int = 0, label: str = "task", *,
                 pool: bool = True, preload: tuple[str, ...] | None = None):
        if not shutil.which("bwrap"):
            raise BenchmarkError("bubblewrap (bwrap) is not installed; run `bash scripts/setup.sh`")
        self.world_dir = Path(world_dir).resolve() if world_dir is not None else None  # None: a pool's blank
        self.limits = limits
        self.uid: int | None = None
        self.label = label
        self.warm = False  # whether start() took a pre-started sandbox from the pool
        self._use_pool = pool and self.world_dir is not None
        self._preload_req = preload
        self._pool_key: tuple | None = None  # set while this sandbox counts as live in the pool's demand
        self._masks: tuple | None = None  # masked_paths() this sandbox was started with
        self._nice = 0  # niceness of a pool's blank while it waits (reset when handed out)
        self.violations: list[Violation] = []
        self.collect_log: list[str] = []
        self.collect_s = 0.0  # wall clock of the last collection
        self.collect_summary: dict = {}  # the last collection: copied, entries, wall_s, skipped by reason, cut
        self._clog: _BoundedLog | None = None
        self.cells = 0
        self.cgroup_mode: str | None = None
        self.seccomp = False  # whether the seccomp filter (sandbox/seccomp.py) is loaded
        self.cpu_capped = False  # whether a cgroup caps the sandbox's CPU rate at limits.cpus
        self._lease: _UidLease | None = None
        self._cgroup: _Cgroup | None = None
        self._proc: subprocess.Popen | None = None
        self._chan: _Channel | None = None
        self._child_pid: int | None = None
        self._child_start: str | None = None
        self._kernel_pid: int | None = None
        self._worker_pid: int | None = None
        self._req_w: int | None = None  # host ends of the kernel's channel (never the sandbox's stdio)
        self._rep_r: int | None = None
        self._threads = 0  # the worker's extra threads at the last cell's end
        self._ws_dev: int | None = None
        self._host_tmp: Path | None = None
        self._started = 0.0
        self._oom_seen = 0
        self.restarts = 0
        self.start_s = 0.0

    # -- lifecycle
    def __enter__(self) -> "Sandbox":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _world_args(self, fds: list[int]) -> list[str]:
        """`--dir`/`--file FD` pairs that copy the world's public files into /workspace (no host path shown)."""
        args: list[str] = []
        if self.world_dir is None:
            return args
        for p in sorted(self.world_dir.rglob("*")):
            rel = p.relative_to(self.world_dir)
            if p.is_symlink():
                continue
            if p.is_dir():
                args += ["--dir", f"/workspace/{rel}"]
            elif p.is_file():
                fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC)
                fds.append(fd)
                args += ["--perms", "0644", "--file", str(fd), f"/workspace/{rel}"]
        return args

    def _bwrap_args(self, roots: dict[str, Path], masks: list[str], env: dict[str, str], fds: list[int],
                    info_fd: int) -> list[str]:
        lim = self.limits
        argv = ["--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
                "--ro-bind", "/usr", "/usr",
                "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/sbin", "/sbin"]
        if Path("/lib64").exists():
            argv += ["--symlink", "usr/lib64", "/lib64"]
        for etc in ("/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime", "/etc/mime.types", "/etc/fonts"):
            if Path(etc).exists():
                argv += ["--ro-bind", etc, etc]
        argv += ["--proc", "/proc", "--dev", "/dev",
                 "--size", str(lim.shm_bytes), "--tmpfs", "/dev/shm",
                 "--size", str(lim.tmp_bytes), "--tmpfs", "/tmp",
                 "--size", str(lim.workspace_bytes), "--tmpfs", "/workspace"]
        argv += numba_seed_args(fds)  # this sandbox's own copy of the compiled numba cache (sandbox/numba_seed.py)
        for dest, src in sorted(roots.items()):
            argv += ["--ro-bind", str(src), dest]
        for m in masks:
            argv += (["--tmpfs", m[:-1], "--remount-ro", m[:-1]] if m.endswith("/") else ["--ro-bind", "/dev/null", m])
        kfd = os.memfd_create("kernel", 0)
        os.write(kfd, KERNEL_SRC.read_bytes())
        os.lseek(kfd, 0, 0)
        fds.append(kfd)
        argv += ["--ro-bind-data", str(kfd), "/opt/kernel/kernel.py"]
        argv += self._world_args(fds)
        for k, v in env.items():
            argv += ["--setenv", k, v]
        argv += ["--remount-ro", "/", "--remount-ro", "/dev",
                 "--info-fd", str(info_fd), "--chdir", "/workspace"]
        prog = seccomp_program()
        if prog is not None:
            sfd = os.memfd_create("seccomp", 0)
            os.write(sfd, prog)
            os.lseek(sfd, 0, 0)
            fds.append(sfd)
            argv += ["--seccomp", str(sfd)]
        self.seccomp = prog is not None
        return argv

    def _set_child(self) -> None:  # runs in the forked child before exec
        if self._cgroup:
            self._cgroup.join()
        lim = self.limits
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if self._nice:
            os.nice(self._nice)
        if os.geteuid() != 0:  # as root, prlimit sets them after the staging mounts
            resource.setrlimit(resource.RLIMIT_CPU, (lim.cpu_seconds, lim.cpu_seconds + 5))
            resource.setrlimit(resource.RLIMIT_AS, (lim.address_space, lim.address_space))
            resource.setrlimit(resource.RLIMIT_NPROC, (lim.processes, lim.processes))
            resource.setrlimit(resource.RLIMIT_FSIZE, (lim.file_size, lim.file_size))

    def start(self) -> None:
        """Take a warm sandbox from the pool and copy the world's files in, or start cold (`_cold_start`).

        The task's wall clock starts when the sandbox is ready for the world's first cell.
        """
        t_start = time.monotonic()
        clean_leftovers()
        if self._use_pool and self._lease is None and self._pool_key is None:
            from sandbox import pool
            from sandbox.seal import masked_paths

            preload = self._preload_req if self._preload_req is not None else pool.preload_for(self.world_dir, self.label, self.limits)
            key = pool.pool_key(self.limits, preload)
            blank = pool.POOL.take(key, masked_paths())
            if blank is not None:
                try:
                    self._adopt(blank)
                except Exception as exc:  # noqa: BLE001 - a warm sandbox that cannot be used is closed; start cold
                    pool.POOL.last_error = f"hand-out failed: {type(exc).__name__}: {exc}"
                    self.close()
                    blank.close()
            pool.POOL.started(key, self.limits)
            self._pool_key = key
        if not self.warm:
            try:
                self._cold_start()
            except BaseException:
                self.close()
                raise
        self.start_s = round(time.monotonic() - t_start, 3)

    def _adopt(self, blank: "Sandbox") -> None:
        """Become `blank` (a pool's sandbox with an empty /workspace), then copy this world's files in."""
        moved = ("uid", "_lease", "_cgroup", "cgroup_mode", "cpu_capped", "_proc", "_chan", "_child_pid", "_child_start",
                 "_kernel_pid", "_worker_pid", "_req_w", "_rep_r", "_ws_dev", "_host_tmp", "seccomp", "_masks")
        for name in moved:
            setattr(self, name, getattr(blank, name))
        blank._lease = blank._cgroup = blank._proc = blank._chan = blank._host_tmp = None  # blank.close() is a no-op now
        blank._req_w = blank._rep_r = blank.uid = None
        blank._child_pid = blank._kernel_pid = blank._worker_pid = None
        if blank._nice and os.geteuid() == 0 and self.uid is not None:
            os.setpriority(os.PRIO_USER, self.uid, 0)  # every process of the sandbox's uid: full priority again
        self._oom_seen = self._cgroup.oom_kills() if self._cgroup else 0
        self._fill_workspace()
        self.warm = True
        self._started = time.monotonic()

    def _fill_workspace(self) -> None:
        """Copy the world's files into the (empty) /workspace of a live sandbox no agent code has run in.

        The kernel's supervisor writes them (`put` requests on the host's channel; `put_files` in sandbox/kernel.py):
        inside the sandbox, as its uid, charged to its cgroup, as bwrap's --file would; folders 0755, files 0644,
        each created with O_EXCL|O_NOFOLLOW. The host checks first that /workspace is empty.
        """
        assert self.world_dir is not None
        wfd = self._open_workspace()
        if wfd is None:
            raise BenchmarkError("the warm sandbox's /workspace is not reachable")
        try:
            if os.listdir(wfd):
                raise BenchmarkError("the warm sandbox's /workspace is not empty")
        finally:
            os.close(wfd)
        batch: list[dict] = []
        size = 0
        for p in sorted(self.world_dir.rglob("*")):
            if p.is_symlink():
                continue
            rel = p.relative_to(self.world_dir).as_posix()
            if p.is_dir():
                batch.append({"path": rel, "dir": True})
            elif p.is_file():
                with open(p, "rb") as fh:
                    first = True
                    while True:
                        chunk = fh.read(PUT_CHUNK)
                        if not chunk and not first:
                            break
                        batch.append({"path": rel, "data": base64.b64encode(chunk).decode(), "append": not first})
                        size += len(chunk)
                        first = False
                        if size >= PUT_CHUNK:
                            self._put(batch)
                            batch, size = [], 0
                        if len(chunk) < PUT_CHUNK:
                            break
        if batch:
            self._put(batch)

    def _put(self, entries: list[dict]) -> None:
        nonce = secrets.token_hex(16)
        deadline = time.monotonic() + self.limits.start_wall_s
        if not self._send(_frame({"nonce": nonce, "put": entries}), deadline):
            raise BenchmarkError("the warm sandbox's kernel did not take the world's files")
        while True:
            kind, frame = self._chan.read(deadline)
            if kind != "frame":
                raise BenchmarkError(f"the warm sandbox's kernel did not answer the world's files ({kind})")
            if frame.get("nonce") == nonce:
                break
        if frame.get("error") or frame.get("put") != len(entries):
            raise BenchmarkError(f"could not copy the world's files into the warm sandbox: {frame.get('error')}")

    def _preload(self, modules: tuple[str, ...]) -> None:
        """A pool's blank: import `modules` in the kernel's worker, leaving the agent's namespace empty."""
        from sandbox.pool import PRELOAD_CELL

        if modules:
            res = self.run_python(PRELOAD_CELL.format(mods=list(modules)))
            if res.error or res.violation or res.restarted or self.violations:
                raise BenchmarkError(f"the preload cell failed: {res.as_text()[:500]}")
        self.cells = 0

    def _cold_start(self) -> None:
        """Lease a uid, stage the neutral /opt tree, and launch the kernel under bwrap; wait for its ready frame.

        As root the roots are shown through overlays staged inside a throw-away mount namespace (`unshare
        --mount`): a private tmpfs on /opt holds the layers, so neither the unprivileged uid's lack of access to
        e.g. /root nor any host path leaks into the sandbox. Not as root, bwrap binds the roots where they are.
        """
        from sandbox.seal import masked_paths

        as_root = os.geteuid() == 0
        if self._lease is None:
            self._lease = _UidLease()
        self.uid = self._lease.uid
        self._host_tmp = Path(tempfile.mkdtemp(prefix=SANDBOX_PREFIX))
        (self._host_tmp / "owner").write_text(f"{os.getpid()} {_starttime(os.getpid())}\n")
        os.chmod(self._host_tmp, 0o711)
        self._cgroup = _Cgroup.create(f"discern-sandbox-{self.uid}", self.limits) if as_root else None
        self.cgroup_mode = self._cgroup.mode if self._cgroup else None
        self.cpu_capped = bool(self._cgroup and self._cgroup.cpu_capped)
        self._oom_seen = self._cgroup.oom_kills() if self._cgroup else 0

        venv = Path(sys.prefix).resolve() if sys.prefix != sys.base_prefix else None
        base = Path(sys.base_prefix).resolve()
        base_in_usr = base == Path("/usr") or Path("/usr") in base.parents
        mapping: dict[Path, str] = {}  # host root -> where the sandbox sees it
        if as_root:
            if not base_in_usr:
                mapping[base] = OPT_PYTHON
            if venv:
                mapping[venv] = OPT_VENV
        else:
            mapping = {r: str(r) for r in _python_roots() if not (r == Path("/usr") or Path("/usr") in r.parents)}

        def inside(p: Path) -> str:
            for root, to in sorted(mapping.items(), key=lambda kv: -len(str(kv[0]))):
                if p == root or root in p.parents:
                    return to + str(p)[len(str(root)):]
            return str(p)

        self._masks = masked_paths()
        masks = [inside(p) + ("/" if p.is_dir() else "") for p in self._masks]
        py_home = inside(venv) if venv else inside(base)
        python = f"{py_home}/bin/python{sys.version_info.major}.{sys.version_info.minor}"
        if not (venv or base).joinpath("bin", Path(python).name).exists():
            python = f"{py_home}/bin/python3"
        env = {
            "PATH": f"{py_home}/bin:/usr/local/bin:/usr/bin:/bin",
            "HOME": "/workspace", "TMPDIR": "/tmp", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            # tool caches (fontconfig, matplotlib, numba) go to /tmp, not $HOME: a cache written in /workspace would be
            # collected as the agent's work product and fill its artifacts with files it never wrote
            "XDG_CACHE_HOME": "/tmp/.cache", "MPLCONFIGDIR": "/tmp/.cache/matplotlib",
            "MPLBACKEND": "Agg", "NUMBA_CACHE_DIR": NUMBA_CACHE_DIR, "PYTHONDONTWRITEBYTECODE": "1",
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "KERNEL_SCRATCH": "/tmp", "USER": "agent",
        }
        if as_root and not base_in_usr and any((base / "lib").glob("libpython3*.so*")):
            env["LD_LIBRARY_PATH"] = f"{OPT_PYTHON}/lib"  # the base interpreter's RUNPATH names its host folder

        fds: list[int] = []
        info_r, info_w = os.pipe()
        fds.append(info_w)
        # the kernel's channel: two pipes on descriptors of their own. Not the sandbox's stdio: bwrap's init (pid 1
        # inside, dumpable) keeps fds 0-2 and closes every other, so agent code could reopen 0-2 via /proc/1/fd.
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        fds += [req_r, rep_w]
        pre: list[str] = []
        if as_root:
            roots = {to: Path(to) for to in mapping.values()}  # bwrap binds the staged overlays onto themselves
            q = shlex.quote
            Path("/opt").mkdir(mode=0o755, exist_ok=True)  # the private tmpfs goes over it; the host's /opt is untouched
            pre += ["mount -t tmpfs -o size=64m,mode=755 discern /opt", "mkdir -p /opt/.l/empty"]
            for root, to in sorted(mapping.items()):
                name = Path(to).name
                pre += [f"mkdir -p /opt/.l/{name} {q(to)}", f"mount --bind {q(str(root))} /opt/.l/{name}"]
                lower = f"/opt/.l/{name}:/opt/.l/empty"
                if root == venv:
                    gen = self._host_tmp / "venvgen"
                    _venv_layer(venv, base, mapping.get(base, str(base)), gen)
                    pre += [f"mkdir -p /opt/.l/{name}-gen", f"cp -a {q(str(gen))}/. /opt/.l/{name}-gen/"]
                    lower = f"/opt/.l/{name}-gen:/opt/.l/{name}"
                pre += [f"mount -t overlay overlay -o ro,lowerdir={lower} {q(to)}"]
        else:
            roots = {to: root for root, to in mapping.items()}
        bargs = self._bwrap_args(roots, masks, env, fds, info_w)
        afd = os.memfd_create("bwrap-args", 0)
        os.write(afd, b"".join(a.encode() + b"\0" for a in bargs))
        os.lseek(afd, 0, 0)
        fds.append(afd)
        lim = self.limits
        # bwrap takes the command on its own argv; -I isolates from PYTHON* variables and the user site
        argv = ["bwrap", "--args", str(afd), python, "-I", "-B", "/opt/kernel/kernel.py", str(req_r), str(rep_w)]
        if as_root:
            # rlimits are set here, after the staging mounts, so that they bind the unprivileged uid
            argv = ["prlimit", f"--cpu={lim.cpu_seconds}:{lim.cpu_seconds + 5}", f"--as={lim.address_space}",
                    f"--nproc={lim.processes}", f"--fsize={lim.file_size}", "--core=0", "--",
                    "setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups", "--inh-caps=-all", "--"] + argv
            script = " && ".join(pre + ["exec " + " ".join(shlex.quote(a) for a in argv)])
            argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script]
        try:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd="/",
                pass_fds=fds, preexec_fn=self._set_child, start_new_session=True,
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
            )
        except BaseException:
            os.close(req_w)
            os.close(rep_r)
            raise
        finally:
            for fd in fds:
                os.close(fd)
        self._started = time.monotonic()
        self._req_w, self._rep_r = req_w, rep_r
        os.set_blocking(req_w, False)
        self._chan = _Channel(rep_r)
        with os.fdopen(info_r, "rb") as fh:
            info = fh.read(1 << 16)  # bwrap closes it once the child is set up
        try:
            self._child_pid = json.loads(info.decode() or "{}").get("child-pid")
        except (json.JSONDecodeError, UnicodeDecodeError):
            self._child_pid = None
        self._child_start = _starttime(self._child_pid) if self._child_pid else None
        kind, frame = self._chan.read(time.monotonic() + self.limits.start_wall_s)
        if kind != "frame" or not frame.get("ready"):
            err = b""
            if self._proc.poll() is not None or kind != "timeout":
                os.set_blocking(self._proc.stderr.fileno(), False)
                try:
                    err = os.read(self._proc.stderr.fileno(), 1 << 16)
                except OSError:
                    pass
            self.close()
            raise BenchmarkError(f"the sandbox for {self.label} did not start ({err.decode(errors='replace').strip() or kind}); check that bubblewrap works as an unprivileged user")
        if self._child_pid:
            self._kernel_pid = self._find_kernel()
            self._worker_pid = self._find_worker()
            try:
                self._ws_dev = os.stat(f"/proc/{self._child_pid}/root/workspace").st_dev
            except OSError:
                self._ws_dev = None

    def _find_worker(self) -> int | None:
        """Host pid of the kernel's worker (the process that runs cells): the supervisor's one child."""
        if not self._kernel_pid:
            return None
        for _ in range(200):
            try:
                kids = Path(f"/proc/{self._kernel_pid}/task/{self._kernel_pid}/children").read_text().split()
                if kids:
                    return int(kids[0])
            except (OSError, ValueError):
                return None
            time.sleep(0.005)
        return None

    def _find_kernel(self) -> int | None:
        """Host pid of the kernel: the one child of the sandbox's init (found before any cell runs)."""
        try:
            kids = Path(f"/proc/{self._child_pid}/task/{self._child_pid}/children").read_text().split()
            if kids:
                return int(kids[0])
        except (OSError, ValueError):
            pass
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    if Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[1] == str(self._child_pid).encode():
                        return int(name)
                except (OSError, IndexError):
                    continue
        return None

    def _kill(self) -> None:
        if self._proc and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait(timeout=10)

    def _teardown(self) -> None:
        """Kill and forget the running sandbox; keep the uid lease (a restart reuses it)."""
        self._kill()
        if self._proc:
            for s in (self._proc.stderr,):
                if s:
                    try:
                        s.close()
                    except OSError:
                        pass
        for fd in (self._req_w, self._rep_r):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._req_w = self._rep_r = None
        if self.uid is not None and os.geteuid() == 0:
            _kill_uid(self.uid)
        if self._cgroup:
            self._cgroup.remove()
            self._cgroup = None
        if self._host_tmp:
            shutil.rmtree(self._host_tmp, ignore_errors=True)
            self._host_tmp = None
        self._proc = self._chan = None
        self._child_pid = self._kernel_pid = self._worker_pid = None
        self._threads = 0

    def close(self) -> None:
        self._teardown()
        if self._lease:
            self._lease.release()
            self._lease = None
        if self._pool_key is not None:
            from sandbox.pool import POOL

            POOL.stopped(self._pool_key)
            self._pool_key = None

    # -- cells
    def _send(self, data: bytes, deadline: float) -> bool:
        """Write a request without ever blocking past the deadline (the kernel may not be reading)."""
        assert self._proc and self._req_w is not None
        fd = self._req_w
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_WRITE)
        try:
            view = memoryview(data)
            while view:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    if time.monotonic() >= deadline:
                        return False
                    continue
                try:
                    n = os.write(fd, view)
                except BlockingIOError:
                    continue
                except (BrokenPipeError, OSError):
                    return False
                view = view[n:]
            return True
        finally:
            sel.close()

    def _record(self, res: CellResult, v: Violation) -> None:
        self.violations.append(v)
        if res.violation is None:
            res.violation = v

    def run_python(self, code: str) -> CellResult:
        """Run one cell in the persistent kernel. Never raises for what the code does: violations are recorded."""
        try:
            return self._run_cell(code)
        except BenchmarkError:
            raise  # the sandbox could not be (re)started at all: a harness fault, not the agent's
        except Exception as exc:  # noqa: BLE001 - nothing agent code does may escape as an exception
            v = Violation(kind="crash", detail=f"the sandbox failed on this cell ({type(exc).__name__}: {exc}); it was restarted", cell=self.cells)
            self.violations.append(v)
            try:
                self._restart()
            except BenchmarkError:
                pass
            return CellResult(error=v.detail, violation=v, restarted=True)

    def _run_cell(self, code: str) -> CellResult:
        self.cells += 1
        cell = self.cells
        t0 = time.monotonic()
        task_left = self.limits.task_wall_s - (t0 - self._started)
        if task_left <= 0:
            v = Violation(kind="task_timeout", detail=f"the task's {self.limits.task_wall_s:.0f} s wall-clock limit is spent", cell=cell)
            self.violations.append(v)
            return CellResult(error="task wall-clock limit reached; no more code can run", violation=v)
        if self._proc is None or self._proc.poll() is not None:
            self._restart()
        assert self._proc and self._chan
        timeout = min(self.limits.cell_wall_s, task_left)
        deadline = t0 + timeout
        nonce = secrets.token_hex(16)
        discarded0, bad0 = self._chan.discarded, self._chan.bad_frames
        stale = 0
        sent = self._send(_frame({"nonce": nonce, "code": code}), deadline)
        kind, frame = ("eof", None) if not sent and self._proc.poll() is not None else (None, None)
        while kind is None:
            kind, frame = self._chan.read(deadline)
            if kind == "frame" and frame.get("nonce") != nonce:
                stale += 1  # forged, or a stale reply: discard and keep waiting for ours
                kind = None
        wall = time.monotonic() - t0
        res = CellResult(wall_s=round(wall, 3))
        if kind == "frame":
            res.stdout, res.stderr = str(frame.get("stdout") or ""), str(frame.get("stderr") or "")
            res.error = None if frame.get("error") is None else str(frame.get("error"))
            res.truncated = bool(frame.get("truncated"))
            res.killed = int(frame.get("killed") or 0) if isinstance(frame.get("killed"), int) else 0
            res.threads = frame.get("threads") if isinstance(frame.get("threads"), int) else 0
            forged = frame.get("forged") if isinstance(frame.get("forged"), int) else 0
            if frame.get("early") is True:
                self._record(res, Violation(kind="forbidden", detail="the cell reported its own end while its code was still running (a forged end-of-cell message); its code was stopped there", cell=cell))
            if forged:
                self._record(res, Violation(kind="forbidden", detail=f"{forged} forged or out-of-turn message(s) on the worker's end-of-cell pipe were ignored", cell=cell))
            if os.geteuid() == 0 and self.uid is not None and self._kernel_pid:  # do not trust the kernel with this: it runs agent code
                res.killed += _kill_uid(self.uid, keep={self._proc.pid, self._child_pid, self._kernel_pid, self._worker_pid})
            kind_ = _classify((res.error or "") + res.stderr[-2000:])
            if kind_:
                self._record(res, Violation(kind=kind_, detail=f"cell hit the sandbox's {kind_} limit", cell=cell))
        elif kind == "overflow":
            self._kill()
            self._record(res, Violation(kind="forbidden", detail=f"a {frame}-byte frame on the kernel channel exceeds {MAX_FRAME} bytes; the kernel was killed and its state lost", cell=cell))
            res.error, res.restarted = res.violation.detail, True
        else:
            if kind == "eof":  # the channel closes when the kernel dies; bwrap exits a moment later
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            alive = self._proc.poll() is None
            self._kill()
            if alive and kind == "eof":
                vk: ViolationKind = "crash"
                v = Violation(kind=vk, detail="the kernel closed its channel and was killed; its state was lost", cell=cell)
            elif alive:
                vk = "timeout" if timeout == self.limits.cell_wall_s else "task_timeout"
                v = Violation(kind=vk, detail=f"cell exceeded {timeout:.0f} s wall clock and was killed; kernel state was lost", cell=cell)
            else:
                rc = self._proc.returncode
                # bwrap exits with 128 + signal when the sandboxed kernel dies from a signal
                sig = -rc if rc and rc < 0 else rc - 128 if rc and rc > 128 else None
                vk = "cpu" if sig == signal.SIGXCPU else "memory" if sig == signal.SIGKILL else "crash"
                v = Violation(kind=vk, detail=f"the kernel died (exit {rc}); its state was lost", cell=cell)
            self._record(res, v)
            res.error, res.restarted = v.detail, True
        junk, bad = self._chan.discarded - discarded0, self._chan.bad_frames - bad0
        if junk or bad or stale:
            self._record(res, Violation(kind="forbidden", detail=f"discarded {junk} bytes of unframed data and {bad + stale} forged or stale frame(s) on the kernel channel", cell=cell))
        if self._cgroup:
            ooms = self._cgroup.oom_kills()
            if ooms > self._oom_seen and not (res.violation and res.violation.kind == "memory"):
                self._record(res, Violation(kind="memory", detail=f"the sandbox's {self.limits.memory_bytes} byte memory cap was hit; {ooms - self._oom_seen} process(es) were killed", cell=cell))
            self._oom_seen = max(self._oom_seen, ooms)
        if res.restarted:
            self._restart()
        return res

    def _restart(self) -> None:
        self.restarts += 1
        self._teardown()
        started = self._started
        self._cold_start()  # with this world's files; never a pool's sandbox (the uid lease is kept)
        self._started = started  # the task's wall clock keeps running across restarts

    # -- outputs
    def _open_workspace(self) -> int | None:
        """A descriptor on the live sandbox's /workspace, or None; checked against pid reuse."""
        if self._child_pid is None or self._proc is None or self._proc.poll() is not None or self._ws_dev is None:
            return None
        try:
            pfd = os.open(f"/proc/{self._child_pid}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            with open(os.open("stat", os.O_RDONLY | os.O_CLOEXEC, dir_fd=pfd), "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[19].decode() != self._child_start:
                    return None
            rfd = os.open("root", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=pfd)
            try:
                wfd = os.open("workspace", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=rfd)
            finally:
                os.close(rfd)
            if os.fstat(wfd).st_dev != self._ws_dev:
                os.close(wfd)
                return None
            return wfd
        except (OSError, IndexError):
            return None
        finally:
            os.close(pfd)

    def collect(self, dest: Path, max_bytes: int = 64 << 20, *, max_file_bytes: int | None = None,
                max_files: int = 1000, max_depth: int = 16, max_entries: int | None = None,
                wall_s: float | None = None) -> list[str]:
        """Copy the files the agent wrote in /workspace (not the world's unchanged inputs) to `dest`.

        Returns their paths relative to /workspace. Only regular single-link files on the workspace tmpfs are
        copied; every component is opened with O_NOFOLLOW from its parent's descriptor (see module doc). What is
        skipped, and why, is appended to `collect_log`: at most COLLECT_LOG_LINES lines per collection, then one
        line counting the rest by reason.

        Bounded inside the task clock: at most `max_entries` (limits.collect_entries) directory entries are
        examined, and it stops at min(limits.collect_wall_s, what is left of the task's wall clock, at least 2 s).
        A cap that cuts collection short is recorded as a "collection" violation (kept in the trajectory), with the
        summary; `collect_s` and `collect_summary` say what the last collection cost and skipped.
        """
        t0 = time.monotonic()
        dest = Path(dest)
        per_file = max_bytes if max_file_bytes is None else min(max_file_bytes, max_bytes)
        max_entries = self.limits.collect_entries if max_entries is None else max_entries
        task_left = self.limits.task_wall_s - (t0 - self._started) if self._started else self.limits.task_wall_s
        budget = min(self.limits.collect_wall_s if wall_s is None else wall_s, max(task_left, 2.0))
        deadline = t0 + budget
        wfd = self._open_workspace()
        if wfd is None:
            self.collect_log.append("workspace not reachable (sandbox not running); nothing collected")
            return []
        inputs = {str(p.relative_to(self.world_dir)): p for p in self.world_dir.rglob("*") if p.is_file() and not p.is_symlink()}
        copied: list[str] = []
        total = 0
        entries = 0
        cut: list[str] = []  # why collection stopped early, if it did
        log = _BoundedLog(self.collect_log, COLLECT_LOG_LINES)
        self._clog = log

        def walk(dfd: int, rel: str, depth: int) -> None:
            nonlocal total, entries
            names: list[str] = []
            try:
                with os.scandir(dfd) as it:  # never more than the entry budget in memory, however big the folder
                    for e in it:
                        if entries + len(names) >= max_entries:
                            if not cut:
                                cut.append(f"the {max_entries}-entry cap")
                            break
                        names.append(e.name)
            except OSError as exc:
                log.append(f"{rel or '.'}: cannot list ({exc.strerror})", "unlistable")
                return
            names.sort()
            for name in names:
                entries += 1
                if entries > max_entries:
                    if not cut:
                        cut.append(f"the {max_entries}-entry cap")
                    return
                if time.monotonic() > deadline:
                    if not cut or "wall" not in cut[-1]:
                        cut.append(f"the {budget:.1f} s wall-clock cap")
                    return
                r = f"{rel}/{name}" if rel else name
                if len(copied) >= max_files:
                    log.append(f"{r}: skipped, the {max_files}-file cap is reached", "file cap")
                    if not cut:
                        cut.append(f"the {max_files}-file cap")
                    return
                if not _printable(name):
                    log.append(f"{r!r}: skipped, unprintable name", "unprintable name")
                    continue
                try:
                    st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    if depth >= max_depth:
                        log.append(f"{r}: skipped, deeper than {max_depth}", "too deep")
                        continue
                    try:
                        sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
                    except OSError:
                        continue
                    try:
                        if os.fstat(sub).st_dev == self._ws_dev:
                            walk(sub, r, depth + 1)
                    finally:
                        os.close(sub)
                    continue
                if not stat.S_ISREG(st.st_mode):
                    what = "symlink" if stat.S_ISLNK(st.st_mode) else "fifo" if stat.S_ISFIFO(st.st_mode) else \
                        "socket" if stat.S_ISSOCK(st.st_mode) else "device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "special file"
                    log.append(f"{r}: skipped, a {what}", what)
                    continue
                if st.st_nlink != 1 or st.st_dev != self._ws_dev:
                    log.append(f"{r}: skipped, a hard link ({st.st_nlink} links)", "hard link")
                    continue
                if st.st_size > per_file or total + st.st_size > max_bytes:
                    log.append(f"{r}: skipped, {st.st_size} bytes exceeds the per-file cap {per_file} or the total cap {max_bytes}", "too big")
                    continue
                self._copy_one(dfd, name, st, r, dest, inputs.get(r), min(per_file, max_bytes - total), copied)
                if copied and copied[-1] == r:
                    total += (dest / r).stat().st_size

        try:
            walk(wfd, "", 0)
        finally:
            os.close(wfd)
            self._clog = None
        self.collect_s = round(time.monotonic() - t0, 3)
        log.close()
        if cut:  # always kept, however full the log
            self.collect_log.append(f"collection stopped at {' and '.join(cut)} after {entries} entries and "
                                    f"{self.collect_s} s; the rest of /workspace was not examined")
        self.collect_summary = {"copied": len(copied), "entries": entries, "wall_s": self.collect_s, "budget_s": round(budget, 3),
                                "skipped": dict(log.counts), "cut": cut}
        if cut:
            reasons = ", ".join(f"{n} {k}" for k, n in sorted(log.counts.items())) or "none"
            self._record_collect(Violation(kind="collection", detail=(
                f"collection stopped at {' and '.join(cut)} after {entries} entries and {self.collect_s} s "
                f"({len(copied)} file(s) copied; skipped: {reasons})")))
        return copied

    def _record_collect(self, v: Violation) -> None:
        self.violations.append(v)

    def _log(self, line: str, reason: str) -> None:
        (self._clog or _BoundedLog(self.collect_log, COLLECT_LOG_LINES)).append(line, reason)

    def _copy_one(self, dfd: int, name: str, st: os.stat_result, rel: str, dest: Path, world_file: Path | None,
                  cap: int, copied: list[str]) -> None:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=dfd)
        except OSError as exc:
            self._log(f"{rel}: skipped, cannot open ({exc.strerror})", "unreadable")
            return
        target = dest / rel
        try:
            fst = os.fstat(fd)
            if not stat.S_ISREG(fst.st_mode) or fst.st_dev != self._ws_dev or fst.st_ino != st.st_ino or fst.st_nlink != 1:
                self._log(f"{rel}: skipped, changed while being collected", "changed")
                return
            target.parent.mkdir(parents=True, exist_ok=True)
            h = hashlib.sha256()
            n = 0
            out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            try:
                while True:
                    chunk = os.read(fd, 1 << 20)
                    if not chunk:
                        break
                    n += len(chunk)
                    if n > cap:
                        break
                    h.update(chunk)
                    os.write(out, chunk)
            finally:
                os.close(out)
            if n > cap:
                target.unlink()
                self._log(f"{rel}: skipped, grew past the {cap}-byte cap while being read", "too big")
                return
            if world_file is not None and world_file.stat().st_size == n:
                wh = hashlib.sha256()
                with open(world_file, "rb") as fh:
                    for chunk in iter(lambda: fh.read(1 << 20), b""):
                        wh.update(chunk)
                if wh.digest() == h.digest():
                    target.unlink()  # an unchanged input of the world, not a work product
                    _prune_empty(target.parent, dest)  # nor is the folder made for it (the world's own subfolder)
                    return
            copied.append(rel)
        except OSError as exc:
            self._log(f"{rel}: skipped ({exc.strerror})", "unreadable")
            if target.exists() and not target.is_symlink():
                target.unlink()
        finally:
            os.close(fd)
