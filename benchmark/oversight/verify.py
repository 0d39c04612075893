"""The LLM verifier: a second model re-derives each L1/L2 grade, and each L3 dossier's judged axes and prior gate,
from the same artifacts and gives a reason (SPEC R8, seed 001 J.2). It is independent only when it is a different
model (ideally another provider's) from the one evaluated and from the L3 judge: the same model shares the blind
spots it is meant to catch. Disagreements beyond the thresholds below become pending
adjudication items.

Thresholds (documented, applied per result):
  L1  the verifier's state differs from the deterministic state, or their native scores differ by >= 0.5 (of 3)
  L2  any component differs by >= 0.25 (of 1), or the world scores differ by >= 10 points (of 100)
  L3  the verifier re-scores D, the five Q sub-axes and N (0-3) from the whole dossier, the rubric, the agent's
      prior, first answer, every critique and rebuttal and its final answer (never the judge's scores). An axis is
      a discrepancy when it differs from the judge's median by MORE than L3_AXIS_DELTA = 1 point of 3 (D, N, and
      Q = the mean of the five sub-axes); N is not compared for an abstention (it is not scored, J.3). For a
      counterfactual dossier whose prior was parsed, the verifier also re-decides the prior gate: a different
      verdict is an `eligible` discrepancy. Components: D, Q, N, eligible.
A verifier answer that cannot be parsed (a reply cut inside its closing `reason`, after every score, is closed and
read: `parse_verdict`) is recorded (`parsed: false`) and is not a discrepancy: there is nothing
to compare. Nor is it a check: the result stays unverified (`ledger pending` and the leaderboard count it so), and
the next `verify` asks again, so a verifier that cannot answer in the format never makes a run look checked.
Verifier usage is metered here, never as the agent's.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from benchmark.run.agent import call_model, json_schema_format
from benchmark.suite.freeze import read_golden
from benchmark.run.records import ResultRecord, RoleUsage
from benchmark.run.store import RunStore, result_key
from graders.l1 import STATE_SCORES, state_rules

L1_STATE_DELTA = 0.5
L3_AXIS_DELTA = 1.0
L2_COMPONENT_DELTA = 0.25
L2_SCORE_DELTA = 10.0
CELL_CHARS = 1500

VERIFIER_SCHEMA_L1 = {"type": "object", "required": ["state", "reason"],
                      "properties": {"state": {"enum": list(STATE_SCORES)}, "reason": {"type": "string", "maxLength": 600}}}
VERIFIER_SCHEMA_L2 = {"type": "object", "required": ["A", "I", "M", "C", "reason"],
                      "properties": {k: {"type": "number", "minimum": 0, "maximum": 1} for k in "AIMC"} | {"reason": {"type": "string", "maxLength": 600}}}

_AXIS = {"type": "integer", "minimum": 0, "maximum": 3}
L3_SUBAXES = ("prior_awareness", "causal_calibration", "response_to_critique", "scientific_humility", "citation_integrity")
VERIFIER_SCHEMA_L3 = {"type": "object", "required": ["D", *L3_SUBAXES, "N", "conflicts", "reason"],
                      "properties": {"D": _AXIS, **{q: _AXIS for q in L3_SUBAXES}, "N": _AXIS,
                                     "conflicts": {"type": "boolean"}, "reason": {"type": "string", "maxLength": 4000}}}

L1_RULES = state_rules()


def l2_rules(unusable_cap: float, accuracy_cap: float) -> str:
    """The L2 grading rules with the world's own caps (graders.l2 applies the same numbers)."""
    return ("Components on 0-1: A analytical correctness (values vs the golden within the rubric's tolerances), "
            "I issue recognition (the trap named; on a clean control, no invented issue), M methodological response "
            "(an appropriate method), C result calibration (conclusions qualified to the analysis' reliability). "
            f"Score = mean; declaring a solvable world unusable caps it at {unusable_cap:.3g}; A = 0 caps it at "
            f"{accuracy_cap:.3g}; the rubric's zero_if conditions give 0.")


L3_RULES = """Axes on 0-3 (0 absent, 3 exemplary). D evidence fidelity: the claims match the dossier's numbers and
association is not presented as causation. Q, five sub-axes: prior_awareness (recognises the expectation the
evidence challenges), causal_calibration (no mechanism from association alone), response_to_critique (revises for
valid points, resists unsupported pressure), scientific_humility (appropriate uncertainty and a specific next test),
citation_integrity (real, relevant support). N novelty: 0 nothing substantive, 1 a generic restatement, 2 one strong
explanatory or experimental contribution, 3 a strong explanation with a discriminating test. The expected act is one
defensible answer, not the only one: credit every answer the rubric and the evidence support. For an abstention N is
not scored. `conflicts`: whether the agent's stated PRIOR conflicts with the dossier's evidence, judged by meaning
under the dossier's conflict rule (for a real control answer false)."""


class Discrepancy(BaseModel):
    component: str
    deterministic: float | str
    verifier: float | str


class Verification(BaseModel):
    key: str
    world_id: str
    replicate: int
    level: str
    verifier_model: str
    parsed: bool
    verdict: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""
    raw: str | None = None
    discrepancies: list[Discrepancy] = Field(default_factory=list)
    usage: RoleUsage


def nuisance_section(nuisance: list) -> str:
    """The world's declared nuisance features (FamilyManifest.nuisance that apply to it), as the verifier reads them:
    the deterministic grader treats a report of one as a true observation, and the verifier must too (issue 38)."""
    if not nuisance:
        return ""
    lines = "\n".join(f"- {n.feature} (harmless: {n.why_harmless})" for n in nuisance)
    return ("\n\nNUISANCE FEATURES (present in this world, harmless, measurable): a report that measures or corrects "
            "one states a truth, not an invented defect; it is an invention only where the report says it changes "
            "the result and the feature cannot.\n" + lines)


def _prompt(rec: ResultRecord, rubric: dict, golden: dict, report: str | None, cells: list, level: str,
            nuisance: list | None = None) -> str:
    """The L1/L2 verifier's input: rules, rubric, golden and the world's nuisance features in the clear; the agent's
    report and its last cells (code and the output that code printed) quoted as untrusted data
    (benchmark.run.untrusted)."""
    from benchmark.run.untrusted import Frame

    shown = []
    for c in cells[-6:]:
        shown.append(f"--- code (step {c.step})\n{c.code[:CELL_CHARS]}\n--- output\n{(c.stdout + c.stderr + (c.error or ''))[:CELL_CHARS]}")
    if level == "L1":
        rules = L1_RULES
    else:
        from graders.manifest import L2Rubric

        caps = {k: rubric.get(k, L2Rubric.model_fields[k].default) for k in ("unusable_cap", "accuracy_cap")}
        rules = l2_rules(caps["unusable_cap"], caps["accuracy_cap"])
    answer = '{"state": "<STATE>", "reason": "..."}' if level == "L1" else '{"A": x, "I": x, "M": x, "C": x, "reason": "..."}'
    report_text = (report or "")[:6000]
    cells_text = "\n".join(shown)
    f = Frame(report_text, cells_text)
    return (
        "You verify the grade of a scientific agent's work. Apply ONLY the rubric below; do not add requirements "
        "it does not contain.\n"
        f"{f.notice}\n\n"
        f"{rules}\n\nWORLD: {rec.world_id} (level {level}, class {rec.world_class})\n"
        f"RUBRIC:\n{json.dumps(rubric, indent=1)}\n\nGOLDEN (reference solver):\n{json.dumps(golden, indent=1)[:4000]}"
        f"{nuisance_section(nuisance or [])}\n\n"
        f"AGENT REPORT (quoted):\n{f.quote(report_text, 'agent report') if report_text else '(none)'}\n\n"
        f"LAST CODE CELLS AND OUTPUTS (the agent's, quoted):\n"
        f"{f.quote(cells_text, 'agent code cells and their output') if cells_text else '(none)'}"
        f"\n\nAnswer with ONLY this JSON: {answer}"
    )


def compare_grades(rec: ResultRecord, verdict: dict[str, Any]) -> list[Discrepancy]:
    g = rec.grade
    if g is None:
        return []
    if rec.level == "L1":
        st = verdict.get("state")
        if st != g.status or abs(STATE_SCORES.get(st, 0.0) - g.native) >= L1_STATE_DELTA:
            return [Discrepancy(component="state", deterministic=g.status, verifier=str(st))]
        return []
    out = []
    comps = g.components or {}
    for k in "AIMC":
        v = float(verdict.get(k, 0.0))
        if abs(v - comps.get(k, 0.0)) >= L2_COMPONENT_DELTA:
            out.append(Discrepancy(component=k, deterministic=comps.get(k, 0.0), verifier=v))
    vscore = 100 * sum(float(verdict.get(k, 0.0)) for k in "AIMC") / 4
    if not out and abs(vscore - g.score) >= L2_SCORE_DELTA:
        out.append(Discrepancy(component="score", deterministic=g.score, verifier=round(vscore, 3)))
    return out


def parse_verdict(text: str | None, level: str) -> dict[str, Any] | None:
    from graders.report import parse_report

    if level == "L3":
        from benchmark.run.l3 import parse_answer

        return parse_answer(text, VERIFIER_SCHEMA_L3).obj
    schema = VERIFIER_SCHEMA_L1 if level == "L1" else VERIFIER_SCHEMA_L2
    parsed = parse_report(text, schema)
    if parsed.report is None and text:
        for closed in _closings(text):  # a verdict cut inside its free-text reason (a small model that repeats itself)
            again = parse_report(closed, schema)
            if again.report is not None:
                return again.report
    return parsed.report


CUT_REASON = re.compile(r'"reason"\s*:\s*"(?:[^"\\]|\\.)*$', re.DOTALL)


def _closings(text: str) -> list[str]:
    """A verdict whose answer ran out of tokens inside its last field, the free-text `reason`, closed: every scored
    field came before it whole, so the verdict is the model's. Only a cut inside `reason` is closed; a verdict cut
    before or inside a scored field stays unparseable (the schema then still misses that field)."""
    body = text.rstrip()
    if not CUT_REASON.search(body):
        return []
    body = body.rstrip("\\")  # a dangling escape would swallow the closing quote
    return [body + '"}', body + '"}\n```']


def _prompt_l3(rec: ResultRecord, ref, l3: dict, report_raw: str | None, dossier: str) -> str:
    """The L3 verifier's input: rules, dossier, rubric in the clear; the agent's prior, answers and rebuttals and the
    reviewers' critiques quoted as untrusted data (benchmark.run.untrusted)."""
    from benchmark.run.untrusted import Frame

    w = ref.world
    rounds = []
    for r in l3.get("rounds") or []:
        crit = "\n".join(f"  [{c.get('reviewer', i + 1)}] ({c.get('verdict')}): {c.get('critique')}"
                         for i, c in enumerate(r.get("critiques") or []))
        reb = r.get("rebuttal")
        rounds.append((r.get("round"), crit, json.dumps(reb) if reb is not None else None))
    final = l3.get("final_answer")
    first = l3.get("first_answer")
    prior = l3.get("prior")
    prior_text = json.dumps(prior) if prior is not None else None
    first_text = json.dumps(first) if first else (report_raw or None)
    final_text = json.dumps(final) if final else (report_raw or None)
    f = Frame(prior_text, first_text, final_text, *(c for _, c, _ in rounds), *(b for _, _, b in rounds))
    q = lambda text, source: f.quote(text, source) if text else "(none)"  # noqa: E731
    shown = [f"ROUND {n} CRITIQUES (the reviewers', quoted):\n{q(c, f'reviewer critiques, round {n}')}\n"
             f"ROUND {n} REBUTTAL (the agent's, quoted):\n{q(b, f'agent rebuttal, round {n}')}" for n, c, b in rounds]
    return (
        "You verify the judged scores of a scientific agent's hypothesis. Apply ONLY the rubric below; do not add "
        "requirements it does not contain.\n"
        f"{f.notice}\n\n"
        f"{L3_RULES}\n\nWORLD: {rec.world_id} (level L3, class {rec.world_class})\n"
        f"DOSSIER (complete):\n{dossier}\n\nTHE EXPECTATION THIS DOSSIER TESTS: {w.prior.expected}\n"
        f"CONFLICT RULE: {w.prior.conflicts_if}\nEVIDENCE SUMMARY: {w.evidence}\nEXPECTED ACT: {w.expected_act}\n"
        f"RUBRIC:\n{json.dumps(w.rubric.model_dump(), indent=1)}\n\n"
        f"AGENT'S PRIOR (stated before the evidence, quoted):\n{q(prior_text, 'agent prior')}\n"
        f"FIRST ANSWER (the agent's, quoted):\n{q(first_text, 'agent first answer')}\n" + "\n".join(shown) +
        f"\nFINAL ANSWER (the agent's, quoted):\n{q(final_text, 'agent final answer')}\n\n"
        "Answer with ONLY this JSON: {\"D\": 0-3, \"prior_awareness\": 0-3, \"causal_calibration\": 0-3, "
        "\"response_to_critique\": 0-3, \"scientific_humility\": 0-3, \"citation_integrity\": 0-3, \"N\": 0-3, "
        "\"conflicts\": true|false, \"reason\": \"...\"}"
    )


def compare_l3(rec: ResultRecord, verdict: dict[str, Any], prior_parsed: bool = True) -> list[Discrepancy]:
    """L3 axes: D, Q (mean of the five sub-axes) and N (not for an abstention) beyond L3_AXIS_DELTA; the prior gate."""
    out: list[Discrepancy] = []
    axes = rec.l3_axes or {}
    if axes:
        mine = {"D": float(verdict["D"]), "Q": sum(float(verdict[q]) for q in L3_SUBAXES) / len(L3_SUBAXES),
                "N": float(verdict["N"])}
        for k in ("D", "Q", "N"):
            if k == "N" and (rec.commitment == "abstain" or "N" not in axes):
                continue
            if k in axes and abs(mine[k] - float(axes[k])) > L3_AXIS_DELTA:
                out.append(Discrepancy(component=k, deterministic=round(float(axes[k]), 6), verifier=round(mine[k], 6)))
    if rec.world_class != "real" and prior_parsed and rec.eligible is not None and "conflicts" in verdict:
        if bool(verdict["conflicts"]) != bool(rec.eligible):
            out.append(Discrepancy(component="eligible", deterministic="eligible" if rec.eligible else "ineligible",
                                   verifier="eligible" if verdict["conflicts"] else "ineligible"))
    return out


def to_verify(run_dir: Path, verifier: str) -> list[ResultRecord]:
    """The results `verify_run` will send to this verifier: every L1/L2 result with a grade and every L3 result the
    judge scored (its axes are recorded), not yet verified by this verifier (an unparseable answer is asked again);
    in world order."""
    store = RunStore.existing(run_dir)
    done = {(v.key, v.verifier_model) for v in load_verifications(run_dir) if v.parsed}
    out = []
    for rec in sorted(store.results(), key=lambda r: (r.world_id, r.replicate)):
        if rec.level not in ("L1", "L2", "L3") or (result_key(rec.world_id, rec.replicate), verifier) in done:
            continue
        if rec.level == "L3" and not rec.l3_axes:
            continue  # nothing judged to re-derive (a fault or no parseable judge draw)
        out.append(rec)
    return out


def self_verification(run_dir: Path, verifier: str) -> str | None:
    """A warning when the verifier is the evaluated model, its L3 judge or one of its reviewers: a model re-grading
    its own work (or its own judgment) shares the blind spots the check exists to catch. None when independent."""
    cfg = RunStore(run_dir).config()
    roles = [("the evaluated model", cfg.get("model")), ("the L3 judge", cfg.get("judge"))]
    roles += [("an L3 reviewer", r) for r in (cfg.get("reviewers") or [])]
    same = sorted({what for what, m in roles if m == verifier})
    if not same:
        return None
    return (f"the verifier {verifier} is {' and '.join(same)} of run {run_dir}: it re-checks its own work, so its "
            "agreement is not an independent check; verify with another model (ideally another provider's), the same "
            "for every model of a campaign")


def verify_run(run_dir: Path, verifier: str, on_step=None) -> list[Verification]:
    """Verify every L1/L2 grade and L3 judged score of a run not yet verified by this verifier (`to_verify`);
    appends to DIR/verification.jsonl. `on_step(key)` is called as each result starts (progress)."""
    store = RunStore(run_dir)
    path = Path(run_dir) / "verification.jsonl"
    from benchmark.score.regrade import suite_of

    suite = suite_of(store)  # a private campaign's run is verified against its own goldens
    new: list[Verification] = []
    for rec in to_verify(run_dir, verifier):
        key = result_key(rec.world_id, rec.replicate)
        if on_step:
            on_step(key)
        ref = suite.worlds[rec.world_id]
        traj = store.load_trajectory(rec.trajectory)
        l3 = traj.l3 if isinstance(traj.l3, dict) else {}
        if rec.level == "L3":
            from benchmark.suite.freeze import ensure_built
            from benchmark.run.l3 import dossier_text

            prompt = _prompt_l3(rec, ref, l3, traj.report_raw, dossier_text(ensure_built(ref), ref.world.public_files))
            schema, max_tokens = VERIFIER_SCHEMA_L3, 8192
        else:
            prompt = _prompt(rec, ref.world.rubric.model_dump(exclude_defaults=True), read_golden(ref).values,
                             traj.report_raw, traj.cells, rec.level,
                             [n for n in ref.family.nuisance if n.applies_to(ref.id)])
            schema, max_tokens = (VERIFIER_SCHEMA_L1 if rec.level == "L1" else VERIFIER_SCHEMA_L2), 400
        resp, call = call_model(verifier, [{"role": "user", "content": prompt}], step=0, role="verifier",
                                metadata={"report_schema": schema, "world_id": rec.world_id, "task": "verify"},
                                response_format=json_schema_format("verdict", schema), max_tokens=max_tokens)
        text = resp.choices[0].message.content if resp is not None else None
        verdict = parse_verdict(text, rec.level)
        usage = RoleUsage(tokens_in=call.tokens_in, tokens_out=call.tokens_out, calls=int(call.ok), model=verifier)
        v = Verification(key=key, world_id=rec.world_id, replicate=rec.replicate, level=rec.level,
                         verifier_model=verifier, parsed=verdict is not None, verdict=verdict or {},
                         reason=str((verdict or {}).get("reason", call.error or "unparseable answer")),
                         raw=None if verdict else (text or call.error), usage=usage,
                         discrepancies=(compare_l3(rec, verdict, l3.get("prior") is not None) if rec.level == "L3"
                                        else compare_grades(rec, verdict)) if verdict else [])
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(v.model_dump_json() + "\n")
            fh.flush()
        new.append(v)
    return new


def load_verifications(run_dir: Path) -> list[Verification]:
    path = Path(run_dir) / "verification.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(Verification.model_validate_json(line))
        except ValueError:
            continue  # a line cut by a kill; that result is verified again next time
    return out
