"""nuclear track: the L3 dossiers' perturbations and the physics the manifests cite, recomputed from the written
tables (cited by the injected dossier's grounding), and the track's shape (seed 001 Appendix F, Table 11)."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import pandas as pd

from benchmark.suite.freeze import ensure_built
from benchmark.suite.loader import load_suite

SUITE = load_suite()


def _daily(kind):
    return pd.read_csv(ensure_built(SUITE.worlds[f"nuclear.L3.dossier.{kind}"]) / "daily.csv")


def _half_life(t, n, live):
    from worlds.nuclear.analysis import fit_decay

    return fit_decay(t, n, live)["half_life_days"]


def _ratio_slope(d):
    r = np.log(d["net_counts_1332"] / d["net_counts_1173"]).to_numpy()
    x = d["day"].to_numpy()
    slope = float(np.sum((x - x.mean()) * (r - r.mean())) / np.sum((x - x.mean()) ** 2))
    resid = r - r.mean() - slope * (x - x.mean())
    se = float(np.sqrt(np.sum(resid ** 2) / (len(x) - 2) / np.sum((x - x.mean()) ** 2)))
    return slope, se


def test_nuclear_injected_dossier_is_incoherent_on_the_written_tables():
    """The injected daily.csv equals the real one except in the 1332 keV columns; the 1173 keV half-life stays within
    2% of 1925.28 d while the 1332 keV half-life is about 1704 d; the log line ratio has a significant negative slope in
    the injected dossier only (both lines are fed by the same Co-60 population, so a real rate change keeps it constant)."""
    real, inj, nat = _daily("co60_real"), _daily("bare_injected"), _daily("bare_native")
    changed = {"net_counts_1332", "rate_1332_cps"}
    for c in real.columns:
        if c not in changed:
            pd.testing.assert_series_equal(real[c], inj[c])
    assert (real["net_counts_1332"] != inj["net_counts_1332"]).mean() > 0.9
    h1 = _half_life(inj["day"], inj["net_counts_1173"], inj["live_time_s"])
    h2 = _half_life(inj["day"], inj["net_counts_1332"], inj["live_time_s"])
    assert abs(h1 / 1925.28 - 1) < 0.02 and abs(h2 / (1925.28 / 1.13) - 1) < 0.03
    s_inj, se_inj = _ratio_slope(inj)
    assert s_inj < 0 and abs(s_inj) > 10 * se_inj
    for d in (real, nat):
        s, se = _ratio_slope(d)
        assert abs(s) < 3 * se


def test_nuclear_native_dossier_changes_only_the_co60_lines():
    """The native counterfactual regenerates both Co-60 lines with 1.13 x the decay constant (bound-state decay less the continuum's lower endpoint); the schedule, the live
    time, the Mn-54 control, the background and the temperature are those of the real dossier (controls fixed)."""
    real, nat = _daily("co60_real"), _daily("bare_native")
    for c in ("day", "date", "live_time_s", "mn54_net_counts", "mn54_rate_cps", "background_counts_1h", "temperature_C"):
        pd.testing.assert_series_equal(real[c], nat[c])
    for line in ("1173", "1332"):
        h = _half_life(nat["day"], nat[f"net_counts_{line}"], nat["live_time_s"])
        assert abs(h / (1925.28 / 1.13) - 1) < 0.03
        h0 = _half_life(real["day"], real[f"net_counts_{line}"], real["live_time_s"])
        assert abs(h0 / 1925.28 - 1) < 0.03
    hm = _half_life(nat["day"], nat["mn54_net_counts"], nat["mn54_live_time_s"])
    assert abs(hm / 312.19 - 1) < 0.01


def test_nuclear_track_shape_is_table_11():
    """One clean, six distinct challenges and one boundary at L1; one L2 family of three clean and seven challenged
    worlds covering confound, tool and statistical traps (two pile-up and two coincidence-summing worlds with their
    matched controls, issue 39); one real and two counterfactual L3 dossiers."""
    ws = [r.world for r in SUITE.worlds.values() if r.world.track == "nuclear"]
    l1 = [w for w in ws if str(w.level).endswith("L1")]
    assert len(l1) == 8 and Counter(w.world_class for w in l1) == {"clean": 1, "boundary": 1, "challenge": 6}
    assert len({w.defect for w in l1 if w.defect}) == 6
    l2 = [w for w in ws if str(w.level).endswith("L2")]
    assert len(l2) == 10 and {w.world_class for w in l2} == {"clean", "confound", "tool_trap", "stat_trap"}
    assert {w.defect for w in l2 if w.defect} >= {"pileup", "coincidence_summing"}  # issue 39: two worlds each
    l3 = [w for w in ws if str(w.level).endswith("L3")]
    assert sorted(w.route for w in l3) == ["injected", "native", "real"]
    assert all(w.pivotal for w in ws)
    assert SUITE.tracks["nuclear"].manifest.domain == "physics"


def test_nuclear_traps_bite_and_controls_hold():
    """The naive analysis (fixed channels, gross counts per real time) is within tolerance on the clean world and far
    off on every trap world; the reference recovers the tabulated half-life within 2% everywhere."""
    from benchmark.suite.freeze import read_golden

    for name in ("clean", "dead_time", "mn54", "gain_drift"):
        g = read_golden(SUITE.worlds[f"nuclear.L2.decay.{name}"]).values
        assert abs(g["half_life_days"] / 1925.28 - 1) < 0.02, name
        off = abs(g["trap_half_life_days"] / g["half_life_days"] - 1)
        assert (off < 0.015) if name == "clean" else (off > 0.15), (name, off)
        assert (g["trap_share_off_2pct"] < 0.05) if name == "clean" else (g["trap_share_off_2pct"] > 0.3), name


def test_nuclear_boundary_recalibration_is_recorded():
    """The boundary world's peaks move by tens of channels at the service, and acquisitions.csv and the service log
    record the new calibration: with each spectrum's own calibration no spectrum is offset."""
    d = ensure_built(SUITE.worlds["nuclear.L1.integrity.boundary_service"])
    acq = pd.read_csv(d / "acquisitions.csv")
    assert acq["cal_slope_keV_per_ch"].nunique() == 2 and acq["high_voltage_V"].nunique() == 2
    b = acq["cal_slope_keV_per_ch"].unique()
    assert abs(1332.492 / b[0] - 1332.492 / b[1]) > 80
    meta = json.loads((d / "meta.json").read_text())
    assert any("recalibr" in e["entry"] or "calibration" in e["entry"] for e in meta["service_log"])


def test_nuclear_l1_reference_finds_exactly_the_injected_records():
    """On every challenge world the reference solver's list of affected spectra is exactly the set the recipe edited
    (the generative truth), and the measured channel offset is within 2 channels of the injected one."""
    from benchmark.suite.freeze import read_golden

    pairs = {"duplicate_spectra": ("duplicates", "duplicated_spectra"), "clock_reset": ("reset", "bad_timestamps"),
             "live_exceeds_real": ("swapped", "live_exceeds_real"), "channel_shift": ("shifted", "shifted_spectra"),
             "missing_spectra": ("missing", "missing_spectra"), "summary_mismatch": ("summary_edited", "summary_mismatch")}
    for name, (truth_key, key) in pairs.items():
        g = read_golden(SUITE.worlds[f"nuclear.L1.integrity.{name}"]).values
        assert sorted(g["truth"][truth_key]) == sorted(g[key]), name
    g = read_golden(SUITE.worlds["nuclear.L1.integrity.channel_shift"]).values
    assert abs(g["channel_offset"] - g["truth"]["offset"]) <= 2


def _grade_l2(name, tmp_path, **changes):
    """The world's hand-written correct report with `changes`, graded against its golden."""
    import yaml

    from benchmark.suite.freeze import read_golden
    from graders.grade import grade
    from benchmark.suite.handwritten import report_path, write_products

    ref = SUITE.worlds[f"nuclear.L2.decay.{name}"]
    doc = yaml.safe_load(report_path(ref).read_text())
    golden = read_golden(ref).values
    products = write_products(doc, golden, tmp_path / "products", None)
    return grade(ref, golden, dict(doc["correct"], **changes), products=products).score


def test_nuclear_clean_null_checks_are_not_penalised(tmp_path):
    """A careful report of null checks on the clean world ('no Mn-54 peak', 'the peaks did not move') scores 100, as
    does one with no issues; an asserted trap ('the gain shifts') does not (issue 23 item 5)."""
    assert _grade_l2("clean", tmp_path, issues_found=[]) == pytest.approx(100.0)
    assert _grade_l2("clean", tmp_path, issues_found=["no Mn-54 peak at 834.8 keV",
                                                      "the 1332 keV peak did not move"]) == pytest.approx(100.0)
    assert _grade_l2("clean", tmp_path, issues_found=["the gain shifts by 2% over the series"]) < 100.0


def test_nuclear_clean_no_gain_drift_observed_scores_100(tmp_path):
    """A null check reported as such ('no gain drift observed') names no trap: neither the family's catalogue nor the
    trap's own code (graders/claims.py NEGATIONS) reads it as one, so the clean world's I is not halved."""
    assert _grade_l2("clean", tmp_path, issues_found=["no gain drift observed"]) == pytest.approx(100.0)


def test_nuclear_dead_time_uncertainty_band(tmp_path):
    """dead_time accepts a half-life uncertainty from half the statistical standard error up to 8.5 times it (~13 d):
    a systematic for the live-time clock at ~24% dead time may be added (issue 23 item 3)."""
    from benchmark.suite.freeze import read_golden

    se = read_golden(SUITE.worlds["nuclear.L2.decay.dead_time"]).values["half_life_uncertainty_days"]
    for u, full in ((se, True), (0.51 * se, True), (8.4 * se, True), (0.45 * se, False), (8.7 * se, False)):
        score = _grade_l2("dead_time", tmp_path / f"u{u}", half_life_uncertainty_days=round(u, 3))
        assert (score == pytest.approx(100.0)) == full, (u, score)


def _per_spectrum_pulser_rates(ref, remove_piled: bool) -> pd.DataFrame:
    """An analyst's own per-spectrum route (blind studies 22 and 24): each spectrum's live-time rate in the window,
    restored with its own pulser's undistorted fraction (the peak's net area, from a wider window and median side
    bands than the solver's, over rate x live time), less the background spectrum's window rate; with
    `remove_piled`, the piled pulses that land inside the window are removed first."""
    from worlds.nuclear import analysis as A

    d = ensure_built(ref)
    meta = A.read_meta(d)
    acq = pd.read_csv(d / "acquisitions.csv", dtype={"spectrum_id": str}).set_index("spectrum_id")
    ids, counts = A.read_spectra(d / "spectra.csv.gz")
    a, b = float(meta["calibration"]["offset_keV"]), float(meta["calibration"]["slope_keV_per_ch"])
    live = acq.loc[ids, "live_time_s"].to_numpy(dtype=float)
    e1, e2 = A.WINDOW_KEV
    ch = A.channel_of(A.CO60_LINES[1], a, b)
    gains = np.array([A.centroid(y, ch, int(round(66.0 / b))) for y in counts]) / ch
    ep, fp = float(meta["pulser"]["equivalent_energy_keV"]), float(meta["pulser"]["rate_Hz"])
    x0, s = A.channel_of(ep, a, b), 0.003 * ep / 2.3548 / b
    lo, hi = int(x0 - 6 * s), int(x0 + 6 * s) + 1
    bg = pd.read_csv(d / "background.csv")["counts"].to_numpy(dtype=float)
    bg_rate = A.window_counts(bg, e1, e2, a, b) / float(meta["background"]["live_time_s"])
    rates = []
    for i, y in enumerate(counts):
        area = float(y[lo:hi + 1].sum()) - float(np.median(np.r_[y[lo - 30:lo - 10], y[hi + 10:hi + 30]])) * (hi - lo + 1)
        surv = area / (fp * live[i])
        w = A.window_counts(y, e1, e2, a, b, gains[i])
        if remove_piled:
            _, f = A.pileup_free(y, surv, a * gains[i] / b)
            w -= (1 - surv) * float(np.sum(y)) * A.window_counts(f, e1, e2, a, b, gains[i])
        rates.append(w / surv / live[i] - bg_rate)
    return pd.DataFrame({"spectrum_id": ids, "co60_rate": rates})


@pytest.mark.parametrize("name", ["pileup", "pileup_moderate"])
def test_nuclear_per_spectrum_pulser_restoration_is_accepted(tmp_path, name):
    """Issue 38 (two standard routes): restoring each spectrum with its own pulser's fraction is the textbook route and
    carries that pulser's binomial noise (~0.2% a day), which the 0.25% per-spectrum check against the smoothed truth
    charged (blind studies 22 and 24 scored 12.5). Done right, by an estimator of its own, it scores 100; dividing by
    the fraction without removing the piled pulses inside the window misses by 1.5-4.5% and loses the rates check."""
    import yaml

    from benchmark.suite.freeze import read_golden
    from benchmark.suite.handwritten import report_path, write_products
    from graders.grade import grade

    ref = SUITE.worlds[f"nuclear.L2.decay.{name}"]
    doc = yaml.safe_load(report_path(ref).read_text())
    golden = read_golden(ref).values
    scores = {}
    for remove in (True, False):
        products = write_products(doc, golden, tmp_path / f"p{remove}", None)
        _per_spectrum_pulser_rates(ref, remove).to_csv(products / doc["correct"]["table"], index=False)
        g = grade(ref, golden, dict(doc["correct"]), products=products)
        scores[remove] = (g.score, {c.id: c.credit for c in g.checks})
    assert scores[True][0] == pytest.approx(100.0), scores
    assert scores[False][1]["rates"] == 0.0, scores


def test_random_summing_is_pile_up_not_true_coincidence_summing():
    """Blind study 27 (pileup_moderate, capped at 20): "Random-summing gains: with the rejector off, piled-up events are
    recorded at the summed energy ... subtracted before the loss correction" was read as the coincidence-summing trap.
    Random summing is pile-up: it names the world's own trap; true-coincidence summing claimed there is still an
    invention, and in a summing world coincidence summing is still its trap."""
    from benchmark.suite.freeze import read_golden
    from graders.l2 import invented_claims

    ref = SUITE.worlds["nuclear.L2.decay.pileup_moderate"]
    g = read_golden(ref).values

    def inv(text):
        return invented_claims(ref.world, ref.family, [{"issue": text, "changes_result": True, "value": 0.015}], g)

    assert inv("Random-summing gains: about 1.5% of the window counts are random sums of two pulses, subtracted.") == []
    assert inv("Random coincidence summing puts 1.5% of the window counts at the summed energy.") == []
    assert inv("True-coincidence summing: the 2505 keV sum peak grows by 1.5%, which changes the result.") == [
        ("coincidence_summing", True)]
    summing = SUITE.worlds["nuclear.L2.decay.summing_mid"]
    assert invented_claims(summing.world, summing.family, [{"issue": "True-coincidence summing after the source move "
                           "changes the window rate by 3%.", "changes_result": True, "value": 0.03}],
                           read_golden(summing).values) == []
