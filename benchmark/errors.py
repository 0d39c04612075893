"""One exception type whose message is one clear sentence: what failed, where (file, field, line) and the fix."""
from __future__ import annotations

import re


class BenchmarkError(Exception):
    """An expected failure the CLI prints as one sentence, never as a traceback."""


class ManifestError(BenchmarkError):
    """A manifest (YAML) or other file format failed validation."""

    def __init__(self, path, field: str, reason: str, line: int | None = None):
        self.path, self.field, self.reason, self.line = str(path), field, reason, line
        where = f"{self.path}" + (f":{line}" if line else "")
        super().__init__(f"{where}: field '{field}': {reason}")


class LockMismatch(BenchmarkError):
    """A world's files no longer match its lock."""


# ANSI/VT escape sequences (CSI, OSC, DCS/SOS/PM/APC strings, two-byte ESC forms), then any other C0/C1 control
# character except newline and tab.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[PX^_][^\x1b]*(?:\x1b\\)?|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe_text(text: object) -> str:
    """Agent or file text made safe for a terminal: escape sequences removed, other control bytes shown as \\xNN.

    Why: an agent's report or a model name reaches the adjudicator's terminal; it must not be able to clear the
    screen, move the cursor, retitle the window or fake output.
    """
    s = _ESCAPES.sub("", str(text))
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", s)


def safe_markup(text: object) -> str:
    """safe_text, then rich markup escaped, for text shown through a rich Console or Table."""
    from rich.markup import escape

    return escape(safe_text(text))
