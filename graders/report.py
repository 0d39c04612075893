"""Parse and validate an agent's final report against its family's JSON Schema, never raising."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator


@dataclass(frozen=True)
class ParsedReport:
    report: dict[str, Any] | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.report is not None


_FENCE = re.compile(r"```(?:json)?\s*(\{.*\})\s*```", re.DOTALL)


def parse_report(raw: Any, schema: dict[str, Any]) -> ParsedReport:
    """Accept a dict or JSON text (optionally inside a ```json fence); validate it against `schema`."""
    if raw is None:
        return ParsedReport(None, "no report was returned")
    obj = raw
    if isinstance(raw, (bytes, str)):
        text = raw.decode() if isinstance(raw, bytes) else raw
        m = _FENCE.search(text)
        if m:
            text = m.group(1)
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            return ParsedReport(None, f"report is not valid JSON ({exc.msg} at character {exc.pos})")
    if not isinstance(obj, dict):
        return ParsedReport(None, f"report must be a JSON object, not {type(obj).__name__}")
    errors = sorted(Draft202012Validator(schema).iter_errors(obj), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        where = ".".join(str(p) for p in e.absolute_path) or "<root>"
        return ParsedReport(None, f"report does not match the family schema at '{where}': {e.message}")
    return ParsedReport(obj, None)
