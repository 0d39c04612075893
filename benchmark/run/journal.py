"""The call journal: every paid request of an episode, written when it is sent and when its reply returns, so the
tokens of an attempt whose record is lost still reach $/task (issue 40).

A row of results.jsonl counts the tokens of the episode attempt that wrote it. Everything else the endpoint was
asked for under the same (world, replicate) is that row's `lost_usage`:
  * the calls of an earlier attempt whose record never came: a Ray worker killed with kill -9 and re-run by Ray, a
    run killed mid-episode and finished by `--resume`, or a fault row that `--resume` replaced (the last row of a
    pair is the one that counts, so the replaced row's own tokens would otherwise vanish);
  * a request sent and never answered (a timeout, a dropped connection, a killed process): the endpoint may have
    billed it, so its prompt is counted with the model's tokenizer and flagged estimated. A request answered with an
    HTTP error status (429, 500) is not billed and counts nothing.

Events (one JSON line each, in `calls.jsonl` of the run folder; a Ray worker sends them to the head, which writes
them before it records the episode): `sent` (estimated prompt tokens), `returned` (the reply's usage) and `refused`
(an error status). Offline models (local, scripted, human) are free and are not journaled.
"""
from __future__ import annotations

import contextvars
import json
import os
import sys
import threading
import uuid
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Literal

from pydantic import BaseModel, NonNegativeInt, ValidationError

from benchmark.run.records import RoleUsage

JOURNAL_NAME = "calls.jsonl"
MAX_LINE = 4096  # an event is a few hundred bytes; a longer line is no event of ours


class CallEvent(BaseModel):
    """One event of one request of one episode attempt."""

    key: str  # result_key(world, replicate)
    attempt: str  # the episode attempt (a new id each time the episode starts, on any machine)
    call: NonNegativeInt  # the request's number within the attempt
    event: Literal["sent", "returned", "refused"]
    role: str = "agent"
    model: str = ""
    tokens_in: NonNegativeInt = 0
    tokens_out: NonNegativeInt = 0
    estimated: bool = False
    http_status: int | None = None


Sink = Callable[[dict], None]


class _Open:
    def __init__(self, key: str, attempt: str, sink: Sink):
        self.key, self.attempt, self.sink = key, attempt, sink
        self.n = 0
        self.warned = False
        self.lock = threading.Lock()

    def next_call(self) -> int:
        with self.lock:
            self.n += 1
            return self.n


_CURRENT: contextvars.ContextVar[_Open | None] = contextvars.ContextVar("benchmark_call_journal", default=None)


@contextmanager
def episode_attempt(key: str, sink: Sink | None) -> Iterator[str | None]:
    """Journal the requests made inside under `key` and a new attempt id (yielded). An attempt already open for the
    same key (a Ray worker opens one before run_guarded does) is kept, so its events go where the head reads them."""
    cur = _CURRENT.get()
    if cur is not None and cur.key == key:
        yield cur.attempt
        return
    if sink is None:
        yield None
        return
    token = _CURRENT.set(_Open(key, uuid.uuid4().hex[:16], sink))
    try:
        yield _CURRENT.get().attempt
    finally:
        _CURRENT.reset(token)


def current_attempt() -> str | None:
    cur = _CURRENT.get()
    return cur.attempt if cur is not None else None


class Request:
    """One request being journaled: `sent` is written before it goes out, then `returned` or `refused`."""

    def __init__(self, role: str, model: str, prompt_tokens: Callable[[], int]):
        self.cur = _CURRENT.get()
        self.base = {"role": role, "model": model}
        if self.cur is None:
            return
        self.n = self.cur.next_call()
        try:
            n_in = int(prompt_tokens())
        except Exception:  # noqa: BLE001 - a tokenizer that fails leaves the estimate at 0, never the call
            n_in = 0
        self._emit("sent", tokens_in=n_in, estimated=True)

    def _emit(self, event: str, **fields) -> None:
        """Hand the event to the attempt's sink; a sink that fails (a full disk, a lost head) is said once on
        stderr and never fails the request: the record itself still counts the calls that return."""
        if self.cur is None:
            return
        try:
            self.cur.sink({"key": self.cur.key, "attempt": self.cur.attempt, "call": self.n, "event": event,
                           **self.base, **fields})
        except Exception as exc:  # noqa: BLE001 - see docstring
            if not self.cur.warned:
                self.cur.warned = True
                print(f"warning: the call journal of {self.cur.key} could not be written ({type(exc).__name__}: "
                      f"{str(exc)[:200]}); requests whose reply is lost may go uncounted", file=sys.stderr)

    def returned(self, tokens_in: int, tokens_out: int, estimated: bool) -> None:
        self._emit("returned", tokens_in=tokens_in, tokens_out=tokens_out, estimated=estimated)

    def refused(self, http_status: int) -> None:
        self._emit("refused", http_status=http_status)


class CallJournal:
    """`calls.jsonl` of a run folder: appended and fsynced per event (thread-safe), indexed by key in memory."""

    def __init__(self, root: Path):
        self.path = Path(root) / JOURNAL_NAME
        self._lock = threading.Lock()
        self._by_key: dict[str, list[CallEvent]] = defaultdict(list)
        self._loaded = False

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        if not self.path.exists():
            return
        with open(self.path, "rb") as fh:
            for line in fh:  # a torn last line (a killed writer) or a foreign line is no event
                if len(line) > MAX_LINE or not line.endswith(b"\n"):
                    continue
                try:
                    ev = CallEvent.model_validate_json(line)
                except (ValidationError, ValueError):
                    continue
                self._by_key[ev.key].append(ev)

    def write(self, event: dict) -> None:
        ev = CallEvent.model_validate(event)
        line = ev.model_dump_json().encode() + b"\n"
        with self._lock:
            self._load()
            with open(self.path, "ab") as fh:
                if fh.tell() > 0:  # a torn tail left by a kill: start this event on its own line
                    with open(self.path, "rb") as tail:
                        tail.seek(-1, os.SEEK_END)
                        if tail.read(1) != b"\n":
                            fh.write(b"\n")
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())
            self._by_key[ev.key].append(ev)

    def lost_usage(self, key: str, attempt: str | None) -> dict[str, RoleUsage]:
        """Usage the endpoint was asked for under `key` that the row of `attempt` does not count (module doc), by
        role ("agent", or "role:model" for the others)."""
        with self._lock:
            self._load()
            events = list(self._by_key.get(key, []))
        calls: dict[tuple[str, int], dict[str, CallEvent]] = defaultdict(dict)
        for ev in events:
            calls[(ev.attempt, ev.call)][ev.event] = ev
        out: dict[str, RoleUsage] = {}
        for (att, _), evs in sorted(calls.items()):
            if "refused" in evs:
                continue
            ret = evs.get("returned")
            if ret is not None and att == attempt:
                continue  # counted in the row itself
            ev = ret or evs.get("sent")
            if ev is None:
                continue
            name = "agent" if ev.role == "agent" else f"{ev.role}:{ev.model}"
            u = out.setdefault(name, RoleUsage(model=ev.model))
            u.tokens_in += ev.tokens_in
            u.tokens_out += ev.tokens_out if ret is not None else 0
            u.calls += 1
            u.estimated_calls += int(ret is None or ret.estimated)
        return out


class JournalBuffer:
    """Held by the head as a Ray actor: workers add events as they happen (their scratch folder dies with them), the
    head drains them into its CallJournal before it records an episode."""

    def __init__(self) -> None:
        self.events: list[dict] = []

    def add(self, event: dict) -> None:
        if len(json.dumps(event, default=str)) <= MAX_LINE:
            self.events.append(event)

    def drain(self) -> list[dict]:
        out, self.events = self.events, []
        return out
