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


MAX_REPORT_CHARS = 2_000_000  # a report is a summary; its data go in work products
MAX_DEPTH = 32


def _depth(obj: Any, limit: int = MAX_DEPTH + 1) -> int:
    """Nesting depth of a parsed value, iteratively (a hostile report must not exhaust the stack)."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        cur, d = stack.pop()
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        if isinstance(cur, dict):
            stack.extend((v, d + 1) for v in cur.values())
        elif isinstance(cur, list):
            stack.extend((v, d + 1) for v in cur)
    return deepest


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
        if len(text) > MAX_REPORT_CHARS:
            return ParsedReport(None, f"report is {len(text)} characters long; the limit is {MAX_REPORT_CHARS}")
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            return ParsedReport(None, f"report is not valid JSON ({exc.msg} at character {exc.pos})")
        except RecursionError:
            return ParsedReport(None, "report is nested too deeply to read")
    if _depth(obj) > MAX_DEPTH:
        return ParsedReport(None, f"report is nested deeper than {MAX_DEPTH} levels")
    if not isinstance(obj, dict):
        return ParsedReport(None, f"report must be a JSON object, not {type(obj).__name__}")
    errors = sorted(Draft202012Validator(schema).iter_errors(obj), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        where = ".".join(str(p) for p in e.absolute_path) or "<root>"
        return ParsedReport(None, f"report does not match the family schema at '{where}': {e.message}")
    return ParsedReport(obj, None)
