"""Issue 41 item 10: a human baseline. `run --model human/<name>` gives a person the agent's prompt and the same
sandbox kernel at the terminal, under the same step budget and limits, and records the person's cells and report like
any model's; it is graded and shown on the leaderboard as a baseline. Driven here from a script on stdin."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from benchmark.run.store import RunStore
from benchmark.suite.loader import REPO_ROOT

WORLD = "scrna.L1.integrity.clean"


def _run(out, stdin: str, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "benchmark", "run", "--model", "human/ana", "--worlds", WORLD, "--levels", "L1",
           "--out", str(out), *extra]
    return subprocess.run(cmd, cwd=REPO_ROOT, input=stdin, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, BENCHMARK_PROGRESS="0"))


def test_a_person_works_a_world_in_the_sandbox_and_is_graded_like_a_model(tmp_path):
    report = {"assessment": "usable", "issues": [], "summary": "Counted barcodes and genes; every check came back clean."}
    script = "\n".join([
        "import os",  # a cell of two lines: what the person sees is the sandbox's own answer
        "print(sorted(os.listdir('.')), open('/proc/self/status').read().count('Seccomp'))",
        ".run",
        "open('notes.txt', 'w').write('checked')",
        ".run",
        ".report", json.dumps(report), ".end", ""])
    out = tmp_path / "human"
    p = _run(out, script)
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"===== {WORLD}: your turn =====" in p.stderr and "--- user ---" in p.stderr, "the prompt is shown"
    assert "--- cell output ---" in p.stderr and "meta.json" in p.stderr, "the cell ran in the world's sandbox"
    rec = RunStore(out).results()[0]
    assert rec.model == "human/ana" and rec.status == "graded" and rec.score == 100.0, (rec.status, rec.grade)
    assert rec.code_cells == 2 and rec.calls == 3 and rec.tokens_in == rec.tokens_out == 0
    traj = RunStore(out).load_trajectory(rec.trajectory)
    assert traj.cells[0].code.startswith("import os\nprint(") and json.loads(traj.report_raw) == report
    assert (out / "artifacts").exists() and any(p.name == "notes.txt" for p in (out / "artifacts").rglob("*"))
    # on the leaderboard beside the models, marked as a baseline
    board = subprocess.run([sys.executable, "-m", "benchmark", "leaderboard", "--runs", str(out), "--out",
                            str(tmp_path / "lb"), "--bootstrap", "0", "--permutations", "0"], cwd=REPO_ROOT,
                           capture_output=True, text=True, timeout=600)
    assert board.returncode == 0, board.stderr[-2000:]
    md = (tmp_path / "lb" / "leaderboard.md").read_text()
    assert "human/ana" in md and "baseline" in md
    row = next(line for line in md.splitlines() if "human/ana (human baseline)" in line)
    assert "unpriced" not in md and "| - | - |" in row, "a person's time is not on a rate card: no cost, no pricing note"


def test_giving_up_is_an_empty_answer_and_two_worlds_at_once_are_refused(tmp_path):
    p = _run(tmp_path / "quit", ".quit\n")
    assert p.returncode == 0, p.stderr[-2000:]
    rec = RunStore(tmp_path / "quit").results()[0]
    assert rec.status == "noncompliant" and rec.score == 0.0
    p = _run(tmp_path / "two", "", "--concurrency", "2")
    assert p.returncode == 2 and "one world at a time" in p.stderr and not (tmp_path / "two").exists()
