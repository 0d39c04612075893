"""A real OpenAI-compatible HTTP server for fault tests: 127.0.0.1, a thread, scripted replies per request.

Point litellm at it with `OPENAI_API_BASE=server.url` and a model `openai/<name>`; every request to
/v1/chat/completions takes the next reply of the script (then `default`), and is kept in `server.requests`.
Nothing here mocks litellm: the harness talks HTTP to this server exactly as it would to a provider.
"""
from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # sleep before answering (longer than the client's timeout = a timeout)


def _completion(message: dict[str, Any], finish: str) -> bytes:
    return json.dumps({
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }).encode()


def report(content: Any) -> Reply:
    """A final answer: `content` (a dict is sent as JSON text) with no tool call."""
    text = content if isinstance(content, str) else json.dumps(content)
    return Reply(body=_completion({"role": "assistant", "content": text}, "stop"))


def tool_call(code: str) -> Reply:
    """A run_python tool call with `code`."""
    tc = {"id": f"call_{uuid.uuid4().hex[:10]}", "type": "function",
          "function": {"name": "run_python", "arguments": json.dumps({"code": code})}}
    return Reply(body=_completion({"role": "assistant", "content": None, "tool_calls": [tc]}, "tool_calls"))


def error(status: int, message: str = "scripted failure", headers: dict[str, str] | None = None) -> Reply:
    body = json.dumps({"error": {"message": message, "type": "server_error", "code": status}}).encode()
    return Reply(status=status, body=body, headers=headers or {})


def rate_limited(retry_after: str | None = "1") -> Reply:
    return error(429, "rate limited", {"Retry-After": retry_after} if retry_after is not None else {})


def malformed() -> Reply:
    """HTTP 200 whose body is not JSON."""
    return Reply(body=b'{"id": "x", "choices": [ this is not json')


def slow(seconds: float, then: Reply | None = None) -> Reply:
    """Answer only after `seconds` (a timeout when longer than the client waits)."""
    r = then or report({"late": True})
    return Reply(r.status, r.body, r.headers, delay_s=seconds)


class FakeOpenAI:
    """Serve `script` replies in order, then `default` for every further request."""

    def __init__(self, script: list[Reply] | None = None, default: Reply | None = None):
        self.script = list(script or [])
        self.default = default or error(500, "script exhausted")
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"raw": raw.decode(errors="replace")}
                with fake._lock:
                    fake.requests.append({"path": self.path, "t": time.monotonic(), "body": body,
                                          "auth": self.headers.get("Authorization", "")})
                    reply = fake.script.pop(0) if fake.script else fake.default
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    reply = error(404, f"no route {self.path}")
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                data = reply.body or b""
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout): fine
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> "FakeOpenAI":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def dead_url() -> str:
    """A URL where nothing listens (connection refused): a dead endpoint."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


class DroppingServer:
    """An endpoint that accepts each connection and closes it at once, with no HTTP reply: it passes the harness's
    up-front reachability check (a TCP connect) and then fails every call without a status, as a server that dies
    or a proxy that drops the request does mid-campaign."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.close()

    def __enter__(self) -> "DroppingServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()
