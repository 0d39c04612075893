"""A sealed per-task workspace built with bubblewrap, holding a persistent Python kernel.

What the sandboxed code can see: read-only /usr (tools such as samtools, bedtools), the read-only Python
environment (the venv with macs3, scanpy, pydeseq2, ... and its base interpreter), a copy of ONE world's public
files in a size-capped tmpfs at /workspace (its working directory), and a small /tmp. Nothing else: not the
repository (graders, goldens, locks, manifests), not the world cache, not sibling worlds, not /root or /home.

How it is sealed:
  * `setpriv` drops to an unprivileged uid per concurrency slot before `bwrap` runs, so process limits apply
    (the kernel exempts root from RLIMIT_NPROC); directories root can open but that uid cannot are passed to
    bwrap as already-open file descriptors (`--ro-bind-fd`).
  * `--unshare-all` (no network but loopback, own pid/ipc/uts namespaces), `--clearenv` (no API keys or host
    variables), `--die-with-parent`, `--new-session`.
  * rlimits: CPU seconds, address space, processes, file size; tmpfs `--size` caps the workspace's disk use;
    the harness enforces a wall-clock limit per cell and per task and kills the whole sandbox on overrun.
"""
from __future__ import annotations

import json
import os
import resource
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from benchmark.errors import BenchmarkError

KERNEL_SRC = Path(__file__).with_name("kernel.py")
UID_BASE = 61000
GiB = 1 << 30


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandbox. Defaults suit the shipped tracks on a 2-core, 24 GiB machine."""

    cpu_seconds: int = 1200  # RLIMIT_CPU of the kernel and each child, cumulative per process
    address_space: int = 12 * GiB  # RLIMIT_AS per process (numba/LLVM reserve large virtual ranges)
    processes: int = 128  # RLIMIT_NPROC of the sandbox's uid
    file_size: int = 1 * GiB  # RLIMIT_FSIZE: largest single file
    workspace_bytes: int = 2 * GiB  # tmpfs size of /workspace
    tmp_bytes: int = 1 * GiB  # tmpfs size of /tmp
    cell_wall_s: float = 300.0  # wall clock per run_python call
    task_wall_s: float = 1800.0  # wall clock for the whole task
    start_wall_s: float = 60.0


ViolationKind = Literal["timeout", "task_timeout", "memory", "cpu", "processes", "disk", "file_size", "crash", "forbidden"]


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


def _python_roots() -> list[Path]:
    """The venv and its base interpreter: what must be visible (read-only) for the kernel and the tools."""
    roots = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    return sorted(roots)


def _link_tree(src: Path, dest: Path) -> None:
    """Hard-link (else copy) a world's files into a folder the sandbox uid can read (seed 000 App. D)."""
    for p in sorted(src.rglob("*")):
        target = dest / p.relative_to(src)
        if p.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(p, target)
        except OSError:
            shutil.copyfile(p, target)
        if not os.stat(target).st_mode & 0o004:
            os.chmod(target, 0o644)
    dest.mkdir(parents=True, exist_ok=True)
    for d in [dest, *[q for q in dest.rglob("*") if q.is_dir()]]:
        os.chmod(d, 0o755)


class Sandbox:
    """One fresh sealed workspace for one task. Use as a context manager; `run_python` keeps state between cells."""

    def __init__(self, world_dir: Path, limits: Limits = Limits(), slot: int = 0, label: str = "task"):
        if not shutil.which("bwrap"):
            raise BenchmarkError("bubblewrap (bwrap) is not installed; run `bash scripts/setup.sh`")
        self.world_dir = Path(world_dir).resolve()
        self.limits = limits
        self.uid = UID_BASE + slot
        self.label = label
        self.violations: list[Violation] = []
        self.cells = 0
        self._proc: subprocess.Popen | None = None
        self._child_pid: int | None = None
        self._host_tmp: Path | None = None
        self._started = 0.0
        self.restarts = 0

    # -- lifecycle
    def __enter__(self) -> "Sandbox":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _argv(self, binds: dict[str, str], info_fd: int, drop_to: int | None) -> list[str]:
        lim = self.limits
        argv = []
        if drop_to is not None:
            # rlimits are set here, after the staging mounts, so that they bind the unprivileged uid
            argv += ["prlimit", f"--cpu={lim.cpu_seconds}:{lim.cpu_seconds + 5}", f"--as={lim.address_space}",
                     f"--nproc={lim.processes}", f"--fsize={lim.file_size}", "--core=0", "--",
                     "setpriv", f"--reuid={drop_to}", f"--regid={drop_to}", "--clear-groups", "--inh-caps=-all", "--"]
        argv += ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
                "--ro-bind", "/usr", "/usr",
                "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/sbin", "/sbin"]
        if Path("/lib64").exists():
            argv += ["--symlink", "usr/lib64", "/lib64"]
        for etc in ("/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime", "/etc/mime.types"):
            if Path(etc).exists():
                argv += ["--ro-bind", etc, etc]
        argv += ["--proc", "/proc", "--dev", "/dev",
                 "--size", str(lim.tmp_bytes), "--tmpfs", "/tmp",
                 "--size", str(lim.workspace_bytes), "--tmpfs", "/workspace"]
        for dest, src in sorted(binds.items()):
            argv += ["--ro-bind", src, dest]
        venv_bin = Path(sys.prefix) / "bin"
        env = {
            "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": "/workspace", "TMPDIR": "/tmp", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "MPLBACKEND": "Agg", "NUMBA_CACHE_DIR": "/tmp/numba", "PYTHONDONTWRITEBYTECODE": "1",
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "KERNEL_COPY_FROM": "/world", "KERNEL_SCRATCH": "/tmp", "USER": "agent",
        }
        for k, v in env.items():
            argv += ["--setenv", k, v]
        argv += ["--info-fd", str(info_fd), "--chdir", "/workspace",
                 str(venv_bin / "python"), "-I", "/opt/kernel/kernel.py"]
        # -I isolates from PYTHON* variables and the user site; the venv's site-packages stay importable.
        return argv

    def _set_file_limits(self) -> None:  # as root: the staging mounts must not be limited; prlimit sets the rest
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    def _set_limits(self) -> None:  # not root: runs in the child before exec
        lim = self.limits
        resource.setrlimit(resource.RLIMIT_CPU, (lim.cpu_seconds, lim.cpu_seconds + 5))
        resource.setrlimit(resource.RLIMIT_AS, (lim.address_space, lim.address_space))
        resource.setrlimit(resource.RLIMIT_NPROC, (lim.processes, lim.processes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim.file_size, lim.file_size))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    def start(self) -> None:
        """Stage the read-only roots, then launch the kernel under bwrap as the slot's unprivileged uid.

        As root, the roots are first bind-mounted into a private staging folder inside a throw-away mount
        namespace (`unshare --mount`), because the unprivileged uid cannot traverse e.g. /root to reach a
        pyenv interpreter; the binds vanish with the namespace. Not as root, bwrap binds the roots directly.
        """
        self._host_tmp = Path(tempfile.mkdtemp(prefix="benchmark-sandbox-"))
        os.chmod(self._host_tmp, 0o711)
        kdir = self._host_tmp / "kernel"
        kdir.mkdir()
        shutil.copy2(KERNEL_SRC, kdir / "kernel.py")
        os.chmod(kdir, 0o755)
        os.chmod(kdir / "kernel.py", 0o644)
        world = self._host_tmp / "world"
        _link_tree(self.world_dir, world)
        binds = {str(r): r for r in _python_roots()}
        binds["/world"] = world
        binds["/opt/kernel"] = kdir
        as_root = os.geteuid() == 0
        staged: dict[str, str] = {}
        pre: list[str] = []
        for i, (dest, src) in enumerate(sorted(binds.items())):
            if as_root:
                stage = self._host_tmp / "stage" / str(i)
                stage.mkdir(parents=True)
                os.chmod(stage.parent, 0o755)
                pre.append(f"mount --bind {shlex.quote(str(src))} {shlex.quote(str(stage))}")
                staged[dest] = str(stage)
            else:
                staged[dest] = str(src)
        info_r, info_w = os.pipe()
        argv = self._argv(staged, info_w, drop_to=self.uid if as_root else None)
        if as_root:
            script = " && ".join(pre + ["exec " + " ".join(shlex.quote(a) for a in argv)])
            argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script]
        try:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                pass_fds=[info_w], preexec_fn=self._set_limits if not as_root else self._set_file_limits,
                start_new_session=True, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
            )
        finally:
            os.close(info_w)
        self._started = time.monotonic()
        with os.fdopen(info_r, "rb") as fh:
            info = fh.read()  # bwrap closes it once the child is set up
        try:
            self._child_pid = json.loads(info.decode() or "{}").get("child-pid")
        except json.JSONDecodeError:
            self._child_pid = None
        line = self._readline(self.limits.start_wall_s)
        if not line or not json.loads(line).get("ready"):
            err = self._proc.stderr.read().decode(errors="replace") if self._proc.poll() is not None else ""
            self.close()
            raise BenchmarkError(f"the sandbox for {self.label} did not start ({err.strip() or 'no reply'}); check that bubblewrap works as an unprivileged user")

    def _readline(self, timeout: float) -> str | None:
        assert self._proc and self._proc.stdout
        sel = selectors.DefaultSelector()
        sel.register(self._proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        buf = b""
        fd = self._proc.stdout.fileno()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if not sel.select(left):
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return buf.decode(errors="replace") if buf else None
            buf += chunk
            if buf.endswith(b"\n"):
                return buf.decode(errors="replace")

    def _kill(self) -> None:
        if self._proc and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait(timeout=10)

    def close(self) -> None:
        self._kill()
        if self._proc:
            for s in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
                if s:
                    s.close()
        if self._host_tmp:
            shutil.rmtree(self._host_tmp, ignore_errors=True)
            self._host_tmp = None

    # -- cells
    def run_python(self, code: str) -> CellResult:
        """Run one cell in the persistent kernel. Never raises for what the code does: violations are recorded."""
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
        assert self._proc and self._proc.stdin
        try:
            self._proc.stdin.write((json.dumps({"code": code}) + "\n").encode())
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass
        timeout = min(self.limits.cell_wall_s, task_left)
        line = self._readline(timeout)
        wall = time.monotonic() - t0
        if line is None:
            alive = self._proc.poll() is None
            self._kill()
            if alive:
                kind: ViolationKind = "timeout" if timeout == self.limits.cell_wall_s else "task_timeout"
                v = Violation(kind=kind, detail=f"cell exceeded {timeout:.0f} s wall clock and was killed; kernel state was lost", cell=cell)
            else:
                rc = self._proc.returncode
                # bwrap exits with 128 + signal when the sandboxed kernel dies from a signal
                sig = -rc if rc and rc < 0 else rc - 128 if rc and rc > 128 else None
                kind = "cpu" if sig == signal.SIGXCPU else "memory" if sig == signal.SIGKILL else "crash"
                v = Violation(kind=kind, detail=f"the kernel died (exit {rc}); its state was lost", cell=cell)
            self.violations.append(v)
            self._restart()
            return CellResult(error=v.detail, wall_s=round(wall, 3), violation=v, restarted=True)
        reply = json.loads(line)
        res = CellResult(stdout=reply.get("stdout", ""), stderr=reply.get("stderr", ""), error=reply.get("error"),
                         truncated=reply.get("truncated", False), wall_s=round(wall, 3))
        kind = _classify((res.error or "") + res.stderr[-2000:])
        if kind:
            res.violation = Violation(kind=kind, detail=f"cell hit the sandbox's {kind} limit", cell=cell)
            self.violations.append(res.violation)
        return res

    def _restart(self) -> None:
        self.restarts += 1
        self.close()
        started = self._started
        self.start()
        self._started = started  # the task's wall clock keeps running across restarts

    # -- outputs
    def collect(self, dest: Path, max_bytes: int = 64 << 20) -> list[str]:
        """Copy files the agent wrote in /workspace (not the world's own inputs) to `dest`; returns their paths."""
        if self._child_pid is None or self._proc is None or self._proc.poll() is not None:
            return []
        root = Path(f"/proc/{self._child_pid}/root/workspace")
        inputs = {str(p.relative_to(self.world_dir)) for p in self.world_dir.rglob("*") if p.is_file()}
        copied, total = [], 0
        try:
            files = sorted(p for p in root.rglob("*") if p.is_file())
        except OSError:
            return []
        for p in files:
            rel = str(p.relative_to(root))
            if rel in inputs:
                continue
            size = p.stat().st_size
            if total + size > max_bytes:
                continue
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, target)
            copied.append(rel)
            total += size
        return copied
