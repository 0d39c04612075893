"""What a run's scores mean: the model beside the suite's baselines on the same worlds (issue 41 item 9).

A newcomer's first run ends with a table of means; alone it says nothing. The bars every L1/L2 world is built to
(and CI checks with `worlds check --agents`) give it a scale:

  oracle       the reference analysis run in the sandbox: 100 on every L1/L2 world.
  blind trust  accept every data set and every default analysis, report nothing (`scripted/all_clear`): full marks
               on the sound worlds (an L1 world whose rubric expects acceptance, an L2 clean control), nothing where
               there is a defect or a trap. Its mean over the run's worlds is the share of sound worlds, the bar a
               score must clear to show any judgment (the naive agent, which runs the default analysis, sits there too).

L3 dossiers have no blind-trust bar (a judge scores them); they are shown without one.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

MARGIN = 5.0  # the gaming bar's margin: within it of blind trust is no evidence of judgment


def sound(ref: Any) -> bool:
    """Whether blind trust earns full marks on this world: nothing in it needs to be found or avoided."""
    w = ref.world
    if w.level == "L1":
        return w.rubric.expect == "accept"
    return w.world_class == "clean"


def meaning(records: list, suite: Any) -> list[str]:
    """Lines that place the run's mean per level beside the oracle and blind trust on the same worlds, and say in
    one sentence what the score means."""
    by_level: dict[str, list] = defaultdict(list)
    for r in records:
        by_level[r.level].append(r)
    out = []
    for level in sorted(by_level):
        rs = by_level[level]
        scores = [r.score if r.score is not None else 0.0 for r in rs]
        mean = sum(scores) / len(scores)
        noncompliant = sum(r.status == "noncompliant" for r in rs)
        faults = sum(r.score is None for r in rs)
        model = rs[0].model
        if level == "L3":
            out.append(f"{level}: {model} {mean:.1f} over {len(rs)} dossiers (judge-scored; no blind-trust bar)")
            continue
        refs = [suite.worlds.get(r.world_id) for r in rs]
        trust = 100.0 * sum(1 for x in refs if x is not None and sound(x)) / len(rs)
        line = f"{level}: {model} {mean:.1f} | oracle 100.0 | blind trust {trust:.1f} ({len(rs)} worlds)"
        if faults:
            why = f"{faults} of {len(rs)} worlds ended in a fault and count 0 here; rerun with --resume before reading it"
        elif noncompliant * 2 > len(rs):
            why = (f"{noncompliant} of {len(rs)} reports were not valid JSON of the schema, so this mostly measures "
                   "the report format, not judgment")
        elif mean <= trust + MARGIN:
            why = "at or near blind trust: no evidence of judgment on these worlds"
        else:
            why = (f"{mean - trust:.1f} points above blind trust: it found defects or avoided traps that accepting "
                   "everything misses")
        out.append(f"{line}: {why}")
    return out
