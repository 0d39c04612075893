"""The agent loop for L1/L2 worlds: the family's prompt, a `run_python` tool, a step budget, a final JSON report.

A step is one agent model call. The loop ends when the model answers without a tool call (its content is the
report) or when the budget is spent (then one last call, tools disabled, asks for the report). Everything is
recorded in the trajectory; nothing the model or the code does raises out of `run_episode`.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from benchmark.loader import WorldRef
from benchmark.records import CallRecord, CellRecord
from sandbox.bwrap import Sandbox

HARNESS_VERSION = "1"
MAX_ATTEMPTS = 3
SYSTEM_PROMPT = (
    "You are a careful scientist working in a sealed Python sandbox with no network access. "
    "Call the run_python tool to execute Python code; variables persist between calls, and shell tools can be run "
    "with subprocess. Your working directory holds the task's files. You have at most {budget} steps (each of your "
    "replies is one step). When you are done, reply WITHOUT a tool call, with ONLY the JSON report the task asks for."
)
FINAL_NUDGE = "Your step budget is spent. Reply now with ONLY the JSON report the task asks for; no tool calls."

RUN_PYTHON_TOOL = {
    "type": "function",
    "function": {
        "name": "run_python",
        "description": "Execute Python code in the persistent sandbox kernel and return its stdout, stderr and errors.",
        "parameters": {"type": "object", "properties": {"code": {"type": "string", "description": "Python source to run"}},
                       "required": ["code"]},
    },
}

TRANSIENT = ("RateLimitError", "APIConnectionError", "Timeout", "ServiceUnavailableError", "InternalServerError",
             "APIError")


@dataclass
class Episode:
    messages: list[dict[str, Any]]
    calls: list[CallRecord]
    cells: list[CellRecord]
    report_raw: str | None
    status: str
    error: str | None


def json_schema_format(name: str, schema: dict) -> dict:
    """OpenAI-style structured output; the local provider turns it into a grammar, so even a tiny model parses."""
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": False}}


def call_model(model: str, messages: list[dict[str, Any]], step: int, role: str = "agent", tools: list | None = None,
               tool_choice: str | None = None, metadata: dict | None = None, seed: int = 0,
               max_tokens: int = 4096, **extra) -> tuple[Any | None, CallRecord]:
    """One litellm call with bounded retries on transient errors; only the successful attempt counts tokens."""
    import litellm

    from benchmark.models import register_providers

    register_providers()
    retries: list[str] = []
    for attempt in range(MAX_ATTEMPTS):
        t0 = time.monotonic()
        try:
            kwargs: dict[str, Any] = dict(model=model, messages=messages, metadata=metadata or {}, seed=seed,
                                          max_tokens=max_tokens, temperature=extra.pop("temperature", 0.0), **extra)
            if tools:
                kwargs["tools"] = tools
                if tool_choice:
                    kwargs["tool_choice"] = tool_choice
            resp = litellm.completion(**kwargs)
        except Exception as exc:  # noqa: BLE001 - every provider error becomes a recorded outcome
            name = type(exc).__name__
            msg = f"{name}: {str(exc)[:500]}"
            refused = "ContentPolicy" in name
            if attempt + 1 < MAX_ATTEMPTS and name in TRANSIENT:
                retries.append(msg)
                time.sleep(min(2 ** attempt, 8))
                continue
            return None, CallRecord(role=role, model=model, step=step, ok=False, wall_s=round(time.monotonic() - t0, 3),
                                    retries=retries, error=msg, finish_reason="content_filter" if refused else None)
        usage = getattr(resp, "usage", None)
        choice = resp.choices[0]
        return resp, CallRecord(role=role, model=model, step=step, ok=True,
                                tokens_in=int(getattr(usage, "prompt_tokens", 0) or 0),
                                tokens_out=int(getattr(usage, "completion_tokens", 0) or 0),
                                wall_s=round(time.monotonic() - t0, 3), finish_reason=choice.finish_reason,
                                retries=retries)
    raise AssertionError("unreachable")


def _assistant_dict(message: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"role": "assistant", "content": message.content}
    if getattr(message, "tool_calls", None):
        d["tool_calls"] = [{"id": tc.id, "type": "function",
                            "function": {"name": tc.function.name, "arguments": tc.function.arguments}}
                           for tc in message.tool_calls]
    return d


def _code_of(arguments: str) -> tuple[str | None, str | None]:
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        return None, f"tool arguments are not valid JSON ({exc.msg}); send {{\"code\": \"...\"}}"
    code = args.get("code") if isinstance(args, dict) else None
    if not isinstance(code, str):
        return None, "run_python needs a string argument 'code'"
    return code, None


def run_episode(ref: WorldRef, model: str, sandbox: Sandbox, budget: int, seed: int = 0,
                metadata: dict | None = None) -> Episode:
    meta = {"world_id": ref.id, "family": ref.family.id, "report_schema": ref.family.report_schema, **(metadata or {})}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT.format(budget=budget)},
        {"role": "user", "content": ref.family.prompt},
    ]
    calls: list[CallRecord] = []
    cells: list[CellRecord] = []
    for step in range(budget + 1):
        final = step == budget
        if final:
            messages.append({"role": "user", "content": FINAL_NUDGE})
        resp, rec = call_model(model, messages, step, tools=[RUN_PYTHON_TOOL], tool_choice="none" if final else "auto",
                               metadata=meta, seed=seed)
        calls.append(rec)
        if resp is None:
            status = "refused" if rec.finish_reason == "content_filter" else "model_error"
            return Episode(messages, calls, cells, None, status, rec.error)
        choice = resp.choices[0]
        if choice.finish_reason == "content_filter":
            return Episode(messages, calls, cells, choice.message.content, "refused", "the provider filtered the answer")
        msg = _assistant_dict(choice.message)
        messages.append(msg)
        tool_calls = msg.get("tool_calls") or []
        if not tool_calls or final:
            return Episode(messages, calls, cells, msg.get("content"), "graded", None)
        for tc in tool_calls:
            if tc["function"]["name"] != "run_python":
                out = f"unknown tool {tc['function']['name']!r}; the only tool is run_python"
            else:
                code, problem = _code_of(tc["function"]["arguments"])
                if problem:
                    out = problem
                else:
                    res = sandbox.run_python(code)
                    cells.append(CellRecord(step=step, code=code, **res.model_dump(exclude={"violation"}), violation=res.violation))
                    out = res.as_text()
            messages.append({"role": "tool", "tool_call_id": tc["id"], "content": out})
    return Episode(messages, calls, cells, None, "budget_exhausted", "no report after the final nudge")
