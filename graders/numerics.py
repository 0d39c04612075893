"""Pinned numerics, gold side: reference solvers (benchmark.suite.freeze) and the grader's capped worker
(graders.capped) run with them, so a golden and a product check do not depend on the machine's BLAS kernel.
"""
from __future__ import annotations

import contextlib
import os
import threading

# What a reference solver's numerics depend on, pinned for every solve: thread counts, the BLAS kernel (OpenBLAS
# picks one per CPU at load time: SkylakeX, Haswell, Zen... give different last bits, and pydeseq2's optimisers
# amplify them to the 4th decimal) and numpy's runtime SIMD dispatch (baseline x86-64-v2 only).
# BENCHMARK_SOLVER_CORETYPE swaps the pinned kernel for another, to prove that goldens hold without the pin too
# (tests/test_worlds.py re-solves the floating-point-heavy worlds under Haswell).
PINNED_ENV = {
    "OPENBLAS_CORETYPE": os.environ.get("BENCHMARK_SOLVER_CORETYPE", "Prescott"), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
    "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR", "BENCHMARK_PINNED_NUMERICS": "1",
}


def numerics_pinned() -> bool:
    """True in a process started with PINNED_ENV (set before numpy loaded, so the kernel really is the pinned one)."""
    return all(os.environ.get(k) == v for k, v in PINNED_ENV.items())


# os.environ is the process's, shared by every thread. Two harness threads that each saved it, pinned it and restored
# their saved copy could leave the pinned copy in place (the later restore wins): one holder at a time.
_ENVIRONMENT_LOCK = threading.RLock()


@contextlib.contextmanager
def pinned_environment():
    """PINNED_ENV in os.environ while processes are spawned (they inherit it before importing numpy). Held by one
    thread at a time; other threads that start a pinned process wait (a spawn takes well under a second)."""
    with _ENVIRONMENT_LOCK:
        old = saved_environment()
        os.environ.update(PINNED_ENV)
        try:
            yield
        finally:
            restore_environment(old)


def saved_environment() -> dict[str, str | None]:
    """This process's values of the PINNED_ENV keys (None: unset), for restore_environment."""
    return {k: os.environ.get(k) for k in PINNED_ENV}


def restore_environment(saved: dict[str, str | None]) -> None:
    """Put back what saved_environment returned: set keys as they were, unset keys unset."""
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
