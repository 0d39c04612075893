"""CPU of a whole process tree: a command run in its own cpu-accounting cgroup, or by rusage where none is writable.

`resource.getrusage(RUSAGE_CHILDREN)` only counts descendants that were waited for, all the way down. A `run`
loses some of its tree that way: sandboxes (and the pool's ahead-of-time blanks) are torn down with SIGKILL and
bwrap's --die-with-parent, and what they had spent is never reaped into the harness's account. A cgroup counts
every process started inside it, reaped or not, so where one can be made (as root: cgroup v1 `cpuacct`, or a
v2 `cpu.stat` under this process's own cgroup) `Meter.run` starts the command inside a fresh one, waits for the
command and then for every process left in the cgroup, and reads its total. The sandbox moves its processes into
its own cgroups of the memory, pids and cpu controllers only, never cpuacct, so under v1 nothing leaves the count.

    m = Meter()                # m.mode: "cgroup-v1", "cgroup-v2" or "rusage"
    r = m.run(["python", "-c", "pass"], cwd=..., env=...)   # r.cpu (s), r.wall (s), r.rc, r.out, r.rusage_cpu
    m.close()
"""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

FS = Path("/sys/fs/cgroup")
JOIN = 'echo $$ > "$0" || exit 125; exec "$@"'  # the shell joins the cgroup, then becomes the command


@dataclass
class Measured:
    wall: float
    cpu: float  # the whole tree: cgroup total where a cgroup was used, else rusage_cpu
    rc: int
    out: str
    rusage_cpu: float  # user+sys of the reaped descendants only (RUSAGE_CHILDREN delta)
    leftover: int = 0  # processes still in the cgroup when the command exited (killed after LINGER_S)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Meter:
    LINGER_S = 30.0  # how long processes the command left behind may take to exit before they are killed

    def __init__(self, prefer_cgroup: bool = True):
        self.mode, self.root = "rusage", None
        if prefer_cgroup and os.geteuid() == 0:
            self._try_cgroup()

    def _try_cgroup(self) -> None:
        name = f"bench-figures-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        cands = []
        if (FS / "cpuacct" / "cpuacct.usage").exists():
            cands.append(("cgroup-v1", FS / "cpuacct"))
        if (FS / "cgroup.controllers").exists():
            own = next((ln.split(":", 2)[2] for ln in Path("/proc/self/cgroup").read_text().splitlines()
                        if ln.startswith("0::")), None)
            if own is not None:
                cands.append(("cgroup-v2", FS / own.lstrip("/")))
        for mode, base in cands:
            d = base / name
            try:
                d.mkdir()
            except OSError:
                continue
            probe = self._measure_in(d, mode, ["true"], None, None)
            if probe is not None and probe.rc == 0:
                self.mode, self.root = mode, d
                return
            shutil.rmtree(d, ignore_errors=True)

    def _usage(self, d: Path, mode: str) -> float:
        if mode == "cgroup-v1":
            return int((d / "cpuacct.usage").read_text()) / 1e9
        for line in (d / "cpu.stat").read_text().splitlines():
            k, v = line.split()
            if k == "usage_usec":
                return int(v) / 1e6
        raise OSError("no usage_usec in cpu.stat")

    def _measure_in(self, d: Path, mode: str, cmd: list[str], cwd, env, timeout: float | None = None) -> Measured | None:
        sub = d / f"m{uuid.uuid4().hex[:8]}"
        try:
            sub.mkdir()
        except OSError:
            return None
        try:
            c0, t0 = _children_cpu(), time.perf_counter()
            p = subprocess.run(["/bin/sh", "-c", JOIN, str(sub / "cgroup.procs"), *cmd], cwd=cwd, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
            wall = time.perf_counter() - t0
            rus = _children_cpu() - c0
            if p.returncode == 125:
                return None
            left = self._drain(sub)
            return Measured(wall, self._usage(sub, mode), p.returncode, p.stdout, rus, left)
        finally:
            self._rmdir(sub)

    def _drain(self, d: Path) -> int:
        """Wait for the processes the command left in the cgroup; kill them after LINGER_S. Returns how many."""
        procs = d / "cgroup.procs"
        first = None
        deadline = time.monotonic() + self.LINGER_S
        while True:
            pids = [int(x) for x in procs.read_text().split()]
            if first is None:
                first = len(pids)
            if not pids:
                return first
            if time.monotonic() > deadline:
                for pid in pids:
                    try:
                        os.kill(pid, 9)
                    except OSError:
                        pass
            time.sleep(0.05)

    @staticmethod
    def _rmdir(d: Path) -> None:
        for _ in range(200):
            try:
                d.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)

    def run(self, cmd: list[str], cwd=None, env=None, timeout: float | None = None) -> Measured:
        if self.root is not None:
            m = self._measure_in(self.root, self.mode, cmd, cwd, env, timeout)
            if m is not None:
                return m
        c0, t0 = _children_cpu(), time.perf_counter()
        p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        rus = _children_cpu() - c0
        return Measured(time.perf_counter() - t0, rus, p.returncode, p.stdout, rus)

    def close(self) -> None:
        if self.root is not None:
            self._rmdir(self.root)
            self.root = None

    def __enter__(self) -> "Meter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
