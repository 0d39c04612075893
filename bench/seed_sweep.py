"""Seed sweep: does every world's recipe honour every draw of its ranges? (issue 38 item 6)

A private campaign (`worlds freeze --all --seed S --out DIR`) re-draws every recipe parameter from the manifest's
ranges with seeds mixed with S. A recipe that raises for some draw ("cannot compensate ... with Dendritic") makes
that campaign impossible to freeze, so the published worlds would be the only ones that work. This sweep builds
each selected world's files (substrate, recipe, writer: the part of a freeze that draws; no solver) at seeds
1..N and reports every (world, seed) that fails, grouped by world and recipe step, with the first error.

    .venv/bin/python bench/seed_sweep.py [--seeds 200] [--first 1] [--jobs 2] [IDS or globs ...]

It is a benchmark, not a CI test: 200 seeds x 251 worlds build in about an hour on 2 cores. Exit status 1 when any
world fails at any seed. Each job takes whole seeds, so a track's substrate is built once per seed and job.
"""
from __future__ import annotations

import argparse
import fnmatch
import multiprocessing as mp
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _sweep_seed(args: tuple[int, list[str]]) -> tuple[int, list[tuple[str, str]], float]:
    """Build every named world at campaign seed `seed` in a scratch folder; return the failures (world, error)."""
    seed, ids = args
    import dataclasses

    from benchmark.errors import BenchmarkError
    from benchmark.suite.freeze import build_files
    from benchmark.suite.loader import Campaign, load_suite

    t0 = time.process_time()
    suite = load_suite()
    failures: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix=f"sweep{seed}-") as tmp:
        camp = Campaign(seed=seed, root=Path(tmp) / "campaign")
        for wid in ids:
            ref = dataclasses.replace(suite.worlds[wid], campaign=camp)
            try:
                build_files(ref, Path(tmp) / "world")
            except BenchmarkError as exc:
                failures.append((wid, str(exc)))
            except Exception as exc:  # noqa: BLE001 - a recipe bug the build does not translate is a finding too
                failures.append((wid, f"{type(exc).__name__}: {exc}"))
    return seed, failures, time.process_time() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ids", nargs="*", help="world ids or globs (default: every world)")
    ap.add_argument("--seeds", type=int, default=200, help="how many campaign seeds (default 200)")
    ap.add_argument("--first", type=int, default=1, help="the first seed (default 1)")
    ap.add_argument("--jobs", type=int, default=2, help="processes, each taking whole seeds (default 2)")
    a = ap.parse_args(argv)

    from benchmark.suite.loader import load_suite

    every = sorted(load_suite().worlds)
    ids = [w for w in every if not a.ids or any(fnmatch.fnmatchcase(w, p) for p in a.ids)]
    if not ids:
        print(f"no world matches {' '.join(a.ids)}", file=sys.stderr)
        return 2
    seeds = list(range(a.first, a.first + a.seeds))
    print(f"building {len(ids)} worlds at {len(seeds)} campaign seeds ({seeds[0]}..{seeds[-1]}), {a.jobs} jobs", flush=True)
    fails: dict[str, dict[int, str]] = defaultdict(dict)
    t0, cpu = time.perf_counter(), 0.0
    ctx = mp.get_context("spawn")
    with ctx.Pool(a.jobs, maxtasksperchild=8) as pool:
        for n, (seed, failures, used) in enumerate(pool.imap_unordered(_sweep_seed, [(s, ids) for s in seeds]), 1):
            cpu += used
            for wid, err in failures:
                fails[wid][seed] = err
            print(f"[{n}/{len(seeds)}] seed {seed}: {len(failures)} failing worlds "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    total = len(ids) * len(seeds)
    bad = sum(len(v) for v in fails.values())
    print(f"\n{total - bad}/{total} builds honoured their draw ({cpu:.0f} CPU-s in the builders, "
          f"{time.perf_counter() - t0:.0f} s wall)")
    for wid in sorted(fails):
        seeds_bad = sorted(fails[wid])
        first = fails[wid][seeds_bad[0]]
        print(f"FAIL {wid}: {len(seeds_bad)}/{len(seeds)} seeds ({', '.join(map(str, seeds_bad[:12]))}"
              f"{' ...' if len(seeds_bad) > 12 else ''})\n     {first[:400]}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
