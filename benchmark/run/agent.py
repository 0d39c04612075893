"""The agent loop for L1/L2 worlds: the family's prompt, a `run_python` tool, a step budget, a final JSON report.

A step is one agent model call. The loop ends when the model answers without a tool call (its content is the
report) or when the budget is spent (then one last call, tools disabled, asks for the report). Everything is
recorded in the trajectory; nothing the model or the code does raises out of `run_episode`.

Models without native tool calling (the offline local/smollm2 ignores `tool_choice="auto"`): a reply that is not a
valid report but holds a fenced ```python block is run as a run_python call; the cell is recorded with
`via="fenced_code"` and its output returns as a user turn (there is no tool-call id to answer). A reply with
neither a valid report nor code, before any cell has run, is not accepted as the report: the agent is told to
check the files first and the next call FORCES the tool (`tool_choice="required"`; at most FORCED_CALLS times).
A model that answers with a valid report is never forced, so a report without analysis is still graded as such.
"""
from __future__ import annotations

import functools
import json
import re
import time
from dataclasses import dataclass
from typing import Any

from benchmark.errors import BenchmarkError
from benchmark.suite.loader import WorldRef
from benchmark.run.records import AttemptRecord, CallRecord, CellRecord
from benchmark.run.refusal import detect_refusal
from sandbox.bwrap import Sandbox

HARNESS_VERSION = "2"
SYSTEM_PROMPT = (
    "You are a careful scientist working in a sealed Python sandbox with no network access. "
    "Call the run_python tool to execute Python code; variables persist between calls, and shell tools can be run "
    "with subprocess. Your working directory holds the task's files. You have at most {budget} steps (each of your "
    "replies is one step). When you are done, reply WITHOUT a tool call, with ONLY the JSON report the task asks for."
)
FINAL_NUDGE = "Your step budget is spent. Reply now with ONLY the JSON report the task asks for; no tool calls."
NO_CODE_NUDGE = ("That is not the JSON report the task asks for, and no code has run yet. Check the task's files with the "
                 "run_python tool first: call it now.")
FENCED_RESULT = ("Output of your ```python block (run in the sandbox as a run_python call):\n{out}\n"
                 "Continue, or reply with ONLY the JSON report when you are done.")
FORCED_CALLS = 2
_PY_FENCE = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\n(.*?)(?:```|\Z)", re.S | re.I)


def fenced_code(text: str | None) -> str | None:
    """The first fenced ```python block of a reply (a block cut by the token cap runs up to the cut), or None."""
    m = _PY_FENCE.search(text or "")
    code = m.group(1).strip("\n") if m else None
    return code if code and code.strip() else None

RUN_PYTHON_TOOL = {
    "type": "function",
    "function": {
        "name": "run_python",
        "description": "Execute Python code in the persistent sandbox kernel and return its stdout, stderr and errors.",
        "parameters": {"type": "object", "properties": {"code": {"type": "string", "description": "Python source to run"}},
                       "required": ["code"]},
    },
}

# Provider errors worth another attempt (by litellm exception name, when no HTTP status says more).
TRANSIENT = ("RateLimitError", "APIConnectionError", "Timeout", "ServiceUnavailableError", "InternalServerError",
             "APIError", "APIResponseValidationError", "JSONDecodeError")
TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
PERMANENT = ("ContentPolicyViolationError", "AuthenticationError", "PermissionDeniedError", "NotFoundError",
             "BadRequestError", "UnprocessableEntityError", "ContextWindowExceededError", "UnsupportedParamsError")


@dataclass(frozen=True)
class RetryPolicy:
    """The harness's own retry policy (provider SDK retries are off, so every attempt is seen and recorded).

    Bounded exponential backoff (base x 2^k, at most `cap_s`) with jitter drawn from an RNG seeded by the call's
    seed, step and attempt, so a rerun waits the same; a `Retry-After` header (seconds or HTTP date) replaces the
    backoff when it is at most `retry_after_cap_s`, and a longer one ends the call. `deadline_s` bounds a whole call
    (attempts, waits and each attempt's timeout together); past it the call fails as a model error.
    Environment overrides: BENCHMARK_MODEL_ATTEMPTS, BENCHMARK_MODEL_TIMEOUT_S, BENCHMARK_MODEL_DEADLINE_S.
    """

    attempts: int = 4
    timeout_s: float = 60.0
    deadline_s: float = 120.0
    base_s: float = 1.0
    cap_s: float = 16.0
    retry_after_cap_s: float = 30.0

    @classmethod
    def from_env(cls) -> "RetryPolicy":
        import os

        def num(name: str, default: float, kind=float):
            raw = os.environ.get(name)
            if raw is None or raw == "":
                return default
            try:
                v = kind(raw)
            except ValueError:
                v = None
            if v is None or not v > 0 or v != v or v == float("inf"):
                from benchmark.errors import BenchmarkError

                raise BenchmarkError(f"environment variable {name}={raw!r} must be a positive finite number")
            return v

        d = cls()
        return cls(attempts=num("BENCHMARK_MODEL_ATTEMPTS", d.attempts, int),
                   timeout_s=num("BENCHMARK_MODEL_TIMEOUT_S", d.timeout_s),
                   deadline_s=num("BENCHMARK_MODEL_DEADLINE_S", d.deadline_s))

    def backoff(self, seed: int, step: int, attempt: int) -> float:
        import random

        rng = random.Random(f"{seed}:{step}:{attempt}")
        return min(self.cap_s, self.base_s * 2 ** attempt) * rng.uniform(0.5, 1.0)


_NO_RESPONSE = ("APIConnectionError", "APITimeoutError", "ConnectError", "ConnectTimeout", "ReadTimeout", "Timeout",
                "RemoteProtocolError", "ConnectionRefusedError", "TimeoutError")


def _http_status(exc: Exception) -> int | None:
    """The HTTP status the endpoint really answered; None when no response came back (timeout, refused connection).

    litellm maps a refused connection to InternalServerError (500) and a 200 with a malformed body to 500 too, so the
    exception chain is read first: the SDK's own error says what happened on the wire.
    """
    chain, e = [], exc
    while e is not None and len(chain) < 8:
        chain.append(e)
        e = e.__cause__ or e.__context__
    for e in chain:
        if type(e).__name__ in _NO_RESPONSE:
            return None
        text = str(e)
        m = re.search(r"<APIResponse \[(\d{3})", text) or re.match(r"Error code: (\d{3})", text)
        if m:
            return int(m.group(1))
    if any("Connection error" in str(e) for e in chain):
        return None
    code = getattr(exc, "status_code", None)
    return code if isinstance(code, int) else None


def _retry_after(exc: Exception) -> float | None:
    """Seconds the endpoint asked us to wait (Retry-After: seconds or an HTTP date), if it said."""
    import email.utils
    from datetime import datetime, timezone

    headers = getattr(exc, "litellm_response_headers", None) or getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    try:
        raw = headers.get("retry-after") or headers.get("Retry-After")
    except Exception:  # noqa: BLE001 - odd header containers: no hint
        return None
    if not raw:
        return None
    raw = str(raw).strip()
    try:
        secs = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        secs = (when - datetime.now(timezone.utc)).total_seconds()
    if secs != secs:  # NaN
        return None
    return max(0.0, secs)


def _transient(exc: Exception, status: int | None) -> bool:
    name = type(exc).__name__
    if name in PERMANENT or "ContentPolicy" in name:
        return False
    if status is not None:  # a 2xx that failed is a body we could not parse (malformed JSON): worth another try
        return status in TRANSIENT_STATUS or 200 <= status < 300
    return name in TRANSIENT or "Timeout" in name or "Connection" in name


@dataclass
class Episode:
    messages: list[dict[str, Any]]
    calls: list[CallRecord]
    cells: list[CellRecord]
    report_raw: str | None
    status: str
    error: str | None
    refusal: str | None = None  # "content_filter" or "reply_text: <pattern>" (benchmark.run.refusal)


def json_schema_format(name: str, schema: dict) -> dict:
    """OpenAI-style structured output; the local provider turns it into a grammar, so even a tiny model parses."""
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": False}}


def call_model(model: str, messages: list[dict[str, Any]], step: int, role: str = "agent", tools: list | None = None,
               tool_choice: str | None = None, metadata: dict | None = None, seed: int = 0,
               max_tokens: int = 4096, policy: RetryPolicy | None = None, **extra) -> tuple[Any | None, CallRecord]:
    """One litellm call with the harness's bounded retries (RetryPolicy); only the successful attempt counts tokens.

    litellm's own retries (`num_retries`) and the OpenAI client's (`max_retries`) are set to 0, so a 429 or a 500 is
    never retried unseen; every attempt is recorded in `CallRecord.attempts` with its HTTP status and error.
    A hosted reply is bounded before anything parses it (benchmark.models.bounded): its bytes are capped as they
    stream in, the attempt's timeout holds end to end (litellm's processing included), and token counts that are not
    whole, finite and non-negative fail the attempt (a model fault, retried like a malformed body), never summed.
    """
    from benchmark.models import is_offline, offline_complete, register_providers
    from benchmark.models.bounded import bounded_call, usage_counts
    from benchmark.run import journal

    offline = is_offline(model)
    if not offline:
        import litellm

        register_providers()
    policy = policy or RetryPolicy.from_env()
    temperature = extra.pop("temperature", 0.0)
    retries: list[str] = []
    attempts: list[AttemptRecord] = []
    start = time.monotonic()
    for attempt in range(policy.attempts):
        remaining = policy.deadline_s - (time.monotonic() - start)
        t0 = time.monotonic()
        sent = None
        try:
            kwargs: dict[str, Any] = dict(model=model, messages=messages, metadata=metadata or {},
                                          max_tokens=max_tokens, temperature=temperature, num_retries=0, max_retries=0,
                                          timeout=max(1.0, min(policy.timeout_s, remaining)), **extra)
            if takes_seed(model):
                kwargs["seed"] = seed
            if tools:
                kwargs["tools"] = tools
                if tool_choice:
                    kwargs["tool_choice"] = tool_choice
            if offline:  # in-process: litellm's call shape without its import (benchmark.models)
                resp = offline_complete(**{k: v for k, v in kwargs.items()
                                           if k not in ("num_retries", "max_retries", "timeout")})
            else:  # a hosted reply: bytes capped as they stream in, the attempt's timeout held end to end
                # journaled before it goes out: a request whose reply never reaches a record is still paid for
                sent = journal.Request(role, model, lambda: estimate_usage(model, messages, tools, None)[0])
                resp = bounded_call(litellm.completion, kwargs, kwargs["timeout"])
            choice = resp.choices[0]
            tokens_in, tokens_out = usage_counts(resp)
            estimated = not offline and _usage_missing(resp)
            if estimated:  # an endpoint that reports no usage is not free: count the exchange with its tokenizer
                tokens_in, tokens_out = estimate_usage(model, messages, tools, choice.message)
            if sent is not None:
                sent.returned(tokens_in, tokens_out, estimated)
        except Exception as exc:  # noqa: BLE001 - every provider error becomes a recorded outcome
            name = type(exc).__name__
            msg = f"{name}: {str(exc)[:500]}"
            status = _http_status(exc)
            if sent is not None and status is not None:  # an error status is not billed; no answer may have been
                sent.refused(status)
            refused = "ContentPolicy" in name
            rec = AttemptRecord(http_status=status, error=msg, wall_s=round(time.monotonic() - t0, 3))
            attempts.append(rec)
            wait, stop = None, None
            if not _transient(exc, status):
                stop = msg
            elif attempt + 1 >= policy.attempts:
                stop = f"{msg} (gave up after {policy.attempts} attempts)"
            else:
                hint = _retry_after(exc)
                if hint is not None and hint > policy.retry_after_cap_s:
                    stop = f"{msg} (the endpoint asked to wait {hint:.0f} s, more than the {policy.retry_after_cap_s:.0f} s cap)"
                else:
                    wait = hint if hint is not None else policy.backoff(seed, step, attempt)
                    if time.monotonic() - start + wait + 1.0 > policy.deadline_s:
                        stop = f"{msg} (the call's {policy.deadline_s:.0f} s time bound would be passed)"
            if stop is not None:
                return None, CallRecord(role=role, model=model, step=step, ok=False,
                                        wall_s=round(time.monotonic() - start, 3), retries=retries, error=stop,
                                        finish_reason="content_filter" if refused else None, attempts=attempts)
            rec.wait_s = round(wait, 3)
            retries.append(msg)
            time.sleep(wait)
            continue
        attempts.append(AttemptRecord(http_status=None if offline else 200, wall_s=round(time.monotonic() - t0, 3)))
        return resp, CallRecord(role=role, model=model, step=step, ok=True, tokens_in=tokens_in, tokens_out=tokens_out,
                                usage_estimated=estimated, wall_s=round(time.monotonic() - start, 3),
                                finish_reason=choice.finish_reason, retries=retries, attempts=attempts)
    raise AssertionError("unreachable")


def _usage_missing(resp: Any) -> bool:
    """Whether a hosted reply carries no usable token counts: no usage at all, or 0 prompt tokens (every request
    sends the system prompt, so a true count is never 0; litellm fills an absent usage with zeros)."""
    usage = getattr(resp, "usage", None)
    return usage is None or not getattr(usage, "prompt_tokens", None)


def estimate_usage(model: str, messages: list[dict], tools: list[dict] | None, message: Any) -> tuple[int, int]:
    """(prompt, completion) tokens of one exchange counted with the model's tokenizer (litellm `token_counter`, which
    falls back to cl100k for a model it does not know): the request's messages and tools, the reply's text and tool
    calls. Recorded as `usage_estimated`, so the leaderboard can say the cost is an estimate."""
    import litellm

    try:
        t_in = litellm.token_counter(model=model, messages=messages, tools=tools or None)
    except TypeError:  # an older litellm without `tools`
        t_in = litellm.token_counter(model=model, messages=messages)
    out = str(getattr(message, "content", None) or "")
    for tc in getattr(message, "tool_calls", None) or []:
        out += f"{tc.function.name} {tc.function.arguments or ''}"
    t_out = litellm.token_counter(model=model, text=out) if out else 0
    return int(t_in), int(t_out)


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
    except RecursionError:
        return None, "tool arguments are nested too deeply to parse; send {\"code\": \"...\"}"
    code = args.get("code") if isinstance(args, dict) else None
    if not isinstance(code, str):
        return None, "run_python needs a string argument 'code'"
    return code, None


def _is_report(text: str | None, schema: dict) -> bool:
    from graders.report import parse_report

    return parse_report(text, schema).report is not None


@functools.lru_cache(maxsize=64)
def takes_seed(model: str) -> bool:
    """Whether the provider accepts a sampling seed: Anthropic's API has none, and litellm refuses the whole call
    (UnsupportedParamsError) when one is passed; the run's seed is still recorded in its config and trajectories."""
    from benchmark.models import is_offline

    if is_offline(model):
        return True
    import litellm

    try:
        params = litellm.get_supported_openai_params(model=model)
    except Exception:  # noqa: BLE001 - a provider litellm cannot describe (local/, scripted/): pass it
        return True
    return params is None or "seed" in params


def run_episode(ref: WorldRef, model: str, sandbox: Sandbox, budget: int, seed: int = 0,
                metadata: dict | None = None) -> Episode:
    meta = {"world_id": ref.id, "family": ref.family.id, "report_schema": ref.family.report_schema, **(metadata or {})}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT.format(budget=budget)},
        {"role": "user", "content": ref.family.prompt},
    ]
    calls: list[CallRecord] = []
    cells: list[CellRecord] = []
    forced, force_next = 0, False
    for step in range(budget + 1):
        final = step == budget
        if final:
            messages.append({"role": "user", "content": FINAL_NUDGE})
        choice_mode = "none" if final else ("required" if force_next else "auto")
        force_next = False
        resp, rec = call_model(model, messages, step, tools=[RUN_PYTHON_TOOL], tool_choice=choice_mode,
                               metadata=meta, seed=seed)
        calls.append(rec)
        if resp is None:
            status = "refused" if rec.finish_reason == "content_filter" else "model_error"
            return Episode(messages, calls, cells, None, status, rec.error,
                           "content_filter" if status == "refused" else None)
        choice = resp.choices[0]
        if choice.finish_reason == "content_filter":
            return Episode(messages, calls, cells, choice.message.content, "refused", "the provider filtered the answer",
                           "content_filter")
        msg = _assistant_dict(choice.message)
        messages.append(msg)
        tool_calls = msg.get("tool_calls") or []
        content = msg.get("content")
        if not tool_calls or final:
            if _is_report(content, ref.family.report_schema):
                return Episode(messages, calls, cells, content, "graded", None)
            pattern = detect_refusal(content)
            if pattern is not None:  # a refusal written in the reply (seed 001 App. B), not a report
                return Episode(messages, calls, cells, content, "refused", f"the reply declines the task ({pattern})",
                               f"reply_text: {pattern}")
        if final:
            return Episode(messages, calls, cells, content, "graded", None)
        if not tool_calls:
            code = fenced_code(content)
            if code is not None:  # a model without native tool calling: the fenced block is its run_python call
                try:
                    res = sandbox.run_python(code)
                except BenchmarkError as exc:
                    return _sandbox_down(messages, calls, cells, exc)
                cells.append(CellRecord(step=step, code=code, **res.model_dump(exclude={"violation"}),
                                        violation=res.violation, via="fenced_code"))
                messages.append({"role": "user", "content": FENCED_RESULT.format(out=res.as_text())})
                continue
            if not cells and forced < FORCED_CALLS:  # it ignored `auto` and has checked nothing: force the tool
                forced += 1
                force_next = True
                messages.append({"role": "user", "content": NO_CODE_NUDGE})
                continue
            return Episode(messages, calls, cells, content, "graded", None)
        try:
            run_tool_calls(msg, sandbox, step, cells, messages)
        except BenchmarkError as exc:
            return _sandbox_down(messages, calls, cells, exc)
    return Episode(messages, calls, cells, None, "budget_exhausted", "no report after the final nudge")


def _sandbox_down(messages: list, calls: list[CallRecord], cells: list[CellRecord], exc: BenchmarkError) -> Episode:
    """The sandbox could not be started or restarted (a harness fault, not the agent's): the episode ends there,
    keeping the model calls it made (the sandbox starts while the first call is in flight: sandbox/deferred.py)."""
    return Episode(messages, calls, cells, None, "sandbox_error", str(exc))


def run_tool_calls(msg: dict[str, Any], sandbox: Sandbox, step: int, cells: list[CellRecord],
                   messages: list[dict[str, Any]]) -> None:
    """Run every run_python call of an assistant message in the sandbox; record the cells, answer each call."""
    for tc in msg.get("tool_calls") or []:
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
