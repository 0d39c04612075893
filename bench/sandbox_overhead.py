"""Sandbox start-up and cell round-trip overhead, as ratios measured in one run (machines here are noisy).

    .venv/bin/python bench/sandbox_overhead.py [--n 10]

start-up ratio   = (bwrap sandbox start + first cell) / (plain `python -c pass` subprocess)
round-trip ratio = (sandbox cell `pass`) / (in-process exec of `pass` via a pipe-connected child python)
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox.bwrap import Sandbox  # noqa: E402


def timed(fn, n: int) -> float:
    xs = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        xs.append(time.perf_counter() - t0)
    return statistics.median(xs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10)
    n = ap.parse_args().n
    world = Path(tempfile.mkdtemp())
    (world / "meta.json").write_text("{}\n")

    plain = timed(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), n)

    def start_and_cell() -> None:
        with Sandbox(world) as sb:
            sb.run_python("pass")

    sandboxed = timed(start_and_cell, n)
    child = subprocess.Popen([sys.executable, "-u", "-c",
                              "import sys\nfor line in sys.stdin:\n    exec(line)\n    print('ok', flush=True)"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def pipe_cell() -> None:
        child.stdin.write("pass\n")
        child.stdin.flush()
        child.stdout.readline()

    piped = timed(pipe_cell, n * 20)
    child.kill()
    with Sandbox(world) as sb:
        cell = timed(lambda: sb.run_python("pass"), n * 20)
    print(f"sandbox start + first cell: {sandboxed * 1e3:8.1f} ms | plain python start: {plain * 1e3:8.1f} ms | ratio {sandboxed / plain:6.2f}")
    print(f"sandbox cell round trip:    {cell * 1e3:8.2f} ms | piped child exec:   {piped * 1e3:8.2f} ms | ratio {cell / piped:6.2f}")


if __name__ == "__main__":
    main()
