"""A sandbox started when it helps: behind a hosted model's first call, or at the first cell (issue 20).

An episode's first model call needs only the prompt. A hosted model takes a second or more to answer it, and a
sandbox a fraction of that to start (several starting at once on a small machine take longer), so with a hosted
model the sandbox starts on a keeper thread as the episode begins (`eager`) and the first cell waits for it, but
only while a core is idle (`sandbox.pool.idle_cores`, measured on the keeper thread): on busy cores an early start
moves no work out of the way, and a start the episode never uses (a report without a cell, a refusal) is CPU taken
from the worlds that run (issue 42: at --concurrency 16 against a 1 s endpoint, 16 unused starts made the run
slower than at 4). There the sandbox starts at the first cell. An in-process model (the local LLM, a scripted
agent) computes on this machine's own cores, where a start beside it only competes for them; its sandbox starts at
the first cell. Either way an episode that ends before its first cell
(a report with no analysis, a refusal, a model error) never waits for a sandbox: nothing can have been written in
its /workspace, so there is nothing to collect, and a sandbox that was started is torn down behind it.

The keeper thread lives as long as the sandbox: bwrap's --die-with-parent follows the *thread* that started it
(sandbox/pool.py). `wait_all()` waits for every keeper still tearing down (the run calls it before it returns, so
a finished run leaves no sandbox process behind).

A start that fails is raised at the first cell (the BenchmarkError `Sandbox.start()` raises), where the episode
records it as a sandbox error with the model calls it made (benchmark.run.agent).
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

from sandbox.bwrap import Sandbox

_KEEPERS: set[threading.Thread] = set()
_KEEPERS_LOCK = threading.Lock()


def _cores_idle() -> bool:
    """Whether a core is idle now (a QUIET_S sample of /proc/stat), as the pool judges a pre-start worth it."""
    from sandbox.pool import IDLE_MIN, idle_cores

    return idle_cores() >= IDLE_MIN


class DeferredSandbox:
    """`Sandbox` started by a keeper thread (at once when `eager` and a core is idle, else at the first cell);
    `run_python` and `collect` wait for it. Use as a context manager, as `Sandbox`."""

    def __init__(self, sandbox: Sandbox, eager: bool = True):
        self.sandbox = sandbox
        self.eager = eager
        self._go = threading.Event()  # start now: set by the first cell (or the episode's end)
        self._ready = threading.Event()  # the start finished (or failed, or never happened)
        self._release = threading.Event()  # the episode is done with it
        self._error: BaseException | None = None
        self._waited = False  # whether a cell (or a collection) needed the sandbox
        self._thread = threading.Thread(target=self._keep, name=f"sandbox-{sandbox.label}", daemon=True)

    # -- lifecycle
    def __enter__(self) -> "DeferredSandbox":
        with _KEEPERS_LOCK:
            _KEEPERS.add(self._thread)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        """Hand the sandbox back to its keeper, which tears it down; waited for when a cell ran (the world's
        processes and files are then gone before the episode goes on), not when none did."""
        self._release.set()
        self._go.set()  # wakes a lazy keeper that never started
        if self._waited:
            self._thread.join()

    def _keep(self) -> None:
        try:
            if not (self.eager and _cores_idle()):
                self._go.wait()
            if not self._release.is_set():
                try:
                    self.sandbox.start()
                except BaseException as exc:  # noqa: BLE001 - raised at the first cell, where the episode records it
                    self._error = exc
            self._ready.set()
            self._release.wait()
            self.sandbox.close()
        finally:
            self._ready.set()
            with _KEEPERS_LOCK:
                _KEEPERS.discard(threading.current_thread())

    @property
    def used(self) -> bool:
        """Whether a cell or a collection needed the sandbox."""
        return self._waited

    def wait(self) -> Sandbox:
        """The started sandbox (starting it if it is lazy, waiting for its start); its start's error if it failed."""
        self._waited = True
        self._go.set()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self.sandbox

    # -- what the episode uses
    def run_python(self, code: str):
        return self.wait().run_python(code)

    def collect(self, dest: Path, **kw) -> list[str]:
        """The agent's files: none, without waiting, when no cell ran (the workspace holds only the world's inputs),
        and none when the start failed (the episode recorded that)."""
        if not self._waited:
            return []
        self._ready.wait()
        return [] if self._error is not None else self.sandbox.collect(dest, **kw)

    @property
    def world_dir(self) -> Path | None:
        return self.sandbox.world_dir

    @property
    def violations(self):
        return self.sandbox.violations

    @property
    def collect_log(self) -> list[str]:
        return self.sandbox.collect_log

    @property
    def collect_summary(self) -> dict:
        return self.sandbox.collect_summary


def wait_all(timeout: float = 60.0) -> None:
    """Wait (at most `timeout` seconds) for every keeper still tearing its sandbox down."""
    deadline = time.monotonic() + timeout
    while True:
        with _KEEPERS_LOCK:
            alive = [t for t in _KEEPERS if t.is_alive()]
        left = deadline - time.monotonic()
        if not alive or left <= 0:
            return
        alive[0].join(left)
