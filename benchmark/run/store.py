"""The run directory: self-describing, append-only, atomic, resumable.

DIR/config.json            model, selection, seeds, versions (written once; a resume must match it)
DIR/results.jsonl          one ResultRecord per line, appended with fsync; a torn last line is ignored on read
                           (and cut off by the next append); any other bad line stops the read with its number
DIR/trajectories/*.json    the full trajectory of each (world, replicate), written to a temp file then renamed
DIR/artifacts/<key>/       files the agent wrote in its workspace
DIR/.harness.lock          held (flock) by the one harness writing the folder; names its pid, host and start time

One harness per folder: a second `run --resume` on the same --out (an operator restarting a "stuck" run) would
pay for the same worlds twice and interleave their artifacts. The lock is an flock, so the kernel releases it when
its holder dies: a killed harness's stale lock is taken over by the next one without any clean-up.
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
from datetime import datetime, timezone
from pathlib import Path

from benchmark.suite.canonical import _atomic_write
from benchmark.errors import BenchmarkError
from benchmark.run.records import ERROR_STATUSES, ResultRecord, Trajectory, score_mismatch

# Settings a resumed run must share with the recorded one: anything that changes what a result means.
RESUME_KEYS = ("model", "replicates", "seed", "reviewers", "judge", "limits", "worlds", "tracks", "levels", "suite")


def read_json_file(path: Path, what: str) -> dict:
    """A JSON object from a run folder file; a corrupt file is one sentence naming it, never a parse traceback."""
    try:
        data = json.loads(Path(path).read_bytes())
    except FileNotFoundError:
        raise
    except (ValueError, RecursionError) as exc:
        raise BenchmarkError(f"{path}: the {what} is not valid JSON ({str(exc)[:120]}); restore it from a backup "
                             "or start the run in a new --out folder") from None
    if not isinstance(data, dict):
        raise BenchmarkError(f"{path}: the {what} must be a JSON object; restore it or start the run in a new --out folder")
    return data


def init_run_dir(root: Path, config: dict, resume: bool, must_match: tuple[str, ...], force: bool = False) -> list[str]:
    """Create a run folder with its config.json, or, with `resume`, check the settings that must not change.

    Returns the keys that differ when `force` lets a changed configuration resume (config.json is then updated, and
    the old values are kept under `previous_configs`), so the change is on record rather than silent.
    """
    cfg_path = Path(root) / "config.json"
    if cfg_path.exists():
        if not resume:
            raise BenchmarkError(f"{root} already holds a run; pass --resume to continue it or choose another --out")
        old = read_json_file(cfg_path, "run configuration")
        differ = [k for k in must_match if _norm(old.get(k)) != _norm(config.get(k))]
        if differ and not force:
            what = "; ".join(f"field '{k}' was {old.get(k)!r}, now {config.get(k)!r}" for k in differ)
            raise BenchmarkError(f"{cfg_path}: --resume would change the run's configuration ({what}); resume with the "
                                 "recorded settings, use another --out, or pass --force-config to continue anyway")
        if differ:
            new = {**old, **{k: config.get(k) for k in differ},
                   "previous_configs": old.get("previous_configs", []) + [{k: old.get(k) for k in differ}]}
            _atomic_write(cfg_path, (json.dumps(new, indent=2, sort_keys=True) + "\n").encode())
        return differ
    Path(root).mkdir(parents=True, exist_ok=True)
    _atomic_write(cfg_path, (json.dumps(config, indent=2, sort_keys=True) + "\n").encode())
    return []


def _norm(v):
    """JSON round trip, so a tuple and the list config.json holds compare equal."""
    return json.loads(json.dumps(v, sort_keys=True, default=str))


def validation_reason(exc: BaseException) -> str:
    """One line naming the field and what is wrong with it (pydantic), else the error's first line."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError) and exc.errors():
        e = exc.errors()[0]
        where = ".".join(str(x) for x in e.get("loc", ())) or "(record)"
        return f"field '{where}': {str(e.get('msg', ''))[:200]}"
    return str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__


class HarnessLock:
    """An exclusive flock on DIR/.harness.lock for as long as one harness writes the folder; its holder's pid, host
    and start time are in the file, so a second harness can say who holds it."""

    NAME = ".harness.lock"

    def __init__(self, root: Path):
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / self.NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                who = json.loads(os.pread(fd, 4096, 0) or b"{}")
            except ValueError:
                who = {}
            os.close(fd)
            raise BenchmarkError(
                f"{root} is in use by another harness (pid {who.get('pid', '?')} on {who.get('host', '?')}, since "
                f"{who.get('since', '?')}); wait for it to finish or stop it, then --resume") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                  "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}).encode(), 0)
        self.fd: int | None = fd

    def close(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


MAX_RESULT_LINE_BYTES = 4 << 20  # one record: its grade's checks and an L3 row's rounds stay far below this
MAX_RESULT_LINES = 1_000_000  # a run writes one line per world and replicate, and one per re-run fault


def result_key(world_id: str, replicate: int) -> str:
    return f"{world_id}__r{replicate}"


class RunStore:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.trajectories = self.root / "trajectories"
        self.artifacts = self.root / "artifacts"
        self.results_path = self.root / "results.jsonl"
        self._lock = threading.Lock()
        self._holder: HarnessLock | None = None
        self._journal = None

    @classmethod
    def existing(cls, root: Path | str) -> "RunStore":
        """A finished or running run's folder, for the verbs that read one (grade, verify, ledger, leaderboard, view,
        export); a folder without results.jsonl is one sentence naming it, not a traceback."""
        store = cls(Path(root))
        if not store.results_path.exists():
            raise BenchmarkError(f"{root} holds no results.jsonl; pass the --out folder of a `run`")
        return store

    @property
    def journal(self):
        """The run's call journal (calls.jsonl, benchmark.run.journal), opened on first use."""
        if self._journal is None:
            from benchmark.run.journal import CallJournal

            self._journal = CallJournal(self.root)
        return self._journal

    def acquire(self) -> None:
        """Take the folder's exclusive harness lock, or stop at once naming who holds it."""
        if self._holder is None:
            self._holder = HarnessLock(self.root)

    def close(self) -> None:
        """Release the harness lock (the kernel also releases it when the process ends)."""
        if self._holder is not None:
            self._holder.close()
            self._holder = None

    def init(self, config: dict, resume: bool, force: bool = False, must_match: tuple[str, ...] = RESUME_KEYS) -> list[str]:
        """Lock the folder for this harness, then create or check its configuration."""
        self.acquire()
        try:
            differ = init_run_dir(self.root, config, resume, must_match, force)
        except BaseException:
            self.close()
            raise
        self.trajectories.mkdir(parents=True, exist_ok=True)
        self.artifacts.mkdir(parents=True, exist_ok=True)
        return differ

    def config(self) -> dict:
        return read_json_file(self.root / "config.json", "run configuration")

    def run_id(self) -> str:
        """The id ledgers use to refer to this run: config.json's run_id (the folder name at creation)."""
        try:
            return str(self.config().get("run_id") or self.root.resolve().name)
        except FileNotFoundError:
            return self.root.resolve().name

    def results(self, known_worlds: set[str] | None = None, check_scores: bool = True) -> list[ResultRecord]:
        """Every result line, the last record of a key winning (a fault re-run by --resume). Only a torn LAST line (a
        kill mid-write) is skipped (its world is re-run on resume); a bad line anywhere else stops the read, naming the
        line, because skipping it would silently drop a paid result and pay for it again on resume. So do a line longer
        than MAX_RESULT_LINE_BYTES (read in bounded pieces, never whole), more than MAX_RESULT_LINES lines, a second
        record for a key whose earlier record was a scored outcome (the harness never re-runs one: both lines named),
        and a row whose score does not follow from its own grade (`score_mismatch`: an edited score), unless
        `check_scores` is off (the re-grade that repairs it)."""
        if not self.results_path.exists():
            return []
        out: dict[str, ResultRecord] = {}
        where: dict[str, int] = {}
        with open(self.results_path, "rb") as fh:
            lineno = 0
            while True:
                raw = fh.readline(MAX_RESULT_LINE_BYTES + 1)
                if not raw:
                    break
                lineno += 1
                if len(raw) > MAX_RESULT_LINE_BYTES and not raw.endswith(b"\n"):
                    raise BenchmarkError(
                        f"{self.results_path}:{lineno}: line {lineno} is longer than {MAX_RESULT_LINE_BYTES} bytes; no "
                        "result record is that long: restore the file from a backup, or delete that line to re-run its "
                        "world with --resume")
                if lineno > MAX_RESULT_LINES:
                    raise BenchmarkError(
                        f"{self.results_path}:{lineno}: more than {MAX_RESULT_LINES} result lines; a run writes one per "
                        "world and replicate (and one per re-run fault): restore the file from a backup")
                if not raw.strip():
                    continue
                last = not raw.endswith(b"\n") and not fh.peek(1)
                try:
                    rec = ResultRecord.model_validate_json(raw)
                except (ValueError, RecursionError) as exc:
                    if last:
                        continue
                    why = validation_reason(exc)
                    raise BenchmarkError(
                        f"{self.results_path}:{lineno}: line {lineno} is not a valid result record ({why}); restore the "
                        f"file from a backup, or delete that line to re-run its world with --resume") from None
                if known_worlds is not None and rec.world_id not in known_worlds:
                    raise BenchmarkError(
                        f"{self.results_path}:{lineno}: world '{rec.world_id[:120]}' is not in this suite or campaign; "
                        "the line was not written by this benchmark: restore the file or delete the line")
                why = score_mismatch(rec) if check_scores else None
                if why:
                    raise BenchmarkError(
                        f"{self.results_path}:{lineno}: {why}: the row was edited after grading; re-grade the run with "
                        f"`python -m benchmark grade {self.root}` (it rewrites the row from its trajectory) or restore "
                        "the file")
                key = result_key(rec.world_id, rec.replicate)
                prev = out.get(key)
                if prev is not None and prev.status not in ERROR_STATUSES and \
                        prev.model_dump(exclude={"chain"}) != rec.model_dump(exclude={"chain"}):
                    raise BenchmarkError(
                        f"{self.results_path}:{lineno}: a second record of {key} (line {where[key]} already holds its "
                        f"scored result, status {prev.status}); the harness never re-runs a scored world: delete the "
                        "line that should not count, or restore the file from a backup")
                out[key], where[key] = rec, lineno
        return list(out.values())

    def done_keys(self) -> set[str]:
        """Keys whose latest record is a scored outcome; faults (ERROR_STATUSES) are retried by --resume."""
        return {result_key(r.world_id, r.replicate) for r in self.results() if r.status not in ERROR_STATUSES}

    def save_trajectory(self, traj: Trajectory) -> str:
        rel = f"trajectories/{result_key(traj.world_id, traj.replicate)}.json"
        _atomic_write(self.root / rel, traj.model_dump_json(indent=1).encode())
        return rel

    def load_trajectory(self, rel: str) -> Trajectory:
        path = self.root / rel
        root = self.root.resolve()
        if not path.resolve().is_relative_to(root) or path.is_symlink():
            raise BenchmarkError(f"{self.results_path}: trajectory {rel!r} leaves the run folder {self.root}; restore "
                                 "the file, or delete that line and re-run its world with --resume")
        try:
            return Trajectory.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            raise BenchmarkError(f"{path} is missing (named by {self.results_path}); restore it, or delete its "
                                 "line in results.jsonl and re-run that world with --resume") from None
        except (ValueError, RecursionError) as exc:
            why = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
            raise BenchmarkError(f"{path}: the trajectory is not valid ({why}); restore it from a backup, or delete "
                                 "its line in results.jsonl and re-run that world with --resume") from None

    def append(self, rec: ResultRecord) -> None:
        """One row, appended and fsynced, chained to the last complete row (benchmark.run.chain)."""
        from benchmark.run.chain import chained_line, last_chain

        from benchmark.run.journal import current_attempt

        if isinstance(rec, ResultRecord):  # an episode row (a grounding or pivotal record has no attempts)
            rec.attempt = rec.attempt or current_attempt()
            lost = self.journal.lost_usage(result_key(rec.world_id, rec.replicate), rec.attempt)
            if lost:  # what the endpoint was asked for under this pair that no row counts (benchmark.run.journal)
                rec.lost_usage = lost
        body = rec.model_dump_json(by_alias=True, exclude={"chain"}).encode()
        with self._lock:
            with open(self.results_path, "ab") as fh:
                self._close_torn_tail(fh)
                fh.write(chained_line(body, last_chain(self.results_path)))
                fh.flush()
                os.fsync(fh.fileno())

    def _close_torn_tail(self, fh) -> None:
        """A previous kill cut the last line: cut the fragment off (it is no record, its world is re-run), or, if it
        happens to be a whole record missing only its newline, close it off; so every line but the last is valid."""
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return
        with open(self.results_path, "rb") as tail:
            tail.seek(-1, os.SEEK_END)
            if tail.read(1) == b"\n":
                return
            pos, frag = size, b""
            while pos > 0 and b"\n" not in frag:  # read back to the last newline only, not the whole file
                step = min(1 << 16, pos)
                pos -= step
                tail.seek(pos)
                frag = tail.read(step) + frag
        cut = frag.rfind(b"\n") + 1
        try:
            ResultRecord.model_validate_json(frag[cut:])
            fh.write(b"\n")
        except (ValueError, RecursionError):
            fh.truncate(pos + cut)
