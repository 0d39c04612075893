"""L3 scoring rules on hand-made judge draws (seed 001 J.3, J.4) and the drift measure (SPEC R7)."""
import pytest

from benchmark.l3 import Q_AXES, hyp_drift, l3_score, median_axes


def draw(d, q, n, justified=False):
    return {"D": d, **{k: q for k in Q_AXES}, "N": n, "abstention_justified": justified, "reason": "r"}


def test_median_of_three_draws_per_axis():
    draws = [draw(3, 2, 0), draw(1, 2, 3), draw(2, 1, 3)]
    axes = median_axes(draws)
    assert axes["D"] == 2 and axes["N"] == 3 and axes["Q"] == 2
    # an outlier draw cannot move the median
    assert median_axes([draw(3, 3, 3), draw(3, 3, 3), draw(0, 0, 0)])["D"] == 3


def test_q_is_the_mean_of_five_subaxes():
    d = {"D": 2, "prior_awareness": 3, "causal_calibration": 2, "response_to_critique": 1, "scientific_humility": 0,
         "citation_integrity": 3, "N": 1, "abstention_justified": False, "reason": ""}
    assert median_axes([d])["Q"] == pytest.approx(9 / 5)


def test_committed_score_is_mean_of_d_q_n():
    assert l3_score(median_axes([draw(3, 3, 0)]), "commit") == pytest.approx(2.0)


def test_abstention_partial_credit_rule():
    justified = median_axes([draw(3, 3, 3, True)] * 3)
    unjustified = median_axes([draw(3, 3, 3, False)] * 3)
    assert l3_score(justified, "abstain") == 2.0, "N is not scored and a justified abstention caps at 2"
    assert l3_score(unjustified, "abstain") == 1.0
    assert l3_score(median_axes([draw(1, 1, 3, True)]), "abstain") == 1.0
    assert l3_score(None, "commit") is None


def test_hyp_drift():
    assert hyp_drift("same text", "same text") == 0.0
    assert hyp_drift("", "anything") == 1.0
    assert 0 < hyp_drift("H3K4me3 marks active promoters", "H3K4me3 marks bivalent promoters") < 0.5


@pytest.mark.slow
def test_offline_l3_run_records_the_whole_protocol(tmp_path):
    """A full run on a track's L3 dossiers (one real, one counterfactual) with the offline defaults: agent, reviewers
    and judge are all local/smollm2. The README's main command runs every dossier the same way."""
    import json

    from benchmark.run import RunConfig, execute

    records = execute(RunConfig(model="local/smollm2", out=tmp_path / "l3", levels=["L3"], tracks=["scrna"]))
    assert len(records) >= 2 and {r.world_class for r in records} >= {"real", "native_cf"}
    for rec in records:
        traj = json.loads((tmp_path / "l3" / rec.trajectory).read_text())
        l3 = traj["l3"]
        assert l3["prior_raw"] is not None, rec.world_id
        assert rec.eligible is not None and rec.eligibility_reason, rec.world_id
        assert len(l3["rounds"]) == 3 and all(len(r["critiques"]) == 3 for r in l3["rounds"]), rec.world_id
        assert len(l3["judge_draws"]) <= 3 and l3["hyp_drift"] is not None
        assert rec.calls >= 2 and rec.tokens_in > 0, "agent usage: the prior and at least one step"
        assert rec.role_usage["reviewer"].tokens_in > 0 and rec.role_usage["judge"].calls >= 3
        if rec.world_class == "real":
            assert rec.eligible is True
        if rec.eligible is False:
            assert rec.score is None and rec.status == "ineligible"
