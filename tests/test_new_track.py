"""The new-track guide (worlds/README.md), walked with a toy track in a temporary folder.

The toy track is one folder: manifests, substrate and recipe (build.py), solver and scripted solutions (solvers.py).
Through the real CLI it is listed, validated, frozen and checked, and nothing outside its folder changes: no file of
this repository (tracked or not), no registry entry of another track.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

from benchmark.suite.loader import REPO_ROOT

BUILD = '''
"""Toy substrate: Poisson counts of 40 samples in two groups (a seeded simulation)."""
import numpy as np

from benchmark.suite.registry import recipe, substrate, writer


@substrate("toy_counts")
def counts(seed: int, n: int = 40):
    rng = np.random.default_rng(seed)
    return {"group": np.repeat(["a", "b"], n // 2), "count": rng.poisson(20, n).astype(int)}


@recipe("toy", "outlier")
def outlier(data, rng, size: int = 5000):
    out = {k: v.copy() for k, v in data.items()}
    out["count"][int(rng.integers(0, len(out["count"])))] = size
    return out


@writer("toy")
def write(data, w):
    w.text("counts.csv", "group,count\\n" + "".join(f"{g},{c}\\n" for g, c in zip(data["group"], data["count"])))
'''

SOLVERS = '''
"""Toy gold side: the reference median per group, and the scripted agents' cells."""
import pandas as pd

from benchmark.suite.registry import naive, oracle, solver


@solver("toy.L2.centre")
def centre(world_dir, world):
    t = pd.read_csv(world_dir / "counts.csv")
    x = t[t.group == "a"]["count"]
    return {"median_a": float(x.median()), "mean_a": float(x.mean()), "n_a": int(len(x)),
            "iqr_a": float(x.quantile(0.75) - x.quantile(0.25))}


CELL = ("import json, pandas as pd\\nt = pd.read_csv('counts.csv')\\nx = t[t.group == 'a']['count']\\n"
        "r = {'n_a': len(x), 'iqr_a': float(x.quantile(0.75) - x.quantile(0.25)), 'analysis_usable': True}\\n")


@oracle("toy.L2.centre")
def oracle_cells(ref):
    return [CELL + "print(json.dumps({**r, 'centre_a': float(x.median()), 'issues_found': ['outlier'] if x.max() > 10 * x.median() else []}))"]


@naive("toy.L2.centre")
def naive_cells(ref):
    return [CELL + "print(json.dumps({**r, 'centre_a': float(x.mean()), 'issues_found': []}))"]
'''


def _yaml(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def _world(name: str, cls: str, seed: int, recipe: list, trap: str | None) -> dict:
    return {
        "id": f"toy.L2.centre.{name}", "track": "toy", "level": "L2", "family": "toy.L2.centre", "class": cls,
        "title": f"toy {cls}", "seed": seed, "recipe": recipe, "public_files": ["counts.csv"],
        "trap": trap, "defect": "outlier" if trap else None,
        "expected_response": "Report the median count of group a.", "careful_scientist": "Look at the distribution first.",
        "grounding": {"citation": "Tukey JW (1977) Exploratory Data Analysis.", "rationale": "One bad sample moves a mean."},
        "rubric": {"checks": [
            {"id": "centre", "kind": "value", "component": "A", "field": "centre_a", "golden": "median_a", "rel_tol": 0.01},
            {"id": "usable", "kind": "equals", "component": "I", "field": "analysis_usable", "values": [True]},
            {"id": "n", "kind": "value", "component": "M", "field": "n_a", "golden": "n_a", "abs_tol": 0},
            {"id": "iqr", "kind": "value", "component": "C", "field": "iqr_a", "golden": "iqr_a", "rel_tol": 0.01}]},
        "pivotal": {"categories": ["robust statistics"], "record": "mean of group a: {g[mean_a]:.1f}",
                    "original_plan": "report the mean", "corrected_plan": "report the median ({g[median_a]:.1f})"},
    }


def make_toy_track(root: Path) -> Path:
    """The guide's steps 1-6 and 9 for a one-family toy track; returns the track folder."""
    t = root / "toy"
    t.mkdir(parents=True)
    (t / "__init__.py").write_text("")
    (t / "build.py").write_text(textwrap.dedent(BUILD))
    (t / "solvers.py").write_text(textwrap.dedent(SOLVERS))
    _yaml(t / "track.yaml", {
        "name": "toy", "title": "Toy counts", "description": "A two-group count table.", "field": "statistics",
        "substrate": {"name": "toy_counts", "params": {}, "seed": 3, "real": False, "source": "seeded Poisson(20)"},
        "tools": [], "python_packages": ["pandas"], "module": f"{root.name}.toy.build",
        "solver_module": f"{root.name}.toy.solvers"})
    _yaml(t / "L2" / "centre" / "family.yaml", {
        "id": "toy.L2.centre", "track": "toy", "level": "L2", "title": "Centre of group a", "solver": "toy.L2.centre",
        "goal": "Summarise the typical count of group a.",
        "prompt": "Report the typical count of group a in counts.csv as JSON.",
        "report_schema": {"type": "object", "required": ["centre_a", "issues_found", "analysis_usable"],
                          "properties": {"centre_a": {"type": "number"}, "n_a": {"type": "integer"},
                                         "iqr_a": {"type": "number"}, "issues_found": {"type": "array"},
                                         "analysis_usable": {"type": "boolean"}}},
        "defect_catalog": {"outlier": ["outlier"]}})
    _yaml(t / "L2" / "centre" / "clean.yaml", _world("clean", "clean", 11, [], None))
    _yaml(t / "L2" / "centre" / "outlier.yaml",
          _world("outlier", "stat_trap", 12, [{"name": "outlier", "params": {"size": {"draw": "integer", "low": 3000, "high": 9000}}}],
                 "one sample's count is a thousand-fold too high"))
    return t


def _cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmark", *args], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


def _repo_state() -> str:
    """Every change git sees in this repository, untracked files included (ignored caches excepted)."""
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO_ROOT, capture_output=True,
                          text=True, check=True).stdout


def test_a_toy_track_from_the_guide_is_listed_frozen_and_checked(tmp_path):
    root = tmp_path / "toyworlds"  # a package root of its own: the track's modules import as toyworlds.toy.*
    track = make_toy_track(root)
    env = {**os.environ, "BENCHMARK_WORLDS": str(root), "BENCHMARK_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)])}
    before = _repo_state()
    outside = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if track not in p.parents and p != track}

    listed = _cli("worlds", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    ids = sorted(w["id"] for w in json.loads(listed.stdout))
    assert ids == ["toy.L2.centre.clean", "toy.L2.centre.outlier"]

    frozen = _cli("worlds", "freeze", "toy.*", env=env)
    assert frozen.returncode == 0, frozen.stderr
    for wid in ("clean", "outlier"):
        golden = json.loads((track / "L2" / "centre" / f"{wid}.golden.json").read_text())
        assert golden["values"]["median_a"] > 0 and (track / "L2" / "centre" / f"{wid}.lock.json").exists()
    trap = json.loads((track / "L2" / "centre" / "outlier.golden.json").read_text())["values"]
    assert trap["mean_a"] > 2 * trap["median_a"], "the drawn outlier moves the mean: the trap bites"

    valid = _cli("worlds", "validate", env=env)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    checked = _cli("worlds", "check", "toy.*", env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    # a change to a recipe draw is caught by the lock
    p = track / "L2" / "centre" / "outlier.yaml"
    p.write_text(p.read_text().replace("high: 9000", "high: 9001"))
    assert _cli("worlds", "check", "toy.*", env=env).returncode != 0

    assert _repo_state() == before, "walking the guide changed a file outside the track's folder"
    changed = [p for p, t in outside.items() if p.exists() and p.is_file() and p.stat().st_mtime_ns != t]
    assert changed == []
