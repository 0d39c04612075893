"""The L3 hypothesis protocol (SPEC R7, seed 001 §2-3, J.3-J.4).

1. Prior: before any evidence, the agent states its expectation (structured answer).
2. Eligibility: a counterfactual dossier counts for this agent only if its evidence conflicts with that prior.
   The judge model decides by reason (it reads the prior, the evidence and the manifest's `conflicts_if`), and the
   reason is recorded. Real dossiers are always eligible. An ineligible dossier still runs the whole protocol
   (its behaviour is data) but is excluded from L3 means.
3. Steps: 3-6 agent steps (MIN_STEPS..budget; a step is one agent model call) in the sandbox holding the dossier,
   ending in a committed hypothesis or an abstention. An answer before step MIN_STEPS is not accepted: it is
   recorded (`early_answers`) and the agent is asked to check the evidence first; at the last step tools are off.
4. Review: 3 rounds; in each, every reviewer of the fixed ensemble (one model per named role, REVIEWER_ROLES)
   critiques the current answer with the whole dossier in front of it, and the agent rebuts IN ITS OWN CONVERSATION
   (the dossier, its earlier steps and the sandbox are still there; it may run code again) and may revise its
   hypothesis, commitment, next experiment and abstention reason. Concessions per round and reviewer rejection
   fractions are recorded.
5. Judge: reads the whole dossier (every evidence row), the rubric, the hypothesis, every critique and rebuttal and
   the final answer (not reviewer votes) and scores D, the five Q sub-axes and N on 0-3, in 3 draws aggregated by
   median per axis. Committed: score = mean(D, Q, N) x 100/3. Abstention (J.3 partial-credit rule): N is not scored;
   score = min(mean(D, Q), 2 if the judge finds the abstention justified else 1) x 100/3; commitment is recorded
   separately from quality.
`hyp_drift` = 1 - SequenceMatcher ratio of the first and final hypothesis.

Lengths. No answer is discarded for its length. Every free-text field of the prior, eligibility, critiques,
rebuttals and judge may hold FIELD_CHARS characters; a longer one is cut to FIELD_CHARS and the cut is recorded in
`L3Record.truncations` (role, round, field, original and kept length). A reply cut by the token cap is closed by the
harness (open strings, arrays and objects) and parsed, also with a note. Calls may generate ROLE_MAX_TOKENS tokens
(env BENCHMARK_L3_MAX_TOKENS). The JSON schema sent with a call states FIELD_CHARS as `maxLength`, except for a model
whose reply cap is small (the offline `local/` models): there the bound is sized to the reply cap, so a
grammar-constrained answer closes its strings before the cap; this bound is guidance only, never a reason to reject.

Reviewers. `--reviewers a,b,c` (or three separate values) names one model per reviewer role (REVIEWER_ROLES, in
that order). The offline default is ONE model, `local/smollm2`, used in all three roles: it is an ensemble of roles
(three different instructions), not of models.
"""
from __future__ import annotations

import copy
import json
import os
import statistics
import time
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from benchmark.run.agent import RUN_PYTHON_TOOL, Episode, _assistant_dict, call_model, json_schema_format, run_tool_calls
from benchmark.jsontext import close_json
from benchmark.suite.loader import WorldRef
from benchmark.run.progress import note
from benchmark.run.records import l3_score, recorded_score  # noqa: F401 - the dossier's score rule, re-exported
from benchmark.run.records import CallRecord, CellRecord
from benchmark.run.untrusted import Frame
from graders.report import parse_report

Q_AXES = ("prior_awareness", "causal_calibration", "response_to_critique", "scientific_humility", "citation_integrity")
ROUNDS = 3
JUDGE_DRAWS = 3
MIN_STEPS, MAX_STEPS = 3, 6
REBUTTAL_TOOL_STEPS = 2          # code cells an agent may run per review round before it must answer
FIELD_CHARS = 4000               # a free-text field is cut here, with a recorded note; nothing is rejected for length
LIST_ITEMS = 20                  # list fields (concessions) keep this many items, with a note
ROLE_MAX_TOKENS = int(os.environ.get("BENCHMARK_L3_MAX_TOKENS") or 8192)
from benchmark.run.roles import DEFAULT_REVIEWERS, REVIEWER_ROLES, parse_reviewers  # noqa: F401 - re-exported


# ---------------------------------------------------------------- schemas

def _text(bound: int) -> dict:
    return {"type": "string", "maxLength": bound}


def prior_schema(bound: int = FIELD_CHARS) -> dict:
    return {"type": "object", "required": ["expectation", "confidence", "reasoning"],
            "properties": {"expectation": _text(bound), "confidence": {"type": "integer", "minimum": 0, "maximum": 100},
                           "reasoning": _text(bound)}}


def eligibility_schema(bound: int = FIELD_CHARS) -> dict:
    return {"type": "object", "required": ["conflicts", "reason"],
            "properties": {"conflicts": {"type": "boolean"}, "reason": _text(bound)}}


def review_schema(bound: int = FIELD_CHARS) -> dict:
    return {"type": "object", "required": ["verdict", "critique"],
            "properties": {"verdict": {"enum": ["reject", "accept"]}, "critique": _text(bound)}}


def rebuttal_schema(bound: int = FIELD_CHARS) -> dict:
    opt = {"type": ["string", "null"], "maxLength": bound}
    return {"type": "object", "required": ["response", "concessions"],
            "properties": {"response": _text(bound),
                           "concessions": {"type": "array", "maxItems": LIST_ITEMS, "items": _text(bound)},
                           "revised_hypothesis": opt, "revised_commitment": {"enum": ["commit", "abstain", None]},
                           "revised_next_experiment": opt, "revised_abstention_reason": opt}}


_AXIS = {"type": "integer", "minimum": 0, "maximum": 3}


def judge_schema(bound: int = FIELD_CHARS) -> dict:
    return {"type": "object", "required": ["D", *Q_AXES, "N", "abstention_justified", "reason"],
            "properties": {"D": _AXIS, **{q: _AXIS for q in Q_AXES}, "N": _AXIS,
                           "abstention_justified": {"type": "boolean"}, "reason": _text(bound)}}


# Backwards-compatible names: the schemas as sent to a model without a small reply cap.
PRIOR_SCHEMA, ELIGIBILITY_SCHEMA = prior_schema(), eligibility_schema()
REVIEW_SCHEMA, REBUTTAL_SCHEMA, JUDGE_SCHEMA = review_schema(), rebuttal_schema(), judge_schema()
_TEXT_FIELDS = {"prior": 2, "eligibility": 1, "review": 1, "rebuttal": 3, "judge": 1}


def reply_cap(model: str) -> int | None:
    """The reply cap (tokens) a provider imposes whatever max_tokens says; None when the call's max_tokens rules."""
    if model.startswith("local/"):
        from benchmark.models.local import MAX_REPLY_TOKENS

        return MAX_REPLY_TOKENS
    return None


def schema_for(kind: str, model: str) -> dict:
    """The schema sent with a call: FIELD_CHARS per text field, or a bound sized to a small reply cap (guidance)."""
    cap = reply_cap(model)
    bound = FIELD_CHARS if cap is None else max(60, min(FIELD_CHARS, cap * 3 // (_TEXT_FIELDS[kind] + 1)))
    return {"prior": prior_schema, "eligibility": eligibility_schema, "review": review_schema,
            "rebuttal": rebuttal_schema, "judge": judge_schema}[kind](bound)


def _relaxed(schema: dict) -> dict:
    """The schema an answer is validated against: no length bounds (a long answer is cut, never rejected)."""
    s = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            node.pop("maxLength", None)
            node.pop("maxItems", None)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(s)
    return s


@dataclass
class Parsed:
    obj: dict | None
    error: str | None
    notes: list[dict] = field(default_factory=list)


def parse_answer(text: str | None, schema: dict, finish_reason: str | None = None, where: dict | None = None) -> Parsed:
    """Parse a role's JSON answer without ever rejecting it for length: bounds are dropped for validation, a reply
    cut by the token cap is closed, a JSON object inside prose is found, and over-long text fields are cut to
    FIELD_CHARS with a note each."""
    where = where or {}
    relaxed = _relaxed(schema)
    notes: list[dict] = []
    p = parse_report(text, relaxed)
    if not p.ok and isinstance(text, str):
        a, b = text.find("{"), text.rfind("}")
        if 0 <= a < b:
            q = parse_report(text[a:b + 1], relaxed)
            if q.ok:
                p = q
        if not p.ok:
            closed = close_json(text)
            q = parse_report(closed, relaxed) if closed else p
            if q.ok:
                p = q
                notes.append({**where, "field": "(reply)", "chars": len(text), "kept": len(text),
                              "note": f"the reply was cut{' at the token cap' if finish_reason == 'length' else ''} "
                                      "before its JSON closed; the harness closed it"})
    if not p.ok:
        return Parsed(None, p.error, notes)
    obj = p.report
    for k, v in list(obj.items()):
        if isinstance(v, str) and len(v) > FIELD_CHARS:
            obj[k] = v[:FIELD_CHARS] + " [...]"
            notes.append({**where, "field": k, "chars": len(v), "kept": FIELD_CHARS,
                          "note": f"cut to {FIELD_CHARS} characters"})
        elif isinstance(v, list):
            if len(v) > LIST_ITEMS:
                notes.append({**where, "field": k, "chars": len(v), "kept": LIST_ITEMS, "note": f"kept the first {LIST_ITEMS} items"})
                v = obj[k] = v[:LIST_ITEMS]
            for i, item in enumerate(v):
                if isinstance(item, str) and len(item) > FIELD_CHARS:
                    v[i] = item[:FIELD_CHARS] + " [...]"
                    notes.append({**where, "field": f"{k}[{i}]", "chars": len(item), "kept": FIELD_CHARS,
                                  "note": f"cut to {FIELD_CHARS} characters"})
    return Parsed(obj, None, notes)


# ---------------------------------------------------------------- records

class ReviewRound(BaseModel):
    round: int
    critiques: list[dict[str, Any]]
    rejection_fraction: float
    rebuttal: dict[str, Any] | None
    rebuttal_raw: str | None = None
    rebuttal_cells: int = 0
    revised: list[str] = Field(default_factory=list, description="report fields the rebuttal changed")
    concessions: int
    hypothesis_after: str


class L3Record(BaseModel):
    """Everything the protocol recorded beyond the agent's own steps."""

    prior_raw: str | None = None
    prior: dict[str, Any] | None = None
    eligible: bool
    eligibility_reason: str
    steps: int = 0
    early_answers: int = Field(0, description="answers given before MIN_STEPS, not accepted")
    first_answer: dict[str, Any] | None = None
    final_answer: dict[str, Any] | None = None
    first_hypothesis: str = ""
    final_hypothesis: str = ""
    first_commitment: str | None = None
    commitment: str | None = None
    reviewers: list[dict[str, str]] = Field(default_factory=list, description="role and model of each reviewer")
    rounds: list[ReviewRound] = Field(default_factory=list)
    judge_draws: list[dict[str, Any]] = Field(default_factory=list)
    judge_prompt: str | None = Field(None, description="the judge's whole input (every draw reads the same)")
    dossier_chars: int = 0
    axes: dict[str, float] | None = None
    score_native: float | None = None
    hyp_drift: float | None = None
    truncations: list[dict[str, Any]] = Field(default_factory=list, description="every answer cut for length, with a note")
    unparsed: list[dict[str, Any]] = Field(default_factory=list, description="role answers that could not be parsed, with why")
    role_calls: list[CallRecord] = Field(default_factory=list, description="reviewer and judge calls")


@dataclass
class L3Roles:
    reviewers: tuple[str, ...] = DEFAULT_REVIEWERS
    judge: str = "local/smollm2"

    def __post_init__(self) -> None:
        self.reviewers = parse_reviewers(self.reviewers)


@dataclass
class L3Outcome:
    record: L3Record
    agent_calls: list[CallRecord] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    cells: list = field(default_factory=list)
    report_raw: str | None = None
    status: str = "graded"
    error: str | None = None


class _Steps:
    """The protocol's sub-steps, said as they start (benchmark.run.progress.note): which dossier, step k of n, which
    role and model. An L3 dossier on a CPU model takes many minutes; without this a log shows nothing meanwhile."""

    def __init__(self, world_id: str, reviewers: int):
        self.world_id, self.k = world_id, 0
        self.n = 3 + ROUNDS * (reviewers + 1) + JUDGE_DRAWS  # prior, eligibility, dossier steps; rounds; judge draws

    def next(self, what: str, model: str) -> None:
        self.k += 1
        note(f"{self.world_id}: step {self.k} of {self.n}, {what} ({model})")

    def skip(self) -> None:
        self.k += 1


# ---------------------------------------------------------------- helpers

def dossier_text(world_dir: Path, public_files: list[str]) -> str:
    """The whole dossier: every readable public file in full (no cut), in manifest order."""
    parts = []
    for f in public_files:
        if f.endswith((".md", ".txt", ".csv", ".tsv", ".json")):
            parts.append(f"# {f}\n{(Path(world_dir) / f).read_text(errors='replace')}")
    return "\n\n".join(parts)


def _ask(model: str, prompt: str, kind: str, role: str, meta: dict, record: L3Record, where: dict, seed: int = 0,
         temperature: float = 0.0) -> tuple[dict | None, str | None, CallRecord]:
    schema = schema_for(kind, model)
    resp, rec = call_model(model, [{"role": "user", "content": prompt}], step=0, role=role,
                           metadata={**meta, "task": kind, "report_schema": schema},
                           response_format=json_schema_format(kind, schema), max_tokens=ROLE_MAX_TOKENS, seed=seed,
                           temperature=temperature)
    text = resp.choices[0].message.content if resp is not None else None
    parsed = parse_answer(text, schema, rec.finish_reason, where)
    record.truncations += parsed.notes
    if parsed.obj is None:
        record.unparsed.append({**where, "error": (rec.error or parsed.error or "empty")[:500]})
    return parsed.obj, text, rec


def median_axes(draws: list[dict[str, Any]]) -> dict[str, float] | None:
    """Median over parsed draws per axis; Q = mean of the five sub-axis medians (seed 001 J.4)."""
    if not draws:
        return None
    axes = {k: float(statistics.median(d[k] for d in draws)) for k in ("D", *Q_AXES, "N")}
    axes["Q"] = sum(axes[q] for q in Q_AXES) / len(Q_AXES)
    axes["abstention_justified"] = float(statistics.median(float(bool(d["abstention_justified"])) for d in draws))
    return axes


def judged_axes(draws: list[dict[str, Any]], commitment: str | None) -> dict[str, float] | None:
    """The recorded axes from the judge's draws: median per axis; N dropped for an abstention (J.3)."""
    axes = median_axes(draws)
    if axes and commitment == "abstain":
        axes.pop("N", None)
    return axes


def hyp_drift(first: str, final: str) -> float:
    return round(1.0 - SequenceMatcher(None, first or "", final or "").ratio(), 6)


def _hyp(report: dict | None) -> str:
    return str((report or {}).get("hypothesis") or "")


L3_SYSTEM = (
    "You are a careful scientist working in a sealed Python sandbox with no network access. Call the run_python tool "
    "to execute Python code; variables persist between calls. Your working directory holds the evidence dossier. "
    "This task takes between {min} and {max} steps (each of your replies is one step): check the evidence with "
    "run_python before you answer; an answer before step {min} is not accepted. When you are done, reply WITHOUT a "
    "tool call, with ONLY the JSON report the task asks for. Reviewers will then critique your answer in this "
    "conversation, and you will be able to rebut, revise and run code again.")
EARLY_NUDGE = ("That answer came at step {k}; this task takes at least {min} steps, so it is not accepted yet. Check "
               "the evidence with run_python (e.g. recompute a number you cite from the tables), then give your "
               "final JSON report.")
FINAL_NUDGE = "Your step budget is spent. Reply now with ONLY the JSON report the task asks for; no tool calls."
REBUTTAL_ASK = (
    "REVIEW ROUND {rnd} OF {rounds}. The reviewers' critiques of your current answer:\n{crit}\n\n"
    "Rebut what is wrong and concede what is right. You may check the dossier again with run_python (at most {cells} "
    "calls this round). Then reply WITHOUT a tool call with ONLY this JSON: {{\"response\": str, \"concessions\": [str], "
    "\"revised_hypothesis\": str|null, \"revised_commitment\": \"commit\"|\"abstain\"|null, "
    "\"revised_next_experiment\": str|null, \"revised_abstention_reason\": str|null}} (null = unchanged).")
_REVISABLE = {"revised_hypothesis": "hypothesis", "revised_commitment": "commitment",
              "revised_next_experiment": "next_experiment", "revised_abstention_reason": "abstention_reason"}


@dataclass
class _Episode(Episode):
    """An L3 agent episode: an Episode plus the steps it took and the answers it gave before the minimum."""

    steps: int = 0
    early: int = 0


def dossier_episode(ref: WorldRef, model: str, sandbox, budget: int = MAX_STEPS, seed: int = 0,
                    steps: _Steps | None = None) -> _Episode:
    """MIN_STEPS..budget agent steps on the dossier; the conversation is returned so the review rounds continue it."""
    budget = max(MIN_STEPS, min(int(budget), MAX_STEPS))
    meta = {**ref.call_context(), "family": ref.family.id, "report_schema": ref.family.report_schema,
            "task": "dossier"}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": L3_SYSTEM.format(min=MIN_STEPS, max=budget)},
        {"role": "user", "content": ref.family.prompt},
    ]
    calls: list[CallRecord] = []
    cells: list[CellRecord] = []
    early = 0
    for step in range(budget):
        final = step == budget - 1
        if final:
            messages.append({"role": "user", "content": FINAL_NUDGE})
        if steps is not None and step:
            note(f"{ref.id}: step {steps.k} of {steps.n}, agent call {step + 1} of at most {budget} on the dossier ({model})")
        resp, rec = call_model(model, messages, step, tools=[RUN_PYTHON_TOOL], tool_choice="none" if final else "auto",
                               metadata=meta, seed=seed, max_tokens=ROLE_MAX_TOKENS)
        calls.append(rec)
        if resp is None:
            status = "refused" if rec.finish_reason == "content_filter" else "model_error"
            return _Episode(messages, calls, cells, None, status, rec.error, steps=step + 1, early=early)
        choice = resp.choices[0]
        if choice.finish_reason == "content_filter":
            return _Episode(messages, calls, cells, choice.message.content, "refused", "the provider filtered the answer",
                            "content_filter", steps=step + 1, early=early)
        msg = _assistant_dict(choice.message)
        messages.append(msg)
        if msg.get("tool_calls") and not final:
            run_tool_calls(msg, sandbox, step, cells, messages)
            continue
        if step + 1 < MIN_STEPS:  # an answer before the minimum: recorded, not accepted
            early += 1
            messages.append({"role": "user", "content": EARLY_NUDGE.format(k=step + 1, min=MIN_STEPS)})
            continue
        return _Episode(messages, calls, cells, msg.get("content"), "graded", None, steps=step + 1, early=early)
    return _Episode(messages, calls, cells, None, "budget_exhausted", "no report after the final nudge", steps=budget,
                    early=early)


def _rebut(model: str, sandbox, messages: list[dict], cells: list[CellRecord], calls: list[CallRecord], record: L3Record,
           meta: dict, rnd: int, crit_text: str, seed: int) -> tuple[dict | None, str | None, int]:
    """One rebuttal in the agent's own conversation: up to REBUTTAL_TOOL_STEPS code cells, then the JSON answer."""
    schema = schema_for("rebuttal", model)
    messages.append({"role": "user", "content": REBUTTAL_ASK.format(rnd=rnd, rounds=ROUNDS, crit=crit_text,
                                                                   cells=REBUTTAL_TOOL_STEPS)})
    m = {**meta, "task": "rebuttal", "round": rnd, "report_schema": schema}
    n_cells = 0
    step0 = 100 * rnd
    text, finish = None, None
    for k in range(REBUTTAL_TOOL_STEPS + 2):
        last = k >= REBUTTAL_TOOL_STEPS
        extra = {}
        if k == REBUTTAL_TOOL_STEPS + 1:  # one format reminder after an unparsed answer, grammar-constrained
            extra["response_format"] = json_schema_format("rebuttal", schema)
        resp, rec = call_model(model, messages, step0 + k, tools=[RUN_PYTHON_TOOL], tool_choice="none" if last else "auto",
                               metadata=m, seed=seed + rnd, max_tokens=ROLE_MAX_TOKENS, **extra)
        calls.append(rec)
        if resp is None:
            record.unparsed.append({"role": "rebuttal", "round": rnd, "error": (rec.error or "no response")[:500]})
            return None, None, n_cells
        msg = _assistant_dict(resp.choices[0].message)
        messages.append(msg)
        if msg.get("tool_calls") and not last:
            before = len(cells)
            run_tool_calls(msg, sandbox, step0 + k, cells, messages)
            n_cells += len(cells) - before
            continue
        text, finish = msg.get("content"), resp.choices[0].finish_reason
        parsed = parse_answer(text, schema, finish, {"role": "rebuttal", "round": rnd})
        record.truncations += parsed.notes
        if parsed.obj is not None:
            return parsed.obj, text, n_cells
        if k == REBUTTAL_TOOL_STEPS + 1:
            record.unparsed.append({"role": "rebuttal", "round": rnd, "error": (parsed.error or "")[:500]})
            return None, text, n_cells
        messages.append({"role": "user", "content": "That reply is not the JSON asked for. Reply with ONLY the JSON "
                                                    "object described above."})
    return None, text, n_cells


# ---------------------------------------------------------------- prompts of the roles that read the agent

# Every piece of agent-authored text (and every critique, which quotes it) reaches the eligibility judge, the
# reviewers and the judge as quoted data (benchmark.run.untrusted): a per-prompt nonce frame and a notice that it is
# evidence, never instructions. Harness text (rubric, dossier, labels) stays outside the frames, and comes first:
# the notice carries the per-prompt nonce, so everything before it is a prefix the local model's cache can reuse
# from one role's call to the next (the dossier is most of every prompt).

def _answer_text(answer: dict | None, raw: str | None = None) -> str | None:
    if answer:
        return json.dumps(answer)
    return raw or None


def _quote_or_none(frame: Frame, text: str | None, source: str) -> str:
    return frame.quote(text, source) if text else "(none)"


def eligibility_prompt(w, prior: dict) -> str:
    """The prior gate: does the evidence conflict with the agent's stated prior (quoted)?"""
    stated = json.dumps(prior)
    f = Frame(stated)
    return ("Decide whether new evidence CONFLICTS with a scientist's stated prior. Judge by meaning, not by shared words.\n"
            f"{f.notice}\n"
            f"The expectation this dossier tests: {w.prior.expected}\nHow to decide: {w.prior.conflicts_if}\n"
            f"The evidence: {w.evidence}\nThe scientist's stated prior (quoted):\n{f.quote(stated, 'agent prior')}\n"
            "Return ONLY JSON: {\"conflicts\": true|false, \"reason\": str}")


def dossier_block(dossier: str) -> str:
    """The opening every reviewer and judge prompt shares, word for word: the whole dossier, then the role's task.
    Role calls then share one long prefix, which a model server's prompt cache reads once per dossier (the local
    model re-read ~1,700 tokens per reviewer call when each role's instructions came first)."""
    return f"DOSSIER (complete: every file and every evidence row):\n{dossier}\n\n"


def review_prompt(role_name: str, dossier: str, current: dict | None, frame: Frame | None = None) -> str:
    """One reviewer's critique of the current answer (quoted) against the whole dossier. The role comes last and a
    round's reviewers quote the answer in one `frame` (its nonce drawn once the answer is known, as for any prompt):
    their prompts then agree word for word up to the role, and a model server's prompt cache reads the dossier and
    the answer once per round instead of once per reviewer."""
    answer = _answer_text(current)
    f = frame or Frame(answer)
    return (dossier_block(dossier) +
            "You are an adversarial scientific reviewer of the answer below.\n"
            f"{f.notice}\n"
            f"ANSWER (the agent's, quoted):\n{_quote_or_none(f, answer, 'agent answer') if answer else '(no valid answer)'}\n"
            f"YOUR ROLE: {REVIEWER_ROLES[role_name]} Find the weakest point of this answer against the dossier above.\n"
            "Return ONLY JSON: {\"verdict\": \"reject\"|\"accept\", \"critique\": str}")


def judge_prompt(w, dossier: str, first: str | None, rounds: list[dict], final: str | None) -> str:
    """The judge's input: harness text (dossier, rubric, axes) in the clear; the agent's first answer, every round's
    critiques and rebuttal and its final answer quoted. `rounds`: {round, critiques (text), rebuttal (text or
    None), revised (field names)}."""
    texts = [first, final] + [r["critiques"] for r in rounds] + [r["rebuttal"] for r in rounds]
    f = Frame(*texts)
    rub = w.rubric
    parts = [f"INITIAL ANSWER (the agent's, quoted):\n{_quote_or_none(f, first, 'agent initial answer')}"]
    for r in rounds:
        n = r["round"]
        parts.append(f"ROUND {n} CRITIQUES (the reviewers', quoted):\n{_quote_or_none(f, r['critiques'], f'reviewer critiques, round {n}')}\n"
                     f"ROUND {n} REBUTTAL (the agent's, quoted):\n{_quote_or_none(f, r['rebuttal'], f'agent rebuttal, round {n}')}"
                     + (f"\nREVISED FIELDS: {', '.join(r['revised'])}" if r.get("revised") else ""))
    return (
        dossier_block(dossier) +
        "You are the judge of a hypothesis task. Apply the rubric to the dossier above; reviewer votes are NOT the "
        f"target.\nEXPECTED ACT: {w.expected_act}\n"
        f"RUBRIC: D (evidence fidelity): {rub.evidence_fidelity}\nN (novelty): {rub.novelty}\n"
        f"Abstention is justified when: {rub.abstention}\nSupported claims: {rub.key_claims}\nUnsupported claims: {rub.unsupported_claims}\n"
        "The expected act is one defensible answer, not the only one: credit every answer the rubric and the evidence "
        "support (where the rubric names alternatives, each earns full credit when tied to the evidence).\n"
        "Q sub-axes: prior_awareness (recognises the expectation challenged), causal_calibration (no mechanism from "
        "association alone), response_to_critique (revises for valid points, resists unsupported pressure), "
        "scientific_humility (appropriate uncertainty and a specific next test), citation_integrity (real, relevant support).\n"
        "Score each on 0-3 (0 absent, 3 exemplary).\n" f"{f.notice}\n" + "\n".join(parts) +
        f"\nFINAL ANSWER (the agent's, with its revisions, quoted):\n{_quote_or_none(f, final, 'agent final answer')}\n"
        "Return ONLY JSON with integer D, prior_awareness, causal_calibration, response_to_critique, "
        "scientific_humility, citation_integrity, N, boolean abstention_justified, and reason.")


# ---------------------------------------------------------------- protocol

def run_protocol(ref: WorldRef, model: str, sandbox, dossier_text_: str, roles: L3Roles, budget: int, seed: int = 0) -> L3Outcome:
    """The whole L3 protocol for one dossier. The dossier text reviewers and the judge read is rebuilt, uncut, from
    the sandbox's world folder when it has one (`dossier_text_` is the fallback)."""
    w = ref.world
    meta = {**ref.call_context(), "family": ref.family.id}
    agent_calls: list[CallRecord] = []
    role_calls: list[CallRecord] = []
    world_dir = getattr(sandbox, "world_dir", None)
    dossier = dossier_text(world_dir, w.public_files) if world_dir is not None else dossier_text_
    record = L3Record(eligible=False, eligibility_reason="", role_calls=role_calls, dossier_chars=len(dossier),
                      reviewers=[{"role": r, "model": m} for r, m in zip(REVIEWER_ROLES, roles.reviewers)])

    steps = _Steps(w.id, len(roles.reviewers))

    # 1. prior, before any evidence
    steps.next("the agent's prior", model)
    prior, prior_raw, rec = _ask(model, f"Before seeing any data, answer from what you know.\n{w.prior.question}\n"
                                 "Return ONLY JSON: {\"expectation\": str, \"confidence\": 0-100, \"reasoning\": str}",
                                 "prior", "agent", meta, record, {"role": "prior"}, seed)
    agent_calls.append(rec)
    record.prior, record.prior_raw = prior, prior_raw

    # 2. eligibility, decided by reason
    if w.world_class == "real" or prior is None:
        steps.skip()
    else:
        steps.next("the prior gate (eligibility judge)", roles.judge)
    if w.world_class == "real":
        eligible, reason = True, "real dossier: the evidence agrees with the textbook expectation; always scored"
    elif prior is None:
        eligible, reason = False, f"the agent gave no parseable prior ({(rec.error or prior_raw or 'empty')[:200]}); the gate cannot be passed"
    else:
        verdict, _, jrec = _ask(roles.judge, eligibility_prompt(w, prior), "eligibility", "judge", meta, record,
                                {"role": "eligibility"}, seed)
        role_calls.append(jrec)
        if verdict is None:
            eligible, reason = False, f"the eligibility judge gave no parseable answer ({(jrec.error or '')[:200]}); excluded pending review"
        else:
            eligible, reason = bool(verdict["conflicts"]), str(verdict["reason"])
    record.eligible, record.eligibility_reason = eligible, reason
    # An ineligible dossier still runs the whole protocol (its behaviour is data), but it is excluded from L3 means.

    # 3. agent steps on the dossier (MIN_STEPS..budget)
    steps.next(f"the agent's {MIN_STEPS}-{max(MIN_STEPS, min(int(budget), MAX_STEPS))} steps on the dossier", model)
    ep = dossier_episode(ref, model, sandbox, budget, seed, steps)
    agent_calls += ep.calls
    record.steps, record.early_answers = ep.steps, ep.early
    report = parse_report(ep.report_raw, ref.family.report_schema).report
    record.first_answer = copy.deepcopy(report)
    record.first_hypothesis = record.final_hypothesis = _hyp(report)
    record.first_commitment = record.commitment = (report or {}).get("commitment")
    current = copy.deepcopy(report)
    first_text = _answer_text(report, ep.report_raw)
    judged_rounds: list[dict] = []
    messages, cells = ep.messages, ep.cells

    # 4. adversarial review rounds; rebuttals in the agent's own conversation (dossier, history, sandbox)
    for rnd in range(1, ROUNDS + 1):
        critiques = []
        frame = Frame(_answer_text(current))  # one per round: the reviewers quote the same answer
        for i, (role_name, reviewer) in enumerate(zip(REVIEWER_ROLES, roles.reviewers)):
            steps.next(f"review round {rnd} of {ROUNDS}, {role_name} reviewer", reviewer)
            crit, _, rrec = _ask(reviewer, review_prompt(role_name, dossier, current, frame),
                                 "review", "reviewer", meta, record, {"role": "review", "round": rnd, "reviewer": role_name},
                                 seed + 101 * rnd + i)
            role_calls.append(rrec)
            critiques.append({**(crit or {"verdict": "unparsed", "critique": ""}), "reviewer": role_name, "model": reviewer})
        rejections = sum(c.get("verdict") == "reject" for c in critiques) / len(critiques)
        crit_text = "\n".join(f"Reviewer {i + 1} [{c['reviewer']}] ({c.get('verdict')}): {c.get('critique')}"
                              for i, c in enumerate(critiques))
        if ep.status == "graded":
            steps.next(f"review round {rnd} of {ROUNDS}, the agent's rebuttal", model)
            n0 = len(cells)
            reb, reb_raw, _ = _rebut(model, sandbox, messages, cells, agent_calls, record, meta, rnd, crit_text, seed)
            n_cells = len(cells) - n0
        else:
            steps.skip()
            reb, reb_raw, n_cells = None, None, 0
        changed = []
        if reb and current is not None:
            for key, fld in _REVISABLE.items():
                val = reb.get(key)
                if val is None or (fld == "commitment" and val not in ("commit", "abstain")):
                    continue
                if current.get(fld) != val:
                    current[fld] = val
                    changed.append(fld)
        record.final_hypothesis = _hyp(current)
        record.commitment = (current or {}).get("commitment")
        record.rounds.append(ReviewRound(round=rnd, critiques=critiques, rejection_fraction=round(rejections, 6),
                                         rebuttal=reb, rebuttal_raw=None if reb else reb_raw, rebuttal_cells=n_cells,
                                         revised=changed, concessions=len((reb or {}).get("concessions") or []),
                                         hypothesis_after=record.final_hypothesis))
        judged_rounds.append({"round": rnd, "critiques": crit_text, "rebuttal": json.dumps(reb) if reb else None,
                              "revised": changed})
    record.hyp_drift = hyp_drift(record.first_hypothesis, record.final_hypothesis)
    record.final_answer = current

    # 5. judge: rubric, not votes; 3 draws, median; the whole dossier and transcript
    judge_prompt_ = judge_prompt(w, dossier, first_text, judged_rounds, _answer_text(current))
    record.judge_prompt = judge_prompt_
    draws = []
    for d in range(JUDGE_DRAWS):
        steps.next(f"judge draw {d + 1} of {JUDGE_DRAWS}", roles.judge)
        verdict, _, jrec = _ask(roles.judge, judge_prompt_, "judge", "judge", meta, record, {"role": "judge", "draw": d},
                                seed + 1000 + d, temperature=0.7)
        role_calls.append(jrec)
        if verdict is not None:
            draws.append(verdict)
    record.judge_draws = draws
    record.axes = judged_axes(draws, record.commitment)  # N is not scored for abstentions (J.3)
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
    return L3Outcome(record, agent_calls, messages, cells, ep.report_raw, status, err or ep.error)


def elapsed(t0: float) -> float:
    return round(time.monotonic() - t0, 3)
