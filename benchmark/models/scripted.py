"""Scripted agents served through litellm, so they exercise exactly the path a real model takes.

scripted/oracle  runs the family's reference solution inside the sandbox (run_python calls), then returns the
                 report its last cell printed: it must score full marks (the world is solvable in the sandbox).
scripted/naive   runs tool defaults without checking anything and reports what it got: it must fall into traps.
scripted/first   picks the first option wherever one is offered (enum values, A/B choices): a position-bias control.
scripted/recall  grounding items only: returns the item's key without reading the data (the prior-knowledge control).
scripted/all_clear, flag_all, keyword, constant, metadata  gaming agents (benchmark.gaming): strategies that skip the
                 analysis, run as permanent validity checks (`worlds check --agents`).
For grounding items (metadata task "grounding") scripted/oracle runs the item's reference statistic on the files in
its sandbox (graders.grounding.oracle_cells) and reports "cannot determine" where the data cannot decide. As a
grounding judge (task "grounding_judge") a scripted model grades like the evaluator it stands in for: the standard
prompt by agreement with the reference, the grounding prompt by whether the executed analysis printed the answer.
Pivotal cases (metadata task "pivotal"): oracle picks the corrected plan, naive the plan that proceeds without
checking, first option A; the pivotal harness passes the labels in metadata to scripted agents only.
scripted/verbose L3 only, a long-answer model: every free-text field it writes (prior, report, critique, rebuttal,
                 judge and verifier reasons) is VERBOSE_CHARS characters; as the agent it reads the dossier in two
                 cells and answers at step 3; its first rebuttal revises the next experiment, its second re-reads the
                 dossier in a cell first. In a grading role
                 it scores every 0-3 axis 2 (see `_verbose`).
Scripted agents are not language models: they report zero tokens.
"""
from __future__ import annotations

import json
import uuid
from typing import Any

import litellm
from litellm import CustomLLM
from litellm.llms.custom_llm import CustomLLMError

from benchmark.gaming import GAMING

SCRIPTED = ("oracle", "naive", "first", "recall", "verbose", *GAMING)
VERBOSE_CHARS = 2000


def _response(model: str, content: str | None = None, code: str | None = None) -> litellm.ModelResponse:
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    finish = "stop"
    if code is not None:
        msg["tool_calls"] = [{"id": f"call_{uuid.uuid4().hex[:10]}", "type": "function",
                              "function": {"name": "run_python", "arguments": json.dumps({"code": code})}}]
        finish = "tool_calls"
    return litellm.ModelResponse(id=f"scripted-{uuid.uuid4().hex[:12]}", model=f"scripted/{model}",
                                 choices=[{"index": 0, "message": msg, "finish_reason": finish}],
                                 usage={"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})


def last_json_line(text: str) -> str | None:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                json.loads(line)
                return line
            except json.JSONDecodeError:
                continue
    return None


def first_option_value(schema: dict[str, Any]) -> Any:
    """The schema-valid value that takes the first option everywhere (first enum member, empty otherwise)."""
    if "enum" in schema:
        return schema["enum"][0]
    t = schema.get("type")
    if isinstance(t, list):
        t = t[0]
    if t == "object" or "properties" in schema:
        req = schema.get("required", list(schema.get("properties", {})))
        return {k: first_option_value(schema.get("properties", {}).get(k, {})) for k in req}
    return {"array": [], "string": "", "number": 0, "integer": 0, "boolean": False, "null": None}.get(t, "")


class ScriptedLLM(CustomLLM):
    def completion(self, model: str, messages: list, api_base, custom_prompt_dict, model_response, print_verbose,
                   encoding, api_key, logging_obj, optional_params: dict, acompletion=None, litellm_params=None,
                   logger_fn=None, headers=None, timeout=None, client=None):
        name = model.split("/")[-1]
        meta = (litellm_params or {}).get("metadata") or {}
        if name not in SCRIPTED:
            raise CustomLLMError(status_code=404, message=f"unknown scripted agent 'scripted/{name}'; known: {', '.join(SCRIPTED)}")
        if meta.get("task") == "pivotal":  # pivotal-choice cases (benchmark.pivotal)
            return _response(name, content=json.dumps(self._pivotal(name, meta)))
        if name == "first":
            return self._first(meta, messages, name)
        if name == "verbose":
            return _verbose(meta, messages, optional_params)  # L3 long answers (end of module)
        task = meta.get("task")
        if task == "grounding_judge":
            return self._grounding_judge(name, meta, messages)
        if task == "grounding":
            return self._grounding(name, meta, messages, optional_params)
        if name == "recall":
            raise CustomLLMError(status_code=501, message="scripted/recall answers grounding items only")
        if task in ("eligibility", "review", "judge", "verify"):  # a scripted model in a grading role
            return self._first(meta, messages, name)
        world_id = meta.get("world_id")
        if not world_id:
            raise CustomLLMError(status_code=400, message="scripted agents need metadata.world_id (set by the harness)")
        if task in ("prior", "rebuttal"):
            return _response(name, content=json.dumps(self._l3_answer(task, world_id)))
        if name in GAMING:
            return self._gaming(name, world_id, messages, optional_params)
        cells = self._cells(name, world_id)
        done = [m for m in messages if m.get("role") == "tool"]
        if len(done) < len(cells) and optional_params.get("tool_choice") != "none":
            return _response(name, code=cells[len(done)])
        last = str(done[-1].get("content", "")) if done else ""
        if not cells and meta.get("task") == "dossier":
            return _response(name, content=json.dumps(self._l3_report(name, world_id)))
        report = last_json_line(last)
        return _response(name, content=report if report is not None else last or "no report")

    @staticmethod
    def _grounding(name: str, meta: dict, messages: list, optional_params: dict) -> litellm.ModelResponse:
        from benchmark.grounding.build import agent_item
        from benchmark.grounding.items import select
        from graders.grounding import oracle_cells

        found = select([meta.get("item") or ""]) if meta.get("item") else []
        if len(found) != 1:
            raise CustomLLMError(status_code=400, message=f"unknown grounding item {meta.get('item')!r}")
        item = agent_item(found[0], bool(meta.get("anonymised")))
        if name == "recall":
            return _response(name, content=json.dumps({
                "answer": item.key, "confidence": 95, "data_support": "supports",
                "evidence": "Recalled from prior knowledge of the question; the data were not inspected."}))
        if name != "oracle":
            raise CustomLLMError(status_code=501, message=f"scripted/{name} has no behaviour for grounding items")
        cells = oracle_cells(item.statistic, item.options, meta.get("insufficient_letter"))
        done = [m for m in messages if m.get("role") == "tool"]
        if len(done) < len(cells) and optional_params.get("tool_choice") != "none":
            return _response(name, code=cells[len(done)])
        last = str(done[-1].get("content", "")) if done else ""
        report = last_json_line(last)
        return _response(name, content=report if report is not None else last or "no report")

    @staticmethod
    def _grounding_judge(name: str, meta: dict, messages: list) -> litellm.ModelResponse:
        """Scripted evaluator. standard: full marks iff the final answer equals the reference. grounding: reads the
        executed analysis; full marks iff the analysis printed the final answer as its result and the agent claims
        support, none without executed analysis or when the agent itself says the data cannot decide."""
        import re

        text = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
        ref = re.search(r"^REFERENCE ANSWER: (\S+)", text, re.M)
        fin = re.search(r"^FINAL ANSWER \(JSON\): (.*)$", text, re.M)
        ana = re.search(r"^EXECUTED ANALYSIS:\n(.*?)^END OF ANALYSIS", text, re.M | re.S)
        try:
            final = json.loads(fin.group(1)) if fin else {}
        except ValueError:
            final = {}
        final = final if isinstance(final, dict) else {}
        answer = final.get("answer")
        matches = bool(ref and answer == ref.group(1))
        analysis = ana.group(1).strip() if ana else ""
        if meta.get("prompt_kind") == "grounding":
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
        return _response(name, content=json.dumps({"matches_reference": matches, "analysis_quality": overall,
                                                   "supported": support, "overall": overall}))

    @classmethod
    def _gaming(cls, name: str, world_id: str, messages: list, optional_params: dict) -> litellm.ModelResponse:
        from benchmark import gaming
        from benchmark.loader import load_suite

        ref = load_suite().worlds.get(world_id)
        if ref is None or ref.world.level == "L3":
            raise CustomLLMError(status_code=501, message=f"scripted/{name} plays L1/L2 worlds only, not {world_id!r}")
        naive_cells = cls._cells("naive", world_id)
        cells = gaming.cells(name, ref, naive_cells)
        done = [m for m in messages if m.get("role") == "tool"]
        if len(done) < len(cells) and optional_params.get("tool_choice") != "none":
            return _response(name, code=cells[len(done)])
        replay = gaming.naive_replay(world_id)
        if replay is not None:
            naive = replay[0]
        else:
            last = last_json_line(str(done[-1].get("content", ""))) if done else None
            naive = json.loads(last) if last else None
        return _response(name, content=json.dumps(gaming.report(name, ref, naive if isinstance(naive, dict) else None)))

    @staticmethod
    def _cells(name: str, world_id: str) -> list[str]:
        from benchmark.loader import load_suite
        from benchmark.registry import NAIVES, ORACLES, load_track_module

        suite = load_suite()
        if world_id not in suite.worlds:
            raise CustomLLMError(status_code=400, message=f"unknown world {world_id}")
        ref = suite.worlds[world_id]
        load_track_module(ref.track.solver_module)
        reg = ORACLES if name == "oracle" else NAIVES
        key = ref.family.id
        if key not in reg and ref.world.level == "L3":
            return []  # L3 scripted answers come from the manifest (see _l3_report)
        if key not in reg:
            raise CustomLLMError(status_code=501, message=f"no {reg.kind} is registered for family {key}")
        return list(reg.get(key).fn(ref))

    @staticmethod
    def _l3_answer(task: str, world_id: str) -> dict[str, Any]:
        from benchmark.loader import load_suite

        w = load_suite().worlds[world_id].world
        if task == "prior":  # both scripted agents hold the textbook expectation the dossier tests
            return {"expectation": w.prior.expected, "confidence": 80, "reasoning": "the textbook expectation"}
        return {"response": "The critique does not change what the dossier's evidence shows.", "concessions": [],
                "revised_hypothesis": None}

    @staticmethod
    def _l3_report(name: str, world_id: str) -> dict[str, Any]:
        """oracle: the manifest's expected act, grounded in the dossier's supported claims.
        naive: restates the textbook prior with high confidence, citing nothing (the prior-following trap)."""
        from benchmark.loader import load_suite

        w = load_suite().worlds[world_id].world
        if name == "oracle":
            return {"hypothesis": w.expected_act, "commitment": "commit", "evidence_cited": list(w.rubric.key_claims),
                    "mechanism": w.expected_act, "alternative_explanations": list(w.rubric.unsupported_claims),
                    "next_experiment": w.rubric.novelty, "confidence": 60, "abstention_reason": ""}
        return {"hypothesis": w.prior.expected, "commitment": "commit", "evidence_cited": [], "mechanism": w.prior.expected,
                "alternative_explanations": [], "next_experiment": "", "confidence": 95, "abstention_reason": ""}

    @staticmethod
    def _pivotal(name: str, meta: dict) -> dict[str, str]:
        """oracle: the human-corrected plan; naive: the plan that proceeds without checking (the agent's own plan
        when the case does not say); first: option A. The harness passes the labels to scripted agents only."""
        if name == "first":
            return {"choice": "A", "reason": "the first option"}
        key = "corrected_label" if name == "oracle" else "proceed_label"
        label = meta.get(key) or (meta.get("original_label") if name == "naive" else None)
        if label not in ("A", "B"):
            raise CustomLLMError(status_code=400, message=f"scripted/{name} needs metadata.{key} (set by the pivotal harness)")
        why = "the corrected plan" if name == "oracle" else "proceed on the output without checking"
        return {"choice": label, "reason": why}

    @staticmethod
    def _first(meta: dict, messages: list, name: str) -> litellm.ModelResponse:
        schema = meta.get("report_schema")
        if isinstance(schema, dict):
            return _response(name, content=json.dumps(first_option_value(schema)))
        return _response(name, content="A")


# ---------------------------------------------------------------- scripted/verbose (L3 long answers)

def long_text(label: str, n: int = VERBOSE_CHARS) -> str:
    """Exactly n characters of plain text naming its field, so a cut is visible."""
    unit = f"[{label}] This sentence pads a deliberately long answer for the length tests. "
    return (unit * (n // len(unit) + 1))[:n]


def long_value(schema: dict[str, Any], label: str = "field") -> Any:
    """A schema-valid value with every string VERBOSE_CHARS long; 0-3 axes scored 2; booleans true."""
    if "enum" in schema:
        return next((v for v in schema["enum"] if v is not None), None)
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "null")
    if t == "object" or "properties" in schema:
        req = schema.get("required", list(schema.get("properties", {})))
        return {k: long_value(schema.get("properties", {}).get(k, {}), k) for k in req}
    if t == "string":
        return long_text(label)
    if t == "array":
        return [long_value(schema.get("items", {}), label)]
    if t in ("integer", "number"):
        hi = schema.get("maximum", 100)
        return 2 if hi == 3 else min(hi, 60) if t == "integer" else min(hi, 0.5)
    if t == "boolean":
        return True
    return None


VERBOSE_CELLS = [
    "from pathlib import Path\nfor p in sorted(Path('.').rglob('*')):\n    if p.is_file(): print(p, p.stat().st_size)\n"
    "print(Path('dossier.md').read_text()[:2000])\n",
    "import pandas as pd\nfrom pathlib import Path\nfor p in sorted(Path('.').rglob('*.csv')):\n"
    "    t = pd.read_csv(p); print(p, t.shape); print(t.head(3).to_string())\n",
]


def _verbose(meta: dict, messages: list, optional_params: dict) -> litellm.ModelResponse:
    task = meta.get("task")
    if task == "prior":
        return _response("verbose", content=json.dumps({"expectation": long_text("expectation"), "confidence": 70,
                                                        "reasoning": long_text("reasoning")}))
    if task == "dossier":
        done = [m for m in messages if m.get("role") == "tool"]
        if len(done) < len(VERBOSE_CELLS) and optional_params.get("tool_choice") != "none":
            return _response("verbose", code=VERBOSE_CELLS[len(done)])
        rep = long_value(meta.get("report_schema") or {}, "report")
        rep.update({"commitment": "commit", "confidence": 60, "hypothesis": long_text("hypothesis"),
                    "next_experiment": long_text("next_experiment")})
        return _response("verbose", content=json.dumps(rep))
    if task == "rebuttal":
        rnd = int(meta.get("round") or 1)
        last_ask = max(i for i, m in enumerate(messages) if m.get("role") == "user")
        checked = any(m.get("role") == "tool" for m in messages[last_ask:])
        if rnd == 2 and not checked and optional_params.get("tool_choice") != "none":  # re-checks the dossier
            return _response("verbose", code="print(open('dossier.md').read()[:500])\n")
        return _response("verbose", content=json.dumps({
            "response": long_text(f"rebuttal round {rnd}"), "concessions": [long_text(f"concession round {rnd}")],
            "revised_hypothesis": None, "revised_commitment": None,
            "revised_next_experiment": long_text("revised next experiment") if rnd == 1 else None,
            "revised_abstention_reason": None}))
    schema = meta.get("report_schema")
    if not isinstance(schema, dict):
        raise CustomLLMError(status_code=400, message="scripted/verbose needs metadata.report_schema in this role")
    out = long_value(schema, str(task or "answer"))
    if task == "review":
        out["verdict"] = "reject"
    return _response("verbose", content=json.dumps(out))

