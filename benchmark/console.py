"""What the CLI prints and checks before a command starts: consoles that never cut an id, the defaulted-model
line, and the endpoint variables a hosted model needs.

Why: off a terminal (a log, a pipe, CI) rich assumes 80 columns and cuts table cells with '…', so an id printed by
`worlds list` could not be pasted back into `--worlds`. A console here is as wide as its content off a terminal;
on a terminal, id columns fold instead of being cut.
"""
from __future__ import annotations

import os
import sys

WIDE = 10_000  # columns a console assumes off a terminal: wide enough that no table cell is ever cut


def console(stderr: bool = False):
    """A rich Console for stdout (or stderr): the terminal's width on a terminal, WIDE anywhere else."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    tty = hasattr(stream, "isatty") and stream.isatty()
    return Console(stderr=stderr, width=None if tty else WIDE, soft_wrap=not tty)


def id_column(table, name: str = "id", **kwargs) -> None:
    """A column holding ids someone will paste back into a command: never cut with '…' (folded on a narrow terminal)."""
    table.add_column(name, no_wrap=True, overflow="fold", min_width=min(len(name), 10), **kwargs)


def model_notice(model: str | None, flag: str = "--model", label: str = "model") -> str:
    """The model a command uses; when the flag was not given, say so on stderr, since the default is the offline
    smoke-test model (a 135M-parameter LLM that proves the path, not a score)."""
    from benchmark.models import OFFLINE_DEFAULT

    if model:
        return model
    print(f"{label}: {OFFLINE_DEFAULT} (the offline default; pass {flag} PROVIDER/NAME for another model, e.g. "
          f"{flag} anthropic/claude-... or {flag} openai/<name>)", file=sys.stderr, flush=True)
    return OFFLINE_DEFAULT


def check_model_keys(models: list[str]) -> None:
    """Stop before anything runs when an `openai/...` model has no OPENAI_API_KEY: litellm's OpenAI client refuses
    every call without one (each retried, then a model_error row for every world). A local OpenAI-compatible server
    (OPENAI_API_BASE) that takes no key still needs the variable set, to any value."""
    from benchmark.errors import BenchmarkError

    openai = sorted({m for m in models if m.startswith("openai/")})
    if not openai or os.environ.get("OPENAI_API_KEY"):
        return
    base = os.environ.get("OPENAI_API_BASE") or os.environ.get("OPENAI_BASE_URL")
    if base:
        raise BenchmarkError(
            f"OPENAI_API_BASE is set ({base}) but OPENAI_API_KEY is not, and {openai[0]} goes through the OpenAI "
            "client, which refuses to call without a key; a local server that checks no key accepts any value: "
            "export OPENAI_API_KEY=dummy")
    raise BenchmarkError(f"{openai[0]} needs OPENAI_API_KEY in the environment (export OPENAI_API_KEY=...); for a "
                         "local OpenAI-compatible server also set OPENAI_API_BASE=http://HOST:PORT/v1")
