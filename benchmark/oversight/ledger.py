"""Adjudication ledgers: human rulings on grade/verifier discrepancies, kept as YAML under `ledgers/` and reviewed
like code (SPEC R8, seed 001 J.2).

One file per evaluation campaign: `ledgers/<campaign>.yaml` with `kind: adjudication`. Entries are append-only:
a later ruling on the same (run, world, replicate, component) must name the entry it `supersedes`, otherwise the
ledger contradicts itself and `validate` fails. Rulings are applied at aggregation time (`apply_rulings`) and never
change a run's records. Rulings recovered from published totals rather than recorded by a human live in a
separate file type, `kind: reconstruction`, and are always labelled as such.

Components: `score` (the world score, 0-100), `state` (an L1 state name), an L2 component `A`/`I`/`M`/`C` (0-1),
or for an L3 dossier a judged axis `D`/`Q`/`N` (0-3, as the judge scores them) or the prior gate `eligible`
("eligible" or "ineligible").
"""
from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from benchmark.suite.canonical import _atomic_write
from benchmark.errors import BenchmarkError, ManifestError
from benchmark.suite.loader import REPO_ROOT, _line_of, read_yaml, validate

LEDGER_ROOT = REPO_ROOT / "ledgers"
Component = Literal["score", "state", "A", "I", "M", "C", "D", "Q", "N", "eligible"]
COMPONENTS = ("score", "state", "A", "I", "M", "C", "D", "Q", "N", "eligible")
L3_AXES = ("D", "Q", "N")
GATE_VALUES = ("eligible", "ineligible")
# Which components a world of each level has (the level is the second part of a world id: track.L1.family.world).
LEVEL_COMPONENTS = {"L1": ("score", "state"), "L2": ("score", "A", "I", "M", "C"), "L3": ("score", "D", "Q", "N", "eligible")}


def _no_bool(v, what: str):
    """YAML `true`/`false` would pass as 1/0: a ruling is a number or a state name, never a boolean."""
    if isinstance(v, bool):
        raise ValueError(f"{what} is the boolean {str(v).lower()}; write a number (score 0-100, A/I/M/C 0-1, "
                         "D/Q/N 0-3), an L1 state name, or for 'eligible' the word eligible or ineligible")
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        raise ValueError(f"{what} must be a finite number")
    return v


MAX_NAME_CHARS = 120  # an adjudicator's name or handle
MAX_REASON_CHARS = 4000  # a rationale: a paragraph with its evidence, not a document (a 10 MB reason was accepted)


class Ruling(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: int = Field(ge=1)
    run: str = Field(description="run id (the run directory's config.json run_id, or its folder name)")
    model: str
    world: str
    replicate: int = 0
    component: Component
    deterministic: Union[float, str] = Field(description="the deterministic grader's value")
    verifier: Union[float, str, None] = Field(None, description="the verifier's value")
    verifier_reason: str = Field("", max_length=MAX_REASON_CHARS)
    ruling: Union[float, str]
    adjudicator: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    date: dt.date
    rationale: str = Field(min_length=1, max_length=MAX_REASON_CHARS)
    supersedes: int | None = None

    @field_validator("adjudicator", "run", "model", "world")
    @classmethod
    def _one_line(cls, v: str, info) -> str:
        """A name is one line of plain text: a newline or control character in it would forge lines of the ledger's
        YAML, the leaderboard's tables or the web view."""
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in v):
            raise ValueError(f"'{info.field_name}' must be one line of text (no newline or control character)")
        if len(v) > MAX_NAME_CHARS and info.field_name == "adjudicator":
            raise ValueError(f"'adjudicator' is longer than {MAX_NAME_CHARS} characters")
        return v

    @field_validator("ruling", "deterministic", "verifier", mode="before")
    @classmethod
    def _not_bool(cls, v, info):
        return _no_bool(v, f"'{info.field_name}'")

    @field_validator("ruling")
    @classmethod
    def _range(cls, v, info):
        comp = info.data.get("component")
        if comp == "score" and not (isinstance(v, (int, float)) and 0 <= v <= 100):
            raise ValueError("a 'score' ruling is a number from 0 to 100")
        if comp in ("A", "I", "M", "C") and not (isinstance(v, (int, float)) and 0 <= v <= 1):
            raise ValueError(f"an L2 component ruling ({comp}) is a number from 0 to 1")
        if comp in L3_AXES and not (isinstance(v, (int, float)) and 0 <= v <= 3):
            raise ValueError(f"an L3 axis ruling ({comp}) is a number from 0 to 3, as the judge scores it")
        if comp == "eligible" and v not in GATE_VALUES:
            raise ValueError(f"an 'eligible' ruling (the prior gate) is 'eligible' or 'ineligible', not {v!r}")
        if comp == "state":
            from graders.l1 import STATE_SCORES

            if v not in STATE_SCORES:
                raise ValueError(f"'{v}' is not an L1 state; use one of {', '.join(STATE_SCORES)}")
        return v

    @model_validator(mode="after")
    def _component_of_level(self) -> "Ruling":
        parts = self.world.split(".")
        level = parts[1] if len(parts) >= 2 else None
        allowed = LEVEL_COMPONENTS.get(level)
        if allowed is not None and self.component not in allowed:
            raise ValueError(f"@component@an {level} world has no component '{self.component}'; use one of {', '.join(allowed)}")
        return self

    def key(self) -> tuple[str, str, int, str]:
        return (self.run, self.world, self.replicate, self.component)


class Reconstruction(BaseModel):
    """A value recovered from an authoritative total, not a human note about a trajectory."""

    model_config = ConfigDict(extra="forbid")

    id: int = Field(ge=1)
    run: str
    model: str
    world: str
    replicate: int = 0
    component: Component
    value: Union[float, str]
    source: str = Field(min_length=1, description="the total or table this value was recovered from")
    date: dt.date


class Ledger(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["adjudication"]
    campaign: str
    description: str = ""
    entries: list[Ruling] = Field(default_factory=list)
    _source: str = PrivateAttr("")
    _lines: dict = PrivateAttr(default_factory=dict)

    def where(self, i: int) -> str:
        """'file:line' of entry i, for messages that span files."""
        line = self._lines.get(i)
        return f"{self._source}:{line}" if line else self._source


class ReconstructionLedger(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["reconstruction"]
    campaign: str
    description: str = Field(min_length=1, description="must say what was reconstructed and from which totals")
    entries: list[Reconstruction] = Field(default_factory=list)


def load_ledger(path: Path) -> Ledger | ReconstructionLedger:
    """Validate one ledger file; errors name the file, the YAML line, the field and the reason."""
    data, node = read_yaml(path)
    model = ReconstructionLedger if data.get("kind") == "reconstruction" else Ledger
    led = validate(model, data, path, node)
    seen: dict[int, int] = {}
    for i, e in enumerate(led.entries):
        if e.id in seen:
            raise ManifestError(path, f"entries.{i}.id", f"id {e.id} is already used by entry {seen[e.id]}; ids are unique and never reused", _line_of(node, ("entries", i, "id")))
        seen[e.id] = i
    if isinstance(led, Ledger):
        led._source = str(path)
        led._lines = {i: _line_of(node, ("entries", i)) for i in range(len(led.entries))}
        current: dict[tuple, Ruling] = {}
        for i, e in enumerate(led.entries):
            prev = current.get(e.key())
            if prev is not None and e.supersedes != prev.id and e.ruling != prev.ruling:
                raise ManifestError(path, f"entries.{i}", f"ruling {e.id} contradicts ruling {prev.id} on the same run, world, replicate and component; add 'supersedes: {prev.id}' if it replaces it", _line_of(node, ("entries", i)))
            if e.supersedes is not None and e.supersedes not in seen:
                raise ManifestError(path, f"entries.{i}.supersedes", f"entry {e.supersedes} does not exist", _line_of(node, ("entries", i, "supersedes")))
            current[e.key()] = e
    return led


def ledger_paths(root: Path = LEDGER_ROOT) -> list[Path]:
    return sorted(Path(root).glob("*.yaml"))


def cross_file_contradictions(ledgers: list[Ledger]) -> list[str]:
    """Rulings in different files on the same (run, world, replicate, component) with different values: the score
    would depend on file order, so each is a problem naming both files and lines. (`supersedes` works within a
    file; ids are per file.)"""
    first: dict[tuple, tuple[Ledger, int, Ruling]] = {}
    problems = []
    for led in ledgers:
        latest: dict[tuple, tuple[int, Ruling]] = {}
        for i, e in enumerate(led.entries):
            latest[e.key()] = (i, e)  # within a file the last ruling (superseding the others) is in force
        for key, (i, e) in latest.items():
            if key in first and first[key][0] is not led:
                led0, i0, e0 = first[key]
                if e0.ruling != e.ruling:
                    problems.append(f"{led.where(i)}: ruling {e.id} ({e.ruling!r}) contradicts ruling {e0.id} "
                                    f"({e0.ruling!r}) at {led0.where(i0)} on run {e.run}, world {e.world}, replicate "
                                    f"{e.replicate}, component {e.component}; keep one ruling (in one file, with "
                                    "'supersedes' if it replaces another)")
            else:
                first.setdefault(key, (led, i, e))
    return problems


def effective_rulings(ledgers: list[Ledger]) -> dict[tuple[str, str, int, str], Ruling]:
    """The ruling in force for each (run, world, replicate, component); files that contradict each other are an
    error (the result must not depend on file order)."""
    problems = cross_file_contradictions(ledgers)
    if problems:
        more = f" (and {len(problems) - 1} more; see `python -m benchmark ledger validate`)" if len(problems) > 1 else ""
        raise BenchmarkError(problems[0] + more)
    out: dict[tuple, Ruling] = {}
    for led in ledgers:
        for e in led.entries:
            out[e.key()] = e
    return out


def ledgers_version(root: Path) -> str:
    """A fingerprint of every ledger file in a folder (names and bytes): a page rendered from one version may only
    record a ruling while the folder still has that version, so a concurrent change is refused, never overwritten."""
    h = hashlib.sha256()
    root = Path(root)
    for f in sorted(root.glob("*.yaml")) if root.is_dir() else []:
        h.update(f.name.encode() + b"\0" + hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


@contextmanager
def ledger_lock(root: Path) -> Iterator[None]:
    """An exclusive flock on the ledger folder itself (no lock file to commit) while one writer checks and appends:
    two rulings recorded at once (the web view and the CLI) are applied one after the other, never interleaved."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def append_rulings(path: Path, rulings: list[Ruling], campaign: str | None = None,
                   before_write: Callable[[], None] | None = None) -> list[Ruling]:
    """Append rulings atomically, all or none, under the folder's lock; the file is re-validated first and after, so
    nothing recorded can be lost. `before_write` runs under the lock (a conflict check that raises to refuse)."""
    path = Path(path)
    with ledger_lock(path.parent):
        if before_write is not None:
            before_write()
        if path.exists():
            led = load_ledger(path)
            if not isinstance(led, Ledger):
                raise BenchmarkError(f"{path} is a reconstruction ledger; rulings go to an adjudication ledger")
            data, _ = read_yaml(path)
        else:
            data = {"kind": "adjudication", "campaign": campaign or path.stem, "description": "", "entries": []}
        entries = data.setdefault("entries", []) or []
        out = []
        for r in rulings:
            r = r.model_copy(update={"id": max((e["id"] for e in entries), default=0) + 1})
            entries.append(r.model_dump(mode="json", exclude_none=True))
            out.append(r)
        data["entries"] = entries
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
        tmp = path.with_name(f".{path.name}.check")
        tmp.write_text(text)
        try:
            load_ledger(tmp)  # a ruling that would make the file invalid (a contradiction) is refused here
        finally:
            tmp.unlink(missing_ok=True)
        _atomic_write(path, text.encode())
    return out


def append_ruling(path: Path, ruling: Ruling, campaign: str | None = None) -> Ruling:
    """Append one ruling atomically (see append_rulings)."""
    return append_rulings(path, [ruling], campaign)[0]
