"""Scripted agents behind the model-provider boundary, so they exercise exactly the path a real model takes.

As inspect_ai's mock model, the provider gets what it needs from the call's metadata and decides: every protocol
attaches the same neutral context to every model's calls (the world's id and manifest, the task or L3 role with
its report_schema, a pivotal case id and option order, a grounding item id), and `plans.plan` turns it into the
`Script` (benchmark.models.scripted.script) this provider replays, the next cell per tool result in the
conversation, then the final answer. No protocol asks what a scripted agent does, and real models never get a
plan: the context is metadata, never prompt text, and holds no answer. The name after `scripted/` names the agent
(plans.AGENTS). A test may also hand a ready `Script` as `metadata["script"]`: it is replayed as given.

The package: `plans` (what each agent does in each protocol), `gaming` and `layout` (the gaming agents' rules),
`script` (the Script data the provider replays). It imports no protocol (tests/test_layering.py); the suite
(manifests, registry, goldens, grounding items, pivotal cases) is read lazily, at the first scripted call.

Two agents answer without a plan, from what every call carries:
scripted/first   picks the first option wherever one is offered (enum values of metadata.report_schema; "A" without
                 a schema): a position-bias control (a pivotal case: option A, from its plan).
scripted/verbose L3 only, a long-answer model: every free-text field it writes (prior, report, critique, rebuttal,
                 judge and verifier reasons) is VERBOSE_CHARS characters; as the agent it reads the dossier in two
                 cells and answers at step 3; its first rebuttal revises the next experiment, its second re-reads the
                 dossier in a cell first. In a grading role it scores every 0-3 axis 2 (see `_verbose`).
Scripted agents are not language models: they report zero tokens.
"""
from __future__ import annotations

import json
import re
import threading
from typing import Any

from pydantic import ValidationError

from benchmark.models.reply import ProviderError, Reply

from benchmark.models.scripted.script import Script, first_option_value, last_json_line  # noqa: F401 - re-exported

GENERIC = ("first", "verbose")  # answer without a script
VERBOSE_CHARS = 2000


def _response(model: str, content: str | None = None, code: str | None = None) -> Reply:
    return Reply.turn(f"scripted/{model}", "scripted", content=content, code=code)


WHOLE_OUTPUT = re.compile(r"truncated; the whole stdout is in (/tmp/cell_\d+_stdout\.txt)\]")
READ_BACK_CHARS = 3000  # one piece of a cut output, printed as a JSON string (escapes at most double it: under the cap)


def replay(name: str, script: Script, messages: list, optional_params: dict) -> Reply:
    """One call of a handed-over script: the next cell (counting the tool results in the conversation), else the
    final answer. When the last cell's printed report was cut by the sandbox's output cap, the agent reads the whole
    output back from the file the cut names, a piece per cell, as a person pages a long log: a report is never
    built from a cut (the marker would land in it)."""
    if script.error:
        raise ProviderError(status_code=501, message=script.error)
    done = [m for m in messages if m.get("role") == "tool"]
    can_run = optional_params.get("tool_choice") != "none"
    n = len(script.cells)
    if len(done) < n and can_run:
        return _response(name, code=script.cells[len(done)])
    last = str(done[-1].get("content", "")) if done else None
    if script.answer.from_last_cell and n and len(done) >= n:
        cut = WHOLE_OUTPUT.search(str(done[n - 1].get("content", "")))
        if cut:
            pieces = []
            for m in done[n:]:
                try:
                    piece = json.loads(str(m.get("content", "")).strip())
                except ValueError:
                    piece = None
                if not isinstance(piece, str):
                    pieces = None  # the read-back failed: answer from what was shown
                    break
                pieces.append(piece)
            if pieces is not None:
                whole = "".join(pieces)
                finished = bool(pieces) and len(pieces[-1]) < READ_BACK_CHARS
                if not finished and can_run:
                    at = len(whole)
                    return _response(name, code=f"print(__import__('json').dumps(open({cut.group(1)!r}).read()"
                                                 f"[{at}:{at + READ_BACK_CHARS}]))")
                if finished:
                    last = whole
    return _response(name, content=script.answer.render(last))


class ScriptedLLM:
    def __init__(self) -> None:
        self._plans: dict[str, Script] = {}
        self._lock = threading.Lock()

    def complete(self, model: str, messages: list, optional_params: dict, metadata: dict) -> Reply:
        name = model.split("/")[-1]
        meta = metadata or {}
        raw = meta.get("script")
        if raw is not None:  # a ready script handed over (tests): replayed as given
            try:
                script = raw if isinstance(raw, Script) else Script.model_validate(raw)
            except ValidationError as exc:
                raise ProviderError(status_code=400, message=f"metadata.script is not a valid Script: {exc}") from exc
            return replay(name, script, messages, optional_params)
        script = self._plan(name, meta, messages)
        if script is not None:
            return replay(name, script, messages, optional_params)
        if name == "first":
            return self._first(meta, name)
        return _verbose(meta, messages, optional_params)  # L3 long answers (end of module)

    def _plan(self, name: str, meta: dict, messages: list) -> Script | None:
        """The agent's plan for this conversation, built from the call's context at the conversation's first call
        (no answer of the model in it yet) and kept for its later calls (the cells of one episode come from one
        plan, as when the harness built it once per episode)."""
        from benchmark.models.scripted.plans import plan

        key = json.dumps([name, {k: v for k, v in meta.items() if k != "report_schema"},
                          meta.get("report_schema")], sort_keys=True, default=str)
        fresh = not any(m.get("role") == "assistant" for m in messages)
        with self._lock:
            if not fresh and key in self._plans:
                return self._plans[key]
        script = plan(name, meta, messages)
        if script is not None:
            with self._lock:
                self._plans.pop(key, None)
                self._plans[key] = script
                while len(self._plans) > 256:  # the oldest conversations' plans go first
                    self._plans.pop(next(iter(self._plans)))
        return script

    @staticmethod
    def _first(meta: dict, name: str) -> Reply:
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


def _verbose(meta: dict, messages: list, optional_params: dict) -> Reply:
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
        raise ProviderError(status_code=400, message="scripted/verbose needs metadata.report_schema in this role")
    out = long_value(schema, str(task or "answer"))
    if task == "review":
        out["verdict"] = "reject"
    return _response("verbose", content=json.dumps(out))

