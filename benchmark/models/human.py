"""A person as the agent: `run --model human/<name>` (issue 41 item 10, the human baseline).

A research group measures its own scientists on the same worlds under the same rules: the same prompt, the same
sandbox kernel (every cell runs sealed, as a model's does), the same step budget and limits, the same grading and
records. Only the one who decides differs. Each model call of the episode becomes a turn at the terminal:

  * what the agent would read since the last turn (the prompt first; then each cell's output, or the harness's
    nudge) is printed on stderr;
  * the person types Python and ends it with a line `.run`: it runs in the sandbox as a `run_python` call;
  * or types `.report`, then the final answer (the report JSON the prompt asks for), then a line `.end`;
  * `.quit` (or the end of input) gives up the world: an empty answer, graded like any model's.

Lines are read from stdin, so a script can drive it (tests do). No tokens are counted: a person's cost is not a
model's, and the row says `human/` so every table shows it as a baseline. One world at a time: `run` refuses
`--concurrency` above 1 for a human (two worlds cannot share one keyboard).
"""
from __future__ import annotations

import sys
import threading
from typing import Any, TextIO

from benchmark.models.reply import ProviderError, Reply

PROVIDER = "human"
HELP = ("Type Python to run in the sandbox and end it with a line `.run`; or `.report`, your final answer (the JSON "
        "the prompt asks for), then `.end`; `.quit` gives up this world.")
MAX_SHOWN = 20_000  # a cell's output is already capped by the sandbox; a prompt (an L3 dossier) may be longer


def is_human(model: str) -> bool:
    return model.startswith(PROVIDER + "/")


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return str(content)


class HumanAgent:
    """Turns each call into a turn at the terminal (`out` shows, `inp` reads; stderr and stdin by default)."""

    def __init__(self, inp: TextIO | None = None, out: TextIO | None = None) -> None:
        self.inp, self.out = inp, out
        self._lock = threading.Lock()  # one keyboard: turns of concurrent callers never interleave

    def _show(self, text: str) -> None:
        out = self.out or sys.stderr
        out.write(text + "\n")
        out.flush()

    def _read_line(self) -> str | None:
        line = (self.inp or sys.stdin).readline()
        return None if line == "" else line.rstrip("\n")

    def complete(self, model: str, messages: list, params: dict, metadata: dict) -> Reply:
        with self._lock:
            return self._turn(model, messages, params, metadata)

    def _turn(self, model: str, messages: list, params: dict, metadata: dict) -> Reply:
        last_mine = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
        new = messages[last_mine + 1:]
        world = metadata.get("world_id") or "this world"
        self._show(f"\n===== {world}: your turn =====")
        for m in new:
            role = m.get("role")
            text = _text(m.get("content"))
            if len(text) > MAX_SHOWN:
                text = text[:MAX_SHOWN] + f"\n... [{len(text) - MAX_SHOWN} more characters not shown]"
            self._show(f"--- {'cell output' if role == 'tool' else role} ---\n{text}")
        may_run = bool(params.get("tools")) and params.get("tool_choice") != "none"
        self._show(HELP if may_run else "Give your final answer now: `.report`, the JSON, then `.end`.")
        while True:
            self._show("> ")
            first = self._read_line()
            if first is None or first.strip() == ".quit":
                return _reply(model, content="")
            if first.strip() == "":
                continue
            if first.strip() == ".report":
                return _reply(model, content=self._block(".end"))
            if first.strip() == ".run":
                continue  # no code typed
            more = self._block(".run")
            code = "\n".join([first, more]) if more else first
            if not may_run:
                self._show("This turn takes no code: give your final answer (`.report` ... `.end`).")
                continue
            return _reply(model, code=code)

    def _block(self, end: str) -> str:
        out = []
        while True:
            line = self._read_line()
            if line is None or line.strip() == end:
                return "\n".join(out)
            out.append(line)


def _reply(model: str, content: str | None = None, code: str | None = None) -> Reply:
    if content is None and code is None:
        raise ProviderError(500, "a human turn ended with neither code nor an answer")
    return Reply.turn(model, "human", content=content, code=code)
