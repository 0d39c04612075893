"""Validity of the suite itself (SPEC R15): the oracle solves every world in the sandbox, the naive agent falls
into every trap and passes every clean control. Failures name the world."""
from __future__ import annotations

import tempfile
from pathlib import Path

from benchmark.records import ResultRecord
from benchmark.run import RunConfig, execute

ORACLE_MIN = 95.0
CLEAN_CLASSES = ("clean", "boundary")


def oracle_problems(records: list[ResultRecord]) -> list[str]:
    return [f"{r.world_id}: scripted/oracle scored {r.score:.1f} < {ORACLE_MIN:g} ({r.status}; {r.grade.reason if r.grade else ''})"
            for r in records if (r.score or 0.0) < ORACLE_MIN]


def naive_problems(records: list[ResultRecord]) -> list[str]:
    out = []
    for r in records:
        score = r.score or 0.0
        if r.world_class in CLEAN_CLASSES and score < 100.0 - 1e-6:
            out.append(f"{r.world_id}: scripted/naive should pass this {r.world_class} control but scored {score:.1f} ({r.grade.status if r.grade else r.status})")
        elif r.world_class not in CLEAN_CLASSES and score >= 100.0 - 1e-6:
            out.append(f"{r.world_id}: scripted/naive should fall into this {r.world_class} but scored full marks")
    return out


def check_agents(worlds: list[str] | None, tracks: list[str] | None, levels: list[str] | None,
                 concurrency: int = 1, out: Path | None = None) -> tuple[list[str], dict[str, list[ResultRecord]]]:
    base = Path(out) if out else Path(tempfile.mkdtemp(prefix="benchmark-agents-"))
    results: dict[str, list[ResultRecord]] = {}
    problems: list[str] = []
    for agent, judge in (("oracle", oracle_problems), ("naive", naive_problems)):
        cfg = RunConfig(model=f"scripted/{agent}", out=base / agent, worlds=worlds, tracks=tracks,
                        levels=levels or ["L1", "L2"], concurrency=concurrency, resume=True)
        results[agent] = execute(cfg)
        problems += judge(results[agent])
    return problems, results
