"""Progress for long work: a rich bar on a terminal, plain lines in a log (stderr not a terminal), nothing with
BENCHMARK_PROGRESS=0. Both show the time left, extrapolated from the steps done so far.

In a log a long step is never silent: a line when an item starts (at most one per QUIET_S), a heartbeat line when
nothing was printed for HEARTBEAT_S, and `note(line)` lines for the sub-steps of one item (an L3 dossier's prior,
reviews and judge draws). `note` works from any thread or worker process: it updates the bar's item where this
process shows the bar, and prints a plain line to stderr everywhere else.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

QUIET_S = 5.0  # in a log, at most one progress line (and one note) per QUIET_S seconds (the last always shows)
HEARTBEAT_S = 60.0  # in a log, a line when nothing was printed for this long: a long step still says it is alive
# Both may be set in the environment (BENCHMARK_PROGRESS_QUIET_S, BENCHMARK_PROGRESS_HEARTBEAT_S), e.g. 0 to log
# every L3 sub-step; they are read when used, so a worker process follows its parent's environment.

_live: dict = {}  # {"pid": os.getpid(), "bar": rich Progress, "task": id} while this process shows a bar
_printed = [0.0]  # monotonic time of the last line this process printed (progress, note or heartbeat)
_note_lock = threading.Lock()
_last_note = [float("-inf")]


def minutes(seconds: float) -> str:
    """'45 s', '12 min', '2 h 05 min': a duration as a person reads it."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


def mode() -> str:
    """'off' (BENCHMARK_PROGRESS=0), 'bar' (stderr is a terminal) or 'lines' (a log)."""
    if os.environ.get("BENCHMARK_PROGRESS") == "0":
        return "off"
    return "bar" if sys.stderr.isatty() else "lines"


def _seconds(name: str, default: float) -> float:
    try:
        return max(0.0, float(os.environ.get(f"BENCHMARK_PROGRESS_{name}", default)))
    except ValueError:
        return default


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
    _printed[0] = time.monotonic()


def note(line: str) -> None:
    """A sub-step of the item now running, e.g. 'scrna.L3.dossier.x: step 5 of 16, review round 1 (causal)'.

    In the process showing a bar: the bar's item text. Anywhere else (a log, a worker process that inherited
    stderr, no progress at all): one plain line on stderr, at most one per QUIET_S per process, so a fast protocol
    does not flood the log while a slow one (a CPU model taking minutes per call) shows every step."""
    m = mode()
    if m == "off":
        return
    if _live.get("pid") == os.getpid():
        try:
            _live["bar"].update(_live["task"], item=line)
            return
        except Exception:  # noqa: BLE001 - a bar being torn down: fall back to a line
            pass
    now = time.monotonic()
    with _note_lock:
        if now - _last_note[0] < _seconds("QUIET_S", QUIET_S):
            return
        _last_note[0] = now
    _say(f"  · {line}")


@contextmanager
def progress(label: str, total: int, finished: bool = False) -> Iterator[Callable[[str], None]]:
    """`step(item)` marks the previous item done and names the one now running (the last is closed on exit); with
    `finished=True` (work done out of order, by a pool) it marks `item` itself done."""
    m = mode()
    if m == "lines":
        with _lines(label, total, finished) as step:
            yield step
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("left"), TimeRemainingColumn(), TextColumn("{task.fields[item]}"), transient=False,
                  disable=m == "off") as bar:
        task = bar.add_task(label, total=total, item="")
        started = [False]
        outer = dict(_live)
        if m == "bar":
            _live.update(pid=os.getpid(), bar=bar, task=task)

        def step(item: str) -> None:
            if started[0] or finished:
                bar.advance(task)
            started[0] = True
            bar.update(task, item=item)

        try:
            yield step
            if started[0] and not finished:
                bar.advance(task)
            bar.update(task, item="done")
        finally:
            _live.clear()
            _live.update(outer)


@contextmanager
def _lines(label: str, total: int, finished: bool) -> Iterator[Callable[[str], None]]:
    """A log's progress, flushed:
    '[label] 3/110 · now clinvar.L1.integrity.clean · 3 min elapsed, ~24 min left' (finished=False: the item
    starting), '[label] 12/110 clinvar.L1.integrity.clean · ...' (finished=True: the item just done), and a heartbeat
    '[label] 3/110 · still on clinvar.L1.integrity.clean · 4 min elapsed' when nothing was printed for HEARTBEAT_S."""
    t0 = time.monotonic()
    quiet, beat_s = _seconds("QUIET_S", QUIET_S), _seconds("HEARTBEAT_S", HEARTBEAT_S)
    state = {"done": 0, "item": "", "started": False}
    last = [t0 - quiet]
    lock = threading.Lock()

    def timing(done: int) -> str:
        elapsed = time.monotonic() - t0
        left = f", ~{minutes(elapsed / done * (total - done))} left" if 0 < done < total else ""
        return f"{minutes(elapsed)} elapsed{left}"

    def emit(text: str, done: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - last[0] < quiet and done < total:  # a fast phase says where it is, not every step
            return
        last[0] = now
        _say(f"[{label}] {done}/{total} {text} · {timing(done)}")

    def step(item: str) -> None:
        with lock:
            if finished:
                state["done"] += 1
                state["item"] = item
                emit(item, state["done"])
                return
            if state["started"]:
                state["done"] += 1
            state["started"], state["item"] = True, item
            emit(f"· now {item}", state["done"])

    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.wait(max(0.05, min(beat_s, 5.0)) if beat_s else 5.0):
            if beat_s and time.monotonic() - max(_printed[0], t0) >= beat_s:
                with lock:
                    what = f"still on {state['item']}" if state["item"] and not finished else "still working"
                    emit(f"· {what}", state["done"], force=True)

    beat = threading.Thread(target=heartbeat, name=f"progress-heartbeat-{label}", daemon=True)
    beat.start()
    try:
        yield step
    finally:
        stop.set()
        beat.join(timeout=1.0)
    with lock:
        if not finished and state["started"]:
            emit("· done", state["done"] + 1, force=True)
