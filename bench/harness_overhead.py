"""Whole-run harness overhead relative to the reference solvers' own run time, measured in one run.

    .venv/bin/python bench/harness_overhead.py [--worlds PATTERN ...]

For each world: time the reference solver on the world's files directly, then time a full `run` of
scripted/oracle on it (lock check, sandbox start, litellm round trips, the reference analysis inside the sandbox,
grading, atomic records). The ratio is harness wall time / solver wall time; totals are printed last.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmark.suite.freeze import ensure_built, solve  # noqa: E402
from benchmark.suite.loader import load_suite  # noqa: E402
from benchmark.run.episodes import RunConfig, run_one  # noqa: E402
from benchmark.run.store import RunStore  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worlds", nargs="+", default=["scrna.L1.*", "scrna.L2.*", "histone.L2.quantify.*"])
    args = ap.parse_args()
    refs = load_suite().select(args.worlds, None, ["L1", "L2"])
    out = Path(tempfile.mkdtemp(prefix="bench-harness-"))
    cfg = RunConfig(model="scripted/oracle", out=out, levels=["L1", "L2"])
    store = RunStore(out)
    store.init(cfg.describe(), resume=False)
    tot_solver = tot_harness = 0.0
    print(f"{'world':55s} {'solver s':>9s} {'harness s':>10s} {'ratio':>7s} score")
    for ref in refs:
        d = ensure_built(ref)
        t0 = time.perf_counter()
        solve(ref, d)
        ts = time.perf_counter() - t0
        t0 = time.perf_counter()
        rec = run_one(ref, 0, cfg, store, slot=0)
        th = time.perf_counter() - t0
        tot_solver += ts
        tot_harness += th
        print(f"{ref.id:55s} {ts:9.2f} {th:10.2f} {th / ts:7.2f} {rec.score:.0f}")
    print(f"{'TOTAL':55s} {tot_solver:9.2f} {tot_harness:10.2f} {tot_harness / tot_solver:7.2f}")


if __name__ == "__main__":
    main()
