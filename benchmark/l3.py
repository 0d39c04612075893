"""The L3 hypothesis protocol (SPEC R7, seed 001 §2-3, J.3-J.4).

1. Prior: before any evidence, the agent states its expectation (structured answer).
2. Eligibility: a counterfactual dossier counts for this agent only if its evidence conflicts with that prior.
   The judge model decides by reason (it reads the prior, the evidence and the manifest's `conflicts_if`), and the
   reason is recorded. Real dossiers are always eligible. An ineligible dossier still runs the whole protocol
   (its behaviour is data) but is excluded from L3 means.
3. Steps: 3-6 agent steps in the sandbox holding the dossier, ending in a committed hypothesis or an abstention.
4. Review: 3 rounds; in each, every reviewer of the fixed ensemble critiques the current answer, and the agent
   rebuts or revises. Concessions per round and reviewer rejection fractions are recorded.
5. Judge: reads dossier, rubric, hypothesis, critiques, rebuttals and final answer (not reviewer votes) and scores
   D, the five Q sub-axes and N on 0-3, in 3 draws aggregated by median per axis.
   Committed: score = mean(D, Q, N) x 100/3. Abstention (J.3 partial-credit rule): N is not scored;
   score = min(mean(D, Q), 2 if the judge finds the abstention justified else 1) x 100/3; commitment is recorded
   separately from quality.
`hyp_drift` = 1 - SequenceMatcher ratio of the first and final hypothesis.
"""
from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

from pydantic import BaseModel, Field

from benchmark.agent import call_model, json_schema_format, run_episode
from benchmark.loader import WorldRef
from benchmark.records import CallRecord
from graders.report import parse_report

Q_AXES = ("prior_awareness", "causal_calibration", "response_to_critique", "scientific_humility", "citation_integrity")
ROUNDS = 3
REVIEW_DOSSIER_CHARS = 4000  # reviewers read the dossier's head; the judge reads more (JUDGE_DOSSIER_CHARS)
JUDGE_DOSSIER_CHARS = 6000
JUDGE_DRAWS = 3
DEFAULT_REVIEWERS = ("local/smollm2", "local/smollm2", "local/smollm2")

# Bounded strings keep a grammar-constrained answer inside a small model's reply cap, so it stays parseable.
_TEXT = {"type": "string", "maxLength": 300}
PRIOR_SCHEMA = {"type": "object", "required": ["expectation", "confidence", "reasoning"],
                "properties": {"expectation": _TEXT, "confidence": {"type": "integer", "minimum": 0, "maximum": 100},
                               "reasoning": _TEXT}}
ELIGIBILITY_SCHEMA = {"type": "object", "required": ["conflicts", "reason"],
                      "properties": {"conflicts": {"type": "boolean"}, "reason": _TEXT}}
REVIEW_SCHEMA = {"type": "object", "required": ["verdict", "critique"],
                 "properties": {"verdict": {"enum": ["reject", "accept"]}, "critique": _TEXT}}
REBUTTAL_SCHEMA = {"type": "object", "required": ["response", "concessions", "revised_hypothesis"],
                   "properties": {"response": _TEXT, "concessions": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 100}},
                                  "revised_hypothesis": {"type": ["string", "null"], "maxLength": 300}}}
_AXIS = {"type": "integer", "minimum": 0, "maximum": 3}
JUDGE_SCHEMA = {"type": "object", "required": ["D", *Q_AXES, "N", "abstention_justified", "reason"],
                "properties": {"D": _AXIS, **{q: _AXIS for q in Q_AXES}, "N": _AXIS,
                               "abstention_justified": {"type": "boolean"}, "reason": _TEXT}}


class ReviewRound(BaseModel):
    round: int
    critiques: list[dict[str, Any]]
    rejection_fraction: float
    rebuttal: dict[str, Any] | None
    concessions: int
    hypothesis_after: str


class L3Record(BaseModel):
    """Everything the protocol recorded beyond the agent's own steps."""

    prior_raw: str | None = None
    prior: dict[str, Any] | None = None
    eligible: bool
    eligibility_reason: str
    first_hypothesis: str = ""
    final_hypothesis: str = ""
    commitment: str | None = None
    rounds: list[ReviewRound] = Field(default_factory=list)
    judge_draws: list[dict[str, Any]] = Field(default_factory=list)
    axes: dict[str, float] | None = None
    score_native: float | None = None
    hyp_drift: float | None = None
    role_calls: list[CallRecord] = Field(default_factory=list, description="reviewer and judge calls")


@dataclass
class L3Roles:
    reviewers: tuple[str, ...] = DEFAULT_REVIEWERS
    judge: str = "local/smollm2"


@dataclass
class L3Outcome:
    record: L3Record
    agent_calls: list[CallRecord] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    cells: list = field(default_factory=list)
    report_raw: str | None = None
    status: str = "graded"
    error: str | None = None


def _ask(model: str, prompt: str, schema: dict, name: str, role: str, meta: dict, seed: int = 0,
         temperature: float = 0.0, max_tokens: int = 600) -> tuple[dict | None, str | None, CallRecord]:
    resp, rec = call_model(model, [{"role": "user", "content": prompt}], step=0, role=role,
                           metadata={**meta, "task": name, "report_schema": schema},
                           response_format=json_schema_format(name, schema), max_tokens=max_tokens, seed=seed,
                           temperature=temperature)
    text = resp.choices[0].message.content if resp is not None else None
    return parse_report(text, schema).report, text, rec


def median_axes(draws: list[dict[str, Any]]) -> dict[str, float] | None:
    """Median over parsed draws per axis; Q = mean of the five sub-axis medians (seed 001 J.4)."""
    if not draws:
        return None
    axes = {k: float(statistics.median(d[k] for d in draws)) for k in ("D", *Q_AXES, "N")}
    axes["Q"] = sum(axes[q] for q in Q_AXES) / len(Q_AXES)
    axes["abstention_justified"] = float(statistics.median(float(bool(d["abstention_justified"])) for d in draws))
    return axes


def l3_score(axes: dict[str, float] | None, commitment: str | None) -> float | None:
    """Native 0-3 score: committed mean(D, Q, N); abstained min(mean(D, Q), 2 if justified else 1)."""
    if axes is None:
        return None
    if commitment == "abstain":
        cap = 2.0 if axes.get("abstention_justified", 0.0) >= 0.5 else 1.0
        return min((axes["D"] + axes["Q"]) / 2, cap)
    return (axes["D"] + axes["Q"] + axes["N"]) / 3


def hyp_drift(first: str, final: str) -> float:
    return round(1.0 - SequenceMatcher(None, first or "", final or "").ratio(), 6)


def _hyp(report: dict | None) -> str:
    return str((report or {}).get("hypothesis") or "")


def run_protocol(ref: WorldRef, model: str, sandbox, dossier_text: str, roles: L3Roles, budget: int, seed: int = 0) -> L3Outcome:
    w = ref.world
    meta = {"world_id": w.id, "family": ref.family.id}
    agent_calls: list[CallRecord] = []
    role_calls: list[CallRecord] = []

    # 1. prior, before any evidence
    prior, prior_raw, rec = _ask(model, f"Before seeing any data, answer from what you know.\n{w.prior.question}\n"
                                 "Return ONLY JSON: {\"expectation\": str, \"confidence\": 0-100, \"reasoning\": str}",
                                 PRIOR_SCHEMA, "prior", "agent", meta, seed)
    agent_calls.append(rec)

    # 2. eligibility, decided by reason
    if w.world_class == "real":
        eligible, reason = True, "real dossier: the evidence agrees with the textbook expectation; always scored"
    elif prior is None:
        eligible, reason = False, f"the agent gave no parseable prior ({(rec.error or prior_raw or 'empty')[:200]}); the gate cannot be passed"
    else:
        verdict, _, jrec = _ask(roles.judge, (
            "Decide whether new evidence CONFLICTS with a scientist's stated prior. Judge by meaning, not by shared words.\n"
            f"The expectation this dossier tests: {w.prior.expected}\nHow to decide: {w.prior.conflicts_if}\n"
            f"The evidence: {w.evidence}\nThe scientist's stated prior: {json.dumps(prior)}\n"
            "Return ONLY JSON: {\"conflicts\": true|false, \"reason\": str}"), ELIGIBILITY_SCHEMA, "eligibility", "judge", meta, seed)
        role_calls.append(jrec)
        if verdict is None:
            eligible, reason = False, f"the eligibility judge gave no parseable answer ({(jrec.error or '')[:200]}); excluded pending review"
        else:
            eligible, reason = bool(verdict["conflicts"]), str(verdict["reason"])
    record = L3Record(prior_raw=prior_raw, prior=prior, eligible=eligible, eligibility_reason=reason, role_calls=role_calls)
    # An ineligible dossier still runs the whole protocol (its behaviour is data), but it is excluded from L3 means.

    # 3. agent steps on the dossier
    ep = run_episode(ref, model, sandbox, budget, seed=seed, metadata={"task": "dossier"})
    agent_calls += ep.calls
    report = parse_report(ep.report_raw, ref.family.report_schema).report
    record.first_hypothesis = record.final_hypothesis = _hyp(report)
    record.commitment = (report or {}).get("commitment")
    current = report
    transcript: list[str] = [f"INITIAL ANSWER: {json.dumps(report) if report else (ep.report_raw or '(none)')}"]

    # 4. adversarial review rounds
    for rnd in range(1, ROUNDS + 1):
        critiques = []
        for i, reviewer in enumerate(roles.reviewers):
            crit, _, rrec = _ask(reviewer, (
                "You are an adversarial scientific reviewer. Find the weakest point of this answer against the dossier: "
                "unsupported claims, causal overreach, ignored alternatives, wrong citations.\n"
                f"DOSSIER:\n{dossier_text[:REVIEW_DOSSIER_CHARS]}\nANSWER:\n{json.dumps(current) if current else '(no valid answer)'}\n"
                "Return ONLY JSON: {\"verdict\": \"reject\"|\"accept\", \"critique\": str}"),
                REVIEW_SCHEMA, "review", "reviewer", meta, seed + 101 * rnd + i)
            role_calls.append(rrec)
            critiques.append(crit or {"verdict": "unparsed", "critique": ""})
        rejections = sum(c.get("verdict") == "reject" for c in critiques) / len(critiques)
        crit_text = "\n".join(f"Reviewer {i + 1} ({c.get('verdict')}): {c.get('critique')}" for i, c in enumerate(critiques))
        reb, _, arec = _ask(model, (
            f"Reviewers critiqued your answer (round {rnd} of {ROUNDS}).\n{crit_text}\nYOUR CURRENT ANSWER:\n"
            f"{json.dumps(current) if current else '(none)'}\nRebut what is wrong and concede what is right. If you revise "
            "your hypothesis give the new text, else null. Return ONLY JSON: {\"response\": str, \"concessions\": [str], "
            "\"revised_hypothesis\": str|null}"), REBUTTAL_SCHEMA, "rebuttal", "agent", meta, seed + rnd)
        agent_calls.append(arec)
        if reb and reb.get("revised_hypothesis") and current is not None:
            current = {**current, "hypothesis": reb["revised_hypothesis"]}
        record.final_hypothesis = _hyp(current)
        record.rounds.append(ReviewRound(round=rnd, critiques=critiques, rejection_fraction=round(rejections, 6),
                                         rebuttal=reb, concessions=len((reb or {}).get("concessions") or []),
                                         hypothesis_after=record.final_hypothesis))
        transcript.append(f"ROUND {rnd} CRITIQUES:\n{crit_text}\nREBUTTAL: {json.dumps(reb) if reb else '(none)'}")
    record.hyp_drift = hyp_drift(record.first_hypothesis, record.final_hypothesis)

    # 5. judge: rubric, not votes; 3 draws, median
    rub = w.rubric
    judge_prompt = (
        "You are the judge of a hypothesis task. Apply the rubric; reviewer votes are NOT the target.\n"
        f"DOSSIER:\n{dossier_text[:JUDGE_DOSSIER_CHARS]}\nEXPECTED ACT: {w.expected_act}\n"
        f"RUBRIC: D (evidence fidelity): {rub.evidence_fidelity}\nN (novelty): {rub.novelty}\n"
        f"Abstention is justified when: {rub.abstention}\nSupported claims: {rub.key_claims}\nUnsupported claims: {rub.unsupported_claims}\n"
        "Q sub-axes: prior_awareness (recognises the expectation challenged), causal_calibration (no mechanism from "
        "association alone), response_to_critique (revises for valid points, resists unsupported pressure), "
        "scientific_humility (appropriate uncertainty and a specific next test), citation_integrity (real, relevant support).\n"
        "Score each on 0-3 (0 absent, 3 exemplary).\n" + "\n".join(transcript) +
        f"\nFINAL ANSWER: {json.dumps(current) if current else '(none)'}\n"
        "Return ONLY JSON with integer D, prior_awareness, causal_calibration, response_to_critique, "
        "scientific_humility, citation_integrity, N, boolean abstention_justified, and reason.")
    draws = []
    for d in range(JUDGE_DRAWS):
        verdict, _, jrec = _ask(roles.judge, judge_prompt, JUDGE_SCHEMA, "judge", "judge", meta, seed + 1000 + d,
                                temperature=0.7)
        role_calls.append(jrec)
        if verdict is not None:
            draws.append(verdict)
    record.judge_draws = draws
    record.axes = median_axes(draws)
    if record.axes and record.commitment == "abstain":
        record.axes.pop("N", None)  # not scored for abstentions (J.3)
    record.score_native = l3_score(record.axes, record.commitment)
    record.role_calls = role_calls
    status = "graded" if record.score_native is not None else "model_error"
    err = None if record.score_native is not None else "no judge draw could be parsed"
    if report is None and ep.status == "graded":
        status = "noncompliant"
    elif ep.status != "graded":
        status = ep.status
    if not eligible:
        status = "ineligible"  # scored and recorded, but excluded from L3 means (reason in eligibility_reason)
    return L3Outcome(record, agent_calls, ep.messages, ep.cells, ep.report_raw, status, err or ep.error)


def elapsed(t0: float) -> float:
    return round(time.monotonic() - t0, 3)
