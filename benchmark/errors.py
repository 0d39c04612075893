"""One exception type whose message is one clear sentence: what failed, where (file, field, line) and the fix."""
from __future__ import annotations


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
