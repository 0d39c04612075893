"""Run pivotal cases against a model: both option orders, conditions, effort settings, reconsideration rounds.

The run directory follows the run store's style:
    DIR/config.json     model, case file and its sha256, conditions, efforts, rounds, seed (a resume must match)
    DIR/pivotal.jsonl   one PivotalRecord per (case, condition, order, effort, round), appended with fsync
A killed run continues with --resume: finished keys are skipped (model errors are retried), and a reconsideration
round rebuilds its conversation from the stored answers of the earlier rounds.
"""
from __future__ import annotations

import json
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from benchmark.errors import BenchmarkError
from benchmark.pivotal import CONDITIONS, EFFORTS, ORDERS  # noqa: F401 - re-exported
from benchmark.pivotal.cases import DEFAULT_CASES, PivotalCase, cases_sha256, load_cases
from benchmark.run.records import CallRecord

HARNESS_VERSION = "pivotal-1"

SYSTEM_PROMPT = ("You are the principal investigator of a research project carried out by an AI research agent. At a "
                 "pivotal moment the agent must choose its next step between two plans. Decide which plan the project "
                 "should pursue.")
ANSWER_FORMAT = 'Reply with ONLY this JSON: {"choice": "A" or "B", "reason": "one or two sentences"}'
PROJECT_PROMPT = ("PROJECT RECORD (everything known before this decision):\n{record}\n\nPLAN A: {a}\n\nPLAN B: {b}\n\n"
                  "Which plan should the project pursue? " + ANSWER_FORMAT)
OPTIONS_PROMPT = ("Two plans are proposed for the next step of a research project.\n\nPLAN A: {a}\n\nPLAN B: {b}\n\n"
                  "Which plan should the project pursue? " + ANSWER_FORMAT)
RECONSIDER_PROMPT = ("Please reconsider your decision. Review both plans again; you may keep your choice or change it. "
                     + ANSWER_FORMAT)
ANSWER_SCHEMA = {"type": "object", "required": ["choice", "reason"], "additionalProperties": False,
                 "properties": {"choice": {"enum": ["A", "B"]}, "reason": {"type": "string", "maxLength": 400}}}


class PivotalRecord(BaseModel):
    """One answer: a case in one condition, option order, effort setting and round (0 = initial answer)."""

    run_id: str = ""
    case_id: str
    project: str
    field: str
    categories: list[str]
    kind: Literal["challenged", "control"]
    model: str
    condition: Literal["project", "options-only"]
    order: Literal["original_first", "corrected_first"]
    effort: str
    effort_applied: bool = Field(description="True when the effort setting was passed to the provider")
    effort_note: str = ""
    round: int = Field(ge=0, description="0: initial answer; r: after r neutral requests to reconsider")
    seed: int
    correct_label: Literal["A", "B"]
    choice: Literal["A", "B"] | None = None
    parsed: bool
    correct: bool = Field(description="chose the corrected plan; unparsed and failed answers are wrong")
    previous_correct: bool | None = None
    transition: Literal["repair", "new_error", "kept_correct", "kept_wrong"] | None = None
    status: Literal["answered", "model_error", "refused", "no_previous_answer"]
    error: str | None = None
    answer_raw: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    calls: int = 0
    wall_s: float = 0.0
    call: CallRecord | None = None
    harness_version: str = HARNESS_VERSION


def record_key(case_id: str, condition: str, order: str, effort: str, round_: int) -> str:
    return f"{case_id}|{condition}|{order}|{effort}|r{round_}"


def _key(r: PivotalRecord) -> str:
    return record_key(r.case_id, r.condition, r.order, r.effort, r.round)


# ------------------------------------------------------------------ prompts and parsing

def labels(order: str) -> tuple[str, str]:
    """(label of the original plan, label of the corrected plan) in this option order."""
    return ("A", "B") if order == "original_first" else ("B", "A")


def build_messages(case: PivotalCase, condition: str, order: str) -> list[dict[str, str]]:
    plans = {"A": case.original_plan, "B": case.corrected_plan} if order == "original_first" else \
        {"A": case.corrected_plan, "B": case.original_plan}
    tpl = PROJECT_PROMPT if condition == "project" else OPTIONS_PROMPT
    user = tpl.replace("{record}", case.record).replace("{a}", plans["A"]).replace("{b}", plans["B"])
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def parse_choice(text: str | None) -> str | None:
    """'A' or 'B' from the answer, or None. Accepts the JSON object (also inside a code fence or after some text),
    a truncated JSON whose "choice" is complete, or a bare 'A' / 'Plan B'. Anything else is unparsed (= wrong)."""
    if not text or not text.strip():
        return None
    t = text.strip()
    candidates = [t] + _FENCE.findall(t) + re.findall(r"\{[^{}]*\}", t)
    for cand in reversed(candidates):
        try:
            d = json.loads(cand)
        except (json.JSONDecodeError, TypeError):
            continue
        if isinstance(d, dict):
            c = re.fullmatch(r"\s*(?:plan\s*)?([ab])\s*", str(d.get("choice", "")), re.I)
            if c:
                return c.group(1).upper()
    found = re.findall(r'"choice"\s*:\s*"\s*(?:plan\s*)?([AB])\s*"', t, re.I)
    if found:
        return found[-1].upper()
    bare = re.fullmatch(r"\W*(?:plan\s*)?([ab])\W*", t, re.I)
    return bare.group(1).upper() if bare else None


def effort_kwargs(model: str, effort: str) -> tuple[dict[str, Any], bool, str]:
    """What to pass for an effort setting, whether it is applied, and why not."""
    if effort == "default":
        return {}, False, "no effort requested (provider default)"
    if model.startswith(("local/", "scripted/")):
        return {}, False, "provider has no effort setting; requested value recorded only"
    try:
        import litellm

        ok = bool(litellm.supports_reasoning(model=model))
    except Exception as exc:  # noqa: BLE001 - an unknown model simply has no known support
        return {}, False, f"litellm could not tell whether the model supports reasoning effort ({type(exc).__name__})"
    if not ok:
        return {}, False, "litellm reports no reasoning-effort support for this model"
    return {"reasoning_effort": effort}, True, "passed as reasoning_effort"


# ------------------------------------------------------------------ store

class PivotalStore:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.path = self.root / "pivotal.jsonl"
        self._lock = threading.Lock()

    MUST_MATCH = ("model", "cases_sha256", "seed", "conditions", "efforts", "reconsider")

    def init(self, config: dict, resume: bool) -> None:
        from benchmark.run.store import init_run_dir

        init_run_dir(self.root, config, resume, self.MUST_MATCH)

    def config(self) -> dict:
        p = self.root / "config.json"
        if not p.exists():
            raise BenchmarkError(f"{self.root} is not a pivotal run (no config.json)")
        return json.loads(p.read_text())

    def records(self) -> list[PivotalRecord]:
        """Every complete line (the last record of a key wins); a line cut by a kill is ignored."""
        if not self.path.exists():
            return []
        out: dict[str, PivotalRecord] = {}
        for line in self.path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                rec = PivotalRecord.model_validate_json(line)
            except ValueError:
                continue
            out[_key(rec)] = rec
        return list(out.values())

    def append(self, rec: PivotalRecord) -> None:
        line = rec.model_dump_json() + "\n"
        with self._lock:
            needs_newline = self.path.exists() and self.path.stat().st_size > 0 and \
                not self.path.read_bytes().endswith(b"\n")
            with open(self.path, "ab") as fh:
                if needs_newline:
                    fh.write(b"\n")
                fh.write(line.encode())
                fh.flush()
                os.fsync(fh.fileno())


# ------------------------------------------------------------------ runner

@dataclass
class PivotalConfig:
    model: str
    out: Path
    cases: Path = DEFAULT_CASES
    conditions: list[str] = field(default_factory=lambda: list(CONDITIONS))
    efforts: list[str] = field(default_factory=lambda: ["default"])
    reconsider: int = 0
    seed: int = 0
    resume: bool = False
    concurrency: int = 1
    max_tokens: int = 8192
    case_ids: list[str] | None = None
    limit: int | None = None


def _answer(model: str, messages: list[dict], case: PivotalCase, order: str, round_: int, seed: int,
            extra: dict, max_tokens: int, cases: Path = DEFAULT_CASES) -> tuple[str | None, CallRecord, str]:
    from benchmark.run.agent import call_model, json_schema_format

    # the call's context, the same for every model (never a plan, never an answer)
    meta: dict[str, Any] = {"task": "pivotal", "case_id": case.id, "cases": str(cases), "order": order,
                            "round": round_, "report_schema": ANSWER_SCHEMA}
    resp, rec = call_model(model, messages, round_, role="agent", metadata=meta, seed=seed, max_tokens=max_tokens,
                           response_format=json_schema_format("pivotal_choice", ANSWER_SCHEMA), **extra)
    if resp is None:
        if extra and "UnsupportedParams" in (rec.error or ""):
            return None, rec, "unsupported"
        return None, rec, "refused" if rec.finish_reason == "content_filter" else "model_error"
    choice = resp.choices[0]
    if choice.finish_reason == "content_filter":
        return choice.message.content, rec, "refused"
    return choice.message.content or "", rec, "answered"


def run_chain(cfg: PivotalConfig, store: PivotalStore, done: dict[str, PivotalRecord], case: PivotalCase,
              condition: str, order: str, effort: str, run_id: str) -> list[PivotalRecord]:
    """The initial answer and its reconsideration rounds for one (case, condition, order, effort)."""
    messages = build_messages(case, condition, order)
    extra, applied, note = effort_kwargs(cfg.model, effort)
    _, corr = labels(order)
    new: list[PivotalRecord] = []
    prev: PivotalRecord | None = None
    for r in range(cfg.reconsider + 1):
        if r > 0:
            if prev is None or prev.status != "answered":
                break
            messages = messages + [{"role": "assistant", "content": prev.answer_raw or ""},
                                   {"role": "user", "content": RECONSIDER_PROMPT}]
        key = record_key(case.id, condition, order, effort, r)
        if key in done and done[key].status != "model_error":
            prev = done[key]
            continue
        t0 = time.monotonic()
        raw, call, status = _answer(cfg.model, messages, case, order, r, cfg.seed, extra, cfg.max_tokens, cfg.cases)
        rec_applied, rec_note = applied, note
        if status == "unsupported":  # the provider refused the effort parameter: ask again without it
            raw, call, status = _answer(cfg.model, messages, case, order, r, cfg.seed, {}, cfg.max_tokens, cfg.cases)
            rec_applied, rec_note = False, "provider rejected reasoning_effort; asked without it"
        choice = parse_choice(raw) if status == "answered" else None
        correct = choice == corr
        trans = None
        if prev is not None:
            trans = {(False, True): "repair", (True, False): "new_error", (True, True): "kept_correct",
                     (False, False): "kept_wrong"}[(prev.correct, correct)]
        rec = PivotalRecord(
            run_id=run_id, case_id=case.id, project=case.project, field=case.field, categories=list(case.categories),
            kind=case.kind, model=cfg.model, condition=condition, order=order, effort=effort,
            effort_applied=rec_applied, effort_note=rec_note, round=r, seed=cfg.seed, correct_label=corr, choice=choice,
            parsed=choice is not None, correct=correct, previous_correct=prev.correct if prev else None,
            transition=trans, status=status, error=call.error, answer_raw=raw, tokens_in=call.tokens_in,
            tokens_out=call.tokens_out, calls=1 + len(call.retries), wall_s=round(time.monotonic() - t0, 3), call=call)
        store.append(rec)
        new.append(rec)
        prev = rec
    return new


def execute(cfg: PivotalConfig, on_step=None) -> list[PivotalRecord]:
    for c in cfg.conditions:
        if c not in CONDITIONS:
            raise BenchmarkError(f"unknown condition '{c}'; use {' or '.join(CONDITIONS)}")
    for e in cfg.efforts:
        if e not in EFFORTS:
            raise BenchmarkError(f"unknown effort '{e}'; use one of {', '.join(EFFORTS)}")
    if cfg.reconsider < 0:
        raise BenchmarkError("--reconsider must be 0 or more")
    cases = load_cases(cfg.cases)
    if cfg.case_ids:
        known = {c.id for c in cases}
        missing = [i for i in cfg.case_ids if i not in known]
        if missing:
            raise BenchmarkError(f"no case '{missing[0]}' in {cfg.cases}")
        cases = [c for c in cases if c.id in set(cfg.case_ids)]
    if cfg.limit is not None:
        cases = cases[: cfg.limit]
    store = PivotalStore(cfg.out)
    config = {"kind": "pivotal", "model": cfg.model, "cases": str(cfg.cases), "cases_sha256": cases_sha256(cfg.cases),
              "case_ids": [c.id for c in cases], "conditions": list(cfg.conditions), "efforts": list(cfg.efforts),
              "orders": list(ORDERS), "reconsider": cfg.reconsider, "seed": cfg.seed, "max_tokens": cfg.max_tokens,
              "harness_version": HARNESS_VERSION, "run_id": Path(cfg.out).resolve().name,
              "started": time.strftime("%Y-%m-%d", time.gmtime())}
    from benchmark.run.store import HarnessLock

    lock = HarnessLock(Path(cfg.out))
    try:
        store.init(config, cfg.resume)
        run_id = str(store.config().get("run_id"))
        done = {_key(r): r for r in store.records()}
        chains = [(c, cond, order, eff) for c in cases for cond in cfg.conditions for order in ORDERS for eff in cfg.efforts]
        with ThreadPoolExecutor(max_workers=max(1, cfg.concurrency)) as pool:
            futs = {pool.submit(run_chain, cfg, store, done, *ch, run_id): ch for ch in chains}
            for fut in as_completed(futs):
                fut.result()
                if on_step:
                    c, cond, order, eff = futs[fut]
                    on_step(f"{c.id} {cond} {order} {eff}")
        return store.records()
    finally:
        lock.close()
