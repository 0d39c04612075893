"""Every bash block of EVALUATE_MODEL.md runs, in order, as a new user would run it (scripted models, a slice of L1,
L2 and L3 worlds): run, verify, ledger pending / rule / validate (before and after a ruling), grade, the
leaderboard, the Inspect export and a human baseline typed ahead on stdin; and everything it writes stays under the
git-ignored runs/ folder."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark.suite.loader import REPO_ROOT

DOC = REPO_ROOT / "EVALUATE_MODEL.md"
SLICE_WORLDS = ["scrna.L1.integrity.clean", "scrna.L1.integrity.doublets", "scrna.L2.markers.clean",
                "scrna.L3.dossier.b_cell_markers"]
OVERRIDES = {
    "MODEL": "scripted/naive",
    "VERIFIER": "scripted/first",
    "REVIEWERS": "scripted/first,scripted/first,scripted/first",
    "JUDGE": "scripted/first",
    "RUN": "runs/doc-test",
    "WORK": "runs/doc-test.work",
    "SLICE": '"--worlds ' + " ".join(SLICE_WORLDS) + '"',
}


def doc_script() -> str:
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    assert len(blocks) >= 8, "the guide shows its commands in bash blocks"
    body = "\n".join(blocks[1:])  # block 0 is the set-up the test environment already did
    for var, value in OVERRIDES.items():
        body, n = re.subn(rf"^{var}=\S+", f"{var}={value}", body, flags=re.MULTILINE)
        assert n == 1, f"the guide defines {var} once"
    return "set -euo pipefail\n" + body


def test_guide_names_what_a_user_needs():
    """Time estimates for both paths, the local-server variables, and no claim that the offline verifier is
    independent."""
    text = DOC.read_text()
    for needle in ("### How long it takes", "OPENAI_API_BASE=", "OPENAI_API_KEY=dummy", "openai/", "LOCAL_CPU_S",
                   "Hosted:", "An independent verifier", "export inspect"):
        assert needle in text, needle
    assert "an independent model that re-derives" not in text
    from benchmark.run.estimate import LOCAL_CPU_S

    assert f"~{LOCAL_CPU_S['L1']:g} s" in text and f"~{LOCAL_CPU_S['L2']:g} s" in text
    assert f"~{LOCAL_CPU_S['L3']:g} s" in text, "the L3 figure is benchmark/run/estimate.py's measured one"


def test_stated_world_counts_and_minutes_are_the_suites():
    """The README and the guide state how many worlds the main job runs and how long it takes: the counts are the
    suite's, and the minutes are what `run` itself prints (benchmark/run/estimate.py), so a new track cannot leave the
    documents promising a shorter job than it is (they said 110 worlds and 19 minutes when there were 160)."""
    from collections import Counter

    from benchmark.run.estimate import LOCAL_CPU_S
    from benchmark.suite.loader import load_suite

    worlds = load_suite().worlds.values()
    n = Counter(r.world.level for r in worlds)
    tracks = {r.world.track for r in worlds}
    minutes = round(sum(k * LOCAL_CPU_S[level] for level, k in n.items()) / 2 / 60)  # run's estimate on 2 cores
    readme = (REPO_ROOT / "README.md").read_text()
    assert f"runs {sum(n.values())} worlds over {len(tracks)} tracks ({n['L3']} of them L3 dossiers" in readme
    assert f"takes about {minutes} minutes" in readme
    guide = DOC.read_text()
    for level in ("L1", "L2", "L3"):
        assert f"| {level} | {n[level]} |" in guide, level
    assert f"all {sum(n.values())} worlds take about {minutes} minutes on 2 idle cores" in guide


@pytest.mark.slow
def test_evaluate_model_guide_runs(tmp_path):
    script = tmp_path / "guide.sh"
    script.write_text(doc_script())
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", BENCHMARK_PROGRESS="0")
    proc = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout + proc.stderr

    run, work = tmp_path / "runs/doc-test", tmp_path / "runs/doc-test.work"
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert {r["level"] for r in rows} == {"L1", "L2", "L3"} and len(rows) == len(SLICE_WORLDS)
    l3 = next(r for r in rows if r["level"] == "L3")
    assert l3["score"] is not None and l3["l3_axes"], "a real dossier is always eligible and judged"

    verified = {json.loads(line)["level"] for line in (run / "verification.jsonl").read_text().splitlines()}
    assert verified == {"L1", "L2", "L3"}, "verify covers the L3 judged axes too"

    pending = json.loads((work / "pending.json").read_text())
    assert pending, "naive vs first disagree, so something is pending"
    assert "nothing to validate" in out, "ledger validate before any ruling"
    assert "ledger file(s) are valid" in out, "ledger validate after the ruling"
    ledger = work / "ledgers/my-campaign.yaml"
    assert ledger.exists() and pending[0]["world_id"] in ledger.read_text()
    assert f"{len(pending) - 1} pending item(s)" in out, "the ruled item is no longer pending"

    assert "L3 dossiers are graded by the judge protocol" in out, "grade keeps/re-scores L3 instead of crashing"
    assert (work / "leaderboard/leaderboard.md").exists() and (work / "leaderboard/leaderboard.json").exists()
    assert list((work / "inspect").glob("*.eval")), "export inspect wrote .eval logs"

    # the human baseline, typed ahead into a file, is graded and joins the leaderboard beside the model
    human = [json.loads(line) for line in (work / "human-ana/results.jsonl").read_text().splitlines()]
    assert [(r["model"], r["status"], r["score"]) for r in human] == [("human/ana", "graded", 100.0)]
    board = (work / "with-ana/leaderboard.md").read_text()
    row = next(line for line in board.splitlines() if "human/ana" in line and "(human baseline)" in line)
    assert "unpriced" not in row and "| - | - |" in row and OVERRIDES["MODEL"] in board

    # nothing outside the git-ignored runs/ folder (a checkout stays clean)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["guide.sh", "runs"]


def test_view_is_registered():
    """`view` serves until Ctrl-C, so the guide shows it in a text block; its help must still run."""
    proc = subprocess.run([sys.executable, "-m", "benchmark", "view", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "RUN" in proc.stdout, proc.stderr[-2000:]
