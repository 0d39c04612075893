"""Recorded runs as Inspect AI eval logs (`python -m benchmark export inspect RUN... --out DIR`).

One log per (model, level): L1, L2 and L3 are different tasks (a report, an analysis with work products, a
hypothesis under review) and Inspect summarises a log with one mean, so a log never mixes levels. An L2 log holds
every track's L2 worlds; the track is in each sample's metadata (filter on it in the viewer). Several runs of the
same model are merged; a (world, replicate) recorded twice is an error, as on the leaderboard.

Each recorded (world, replicate) is one `EvalSample`: id = world id, epoch = replicate + 1 (Inspect counts epochs
from 1). It carries the chat (benchmark/export/inspect_messages.py: code cells are run_python tool calls answered by
their output), the final answer as `output`, one score `discern` (the record's deterministic grade on 0-100, the
grade's state/components/checks/caps in the score metadata, the LLM verifier's verdicts when DIR/verification.jsonl
has them), the agent's tokens as `model_usage`, reviewer/judge/verifier tokens as `role_usage`, and the record's
identity in `metadata` (world id, track, family, level, class, status, trajectory path, harness version). L3
samples also hold the protocol record (prior, gate, review rounds with critiques and rebuttals, judge draws) under
`metadata["l3"]`.

Scores are the records' as written unless `--ledgers` names adjudication ledgers: then each ruled sample carries
the score the leaderboard uses (its ruling ids and the recorded score in the score's metadata), and the log says
`rulings_applied`. `target` is the world's expected response, the score's `answer` the head of the report, and the
sample's events (a ModelEvent per agent turn, a ToolEvent per cell, the ScoreEvent) fill Inspect's transcript. A fault
(model, sandbox or harness error) and a refusal carry no score value (Inspect's unscored NaN, with `reason` = the
status) and the sample's `error` names the fault; a gated-out L3 dossier has no score either. The log's metric
`mean` is the mean over the scored samples, the benchmark's rule for level means (faults, refusals and gated-out
dossiers do not enter them); `scored_samples`/`unscored_samples` say how many of each.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspect_ai.log import (EvalConfig, EvalDataset, EvalLog, EvalMetric, EvalPlan, EvalPlanStep, EvalResults, EvalSample,
                            EvalScore, EvalSpec, EvalStats, write_eval_log)
from inspect_ai.log._log import EvalError
from inspect_ai.model import GenerateConfig, ModelOutput, ModelUsage
from inspect_ai.scorer import Score

from benchmark.errors import BenchmarkError
from benchmark.export.inspect_messages import chat_messages, transcript_events
from benchmark.run.records import ERROR_STATUSES, ResultRecord, Trajectory
from benchmark.run.store import RunStore, read_json_file, result_key
from benchmark.oversight.verify import Verification, load_verifications

SCORER = "discern"
TASK_PREFIX = "discern-"
# L3 record fields copied into sample metadata; the judge's whole input (the dossier again) is left out, its length kept.
L3_FIELDS = ("prior_raw", "prior", "eligible", "eligibility_reason", "steps", "early_answers", "first_answer",
             "final_answer", "first_hypothesis", "final_hypothesis", "first_commitment", "commitment", "reviewers", "rounds",
             "judge_draws", "dossier_chars", "axes", "score_native", "hyp_drift", "truncations", "unparsed")


@dataclass
class LoadedRun:
    root: Path
    store: RunStore
    config: dict
    records: list[ResultRecord]
    verifications: dict[str, list[Verification]]
    suite: Any = None  # the suite the run was graded against (targets: each world's expected response)


@dataclass
class Written:
    path: Path
    model: str
    level: str
    samples: int
    mean: float | None

    @property
    def mean_text(self) -> str:
        return "-" if self.mean is None else f"{self.mean:.1f}"


def load_run(root: Path) -> LoadedRun:
    store = RunStore.existing(root)
    cfg = read_json_file(root / "config.json", "run configuration") if (root / "config.json").exists() else {}
    verifs: dict[str, list[Verification]] = defaultdict(list)
    for v in load_verifications(root):
        verifs[v.key].append(v)
    from benchmark.score.regrade import suite_of

    return LoadedRun(root, store, cfg, store.results(), dict(verifs), suite_of(store))


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat(timespec="seconds")


def _started(run: LoadedRun) -> str:
    s = run.config.get("started")
    if isinstance(s, str) and s:
        return s
    return _iso((run.root / "config.json").stat().st_mtime if (run.root / "config.json").exists()
                else run.store.results_path.stat().st_mtime)


def _usage(tokens_in: int, tokens_out: int) -> ModelUsage:
    return ModelUsage(input_tokens=tokens_in, output_tokens=tokens_out, total_tokens=tokens_in + tokens_out)


def _role_usage(rec: ResultRecord, verifs: list[Verification]) -> dict[str, ModelUsage]:
    out = {role: _usage(u.tokens_in, u.tokens_out) for role, u in sorted(rec.role_usage.items())}
    if verifs:
        vu = [v.usage for v in verifs]
        out["verifier"] = _usage(sum(u.tokens_in for u in vu), sum(u.tokens_out for u in vu))
    return out


def _verifier_meta(v: Verification) -> dict[str, Any]:
    return {"verifier_model": v.verifier_model, "parsed": v.parsed, "verdict": v.verdict, "reason": v.reason,
            "discrepancies": [d.model_dump() for d in v.discrepancies], "usage": v.usage.model_dump()}


ANSWER_CHARS = 4000  # Score.answer: the head of the report the score judged (the whole report is the sample's output)


def sample_score(rec: ResultRecord, verifs: list[Verification], rulings: dict | None = None, run_id: str = "",
                 answer: str | None = None) -> Score:
    """The record's grade as an Inspect score: value 0-100 (unscored for a fault, a refusal or a gated-out dossier).
    With `rulings` (the ledgers' rulings in force), a ruled result carries the score the leaderboard uses, the
    ruling ids and the recorded score beside it."""
    meta: dict[str, Any] = {"scale": "0-100", "status": rec.status, "record_score": rec.score,
                            "verified": bool(verifs), "verifier": [_verifier_meta(v) for v in verifs]}
    answer = answer[:ANSWER_CHARS] if answer else None
    if rulings:
        from benchmark.score.aggregate import apply_rulings

        eff = apply_rulings(rec, run_id, rulings)
        if eff.rulings:
            meta.update({"rulings": eff.rulings, "ruled_state": eff.state, "ruled_components": eff.components})
            if rec.status not in ERROR_STATUSES and rec.status != "refused" and (rec.score is not None or
                                                                                  eff.eligible):
                return Score(value=float(eff.score), answer=answer, metadata=meta,
                             explanation=f"ruled by ledger ruling(s) {', '.join(map(str, eff.rulings))} "
                                         f"(recorded score {rec.score})")
    g = rec.grade
    if g is not None:
        meta.update({"state" if rec.level == "L1" else "grade_status": g.status, "native": g.native,
                     "components": g.components, "checks": [c.model_dump() for c in g.checks], "caps": g.caps,
                     "fabrication": g.fabrication, "invented": g.invented, "grader": g.grader,
                     "grader_version": g.grader_version})
    if rec.level == "L3":
        meta.update({"axes": rec.l3_axes, "commitment": rec.commitment, "eligible": rec.eligible,
                     "eligibility_reason": rec.eligibility_reason, "hyp_drift": rec.hyp_drift,
                     "rounds": rec.l3_rounds, "prior_return": rec.prior_return})
    explanation = g.reason if g is not None else (rec.eligibility_reason if rec.level == "L3" else None)
    if rec.status in ERROR_STATUSES or rec.status == "refused" or rec.score is None:
        why = ("refusal" if rec.status == "refused" else rec.status if rec.status in ERROR_STATUSES
               else "ineligible" if rec.level == "L3" and rec.eligible is False else rec.status)
        return Score.unscored(reason=why, explanation=rec.error or explanation, metadata=meta)
    return Score(value=float(rec.score), answer=answer, explanation=explanation, metadata=meta)


def _output(rec: ResultRecord, traj: Trajectory | None) -> ModelOutput:
    text = (traj.report_raw if traj is not None else None) or ""
    if not text and traj is not None:
        last = next((m for m in reversed(traj.messages) if m.get("role") == "assistant" and m.get("content")), None)
        text = str(last["content"]) if last else ""
    stop = "content_filter" if rec.refusal == "content_filter" else "stop"
    return ModelOutput.from_content(rec.model, text, stop_reason=stop,
                                    error=rec.error if rec.status in ERROR_STATUSES else None)


def _l3_meta(traj: Trajectory | None) -> dict[str, Any] | None:
    l3 = traj.l3 if traj is not None and isinstance(traj.l3, dict) else None
    if not l3:
        return None
    out = {k: l3.get(k) for k in L3_FIELDS if k in l3}
    out["judge_prompt_chars"] = len(l3.get("judge_prompt") or "")
    out["role_calls"] = [{k: c.get(k) for k in ("role", "model", "step", "ok", "tokens_in", "tokens_out", "error")}
                         for c in l3.get("role_calls") or []]
    return out


def _target(run: LoadedRun, rec: ResultRecord) -> str:
    """What a right answer is, in the world's own words (its manifest's expected response); empty for a world this
    checkout does not hold."""
    ref = run.suite.worlds.get(rec.world_id) if run.suite is not None else None
    return (getattr(ref.world, "expected_response", None) or "") if ref is not None else ""


def build_sample(run: LoadedRun, rec: ResultRecord, rulings: dict | None = None) -> EvalSample:
    traj = run.store.load_trajectory(rec.trajectory) if rec.trajectory else None
    verifs = run.verifications.get(result_key(rec.world_id, rec.replicate), [])
    messages = chat_messages(traj) if traj is not None else []
    first_user = next((m.text for m in messages if m.role == "user"), "") or rec.world_id
    meta: dict[str, Any] = {
        "world_id": rec.world_id, "track": rec.track, "family": rec.family, "level": rec.level,
        "world_class": rec.world_class, "status": rec.status, "replicate": rec.replicate, "seed": rec.seed,
        "trajectory": rec.trajectory, "run_dir": str(run.root.resolve()), "run_id": rec.run_id or run.store.run_id(),
        "harness_version": rec.harness_version, "calls": rec.calls, "failed_calls": rec.failed_calls,
        "retries": rec.retries, "code_cells": rec.code_cells, "violations": rec.violations,
        "audit_flags": rec.audit_flags, "refusal": rec.refusal, "error": rec.error,
        "step_budget": traj.step_budget if traj is not None else None,
        "outputs": traj.outputs if traj is not None else [],
    }
    l3 = _l3_meta(traj)
    if l3 is not None:
        meta["l3"] = l3
    fault = rec.status in ERROR_STATUSES
    target = _target(run, rec)
    output = _output(rec, traj)
    score = sample_score(rec, verifs, rulings=rulings, run_id=meta["run_id"], answer=output.completion)
    return EvalSample(
        id=rec.world_id, epoch=rec.replicate + 1, input=first_user, target=target, messages=messages,
        output=output, scores={SCORER: score}, metadata=meta,
        events=transcript_events(messages, rec.model, rec.started_at, score, target),
        model_usage={rec.model: _usage(rec.tokens_in, rec.tokens_out)}, role_usage=_role_usage(rec, verifs),
        total_time=rec.wall_s, working_time=rec.wall_s,
        uuid=hashlib.sha256(f"{meta['run_id']}/{rec.world_id}/{rec.replicate}".encode()).hexdigest()[:22],
        error=EvalError(message=f"{rec.status}: {rec.error or 'no detail recorded'}", traceback="", traceback_ansi="")
        if fault else None)


def _sum_usage(usages: list[ModelUsage]) -> ModelUsage:
    total = ModelUsage()
    for u in usages:
        total = total + u
    return total


def _values(samples: list[EvalSample]) -> list[float]:
    vals = []
    for s in samples:
        v = (s.scores or {}).get(SCORER)
        if v is not None and isinstance(v.value, (int, float)) and not math.isnan(float(v.value)):
            vals.append(float(v.value))
    return vals


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("discern-bench")
    except PackageNotFoundError:
        return "unknown"


def build_log(model: str, level: str, items: list[tuple[LoadedRun, ResultRecord]], rulings: dict | None = None) -> EvalLog:
    runs = sorted({id(r): r for r, _ in items}.values(), key=lambda r: r.store.run_id())
    samples = [build_sample(run, rec, rulings) for run, rec in items]
    vals = _values(samples)
    mean = sum(vals) / len(vals) if vals else None
    run_ids = [r.store.run_id() for r in runs]
    task = f"{TASK_PREFIX}{level}"
    digest = hashlib.sha256(json.dumps([model, level, run_ids]).encode()).hexdigest()
    created = min(_started(r) for r in runs)
    cfg0 = runs[0].config
    harness = sorted({rec.harness_version for _, rec in items})
    steps = [EvalPlanStep(solver="discern/agent", params={"tool": "run_python", "level": level,
                                                         "step_budgets": sorted({s.metadata["step_budget"] for s in samples
                                                                                 if s.metadata["step_budget"] is not None})})]
    if level == "L3":
        steps += [EvalPlanStep(solver="discern/review", params={"reviewers": cfg0.get("reviewers"), "rounds": 3}),
                  EvalPlanStep(solver="discern/judge", params={"judge": cfg0.get("judge"), "draws": 3})]
    metrics = {"mean": EvalMetric(name="mean", value=mean)} if mean is not None else {}
    role_usage: dict[str, list[ModelUsage]] = defaultdict(list)
    for s in samples:
        for role, u in s.role_usage.items():
            role_usage[role].append(u)
    completed = max(r.store.results_path.stat().st_mtime for r in runs)
    return EvalLog(
        status="success",
        eval=EvalSpec(
            run_id=digest[:22], eval_id=digest[22:44], task_id=digest[:22], created=created, task=task,
            task_version=",".join(harness), task_display_name=f"DISCERN {level}",
            task_description=f"DISCERN benchmark, level {level}: one sample per (world, replicate); scores 0-100",
            solver="discern/agent", dataset=EvalDataset(name=task, samples=len(samples),
                                                        sample_ids=sorted({s.id for s in samples})),
            model=model, config=EvalConfig(epochs=max(s.epoch for s in samples)),
            packages={"discern-bench": _package_version()},
            metadata={"runs": [{"run_id": r.store.run_id(), "path": str(r.root.resolve()), "started": _started(r),
                                "seed": r.config.get("seed"), "replicates": r.config.get("replicates"),
                                "reviewers": r.config.get("reviewers"), "judge": r.config.get("judge")} for r in runs],
                      "harness_versions": harness, "level": level, "score_scale": "0-100",
                      "rulings_applied": rulings is not None,
                      "rulings_in_samples": sorted({r for s in samples for r in
                                                    ((s.scores or {}).get(SCORER).metadata or {}).get("rulings", [])}),
                      "exported_by": "python -m benchmark export inspect"}),
        plan=EvalPlan(name="discern", steps=steps, config=GenerateConfig(seed=cfg0.get("seed"))),
        results=EvalResults(
            total_samples=len(samples), completed_samples=sum(s.error is None for s in samples),
            scores=[EvalScore(name=SCORER, scorer=SCORER, scored_samples=len(vals),
                              unscored_samples=len(samples) - len(vals), metrics=metrics,
                              metadata={"scale": "0-100", "mean_over": "scored samples (faults, refusals and "
                                                                       "gated-out L3 dossiers carry no score)"})]),
        stats=EvalStats(started_at=created, completed_at=_iso(completed),
                        model_usage={model: _sum_usage([s.model_usage[model] for s in samples])},
                        role_usage={r: _sum_usage(us) for r, us in sorted(role_usage.items())}),
        samples=samples,
    )


def log_file_name(log: EvalLog) -> str:
    """Inspect's own naming, {timestamp}_{task}_{id}.eval, so `list_eval_logs` parses it without reading the file."""
    ts = log.eval.created.replace(":", "-")
    return f"{ts}_{log.eval.task}_{log.eval.task_id}.eval"


def group_records(runs: list[LoadedRun]) -> dict[tuple[str, str], list[tuple[LoadedRun, ResultRecord]]]:
    groups: dict[tuple[str, str], list[tuple[LoadedRun, ResultRecord]]] = defaultdict(list)
    seen: dict[tuple[str, str, int], Path] = {}
    for run in runs:
        for rec in run.records:
            k = (rec.model, rec.world_id, rec.replicate)
            if k in seen:
                raise BenchmarkError(f"{rec.model}: world {rec.world_id} replicate {rec.replicate} is recorded in both "
                                     f"{seen[k]} and {run.root}; export only one of them")
            seen[k] = run.root
            groups[(rec.model, rec.level)].append((run, rec))
    return {k: sorted(v, key=lambda x: (x[1].world_id, x[1].replicate)) for k, v in sorted(groups.items())}


def export_runs(run_dirs: list[Path], out: Path, ledgers: list | None = None) -> list[Written]:
    """Write one .eval log per (model, level) into `out` (atomically: a temp file, then a rename). With `ledgers`
    (Ledger objects), each sample's score is the one the leaderboard uses: the rulings in force applied."""
    from benchmark.run.progress import progress

    if not run_dirs:
        raise BenchmarkError("name at least one run directory to export")
    runs = [load_run(Path(p)) for p in run_dirs]
    groups = group_records(runs)
    rulings = None
    if ledgers is not None:
        from benchmark.oversight.ledger import effective_rulings

        rulings = effective_rulings(ledgers)
    if not groups:
        raise BenchmarkError(f"{', '.join(map(str, run_dirs))}: no result records to export; run some worlds first")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Written] = []
    with progress("exporting to Inspect", len(groups), finished=True) as step:
        for (model, level), items in groups.items():
            log = build_log(model, level, items, rulings)
            path = out / log_file_name(log)
            tmp = out / f".{path.name}.{os.getpid()}.tmp"
            try:
                write_eval_log(log, str(tmp), format="eval")
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
            vals = _values(log.samples or [])
            written.append(Written(path, model, level, len(items), sum(vals) / len(vals) if vals else None))
            step(f"{model} {level}")
    return written
