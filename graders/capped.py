"""Product checks run in a capped worker process, never in the harness (issue 19).

A work product is agent-controlled bytes. Its reading and validation (`graders.checks.evaluate_product`, the
track validators) run in a spawned worker with an address-space cap (RLIMIT_AS), a CPU-time cap and a wall-clock
deadline per check. A product that exhausts a cap, hangs or crashes the worker becomes that check's failed credit
with its reason; the worker is replaced and the harness, the campaign and `--resume` carry on (the world is graded,
not re-run). One pool of workers serves every harness thread (issue 42: one worker per thread kept 12 alive at
--concurrency 16): at most `pool_size()` of them, the lower of the cores and `budget_slots()`, so all their caps
together fit one memory budget and no more read at once than there are cores to read.
"""
from __future__ import annotations

import os
import threading
from typing import Any

MEMORY_CAP = 3 << 30       # bytes of address space for one worker (imports take ~1 GiB of it)
CPU_CAP_S = 600            # CPU seconds one product check may use; a worker that spends them is killed and replaced
WALL_CAP_S = 120.0         # one product check's wall-clock deadline

_pool_lock = threading.Lock()
_pool: "_Pool | None" = None


def budget_slots() -> int:
    """How many product checks may read at once, so that their caps together stay within one memory budget (issue
    40: each worker had its own 3 GiB, and a high --concurrency could add up past the host's memory). The budget is
    BENCHMARK_GRADING_MEMORY_GB, else half the machine's memory; at least one check always runs."""
    env = os.environ.get("BENCHMARK_GRADING_MEMORY_GB")
    try:
        budget = float(env) * (1 << 30) if env else os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2
    except (ValueError, OSError, AttributeError):
        budget = float(MEMORY_CAP)
    return max(1, int(budget // MEMORY_CAP))


def pool_size() -> int:
    """The workers of the pool: one per core this process may run on, within the memory budget (budget_slots)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, budget_slots()))


_in_worker = False  # set by _serve in the worker process itself; never by the environment, which children inherit


def in_worker() -> bool:
    """True in a capped worker: its product checks run right there (it is the cap)."""
    return _in_worker


def _die_with_parent(parent: int) -> None:
    """SIGKILL this worker when the thread that spawned it ends, a SIGKILLed harness included: a worker left behind
    would finish its check (which may start sandboxes) for nobody. Linux's PR_SET_PDEATHSIG follows the spawning
    thread, so the pool spawns its workers from one thread of its own that lives as long as the harness."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):  # not Linux: the worker still ends at the next recv on EOF
        return
    if os.getppid() != parent:  # the harness died before the signal was armed
        os._exit(0)


def _serve(conn, memory_cap: int, cpu_cap: int, parent: int | None = None) -> None:
    import importlib
    import resource

    global _in_worker
    _in_worker = True
    if parent is not None:
        _die_with_parent(parent)
    resource.setrlimit(resource.RLIMIT_AS, (memory_cap, memory_cap))
    _, cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)
    from graders import checks

    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        modules, args = msg
        if args is None:  # a warm-up (`prestart`): import the validators' modules, answer nothing
            for m in modules:
                try:
                    importlib.import_module(m)
                except Exception:  # noqa: BLE001 - the check that needs it reports the failure
                    pass
            continue
        # each check gets cpu_cap seconds of its own (SIGXCPU past them): a worker serves many checks in its life
        used = resource.getrusage(resource.RUSAGE_SELF)
        soft = int(used.ru_utime + used.ru_stime) + 1 + cpu_cap
        resource.setrlimit(resource.RLIMIT_CPU, (soft if cpu_hard == resource.RLIM_INFINITY else min(soft, cpu_hard),
                                                 cpu_hard))
        try:
            for m in modules:
                importlib.import_module(m)
            result = checks.evaluate_product(*args)
        except MemoryError:
            result = (0.0, f"the product exhausted the grader's memory cap ({memory_cap >> 30} GiB): not read")
        except Exception as exc:  # noqa: BLE001 - a validator crash is the check's outcome
            result = (0.0, f"could not be read ({type(exc).__name__}: {str(exc)[:200]})")
        try:
            conn.send(result)
        except (OSError, ValueError):
            return


class _Worker:
    def __init__(self) -> None:
        import multiprocessing

        from graders.numerics import pinned_environment

        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, MEMORY_CAP, CPU_CAP_S, os.getpid()),
                                daemon=True)
        self.modules: set[str] = set()  # imported (or asked to be) by warm-ups and checks
        with pinned_environment():  # one BLAS thread: a small, predictable address space
            self.proc.start()
        child.close()

    def alive(self) -> bool:
        return self.proc.is_alive()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join(5)
        self.conn.close()


class _Spawner:
    """The one thread that starts the pool's workers: PR_SET_PDEATHSIG ties a worker to the thread that spawned it,
    and an episode's thread ends with its episode while the worker serves the next. A daemon thread, so it ends
    with the harness (and its workers with it)."""

    def __init__(self) -> None:
        import queue

        self.requests: "queue.Queue[tuple[threading.Event, list]]" = queue.Queue()
        threading.Thread(target=self._loop, name="grading-worker-spawner", daemon=True).start()

    def _loop(self) -> None:
        while True:
            done, box = self.requests.get()
            try:
                box.append(_Worker())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                box.append(exc)
            done.set()

    def spawn(self) -> _Worker:
        done, box = threading.Event(), []
        self.requests.put((done, box))
        done.wait()
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]


class _Pool:
    """Capped workers shared by every harness thread: a check takes an idle worker (or starts one while fewer than
    `size` live), and gives it back; one whose check failed by a cap is killed and replaced on demand."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.idle: list[_Worker] = []
        self.live = 0
        self.closed = False
        self.cond = threading.Condition()
        self.spawner = _Spawner()

    def _start(self) -> _Worker:
        try:
            return self.spawner.spawn()
        except BaseException:
            with self.cond:
                self.live -= 1
                self.cond.notify()
            raise

    def acquire(self) -> _Worker:
        with self.cond:
            while True:
                while self.idle:
                    w = self.idle.pop()
                    if w.alive():
                        return w
                    self.live -= 1
                    w.kill()
                if self.live < self.size:
                    self.live += 1
                    break
                self.cond.wait()
        return self._start()

    def release(self, w: _Worker, healthy: bool = True) -> None:
        with self.cond:
            if healthy and not self.closed and w.alive():
                self.idle.append(w)
            else:
                self.live -= 1
                w.kill()
            self.cond.notify()

    def warm(self, modules: list[str]) -> None:
        """Start a worker now if none waits idle and the pool has room, and have every idle worker import
        `modules`, beside the episode that will need them."""
        with self.cond:
            start = not self.idle and self.live < self.size
            if start:
                self.live += 1
        if start:
            w = self._start()
            self.release(w)
        with self.cond:
            for w in self.idle:
                need = [m for m in modules if m not in w.modules]
                if need:
                    try:
                        w.conn.send((need, None))
                        w.modules.update(need)
                    except OSError:  # a dead worker is replaced at its next check
                        pass

    def shutdown(self) -> None:
        with self.cond:
            self.closed = True
            for w in self.idle:
                w.kill()
            self.live -= len(self.idle)
            self.idle = []
            self.cond.notify_all()


def _get_pool() -> _Pool:
    global _pool
    with _pool_lock:
        if _pool is None or _pool.closed:
            _pool = _Pool(pool_size())
        return _pool


def prestart(modules: list[str] | None = None) -> None:
    """Warm the pool as an episode begins, so a worker's interpreter start and imports run beside the episode instead
    of after it (0.46 s off the first world's grade here). `modules` (`validator_modules` of the world) are imported
    there too: the first histone world's grade otherwise waited ~0.5 s for its track module in the worker."""
    if in_worker():
        return
    _get_pool().warm(list(modules or []))


def validator_modules(ref: Any) -> list[str]:
    """What the worker imports to hold a world's product validators: its track's solver module (which registers
    them), or nothing for a world whose rubric has no product check."""
    from graders.manifest import rubric_checks
    from graders.checks import PRODUCT_KINDS

    return [ref.track.solver_module] if any(c.kind in PRODUCT_KINDS for c in rubric_checks(ref.world)) else []


def run_product_check(modules: list[str], args: tuple, wall: float | None = None) -> tuple[float, str]:
    """evaluate_product(*args) in a worker of the pool; a cap hit is (0, why), and that worker is replaced."""
    wall = WALL_CAP_S if wall is None else wall
    pool = _get_pool()
    w = pool.acquire()
    healthy = False
    try:
        w.conn.send((modules, args))
        w.modules.update(modules)
        if not w.conn.poll(wall):
            return 0.0, f"reading the product took longer than {wall:g} s: refused"
        result = w.conn.recv()
        healthy = True
        return result
    except (EOFError, OSError):
        w.proc.join(5)
        code = w.proc.exitcode
        why = "killed (CPU cap)" if code in (-9, -24) else f"exited with code {code}"
        return 0.0, f"the grader's worker died reading the product ({why}; memory cap {MEMORY_CAP >> 30} GiB, " \
                    f"CPU cap {CPU_CAP_S} s): not read"
    finally:
        pool.release(w, healthy)


def close() -> None:
    """Stop the pool's idle workers (a busy one stops when its check returns); the next check starts a new pool."""
    with _pool_lock:
        pool = _pool
    if pool is not None:
        pool.shutdown()


def _modules_for(validator: str | None) -> list[str]:
    if not validator:
        return []
    from graders.registry import PRODUCT_VALIDATORS

    if validator not in PRODUCT_VALIDATORS:
        return []
    return [PRODUCT_VALIDATORS.get(validator).fn.__module__]


def product_check(c: Any, got: Any, want: Any, golden: dict, products: Any, inputs: Any = None) -> tuple[float, str]:
    """The harness side: run the product check capped (in the worker itself, directly)."""
    from graders import checks

    if in_worker():
        return checks.evaluate_product(c, got, want, golden, products, inputs)
    return run_product_check(_modules_for(c.validator), (c, got, want, golden, None if products is None else str(products),
                                                         None if inputs is None else str(inputs)))
