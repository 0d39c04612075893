"""Model providers. Hosted models go through litellm (SPEC R5); the offline ones are served in-process.

`local/...` (a real small LLM, benchmark.models.local), `scripted/...` (replayed scripts, benchmark.models.scripted)
and `human/...` (a person at the terminal, benchmark.models.human: the human baseline) answer through `offline_complete` with litellm's call shape: OpenAI chat messages and parameters in, a reply read by
the same attributes as litellm's ModelResponse out (benchmark.models.reply). They never import litellm, whose import
alone costs ~5 s of CPU in every process. Any other string is passed to litellm as is (e.g. `anthropic/claude-...`,
`openai/gpt-...`), with keys read by litellm from the environment.

This package sits beside the run stage (benchmark.run), below its protocols: no provider imports a protocol (the
run verb, the agent loop, L3, pivotal, grounding, verify), and protocols hand every provider the same neutral call
context; the scripted agents decide from it behind this boundary (benchmark.models.scripted).
"""
from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

_REGISTERED = False
OFFLINE_DEFAULT = "local/smollm2"
OFFLINE_PROVIDERS = ("local", "scripted", "human")  # human/<name>: a person at the terminal (models.human)
_handlers: dict[str, Any] = {}


def register_providers() -> None:
    """Prepare litellm for hosted calls once per process: replies byte-capped as they stream in (models.bounded)."""
    global _REGISTERED
    if _REGISTERED:
        return
    import litellm

    from benchmark.models.bounded import install

    install()
    litellm.suppress_debug_info = True
    litellm.telemetry = False
    _REGISTERED = True


def warm_hosted() -> None:
    """Import litellm and run its first-call path once, offline (`mock_response`: no request is sent), so the first
    hosted calls of a campaign do not each pay its lazy imports (~0.3 CPU-s, contended when 8 episodes start at once)."""
    import litellm

    register_providers()
    litellm.completion(model="openai/warm-up", messages=[{"role": "user", "content": "warm-up"}],
                       mock_response="ok", max_tokens=1)


def is_offline(model: str) -> bool:
    return model.startswith(tuple(p + "/" for p in OFFLINE_PROVIDERS))


def offline_complete(model: str, messages: list, metadata: dict | None = None, **params: Any):
    """One call of an offline provider (`local/...` or `scripted/...`): a `benchmark.models.reply.Reply`, or a
    `ProviderError` carrying the status a server would have answered."""
    provider = model.split("/", 1)[0]
    if provider not in _handlers:
        if provider == "local":
            from benchmark.models.local import LocalLLM

            _handlers[provider] = LocalLLM()
        elif provider == "scripted":
            from benchmark.models.scripted import ScriptedLLM

            _handlers[provider] = ScriptedLLM()
        elif provider == "human":
            from benchmark.models.human import HumanAgent

            _handlers[provider] = HumanAgent()
        else:
            raise ValueError(f"'{model}' is not an offline model; offline providers: {', '.join(OFFLINE_PROVIDERS)}")
    return _handlers[provider].complete(model, messages, params, metadata or {})


def set_workers(n: int) -> None:
    """How many model calls this process will make at once (`run --concurrency`): the local provider keeps that many
    servers, each with an equal share of the cores, so concurrent worlds do not queue on one model."""
    from benchmark.models.local import set_workers as local_workers

    local_workers(n)
