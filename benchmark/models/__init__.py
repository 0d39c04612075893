"""Model providers. Every model call, local, scripted or hosted, goes through litellm (SPEC R5).

`local/...` and `scripted/...` are litellm custom providers registered here; any other string is passed to
litellm as is (e.g. `anthropic/claude-...`, `openai/gpt-...`), with keys read by litellm from the environment.
"""
from __future__ import annotations

import os

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

_REGISTERED = False
OFFLINE_DEFAULT = "local/smollm2"


def register_providers() -> None:
    """Install the local and scripted providers into litellm once per process."""
    global _REGISTERED
    if _REGISTERED:
        return
    import litellm

    from benchmark.models.bounded import install
    from benchmark.models.local import LocalLLM
    from benchmark.models.scripted import ScriptedLLM

    install()  # hosted replies are byte-capped as they stream in (benchmark.models.bounded)

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    mine = {"local", "scripted"}
    litellm.custom_provider_map = [p for p in litellm.custom_provider_map if p.get("provider") not in mine] + [
        {"provider": "local", "custom_handler": LocalLLM()},
        {"provider": "scripted", "custom_handler": ScriptedLLM()},
    ]
    _REGISTERED = True


def is_offline(model: str) -> bool:
    return model.startswith(("local/", "scripted/"))
