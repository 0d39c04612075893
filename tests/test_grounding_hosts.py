"""Grounding hosts (benchmark/grounding/host.py): two toy tracks in a temporary worlds root host items side by side.

Each toy track is one folder (track.yaml with a grounding_module, grounding.py registering a host, grounding.yaml):
items know their track, ids must be unique across tracks, families and operations are checked against the host, and
through the real CLI the items build, verify from disk and are answered by the scripted oracle in the sandbox with
the host's own statistic source.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from benchmark.errors import BenchmarkError
from benchmark.suite.loader import REPO_ROOT

HOST = '''
"""Toy grounding host: one value per sample in four groups; which group has the highest mean value?"""
import copy

from benchmark.suite.canonical import CanonicalWriter
from benchmark.errors import BenchmarkError
from benchmark.grounding.host import GroundingHost
from benchmark.suite.registry import grounding_host

MEANS = {"alpha": 1.0, "beta": 5.0, "gamma": 3.0, "delta": 2.0}

STAT_SOURCE = r"""
import csv, os


def load(root="."):
    with open(os.path.join(root, "values.csv"), newline="") as fh:
        return list(csv.DictReader(fh))


def reference_statistic(spec, options, data):
    values, missing = {}, []
    for letter, group in options.items():
        xs = [float(r["value"]) for r in data if r["group"] == group]
        values[letter] = sum(xs) / len(xs) if xs else None
        if not xs:
            missing.append(f"no samples of {group}")
    return decide(values, missing, float(spec["margin"]), spec.get("direction", "max"))
"""


def remove_group(d, rng, group):
    if group not in {g for _, g, _ in d}:
        raise BenchmarkError(f"group {group} is not in the data")
    return [r for r in d if r[1] != group]


def swap_groups(d, rng, a, b):
    return [(s, b if g == a else a if g == b else g, v) for s, g, v in d]


@grounding_host("TRACK")
class ToyHost(GroundingHost):
    families = ("level",)
    assay = "toy measurements"
    files = "values.csv (sample, group, value)."
    stat_source = STAT_SOURCE
    ops = {"remove_group": remove_group, "swap_groups": swap_groups}

    def base_data(self, dataset, datasets):
        return [(f"S{g[0]}{k}", g, m + 0.1 * k) for g, m in MEANS.items() for k in range(3)]

    def null(self, d, rng):
        order = rng.permutation(len(d))
        return [(f"X{i:03d}", d[j][1], d[j][2]) for i, j in enumerate(order)]

    def write_version(self, d, root):
        w = CanonicalWriter(root)
        w.lines("values.csv", ["sample,group,value"] + [f"{s},{g},{v:.3f}" for s, g, v in sorted(d)])
        return sorted(w.written)

    def verify_extra(self, item, cls, root, data, original):
        kept = {s for s, _, _ in original} & {r["sample"] for r in data} if cls == "null" else set()
        return [f"{cls}: original sample ids survive: {sorted(kept)}"] if kept else []
'''


def _item(iid: str, family: str = "level") -> dict:
    return {"id": iid, "family": family, "question": "Which group has the highest mean value?",
            "options": {"A": "alpha", "B": "beta", "C": "gamma", "D": "delta"}, "key": "B",
            "background": "Toy measurements of four groups.", "statistic": {"kind": "mean", "margin": 0.5},
            "withdrawal": {"op": "remove_group", "group": "beta"},
            "flip": {"op": "swap_groups", "a": "beta", "b": "alpha", "answer": "A"}}


def make_root(tmp_path: Path, name: str, items: dict[str, list[dict]]) -> Path:
    """A worlds root (an importable package) with one toy hosting track per key of `items`."""
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text("")
    for track, its in items.items():
        t = root / track
        t.mkdir()
        (t / "__init__.py").write_text("")
        (t / "grounding.py").write_text(textwrap.dedent(HOST).replace("TRACK", track))
        (t / "track.yaml").write_text(yaml.safe_dump({"name": track, "grounding_module": f"{name}.{track}.grounding"}))
        (t / "grounding.yaml").write_text(yaml.safe_dump({"items": its}, sort_keys=False))
    return root


@pytest.fixture
def importable(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_items_of_two_hosts_know_their_track(importable):
    from benchmark.grounding.items import load_items, select

    root = make_root(importable, "gw_two", {"toya": [_item("a_level")], "toyb": [_item("b_level"), _item("b_other")]})
    cat = load_items(root)
    assert [(i.id, i.track) for i in cat.items] == [("a_level", "toya"), ("b_level", "toyb"), ("b_other", "toyb")]
    assert set(cat.paths) == {"toya", "toyb"}
    assert [i.id for i in select(tracks=["toyb"], root=root)] == ["b_level", "b_other"]
    assert [i.id for i in select(["*level"], ["toyb"], root=root)] == ["b_level"]
    assert cat.items[0].host.assay == "toy measurements"
    with pytest.raises(BenchmarkError, match="host no grounding items"):
        select(tracks=["nope"], root=root)


def test_ids_unique_across_tracks_and_fields_checked_against_the_host(importable):
    from benchmark.grounding.items import load_items

    root = make_root(importable, "gw_dup", {"toya": [_item("same")], "toyb": [_item("same")]})
    with pytest.raises(BenchmarkError) as exc:
        load_items(root)
    msg = str(exc.value)
    assert "'same'" in msg and "toya/grounding.yaml" in msg and "toyb/grounding.yaml" in msg

    root = make_root(importable, "gw_fam", {"toya": [_item("x", family="marker")]})
    with pytest.raises(BenchmarkError, match=r"toya/grounding.yaml: item x: field 'family': 'marker' is not a family"):
        load_items(root)
    bad = {**_item("y"), "flip": {"op": "swap_genes", "a": "beta", "b": "alpha", "answer": "A"}}
    root = make_root(importable, "gw_op", {"toya": [bad]})
    with pytest.raises(BenchmarkError, match=r"item y: field 'flip.op': unknown operation 'swap_genes'"):
        load_items(root)
    root = make_root(importable, "gw_trk", {"toya": [{**_item("z"), "track": "toyb"}]})
    with pytest.raises(BenchmarkError, match="field 'track'"):
        load_items(root)


def _cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmark", "grounding", *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_two_hosts_build_and_the_oracle_answers_from_each_hosts_statistic(tmp_path):
    root = make_root(tmp_path, "gw_cli", {"toya": [_item("a_level")], "toyb": [_item("b_level")]})
    env = {**os.environ, "BENCHMARK_WORLDS": str(root), "BENCHMARK_GROUNDING_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)])}
    built = _cli("build", "--tracks", "toya", env=env)
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "cache" / "named" / "a_level" / "build.json").exists()
    assert not (tmp_path / "cache" / "named" / "b_level").exists()

    listed = _cli("items", "--json", "--build", env=env)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    rows = {r["id"]: r for r in json.loads(listed.stdout)}
    assert {i: r["track"] for i, r in rows.items()} == {"a_level": "toya", "b_level": "toyb"}
    assert all(r["versions"][c]["verified"] for r in rows.values() for c in ("original", "null", "withdrawal", "flip"))
    rec = json.loads((tmp_path / "cache" / "named" / "b_level" / "build.json").read_text())
    assert {c: v["supported"] for c, v in rec["versions"].items()} == {"original": "B", "null": "B", "withdrawal": None,
                                                                         "flip": "A"}

    out = tmp_path / "run"
    ran = _cli("run", "--model", "scripted/oracle", "--tracks", "toya", "toyb", "--out", str(out), env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    recs = [json.loads(x) for x in (out / "grounding.jsonl").read_text().splitlines()]
    by = {(r["item"], r["condition"]): r for r in recs}
    assert len(recs) == 10 and {r["track"] for r in recs} == {"toya", "toyb"}
    for item in ("a_level", "b_level"):
        assert by[(item, "original")]["answer"] == by[(item, "null")]["answer"] == "B"
        assert by[(item, "withdrawal")]["data_support"] == "cannot determine" and by[(item, "withdrawal")]["flag"]
        assert by[(item, "flip")]["answer"] == "A"
    prompt = json.loads((out / by[("a_level", "original")]["trajectory"]).read_text())["messages"][1]["content"]
    assert "toy measurements in your working directory" in prompt and "Files: values.csv" in prompt
