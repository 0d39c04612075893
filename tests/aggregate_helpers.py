"""Hand-made ResultRecords and run directories for the aggregation, accounting and leaderboard tests."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from benchmark.score.accounting import Pricing, RateCard
from benchmark.score.aggregate import RunInput
from benchmark.run.records import ResultRecord, RoleUsage
from benchmark.run.store import RunStore
from graders.grade import Grade
from graders.l1 import STATE_SCORES

DATE = dt.date(2026, 10, 1)


def rec(world_id: str, track: str, level: str, score: float | None = None, *, model: str = "m/a", family: str | None = None,
        cls: str = "clean", replicate: int = 0, status: str = "graded", state: str | None = None,
        comps: dict[str, float] | None = None, caps: list[str] | None = None, tokens_in: int = 0, tokens_out: int = 0,
        calls: int = 1, code_cells: int = 0, eligible: bool | None = None, commitment: str | None = None,
        axes: dict[str, float] | None = None, run_id: str = "", role_usage: dict[str, RoleUsage] | None = None,
        fabrication: float | None = None) -> ResultRecord:
    grade = None
    if level == "L1":
        state = state or "CLEAN-CORRECT"
        native = STATE_SCORES[state] if score is None else score * 3 / 100  # a row's score follows from its grade
        score = native * 100 / 3 if score is None else score
        grade = Grade(world_id=world_id, level="L1", status=state, native=native, score=score, reason="r",
                      fabrication=fabrication, grader="t", grader_version="1")
    elif level == "L2":
        comps = comps if comps is not None else {c: (score or 0) / 100 for c in "AIMC"}
        if score is None:
            score = sum(comps.values()) / 4 * 100
        grade = Grade(world_id=world_id, level="L2", status="graded", native=score / 100, score=score, components=comps,
                      caps=caps or [], reason="r", grader="t", grader_version="1")
    elif level == "L3":
        score, axes = _l3_row(score, status, eligible, commitment, axes)
    return ResultRecord.model_validate(dict(
        world_id=world_id, track=track, level=level, family=family or f"{track}.{level}.fam", **{"class": cls},
        model=model, replicate=replicate, seed=replicate, status=status, score=score, grade=grade,
        tokens_in=tokens_in, tokens_out=tokens_out, calls=calls, failed_calls=0, retries=0, code_cells=code_cells,
        wall_s=0.0, violations=[], audit_flags=[], trajectory="t.json", harness_version="1", run_id=run_id,
        role_usage=role_usage or {}, eligible=eligible, commitment=commitment, l3_axes=axes))


def run_input(records: list[ResultRecord], model: str | None = None, run_id: str = "run-a",
              date: dt.date | None = DATE, verifier: dict | None = None) -> RunInput:
    model = model or records[0].model
    recs = [r.model_copy(update={"run_id": r.run_id or run_id}) for r in records]
    return RunInput(run_id, model, date, recs, verifier or {})


def zero_pricing(*models: str) -> Pricing:
    return Pricing([RateCard(date=dt.date(2026, 1, 1), source="test",
                             models={m: {"input": 0, "output": 0} for m in (models or ("m/*",))})])  # a provider glob: a bare "*" is refused


def write_run(root: Path, name: str, records: list[ResultRecord], model: str, started: str = "2026-10-01T00:00:00+00:00") -> Path:
    d = root / name
    store = RunStore(d)
    store.init({"model": model, "replicates": 1, "seed": 0, "run_id": name, "started": started}, resume=False)
    for r in records:
        store.append(r.model_copy(update={"run_id": name}))
    return d


def write_verification(run_dir: Path, lines: list[dict]) -> None:
    with open(run_dir / "verification.jsonl", "w") as fh:
        for obj in lines:
            fh.write(json.dumps(obj) + "\n")


def _l3_row(score, status, eligible, commitment, axes):
    """An L3 row as the harness writes it: an ineligible or failed dossier has no score; a score given without axes
    gets the uniform axes that give it (benchmark.run.l3 recorded_score; a reader refuses a row whose score does not
    follow from its own axes). Axes given are kept as they are: the caller writes a score that follows from them."""
    if eligible is False or status != "graded":
        return None, axes
    if axes is None and score is not None:
        v = score * 3 / 100
        axes = {"D": v, "Q": v} if commitment == "abstain" else {"D": v, "Q": v, "N": v}
        if commitment == "abstain":
            axes["abstention_justified"] = 1.0
    return score, axes
