"""Deterministic rubric checks: one report field against the golden, returning credit in [0, 1].

Shared by the L1 action checks and the L2 components. A check never raises on a bad report: a missing or
wrongly typed field earns 0 and says why, so grading a malformed report is an outcome, not a crash.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from benchmark.manifest import Check

_MISSING = object()


@dataclass(frozen=True)
class CheckResult:
    id: str
    credit: float
    detail: str
    component: str | None = None


def get_path(obj: Any, path: str) -> Any:
    """Dotted-path lookup (`domains.total_mb`, `issues.0.description`); `_MISSING` when absent."""
    cur = obj
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _MISSING
    return cur


def flatten_text(value: Any) -> str:
    """All strings, numbers and keys inside a value, joined: the text a `mentions` check searches."""
    if value is _MISSING or value is None:
        return ""
    if isinstance(value, dict):
        return " ".join(f"{k} {flatten_text(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return " ".join(flatten_text(v) for v in value)
    return str(value)


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or v is None or v is _MISSING:
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _within(got: float, want: float, rel: float | None, abs_: float | None) -> bool:
    ok = False
    if rel is not None:
        ok = ok or abs(got - want) <= rel * abs(want)
    if abs_ is not None:
        ok = ok or abs(got - want) <= abs_
    return ok


def _norm(v: Any) -> Any:
    return v.strip().lower() if isinstance(v, str) else v


def _sign(v: Any) -> int | None:
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("positive", "up", "increase", "increased", "higher", "activating", "+"):
            return 1
        if s in ("negative", "down", "decrease", "decreased", "lower", "repressive", "-"):
            return -1
        if s in ("none", "no relationship", "zero", "null", "0"):
            return 0
        return None
    x = _number(v)
    if x is None:
        return None
    return (x > 0) - (x < 0)


def run_check(check: Check, report: Any, golden: dict[str, Any]) -> CheckResult:
    c = check
    credit, detail = _evaluate(c, report, golden)
    return CheckResult(c.id, credit, detail, c.component)


def _evaluate(c: Check, report: Any, golden: dict[str, Any]) -> tuple[float, str]:
    if c.kind == "mentions":
        paths = c.fields or [c.field]
        text = " ".join(flatten_text(get_path(report, p)) for p in paths)
        hits = [p for p in c.patterns if re.search(p, text, flags=re.IGNORECASE)]
        ok = bool(hits) != c.negate
        return float(ok), (f"matched {hits[0]!r}" if hits else "no pattern matched") + (" (negated)" if c.negate else "")

    got = get_path(report, c.field) if c.field else _MISSING
    if c.kind == "present":
        ok = got is not _MISSING and got not in (None, "", [], {})
        return float(ok != c.negate), f"{c.field} {'present' if ok else 'absent'}"
    if got is _MISSING:
        return 0.0, f"report has no field {c.field}"

    want: Any = c.target
    if c.golden is not None:
        want = get_path(golden, c.golden)
        if want is _MISSING:
            return 0.0, f"golden has no key {c.golden} (rubric/golden mismatch)"

    if c.kind == "value":
        g, w = _number(got), _number(want)
        if g is None or w is None:
            return 0.0, f"{c.field}={got!r} is not a number"
        if _within(g, w, c.rel_tol, c.abs_tol):
            return 1.0, f"{g:g} within tolerance of {w:g}"
        if c.partial_tol is not None and _within(g, w, c.partial_tol, None):
            return 0.5, f"{g:g} within partial tolerance of {w:g}"
        return 0.0, f"{g:g} outside tolerance of {w:g}"

    if c.kind == "equals":
        ok = _norm(got) in {_norm(v) if not isinstance(v, (list, dict)) else str(v) for v in c.values}
        return float(ok != c.negate), f"{c.field}={got!r}" + (" in" if ok else " not in") + f" {c.values}"

    if c.kind == "overlap":
        if not isinstance(got, list) or not isinstance(want, list):
            return 0.0, f"{c.field} is not a list"
        reported = [_norm(str(x)) for x in got][: c.top_k] if c.top_k else [_norm(str(x)) for x in got]
        target = [_norm(str(x)) for x in want]
        if not target:
            return float(not reported), "golden list is empty"
        recall = len(set(reported) & set(target)) / len(set(target))
        credit = 1.0 if recall >= c.min_recall else recall / c.min_recall * 0.5 if c.min_recall > 0 else 0.0
        return round(credit, 6), f"recall {recall:.2f} (need {c.min_recall:.2f})"

    if c.kind == "sign":
        g, w = _sign(got), _sign(want)
        if g is None or w is None:
            return 0.0, f"cannot read a sign from {got!r}"
        return float(g == w), f"sign {g} vs golden {w}"

    return 0.0, f"unknown check kind {c.kind}"
