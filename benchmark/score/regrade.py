"""Re-grade a finished run from its stored trajectories, without re-running any agent (SPEC R8).

L1/L2: every grade is recomputed with this checkout's graders and goldens. L3: a dossier's grade is the judge
protocol's; it is re-scored from the judge draws stored in its trajectory (median per axis, the run's own scoring
rule, benchmark.run.l3.recorded_score) and the judge is never called again, so a changed L3 scoring rule reaches the
records while the judge's answers stay what they were. Faults (model, sandbox, harness errors) have no grade:
`run --resume` retries them.

Where the grades go: `results.jsonl` itself, so everything that reads a run (the leaderboard, `ledger pending`,
`verify`) sees the new grades. The rewrite holds the run folder's harness lock (no `run` may append meanwhile), keeps
the previous file as `results.<UTC time>.jsonl.bak`, and replaces `results.jsonl` atomically (temp file + rename).
Only the latest line of a re-graded (world, replicate) changes; every other line is kept byte for byte, and a run
whose grades did not change is not rewritten at all.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, Field

from benchmark.suite.canonical import _atomic_write
from benchmark.errors import BenchmarkError
from benchmark.run.records import ERROR_STATUSES, ResultRecord
from benchmark.run.store import RunStore, result_key


class RegradeRow(BaseModel):
    """One re-graded result: what was recorded, what the current graders give, and by what."""

    key: str
    level: str
    by: str  # "graders.l1 v3" or "the judge's 3 stored draws"
    old_status: str
    new_status: str
    old_score: float | None
    new_score: float | None
    changed: bool


class Regrade(BaseModel):
    rows: list[RegradeRow]
    faults: int  # results with no grade to recompute (model, sandbox or harness errors)
    l3_kept: int  # L3 results kept as recorded: no judge draw is stored to re-score from
    results: Path
    backup: Path | None  # the previous results.jsonl, when it was rewritten
    pairs: list[tuple[ResultRecord, ResultRecord]] = Field(default_factory=list, exclude=True)  # (recorded, new)

    @property
    def changed(self) -> list[RegradeRow]:
        return [r for r in self.rows if r.changed]


def regrade_run(run_dir: Path, on_step=None, write: bool = True) -> Regrade:
    """Recompute every grade of a run; with `write`, rewrite results.jsonl when any grade changed (see module doc)."""
    store = RunStore.existing(run_dir)
    if write:
        store.acquire()  # one harness per folder: a `run` appending now would be lost by the rewrite
    try:
        suite = suite_of(store)
        rows, pairs, new_lines, faults, kept = [], [], {}, 0, 0
        records = sorted(store.results(check_scores=False), key=lambda r: (r.world_id, r.replicate))
        for rec in records:
            key = result_key(rec.world_id, rec.replicate)
            if rec.status in ERROR_STATUSES:
                faults += 1
                continue
            if on_step:
                on_step(key)
            if rec.world_id not in suite.worlds:
                raise BenchmarkError(f"{store.results_path}: world '{rec.world_id}' is not in this checkout's suite "
                                     "(or the run's campaign); re-grade it with the checkout that ran it")
            new, by = (_rescore_l3(store, rec) if rec.level == "L3" else _grade_l12(store, suite.worlds[rec.world_id], rec))
            if new is None:
                kept += 1
                continue
            changed = new.model_dump() != rec.model_dump()
            pairs.append((rec, new))
            rows.append(RegradeRow(key=key, level=rec.level, by=by, old_status=rec.status, new_status=new.status,
                                   old_score=rec.score, new_score=new.score, changed=changed))
            if changed:
                new_lines[key] = new
        backup = _rewrite(store, new_lines) if write and new_lines else None
        return Regrade(rows=rows, faults=faults, l3_kept=kept, results=store.results_path, backup=backup, pairs=pairs)
    finally:
        if write:
            store.close()


def regrade(run_dir: Path) -> list[tuple[str, object, object]]:
    """(key, new grade, recorded grade) for every L1/L2 result; results.jsonl is rewritten when a grade changed."""
    out = regrade_run(run_dir)
    return [(result_key(old.world_id, old.replicate), new.grade, old.grade) for old, new in out.pairs
            if old.level in ("L1", "L2")]


def suite_of(store: RunStore):
    """The suite the run was graded against: this checkout's, bound to the run's private campaign if it had one."""
    from benchmark.suite.campaign import campaign_suite
    from benchmark.suite.loader import load_suite

    try:
        campaign = store.config().get("suite")
    except FileNotFoundError:
        campaign = None
    return campaign_suite(load_suite(), campaign) if campaign else load_suite()


def _inputs(ref, ensure_built):
    """The world's files, for reading a corrected copy named as a product; None when they cannot be built here."""
    from benchmark.errors import BenchmarkError
    from graders.registry import RegistryError

    try:
        return ensure_built(ref)
    except (BenchmarkError, RegistryError, OSError):
        return None


def _grade_l12(store: RunStore, ref, rec: ResultRecord) -> tuple[ResultRecord, str]:
    """The record as `run` would write it with this checkout's grader (benchmark.run.episodes.run_one's status rule)."""
    from benchmark.suite.freeze import ensure_built, read_golden
    from graders.grade import grade

    traj = store.load_trajectory(rec.trajectory)
    g = grade(ref, read_golden(ref).values, traj.report_raw, [c.code + "\n" + c.stdout for c in traj.cells],
              products=store.artifacts / result_key(rec.world_id, rec.replicate), inputs=_inputs(ref, ensure_built))
    status = rec.status
    if status in ("graded", "noncompliant"):  # the grade decides between these two; other outcomes stay
        status = "noncompliant" if g.status == "NONCOMPLIANT" else "graded"
    new = ResultRecord.model_validate({**rec.model_dump(by_alias=True), "grade": g.model_dump(), "score": g.score,
                                       "status": status})
    return new, f"{g.grader} v{g.grader_version}"


def _rescore_l3(store: RunStore, rec: ResultRecord) -> tuple[ResultRecord | None, str]:
    """The dossier re-scored from the judge draws its trajectory stores; None when none is stored (kept as recorded)."""
    from benchmark.run.l3 import judged_axes, l3_score, recorded_score

    traj = store.load_trajectory(rec.trajectory)
    l3 = traj.l3 if isinstance(traj.l3, dict) else {}
    draws = l3.get("judge_draws") or []
    if not draws:
        return None, "kept as recorded"
    commitment = l3.get("commitment")
    try:
        axes = judged_axes(draws, commitment)
    except (KeyError, TypeError, ValueError) as exc:
        raise BenchmarkError(f"{store.root / rec.trajectory}: field 'l3.judge_draws' holds a draw without axis "
                             f"{exc}; restore the trajectory, or delete its line in results.jsonl and re-run the world "
                             "with --resume") from None
    score = recorded_score(rec.status, l3_score(axes, commitment), bool(rec.eligible))
    new = ResultRecord.model_validate({**rec.model_dump(by_alias=True), "score": score, "l3_axes": axes or None})
    return new, f"the judge's {len(draws)} stored draws"


def _rewrite(store: RunStore, new: dict[str, ResultRecord]) -> Path:
    """results.jsonl with the latest line of each key in `new` replaced; the old file kept as a .bak first."""
    data = store.results_path.read_bytes()
    lines = data.split(b"\n")
    valid: list[int] = []
    last: dict[str, int] = {}
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            rec = ResultRecord.model_validate_json(raw)
        except (ValueError, RecursionError):
            continue  # a torn last line (store.results() refused any other): no record, and dropped
        valid.append(i)
        last[result_key(rec.world_id, rec.replicate)] = i
    from benchmark.run.chain import chain_of, chained_line

    replace = {i: new[key] for key, i in last.items() if key in new}
    bodies = [replace[i].model_dump_json(by_alias=True, exclude={"chain"}).encode() if i in replace
              else chain_of(lines[i])[0] for i in valid]
    out, prev = [], None  # the rewritten file is re-chained from its first row
    for body in bodies:
        out.append(chained_line(body, prev))
        prev = chain_of(out[-1])[1]
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    backup = store.results_path.with_name(f"results.{stamp}.jsonl.bak")
    _atomic_write(backup, data)
    _atomic_write(store.results_path, b"".join(out))
    return backup
