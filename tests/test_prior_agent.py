"""Issue 39 item 3: the `prior` agent answers from textbook values and earns no more than blind trust allows.

It runs through the real run path in the real sandbox: the naive analysis (replayed, or run live), then a cell that sets
each quantity a handbook gives (worlds/<track>/priors.yaml) to the handbook's value."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmark.models.scripted.gaming import REPLAY_ENV
from benchmark.models.scripted.prior import declared_families, track_priors
from benchmark.oversight.validity import GAMING_MARGIN, check_agents
from benchmark.run.episodes import RunConfig, execute
from benchmark.run.store import RunStore
from benchmark.suite.loader import WORLDS_ROOT, load_suite
from graders.numerics import restore_environment

# the whole nuclear decay family (its bar is a family mean), and one world of each other family with a prior
WORLDS = [r.id for r in load_suite().worlds.values() if r.family.id == "nuclear.L2.decay"] + [
    "calorimetry.L2.equilibrium.clean", "protein.L2.function.destab", "scrna.L2.markers.confound_lane"]


def _report(out: Path, agent: str, world_id: str) -> dict:
    store = RunStore(out / agent)
    rec = next(r for r in store.results() if r.world_id == world_id)
    return json.loads(store.load_trajectory(rec.trajectory).report_raw)


def test_every_prior_names_a_family_and_fields_its_report_has():
    suite = load_suite()
    families = {r.family.id: r.family for r in suite.worlds.values()}
    declared = declared_families(WORLDS_ROOT)
    assert {"nuclear.L2.decay", "calorimetry.L2.equilibrium", "protein.L2.function", "scrna.L2.markers"} <= set(declared)
    for fid in declared:
        assert fid in families, f"priors.yaml names {fid}, which is no family"
        ref = next(r for r in suite.worlds.values() if r.family.id == fid)
        p = track_priors(ref)[fid]
        props = families[fid].report_schema["properties"]
        fields = set(p.values) | {k for a in p.answers.values() for k in a}
        assert fields <= set(props), (fid, fields - set(props))
    # the marker prior has a textbook answer for every population a markers world asks about
    markers = next(r for r in suite.worlds.values() if r.family.id == "scrna.L2.markers")
    asked = {json.loads(r.golden_path.read_text())["values"]["target_population"]
             for r in suite.worlds.values() if r.family.id == "scrna.L2.markers"}
    assert asked <= set(track_priors(markers)["scrna.L2.markers"].answers)


@pytest.mark.slow
def test_the_prior_agent_writes_the_textbook_answer_and_stays_at_blind_trust(tmp_path):
    problems, results = check_agents(WORLDS, None, ["L2"], out=tmp_path, agents=("naive", "all_clear", "prior"))
    assert problems == [], problems
    nuclear = _report(tmp_path, "prior", "nuclear.L2.decay.clean")
    assert nuclear["half_life_days"] == 1925.28 and nuclear["issues_found"] == [] and nuclear["table"]
    assert _report(tmp_path, "prior", "protein.L2.function.destab")["interface_positions"] == [
        "E27", "K28", "K31", "Q32", "N35", "D40", "E42", "W43"]
    markers = _report(tmp_path, "prior", "scrna.L2.markers.confound_lane")
    assert markers["target_population"] == "Dendritic" and markers["top_markers"][:2] == ["FCER1A", "CST3"]
    # calorimetry's prior is a computation on the handbook copper the world ships: a real root, not the specimen's
    cal, naive = (_report(tmp_path, a, "calorimetry.L2.equilibrium.clean") for a in ("prior", "naive"))
    assert 150 < cal["Tf_K"] < 400 and abs(cal["Tf_K"] - naive["Tf_K"]) > 0.5
    score = {a: {r.world_id: r.score for r in rs} for a, rs in results.items()}
    assert score["prior"]["calorimetry.L2.equilibrium.clean"] < score["all_clear"]["calorimetry.L2.equilibrium.clean"]
    # the textbook half-life is this source's true one: where the trap leaves the rate table right, the prior earns
    # what blind trust does not, and the family bar still holds (checked by check_agents above)
    assert score["prior"]["nuclear.L2.decay.summing_mid"] > score["all_clear"]["nuclear.L2.decay.summing_mid"]
    decay = [w for w in WORLDS if w.startswith("nuclear.")]
    assert sum(score["prior"][w] for w in decay) <= sum(score["all_clear"][w] for w in decay) + GAMING_MARGIN * len(decay)


@pytest.mark.slow
def test_the_prior_agent_runs_the_naive_analysis_live_without_a_replay(tmp_path):
    saved = {REPLAY_ENV: os.environ.pop(REPLAY_ENV, None)}
    try:
        [rec] = execute(RunConfig(model="scripted/prior", out=tmp_path / "prior", worlds=["nuclear.L2.decay.clean"],
                                  levels=["L2"]))
    finally:
        restore_environment(saved)
    rep = _report(tmp_path, "prior", "nuclear.L2.decay.clean")
    assert rec.status == "graded" and rec.code_cells >= 3, rec
    assert rep["half_life_days"] == 1925.28 and rep["table"] == "co60_rates.csv" and rep["issues_found"] == []
    assert any((tmp_path / "prior").rglob("co60_rates.csv")), "the naive analysis wrote its rate table"
