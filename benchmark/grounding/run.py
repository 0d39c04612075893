"""`grounding run`: the agent on every version of every item, in a fresh sandbox, with one prompt per item that is
identical across the original, null, withdrawal and flip versions (seed 000 Sec. 5, App. D). The no-data condition
gives the question and background only (an empty workspace).

Run directory (resumable, as `benchmark.run.store.RunStore`):
    DIR/config.json          model, replicates, seed, options (a resume must match)
    DIR/grounding.jsonl      one GroundingRecord per (item, condition, replicate), appended with fsync
    DIR/trajectories/*.json  full trajectories
    DIR/judge.jsonl          (after `grounding judge`) one JudgeRecord per (run key, judge, prompt)
"""
from __future__ import annotations

import json
import platform
import queue
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from benchmark.run.agent import HARNESS_VERSION, run_episode
from benchmark.oversight.audit import audit_cells
from benchmark.errors import BenchmarkError
from benchmark.grounding.build import agent_item, ensure_built, version_dir
from benchmark.grounding.items import CONDITIONS, INSUFFICIENT_TEXT, Item, select
from benchmark.models import is_offline
from benchmark.run.records import Trajectory
from benchmark.run.store import RunStore
from graders.grounding import key_match
from graders.registry import RegistryError
from graders.report import parse_report
from sandbox.bwrap import Limits, Sandbox
from sandbox.deferred import DeferredSandbox, wait_all

SUPPORT_LABELS = ("supports", "partially supports", "does not support", "cannot determine")
FLAG_LABELS = ("does not support", "cannot determine")
DEFAULT_BUDGET = 12

PROMPT = """Answer a multiple-choice question about the {assay} in your working directory.

Background: {background}

Question: {question}
{options}

Files: {files}

Decide from the data. Then reply with ONLY a JSON object:
{{"answer": "<one option letter>", "confidence": <0-100>, "data_support": "supports" | "partially supports" | "does not support" | "cannot determine", "evidence": "<one or two sentences: what in the data decides the answer>"}}
data_support states whether the data in your working directory support your answer."""

NODATA_PROMPT = """Answer a multiple-choice question. No data files are provided for this question.

Background: {background}

Question: {question}
{options}

Reply with ONLY a JSON object:
{{"answer": "<one option letter>", "confidence": <0-100>, "data_support": "supports" | "partially supports" | "does not support" | "cannot determine", "evidence": "<one or two sentences: what decides the answer>"}}
data_support states whether data available to you support your answer."""


def report_schema(options: dict[str, str]) -> dict:
    return {"type": "object", "required": ["answer", "confidence", "data_support", "evidence"],
            "properties": {"answer": {"enum": sorted(options)},
                           "confidence": {"type": "number", "minimum": 0, "maximum": 100},
                           "data_support": {"enum": list(SUPPORT_LABELS)},
                           "evidence": {"type": "string"}}}


def shown_options(item: Item, insufficient_option: bool) -> tuple[dict[str, str], str | None]:
    opts = dict(item.options)
    if not insufficient_option:
        return opts, None
    letter = chr(ord(max(opts)) + 1)
    opts[letter] = INSUFFICIENT_TEXT
    return opts, letter


def render_prompt(item: Item, options: dict[str, str], nodata: bool) -> str:
    text = "\n".join(f"{k}) {v}" for k, v in sorted(options.items()))
    if nodata:
        return NODATA_PROMPT.format(background=item.background, question=item.question, options=text)
    host = item.host
    return PROMPT.format(assay=host.assay, files=host.files, background=item.background, question=item.question,
                         options=text)


@dataclass(frozen=True)
class _Family:  # the attributes run_episode reads from a WorldRef's family
    id: str
    prompt: str
    report_schema: dict


@dataclass(frozen=True)
class _Ref:
    id: str
    family: _Family


class GroundingRecord(BaseModel):
    """One (item, condition, replicate) run. `supported` is s* of the version (None: undefined or no data)."""

    key: str
    item: str
    family: str
    track: str = ""
    condition: str
    anonymised: bool
    insufficient_option: bool
    model: str
    replicate: int
    seed: int
    status: str
    answer: str | None = None
    answer_text: str | None = None
    abstained: bool = False
    confidence: float | None = None
    data_support: str | None = None
    evidence: str | None = None
    flag: bool = False
    parse_error: str | None = None
    key_answer: str
    flip_answer: str
    supported: str | None
    key_match: float
    tokens_in: int = 0
    tokens_out: int = 0
    calls: int = 0
    failed_calls: int = 0
    code_cells: int = 0
    wall_s: float = 0.0
    violations: list[str] = Field(default_factory=list)
    audit_flags: list[str] = Field(default_factory=list)
    trajectory: str = ""
    harness_version: str = HARNESS_VERSION
    run_id: str = ""


def record_key(item_id: str, condition: str, replicate: int) -> str:
    return f"{item_id}.{condition}__r{replicate}"


class GroundingStore(RunStore):
    """RunStore's directory discipline (config, fsync'd appends, torn-line tolerance) for grounding records."""

    def __init__(self, root: Path):
        super().__init__(root)
        self.results_path = self.root / "grounding.jsonl"

    def results(self) -> list[GroundingRecord]:  # type: ignore[override]
        if not self.results_path.exists():
            return []
        out: dict[str, GroundingRecord] = {}
        for line in self.results_path.read_text().splitlines():
            if not line.strip():
                continue
            try:
                rec = GroundingRecord.model_validate_json(line)
            except ValueError:
                continue
            out[rec.key] = rec
        return list(out.values())

    def done_keys(self) -> set[str]:
        return {r.key for r in self.results()}


@dataclass
class GroundingConfig:
    model: str
    out: Path
    items: list[str] | None = None
    tracks: list[str] | None = None
    conditions: list[str] = field(default_factory=lambda: list(CONDITIONS))
    replicates: int = 1
    concurrency: int = 1
    resume: bool = False
    seed: int = 0
    anonymise: bool = False
    insufficient_option: bool = False
    budget: int = DEFAULT_BUDGET
    limits: Limits = field(default_factory=Limits)

    def describe(self) -> dict:
        d = asdict(self)
        d["out"] = str(self.out)
        d["limits"] = asdict(self.limits)
        return d


def parse_answer(raw: str | None, options: dict[str, str], schema: dict) -> tuple[dict[str, Any], str | None]:
    """The report's fields; a report off the schema keeps whatever fields are usable and names the problem."""
    p = parse_report(raw, schema)
    if p.ok:
        return dict(p.report), None
    obj: Any = None
    if isinstance(raw, str) and "{" in raw:
        try:
            obj = json.loads(raw[raw.index("{"): raw.rindex("}") + 1])
        except ValueError:
            obj = None
    out: dict[str, Any] = {}
    if isinstance(obj, dict):
        a = str(obj.get("answer", "")).strip().rstrip(")").upper()
        out["answer"] = a if a in options else None
        out["data_support"] = obj.get("data_support") if obj.get("data_support") in SUPPORT_LABELS else None
        try:
            out["confidence"] = max(0.0, min(100.0, float(obj.get("confidence"))))
        except (TypeError, ValueError):
            pass
        out["evidence"] = str(obj.get("evidence") or "")[:2000] or None
    return out, p.error


def run_one(item: Item, condition: str, replicate: int, cfg: GroundingConfig, store: GroundingStore,
            slot: int) -> GroundingRecord:
    seed = cfg.seed + replicate
    shown = agent_item(item, cfg.anonymise)
    options, ins = shown_options(shown, cfg.insufficient_option)
    schema = report_schema(options)
    ref = _Ref(id=f"grounding.{item.id}", family=_Family(id=f"grounding.{item.family}",
                                                          prompt=render_prompt(shown, options, condition == "nodata"),
                                                          report_schema=schema))
    key = record_key(item.id, condition, replicate)
    t0 = time.monotonic()
    messages, calls, cells, violations = [], [], [], []
    report_raw, status, error = None, "sandbox_error", None
    try:
        box = Sandbox(version_dir(item.id, condition, cfg.anonymise), cfg.limits, slot=slot, label="grounding task")
        with DeferredSandbox(box, eager=not is_offline(cfg.model)) as sb:  # started when it helps (sandbox/deferred.py)
            ep = run_episode(ref, cfg.model, sb, cfg.budget, seed=seed,
                             metadata={"task": "grounding", "item": item.id, "anonymised": cfg.anonymise,
                                       "insufficient_letter": ins, "nodata": condition == "nodata"})
            messages, calls, cells = ep.messages, ep.calls, ep.cells
            report_raw, status, error = ep.report_raw, ep.status, ep.error
            violations = list(sb.violations)
    except (BenchmarkError, RegistryError) as exc:
        error = str(exc)
    traj = Trajectory(world_id=f"{item.id}.{condition}", model=cfg.model, replicate=replicate, seed=seed,
                      harness_version=HARNESS_VERSION, messages=messages, calls=calls, cells=cells, violations=violations,
                      report_raw=report_raw, status=status, error=error, wall_s=round(time.monotonic() - t0, 3),
                      step_budget=cfg.budget)
    traj.audit = audit_cells(cells)
    fields, perr = parse_answer(report_raw, options, schema) if status == "graded" else ({}, error)
    if status == "graded" and perr:
        status = "noncompliant"
    traj.status = status
    rel = store.save_trajectory(traj)
    answer = fields.get("answer")
    abstained = ins is not None and answer == ins
    support = fields.get("data_support")
    ok = [c for c in calls if c.ok]
    rec = GroundingRecord(
        key=key, item=item.id, family=item.family, track=item.track, condition=condition, anonymised=cfg.anonymise,
        insufficient_option=cfg.insufficient_option, model=cfg.model, replicate=replicate, seed=seed, status=status,
        answer=answer, answer_text=options.get(answer) if answer else None, abstained=abstained,
        confidence=fields.get("confidence"), data_support=support, evidence=fields.get("evidence"),
        flag=bool(abstained or support in FLAG_LABELS), parse_error=perr, key_answer=item.key,
        flip_answer=item.flip_answer, supported=item.supported(condition), key_match=key_match(answer, item.key),
        tokens_in=sum(c.tokens_in for c in ok), tokens_out=sum(c.tokens_out for c in ok), calls=len(ok),
        failed_calls=len(calls) - len(ok), code_cells=len(cells), wall_s=traj.wall_s,
        violations=[v.kind for v in violations], audit_flags=sorted({f.kind for f in traj.audit}), trajectory=rel,
        run_id=store.run_id())
    store.append(rec)
    return rec


def execute(cfg: GroundingConfig) -> list[GroundingRecord]:
    from benchmark.run.progress import progress

    if cfg.replicates < 1 or cfg.concurrency < 1:
        raise BenchmarkError("--replicates and --concurrency must be at least 1")
    if not is_offline(cfg.model) and "/" not in cfg.model:
        raise BenchmarkError(f"model '{cfg.model}' is not a litellm model string (provider/name), e.g. local/smollm2")
    bad = [c for c in cfg.conditions if c not in CONDITIONS]
    if bad:
        raise BenchmarkError(f"unknown condition(s) {', '.join(bad)}; known: {', '.join(CONDITIONS)}")
    items = select(cfg.items, cfg.tracks)
    if cfg.anonymise:
        skipped = [i.id for i in items if not i.anonymisable]
        items = [i for i in items if i.anonymisable]
        if not items:
            raise BenchmarkError("--anonymise applies to items that name anonymisable entities only (the host's "
                                 f"anon_families, e.g. gene-named items); none selected ({', '.join(skipped)})")
    with progress("building and verifying versions", len(items)) as step:
        ensure_built(items, cfg.anonymise, on_step=step)
    store = GroundingStore(cfg.out)
    store.init({**cfg.describe(), "run_id": cfg.out.resolve().name, "harness_version": HARNESS_VERSION,
                "python": sys.version.split()[0], "platform": platform.platform(), "kind": "grounding",
                "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}, cfg.resume)
    try:
        old = store.config()
        for k in ("anonymise", "insufficient_option", "budget"):
            if old.get(k) != getattr(cfg, k):
                raise BenchmarkError(f"{cfg.out / 'config.json'}: field '{k}' is {old.get(k)!r} but this run asks for "
                                     f"{getattr(cfg, k)!r}; resume with the same settings or use another --out")
        done = store.done_keys()
        todo = [(i, c, k) for i in items for c in cfg.conditions for k in range(cfg.replicates)
                if record_key(i.id, c, k) not in done]
        slots: queue.Queue[int] = queue.Queue()
        for s in range(cfg.concurrency):
            slots.put(s)

        def work(item: Item, cond: str, rep: int) -> GroundingRecord:
            slot = slots.get()
            try:
                return run_one(item, cond, rep, cfg, store, slot)
            finally:
                slots.put(slot)

        with progress(f"grounding {cfg.model}", len(todo), finished=True) as step, ThreadPoolExecutor(cfg.concurrency) as pool:
            futs = {pool.submit(work, i, c, k): (i, c, k) for i, c, k in todo}
            for fut in as_completed(futs):
                i, c, k = futs[fut]
                fut.result()
                step(f"{i.id} {c} r{k}")
        wanted = {record_key(i.id, c, k) for i in items for c in cfg.conditions for k in range(cfg.replicates)}
        return [r for r in store.results() if r.key in wanted]
    finally:
        wait_all()  # sandboxes of episodes that ran no cell are torn down behind them: none outlives the run
        store.close()
