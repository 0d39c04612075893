"""Sandbox start-up and cell round-trip overhead, as ratios measured in one run (machines here are noisy).

    .venv/bin/python bench/sandbox_overhead.py [--n 10]

start ratio     = (sandbox start + first cell `pass`) / (plain `python -c pass` subprocess)         goal <= 1.5
import ratio    = (sandbox start + first cell `import numpy, pandas`) / (`python -c "import numpy, pandas"`)
                                                                                                     goal <= 0.5
round-trip      = (sandbox cell `pass`) / (exec of `pass` in a pipe-connected child python)          (no goal)
seal walk       = masked_paths' walk of site-packages and /usr, fresh vs from the on-disk cache      (no goal)
numba seed      = first cell running scanpy's wilcoxon rank_genes_groups, in a sandbox started with the numba
                  seed (sandbox/numba_seed.py) / in one started without it (one sample each)         goal <= 0.2

Each sandbox ratio is printed twice: "warm" (handed out by the pool of pre-started sandboxes, sandbox/pool.py: what
every world of a campaign meets, and what the goals are about) and "cold" (`Sandbox(..., pool=False)`: bwrap and a
fresh kernel per world, as before issue 20, and as a restart after a timeout still is), the latter printed as a
reference without a goal. Warm samples wait, untimed, until the pool has a sandbox ready, as a campaign's next world
does when the previous world ran longer than a pre-start (about a second with numpy and pandas preloaded); what is
timed is what the world waits for. The numba seed is measured both ways too: warm (a blank of the scrna track, whose
preload imports scanpy, so the cell's time is the kernels: compiled or loaded from the seed) with the goal, and cold
(start, numpy/pandas/scanpy imports and the kernels) as the reference.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox import seal  # noqa: E402
from sandbox.bwrap import Limits, Sandbox  # noqa: E402
from sandbox.pool import POOL  # noqa: E402

START_GOAL, IMPORT_GOAL, SEED_GOAL = 1.5, 0.5, 0.2
RANK_CELL = """
import numpy as np, pandas as pd, scipy.sparse as sp, anndata as ad, scanpy as sc
rng = np.random.default_rng(1)
a = ad.AnnData(sp.csr_matrix(rng.negative_binomial(2, 0.3, size=(500, 400)).astype(np.float32)))
a.obs['group'] = pd.Categorical(rng.choice(['x', 'y'], 500))
sc.tl.rank_genes_groups(a, 'group', method='wilcoxon')
"""


@contextlib.contextmanager
def seed_env(seeded: bool):
    """This environment's numba seed (built first), or none: the seed is looked up under DISCERN_SANDBOX_CACHE,
    pointed at an empty folder while the block runs."""
    from sandbox.numba_seed import build

    build(say=lambda m: None)
    saved = os.environ.get("DISCERN_SANDBOX_CACHE")
    empty = tempfile.mkdtemp(prefix="no-seed-")
    try:
        if not seeded:
            os.environ["DISCERN_SANDBOX_CACHE"] = empty
        yield
    finally:
        if saved is None:
            os.environ.pop("DISCERN_SANDBOX_CACHE", None)
        else:
            os.environ["DISCERN_SANDBOX_CACHE"] = saved
        shutil.rmtree(empty, ignore_errors=True)


def seed_cell(world: Path, seeded: bool) -> float:
    """Wall of start + the first rank_genes_groups cell in a cold sandbox, with this environment's numba seed or
    with none."""
    with seed_env(seeded):
        t0 = time.perf_counter()
        with Sandbox(world, pool=False) as sb:
            r = sb.run_python(RANK_CELL)
        assert r.error is None, r.as_text()
        return time.perf_counter() - t0


def warm_seed_cell(world: Path, seeded: bool) -> float:
    """Wall of the first rank_genes_groups cell in a warm sandbox of the scrna track (scanpy preloaded), started with
    this environment's numba seed or with none; the blank is built untimed first, as the pool builds it while the
    previous world runs."""
    from sandbox.bwrap import Limits

    label = "scrna.bench.seed"
    with seed_env(seeded):
        if not POOL.wait_for(Limits(), world, label, timeout=300):
            raise SystemExit(f"the warm pool did not get a scrna sandbox ready: {POOL.last_error}")
        sb = Sandbox(world, label=label)
        try:
            sb.start()
            t0 = time.perf_counter()
            r = sb.run_python(RANK_CELL)
            dt = time.perf_counter() - t0
            assert r.error is None and sb.warm, (r.as_text(), sb.warm, POOL.last_error)
        finally:
            sb.close()
        return dt


def timed(fn, n: int, before=None, minus=None) -> float:
    """Median seconds of fn() over n runs; `before()` runs untimed first, and `minus()` (read after each run) is a
    part of it timed apart, taken off."""
    xs = []
    for _ in range(n):
        if before is not None:
            before()
        t0 = time.perf_counter()
        fn()
        xs.append(time.perf_counter() - t0 - (minus() if minus is not None else 0.0))
    return statistics.median(xs)


def line(what: str, got: float, base: float, base_what: str, goal: float | None) -> str:
    """One ratio line; `goal` None marks a reference line (cold: what the pool saves), judged against nothing."""
    ratio = got / base
    mark = " | reference, no goal" if goal is None else f" | goal <= {goal:<4} {'met' if ratio <= goal else 'MISSED'}"
    return f"{what:<48} {got * 1e3:8.1f} ms | {base_what:<32} {base * 1e3:7.1f} ms | ratio {ratio:6.2f}{mark}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10)
    n = ap.parse_args().n
    world = Path(tempfile.mkdtemp()) / "world"
    world.mkdir()
    (world / "meta.json").write_text("{}\n")
    (world / "data").mkdir()
    (world / "data" / "counts.csv").write_text("gene,a,b\n" + "".join(f"g{i},{i},{i + 1}\n" for i in range(2000)))

    t0 = time.perf_counter()
    seal.walked_paths(use_cache=False)
    walk_fresh = time.perf_counter() - t0
    walk_cached = timed(seal.walked_paths, n)

    plain = timed(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), n)
    plain_np = timed(lambda: subprocess.run([sys.executable, "-c", "import numpy, pandas"], check=True), n)

    closes: list[float] = []

    def first_cell(code: str, pool: bool):
        def run() -> None:
            sb = Sandbox(world, pool=pool)
            try:
                sb.start()
                r = sb.run_python(code)
                assert r.error is None and sb.warm == pool, (r.as_text(), sb.warm, POOL.last_error)
            finally:
                t_close.append(time.perf_counter())
                sb.close()
                closes.append(time.perf_counter() - t_close.pop())
        return run

    t_close: list[float] = []

    def timed_excl_close(fn, n: int, before=None) -> float:
        """Median of start + first cell; the teardown after it (off the world's clock) is timed apart."""
        return timed(fn, n, before, minus=lambda: closes[-1])

    def ready() -> None:
        if not POOL.wait_for(Limits(), world, "task", timeout=120):
            raise SystemExit(f"the warm pool did not get a sandbox ready: {POOL.last_error}")

    cold = timed_excl_close(first_cell("pass", False), n)
    cold_np = timed_excl_close(first_cell("import numpy, pandas", False), n)
    warm = timed_excl_close(first_cell("pass", True), n, before=ready)
    warm_np = timed_excl_close(first_cell("import numpy, pandas", True), n, before=ready)

    child = subprocess.Popen([sys.executable, "-u", "-c",
                              "import sys\nfor line in sys.stdin:\n    exec(line)\n    print('ok', flush=True)"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def pipe_cell() -> None:
        child.stdin.write("pass\n")
        child.stdin.flush()
        child.stdout.readline()

    piped = timed(pipe_cell, n * 20)
    child.kill()
    with Sandbox(world, pool=False) as sb:
        cell = timed(lambda: sb.run_python("pass"), n * 20)

    print(line("warm sandbox start + first cell `pass`", warm, plain, "python -c pass", START_GOAL))
    print(line("cold sandbox start + first cell `pass`", cold, plain, "python -c pass", None))
    print(line("warm start + first cell `import numpy, pandas`", warm_np, plain_np, "python -c 'import numpy, pandas'", IMPORT_GOAL))
    print(line("cold start + first cell `import numpy, pandas`", cold_np, plain_np, "python -c 'import numpy, pandas'", None))
    print(f"{'sandbox cell round trip':<48} {cell * 1e3:8.2f} ms | {'piped child exec':<32} {piped * 1e3:7.2f} ms | ratio {cell / piped:6.2f}")
    print(f"{'sandbox teardown (close, after the world)':<48} {statistics.median(closes) * 1e3:8.1f} ms (median, not in the ratios above)")
    print(f"{'seal walk (masked_paths)':<48} {walk_fresh * 1e3:8.1f} ms fresh | {walk_cached * 1e3:7.1f} ms from the disk cache")
    seeded, unseeded = warm_seed_cell(world, True), warm_seed_cell(world, False)
    print(line("warm: first wilcoxon cell, numba seed", seeded, unseeded, "without the seed", SEED_GOAL))
    seeded, unseeded = seed_cell(world, True), seed_cell(world, False)
    print(line("cold: start, imports, first wilcoxon cell, seed", seeded, unseeded, "without the seed", None))
    print(f"pool: {POOL.stats}")


if __name__ == "__main__":
    main()
