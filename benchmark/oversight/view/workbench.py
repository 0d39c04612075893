"""What the workbench reads: the runs named on the command line, the ledger folder, and the leaderboard computed
from both by benchmark.score.leaderboard (cached until a result, a verification or a ledger file changes)."""
from __future__ import annotations

import io
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from benchmark.errors import BenchmarkError
from benchmark.oversight.ledger import Ledger, Ruling, effective_rulings, ledger_paths, ledgers_version, load_ledger
from benchmark.run.records import ResultRecord
from benchmark.run.store import RunStore, result_key

FIGURES = ("stage_profile", "quality_vs_cost", "threshold_curve")


@dataclass
class Run:
    """One run folder given to `view`."""

    run_id: str
    root: Path
    model: str
    store: RunStore


@dataclass
class Row:
    """One result as the drill-down tables show it: recorded score, score after the rulings in force, open
    discrepancies (verifier disagreements nobody has ruled on)."""

    run: Run
    rec: ResultRecord
    effective: float | None
    rulings: list[int]
    pending: list[str]
    verified: bool

    @property
    def key(self) -> str:
        return result_key(self.rec.world_id, self.rec.replicate)


@dataclass
class Snapshot:
    """Everything derived from one state of the inputs (runs + ledgers)."""

    version: str
    leaderboard: dict
    rows: list[Row]
    figures: dict[str, bytes] = field(default_factory=dict)


class Workbench:
    def __init__(self, run_dirs: list[Path], ledger_dir: Path, bootstrap: int = 2000, permutations: int = 50_000):
        if not run_dirs:
            raise BenchmarkError("name at least one run folder: python -m benchmark view RUN [RUN ...]")
        self.runs: dict[str, Run] = {}
        for d in run_dirs:
            store = RunStore.existing(d)
            rid = store.run_id()
            if rid in self.runs:
                raise BenchmarkError(f"{d} and {self.runs[rid].root} have the same run id '{rid}' (config.json run_id); "
                                     "rulings name runs by id, so view them one at a time")
            cfg = store.config() if (store.root / "config.json").exists() else {}
            recs = store.results()
            self.runs[rid] = Run(rid, store.root, str(cfg.get("model") or (recs[0].model if recs else "")), store)
        self.ledger_dir = Path(ledger_dir)
        if self.ledger_dir.exists() and not self.ledger_dir.is_dir():
            raise BenchmarkError(f"--ledgers {self.ledger_dir} is a file; name the folder that holds the ledger files")
        self.bootstrap, self.permutations = bootstrap, permutations
        self._lock = threading.Lock()
        self._snap: tuple[tuple, Snapshot] | None = None
        self._suite = None

    # ---------------------------------------------------------------- inputs

    def run(self, run_id: str) -> Run:
        if run_id not in self.runs:
            raise KeyError(run_id)
        return self.runs[run_id]

    def suite(self):
        if self._suite is None:
            from benchmark.suite.loader import load_suite

            self._suite = load_suite()
        return self._suite

    def world_ref(self, world_id: str):
        return self.suite().worlds.get(world_id)

    def ledger_files(self) -> list[Path]:
        return ledger_paths(self.ledger_dir) if self.ledger_dir.is_dir() else []

    def ledgers(self) -> list[Ledger]:
        return [led for p in self.ledger_files() for led in [load_ledger(p)] if isinstance(led, Ledger)]

    def adjudication_files(self) -> list[str]:
        """Names of the folder's adjudication ledgers (a new ruling may go to any of them, or a new file)."""
        return [Path(led._source).name for led in self.ledgers()]

    def version(self) -> str:
        return ledgers_version(self.ledger_dir)

    def _state(self) -> tuple:
        def stat(p: Path):
            try:
                st = p.stat()
                return (st.st_mtime_ns, st.st_size)
            except FileNotFoundError:
                return None

        return (self.version(),) + tuple((r.run_id, stat(r.store.results_path), stat(r.root / "verification.jsonl"))
                                         for r in self.runs.values())

    # ---------------------------------------------------------------- derived

    def snapshot(self) -> Snapshot:
        """The leaderboard and result rows for the current inputs, recomputed only when an input changed."""
        with self._lock:
            state = self._state()
            if self._snap is not None and self._snap[0] == state:
                return self._snap[1]
            from benchmark.score.leaderboard import build

            ledgers = [self.ledger_dir] if self.ledger_files() else []
            data = build([r.root for r in self.runs.values()], ledgers, bootstrap=self.bootstrap,
                         permutations=self.permutations)
            snap = Snapshot(state[0], data, self._rows(effective_rulings(self.ledgers())))
            self._snap = (state, snap)
            return snap

    def _rows(self, rulings: dict[tuple[str, str, int, str], Ruling]) -> list[Row]:
        from benchmark.score.aggregate import apply_rulings
        from benchmark.run.records import ERROR_STATUSES
        from benchmark.oversight.verify import load_verifications

        rows = []
        for run in self.runs.values():
            open_: dict[str, list[str]] = defaultdict(list)
            verified = set()
            for v in load_verifications(run.root):
                verified.add(v.key)
                for d in v.discrepancies:
                    if (run.run_id, v.world_id, v.replicate, d.component) not in rulings:
                        open_[v.key].append(d.component)
            for rec in sorted(run.store.results(), key=lambda r: (r.world_id, r.replicate)):
                key = result_key(rec.world_id, rec.replicate)
                eff = apply_rulings(rec, run.run_id, rulings)
                score = None if rec.status in ERROR_STATUSES else (eff.score if eff.rulings else rec.score)
                rows.append(Row(run, rec, score, eff.rulings, sorted(set(open_.get(key, []))), key in verified))
        return rows

    def figure(self, name: str) -> bytes:
        """A leaderboard figure rendered server-side by benchmark.score.leaderboard's own plotting code."""
        if name not in FIGURES:
            raise KeyError(name)
        snap = self.snapshot()
        with self._lock:
            if name not in snap.figures:
                from benchmark.score import leaderboard as lb
                fn = {"stage_profile": lb.stage_profile_figure, "quality_vs_cost": lb.quality_cost_figure,
                      "threshold_curve": lb.threshold_figure}[name]
                buf = io.BytesIO()
                fn(snap.leaderboard, buf)
                snap.figures[name] = buf.getvalue()
            return snap.figures[name]

    def pending(self) -> list[tuple[Run, list, tuple[int, int]]]:
        """Per run: the open discrepancies exactly as `ledger pending` lists them, and how much of it was verified."""
        from benchmark.oversight.adjudicate import pending, verification_progress

        ledgers = self.ledgers()
        return [(run, pending(run.root, ledgers), verification_progress(run.root)) for run in self.runs.values()]
