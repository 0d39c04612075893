"""Statistics as the seeds define them (issue 12, item 5), and L3 rulings applied at aggregation (item 2).

Each test quotes the seed sentence it implements (../shared/seeds/001_*.txt, 002_*.txt)."""
from __future__ import annotations

import datetime as dt
import json
import textwrap
from types import SimpleNamespace

import pytest

from benchmark.score.aggregate import Options, aggregate, load_run
from benchmark.errors import ManifestError
from tests.aggregate_helpers import rec, run_input, write_run, zero_pricing

FAST = Options(bootstrap_draws=100, permutation_draws=200)


def _model(data, name):
    return next(s for s in data["models"] if s["model"] == name)


def test_threshold_curve_counts_stages_that_exceed():
    """Seed 001 A.4: "Figure 8 reports, over the full range of score requirements, the fraction of tracks where all
    three stage means exceed each requirement." A stage mean equal to the requirement does not exceed it."""
    recs = [rec(f"a.{lv}.w", "a", lv, 50.0) for lv in ("L1", "L2", "L3")]
    recs += [rec(f"b.{lv}.w", "b", lv, 80.0) for lv in ("L1", "L2", "L3")]
    curve = _model(aggregate([run_input(recs)], {}, zero_pricing(), FAST), "m/a")["threshold_curve"]
    assert curve[49] == 1.0
    assert curve[50] == 0.5, "track a's stages equal 50: they do not exceed 50 (the old code counted 'at or above')"
    assert curve[79] == 0.5 and curve[80] == 0.0


def test_fallback_replay_does_not_route_a_gate_excluded_l3_record():
    """Seed 001 L.5: "The Fable $\\to$ Opus replay adds the exact 92 canonical Opus outputs selected by the routing
    rule (29 L1, 44 L2, and 19 L3)" -- 19, because one Opus L3 task "was excluded before execution by its prior
    gate"; routing it would give 20."""
    y = [rec("a.L1.w", "a", "L1", 60.0, model="m/y"), rec("a.L2.w", "a", "L2", 60.0, model="m/y"),
         rec("a.L3.ok", "a", "L3", 50.0, model="m/y", eligible=True, commitment="commit", axes={"D": 2, "Q": 1, "N": 1.5}),
         rec("a.L3.gated", "a", "L3", None, model="m/y", eligible=False, status="ineligible")]
    x = [rec("a.L1.w", "a", "L1", 90.0, model="m/x"), rec("a.L2.w", "a", "L2", 0.0, model="m/x", status="refused")]
    data = aggregate([run_input(x, run_id="rx"), run_input(y, run_id="ry")], {}, zero_pricing(),
                     Options(fallbacks=[("m/x", "m/y")], bootstrap_draws=50, permutation_draws=50))
    rp = _model(data, "m/x -> m/y")
    assert rp["replay"]["routed_by_level"] == {"L1": 0, "L2": 1, "L3": 1}, "the gate-excluded L3 record is not routed"
    assert rp["replay"]["gate_excluded"] == 1 and rp["replay"]["unrouted"] == 0
    assert rp["l3"]["eligible"] == 1 and rp["tracks"]["a"]["L3"] == pytest.approx(50.0)
    assert rp["coverage"]["complete"], "the gate-excluded world is covered, as it is in Y's own row"


def test_stability_measures_include_the_seeds_l3_and_l1_measures():
    """Seed 001 A.3: "L3 commitment is $0.45$, evidence fidelity over eligible outcomes is $0.27$, and prior return is
    $0.22$. L1 clean specificity is $0.15$; the near-ceiling no-fabrication measure has $W=0.089$." """
    recs = []
    for m, k in (("m/a", 0), ("m/b", 1), ("m/c", 2)):
        for t in ("t1", "t2", "t3"):
            d = (k + (t == "t2")) % 3
            recs.append(rec(f"{t}.L1.clean", t, "L1", model=m, cls="clean", state=["CLEAN-CORRECT", "OVER-CAUTIOUS", "FABRICATED"][d]))
            recs.append(rec(f"{t}.L1.defect", t, "L1", model=m, cls="challenge", state="DIAGNOSE-AND-ACT"))
            recs.append(rec(f"{t}.L2.w", t, "L2", 50.0 + k, model=m))
            r3 = rec(f"{t}.L3.d", t, "L3", 40.0 + d, model=m, cls="counterfactual", eligible=True, commitment="commit",
                     axes={"D": float(d), "Q": 1.0, "N": 1.0})
            recs.append(r3.model_copy(update={"prior_return": float(d == 0)}))
    runs = [run_input([r for r in recs if r.model == m], model=m, run_id=m) for m in ("m/a", "m/b", "m/c")]
    data = aggregate(runs, {}, zero_pricing(), FAST)
    measures = data["stability"]["measures"]
    for name in ("L3.evidence_fidelity", "L3.prior_return", "L1.clean_specificity", "L1.no_fabrication"):
        assert name in measures and measures[name]["W"] is not None, name
    a = _model(data, "m/a")
    assert a["l1_dimensions"]["by_track"]["t1"]["clean_specificity"] == 1.0  # m/a t1: CLEAN-CORRECT
    assert a["l1_dimensions"]["by_track"]["t2"]["no_fabrication"] == pytest.approx(1.0)  # OVER-CAUTIOUS, DIAGNOSE
    c = _model(data, "m/c")
    assert c["l1_dimensions"]["by_track"]["t1"]["no_fabrication"] == pytest.approx(0.5)  # FABRICATED on the clean world
    assert a["l3"]["evidence_fidelity_by_track"]["t2"] == pytest.approx(100 / 3)  # D = 1 of 3


def test_cost_per_task_divides_by_the_suites_assigned_tasks(tmp_path):
    """Seed 001 §3: "Cost per task is the total estimated monetary cost in USD divided by the number of assigned
    tasks" -- the tasks the frozen suite assigned the run, not the tasks present in the loaded runs (L.5: "Cost
    coverage is joined to the frozen registries rather than inferred by globbing run directories")."""
    from benchmark.score.accounting import Pricing, RateCard
    from benchmark.suite.loader import load_suite
    from benchmark.run.store import RunStore

    assigned = sorted(r.id for r in load_suite().select(None, ["scrna"], ["L1"]))
    assert len(assigned) > 2
    d = tmp_path / "run"
    store = RunStore(d)
    store.init({"model": "m/a", "run_id": "run", "started": "2026-10-01T00:00:00+00:00", "worlds": None,
                "tracks": ["scrna"], "levels": ["L1"], "suite": None}, resume=False)
    for wid in assigned[:2]:  # only two worlds were run (e.g. a refusal-stop): the others are still assigned
        store.append(rec(wid, "scrna", "L1", 100.0, model="m/a", tokens_in=1_000_000, run_id="run"))
    card = RateCard(date=dt.date(2026, 1, 1), source="t", models={"m/a": {"input": 3, "output": 0}})
    s = _model(aggregate([load_run(d)], {}, Pricing([card]), FAST), "m/a")
    assert s["coverage"]["assigned"] == len(assigned) and not s["coverage"]["complete"]
    assert s["accounting"]["usd_per_task"] == pytest.approx(6.0 / len(assigned)), "not $6 / 2 tasks present"


def test_permutation_and_bootstrap_defaults_follow_the_seeds():
    """Seed 001 A.3: "A within-track permutation of model labels (50,000 draws)". Seed 002 Table 10: "Intervals use
    100,000 paired percentile bootstrap samples." """
    from benchmark.cli import build_parser
    from benchmark.pivotal.score import DRAWS

    assert Options().permutation_draws == 50_000
    assert build_parser().parse_args(["leaderboard", "--runs", "x"]).permutations == 50_000
    assert DRAWS == 100_000
    assert build_parser().parse_args(["pivotal", "score", "x"]).bootstrap == 100_000
    assert build_parser().parse_args(["pivotal", "run"]).bootstrap == 100_000
    assert build_parser().parse_args(["leaderboard", "--runs", "x"]).pivotal_bootstrap == 100_000


def test_a_refusal_written_in_the_reply_is_a_refusal(monkeypatch):
    """Seed 001 §3: Fable's "L1/L2 refusal rates are non-monotonic across difficulty quintiles and cluster strongly
    by scientific track and analysis family (Appendix B)" -- refusals counted from the replies, not only provider
    content filters. A refusal in the reply is recorded, leaves coverage and is routed by fallback replay."""
    import benchmark.run.agent as agent
    from benchmark.suite.loader import load_suite
    from benchmark.run.records import CallRecord
    from benchmark.run.refusal import detect_refusal

    assert detect_refusal("I'm sorry, but I can't help with that request.") == "apology_then_decline"
    assert detect_refusal("I must decline to analyse these files.") == "explicit_decline"
    assert detect_refusal("I can't complete the analysis because the BAM is truncated") is None  # a limit, not a refusal

    def fake_call(model, messages, step, **kw):
        msg = SimpleNamespace(content="I'm sorry, but I can't assist with this request.", tool_calls=None)
        return SimpleNamespace(choices=[SimpleNamespace(message=msg, finish_reason="stop")]), \
            CallRecord(model=model, step=step, ok=True)

    monkeypatch.setattr(agent, "call_model", fake_call)
    ref = load_suite().worlds["scrna.L1.integrity.clean"]
    ep = agent.run_episode(ref, "m/x", sandbox=None, budget=3)
    assert ep.status == "refused" and ep.refusal == "reply_text: apology_then_decline" and len(ep.calls) == 1

    x = [rec("a.L1.w", "a", "L1", 0.0, model="m/x", status="refused").model_copy(update={"refusal": "reply_text: first_person_decline"})]
    y = [rec("a.L1.w", "a", "L1", 70.0, model="m/y")]
    data = aggregate([run_input(x, run_id="rx"), run_input(y, run_id="ry")], {}, zero_pricing(),
                     Options(fallbacks=[("m/x", "m/y")], bootstrap_draws=50, permutation_draws=50))
    assert _model(data, "m/x")["coverage"]["refused"] == 1
    assert _model(data, "m/x -> m/y")["replay"]["routed_refused"] == 1


# ------------------------------------------------------------------ L3 rulings (item 2)

def _l3_run(tmp_path):
    recs = [rec("scrna.L1.integrity.clean", "scrna", "L1", 100.0, model="m/a"),
            rec("scrna.L2.markers.clean", "scrna", "L2", 100.0, model="m/a"),
            rec("scrna.L3.dossier.mhc2_myeloid", "scrna", "L3", 200 / 3, model="m/a", cls="counterfactual",
                eligible=True, commitment="commit", axes={"D": 2.0, "Q": 2.0, "N": 2.0}),
            rec("scrna.L3.dossier.b_plasma_programme", "scrna", "L3", None, model="m/a", cls="counterfactual",
                eligible=False, status="ineligible", commitment="commit", axes={"D": 3.0, "Q": 3.0, "N": 3.0})]
    return write_run(tmp_path / "runs", "ra", recs, "m/a")


def test_a_ruling_on_an_l3_axis_changes_the_aggregate_and_not_the_results(tmp_path):
    from benchmark.oversight.adjudicate import rule
    from benchmark.score.leaderboard import build

    run = _l3_run(tmp_path)
    before = (run / "results.jsonl").read_bytes()
    led = tmp_path / "ledgers" / "campaign.yaml"
    base = build([run], ledgers=[], bootstrap=20, permutations=20)
    assert _model(base, "m/a")["tracks"]["scrna"]["L3"] == pytest.approx(200 / 3)
    r = rule(run, led, "scrna.L3.dossier.mhc2_myeloid", "D", "0", "A. Person", "the claims contradict the table",
             date=dt.date(2026, 10, 2))
    assert r.deterministic == 2.0, "the deterministic value is the judge's D, not a 0.0 fallback"
    ruled = build([run], ledgers=[led], bootstrap=20, permutations=20)
    s = _model(ruled, "m/a")
    assert s["tracks"]["scrna"]["L3"] == pytest.approx((0 + 2 + 2) / 3 * 100 / 3)  # l3_score with the ruled D
    assert s["rulings_applied"] == [r.id]
    # the prior gate: the gated-out dossier enters L3 means with its own axes
    g = rule(run, led, "scrna.L3.dossier.b_plasma_programme", "eligible", "eligible", "A. Person",
             "the evidence does conflict with the stated prior", date=dt.date(2026, 10, 2))
    assert g.deterministic == "ineligible"
    s = _model(build([run], ledgers=[led], bootstrap=20, permutations=20), "m/a")
    assert s["tracks"]["scrna"]["L3"] == pytest.approx(((0 + 2 + 2) / 3 * 100 / 3 + 100.0) / 2)
    assert s["l3"]["eligible"] == 2
    assert (run / "results.jsonl").read_bytes() == before, "rulings apply at aggregation only"


def test_l3_rulings_are_validated_with_file_line_and_field(tmp_path):
    from benchmark.oversight.ledger import LEVEL_COMPONENTS, load_ledger

    assert LEVEL_COMPONENTS["L3"] == ("score", "D", "Q", "N", "eligible")
    entry = """\
        kind: adjudication
        campaign: c
        entries:
          - id: 1
            run: ra
            model: m/a
            world: scrna.L3.dossier.mhc2_myeloid
            component: {comp}
            deterministic: 2
            ruling: {value}
            adjudicator: A
            date: 2026-10-02
            rationale: r
        """
    for comp, value, words in (("D", 4, "0 to 3"), ("N", "high", "0 to 3"), ("eligible", "maybe", "'eligible' or 'ineligible'"),
                               ("eligible", "true", "boolean")):
        p = tmp_path / f"{comp}_{value}.yaml"
        p.write_text(textwrap.dedent(entry.format(comp=comp, value=value)))
        with pytest.raises(ManifestError) as exc:
            load_ledger(p)
        msg = str(exc.value)
        assert str(p) in msg and "ruling" in msg and words in msg and f"{p}:10:" in msg, msg
    ok = tmp_path / "ok.yaml"
    ok.write_text(textwrap.dedent(entry.format(comp="Q", value=1.5)))
    assert load_ledger(ok).entries[0].ruling == 1.5


def test_ledger_pending_shows_the_final_l3_answer_and_the_judges_reasons(tmp_path):
    from benchmark.oversight.adjudicate import _l3_evidence
    from benchmark.suite.loader import load_suite

    ref = load_suite().worlds["scrna.L3.dossier.mhc2_myeloid"]
    traj = SimpleNamespace(report_raw='{"hypothesis": "first"}', l3={
        "final_answer": {"hypothesis": "revised \x1b[31m after review"}, "prior": {"expectation": "e"}, "eligible": True,
        "eligibility_reason": "conflicts", "commitment": "commit", "axes": {"D": 2},
        "judge_draws": [{"D": 2, "N": 1, "reason": "cites every row"}]})
    rubric, report, evidence = _l3_evidence(ref, traj)
    assert "revised" in report and "first" not in report
    assert "cites every row" in evidence and "[code step" not in evidence
    assert "D (evidence fidelity)" in rubric
