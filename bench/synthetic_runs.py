"""Synthetic run folders for the leaderboard figure: MODELS models x WORLDS worlds of hand-made ResultRecords.

    .venv/bin/python bench/synthetic_runs.py OUT [--models 8] [--worlds 233]

Writes OUT/runs/<model>/ (config.json + results.jsonl, as `run` writes them, through tests/aggregate_helpers.py)
and OUT/pricing/ (a rate card pricing every synthetic model), and prints the run folders, one a line.
Worlds are spread over five tracks and the three levels (about 40% L1, 40% L2, 20% L3 dossiers); scores,
tokens and calls are drawn from a fixed seed, so the same arguments write the same bytes.
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.aggregate_helpers import rec, write_run  # noqa: E402

TRACKS = ("bulkrna", "clinvar", "crispr", "histone", "scrna")
L1_STATES = ("DIAGNOSE-AND-ACT", "DIAGNOSE-NOT-ACT", "NOTICE-WRONG", "MISS")  # graders.l1.STATE_SCORES keys


def world_ids(n: int) -> list[tuple[str, str, str, str]]:
    """(world id, track, level, family) for n synthetic worlds."""
    out = []
    for i in range(n):
        track = TRACKS[i % len(TRACKS)]
        k = (i // len(TRACKS)) % 10
        level = "L1" if k < 4 else ("L2" if k < 8 else "L3")
        family = f"{track}.{level}.f{(i // 50) % 3}"
        out.append((f"{family}.w{i:03d}", track, level, family))
    return out


def write_runs(root: Path, models: int = 8, worlds: int = 233, seed: int = 7) -> tuple[list[Path], Path]:
    rng = random.Random(seed)
    names = [f"m/model{j}" for j in range(models)]
    ids = world_ids(worlds)
    runs = []
    for j, model in enumerate(names):
        skill = 0.3 + 0.6 * j / max(1, models - 1)
        recs = []
        for wid, track, level, family in ids:
            common = dict(model=model, family=family, tokens_in=rng.randint(5_000, 90_000),
                          tokens_out=rng.randint(500, 9_000), calls=rng.randint(1, 12), code_cells=rng.randint(0, 10),
                          cls=rng.choice(("clean", "challenge", "tool_trap")))
            if level == "L1":
                state = L1_STATES[0 if rng.random() < skill else rng.randint(1, 3)]
                recs.append(rec(wid, track, level, state=state, **common))
            elif level == "L2":
                comps = {c: min(1.0, max(0.0, rng.gauss(skill, 0.2))) for c in "AIMC"}
                recs.append(rec(wid, track, level, comps=comps, **common))
            else:
                eligible = rng.random() < 0.8
                recs.append(rec(wid, track, level, round(100 * min(1.0, max(0.0, rng.gauss(skill, 0.25))), 1),
                                eligible=eligible, commitment=rng.choice(("commit", "abstain")),
                                axes={"D": rng.randint(0, 2), "Q": rng.randint(0, 2), "N": rng.randint(0, 2)}, **common))
        runs.append(write_run(root / "runs", model.replace("/", "_"), recs, model))
    pricing = root / "pricing"
    pricing.mkdir(parents=True, exist_ok=True)
    card = ["date: 2026-01-01", "source: synthetic card (bench/synthetic_runs.py)", "models:"]
    card += [f"  {m}: {{input: {1 + j}, output: {4 + 2 * j}}}" for j, m in enumerate(names)]
    (pricing / "2026-01-01.yaml").write_text("\n".join(card) + "\n")
    return runs, pricing


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--models", type=int, default=8)
    ap.add_argument("--worlds", type=int, default=233)
    a = ap.parse_args()
    runs, _ = write_runs(Path(a.out), a.models, a.worlds)
    print("\n".join(map(str, runs)))


if __name__ == "__main__":
    main()
