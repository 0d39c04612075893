"""Progress for long work: a rich bar on a terminal, one plain line per step in a log (stderr not a terminal), nothing
with BENCHMARK_PROGRESS=0. Both show the time left, extrapolated from the steps done so far."""
from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator

QUIET_S = 5.0  # in a log, at most one progress line per QUIET_S seconds (and always the last)


def minutes(seconds: float) -> str:
    """'45 s', '12 min', '2 h 05 min': a duration as a person reads it."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


@contextmanager
def progress(label: str, total: int, finished: bool = False) -> Iterator[Callable[[str], None]]:
    """`step(item)` marks the previous item done and names the one now running (the last is closed on exit); with
    `finished=True` (work done out of order, by a pool) it marks `item` itself done."""
    mode = "off" if os.environ.get("BENCHMARK_PROGRESS") == "0" else ("bar" if sys.stderr.isatty() else "lines")
    if mode == "lines":
        with _lines(label, total, finished) as step:
            yield step
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("left"), TimeRemainingColumn(), TextColumn("{task.fields[item]}"), transient=False,
                  disable=mode == "off") as bar:
        task = bar.add_task(label, total=total, item="")
        started = [False]

        def step(item: str) -> None:
            if started[0] or finished:
                bar.advance(task)
            started[0] = True
            bar.update(task, item=item)

        yield step
        if started[0] and not finished:
            bar.advance(task)
        bar.update(task, item="done")


@contextmanager
def _lines(label: str, total: int, finished: bool) -> Iterator[Callable[[str], None]]:
    """A log's progress: '[label] 12/110 clinvar.L1.integrity.clean · 3 min elapsed, ~24 min left', flushed."""
    t0 = time.monotonic()
    state = {"done": 0 if finished else -1, "item": ""}

    last = [t0 - QUIET_S]

    def emit(item: str, done: int) -> None:
        now = time.monotonic()
        if now - last[0] < QUIET_S and done < total:  # a fast phase (verifying locks) says where it is, not every step
            return
        last[0], elapsed = now, now - t0
        left = f", ~{minutes(elapsed / done * (total - done))} left" if 0 < done < total else ""
        print(f"[{label}] {done}/{total} {item} · {minutes(elapsed)} elapsed{left}", file=sys.stderr, flush=True)

    def step(item: str) -> None:
        state["done"] += 1
        if finished:
            emit(item, state["done"])
        elif state["done"] > 0:
            emit(state["item"], state["done"])
        state["item"] = item

    yield step
    if not finished and state["done"] >= 0:
        emit(state["item"], state["done"] + 1)
