"""The run directory: self-describing, append-only, atomic, resumable.

DIR/config.json            model, selection, seeds, versions (written once; a resume must match it)
DIR/results.jsonl          one ResultRecord per line, appended with fsync; a torn last line is ignored on read
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
from benchmark.records import ResultRecord, Trajectory


def init_run_dir(root: Path, config: dict, resume: bool, must_match: tuple[str, ...]) -> None:
    """Create a run folder with its config.json, or, with `resume`, check the settings that must not change."""
    cfg_path = Path(root) / "config.json"
    if cfg_path.exists():
        if not resume:
            raise BenchmarkError(f"{root} already holds a run; pass --resume to continue it or choose another --out")
        old = json.loads(cfg_path.read_text())
        for key in must_match:
            if old.get(key) != config.get(key):
                raise BenchmarkError(f"{cfg_path}: field '{key}' is {old.get(key)!r} but this run asks for {config.get(key)!r}; "
                                     "resume with the same settings or use another --out")
    else:
        Path(root).mkdir(parents=True, exist_ok=True)
        _atomic_write(cfg_path, (json.dumps(config, indent=2, sort_keys=True) + "\n").encode())


def result_key(world_id: str, replicate: int) -> str:
    return f"{world_id}__r{replicate}"


class RunStore:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.trajectories = self.root / "trajectories"
        self.artifacts = self.root / "artifacts"
        self.results_path = self.root / "results.jsonl"
        self._lock = threading.Lock()

    def init(self, config: dict, resume: bool) -> None:
        init_run_dir(self.root, config, resume, ("model", "replicates", "seed"))
        self.trajectories.mkdir(parents=True, exist_ok=True)
        self.artifacts.mkdir(parents=True, exist_ok=True)

    def config(self) -> dict:
        return json.loads((self.root / "config.json").read_text())

    def run_id(self) -> str:
        """The id ledgers use to refer to this run: config.json's run_id (the folder name at creation)."""
        try:
            return str(self.config().get("run_id") or self.root.resolve().name)
        except FileNotFoundError:
            return self.root.resolve().name

    def results(self) -> list[ResultRecord]:
        """Every complete result line; a line cut by a kill is skipped (its world will be re-run on resume)."""
        if not self.results_path.exists():
            return []
        out: dict[str, ResultRecord] = {}
        for lineno, line in enumerate(self.results_path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = ResultRecord.model_validate_json(line)
            except ValueError:
                continue
            out[result_key(rec.world_id, rec.replicate)] = rec  # the last record for a key wins
        return list(out.values())

    def done_keys(self) -> set[str]:
        return {result_key(r.world_id, r.replicate) for r in self.results()}

    def save_trajectory(self, traj: Trajectory) -> str:
        rel = f"trajectories/{result_key(traj.world_id, traj.replicate)}.json"
        _atomic_write(self.root / rel, traj.model_dump_json(indent=1).encode())
        return rel

    def load_trajectory(self, rel: str) -> Trajectory:
        return Trajectory.model_validate_json((self.root / rel).read_text())

    def append(self, rec: ResultRecord) -> None:
        line = rec.model_dump_json(by_alias=True) + "\n"
        with self._lock:
            needs_newline = False
            if self.results_path.exists() and self.results_path.stat().st_size > 0:
                with open(self.results_path, "rb") as tail:
                    tail.seek(-1, os.SEEK_END)
                    needs_newline = tail.read(1) != b"\n"
            with open(self.results_path, "ab") as fh:
                if needs_newline:  # a previous kill cut a line: close it off so this record stands alone
                    fh.write(b"\n")
                fh.write(line.encode())
                fh.flush()
                os.fsync(fh.fileno())
