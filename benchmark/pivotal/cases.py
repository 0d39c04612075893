"""The pivotal case format: one JSON object per line (JSONL), validated by `PivotalCase`.

Choosing `corrected_plan` is always the right answer; for clean-control cases the corrected plan is the one that
proceeds (the original plan is an unnecessary detour), so "always pick the cautious plan" cannot score 100.
`proceeds`, `why`, `evidence` and `source_world` are never shown to the model.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from benchmark.errors import BenchmarkError

SCHEMA_VERSION = 1
CASES_DIR = Path(__file__).resolve().parent / "cases"
DEFAULT_CASES = CASES_DIR / "discern_pivotal_v1.jsonl"


class PivotalCase(BaseModel):
    """One pivotal decision. Shown to the model: `record` (project condition only), `original_plan`, `corrected_plan`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    id: str = Field(min_length=1, description="unique case id")
    project: str = Field(min_length=1, description="project the case comes from; the cluster of the cluster bootstrap")
    field: str = Field(min_length=1, description="scientific field, e.g. 'epigenomics (ChIP-seq)'")
    categories: list[str] = Field(min_length=1, description="judgment categories (a case may have several)")
    kind: Literal["challenged", "control"] = Field(
        description="challenged: proceeding on the output is wrong; control: proceeding is right")
    record: str = Field(min_length=1, description="the project record up to (not including) the decision")
    original_plan: str = Field(min_length=1, description="the plan the agent proposed")
    corrected_plan: str = Field(min_length=1, description="the plan a careful PI would pursue (the right answer)")
    why: str = Field(min_length=1, description="why the corrected plan is right (hidden from the model)")
    proceeds: Literal["original", "corrected"] | None = Field(
        None, description="which plan proceeds on the output without checking (hidden; drives scripted/naive)")
    evidence: list[str] = Field(default_factory=list, description="supporting notes, hidden from the model")
    source_world: str | None = Field(None, description="the world the case was derived from, if any")

    @field_validator("categories")
    @classmethod
    def _categories(cls, v: list[str]) -> list[str]:
        if any(not c.strip() for c in v):
            raise ValueError("categories must be non-empty strings")
        if len(set(v)) != len(v):
            raise ValueError("categories must not repeat")
        return v


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    fieldname = ".".join(str(p) for p in err["loc"]) or "<root>"
    if err["type"] == "missing":
        return f"field '{fieldname}' is required but missing"
    if err["type"] == "extra_forbidden":
        return f"field '{fieldname}' is not a known field (see benchmark/pivotal/README.md)"
    return f"field '{fieldname}': {err['msg'].removeprefix('Value error, ')}"


def parse_cases(text: str, source: str = "<cases>") -> list[PivotalCase]:
    """Parse JSONL text; the first bad line raises BenchmarkError naming the source, its line number and the reason."""
    cases: list[PivotalCase] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BenchmarkError(f"{source}:{lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(data, dict):
            raise BenchmarkError(f"{source}:{lineno}: expected a JSON object, got {type(data).__name__}")
        try:
            case = PivotalCase.model_validate(data)
        except ValidationError as exc:
            raise BenchmarkError(f"{source}:{lineno}: {_first_error(exc)}") from None
        if case.id in seen:
            raise BenchmarkError(f"{source}:{lineno}: case id '{case.id}' is also used on line {seen[case.id]}")
        seen[case.id] = lineno
        cases.append(case)
    if not cases:
        raise BenchmarkError(f"{source}: holds no cases (one JSON object per line expected)")
    return cases


def load_cases(path: Path | str | None = None) -> list[PivotalCase]:
    p = Path(path) if path else DEFAULT_CASES
    if not p.exists():
        raise BenchmarkError(f"case file {p} does not exist")
    return parse_cases(p.read_text(encoding="utf-8"), str(p))


def cases_sha256(path: Path | str | None = None) -> str:
    return hashlib.sha256(Path(path or DEFAULT_CASES).read_bytes()).hexdigest()


def render_jsonl(cases: list[PivotalCase]) -> bytes:
    """Canonical bytes of a case file: one compact JSON object per line, fields in schema order, sorted by id."""
    return "".join(c.model_dump_json() + "\n" for c in sorted(cases, key=lambda c: c.id)).encode("utf-8")
