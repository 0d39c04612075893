"""A load generator: busy-loop processes that keep cores busy while a figure is measured (issue 42 item 5).

Evaluations run on shared machines, so every figure is also measured with the cores busy: `busy(n)` starts n
fresh interpreters spinning `while True: pass` at the caller's priority (another user's job, not a niced one) and
kills them on exit. They run outside the measured process trees (bench/cpu_account.py), so they add wall time to a
figure, never CPU.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from typing import Iterator


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@contextlib.contextmanager
def busy(n: int) -> Iterator[list[subprocess.Popen]]:
    """n busy-loop processes for the block's duration (none for n <= 0)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(max(0, n))]
    try:
        if procs:
            time.sleep(0.5)  # let the scheduler see them before the first measurement
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
