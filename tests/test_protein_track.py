"""protein track: the injected L3 dossier's perturbation, recomputed from the written tables (cited by its grounding)."""
from __future__ import annotations

import pandas as pd

from benchmark.suite.freeze import ensure_built
from benchmark.suite.loader import load_suite


def _tables(kind):
    d = ensure_built(load_suite().worlds[f"protein.L3.dossier.{kind}"])
    return pd.read_csv(d / "substitutions.csv"), pd.read_csv(d / "positions.csv")


def test_protein_k10_injection_holds_on_the_written_tables():
    """The injected substitutions.csv differs from the real dossier's in the 17 K10 rows only; K10 keeps all 17
    substitutions measured with median ddG 2.6, whereas in the real table every position with a median above 2 kcal/mol
    has at most 9 measured substitutions (strongly destabilised variants escape measurement)."""
    inj, inj_pos = _tables("surface_injected")
    real, real_pos = _tables("core_real")
    assert inj.shape == real.shape and (inj[["variant", "position"]] == real[["variant", "position"]]).all().all()
    differ = inj.loc[(inj["ddG"] - real["ddG"]).abs() > 1e-9]
    assert set(differ["position"]) == {10} and len(differ) == 17
    k10 = inj_pos.set_index("position").loc[10]
    assert k10["n_measured"] == 17 and abs(k10["median_ddG"] - 2.6) < 1e-6
    assert inj.loc[inj["position"] == 10, "ddG"].min() > 2.0
    assert real_pos.set_index("position").loc[10, "median_ddG"] < 0
    high = real_pos[real_pos["median_ddG"] > 2.0]
    assert len(high) >= 2 and (high["n_measured"] <= 9).all()
    # every other position's summary is unchanged
    other = inj_pos["position"] != 10
    pd.testing.assert_frame_equal(inj_pos[other].reset_index(drop=True), real_pos[other].reset_index(drop=True))


def test_protein_native_dossier_numbers():
    """The numbers the native counterfactual's expected response cites, from the written tables."""
    sub, pos = _tables("neutral_native")
    assert len(sub) == 813
    assert abs((sub["ddG"] > 0).mean() - 0.480) < 0.001
    assert abs(sub["ddG"].median() - (-0.031)) < 0.001
    sparse = dict(zip(pos["wt_aa"] + pos["position"].astype(str), pos["n_measured"]))
    assert sparse["W43"] == 0 and sparse["A26"] == 2 and sparse["Y45"] == 9 and sparse["F52"] == 7
