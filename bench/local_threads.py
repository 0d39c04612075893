"""Local-model decode rate with the cores busy: the default thread choice against one thread (issue 42 item 1).

    .venv/bin/python bench/local_threads.py [--tokens 160] [--load N]

Starts N busy-loop processes (default: one per core, the load generator), then in fresh interpreters decodes the
same prompt with local/smollm2 twice: with BENCHMARK_LOCAL_THREADS=1, and with the default choice (one thread unless
idle cores are measured). Prints tokens per second of each and their ratio (goal: default >= 0.8x one thread), then
the same with the cores idle (no load). Ratios, measured one after the other in one invocation.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import busy, cores  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROBE = r"""
import json, sys, time
sys.path.insert(0, %r)
from benchmark.models import offline_complete
from benchmark.models import local
msgs = [{"role": "user", "content": "List twenty facts about the cell cycle, one per line."}]
offline_complete("local/smollm2", msgs, max_tokens=8)  # load the model and start the server
t = time.perf_counter()
r = offline_complete("local/smollm2", msgs, max_tokens=%d, temperature=0.0)
dt = time.perf_counter() - t
print(json.dumps({"tok": r.usage.completion_tokens, "s": dt, "threads": local._threads()}))
"""


def decode(tokens: int, threads: str | None) -> dict:
    env = dict(os.environ)
    env.pop("BENCHMARK_LOCAL_THREADS", None)
    if threads:
        env["BENCHMARK_LOCAL_THREADS"] = threads
    out = subprocess.run([sys.executable, "-c", PROBE % (str(ROOT), tokens)], env=env, capture_output=True, text=True,
                         timeout=900, check=True)
    d = json.loads(out.stdout.strip().splitlines()[-1])
    d["rate"] = d["tok"] / d["s"]
    return d


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=160)
    ap.add_argument("--load", type=int, default=cores(), help="busy processes (default: one per core)")
    a = ap.parse_args()
    for label, load in (("busy", a.load), ("idle", 0)):
        with busy(load):
            one = decode(a.tokens, "1")
            default = decode(a.tokens, None)
        ratio = default["rate"] / one["rate"]
        verdict = "PASS" if ratio >= 0.8 else "FAIL"
        print(f"{label} cores ({load} busy processes): one thread {one['rate']:.1f} tok/s; default "
              f"({default['threads']} threads) {default['rate']:.1f} tok/s; ratio {ratio:.2f} (goal >= 0.8: {verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
