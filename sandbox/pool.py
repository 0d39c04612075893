"""Warm sandboxes (issue 20): sandboxes started ahead of time, each handed out to exactly one world.

A cold `Sandbox.start()` launches bwrap and a fresh kernel, and the agent's first cell then pays the heavy imports
(numpy, pandas, scanpy with its numba JIT, pydeseq2). The pool does both ahead of time, in the background, while
the previous world runs:

  * a *blank* is a complete sealed sandbox (its own uid lease, cgroup, seccomp filter, tmpfs /workspace, /tmp and
    /dev/shm, masks, kernel), started with NO world's files: its /workspace is empty. Its kernel's worker has run
    one cell of ours that imports the track's packages (`python_packages` of `worlds/<track>/track.yaml`, plus numpy
    and pandas), leaving the agent's namespace empty (only `__builtins__` and `__name__`); the worker is then stopped
    (SIGSTOP, like after every cell) until the world's first cell. Blanks are built niced (as root) so they yield the
    CPU to the world that runs; the nice value is reset when one is handed out.
  * `Sandbox.start()` takes a blank of its key (the limits that are fixed at start: rlimits, cgroup caps, tmpfs sizes;
    and the preload list), checks it (alive, no violation, its masks still `masked_paths()`, its /workspace empty),
    and copies the world's files into its /workspace (`Sandbox._fill_workspace`: a forked helper that joins the
    sandbox's cgroup and drops to its uid, writing through descriptors with O_NOFOLLOW|O_EXCL). The task's wall
    clock starts then. Any failure falls back to a cold start.
  * A blank is used once: it becomes that world's sandbox and is torn down when the world closes it. A blank never
    holds a world's files before it is handed out, and a sandbox is never returned to the pool, so no file, process,
    module global, /tmp or /dev/shm content of one world can reach another. A restart (after a timeout or a crash)
    is a cold start with the world's own files, as before.

What a world can tell: `sys.modules` already holds the preloaded packages (an `import` of them is instant), their
CPU time (a few seconds for scanpy) is already on the worker's RLIMIT_CPU account, and their memory (about 300 MB
for scanpy) on the sandbox's cgroup, as if the agent had imported them itself.

Sizing: `DISCERN_SANDBOX_POOL` (default 2) blanks at most, over all keys; 0 turns the pool off. Each key is kept at
as many blanks as the most sandboxes of that key ever live at once (a campaign with `--concurrency 2` keeps two),
and the least recently asked-for key gives way to a newer one. Blanks are built one at a time by one daemon thread,
which lives as long as the process: bwrap's --die-with-parent follows the *thread* that started it. A blank is
built only while a core is idle (`idle_cores`), when a caller waits for one (`wait_ready`), or once one has been
wanted for STARVE_S on a busy machine: on cores that worlds keep busy a blank saves no time and its imports are
often wasted.
"""
from __future__ import annotations

import atexit
import functools
import os
import threading
import time
import traceback
from dataclasses import fields
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# Limits fields fixed when a sandbox starts (rlimits, cgroup, tmpfs sizes); the others are read by the host per cell
BAKED = ("cpu_seconds", "address_space", "processes", "cpus", "memory_bytes", "file_size", "workspace_bytes",
         "tmp_bytes", "shm_bytes", "start_wall_s")
BASE_PRELOAD = ("numpy", "pandas")
MODULE_OF = {"scikit-learn": "sklearn", "pyyaml": "yaml", "pillow": "PIL", "beautifulsoup4": "bs4", "macs3": "MACS3"}
# Submodules an analysis imports from a package whose top level does not load them: `import scipy` leaves out
# scipy.stats (0.7 CPU-s, in most tracks' cells), `import pydeseq2` its DESeq2 classes, `import statsmodels` its api
PRELOAD_WITH = {"scipy": ("scipy.stats",), "statsmodels": ("statsmodels.api",),
                "pydeseq2": ("pydeseq2.dds", "pydeseq2.ds", "pydeseq2.default_inference")}
PRELOAD_MIN_CPU_S = 60  # a sandbox with a tighter RLIMIT_CPU gets no preload (it would spend its budget on imports)
MAX_FAILURES = 3  # builds of one key that may fail in a row before the pool stops trying it
QUIET_S = 0.25  # the builder waits this long after a sandbox starts: the hand-out and the world's first moments go first
IDLE_MIN = 0.75  # cores that must be idle (over the last QUIET_S) before the builder starts a blank
STARVE_S = 30.0  # ... unless a blank has been wanted this long: then one is built on a busy machine too


def idle_cores(interval: float = QUIET_S) -> float:
    """Cores left idle over the next `interval` seconds (/proc/stat); the number of cores where it cannot be read.

    A blank is worth building when a core would otherwise idle (a world waiting on its model, a one-world run): it
    moves the start and the imports out of the world's way. On cores that worlds keep busy (a batch of scripted or
    CPU-bound worlds) it saves nothing and costs a blank's imports each time a world does not use them all or a
    blank goes unused: measured on the 46 L1 oracle worlds at --concurrency 2, 221 CPU-s with blanks built on busy
    cores against 167 without any.
    """
    def sample() -> tuple[int, int] | None:
        try:
            with open("/proc/stat", encoding="ascii") as fh:
                f = [int(x) for x in fh.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        return f[3] + (f[4] if len(f) > 4 else 0), sum(f[:8])  # idle + iowait, total (guest time is inside user)

    a = sample()
    time.sleep(interval)
    b = sample()
    ncpu = os.cpu_count() or 1
    if a is None or b is None or b[1] <= a[1]:
        return float(ncpu)
    return ncpu * (b[0] - a[0]) / (b[1] - a[1])


def capacity() -> int:
    try:
        return max(0, int(os.environ.get("DISCERN_SANDBOX_POOL", "2")))
    except ValueError:
        return 2


@functools.lru_cache(maxsize=64)
def track_packages(track: str) -> tuple[str, ...]:
    """Module names of the track's `python_packages` (worlds/<track>/track.yaml), each with the submodules analyses
    import from it (PRELOAD_WITH); () for an unknown track."""
    path = REPO_ROOT / "worlds" / track / "track.yaml"
    if not track.isidentifier() or not path.is_file():
        return ()
    try:
        import yaml

        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except Exception:  # noqa: BLE001 - a broken track.yaml is the loader's error to report
        return ()
    pkgs = doc.get("python_packages") or []
    if not isinstance(pkgs, list):
        return ()
    out = []
    for p in pkgs:
        if isinstance(p, str) and p.strip():
            name = p.strip().lower()
            mod = MODULE_OF.get(name, name.replace("-", "_"))
            out += [mod, *PRELOAD_WITH.get(mod, ())]
    return tuple(out)


def preload_for(world_dir: Path | None, label: str, limits) -> tuple[str, ...]:
    """What a blank for this world imports ahead of time: numpy, pandas and the track's packages. The track is the
    first dotted part of the world id (the label, or the world folder's name)."""
    if limits.cpu_seconds < PRELOAD_MIN_CPU_S:
        return ()
    mods = list(BASE_PRELOAD)
    for name in (label or "", world_dir.name if world_dir is not None else ""):
        track = name.split(".", 1)[0]
        pk = track_packages(track) if track else ()
        if pk:
            mods += pk
            break
    return tuple(dict.fromkeys(m for m in mods if all(part.isidentifier() for part in m.split("."))))


def pool_key(limits, preload: tuple[str, ...]) -> tuple:
    """What a blank is made with and cannot change once started: its start-time limits, its preloads, and the numba
    seed it copied (none, or which one), so a seed built after a blank started is not missing from the next world."""
    from sandbox.numba_seed import seed_dir

    seed = seed_dir()
    return tuple((f, getattr(limits, f)) for f in BAKED) + (("preload", tuple(preload)),
                                                          ("numba_seed", seed.name if seed.is_dir() else None))


def blank_limits(limits):
    """The requester's start-time limits, with default host-side (per-cell, per-task) clocks for the preload cell."""
    from sandbox.bwrap import Limits

    kept = {f.name: getattr(limits, f.name) for f in fields(Limits) if f.name in BAKED}
    return Limits(**kept)


PRELOAD_CELL = """def __discern_preload(mods):
    import importlib
    for m in mods:
        try:
            importlib.import_module(m)
        except Exception:
            pass
__discern_preload({mods!r})
del __discern_preload
"""


class WarmPool:
    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._ready: dict[tuple, list] = {}
        self._live: dict[tuple, int] = {}
        self._peak: dict[tuple, int] = {}
        self._recent: dict[tuple, float] = {}  # when each key was last asked for
        self._failures: dict[tuple, int] = {}
        self._limits: dict[tuple, object] = {}  # the blank Limits of each key
        self._evict: list = []  # blanks _next took out to make room; closed by the builder outside the lock
        self._building: tuple | None = None
        self._quiet_until = 0.0
        self._gen = 0  # bumped by drain(): a blank whose build began before is closed, not kept
        self._building_sb = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._pid = os.getpid()
        self._waiters = 0  # callers blocked in wait_ready
        self._wanted_since: float | None = None  # when the builder first found a blank wanted but no idle core
        self._doomed = None  # the blank `started` killed on purpose (its build fails, and that is not a failure)
        self._to_come: int | None = None  # sandboxes still to start (`expect`); None: unknown, keep blanks coming
        self.stats = {"warm": 0, "cold": 0, "built": 0, "discarded": 0, "failed": 0, "deferred": 0}
        self.last_error: str | None = None

    # -- used by Sandbox
    def _usable(self) -> bool:  # a forked child (multiprocessing) has no pool: the blanks are its parent's
        return not self._closed and os.getpid() == self._pid and capacity() > 0

    def take(self, key: tuple, masks: tuple):
        """A checked blank for `key`, or None. Blanks that fail the check are closed."""
        bad = []
        got = None
        with self._cv:
            if not self._usable():
                return None
            self._recent[key] = time.monotonic()
            lst = self._ready.get(key, [])
            while lst and got is None:
                sb = lst.pop(0)
                if sb._proc is not None and sb._proc.poll() is None and not sb.violations and sb._masks == masks:
                    got = sb
                else:
                    bad.append(sb)
            self.stats["discarded"] += len(bad)
            self.stats["warm" if got is not None else "cold"] += 1
            self._quiet_until = time.monotonic() + QUIET_S
        for sb in bad:
            sb.close()
        return got

    def started(self, key: tuple, limits) -> None:
        """A sandbox of `key` is live (warm or cold): keep blanks of this key coming."""
        with self._cv:
            if not self._usable():
                return
            self._live[key] = self._live.get(key, 0) + 1
            if self._to_come is not None:
                self._to_come = max(0, self._to_come - 1)
            self._want(key, limits, self._live[key])
            self._quiet_until = time.monotonic() + QUIET_S
            doomed = self._building_sb if self._to_come == 0 and not self._waiters else None
            if doomed is not None:
                self._doomed = doomed  # its failed build is no failure of the key
        if doomed is not None:  # the last sandbox to come has started: the blank being built would serve nobody
            doomed._kill()

    def expect(self, n: int | None) -> None:
        """`n` more sandboxes will start in this process (a run's worlds still to do); None: unknown. The builder
        keeps no more blanks than starts to come, so the last world of a run does not pay for a blank nobody takes
        (a one-world run built one during its episode and killed it at exit: 1.1 s of wall and its imports' CPU)."""
        with self._cv:
            self._to_come = None if n is None else max(0, int(n))
            self._cv.notify_all()

    def prewarm(self, limits=None, world_dir: Path | None = None, label: str = "task") -> tuple:
        """Ask for a blank of the key `Sandbox(world_dir, limits, label=label)` would take (e.g. before a campaign's
        first world), as if such a sandbox had just started. Returns the key."""
        from sandbox.bwrap import Limits

        limits = limits or Limits()
        key = pool_key(limits, preload_for(world_dir, label, limits))
        with self._cv:
            if self._usable():
                self._want(key, limits, 1)
        return key

    def _want(self, key: tuple, limits, n: int) -> None:  # under the lock
        self._limits.setdefault(key, blank_limits(limits))
        self._peak[key] = max(self._peak.get(key, 0), n)
        self._recent[key] = time.monotonic()
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="sandbox-warm-pool", daemon=True)
            self._thread.start()
        self._cv.notify_all()

    def stopped(self, key: tuple) -> None:
        with self._cv:
            if key in self._live:
                self._live[key] = max(0, self._live[key] - 1)

    # -- for tests and the benchmark
    def wait_ready(self, key: tuple, timeout: float = 120.0) -> bool:
        """Wait until a blank of `key` is ready (True) or the timeout passes (False)."""
        deadline = time.monotonic() + timeout
        with self._cv:
            self._waiters += 1  # someone blocks on a blank: build it whether or not a core is idle
            self._cv.notify_all()
            try:
                while not self._ready.get(key):
                    left = deadline - time.monotonic()
                    if left <= 0 or not self._usable() or key not in self._recent or self._failures.get(key, 0) >= MAX_FAILURES:
                        return False  # never asked for, or given up on: none will come
                    self._cv.wait(min(left, 1.0))
                return True
            finally:
                self._waiters -= 1

    def wait_for(self, limits=None, world_dir: Path | None = None, label: str = "task", timeout: float = 120.0) -> bool:
        """`prewarm`, then `wait_ready` for that key."""
        return self.wait_ready(self.prewarm(limits, world_dir, label), timeout)

    def ready(self, key: tuple | None = None) -> list:
        with self._cv:
            return list(self._ready.get(key, [])) if key is not None else [s for v in self._ready.values() for s in v]

    def drain(self) -> None:
        """Close every ready blank and the one being built (the pool rebuilds on the next demand)."""
        with self._cv:
            self._gen += 1
            blanks = [s for v in self._ready.values() for s in v]
            self._ready.clear()
            self._peak.clear()
            self._recent.clear()
            self._failures.clear()
        for sb in blanks:
            sb.close()

    def shutdown(self) -> None:
        with self._cv:
            if os.getpid() != self._pid:
                return
            self._closed = True
            blanks = [s for v in self._ready.values() for s in v]
            self._ready.clear()
            building = self._building_sb
            self._cv.notify_all()
        for sb in blanks:
            sb.close()
        if building is not None:
            building._kill()  # its start() or preload cell fails at once; the builder closes it
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    # -- the builder
    def _next(self) -> tuple | None:
        """Under the lock: the key to build a blank for next (evicting a stale key's blank if the pool is full)."""
        cap = capacity()
        if self._to_come is not None:
            cap = min(cap, self._to_come)
        keys = sorted(self._recent, key=lambda k: -self._recent[k])
        for k in keys:
            want = min(self._peak.get(k, 0), cap)
            if len(self._ready.get(k, [])) >= want or self._failures.get(k, 0) >= MAX_FAILURES:
                continue
            total = sum(len(v) for v in self._ready.values())
            if total < cap:
                return k
            for old in reversed(keys):  # the least recently asked-for key with a blank gives way
                if old != k and self._ready.get(old) and self._recent[old] < self._recent[k]:
                    self._evict.append(self._ready[old].pop())
                    return k
            return None
        return None

    def _may_build(self) -> bool:
        """Whether to build now: someone waits for a blank (`wait_ready`), a core is idle, or a blank has been wanted
        for STARVE_S on a busy machine (the idle check itself takes QUIET_S, the builder's pace while it waits)."""
        now = time.monotonic()
        if self._wanted_since is None:
            self._wanted_since = now
        if self._waiters or now - self._wanted_since >= STARVE_S or idle_cores() >= IDLE_MIN:
            self._wanted_since = None
            return True
        self.stats["deferred"] += 1
        return False

    def _loop(self) -> None:
        from sandbox.bwrap import Sandbox

        while True:
            try:
                with self._cv:
                    key = None
                    while not self._closed:
                        quiet = self._quiet_until - time.monotonic()
                        if quiet <= 0 and (key := self._next()) is not None:
                            break
                        if quiet <= 0:
                            self._wanted_since = None  # nothing wanted: the next demand starts its own clock
                        self._cv.wait(quiet if quiet > 0 else 5.0)
                    evict, self._evict = self._evict, []
                    if not self._closed:
                        self._building = key
                        limits, preload = self._limits[key], dict(key)["preload"]
                        gen = self._gen
                for sb in evict:
                    sb.close()
                if self._closed:
                    return
                if not self._may_build():
                    with self._cv:
                        self._building = None
                    continue
                blank = Sandbox(None, limits, label="warm pool", pool=False)
                blank._nice = 10 if os.geteuid() == 0 else 0
                with self._cv:
                    if self._to_come == 0 and not self._waiters:  # the last sandbox to come started while
                        self._building = None  # _may_build sampled the cores: `started` found no blank to kill
                        continue
                    self._building_sb = blank
                ok = False
                try:
                    if not self._closed:
                        blank.start()
                        if not self._closed:  # at exit, do not spend seconds importing for nobody
                            blank._preload(preload)
                            ok = True
                except Exception as exc:  # noqa: BLE001 - a failed build is retried (up to MAX_FAILURES in a row)
                    self.last_error = f"{type(exc).__name__}: {exc}"
                with self._cv:
                    self._building = self._building_sb = None
                    killed, self._doomed = self._doomed is blank or self._closed, None
                    if ok and not self._closed and gen == self._gen:
                        self._ready.setdefault(key, []).append(blank)
                        self._failures[key] = 0
                        self.stats["built"] += 1
                        blank = None
                    elif not ok and not killed:
                        self._failures[key] = self._failures.get(key, 0) + 1
                        self.stats["failed"] += 1
                    self._cv.notify_all()
                if blank is not None:
                    blank.close()
                    if not ok and not killed:
                        with self._cv:  # a real failure: pause before retrying (shutdown wakes it at once)
                            if not self._closed:
                                self._cv.wait(1.0)
            except BaseException:  # noqa: BLE001 - this thread must outlive every sandbox it started
                self.last_error = traceback.format_exc(limit=4)
                try:
                    with self._cv:
                        self._building = self._building_sb = None
                        if self._closed:
                            return
                except BaseException:  # noqa: BLE001
                    pass
                time.sleep(1.0)


POOL = WarmPool()
atexit.register(POOL.shutdown)

