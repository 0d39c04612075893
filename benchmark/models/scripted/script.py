"""What a scripted agent does on a call: the plan the scripted provider replays (`Script`).

The scripted provider (benchmark.models.scripted) replays a `Script`: the plan it builds itself from the call's
context (benchmark.models.scripted.plans), or one a test hands over as `metadata["script"]`. A script is data:

  cells   code for the run_python tool, one per model call: the call that sees k tool results in the conversation
          sends cell k, until the cells are spent or the harness forbids tools (tool_choice "none");
  answer  the final reply, either literal `content` or, with `from_last_cell`, the last JSON line the last cell
          printed (the cell's whole output when it printed none; "no report" without a cell). `edits` turn that
          line into the final JSON: a few plain operations (keep fields, set, extend, append text) whose values the
          protocol supplies, so a strategy that builds on what its analysis printed stays data;
  error   the protocol has no behaviour for this agent here: the provider raises it, naming why.
"""
from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Pick(BaseModel):
    """Keep only these fields, in this order; a missing one takes the default given."""

    model_config = ConfigDict(extra="forbid")
    op: Literal["pick"] = "pick"
    keys: dict[str, Any]


class Set(BaseModel):
    """Set these top-level fields (an existing field keeps its place)."""

    model_config = ConfigDict(extra="forbid")
    op: Literal["set"] = "set"
    values: dict[str, Any]


class Extend(BaseModel):
    """Append items to a list field (a missing or empty field starts empty)."""

    model_config = ConfigDict(extra="forbid")
    op: Literal["extend"] = "extend"
    key: str
    items: list[Any]


class Suffix(BaseModel):
    """Append text to one field (written as text), optionally stripping the result."""

    model_config = ConfigDict(extra="forbid")
    op: Literal["suffix"] = "suffix"
    key: str
    text: str
    strip: bool = False


class SuffixText(BaseModel):
    """Append `text` to every top-level string field whose name does not end with `skip_ending`, and `nested_text`
    to every string one level down (in an object field) whose name does not contain `nested_skip`."""

    model_config = ConfigDict(extra="forbid")
    op: Literal["suffix_text"] = "suffix_text"
    text: str
    nested_text: str
    skip_ending: str = "_path"
    nested_skip: str = "path"


class SuffixItems(BaseModel):
    """Append text to one string field of every object in a list field, as a new sentence (a full stop is added to
    text that does not end with one)."""

    model_config = ConfigDict(extra="forbid")
    op: Literal["suffix_items"] = "suffix_items"
    key: str
    field: str
    text: str


class SetItems(BaseModel):
    """Set these fields on every object in a list field."""

    model_config = ConfigDict(extra="forbid")
    op: Literal["set_items"] = "set_items"
    key: str
    values: dict[str, Any]


Edit = Annotated[Pick | Set | Extend | Suffix | SuffixText | SuffixItems | SetItems, Field(discriminator="op")]


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: str | None = None
    from_last_cell: bool = False
    edits: list[Edit] | None = None  # with from_last_cell: edit the printed JSON object ({} when none), reply its JSON

    def render(self, last_output: str | None) -> str:
        """The final reply, given the output of the last cell run (None when no cell ran)."""
        if not self.from_last_cell:
            return self.content or ""
        last = last_output or ""
        line = last_json_line(last)
        if self.edits is None:
            return line if line is not None else last or "no report"
        obj = json.loads(line) if line is not None else {}
        return json.dumps(apply_edits(self.edits, obj if isinstance(obj, dict) else {}))


class Script(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cells: list[str] = Field(default_factory=list)
    answer: Answer = Field(default_factory=Answer)
    error: str | None = None

    def dump(self) -> dict[str, Any]:
        """The plain-data form (as a test hands it over in `metadata["script"]`)."""
        return self.model_dump(mode="json")


def reply(content: str) -> Script:
    """A script that answers at once with literal content."""
    return Script(answer=Answer(content=content))


def reply_json(obj: Any) -> Script:
    return reply(json.dumps(obj))


def run_cells(cells: list[str], edits: list | None = None) -> Script:
    """Run the cells, then report the last JSON line the last one printed (edited when edits are given)."""
    return Script(cells=list(cells), answer=Answer(from_last_cell=True, edits=edits))


def refuse(message: str) -> Script:
    return Script(error=message)


def apply_edits(edits: list, obj: dict[str, Any] | None) -> dict[str, Any]:
    """Apply edits (models or their dict form) to a copy of obj (None counts as {})."""
    out: dict[str, Any] = dict(obj) if isinstance(obj, dict) else {}
    for e in edits:
        e = e if isinstance(e, BaseModel) else _EDIT.validate_python(e)
        if isinstance(e, Pick):
            out = {k: out.get(k, json.loads(json.dumps(d))) for k, d in e.keys.items()}
        elif isinstance(e, Set):
            out.update(json.loads(json.dumps(e.values)))
        elif isinstance(e, Extend):
            out[e.key] = list(out.get(e.key) or []) + json.loads(json.dumps(e.items))
        elif isinstance(e, Suffix):
            v = f"{out.get(e.key, '')}{e.text}"
            out[e.key] = v.strip() if e.strip else v
        elif isinstance(e, SuffixItems):
            items = out.get(e.key) if isinstance(out.get(e.key), list) else []
            out[e.key] = [{**it, e.field: _sentence(str(it.get(e.field) or "")) + e.text} if isinstance(it, dict) else it
                          for it in items]
        elif isinstance(e, SetItems):
            items = out.get(e.key) if isinstance(out.get(e.key), list) else []
            out[e.key] = [{**it, **json.loads(json.dumps(e.values))} if isinstance(it, dict) else it for it in items]
        elif isinstance(e, SuffixText):
            for k, v in list(out.items()):
                if isinstance(v, str) and not k.endswith(e.skip_ending):
                    out[k] = f"{v}{e.text}"
                if isinstance(v, dict):
                    out[k] = {kk: (f"{vv}{e.nested_text}" if isinstance(vv, str) and e.nested_skip not in kk else vv)
                              for kk, vv in v.items()}
    return out


def _sentence(text: str) -> str:
    """Text that ends a sentence, so what is appended starts a new one."""
    text = text.rstrip()
    return text if not text or text[-1] in ".!?" else text + "."


def _edit_adapter():
    from pydantic import TypeAdapter

    return TypeAdapter(Edit)


_EDIT = _edit_adapter()


# ---------------------------------------------------------------- generic helpers (no protocol knowledge)

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
