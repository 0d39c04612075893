"""The expected duration of a run, said before its first world starts.

From the run's own finished worlds when it resumes (median wall time per level); else, for the offline local model,
from seconds per world measured on one core of the reference machine (2 cores, idle), divided over the
cores the run can use. A hosted model's time depends on its endpoint, so none is guessed; the progress line
extrapolates from the worlds done either way.
"""
from __future__ import annotations

import os
import statistics
from collections import Counter
from typing import Iterable

from benchmark.run.progress import Pace, minutes

# Seconds per world of local/smollm2 on one core, by level: the mean wall per world of the README main job of
# 2026-12-03 on an idle 2-core machine (251 worlds, two at once, one model thread each; 28.2 min in all, 0 faults):
# L1 7.1 s (101 worlds), L2 5.1 s (119), L3 65.8 s (31 dossiers, the model's 2,048-token context, the reviewers
# sharing their prompt up to the role; 77.5 s before that, in a 29.1-min run of 247 worlds the same morning).
LOCAL_CPU_S = {"L1": 7.1, "L2": 5.1, "L3": 66.0}


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def expected_seconds(model: str, levels: Iterable[str], concurrency: int,
                     finished: dict[str, list[float]] | None = None) -> tuple[float, str] | None:
    """(seconds, basis) for worlds of these levels, or None when nothing supports a figure.

    `finished`: wall seconds of this run's finished worlds by level (a resumed run); used where a level has any."""
    todo = Counter(levels)
    if not todo:
        return 0.0, "nothing left to run"
    finished = {k: v for k, v in (finished or {}).items() if v}
    if finished and all(level in finished for level in todo):
        walls = sum(n * statistics.median(finished[level]) for level, n in todo.items())
        return walls / concurrency, "this run's finished worlds"
    if model.startswith("local/"):
        cpu = sum(n * LOCAL_CPU_S.get(level, LOCAL_CPU_S["L2"]) for level, n in todo.items())
        return cpu / max(1, min(concurrency, cores())), f"{model}'s CPU time per world on a 2-core reference machine"
    return None


def expected_line(model: str, levels: list[str], concurrency: int, finished: dict[str, list[float]] | None = None) -> str:
    """'expected duration: ~24 min for 110 worlds at concurrency 2 (basis)' or why there is no figure."""
    n = len(levels)
    what = f"{n} world{'s' if n != 1 else ''} at concurrency {concurrency}"
    est = expected_seconds(model, levels, concurrency, finished)
    if est is None:
        return f"expected duration: unknown for {model} ({what}); the progress line estimates it as worlds finish"
    secs, basis = est
    return f"expected duration: ~{minutes(secs)} for {what} ({basis}); the progress line re-estimates as worlds finish"


HOSTED_CONCURRENCY = 4  # a hosted model's worlds wait on the endpoint: four at once, within most providers' rate limits


def default_concurrency(model: str) -> int:
    """`run --concurrency` when not given: one world per core for an offline model (the local model keeps one
    server per world, benchmark.models.local), HOSTED_CONCURRENCY for a hosted one."""
    from benchmark.models import is_offline
    from benchmark.models.human import is_human

    if is_human(model):
        return 1  # one keyboard
    return cores() if is_offline(model) else HOSTED_CONCURRENCY


def run_pace(model: str, items: dict[str, str], concurrency: int, finished: dict[str, list[float]] | None = None) -> Pace:
    """The progress line's `Pace` for a run: `items` maps each progress item ('<world> r<k>') to its level. A world
    weighs its level's median wall in this run where the run has finished worlds of that level, else the local
    model's seconds per world (LOCAL_CPU_S: for a hosted model too, as proportions, since an L3 dossier makes many
    more calls than an L1 world); the expected duration is `expected_seconds`'s, when it has one. As worlds finish,
    the pace replaces these weights by each level's measured walls (progress.Pace.observe)."""
    finished = {k: v for k, v in (finished or {}).items() if v}
    per = {lv: statistics.median(finished[lv]) if lv in finished else LOCAL_CPU_S.get(lv, LOCAL_CPU_S["L2"])
           for lv in set(items.values())}
    est = expected_seconds(model, list(items.values()), concurrency, finished)
    return Pace(weights={item: per[lv] for item, lv in items.items()}, expected_s=est[0] if est else None,
                levels=dict(items), slots=concurrency)
