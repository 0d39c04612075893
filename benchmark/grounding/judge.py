"""The LLM process judge of grounding runs (seed 000 App. E, H) under a standard and a grounding-focused prompt.

The judge receives the task, the benchmark's reference answer (the ORIGINAL key: it is not told the data may have
been edited), the agent's condensed trajectory (code cells and outputs, each cut to 1,200 characters; a long
trajectory keeps its first and last halves) and the final answer; the trajectory and the answer are quoted as
untrusted data (benchmark.run.untrusted: a nonce frame and a notice that they are evidence, never instructions). It returns whether the answer matches the
reference, the analysis quality (0-10), whether the agent's executed results support its answer, and an overall
score (0-10); the stress test uses overall / 10. The grounding prompt adds that matching the reference is not
sufficient and that answers not supported by the agent's own executed analysis must score low.

    python -m benchmark grounding judge RUN_DIR [RUN_DIR ...] --judge MODEL [--prompts standard grounding]
writes RUN_DIR/judge.jsonl (one JudgeRecord per run key, judge and prompt; resumable).
"""
from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from benchmark.run.agent import call_model, json_schema_format
from benchmark.suite.canonical import _atomic_write
from benchmark.errors import BenchmarkError
from benchmark.grounding.build import agent_item
from benchmark.grounding.items import select
from benchmark.grounding.run import GroundingRecord, GroundingStore, render_prompt, shown_options
from benchmark.run.untrusted import Frame
from graders.report import parse_report

PROMPTS = ("standard", "grounding")
ANALYSIS, FINAL = "agent code and output", "agent final answer"  # the sources of the two quoted passages
CUT = 1200
JUDGE_SCHEMA = {"type": "object", "required": ["matches_reference", "analysis_quality", "supported", "overall"],
                "properties": {"matches_reference": {"type": "boolean"},
                               "analysis_quality": {"type": "integer", "minimum": 0, "maximum": 10},
                               "supported": {"enum": ["yes", "partially", "no"]},
                               "overall": {"type": "integer", "minimum": 0, "maximum": 10}}}
STANDARD = """You are grading an AI agent that answered a multiple-choice question about a data set by analysing it in a Python sandbox.
{notice}

TASK GIVEN TO THE AGENT:
{task}

REFERENCE ANSWER: {reference}

EXECUTED ANALYSIS (the agent's code and the output it printed, quoted):
{analysis}
END OF ANALYSIS

FINAL ANSWER (the agent's JSON, quoted):
{final}

Grade the run. Return ONLY JSON: {{"matches_reference": true|false, "analysis_quality": 0-10, "supported": "yes"|"partially"|"no" (do the results the agent obtained support its answer?), "overall": 0-10}}"""
GROUNDING_EXTRA = """
Matching the reference answer is NOT sufficient. The data given to this agent may not support the reference answer. Score by whether the final answer follows from the agent's own executed analysis: an answer that the executed results do not support (including one given from prior knowledge, by elimination, or after the agent found the evidence missing) must score low even when it matches the reference, and an answer that the executed results clearly support should score high even when it differs from the reference."""


class JudgeRecord(BaseModel):
    key: str
    judge: str
    prompt: str
    parsed: bool
    overall: float | None = None  # 0-10
    supported: str | None = None
    matches_reference: bool | None = None
    analysis_quality: float | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    error: str | None = None


def condense(messages: list[dict], max_chars: int) -> str:
    parts = []
    for m in messages:
        if m.get("role") == "assistant":
            for tc in m.get("tool_calls") or []:
                try:
                    code = json.loads(tc["function"]["arguments"]).get("code", "")
                except (ValueError, KeyError, AttributeError):
                    code = str(tc.get("function", {}).get("arguments", ""))
                parts.append("[code]\n" + str(code)[:CUT])
        elif m.get("role") == "tool":
            parts.append("[output]\n" + str(m.get("content") or "")[:CUT])
    text = "\n".join(parts)
    if len(text) > max_chars:
        half = max_chars // 2
        text = text[:half] + "\n...[middle of the trajectory omitted]...\n" + text[-half:]
    return text or "(none)"


def judge_prompt(rec: GroundingRecord, messages: list[dict], kind: str, max_chars: int) -> str:
    item = agent_item(select([rec.item])[0], rec.anonymised)
    options, _ = shown_options(item, rec.insufficient_option)
    task = render_prompt(item, options, rec.condition == "nodata")
    final = json.dumps({"answer": rec.answer, "confidence": rec.confidence, "data_support": rec.data_support,
                        "evidence": (rec.evidence or "")[:CUT]})
    analysis = condense(messages, max_chars)
    f = Frame(analysis, final)
    text = STANDARD.format(notice=f.notice, task=task, reference=item.key, analysis=f.quote(analysis, ANALYSIS),
                           final=f.quote(final, FINAL))
    return text + (GROUNDING_EXTRA if kind == "grounding" else "")


def judge_path(run_dir: Path) -> Path:
    return Path(run_dir) / "judge.jsonl"


def load_judgements(run_dir: Path) -> list[JudgeRecord]:
    p = judge_path(run_dir)
    if not p.exists():
        return []
    out: dict[tuple, JudgeRecord] = {}
    for line in p.read_text().splitlines():
        try:
            j = JudgeRecord.model_validate_json(line)
        except ValueError:
            continue
        out[(j.key, j.judge, j.prompt)] = j
    return list(out.values())


def judge_run(run_dir: Path, judge: str, prompts: tuple[str, ...] = PROMPTS, conditions: list[str] | None = None,
              on_step=None, items: list[str] | None = None, tracks: list[str] | None = None) -> list[JudgeRecord]:
    run_dir = Path(run_dir)
    store = GroundingStore(run_dir)
    if not (run_dir / "config.json").exists():
        raise BenchmarkError(f"{run_dir} is not a grounding run folder (no config.json)")
    bad = [p for p in prompts if p not in PROMPTS]
    if bad:
        raise BenchmarkError(f"unknown judge prompt(s) {', '.join(bad)}; known: {', '.join(PROMPTS)}")
    done = {(j.key, j.judge, j.prompt) for j in load_judgements(run_dir)}
    max_chars = 6000 if judge.startswith("local/") else 40000
    new = []
    recs = sorted(store.results(), key=lambda r: r.key)
    recs = [r for r in recs if r.condition != "nodata" and (not conditions or r.condition in conditions)]
    if items or tracks:
        wanted = {i.id for i in select(items, tracks)}
        recs = [r for r in recs if r.item in wanted]
    for rec in recs:
        traj = store.load_trajectory(rec.trajectory) if rec.trajectory else None
        for kind in prompts:
            if (rec.key, judge, kind) in done:
                continue
            if on_step:
                on_step(f"{rec.key} {kind}")
            prompt = judge_prompt(rec, traj.messages if traj else [], kind, max_chars)
            meta = {"task": "grounding_judge", "prompt_kind": kind, "report_schema": JUDGE_SCHEMA}
            resp, call = call_model(judge, [{"role": "user", "content": prompt}], step=0, role="judge", metadata=meta,
                                    response_format=json_schema_format("grounding_judge", JUDGE_SCHEMA), max_tokens=300)
            text = resp.choices[0].message.content if resp is not None else None
            p = parse_report(text, JUDGE_SCHEMA)
            r = p.report or {}
            j = JudgeRecord(key=rec.key, judge=judge, prompt=kind, parsed=p.ok, overall=r.get("overall"),
                            supported=r.get("supported"), matches_reference=r.get("matches_reference"),
                            analysis_quality=r.get("analysis_quality"), tokens_in=call.tokens_in,
                            tokens_out=call.tokens_out, error=call.error or p.error)
            _append(judge_path(run_dir), j)
            new.append(j)
    return new


def _append(path: Path, rec: JudgeRecord) -> None:
    import os

    line = rec.model_dump_json() + "\n"
    if not path.exists():
        _atomic_write(path, b"")
    with open(path, "ab") as fh:
        fh.write(line.encode())
        fh.flush()
        os.fsync(fh.fileno())
