"""Progress for long work: a rich bar on a terminal, plain lines in a log (stderr not a terminal), nothing with
BENCHMARK_PROGRESS=0. Both show the time left, extrapolated from the steps done so far; a run whose items differ in
size (an L3 dossier takes the time of ~25 L1 worlds) passes a `Pace`, so the first dossier done does not promise
eight hours.

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
from dataclasses import dataclass, field
from typing import Callable, Iterator

QUIET_S = 5.0  # in a log, at most one progress line (and one note) per QUIET_S seconds (the last always shows)
HEARTBEAT_S = 60.0  # in a log, a line when nothing was printed for this long: a long step still says it is alive
# Both may be set in the environment (BENCHMARK_PROGRESS_QUIET_S, BENCHMARK_PROGRESS_HEARTBEAT_S), e.g. 0 to log
# every L3 sub-step; they are read when used, so a worker process follows its parent's environment.

_live: dict = {}  # {"pid": os.getpid(), "bar": rich Progress, "task": id} while this process shows a bar
_printed = [0.0]  # monotonic time of the last line this process printed (progress, note or heartbeat)
_note_lock = threading.Lock()
_last_note = [float("-inf")]


@dataclass
class Pace:
    """What work of unequal items expects of itself. `weights`: each item's share of the work (its expected seconds,
    or anything proportional); an item not named weighs the mean. `expected_s`: the whole work's expected seconds,
    when something supports a figure (benchmark.run.estimate). Before any wall is observed, the time left is the
    weight left times a pace that starts at the expected one and moves to the observed one as items finish (the
    prior counts as half of the work), so the first item, finished while others were still running beside it, does
    not set the pace alone.

    `levels` (item -> its level) and `slots` (items run at once): once an item's own wall is observed, each item
    left weighs its level's median measured wall, or, for a level not measured yet, its prior weight times the
    measured levels' median ratio of measured to prior; the time left is that work over the slots (at least the
    longest item left). A hosted model whose dossiers take 40x an L1 world, where the prior says 9x, is then right
    once its first dossier ends, not 3-5x optimistic for the rest of the run."""
    weights: dict[str, float] = field(default_factory=dict)
    expected_s: float | None = None
    levels: dict[str, str] = field(default_factory=dict)
    slots: int = 1
    _walls: dict[str, list[float]] = field(default_factory=dict, repr=False)
    _done: set[str] = field(default_factory=set, repr=False)

    def weight(self, item: str) -> float:
        if item in self.weights:
            return self.weights[item]
        return sum(self.weights.values()) / len(self.weights) if self.weights else 1.0

    def total(self, n: int) -> float:
        """The whole work's weight for `n` items (n itself when no item is weighed)."""
        return float(sum(self.weights.values())) if self.weights else float(n)

    def observe(self, item: str, wall: float | None) -> None:
        """`item` is done, after `wall` seconds of its own (None: not measured)."""
        self._done.add(item)
        if wall is not None and wall > 0 and item in self.levels:
            self._walls.setdefault(self.levels[item], []).append(float(wall))

    def left(self, elapsed: float, done_w: float, total_w: float) -> float | None:
        """Seconds left, or None before anything supports a figure."""
        if self._walls:
            return self._measured_left()
        prior_w = total_w / 2 if self.expected_s and total_w > 0 else 0.0
        if done_w + prior_w <= 0:
            return None
        prior_pace = (self.expected_s or 0.0) / total_w if total_w > 0 else 0.0
        pace = (prior_pace * prior_w + elapsed) / (prior_w + done_w)
        return max(0.0, (total_w - done_w) * pace)

    def _measured_left(self) -> float:
        import statistics

        per = {lv: statistics.median(w) for lv, w in self._walls.items()}
        prior: dict[str, list[float]] = {}
        for item, lv in self.levels.items():
            prior.setdefault(lv, []).append(self.weight(item))
        ratios = [per[lv] / statistics.median(prior[lv]) for lv in per if lv in prior and statistics.median(prior[lv]) > 0]
        scale = statistics.median(ratios) if ratios else 1.0
        todo = [per[lv] if lv in per else self.weight(item) * scale
                for item, lv in self.levels.items() if item not in self._done]
        if not todo:
            return 0.0
        return max(sum(todo) / max(1, min(self.slots, len(todo))), max(todo))


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
def progress(label: str, total: int, finished: bool = False, pace: Pace | None = None,
             running: Callable[[], list[str]] | None = None) -> Iterator[Callable[[str], None]]:
    """`step(item)` marks the previous item done and names the one now running (the last is closed on exit); with
    `finished=True` (work done out of order, by a pool) it marks `item` itself done, `step(item, wall)` with the
    item's own seconds, which the pace learns from. `pace`: the items' weights and
    the expected duration, for a time left that is right from the start (else each item weighs the same).
    `running`: the items in flight now (a pool's), which a log's heartbeat names."""
    m = mode()
    if m == "lines":
        with _lines(label, total, finished, pace, running) as step:
            yield step
        return
    from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    pace = pace or Pace()

    class Left(ProgressColumn):  # rich's own TimeRemainingColumn counts items; this one weighs them
        def render(self, task) -> Text:
            if task.finished:
                return Text("0:00:00")
            left = pace.left(task.elapsed or 0.0, task.completed, task.total or 0.0)
            return Text("-:--:--" if left is None else time.strftime("%H:%M:%S", time.gmtime(left)))

    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[count]}/" + str(total)),
                  TimeElapsedColumn(), TextColumn("left"), Left(), TextColumn("{task.fields[item]}"), transient=False,
                  disable=m == "off") as bar:
        task = bar.add_task(label, total=pace.total(total), item="", count=0)
        state = {"started": False, "count": 0, "w": 1.0, "item": "", "t": 0.0}
        outer = dict(_live)
        if m == "bar":
            _live.update(pid=os.getpid(), bar=bar, task=task)

        def advance(w: float) -> None:
            state["count"] += 1
            bar.update(task, advance=w, count=state["count"])

        def step(item: str, wall: float | None = None) -> None:
            w = pace.weight(item)
            now = time.monotonic()
            if finished:
                pace.observe(item, wall)
                advance(w)
            elif state["started"]:
                pace.observe(state["item"], now - state["t"])
                advance(state["w"])
            state.update(started=True, w=w, item=item, t=now)
            bar.update(task, item=item)

        try:
            yield step
            if state["started"] and not finished:
                advance(state["w"])
            bar.update(task, item="done")
        finally:
            _live.clear()
            _live.update(outer)


@contextmanager
def _lines(label: str, total: int, finished: bool, pace: Pace | None = None,
           running: Callable[[], list[str]] | None = None) -> Iterator[Callable[[str], None]]:
    """A log's progress, flushed:
    '[label] 3/110 · now clinvar.L1.integrity.clean · 3 min elapsed, ~24 min left' (finished=False: the item
    starting), '[label] 12/110 clinvar.L1.integrity.clean · ...' (finished=True: the item just done), and a heartbeat
    '[label] 3/110 · still on clinvar.L1.integrity.clean · 4 min elapsed' when nothing was printed for HEARTBEAT_S
    (with finished=True, the items `running` names: the worlds a pool has in flight)."""
    t0 = time.monotonic()
    quiet, beat_s = _seconds("QUIET_S", QUIET_S), _seconds("HEARTBEAT_S", HEARTBEAT_S)
    pace = pace or Pace()
    total_w = pace.total(total)
    state = {"done": 0, "item": "", "started": False, "done_w": 0.0, "w": 1.0, "t": t0}
    last = [t0 - quiet]
    lock = threading.Lock()

    def timing(done: int) -> str:
        elapsed = time.monotonic() - t0
        est = pace.left(elapsed, state["done_w"], total_w) if done < total else None
        left = f", ~{minutes(est)} left" if est is not None and (done > 0 or pace.expected_s) else ""
        return f"{minutes(elapsed)} elapsed{left}"

    def emit(text: str, done: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - last[0] < quiet and done < total:  # a fast phase says where it is, not every step
            return
        last[0] = now
        _say(f"[{label}] {done}/{total} {text} · {timing(done)}")

    def step(item: str, wall: float | None = None) -> None:
        with lock:
            w = pace.weight(item)
            if finished:
                pace.observe(item, wall)
                state["done"] += 1
                state["done_w"] += w
                state["item"] = item
                emit(item, state["done"])
                return
            now = time.monotonic()
            if state["started"]:
                pace.observe(state["item"], now - state["t"])
                state["done"] += 1
                state["done_w"] += state["w"]
            state["started"], state["item"], state["w"], state["t"] = True, item, w, now
            emit(f"· now {item}", state["done"])

    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.wait(max(0.05, min(beat_s, 5.0)) if beat_s else 5.0):
            if beat_s and time.monotonic() - max(_printed[0], t0) >= beat_s:
                with lock:
                    now = running() if finished and running is not None else []
                    if now:
                        what = "still on " + ", ".join(now[:4]) + (f" and {len(now) - 4} more" if len(now) > 4 else "")
                    else:
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
