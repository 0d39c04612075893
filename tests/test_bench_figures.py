"""bench/figures.py judges what its goals are about: the warm sandboxes a campaign's worlds get. A cold line of
bench/sandbox_overhead.py (bwrap and a fresh kernel, as before the pool) is a reference, never a verdict, and a line
that states a goal is judged by it."""
import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def load_figures():
    spec = importlib.util.spec_from_file_location("bench_figures", REPO / "bench" / "figures.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


OUTPUT = """\
warm sandbox start + first cell `pass`                6.0 ms | python -c pass                      29.8 ms | ratio   0.20 | goal <= 1.5  met
cold sandbox start + first cell `pass`              210.1 ms | python -c pass                      29.8 ms | ratio   7.06 | reference, no goal
warm: first wilcoxon cell, numba seed               779.8 ms | without the seed                 15981.1 ms | ratio   0.25 | goal <= 0.2  MISSED
sandbox cell round trip                              4.21 ms | piped child exec                    0.02 ms | ratio 171.36
"""


def test_cold_lines_are_references_and_stated_goals_judge(monkeypatch):
    fig = load_figures()
    monkeypatch.setattr(fig, "measure", lambda cmd, env=None, timeout=3600: fig.Proc(0.0, 0.0, 0, OUTPUT))
    rows, _ = fig.fig_sandbox(1)
    got = {r.figure.removeprefix("sandbox: "): (r.goal, r.verdict) for r in rows}
    assert got["warm sandbox start + first cell `pass`"] == ("<= 1.5x", "PASS")
    assert got["cold sandbox start + first cell `pass`"] == ("-", "-")
    assert got["warm: first wilcoxon cell, numba seed"] == ("<= 0.2x", "FAIL")
    assert got["sandbox cell round trip"] == ("-", "-")
