"""One entry point for deterministic grading of any L1/L2 world, returning a record-ready `Grade`."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from graders.manifest import L1World, L2World
from graders.l1 import grade_l1
from graders.l2 import grade_l2


class CheckRecord(BaseModel):
    id: str
    credit: float
    detail: str
    component: str | None = None


class Grade(BaseModel):
    """What a result record stores: the L1 state or the L2 components, the score on 0-100, and the grader identity."""

    world_id: str
    level: Literal["L1", "L2"]
    status: str  # L1 state, or "graded"/"NONCOMPLIANT" for L2
    native: float  # L1: 0-3; L2: 0-1
    score: float  # 0-100
    components: dict[str, float] | None = None
    reason: str
    caps: list[str] = []
    checks: list[CheckRecord] = []
    fabrication: float | None = None
    invented: list[str] = []
    grader: str
    grader_version: str


def grade(ref: Any, golden: dict[str, Any], report: Any, code_cells: list[str] | None = None,
          products: Path | None = None, inputs: Path | None = None) -> Grade:
    """`ref` is a world reference (benchmark.suite.loader.WorldRef: its world, family and track); `products` is the
    folder holding the work products the agent wrote (the run's artifacts/<key>/); `inputs` the world's public
    files, against which an L1 corrected copy is read (without them only a list of items is)."""
    from graders.registry import load_track_module

    load_track_module(ref.track.solver_module)  # registers the track's product validators (gold side)
    w = ref.world
    if isinstance(w, L1World):
        g = grade_l1(w, ref.family, golden, report, code_cells, products, inputs)
        return Grade(world_id=w.id, level="L1", status=g.state, native=g.score, score=round(g.score100, 6),
                     reason=g.reason, checks=[CheckRecord(**c.__dict__) for c in g.checks], fabrication=g.fabrication,
                     invented=g.invented, grader=g.grader, grader_version=g.grader_version)
    if isinstance(w, L2World):
        g2 = grade_l2(w, ref.family, golden, report, products)
        return Grade(world_id=w.id, level="L2", status=g2.status, native=g2.score, score=round(g2.score100, 6),
                     components=g2.components, reason=g2.reason, caps=g2.caps,
                     checks=[CheckRecord(**c.__dict__) for c in g2.checks], invented=g2.invented, grader=g2.grader, grader_version=g2.grader_version)
    raise ValueError(f"world {w.id} is {w.level}; L3 dossiers are graded by the judge protocol, not deterministically")
