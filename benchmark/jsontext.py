"""JSON text helpers shared by the protocols and the model providers (neutral: imports nothing from benchmark).

The L3 protocol closes a role's answer cut by the token cap before parsing it; the local provider closes a
grammar-constrained tool call cut the same way. Both import this module, so no provider imports a protocol.
"""
from __future__ import annotations


def close_json(text: str) -> str | None:
    """Close a JSON object cut mid-way (a reply that hit the token cap): end an open string, drop a dangling key or
    separator, close open arrays and objects. None when the text holds no object start."""
    i = text.find("{")
    if i < 0:
        return None
    s = text[i:]
    stack, in_str, esc = [], False, False
    for ch in s:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
    if not stack and not in_str:
        return s
    if in_str:
        s = s[:-1] if esc else s
        s += '"'
    s = s.rstrip()
    # a dangling key ("key" or "key":) or separator cannot be closed into valid JSON: drop it
    for _ in range(3):
        if s.endswith((",", ":")):
            s = s[:-1].rstrip()
        if s.endswith(":"):
            continue
        if stack and stack[-1] == "}" and s.endswith('"'):
            j = s.rfind('"', 0, len(s) - 1)
            before = s[:j].rstrip()
            if before.endswith((",", "{")):  # a lone key, not a value
                s = before.rstrip(",").rstrip()
        break
    return s + "".join(reversed(stack))
