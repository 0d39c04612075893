"""A digest chain over results.jsonl (issue 40): each row carries the sha256 of the previous row's chain and its own
bytes, so an edited, removed, inserted or reordered row is named by `leaderboard --verify`.

The chain is computed over the exact bytes written (the row's JSON without its `chain` field, which the writer
appends last), never over a re-serialisation, so it holds whatever library version reads it. It is a tamper-evident
record, not a signature: whoever can write the file can also recompute the chain; it catches an edit that did not.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

_TAIL = re.compile(rb',"chain":"([0-9a-f]{64})"\}\s*$')


def link(prev: str | None, body: bytes) -> str:
    """The chain value of a row whose JSON (without `chain`) is `body`, after a row whose chain is `prev`."""
    return hashlib.sha256((prev or "").encode() + b"\n" + body).hexdigest()


def chained_line(body: bytes, prev: str | None) -> bytes:
    """The line to write: `body` (a JSON object without `chain`) with its chain appended as the last field."""
    body = body.rstrip()
    assert body.endswith(b"}"), "a result row is a JSON object"
    return body[:-1] + b',"chain":"' + link(prev, body).encode() + b'"}\n'


def chain_of(line: bytes) -> tuple[bytes, str | None]:
    """(the row's bytes without its chain, its chain) of a written line; (line, None) for a row without one."""
    m = _TAIL.search(line)
    if not m:
        return line.rstrip(), None
    return line[:m.start()] + b"}", m.group(1).decode()


def last_chain(path: Path) -> str | None:
    """The chain of the file's last complete line (None for an empty file or a row without one), read from the end."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            pos, buf = size, b""
            while pos > 0 and buf.count(b"\n") < 2:
                step = min(1 << 16, pos)
                pos -= step
                fh.seek(pos)
                buf = fh.read(step) + buf
    except FileNotFoundError:
        return None
    lines = [x for x in buf.split(b"\n") if x.strip()]
    if not buf.endswith(b"\n") and lines:
        lines = lines[:-1]  # a torn last line is cut before the next append
    return chain_of(lines[-1])[1] if lines else None


def verify(path: Path) -> list[str]:
    """Problems of a results.jsonl's chain, one sentence each with file:line: a row whose chain does not follow from
    the rows before it (edited, removed, inserted or reordered), or rows without a chain after rows with one. A file
    written before chains (no row has one) gives one note."""
    problems, prev, seen_chain, unchained = [], None, False, 0
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            if not line.endswith(b"\n"):
                break  # a torn last line: no record
            body, chain = chain_of(line)
            if chain is None:
                unchained += 1
                if seen_chain:
                    problems.append(f"{path}:{lineno}: the row has no digest chain after chained rows: it was added by "
                                    "hand or by another tool")
                continue
            seen_chain = True
            if chain != link(prev, body):
                problems.append(f"{path}:{lineno}: the row's digest does not follow from the rows before it: this row "
                                "or the one before it was edited, removed, inserted or moved")
            prev = chain
    if not seen_chain and unchained:
        problems.append(f"{path}: no row carries a digest chain (written before the harness kept one); nothing to verify")
    return problems
