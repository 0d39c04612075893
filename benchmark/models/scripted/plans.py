"""What each scripted agent does in each protocol, decided behind the model-provider boundary from the call's context.

As inspect_ai's mock model, the scripted provider (benchmark.models.scripted) gets what it needs from the call's
metadata and decides: protocols attach the same neutral context to every model's calls (the world's id and
manifest, the task or L3 role with its report_schema, the pivotal case id, cases file and option order, the
grounding item id), never a plan, and no protocol asks what a scripted agent does. `plan(name, meta, messages)`
turns that context into a `Script` (benchmark.models.scripted.script) the provider replays; None where the agent
answers generically (scripted/first and scripted/verbose from the report_schema and messages).

Agents:
  oracle   L1/L2: the family's registered reference solution (@oracle), run in the sandbox; L3: the manifest's
           expected act grounded in the dossier's supported claims; pivotal: the corrected plan; grounding: the
           item's reference statistic on the files (graders.grounding.oracle_cells), "cannot determine" where the data
           cannot decide.
  naive    L1/L2: tool defaults without checking anything (@naive); L3: the textbook prior, citing nothing;
           pivotal: the plan that proceeds without checking.
  first    position-bias control: option A in pivotal cases; elsewhere generic (first enum value of the schema).
  recall   grounding items only: the item's key, without reading the data (the prior-knowledge control).
  all_clear, flag_all, keyword, constant, metadata, layout, withhold, alarmist, prior   gaming agents
           (benchmark.models.scripted.gaming; prior: benchmark.models.scripted.prior), L1/L2 only.
  thorough the oracle's findings written as a careful expert writes them (benchmark.models.scripted.expert).
  rubric   an L3 judge that grades: scores the quoted final answer against the world's rubric
           (benchmark.models.scripted.rubric); L3 grading roles only.
  In a grading role (L3 eligibility, review, judge; the run verifier) oracle, naive and the gaming agents pick the
  first option; as a grounding judge they grade like the evaluator they stand in for (`scripted_verdict`).
"""
from __future__ import annotations

import json
from typing import Any

from benchmark.models.scripted.expert import EXPERTS
from benchmark.models.scripted.gaming import GAMING
from benchmark.models.scripted.script import Script, first_option_value, refuse, reply, reply_json, run_cells

AGENTS = ("oracle", "naive", "first", "recall", "verbose", "rubric", *GAMING, *(e for e in EXPERTS if e not in GAMING))
GENERIC = ("first", "verbose")  # answer from the call's report_schema and messages, without a plan
GRADING_ROLES = ("eligibility", "review", "judge", "verify")
L3_ROLES = ("prior", "rebuttal", *GRADING_ROLES)


def agent(model: str) -> str | None:
    """The scripted agent a model string names, or None for a real model."""
    return model.split("/", 1)[1] if model.startswith("scripted/") else None


def plan(name: str, meta: dict[str, Any], messages: list) -> Script | None:
    """What scripted agent `name` does on this call, from the call's context: a Script, or None where it answers
    generically (`GENERIC`, outside pivotal cases). A refusal for an unknown agent or a call whose context names
    nothing to plan from. A plan that cannot be built (a track module that fails to import, a world whose siblings
    cannot be built) becomes a script that refuses with the reason: the call is recorded as a model error, as any
    provider fault."""
    task = meta.get("task")
    generic = () if task == "pivotal" else GENERIC
    if name in generic:
        return None
    if name not in AGENTS:
        return refuse(f"unknown scripted agent 'scripted/{name}'; known: {', '.join(AGENTS)}")
    try:
        if task == "pivotal":
            return pivotal(name, meta)
        if task == "grounding":
            return grounding(name, meta)
        if task == "grounding_judge":
            return grounding_judge(name, meta, messages)
        if task in L3_ROLES:
            return role(name, str(task), meta.get("report_schema") or {}, meta, messages)
        if meta.get("world_manifest"):  # the run path's episode (L1/L2) or the L3 dossier steps
            return world(name, _world(meta))
    except Exception as exc:  # noqa: BLE001 - see docstring
        return refuse(f"the scripted agent's plan could not be built: {type(exc).__name__}: {exc}")
    return refuse(f"scripted/{name} decides from the call's context: pass metadata with a world (world_id and "
                  "world_manifest, from WorldRef.call_context), an L3 role or 'verify' task with its report_schema, a "
                  "pivotal case (case_id, cases, order) or a grounding item (item); or hand over metadata['script'] "
                  f"(a Script) to replay; only {', '.join('scripted/' + g for g in GENERIC)} answer without one")


def _world(meta: dict[str, Any]):
    from benchmark.suite.loader import world_from_context

    return world_from_context(meta)


# ---------------------------------------------------------------- L1/L2 worlds and the L3 dossier episode

def world(name: str, ref) -> Script:
    """The agent's episode on a world (run path, L1/L2; the L3 dossier steps)."""
    return world_script(name, ref)


def world_script(name: str, ref) -> Script:
    if name == "recall":
        return refuse("scripted/recall answers grounding items only")
    if name in EXPERTS:
        return _expert(name, ref)
    if name in GAMING:
        return _gaming(name, ref)
    if ref.world.level == "L3":  # a registered solution runs; else the answer comes from the manifest
        entry = _registered(name, ref)
        cells = list(entry.fn(ref)) if entry is not None else []
        return run_cells(cells) if cells else reply_json(_l3_report(name, ref))
    cells = solution_cells(name, ref)
    return cells if isinstance(cells, Script) else run_cells(cells)


def _registered(name: str, ref):
    from benchmark.suite.registry import NAIVES, ORACLES
    from graders.registry import load_track_module

    load_track_module(ref.track.solver_module)
    reg = ORACLES if name == "oracle" else NAIVES
    return reg.get(ref.family.id) if ref.family.id in reg else None


def solution_cells(name: str, ref) -> list[str] | Script:
    """The cells of the family's registered oracle or naive solution (a refusal when none is registered)."""
    from benchmark.suite.registry import NAIVES, ORACLES

    entry = _registered(name, ref)
    if entry is None:
        kind = (ORACLES if name == "oracle" else NAIVES).kind
        return refuse(f"no {kind} is registered for family {ref.family.id}")
    return list(entry.fn(ref))


def _gaming(name: str, ref) -> Script:
    """Gaming agents on L1/L2 (benchmark.models.scripted.gaming): their cells, then their report, computed here when
    it does not depend on the naive analysis or a naive run is replayed, else as edits of what the naive cells
    printed."""
    from benchmark.models.scripted import gaming

    if ref.world.level == "L3":
        return refuse(f"scripted/{name} plays L1/L2 worlds only, not {ref.id!r}")
    naive_cells = solution_cells("naive", ref)
    if isinstance(naive_cells, Script):
        return naive_cells
    if name == "prior":
        from benchmark.models.scripted import prior

        return prior.script(ref, naive_cells, gaming.naive_replay(ref.id))
    cells = gaming.cells(name, ref, naive_cells)
    replay = gaming.naive_replay(ref.id)
    if replay is not None:
        naive = replay[0]
        script = reply_json(gaming.report(name, ref, naive if isinstance(naive, dict) else None))
    else:
        edits = gaming.naive_edits(name, ref)
        script = reply_json(gaming.report(name, ref, None)) if edits is None else run_cells([], edits)
    return script.model_copy(update={"cells": cells})


def _expert(name: str, ref) -> Script:
    """thorough and alarmist (benchmark.models.scripted.expert): the oracle's analysis, replayed from its recorded
    run when one is named, else run; the report is the oracle's, edited as the agent writes it."""
    from benchmark.models.scripted import expert, gaming
    from benchmark.models.scripted.script import apply_edits

    if ref.world.level == "L3":
        return refuse(f"scripted/{name} plays L1/L2 worlds only, not {ref.id!r}")
    eds = expert.edits(name, ref)
    replay = gaming.naive_replay(ref.id, expert.ORACLE_REPLAY_ENV)
    if replay is not None and isinstance(replay[0], dict):
        cells = [gaming.product_cell(replay[1])]  # one cell even without products: the report rests on executed code
        return reply_json(apply_edits(eds, replay[0])).model_copy(update={"cells": cells})
    cells = solution_cells("oracle", ref)
    return cells if isinstance(cells, Script) else run_cells(cells, eds)


def _l3_report(name: str, ref) -> dict[str, Any]:
    """oracle: the manifest's expected act, grounded in the dossier's supported claims.
    naive: restates the textbook prior with high confidence, citing nothing (the prior-following trap)."""
    w = ref.world
    if name == "oracle":
        return {"hypothesis": w.expected_act, "commitment": "commit", "evidence_cited": list(w.rubric.key_claims),
                "mechanism": w.expected_act, "alternative_explanations": list(w.rubric.unsupported_claims),
                "next_experiment": w.rubric.novelty, "confidence": 60, "abstention_reason": ""}
    return {"hypothesis": w.prior.expected, "commitment": "commit", "evidence_cited": [], "mechanism": w.prior.expected,
            "alternative_explanations": [], "next_experiment": "", "confidence": 95, "abstention_reason": ""}


# ---------------------------------------------------------------- L3 roles and grading roles

def role(name: str, kind: str, schema: dict, meta: dict[str, Any], messages: list | None = None) -> Script:
    """One answer in an L3 role (prior, rebuttal, eligibility, review, judge) or as the run verifier (verify)."""
    if name == "recall":
        return refuse("scripted/recall answers grounding items only")
    if name == "rubric":
        return _rubric(kind, meta, messages or [])
    if kind in GRADING_ROLES:
        return reply_json(first_option_value(schema))
    if not meta.get("world_manifest"):
        return refuse(f"scripted/{name} has no {kind} answer without a world")
    w = _world(meta).world
    if kind == "prior":  # every scripted agent holds the textbook expectation the dossier tests
        return reply_json({"expectation": w.prior.expected, "confidence": 80, "reasoning": "the textbook expectation"})
    if kind == "rebuttal":
        return reply_json({"response": "The critique does not change what the dossier's evidence shows.",
                           "concessions": [], "revised_hypothesis": None})
    return refuse(f"scripted/{name} has no behaviour for the L3 role {kind!r}")


def _rubric(kind: str, meta: dict[str, Any], messages: list) -> Script:
    """scripted/rubric in an L3 grading role: grades against the world's rubric (benchmark.models.scripted.rubric)."""
    from benchmark.models.scripted import rubric

    if kind not in ("eligibility", "judge", "review") or not meta.get("world_manifest"):
        return refuse(f"scripted/rubric grades L3 dossiers only (eligibility, review, judge), not {kind!r}")
    w = _world(meta).world
    prompt = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")
    if kind == "review":
        return reply_json(rubric.review())
    return reply_json(rubric.eligibility(w, prompt) if kind == "eligibility" else rubric.judge(w, prompt))


# ---------------------------------------------------------------- pivotal choices

def pivotal(name: str, meta: dict[str, Any]) -> Script:
    """oracle: the human-corrected plan; naive: the plan that proceeds without checking (the agent's own plan when
    the case does not say); first: option A. Labels are the letters the plans carry in the call's option order
    (original_first: the original plan is A)."""
    if name == "first":
        return reply_json({"choice": "A", "reason": "the first option"})
    from benchmark.pivotal.cases import load_cases

    case = next(c for c in load_cases(meta.get("cases")) if c.id == meta["case_id"])
    orig, corr = ("A", "B") if meta["order"] == "original_first" else ("B", "A")
    proceed = {"original": orig, "corrected": corr}.get(case.proceeds or "")
    label = corr if name == "oracle" else proceed or (orig if name == "naive" else None)
    if label not in ("A", "B"):
        key = "corrected" if name == "oracle" else "proceed"
        return refuse(f"scripted/{name} has no pivotal choice: the case names no {key} plan")
    why = "the corrected plan" if name == "oracle" else "proceed on the output without checking"
    return reply_json({"choice": label, "reason": why})


# ---------------------------------------------------------------- grounding

def grounding(name: str, meta: dict[str, Any]) -> Script:
    """A grounding item as the agent sees it (anonymised when the call says so)."""
    from benchmark.grounding.build import agent_item
    from benchmark.grounding.items import select

    shown = agent_item(select([meta["item"]])[0], bool(meta.get("anonymised")))
    if name == "recall":
        return reply_json({"answer": shown.key, "confidence": 95, "data_support": "supports",
                           "evidence": "Recalled from prior knowledge of the question; the data were not inspected."})
    if name != "oracle":
        return refuse(f"scripted/{name} has no behaviour for grounding items")
    from graders.grounding import oracle_cells

    return run_cells(oracle_cells(shown.host.stat_source, shown.statistic, shown.options, meta.get("insufficient_letter")))


# the sources the grounding judge's prompt names its two quoted passages by (benchmark.grounding.judge.ANALYSIS,
# FINAL): what a reader of the prompt sees; tests/test_l3.py grades real judge prompts with `scripted_verdict`
ANALYSIS, FINAL = "agent code and output", "agent final answer"


def grounding_judge(name: str, meta: dict[str, Any], messages: list) -> Script:
    """A scripted evaluator grades like the one it stands in for (`scripted_verdict`), from the prompt it is sent."""
    prompt = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    return reply(json.dumps(scripted_verdict(prompt, str(meta.get("prompt_kind")))))


def scripted_verdict(prompt: str, kind: str) -> dict:
    """What a scripted judge answers: it grades like the evaluator it stands in for.
    standard: full marks iff the final answer equals the reference. grounding: reads the executed analysis; full
    marks iff the analysis printed the final answer as its result and the agent claims support, none without
    executed analysis or when the agent itself says the data cannot decide."""
    import re

    from benchmark.run.untrusted import outside, quoted

    ref = re.search(r"^REFERENCE ANSWER: (\S+)", outside(prompt), re.M)  # the harness's line, never a quoted one
    fin = quoted(prompt, FINAL)
    ana = quoted(prompt, ANALYSIS)
    try:
        final = json.loads(fin[0]) if fin else {}
    except ValueError:
        final = {}
    final = final if isinstance(final, dict) else {}
    answer = final.get("answer")
    matches = bool(ref and answer == ref.group(1))
    analysis = ana[0].strip() if ana else ""
    if kind == "grounding":
        if not analysis or analysis == "(none)":
            overall, support = 0, "no"
        elif final.get("data_support") in ("does not support", "cannot determine"):
            overall, support = 1, "no"
        elif answer and f'"answer": "{answer}"' in analysis:
            overall, support = 10, "yes"
        else:
            overall, support = 3, "partially"
    else:
        overall, support = (10 if matches else 0), "yes"
    return {"matches_reference": matches, "analysis_quality": overall, "supported": support, "overall": overall}
