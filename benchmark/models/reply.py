"""The reply of an offline provider, in the shape litellm gives hosted replies (OpenAI chat completions).

Offline providers (`local/`, `scripted/`) answer in-process without importing litellm (its import alone costs ~5 s
of CPU in every process); the harness reads their replies through the same attributes it reads a litellm
`ModelResponse` by: `choices[0].message.content`, `.tool_calls[i].id / .function.name / .function.arguments`,
`choices[0].finish_reason` and `usage.prompt_tokens / completion_tokens`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class ProviderError(Exception):
    """An offline provider refused or failed a call; `status_code` is the HTTP status a server would have sent."""

    def __init__(self, status_code: int, message: str):
        super().__init__(message)
        self.status_code = status_code
        self.message = message


@dataclass(frozen=True)
class Function:
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolCall:
    id: str
    function: Function
    type: str = "function"


@dataclass(frozen=True)
class Message:
    content: str | None
    tool_calls: list[ToolCall] | None = None
    role: str = "assistant"


@dataclass(frozen=True)
class Choice:
    message: Message
    finish_reason: str | None
    index: int = 0


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Reply:
    id: str
    model: str
    choices: list[Choice]
    usage: Usage = field(default_factory=Usage)

    @classmethod
    def from_openai(cls, d: dict[str, Any], model: str, rid: str) -> "Reply":
        """A chat-completions body (a dict as an OpenAI-compatible server sends it) as a Reply."""
        choices = []
        for i, c in enumerate(d.get("choices") or []):
            m = c.get("message") or {}
            calls = [ToolCall(id=str(t.get("id") or ""), type=str(t.get("type") or "function"),
                              function=Function(name=str((t.get("function") or {}).get("name") or ""),
                                                arguments=str((t.get("function") or {}).get("arguments") or "")))
                     for t in m.get("tool_calls") or []]
            choices.append(Choice(index=i, finish_reason=c.get("finish_reason"),
                                  message=Message(content=m.get("content"), tool_calls=calls or None,
                                                  role=m.get("role") or "assistant")))
        u = d.get("usage") or {}
        return cls(id=str(d.get("id") or rid), model=model, choices=choices,
                   usage=Usage(int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0)))

    @classmethod
    def turn(cls, model: str, id_prefix: str, content: str | None = None, code: str | None = None) -> "Reply":
        """An offline agent's turn: a final answer (`content`), or one `run_python` call running `code`."""
        import json
        import uuid

        calls = None
        if code is not None:
            calls = [ToolCall(id=f"call_{uuid.uuid4().hex[:10]}",
                              function=Function(name="run_python", arguments=json.dumps({"code": code})))]
        return cls(id=f"{id_prefix}-{uuid.uuid4().hex[:12]}", model=model,
                   choices=[Choice(message=Message(content=content, tool_calls=calls),
                                   finish_reason="tool_calls" if calls else "stop")])
