"""A trajectory's chat (OpenAI-style dicts) as Inspect AI chat messages.

Every code cell the agent ran becomes a `run_python` tool call on its assistant message, and the cell's output the
tool message answering it, so the Inspect viewer shows code and output as one exchange. A native tool call already
has that shape. A fenced ```python block (a model without native tool calling, cell `via="fenced_code"`) is turned
into the same shape: the harness answered it with a user turn (there was no call id), which is exported as the tool
message of a call id made here (`fenced-<n>`). The cell's error, violation and timing go into the tool message.
"""
from __future__ import annotations

import json
from typing import Any

from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser
from inspect_ai.tool import ToolCall, ToolCallError
from inspect_ai.tool._tool_call import ToolCallContent

from benchmark.run.agent import FENCED_RESULT, fenced_code
from benchmark.run.records import CellRecord, Trajectory

TOOL = "run_python"
_FENCED_PREFIX = FENCED_RESULT.split("{out}")[0]


def _text(content: Any) -> str:
    """Message content as text: OpenAI content parts are joined, None is empty."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def _view(code: str) -> ToolCallContent:
    return ToolCallContent(format="markdown", content=f"```python\n{code}\n```")


def _tool_call(raw: dict[str, Any]) -> ToolCall:
    fn = raw.get("function") or {}
    args_text = fn.get("arguments") or "{}"
    try:
        args = json.loads(args_text) if isinstance(args_text, str) else args_text
        problem = None if isinstance(args, dict) else "arguments are not a JSON object"
    except (ValueError, RecursionError) as exc:
        args, problem = None, f"arguments are not valid JSON ({str(exc)[:120]})"
    if not isinstance(args, dict):
        args = {"raw": args_text if isinstance(args_text, str) else json.dumps(args_text)}
    code = args.get("code")
    return ToolCall(id=str(raw.get("id") or ""), function=str(fn.get("name") or ""), arguments=args,
                    parse_error=problem, view=_view(code) if isinstance(code, str) else None)


def _cell_meta(cell: CellRecord) -> dict[str, Any]:
    return {"step": cell.step, "wall_s": cell.wall_s, "truncated": cell.truncated, "killed": cell.killed,
            "restarted": cell.restarted, "violation": cell.violation.model_dump() if cell.violation else None,
            **({"via": cell.via} if cell.via else {})}


def _cell_error(cell: CellRecord) -> ToolCallError | None:
    if cell.violation is not None:
        return ToolCallError("permission", f"sandbox violation: {cell.violation.model_dump_json()}"[:2000])
    if cell.error:
        return ToolCallError("unknown", cell.error[:2000])
    return None


def chat_messages(traj: Trajectory) -> list[ChatMessage]:
    """The trajectory's messages in Inspect's types, each code cell as a tool call answered by its output."""
    native = [c for c in traj.cells if c.via is None]
    fenced = [c for c in traj.cells if c.via == "fenced_code"]
    calls: dict[str, ToolCall] = {}
    out: list[ChatMessage] = []
    msgs = traj.messages
    i = n_fenced = 0
    while i < len(msgs):
        m = msgs[i]
        role, text = m.get("role"), _text(m.get("content"))
        source = "input" if i < 2 and role in ("system", "user") else None
        if role == "system":
            out.append(ChatMessageSystem(content=text, source=source))
        elif role == "assistant":
            tcs = [_tool_call(tc) for tc in (m.get("tool_calls") or [])]
            nxt = msgs[i + 1] if i + 1 < len(msgs) else {}
            if (not tcs and fenced and nxt.get("role") == "user" and _text(nxt.get("content")).startswith(_FENCED_PREFIX)
                    and fenced_code(text) is not None):
                cell = fenced.pop(0)
                n_fenced += 1
                call = ToolCall(id=f"fenced-{n_fenced}", function=TOOL,
                                arguments={"code": cell.code}, view=_view(cell.code))
                out.append(ChatMessageAssistant(content=text, tool_calls=[call], model=traj.model, source="generate",
                                                metadata={"via": "fenced_code"}))
                out.append(ChatMessageTool(content=_text(nxt.get("content")), tool_call_id=call.id, function=TOOL,
                                           error=_cell_error(cell), metadata=_cell_meta(cell)))
                i += 2
                continue
            calls.update({tc.id: tc for tc in tcs})
            out.append(ChatMessageAssistant(content=text, tool_calls=tcs or None, model=traj.model, source="generate"))
        elif role == "tool":
            call_id = str(m.get("tool_call_id") or "")
            tc = calls.get(call_id)
            cell = None
            if tc is not None and tc.function == TOOL and native and tc.arguments.get("code") == native[0].code:
                cell = native.pop(0)  # cells are recorded in call order; a call that ran nothing has no cell
            out.append(ChatMessageTool(content=text, tool_call_id=call_id or None, function=tc.function if tc else None,
                                       error=_cell_error(cell) if cell else None,
                                       metadata=_cell_meta(cell) if cell else None))
        else:  # user, and any role an older harness wrote
            out.append(ChatMessageUser(content=text, source=source))
        i += 1
    return out


def transcript_events(messages: list[ChatMessage], model: str, at: str | None, score: Any = None,
                      target: str | None = None) -> list:
    """The chat as Inspect transcript events: a ModelEvent per assistant turn (its input the conversation before it,
    its output the turn), a ToolEvent per code cell answered, and the grading as a ScoreEvent, so Inspect's
    transcript tab shows the model calls, the tool calls and the grade. `at` (ISO time the episode started) stamps
    every event, so an export of the same records is the same bytes."""
    import datetime as dt

    from inspect_ai.event import ModelEvent, ScoreEvent, ToolEvent
    from inspect_ai.model import GenerateConfig, ModelOutput
    from inspect_ai.tool import ToolInfo, ToolParam, ToolParams

    when = dt.datetime.fromisoformat(at) if at else dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    tool = ToolInfo(name=TOOL, description="Execute Python code in the persistent sandbox kernel",
                    parameters=ToolParams(properties={"code": ToolParam(type="string")}, required=["code"]))
    events: list = []
    calls: dict[str, ToolCall] = {}
    for i, m in enumerate(messages):
        if isinstance(m, ChatMessageAssistant):
            out = ModelOutput.from_message(m)
            events.append(ModelEvent(model=model, input=list(messages[:i]), tools=[tool], tool_choice="auto",
                                     config=GenerateConfig(), output=out, timestamp=when, working_start=0.0))
            calls.update({tc.id: tc for tc in (m.tool_calls or [])})
        elif isinstance(m, ChatMessageTool):
            tc = calls.get(m.tool_call_id or "")
            events.append(ToolEvent(id=m.tool_call_id or f"call-{i}", function=m.function or TOOL,
                                    arguments=dict(tc.arguments) if tc else {}, view=tc.view if tc else None,
                                    result=m.text, error=m.error, timestamp=when, working_start=0.0))
    if score is not None:
        events.append(ScoreEvent(score=score, target=target, scorer="discern", timestamp=when, working_start=0.0))
    return events
