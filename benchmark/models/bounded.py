"""Hosted replies are bounded before anything parses them (issue 19, deliverable 2).

An endpoint is an adversary that has read this code. Three bounds hold for every hosted call (any model string that
is not `local/...` or `scripted/...`, whose replies are made in this process):

* **Bytes.** Every HTTP reply litellm reads goes through `CappedTransport`: the body is counted as it streams in
  and the read stops at `max_reply_bytes()` (default 2 MiB, BENCHMARK_MODEL_MAX_REPLY_BYTES); a Content-Length over
  the cap is refused before a byte of the body is read. The request asks for `Accept-Encoding: identity`; a reply
  compressed anyway is inflated here, in bounded steps, and the cap counts the inflated bytes (encodings other than
  gzip/deflate are refused). The transport is installed as `litellm.client_session` (OpenAI-compatible providers)
  and `litellm.sync_transport` (providers on litellm's own HTTP handler), so the cap sits under the SDK, before
  JSON decoding, pydantic and litellm's post-processing see the reply.
* **Time.** `bounded_call` runs the litellm call in a worker thread and waits for it no longer than the attempt's
  timeout: the deadline holds end to end, litellm's own processing included (httpx's timeout bounds each read, not
  a reply that drips in or a body that takes litellm minutes to convert). The transport also stops reading at the
  deadline, so an abandoned worker ends soon after; it is bounded by the byte cap either way.
* **Usage.** Token counts must be whole, finite, non-negative and at most MAX_TOKENS_PER_CALL; anything else is a
  fault of the endpoint (`BadUsage`), never a figure that is summed. The transport checks the body's `usage`
  (`usageMetadata`) before litellm casts it (NaN, "abc" or 1e30 would otherwise surface as litellm's opaque
  "Invalid response object"), and `usage_counts` checks the parsed reply again.

A fault is raised as a `ModelFault` whose message says what the endpoint did; the agent's retry loop records it as
a failed attempt like any other provider error.
"""
from __future__ import annotations

import json
import math
import os
import threading
import time
import zlib
from typing import Any, Callable, Iterator

import httpx

DEFAULT_MAX_REPLY_BYTES = 2 * 1024 * 1024
MAX_TOKENS_PER_CALL = 10_000_000  # beyond any context window: a count above it is not a count
_local = threading.local()


class ModelFault(Exception):
    """The endpoint's reply is refused; `status_code` is the HTTP status it answered with (None: no complete reply)."""

    def __init__(self, message: str, status_code: int | None = None):
        super().__init__(message)
        self.status_code = status_code


class ReplyTooLarge(ModelFault):
    pass


class ReplyTimeout(ModelFault):
    pass


class BadUsage(ModelFault):
    pass


def max_reply_bytes() -> int:
    raw = os.environ.get("BENCHMARK_MODEL_MAX_REPLY_BYTES")
    if raw is None or raw == "":
        return DEFAULT_MAX_REPLY_BYTES
    try:
        v = int(raw)
    except ValueError:
        v = 0
    if v <= 0:
        from benchmark.errors import BenchmarkError

        raise BenchmarkError(f"environment variable BENCHMARK_MODEL_MAX_REPLY_BYTES={raw!r} must be a positive integer")
    return v


class _Guard:
    """What one attempt allows: the byte cap and the monotonic deadline; `fault` is what the transport refused."""

    def __init__(self, cap: int, deadline: float):
        self.cap = cap
        self.deadline = deadline
        self.fault: ModelFault | None = None

    def refuse(self, fault: ModelFault) -> ModelFault:
        if self.fault is None:
            self.fault = fault
        return fault


def _guard() -> _Guard:
    g = getattr(_local, "guard", None)
    if g is None:  # a hosted request outside bounded_call (none in the harness): the cap still holds
        g = _Guard(max_reply_bytes(), time.monotonic() + 120.0)
    return g


class _CappedStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.Response, guard: _Guard, encoding: str):
        self._inner = inner
        self._guard = guard
        self._z = zlib.decompressobj(32 + zlib.MAX_WBITS) if encoding in ("gzip", "x-gzip", "deflate") else None

    def _count(self, n: int, total: int) -> int:
        total += n
        g = self._guard
        if total > g.cap:
            raise g.refuse(ReplyTooLarge(f"the reply is larger than the {g.cap} byte cap "
                                         "(BENCHMARK_MODEL_MAX_REPLY_BYTES); reading stopped there",
                                         self._inner.status_code))
        if time.monotonic() > g.deadline:
            raise g.refuse(ReplyTimeout(f"the reply was still arriving at the attempt's deadline ({total} bytes read)"))
        return total

    def __iter__(self) -> Iterator[bytes]:
        """The whole body (at most the cap) is read before any of it is handed on, so its usage can be checked first."""
        raw = out = 0
        parts: list[bytes] = []
        for chunk in self._inner.iter_raw():
            raw = self._count(len(chunk), raw)
            if self._z is None:
                out = raw
                parts.append(chunk)
                continue
            data = chunk
            while data:
                part = self._z.decompress(data, self._guard.cap + 1 - out)
                out = self._count(len(part), out)
                parts.append(part)
                data = self._z.unconsumed_tail
        if self._z is not None:
            tail = self._z.flush()
            self._count(len(tail), out)
            parts.append(tail)
        body = b"".join(parts)
        if 200 <= self._inner.status_code < 300:
            problem = _usage_problem(body)
            if problem:
                raise self._guard.refuse(BadUsage(problem, self._inner.status_code))
        yield body

    def close(self) -> None:
        self._inner.close()


class CappedTransport(httpx.BaseTransport):
    """An httpx transport that sends through an ordinary client (proxies from the environment honoured) and hands
    back a body that is counted, and cut, as it streams in."""

    def __init__(self) -> None:
        self._client = httpx.Client(follow_redirects=False, trust_env=True)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        g = _guard()
        request.headers["Accept-Encoding"] = "identity"
        resp = self._client.send(request, stream=True)
        try:
            encoding = resp.headers.get("content-encoding", "identity").strip().lower() or "identity"
            if encoding not in ("identity", "gzip", "x-gzip", "deflate"):
                raise g.refuse(ModelFault(f"the reply uses content-encoding {encoding[:40]!r}, which was not asked for "
                                          "and is not read", resp.status_code))
            length = resp.headers.get("content-length")
            if length is not None and encoding == "identity":
                try:
                    n = int(length)
                except ValueError:
                    n = -1
                if n > g.cap:
                    raise g.refuse(ReplyTooLarge(f"the reply announces {n} bytes, more than the {g.cap} byte cap "
                                                 "(BENCHMARK_MODEL_MAX_REPLY_BYTES); it was not read", resp.status_code))
        except ModelFault:
            resp.close()
            raise
        headers = [(k, v) for k, v in resp.headers.multi_items()
                   if encoding == "identity" or k.lower() not in ("content-encoding", "content-length")]
        return httpx.Response(status_code=resp.status_code, headers=headers,
                              stream=_CappedStream(resp, g, encoding), extensions=resp.extensions, request=request)

    def close(self) -> None:
        self._client.close()


_installed = False
_install_lock = threading.Lock()


def install() -> None:
    """Route litellm's synchronous HTTP through CappedTransport (once per process)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        import litellm

        litellm.client_session = httpx.Client(transport=CappedTransport())
        litellm.sync_transport = CappedTransport()
        _installed = True


def bounded_call(fn: Callable[..., Any], kwargs: dict[str, Any], timeout_s: float) -> Any:
    """`fn(**kwargs)` in a worker thread, waited for at most `timeout_s`; the transport's refusal wins over the
    exception litellm wrapped it in."""
    guard = _Guard(max_reply_bytes(), time.monotonic() + timeout_s)
    box: dict[str, Any] = {}

    def work() -> None:
        _local.guard = guard
        try:
            box["resp"] = fn(**kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["exc"] = exc
        finally:
            _local.guard = None

    t = threading.Thread(target=work, name="model-call", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        guard.refuse(ReplyTimeout(f"no complete reply within the attempt's {timeout_s:.0f} s "
                                  "(reading and litellm's processing included)"))
        raise guard.fault
    if guard.fault is not None:
        raise guard.fault
    if "exc" in box:
        raise box["exc"]
    return box["resp"]


def _bad_count(v: Any) -> bool:
    return (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v != int(v)
            or not 0 <= v <= MAX_TOKENS_PER_CALL)


def _usage_problem(body: bytes) -> str | None:
    """What is wrong with the token counts of a JSON reply body (read whole, within the cap), before litellm casts
    them; None when they are counts or the body is not a JSON object (litellm reports that itself)."""
    if b'"usage"' not in body and b"Tokens" not in body:
        return None
    try:
        obj = json.loads(body, parse_constant=lambda c: float(c))
    except (ValueError, RecursionError, UnicodeDecodeError):
        return None
    if not isinstance(obj, dict):
        return None
    for key in ("usage", "usageMetadata"):  # OpenAI/Anthropic style; Gemini style
        usage = obj.get(key)
        if not isinstance(usage, dict):
            continue
        for name, v in usage.items():
            if not isinstance(name, str) or not name.endswith(("_tokens", "TokenCount")) or v is None:
                continue
            if _bad_count(v):
                return (f"the endpoint reported {key}.{name[:60]} = {str(v)[:40]}, not a token count (a whole number "
                        f"from 0 to {MAX_TOKENS_PER_CALL}); the reply is refused")
    return None


def usage_counts(resp: Any) -> tuple[int, int]:
    """(prompt, completion) tokens of a reply; 0 for a count the endpoint did not give; BadUsage for a count that is
    not a whole, finite, non-negative number of at most MAX_TOKENS_PER_CALL."""
    usage = getattr(resp, "usage", None)
    out = []
    for name in ("prompt_tokens", "completion_tokens"):
        v = getattr(usage, name, None) if usage is not None else None
        if v is None:
            out.append(0)
            continue
        if _bad_count(v):
            raise BadUsage(f"the endpoint reported usage.{name} = {str(v)[:40]}, not a token count "
                           f"(a whole number from 0 to {MAX_TOKENS_PER_CALL}); the reply is refused", 200)
        out.append(int(v))
    return out[0], out[1]
