"""Product checks run in a capped worker process, never in the harness (issue 19).

A work product is agent-controlled bytes. Its reading and validation (`graders.checks.evaluate_product`, the
track validators) run in a spawned worker with an address-space cap (RLIMIT_AS), a CPU-time cap and a wall-clock
deadline per check. A product that exhausts a cap, hangs or crashes the worker becomes that check's failed credit
with its reason; the worker is replaced and the harness, the campaign and `--resume` carry on (the world is graded,
not re-run). One worker per harness thread, started on first use; at most `budget_slots()` of them read a product
at once, so all their caps together fit one memory budget.
"""
from __future__ import annotations

import os
import threading
from typing import Any

MEMORY_CAP = 3 << 30       # bytes of address space for one worker (imports take ~1 GiB of it)
CPU_CAP_S = 600            # CPU seconds over one worker's life; it is replaced when spent
WALL_CAP_S = 120.0         # one product check's wall-clock deadline

_local = threading.local()
_slots_lock = threading.Lock()
_slots: threading.BoundedSemaphore | None = None


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


def _budget() -> threading.BoundedSemaphore:
    global _slots
    with _slots_lock:
        if _slots is None:
            _slots = threading.BoundedSemaphore(budget_slots())
        return _slots
_in_worker = False  # set by _serve in the worker process itself; never by the environment, which children inherit


def in_worker() -> bool:
    """True in a capped worker: its product checks run right there (it is the cap)."""
    return _in_worker


def _die_with_parent(parent: int) -> None:
    """SIGKILL this worker when the harness thread that spawned it ends, a SIGKILLed harness included: a worker
    left behind would finish its check (which may start sandboxes) for nobody. Linux's PR_SET_PDEATHSIG follows
    the spawning thread, the worker's owner (one per harness thread)."""
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
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_cap, cpu_cap))
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
        with pinned_environment():  # one BLAS thread: a small, predictable address space
            self.proc.start()
        child.close()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join(5)
        self.conn.close()

    def __del__(self) -> None:  # the thread that owned it ended: so does the worker
        try:
            if self.proc.is_alive():
                self.kill()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _worker() -> _Worker:
    """This thread's live worker, started when it has none (or its last one died)."""
    w: _Worker | None = getattr(_local, "worker", None)
    if w is None or not w.proc.is_alive():
        w = _local.worker = _Worker()
    return w


def prestart(modules: list[str] | None = None) -> None:
    """Start this thread's worker now (a harness calls it as an episode begins), so the worker's interpreter start
    and imports run beside the episode instead of after it: 0.46 s off the first world's grade here. `modules`
    (`validator_modules` of the world) are imported there too, beside the episode: the first histone world's grade
    otherwise waited ~0.5 s for its track module in the worker."""
    if in_worker():
        return
    w = _worker()
    if modules:
        try:
            w.conn.send((list(modules), None))
        except OSError:  # a dead worker is replaced at the first check
            pass


def validator_modules(ref: Any) -> list[str]:
    """What the worker imports to hold a world's product validators: its track's solver module (which registers
    them), or nothing for a world whose rubric has no product check."""
    from graders.manifest import rubric_checks
    from graders.checks import PRODUCT_KINDS

    return [ref.track.solver_module] if any(c.kind in PRODUCT_KINDS for c in rubric_checks(ref.world)) else []


def run_product_check(modules: list[str], args: tuple, wall: float | None = None) -> tuple[float, str]:
    """evaluate_product(*args) in this thread's capped worker; a cap hit is (0, why) and a fresh worker."""
    wall = WALL_CAP_S if wall is None else wall
    with _budget():  # every harness thread's checks share one memory budget (budget_slots)
        return _run_in_worker(modules, args, wall)


def _run_in_worker(modules: list[str], args: tuple, wall: float) -> tuple[float, str]:
    w = _worker()
    try:
        w.conn.send((modules, args))
        if not w.conn.poll(wall):
            w.kill()
            _local.worker = None
            return 0.0, f"reading the product took longer than {wall:g} s: refused"
        return w.conn.recv()
    except (EOFError, OSError):
        code = w.proc.exitcode
        w.kill()
        _local.worker = None
        why = "killed (CPU cap)" if code in (-9, -24) else f"exited with code {code}"
        return 0.0, f"the grader's worker died reading the product ({why}; memory cap {MEMORY_CAP >> 30} GiB, " \
                    f"CPU cap {CPU_CAP_S} s): not read"


def close() -> None:
    w = getattr(_local, "worker", None)
    if w is not None:
        w.kill()
        _local.worker = None


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
