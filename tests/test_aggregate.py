"""Aggregation on hand-made records whose aggregates are computed by hand (SPEC R9, seed 001 §3, A.3-A.4)."""
from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

from benchmark.score.aggregate import (Options, aggregate, apply_rulings, kendall_w, load_rulings, split_half,
                                 w_permutation_test)
from tests.aggregate_helpers import rec, run_input, zero_pricing

FAST = Options(bootstrap_draws=200, permutation_draws=200)


def agg(records, opts=FAST, rulings=None, **kw):
    runs = kw.pop("runs", None) or [run_input(records)]
    return aggregate(runs, rulings or {}, kw.pop("pricing", None) or zero_pricing(), opts)


def model(data, name="m/a"):
    return next(s for s in data["models"] if s["model"] == name)


def test_family_balancing_large_family_does_not_outweigh_small():
    recs = [rec(f"t.L2.big{i}", "t", "L2", 100.0, family="big") for i in range(4)]
    recs.append(rec("t.L2.small", "t", "L2", 0.0, family="small"))
    s = model(agg(recs))
    assert s["tracks"]["t"]["L2"] == pytest.approx(50.0)  # (100 + 0) / 2, not the pooled 80


def test_geometric_composite_and_overall_mean_of_tracks():
    recs = [rec("a.L1.w", "a", "L1", 27.0), rec("a.L2.w", "a", "L2", 8.0), rec("a.L3.w", "a", "L3", 1.0),
            rec("b.L1.w", "b", "L1", 64.0), rec("b.L2.w", "b", "L2", 64.0), rec("b.L3.w", "b", "L3", 64.0)]
    s = model(agg(recs))
    assert s["tracks"]["a"]["composite"] == pytest.approx(6.0)  # (27 * 8 * 1) ** (1/3)
    assert s["tracks"]["a"]["arithmetic"] == pytest.approx(12.0)
    assert s["tracks"]["a"]["min_stage"] == pytest.approx(1.0)
    assert s["overall"] == pytest.approx(35.0)  # (6 + 64) / 2
    assert s["overall_sd"] == pytest.approx(np.std([6.0, 64.0], ddof=1))
    assert s["levels"]["L1"]["mean"] == pytest.approx(45.5)
    assert s["levels"]["L1"]["sd"] == pytest.approx(np.std([27.0, 64.0], ddof=1))
    assert s["views"]["arithmetic"] == pytest.approx((12.0 + 64.0) / 2)
    assert s["views"]["min_stage"] == pytest.approx((1.0 + 64.0) / 2)
    # bottleneck: track a's lowest stage is L3; track b ties all three -> 1/3 each
    assert s["bottleneck"]["counts"] == pytest.approx({"L1": 1 / 3, "L2": 1 / 3, "L3": 4 / 3})
    # threshold curve: stages that EXCEED t (see test_threshold_curve_counts_stages_that_exceed); a's L3 is 1.0
    assert s["threshold_curve"][0] == 1.0 and s["threshold_curve"][1] == 0.5 and s["threshold_curve"][64] == 0.0


def test_physics_tracks_are_scored_apart_and_never_enter_the_overall(monkeypatch):
    """Seed 001 Appendix F: a `domain: physics` track has its own table; the Overall, L1-L3, coverage and cost are
    the life-science tracks' alone, and the leaderboard prints the physics stage means beside their tokens and cost."""
    import benchmark.score.aggregate as aggregate_mod
    from benchmark.score.leaderboard import render_markdown

    life = [rec("b.L1.w", "b", "L1", 64.0), rec("b.L2.w", "b", "L2", 64.0), rec("b.L3.w", "b", "L3", 64.0)]
    phys = [rec("p.L1.w", "p", "L1", 27.0, tokens_in=500_000, tokens_out=500_000), rec("p.L2.w", "p", "L2", 8.0),
            rec("p.L3.w", "p", "L3", 1.0), rec("q.L1.w", "q", "L1", 9.0)]
    monkeypatch.setattr(aggregate_mod, "physics_tracks", lambda: frozenset({"p", "q"}))
    data = agg(life + phys)
    s = model(data)
    assert s["overall"] == pytest.approx(64.0) and set(s["tracks"]) == {"b"}  # not (64 + 6) / 2
    assert s["levels"]["L1"]["mean"] == pytest.approx(64.0) and s["coverage"]["assigned"] == 3
    p = s["physics"]
    assert p["tracks"]["p"]["composite"] == pytest.approx(6.0) and p["tracks"]["q"]["levels_missing"] == ["L2", "L3"]
    assert p["levels"]["L1"]["mean"] == pytest.approx(18.0) and p["levels"]["L1"]["tracks"] == 2  # (27 + 9) / 2
    assert p["levels"]["L3"]["mean"] == pytest.approx(1.0) and p["levels"]["L3"]["tracks"] == 1
    assert p["coverage"] == {"assigned": 4, "answered": 4, "coverage": 1.0}
    assert p["accounting"]["agent"]["tokens_m"] == pytest.approx(1.0) and s["accounting"]["agent"]["tokens_m"] == 0
    md = render_markdown(data)
    assert "## Physics (scored apart)" in md and "| m/a | 18.0 | 8.0 | 1.0 | 1.00 |" in md
    assert "### p (physics)" in md and "### p\n" not in md
    monkeypatch.setattr(aggregate_mod, "physics_tracks", lambda: frozenset())
    assert "physics" not in model(agg(life + phys)) and "Physics" not in render_markdown(agg(life + phys))


def test_zero_stage_makes_composite_zero():
    recs = [rec("a.L1.w", "a", "L1", 90.0), rec("a.L2.w", "a", "L2", 0.0), rec("a.L3.w", "a", "L3", 90.0)]
    assert model(agg(recs))["tracks"]["a"]["composite"] == 0.0


def test_missing_level_composite_over_levels_present_is_flagged():
    recs = [rec("a.L1.w", "a", "L1", 16.0), rec("a.L2.w", "a", "L2", 81.0)]
    s = model(agg(recs))
    assert s["tracks"]["a"]["composite"] == pytest.approx(36.0)  # sqrt(16 * 81)
    assert s["tracks"]["a"]["levels_missing"] == ["L3"]
    assert s["flagged_tracks"] == ["a"]


def test_ineligible_l3_dossier_is_excluded():
    recs = [rec("a.L3.x", "a", "L3", 90.0, eligible=True), rec("a.L3.y", "a", "L3", 0.0, eligible=False),
            rec("a.L3.z", "a", "L3", 30.0, eligible=None),
            rec("a.L3.g", "a", "L3", 0.0, status="ineligible")]  # stopped by the prior gate
    s = model(agg(recs))
    assert s["tracks"]["a"]["L3"] == pytest.approx(60.0)  # (90 + 30) / 2; the ineligible 0 is left out
    assert s["l3"]["eligible"] == 2 and s["l3"]["ineligible"] == 2


def test_l3_commitment_and_conditional_novelty_over_eligible():
    recs = [rec("a.L3.p", "a", "L3", 80.0, eligible=True, commitment="commit", axes={"D": 3, "Q": 3, "N": 3}),
            rec("a.L3.q", "a", "L3", 60.0, eligible=True, commitment="commit", axes={"D": 2, "Q": 2, "N": 1.5}),
            rec("a.L3.r", "a", "L3", 40.0, eligible=True, commitment="abstain", axes={"D": 2, "Q": 1}),
            rec("a.L3.s", "a", "L3", 99.0, eligible=False, commitment="commit", axes={"N": 0})]
    l3 = model(agg(recs))["l3"]
    assert l3["commitment"] == pytest.approx(2 / 3)
    assert l3["conditional_novelty"] == pytest.approx(75.0)  # mean(3, 1.5) * 100/3
    assert l3["novelty_n"] == 2


def test_replicates_averaged_before_aggregation():
    recs = [rec("a.L1.w", "a", "L1", 100.0, replicate=0), rec("a.L1.w", "a", "L1", 0.0, replicate=1),
            rec("a.L1.v", "a", "L1", 100.0, replicate=0)]
    s = model(agg(recs))
    assert s["tracks"]["a"]["L1"] == pytest.approx(75.0)  # world means 50 and 100; pooling records would give 66.7


def test_l1_dimensions_and_l2_dimension_means():
    recs = [rec("a.L1.c1", "a", "L1", cls="challenge", state="DIAGNOSE-AND-ACT"),
            rec("a.L1.c2", "a", "L1", cls="challenge", state="MISS"),
            rec("a.L1.k", "a", "L1", cls="clean", state="OVER-CAUTIOUS"),
            rec("a.L2.x", "a", "L2", comps={"A": 1.0, "I": 0.0, "M": 1.0, "C": 0.5}, family="f"),
            rec("a.L2.y", "a", "L2", comps={"A": 0.0, "I": 0.0, "M": 1.0, "C": 0.5}, family="f"),
            rec("a.L2.z", "a", "L2", comps={"A": 1.0, "I": 1.0, "M": 0.0, "C": 1.0}, family="g")]
    s = model(agg(recs))
    d1 = s["l1_dimensions"]["mean"]
    assert d1["issue_recognition"] == pytest.approx(0.5)  # challenge worlds only
    assert d1["methodological_response"] == pytest.approx(0.5)
    assert d1["result_calibration"] == pytest.approx(2 / 3)  # over all: OVER-CAUTIOUS is miscalibrated
    d2 = s["l2_dimensions"]["mean"]
    # family f: A .5 I 0 M 1 C .5; family g: A 1 I 1 M 0 C 1 -> mean of family means, x100
    assert d2 == pytest.approx({"A": 75.0, "I": 50.0, "M": 50.0, "C": 75.0})


def test_perfect_rates_per_level():
    recs = [rec("a.L1.x", "a", "L1", 100.0), rec("a.L1.y", "a", "L1", 50.0), rec("a.L1.z", "a", "L1", 100.0),
            rec("a.L2.x", "a", "L2", 99.0)]
    p = model(agg(recs))["perfect"]
    assert p["L1"]["rate"] == pytest.approx(2 / 3) and p["L2"]["rate"] == 0.0 and p["L3"]["rate"] is None


def _ledger(tmp_path, entries: str):
    path = tmp_path / "camp.yaml"
    path.write_text("kind: adjudication\ncampaign: camp\nentries:\n" + textwrap.indent(textwrap.dedent(entries), "  "))
    return load_rulings([path])[0]


RULING = """\
- id: {id}
  run: run-a
  model: m/a
  world: {world}
  replicate: 0
  component: {component}
  deterministic: {det}
  ruling: {ruling}
  adjudicator: tester
  date: 2026-10-02
  rationale: the report names the defect
"""


def test_state_ruling_changes_the_result_without_mutating_records(tmp_path):
    recs = [rec("a.L1.x", "a", "L1", cls="challenge", state="MISS"), rec("a.L1.y", "a", "L1", state="CLEAN-CORRECT")]
    before = [r.model_dump() for r in recs]
    assert model(agg(recs))["tracks"]["a"]["L1"] == pytest.approx(50.0)
    rulings = _ledger(tmp_path, RULING.format(id=1, world="a.L1.x", component="state", det="MISS", ruling="DIAGNOSE-AND-ACT"))
    s = model(agg(recs, rulings=rulings))
    assert s["tracks"]["a"]["L1"] == pytest.approx(100.0)
    assert s["rulings_applied"] == [1]
    assert s["l1_dimensions"]["mean"]["issue_recognition"] == 1.0  # the ruled state feeds the dimensions too
    assert [r.model_dump() for r in recs] == before


def test_component_rulings_recompute_score_and_keep_caps(tmp_path):
    acc = rec("a.L2.acc", "a", "L2", 50.0, comps={"A": 0.0, "I": 1.0, "M": 1.0, "C": 1.0},
              caps=["accuracy cap: A = 0 (score capped at 0.500)"], family="f")
    unus = rec("a.L2.un", "a", "L2", 100 / 3, comps={"A": 1.0, "I": 1.0, "M": 1.0, "C": 1.0},
               caps=["unusable cap: a solvable world declared unusable (score capped at 0.333)"], family="g")
    entries = (RULING.format(id=1, world="a.L2.acc", component="A", det=0.0, ruling=1.0)
               + RULING.format(id=2, world="a.L2.un", component="C", det=1.0, ruling=0.6))
    rulings = _ledger(tmp_path, entries)
    e1 = apply_rulings(acc.model_copy(update={"run_id": "run-a"}), "run-a", rulings)
    assert e1.score == pytest.approx(100.0)  # A ruled 1: mean 1.0, the accuracy cap's premise is gone
    e2 = apply_rulings(unus.model_copy(update={"run_id": "run-a"}), "run-a", rulings)
    assert e2.score == pytest.approx(33.3)  # mean 0.9, the recorded unusable cap (0.333) is kept
    assert model(agg([acc, unus], rulings=rulings))["tracks"]["a"]["L2"] == pytest.approx((100.0 + 33.3) / 2)


def test_score_ruling_and_ruling_for_another_run_is_ignored(tmp_path):
    recs = [rec("a.L1.x", "a", "L1", 0.0, state="MISS")]
    entries = RULING.format(id=1, world="a.L1.x", component="score", det=0, ruling=70) + \
        RULING.format(id=2, world="a.L1.x", component="score", det=0, ruling=90).replace("run: run-a", "run: other")
    s = model(agg(recs, rulings=_ledger(tmp_path, entries)))
    assert s["tracks"]["a"]["L1"] == pytest.approx(70.0)


def test_refusal_coverage_and_fallback_replay_accounts_both_costs():
    from benchmark.score.accounting import Pricing, RateCard
    import datetime as dt

    card = RateCard(date=dt.date(2026, 1, 1), source="t",
                    models={"m/x": {"input": 1, "output": 0}, "m/y": {"input": 2, "output": 0}})
    x = [rec("a.L1.w1", "a", "L1", 80.0, model="m/x", tokens_in=1_000_000, calls=3),
         rec("a.L1.w2", "a", "L1", 0.0, model="m/x", status="refused", tokens_in=1_000_000, calls=1)]
    y = [rec(f"a.L1.w{i}", "a", "L1", sc, model="m/y", tokens_in=1_000_000, calls=5) for i, sc in ((1, 20.0), (2, 60.0), (3, 40.0))]
    runs = [run_input(x, run_id="rx"), run_input(y, run_id="ry")]
    data = aggregate(runs, {}, Pricing([card]), Options(fallbacks=[("m/x", "m/y")], bootstrap_draws=50, permutation_draws=50))
    sx, sy, rp = model(data, "m/x"), model(data, "m/y"), model(data, "m/x -> m/y")
    assert sx["coverage"] == {**sx["coverage"], "assigned": 3, "answered": 1, "refused": 1, "missing": 1, "complete": False}
    assert not sx["ranked"] and sx["tracks"]["a"]["L1"] == pytest.approx(80.0)
    assert sy["ranked"] and sy["tracks"]["a"]["L1"] == pytest.approx(40.0)
    # replay: w1 own 80, w2 from Y 60, w3 (never invoked) from Y 40
    assert rp["tracks"]["a"]["L1"] == pytest.approx(60.0)
    assert rp["replay"]["routed_refused"] == 1 and rp["replay"]["routed_missing"] == 1
    assert rp["coverage"]["complete"] and rp["ranked"]
    # cost: X's own w1 ($1) and refused attempt on w2 ($1) kept, plus Y's w2 ($2) and w3 ($2)
    assert rp["accounting"]["usd_total"] == pytest.approx(6.0)
    assert rp["accounting"]["usd_per_task"] == pytest.approx(2.0)
    assert rp["accounting"]["agent"]["calls"] == pytest.approx(3 + 1 + 5 + 5)
    assert sx["accounting"]["usd_total"] == pytest.approx(2.0) and sx["accounting"]["usd_per_task"] == pytest.approx(2 / 3)
    # the replay row is not an observed model: stability uses observed, fully covered models only
    assert data["stability"]["models"] == ["m/y"]


def test_duplicate_world_across_runs_of_one_model_is_an_error():
    from benchmark.errors import BenchmarkError

    r = [rec("a.L1.w", "a", "L1", 10.0)]
    with pytest.raises(BenchmarkError, match="recorded in both runs"):
        aggregate([run_input(r, run_id="r1"), run_input(r, run_id="r2")], {}, zero_pricing(), FAST)


def test_kendall_w_by_hand_with_ties():
    w, ranks = kendall_w(np.array([[1.0, 1.0], [1.0, 2.0], [2.0, 3.0]]))
    # ranks: track 1 (1.5, 1.5, 3), track 2 (1, 2, 3); R = (2.5, 3.5, 6), S = 6.5;
    # W = 12 S / (m^2 (n^3 - n) - m sum(t^3 - t)) = 78 / (4 * 24 - 2 * 6)
    assert w == pytest.approx(78 / 84)
    assert kendall_w(np.array([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0]]))[0] == pytest.approx(0.0)
    agree = np.array([[1.0, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3], [4, 4, 4, 4]])
    res = w_permutation_test(agree, 2000, 1)
    assert res["W"] == pytest.approx(1.0)
    assert res["p"] < 0.01
    assert res["null_mean"] == pytest.approx(1 / 4, abs=0.03)  # null mean is 1/m, not zero


def test_permutation_null_preserves_ties():
    # every track ties all models: W undefined, no p-value
    res = w_permutation_test(np.ones((3, 4)), 100, 1)
    assert res["W"] is None and res["p"] is None


def test_split_half_partitions_and_omitted_constant_halves():
    m = np.array([[1.0, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]])
    sh = split_half(m)
    assert sh["partitions"] == 3 and sh["retained"] == 3 and sh["mean"] == pytest.approx(1.0)
    flat = np.array([[1.0, 1, 5, 5], [1, 1, 6, 6], [1, 1, 7, 7]])
    sh = split_half(flat)  # the partition {0,1}|{2,3} has a constant half and is omitted
    assert sh["partitions"] == 3 and sh["retained"] == 2


def test_bootstrap_interval_is_deterministic_and_brackets_estimate():
    recs = [rec(f"a.L1.w{i}", "a", "L1", float(10 * i)) for i in range(8)] + \
           [rec(f"a.L2.w{i}", "a", "L2", float(5 + 10 * i), family=f"f{i % 3}") for i in range(6)]
    d1, d2 = agg(recs), agg(recs)
    s = model(d1)
    lo, hi = s["ci95"]["overall"]
    assert lo <= s["overall"] <= hi and hi - lo > 0
    assert s["ci95"] == model(d2)["ci95"]
    flat = [rec(f"a.L1.w{i}", "a", "L1", 40.0) for i in range(5)]
    assert model(agg(flat))["ci95"]["L1"] == pytest.approx([40.0, 40.0])


def test_stability_over_models_and_bh_adjustment():
    recs = []
    for mi, name in enumerate(("m/a", "m/b", "m/c")):
        for t in ("p", "q", "r", "s"):
            recs.append(rec(f"{t}.L1.w", t, "L1", 20.0 * (mi + 1), model=name, tokens_in=100 * (mi + 1)))
    runs = [run_input([r for r in recs if r.model == n], run_id=n) for n in ("m/a", "m/b", "m/c")]
    data = aggregate(runs, {}, zero_pricing(), Options(bootstrap_draws=10, permutation_draws=500))
    st = data["stability"]["measures"]
    assert st["L1"]["W"] == pytest.approx(1.0) and st["tokens"]["W"] == pytest.approx(1.0)
    assert st["L1"]["split_half"]["partitions"] == 3
    assert 0 < st["L1"]["p"] <= st["L1"]["p_bh"] <= 1
    assert math.isclose(data["pooled"]["perfect"]["L1"]["rate"], 0.0)
