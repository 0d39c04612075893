"""Re-grade a finished run from its stored trajectories, without re-running any agent (SPEC R8).

Each result's grade carries the grader's identity and version; `regrade` recomputes every grade with the current
graders and goldens and writes DIR/grades.jsonl (the run's results.jsonl is never rewritten).
"""
from __future__ import annotations

import json
from pathlib import Path

from benchmark.canonical import _atomic_write
from benchmark.errors import BenchmarkError
from benchmark.freeze import read_golden
from benchmark.loader import load_suite
from benchmark.records import ERROR_STATUSES
from benchmark.store import RunStore, result_key
from graders.grade import Grade, grade


def regrade(run_dir: Path) -> list[tuple[str, Grade, Grade | None]]:
    """(key, new grade, recorded grade) for every result of the run; writes DIR/grades.jsonl atomically."""
    store = RunStore(run_dir)
    if not store.results_path.exists():
        raise BenchmarkError(f"{run_dir} holds no results.jsonl; pass the --out folder of a `run`")
    suite = load_suite()
    out = []
    for rec in sorted(store.results(), key=lambda r: (r.world_id, r.replicate)):
        if rec.status in ERROR_STATUSES:
            continue  # a fault has no grade to recompute: `run --resume` retries it
        if rec.world_id not in suite.worlds:
            raise BenchmarkError(f"{store.results_path}: world '{rec.world_id}' is not in this checkout's suite")
        ref = suite.worlds[rec.world_id]
        traj = store.load_trajectory(rec.trajectory)
        g = grade(ref, read_golden(ref).values, traj.report_raw, [c.code + "\n" + c.stdout for c in traj.cells],
                  products=store.artifacts / result_key(rec.world_id, rec.replicate))
        out.append((f"{rec.world_id}__r{rec.replicate}", g, rec.grade))
    lines = "".join(json.dumps({"key": k, "grade": g.model_dump()}, sort_keys=True) + "\n" for k, g, _ in out)
    _atomic_write(Path(run_dir) / "grades.jsonl", lines.encode())
    return out
