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


ENDPOINT_PROBE_S = 5.0  # a TCP connect, no request: nothing is sent to the model, nothing is billed


def check_endpoint(models: list[str]) -> None:
    """Stop before the first world when an `openai/...` model goes to an OPENAI_API_BASE that nothing listens on:
    otherwise every world waits out litellm's retries (22 s each here) and ends a model_error row. One TCP connect to
    the base URL's host and port; an endpoint that answers the connect but fails later is still a row error."""
    import socket
    from urllib.parse import urlsplit

    from benchmark.errors import BenchmarkError

    openai = sorted({m for m in models if m.startswith("openai/")})
    base = os.environ.get("OPENAI_API_BASE") or os.environ.get("OPENAI_BASE_URL")
    if not openai or not base:
        return
    url = urlsplit(base)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise BenchmarkError(f"OPENAI_API_BASE={base} is not an http(s) URL; set it to the server's base, e.g. "
                             "http://127.0.0.1:8000/v1")
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        raise BenchmarkError(f"OPENAI_API_BASE={base} has no valid port; e.g. http://127.0.0.1:8000/v1") from None
    try:
        socket.create_connection((url.hostname, port), timeout=ENDPOINT_PROBE_S).close()
    except OSError as exc:
        raise BenchmarkError(
            f"nothing answers at OPENAI_API_BASE={base} ({url.hostname}:{port}: {exc.strerror or exc}), where "
            f"{openai[0]} would be called; start the server or correct the URL (nothing was run)") from None
