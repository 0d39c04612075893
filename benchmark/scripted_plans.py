"""What each scripted agent does in each protocol: the harness's side of the scripted models.

The scripted provider (benchmark.models.scripted) only replays the `Script` it is handed; the knowledge of what an
oracle, a naive or a gaming agent does for a world, an L3 role, a pivotal case or a grounding item lives here, with
the protocols. Every function takes the model string and returns the metadata to add to the call: `{"script": ...}`
for a scripted model, `{}` for a real one (real models never see a plan) and for scripted/first and
scripted/verbose where they answer generically from the call's report_schema and messages.

Agents:
  oracle   L1/L2: the family's registered reference solution (@oracle), run in the sandbox; L3: the manifest's
           expected act grounded in the dossier's supported claims; pivotal: the corrected plan; grounding: the
           item's reference statistic on the files (graders.grounding.oracle_cells), "cannot determine" where the data
           cannot decide.
  naive    L1/L2: tool defaults without checking anything (@naive); L3: the textbook prior, citing nothing;
           pivotal: the plan that proceeds without checking.
  first    position-bias control: option A in pivotal cases; elsewhere generic (first enum value of the schema).
  recall   grounding items only: the item's key, without reading the data (the prior-knowledge control).
  all_clear, flag_all, keyword, constant, metadata   gaming agents (benchmark.gaming), L1/L2 only.
  In a grading role (L3 eligibility, review, judge; the run verifier) oracle, naive and the gaming agents pick the
  first option; as a grounding judge they grade like the evaluator they stand in for (benchmark.grounding.judge).
"""
from __future__ import annotations

import json
from typing import Any

from benchmark.gaming import GAMING
from benchmark.models.script import Script, first_option_value, refuse, reply, reply_json, run_cells

AGENTS = ("oracle", "naive", "first", "recall", "verbose", *GAMING)
GENERIC = ("first", "verbose")  # answer from the call's report_schema and messages, without a plan
GRADING_ROLES = ("eligibility", "review", "judge", "verify")


def agent(model: str) -> str | None:
    """The scripted agent a model string names, or None for a real model."""
    return model.split("/", 1)[1] if model.startswith("scripted/") else None


def _meta(script: Script | None) -> dict[str, Any]:
    return {} if script is None else {"script": script.dump()}


def _plan(generic: tuple[str, ...] = GENERIC):
    """Make `fn(name, ...) -> Script` a protocol's plan taking the model string: `{}` for a real model and for the
    agents in `generic` (they answer from the call's report_schema and messages), a refusal for an unknown scripted
    agent, else the Script in the call's metadata. A plan that cannot be built (a track module that fails to
    import, a world whose siblings cannot be built) becomes a script that refuses with the reason: the call is
    recorded as a model error, as any provider fault."""
    import functools

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(model: str, *args, **kwargs) -> dict[str, Any]:
            name = agent(model)
            if name is None or name in generic:
                return {}
            if name not in AGENTS:
                return _meta(refuse(f"unknown scripted agent 'scripted/{name}'; known: {', '.join(AGENTS)}"))
            try:
                return _meta(fn(name, *args, **kwargs))
            except Exception as exc:  # noqa: BLE001 - see docstring
                return _meta(refuse(f"the scripted agent's plan could not be built: {type(exc).__name__}: {exc}"))

        return wrapper

    return deco


# ---------------------------------------------------------------- L1/L2 worlds and the L3 dossier episode

@_plan()
def world(name: str, ref) -> Script:
    """The agent's episode on a world (run path, L1/L2; the L3 dossier steps)."""
    return world_script(name, ref)


def world_script(name: str, ref) -> Script:
    if name == "recall":
        return refuse("scripted/recall answers grounding items only")
    if name in GAMING:
        return _gaming(name, ref)
    if ref.world.level == "L3":  # a registered solution runs; else the answer comes from the manifest
        entry = _registered(name, ref)
        cells = list(entry.fn(ref)) if entry is not None else []
        return run_cells(cells) if cells else reply_json(_l3_report(name, ref))
    cells = solution_cells(name, ref)
    return cells if isinstance(cells, Script) else run_cells(cells)


def _registered(name: str, ref):
    from benchmark.registry import NAIVES, ORACLES, load_track_module

    load_track_module(ref.track.solver_module)
    reg = ORACLES if name == "oracle" else NAIVES
    return reg.get(ref.family.id) if ref.family.id in reg else None


def solution_cells(name: str, ref) -> list[str] | Script:
    """The cells of the family's registered oracle or naive solution (a refusal when none is registered)."""
    from benchmark.registry import NAIVES, ORACLES

    entry = _registered(name, ref)
    if entry is None:
        kind = (ORACLES if name == "oracle" else NAIVES).kind
        return refuse(f"no {kind} is registered for family {ref.family.id}")
    return list(entry.fn(ref))


def _gaming(name: str, ref) -> Script:
    """Gaming agents on L1/L2 (benchmark.gaming): their cells, then their report, computed here when it does not
    depend on the naive analysis or a naive run is replayed, else as edits of what the naive cells printed."""
    from benchmark import gaming

    if ref.world.level == "L3":
        return refuse(f"scripted/{name} plays L1/L2 worlds only, not {ref.id!r}")
    naive_cells = solution_cells("naive", ref)
    if isinstance(naive_cells, Script):
        return naive_cells
    cells = gaming.cells(name, ref, naive_cells)
    replay = gaming.naive_replay(ref.id)
    if replay is not None:
        naive = replay[0]
        script = reply_json(gaming.report(name, ref, naive if isinstance(naive, dict) else None))
    else:
        edits = gaming.naive_edits(name, ref)
        script = reply_json(gaming.report(name, ref, None)) if edits is None else run_cells([], edits)
    return script.model_copy(update={"cells": cells})


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

@_plan()
def role(name: str, kind: str, schema: dict, ref=None) -> Script:
    """One answer in an L3 role (prior, rebuttal, eligibility, review, judge) or as the run verifier (verify)."""
    if name == "recall":
        return refuse("scripted/recall answers grounding items only")
    if kind in GRADING_ROLES:
        return reply_json(first_option_value(schema))
    if ref is None:
        return refuse(f"scripted/{name} has no {kind} answer without a world")
    w = ref.world
    if kind == "prior":  # every scripted agent holds the textbook expectation the dossier tests
        return reply_json({"expectation": w.prior.expected, "confidence": 80, "reasoning": "the textbook expectation"})
    if kind == "rebuttal":
        return reply_json({"response": "The critique does not change what the dossier's evidence shows.",
                           "concessions": [], "revised_hypothesis": None})
    return refuse(f"scripted/{name} has no behaviour for the L3 role {kind!r}")


# ---------------------------------------------------------------- pivotal choices

@_plan(generic=())
def pivotal(name: str, corrected: str, original: str, proceed: str | None) -> Script:
    """oracle: the human-corrected plan; naive: the plan that proceeds without checking (the agent's own plan when
    the case does not say); first: option A. Labels are the letters the plans carry in this option order."""
    if name == "first":
        return reply_json({"choice": "A", "reason": "the first option"})
    label = corrected if name == "oracle" else proceed or (original if name == "naive" else None)
    if label not in ("A", "B"):
        key = "corrected" if name == "oracle" else "proceed"
        return refuse(f"scripted/{name} has no pivotal choice: the case names no {key} plan")
    why = "the corrected plan" if name == "oracle" else "proceed on the output without checking"
    return reply_json({"choice": label, "reason": why})


# ---------------------------------------------------------------- grounding

@_plan()
def grounding(name: str, shown, insufficient_letter: str | None) -> Script:
    """A grounding item as the agent sees it (`shown`, after anonymisation)."""
    if name == "recall":
        return reply_json({"answer": shown.key, "confidence": 95, "data_support": "supports",
                           "evidence": "Recalled from prior knowledge of the question; the data were not inspected."})
    if name != "oracle":
        return refuse(f"scripted/{name} has no behaviour for grounding items")
    from graders.grounding import oracle_cells

    return run_cells(oracle_cells(shown.host.stat_source, shown.statistic, shown.options, insufficient_letter))


@_plan()
def grounding_judge(name: str, prompt: str, kind: str) -> Script:
    """A scripted evaluator grades like the one it stands in for (benchmark.grounding.judge.scripted_verdict)."""
    from benchmark.grounding.judge import scripted_verdict

    return reply(json.dumps(scripted_verdict(prompt, kind)))
