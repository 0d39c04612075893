"""Pydantic formats of what a run records: model calls, code cells, the trajectory and the result line."""
from __future__ import annotations

from typing import Any, Literal

import math
from pathlib import PurePosixPath

from pydantic import BaseModel, Field, NonNegativeInt, field_validator, model_validator

from graders.grade import Grade
from sandbox.bwrap import CellResult, Violation

Status = Literal["graded", "noncompliant", "model_error", "refused", "sandbox_error", "harness_error", "budget_exhausted",
                 "ineligible"]
# Faults of the model endpoint, the sandbox or the harness: recorded without a score, excluded from aggregates,
# counted as missing coverage and retried by `run --resume` (they say nothing about the model's judgment).
ERROR_STATUSES = frozenset({"model_error", "sandbox_error", "harness_error"})
Role = Literal["agent", "verifier", "reviewer", "judge"]


class AttemptRecord(BaseModel):
    """One HTTP attempt of a model call: its status (None when no response came back), error and timing."""

    http_status: int | None = None
    error: str | None = None
    wall_s: float = 0.0
    wait_s: float = Field(0.0, description="backoff slept after this attempt before the next one")


class CallRecord(BaseModel):
    """One model call. Tokens count only when the call succeeded; failed attempts are listed as retries.

    `attempts` lists every attempt the harness made (the provider SDK's own retries are off), with its HTTP status.
    """

    role: Role = "agent"
    model: str
    step: int
    ok: bool
    tokens_in: int = 0
    tokens_out: int = 0
    usage_estimated: bool = Field(False, description="the endpoint reported no usage: tokens counted with the model's "
                                                     "tokenizer (benchmark.run.agent.estimate_usage)")
    wall_s: float = 0.0
    finish_reason: str | None = None
    retries: list[str] = Field(default_factory=list, description="error of each failed attempt before this one")
    error: str | None = None
    attempts: list[AttemptRecord] = Field(default_factory=list)


class CellRecord(CellResult):
    """A sandbox cell result with the step that ran it and its code. `via` is "fenced_code" when the code came from
    a fenced ```python block of a reply (a model without native tool calling), None for a run_python tool call."""

    step: int
    code: str
    via: Literal["fenced_code"] | None = None


class AuditFlag(BaseModel):
    kind: Literal["outside_workspace", "traversal", "filesystem_search", "answer_material", "network", "package_install"]
    cell: int
    evidence: str


class Trajectory(BaseModel):
    world_id: str
    model: str
    replicate: int
    seed: int
    harness_version: str
    messages: list[dict[str, Any]]
    calls: list[CallRecord] = Field(default_factory=list)
    cells: list[CellRecord] = Field(default_factory=list)
    violations: list[Violation] = Field(default_factory=list)
    audit: list[AuditFlag] = Field(default_factory=list)
    report_raw: str | None = None
    outputs: list[str] = Field(default_factory=list, description="files the agent wrote, copied to artifacts/")
    collect_log: list[str] = Field(default_factory=list, description="what collection skipped and why (bounded)")
    collect_summary: dict[str, Any] = Field(default_factory=dict, description="what the collection copied and cost")
    status: Status
    error: str | None = None
    wall_s: float = 0.0
    step_budget: int
    l3: Any = Field(None, description="L3 protocol record (benchmark.run.l3.L3Record) for hypothesis dossiers")


MAX_TOKENS_RECORDED = 10**12   # more tokens than any run can use: a figure past it is an endpoint's lie


def _finite_non_negative(v: float | None, what: str) -> float | None:
    if v is not None and (not math.isfinite(v) or v < 0):
        raise ValueError(f"{what} must be a finite number >= 0, not {v!r}")
    return v


def _tokens(v: int, what: str) -> int:
    if v > MAX_TOKENS_RECORDED:
        raise ValueError(f"{what} = {v} is not a plausible token count (> {MAX_TOKENS_RECORDED:.0e})")
    return v


class RoleUsage(BaseModel):
    tokens_in: NonNegativeInt = 0
    tokens_out: NonNegativeInt = 0
    calls: NonNegativeInt = 0
    model: str = ""
    estimated_calls: NonNegativeInt = Field(0, description="calls whose endpoint reported no usage (tokens estimated)")

    @field_validator("tokens_in", "tokens_out")
    @classmethod
    def _plausible(cls, v: int, info) -> int:
        return _tokens(v, info.field_name)


class ResultRecord(BaseModel):
    """One line of results.jsonl: a (world, replicate) outcome with its grade and usage.

    `score` is 0-100, and None for a fault (status in ERROR_STATUSES, with `error` saying what failed). Agent usage
    (tokens_in/out, calls) is the headline; reviewer and judge usage of the L3
    protocol is in `role_usage`, never added to the agent's. L3 records carry eligibility and the axes.
    """

    world_id: str
    track: str
    level: str
    family: str
    world_class: str = Field(alias="class")
    model: str
    replicate: int
    seed: int
    status: Status
    score: float | None
    grade: Grade | None
    tokens_in: NonNegativeInt
    tokens_out: NonNegativeInt
    calls: NonNegativeInt
    usage_estimated_calls: NonNegativeInt = Field(0, description=(
        "agent calls whose endpoint reported no usage: their tokens were counted with the model's tokenizer"))
    failed_calls: NonNegativeInt
    retries: NonNegativeInt
    code_cells: NonNegativeInt
    wall_s: float
    violations: list[str]
    audit_flags: list[str]
    trajectory: str
    harness_version: str
    run_id: str = ""
    role_usage: dict[str, RoleUsage] = Field(default_factory=dict, description="reviewer/judge usage (not the agent's)")
    attempt: str | None = Field(None, description="the episode attempt that wrote this row (benchmark.run.journal); "
                                                  "None when no request of the run is paid (offline models)")
    lost_usage: dict[str, RoleUsage] = Field(default_factory=dict, description=(
        "requests of this (world, replicate) that no row counts: attempts whose record was lost or replaced (a Ray "
        "worker killed, a run killed, a fault re-run) and requests never answered (estimated from the prompt); by "
        "role ('agent', or 'role:model'); priced into $/task (benchmark.run.journal)"))
    eligible: bool | None = Field(None, description="L3 counterfactuals: the evidence conflicts with the stated prior")
    started_at: str | None = Field(None, description="UTC time the episode started (ISO 8601, ms): a run's timeline")
    finished_at: str | None = Field(None, description="UTC time the row was written, after grading (ISO 8601, ms)")
    eligibility_reason: str | None = None
    commitment: Literal["commit", "abstain"] | None = None
    l3_axes: dict[str, float] | None = Field(None, description="L3: D, Q, N (0-3) and the five Q sub-axes")
    hyp_drift: float | None = None
    l3_rounds: list[dict[str, float]] | None = Field(None, description="L3: per review round, concessions and reviewer "
                                                                        "rejection fraction")
    prior_return: float | None = Field(None, description="L3 counterfactual: 1 when the final hypothesis moved back "
                                                         "toward the stated prior (benchmark.score.aggregate, stability)")
    refusal: str | None = Field(None, description="how a refusal was detected: 'content_filter' (provider) or "
                                                  "'reply_text: <pattern>' (benchmark.run.refusal)")
    error: str | None = Field(None, description="what failed, for a fault (model_error, sandbox_error, harness_error)")
    chain: str | None = Field(None, description=(
        "sha256 of the previous row's chain and this row's bytes without this field (benchmark.run.chain): an edited, "
        "removed or reordered row breaks every chain after it (`leaderboard --verify`)"))

    model_config = {"populate_by_name": True}

    @field_validator("tokens_in", "tokens_out")
    @classmethod
    def _plausible(cls, v: int, info) -> int:
        return _tokens(v, info.field_name)

    @field_validator("wall_s", "hyp_drift", "prior_return")
    @classmethod
    def _finite(cls, v: float | None, info) -> float | None:
        return _finite_non_negative(v, info.field_name)

    @field_validator("started_at", "finished_at")
    @classmethod
    def _iso_time(cls, v: str | None, info) -> str | None:
        from datetime import datetime

        if v is not None:
            try:
                t = datetime.fromisoformat(v)
            except (TypeError, ValueError):
                raise ValueError(f"{info.field_name} {str(v)[:40]!r} is not an ISO 8601 time") from None
            if t.tzinfo is None:
                raise ValueError(f"{info.field_name} {v!r} has no time zone (write UTC, e.g. 2026-12-01T22:00:00.000+00:00)")
        return v

    @field_validator("world_id")
    @classmethod
    def _world_id(cls, v: str) -> str:
        import re

        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,200}", v) or ".." in v:
            raise ValueError(f"world_id {v[:80]!r} is not a world id (letters, digits, '.', '_', '-')")
        return v

    @field_validator("trajectory")
    @classmethod
    def _inside(cls, v: str) -> str:
        p = PurePosixPath(v)
        if v and (p.is_absolute() or ".." in p.parts or "\\" in v):
            raise ValueError(f"trajectory {v!r} leaves the run folder (it must be a path under trajectories/)")
        return v

    @model_validator(mode="after")
    def _score_fits_status(self) -> "ResultRecord":
        s = self.score
        if s is not None and (not math.isfinite(s) or not 0.0 <= s <= 100.0):
            raise ValueError(f"score {s!r} is outside [0, 100]")
        if self.status in ERROR_STATUSES and s is not None:
            raise ValueError(f"status {self.status} is a fault and carries no score, but score is {s!r}")
        if self.grade is not None and not (math.isfinite(self.grade.score) and 0.0 <= self.grade.score <= 100.0):
            raise ValueError(f"grade.score {self.grade.score!r} is outside [0, 100]")
        for k, v in (self.l3_axes or {}).items():
            if not math.isfinite(v) or not 0.0 <= v <= 3.0:
                raise ValueError(f"l3_axes.{k} = {v!r} is outside [0, 3]")
        return self


def score_mismatch(rec: ResultRecord) -> str | None:
    """Why a row's `score` does not follow from its own grade, in one sentence (None when it does): an edited score
    would otherwise rank on the leaderboard (issue 40). L1/L2: `score` is `grade.score`, which is the grade's native
    score on 0-100 (L1 0-3, L2 0-1), for this world; L3: `score` is the dossier's rule (benchmark.run.l3
    `recorded_score`) applied to the row's own axes, commitment, status and eligibility."""
    if rec.level == "L3":
        try:
            want = recorded_score(rec.status, l3_score(rec.l3_axes, rec.commitment), bool(rec.eligible))
        except KeyError as exc:
            return f"its l3_axes lack the axis {exc} that its score is computed from"
    elif rec.grade is None:
        want = None
    else:
        g = rec.grade
        if g.world_id != rec.world_id or g.level != rec.level:
            return f"its grade is of {g.world_id} ({g.level}), not of this row's world {rec.world_id} ({rec.level})"
        scale = 100 / 3 if g.level == "L1" else 100.0
        if abs(g.score - g.native * scale) > 1e-4:
            return f"grade.score {g.score} does not follow from grade.native {g.native} (x {scale:.4g})"
        want = g.score
    if want is None and rec.score is None:
        return None
    if want is None or rec.score is None or abs(rec.score - want) > 1e-4:
        return f"score {rec.score} does not follow from its own grade ({want})"
    return None


def l3_score(axes: dict[str, float] | None, commitment: str | None) -> float | None:
    """Native 0-3 score: committed mean(D, Q, N); abstained min(mean(D, Q), 2 if justified else 1)."""
    if axes is None:
        return None
    if commitment == "abstain":
        cap = 2.0 if axes.get("abstention_justified", 0.0) >= 0.5 else 1.0
        return min((axes["D"] + axes["Q"]) / 2, cap)
    return (axes["D"] + axes["Q"] + axes["N"]) / 3


def recorded_score(status: str, native: float | None, eligible: bool) -> float | None:
    """A dossier's 0-100 score as results.jsonl records it: 0 for a noncompliant answer; None (no score) for a fault,
    a refusal, no parseable judge draw or an ineligible dossier (recorded, excluded from L3 means). `run` and
    `grade` (benchmark.score.regrade, re-scoring from the stored draws) share it, so a re-score is the run's own rule."""
    native = 0.0 if status == "noncompliant" else native
    if status in ERROR_STATUSES or status == "refused" or native is None or not eligible:
        return None
    return round(native * 100 / 3, 6)
