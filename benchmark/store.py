"""The run directory: self-describing, append-only, atomic, resumable.

DIR/config.json            model, selection, seeds, versions (written once; a resume must match it)
DIR/results.jsonl          one ResultRecord per line, appended with fsync; a torn last line is ignored on read
                           (and cut off by the next append); any other bad line stops the read with its number
DIR/trajectories/*.json    the full trajectory of each (world, replicate), written to a temp file then renamed
DIR/artifacts/<key>/       files the agent wrote in its workspace
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from benchmark.canonical import _atomic_write
from benchmark.errors import BenchmarkError
from benchmark.records import ERROR_STATUSES, ResultRecord, Trajectory

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


def result_key(world_id: str, replicate: int) -> str:
    return f"{world_id}__r{replicate}"


class RunStore:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.trajectories = self.root / "trajectories"
        self.artifacts = self.root / "artifacts"
        self.results_path = self.root / "results.jsonl"
        self._lock = threading.Lock()

    def init(self, config: dict, resume: bool, force: bool = False, must_match: tuple[str, ...] = RESUME_KEYS) -> list[str]:
        differ = init_run_dir(self.root, config, resume, must_match, force)
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

    def results(self) -> list[ResultRecord]:
        """Every result line, the last record of a key winning. Only a torn LAST line (a kill mid-write) is skipped
        (its world is re-run on resume); a bad line anywhere else stops the read, naming the line, because skipping
        it would silently drop a paid result and pay for it again on resume."""
        if not self.results_path.exists():
            return []
        data = self.results_path.read_bytes()
        lines = data.split(b"\n")
        torn_tail = not data.endswith(b"\n")
        out: dict[str, ResultRecord] = {}
        for lineno, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                rec = ResultRecord.model_validate_json(raw)
            except (ValueError, RecursionError) as exc:
                if torn_tail and lineno == len(lines):
                    continue
                why = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
                raise BenchmarkError(
                    f"{self.results_path}:{lineno}: line {lineno} is not a valid result record ({why}); restore the file "
                    f"from a backup, or delete that line to re-run its world with --resume") from None
            out[result_key(rec.world_id, rec.replicate)] = rec  # the last record for a key wins
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
        line = rec.model_dump_json(by_alias=True) + "\n"
        with self._lock:
            with open(self.results_path, "ab") as fh:
                self._close_torn_tail(fh)
                fh.write(line.encode())
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
