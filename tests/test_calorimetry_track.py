"""calorimetry track: the injected L3 dossier's perturbation, recomputed from the written tables (cited by its
grounding), the native counterfactual's regenerated equilibria, and the physics the worlds rest on."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from benchmark.suite.freeze import ensure_built
from benchmark.suite.loader import load_suite

SUITE = load_suite()


def _dossier(kind):
    d = ensure_built(SUITE.worlds[f"calorimetry.L3.dossier.{kind}"])
    return {n: pd.read_csv(d / f"{n}.csv") for n in ("specimens", "specimen_cp", "reference_cp", "equilibria")}


def _cp(t, sid):
    return t["specimen_cp"][t["specimen_cp"]["specimen"] == sid].reset_index(drop=True)


def test_calorimetry_injected_excess_on_the_annealed_control_holds_on_the_written_tables():
    """The injected dossier differs from the native one only in the annealed control Cu-A: its characterization is
    unchanged (40-um grains, full density) while its Cp is the control dossier's Cu-A Cp times 1.088-1.11 (the
    nanocrystalline excess) and its equilibria are regenerated warmer by as much as the 8-nm specimen's."""
    inj, nat, real = _dossier("nc_injected"), _dossier("nc_native"), _dossier("bulk_real")
    pd.testing.assert_frame_equal(inj["specimens"], nat["specimens"])
    a = inj["specimens"].set_index("specimen").loc["Cu-A"]
    assert a["grain_size_nm"] == 40000 and a["density_fraction"] == 1.0 and "annealed" in a["preparation"]
    pd.testing.assert_frame_equal(_cp(inj, "Cu-B"), _cp(nat, "Cu-B"))
    ratio = _cp(inj, "Cu-A")["Cp_J_per_mol_K"] / _cp(real, "Cu-A")["Cp_J_per_mol_K"]
    assert ratio.between(1.085, 1.115).all() and ratio.iloc[-1] > ratio.iloc[0]
    pd.testing.assert_frame_equal(_cp(nat, "Cu-A"), _cp(real, "Cu-A"))
    res = {k: t["equilibria"].assign(r=t["equilibria"]["Tf_measured_K"] - t["equilibria"]["Tf_predicted_bulk_K"])
           .groupby("specimen_material")["r"].mean() for k, t in (("inj", inj), ("nat", nat), ("real", real))}
    assert abs(res["real"]["Cu-A"]) < 0.1 and abs(res["nat"]["Cu-A"]) < 0.1
    assert res["inj"]["Cu-A"] > 2.0 and abs(res["inj"]["Cu-A"] - res["inj"]["Cu-B"]) < 0.3


def test_calorimetry_native_counterfactual_regenerates_the_equilibria_from_the_raised_cp():
    """Cu-B's equilibria in the native dossier are warmer than the bulk prediction by what its excess heat capacity
    requires (energy balance with the same heptane), never by an edit: the bulk prediction column equals the control's
    for the same run inputs, and the residual grows with the Cu share of the heat capacity."""
    nat, real = _dossier("nc_native"), _dossier("bulk_real")
    e_n, e_r = nat["equilibria"], real["equilibria"]
    pd.testing.assert_frame_equal(e_n.drop(columns="Tf_measured_K"), e_r.drop(columns="Tf_measured_K"))
    b = e_n[e_n["specimen_material"] == "Cu-B"]
    r = b["Tf_measured_K"] - b["Tf_predicted_bulk_K"]
    assert (r > 2.0).all() and (r < 4.5).all()
    ex = (_cp(nat, "Cu-B")["Cp_J_per_mol_K"] / nat["reference_cp"]["Cp_bulk_J_per_mol_K"] - 1).mean()
    assert 0.088 < ex < 0.11


def test_calorimetry_substrate_matches_the_evaluated_tables():
    """The Cu model is anchored to the JANAF/CRC values it reads, and the heptane constants are the chemicals ones."""
    from worlds.calorimetry import build as B

    sub = B.cu_heptane_refs()
    for t, want in zip(sub["janaf_T"], sub["janaf_Cp"]):
        if 100 <= t <= 400:
            assert abs(B.cu_cp(sub, [t])[0] - want) / want < 0.01, t
    gt, gh = B.cu_h_grid(sub)
    assert abs(np.interp(298.15, gt, gh) - 5004.0) < 25.0          # JANAF H(298.15) - H(0) = 5.004 kJ/mol
    assert B.cu_cp(sub, [15.0])[0] < 0.25                              # the T^3 regime
    assert sub["hfus"] == 14030.0 and abs(sub["ttp"] - 182.571971) < 1e-6
    assert abs(B.hep_cp_liquid(sub, 298.15) - 224.4) < 0.5


def _l2(name):
    return json.loads((SUITE.worlds[f"calorimetry.L2.equilibrium.{name}"].path.with_suffix("")
                       .with_suffix(".golden.json")).read_text())["values"]


def test_calorimetry_l2_traps_move_the_answer_beyond_the_tolerance():
    """Each trap world's software-table answer is a plausible temperature (strictly between the two initial
    temperatures, never one of them) outside 2x the tolerance (0.3 K) of the simulated truth; the controls' is not."""
    for name, least in (("enthalpy_reference", 2.0), ("heat_leak_drift", 0.6), ("phase_blind", 2.0),
                        ("energy_calibration", 0.6)):
        g = _l2(name)
        assert abs(g["trap_Tf_K"] - g["truth"]["Tf_K"]) > least, name
        assert g["T_heptane0_K"] + 5.0 < g["trap_Tf_K"] < g["T_block0_K"] - 5.0, name
    for name in ("clean", "standard_drift"):
        g = _l2(name)
        assert abs(g["Tf_shift_K"]) < 0.05 and abs(g["Tf_K"] - g["truth"]["Tf_K"]) < 0.05, name


def test_calorimetry_l2_answer_needs_the_data():
    """The block is a drawn Cu-Ni alloy: a prior from the copper tables (JANAF Cu Cp per gram) misses every world's
    equilibrium by more than the tolerance, and the reference analysis of the files recovers the simulated truth."""
    from worlds.calorimetry import build as B

    sub = B.cu_heptane_refs()
    for name in ("clean", "enthalpy_reference", "heat_leak_drift", "phase_blind", "energy_calibration", "standard_drift"):
        g = _l2(name)
        t = g["truth"]
        assert abs(g["Tf_K"] - t["Tf_K"]) < 0.05, name
        ct, ch = B.cu_h_grid(sub)
        prior = B._tf_truth(sub, g["block_mass_g"] / B.M_CU, g["T_block0_K"], g["n_heptane_mol"], g["T_heptane0_K"],
                            grid=(ct, ch))
        assert abs(prior - t["Tf_K"]) > 0.9, (name, prior, t["Tf_K"])


def test_calorimetry_l2_drifts_are_realistic():
    """A failing shield drifts a few mK/min (not tens); a working one well under 0.1 mK/min."""
    assert 2.5 < _l2("heat_leak_drift")["drift_at_300K_mK_per_min"] < 5.0
    for name in ("clean", "enthalpy_reference", "phase_blind", "energy_calibration", "standard_drift"):
        assert abs(_l2(name)["drift_at_300K_mK_per_min"]) < 0.1, name
    assert 1.02 <= _l2("energy_calibration")["energy_scale"] <= 1.04
    assert abs(_l2("standard_drift")["energy_scale"] - 1.0) < 0.002


def test_the_standards_own_drift_reported_as_handled_is_the_control_not_an_invented_trap():
    """Blind study 12 (standard_drift, a clean control): "The Cu standard's pulses have large drifts that grow with
    temperature ... without drift correction k runs from 1.001 to 1.068" and "calibrating with the standard without
    drift correction would shift Tf by 0.9 K", both handled and flagged `changes_result: true`, capped a 100 report
    at 20 as invented heat-leak and energy-calibration traps. They are this world's point: declared nuisances sized by
    the standard's own drift and the raw-rise scale. The same claim at a size the world lacks, or the specimen's heat
    leak, stays charged, and the features apply to this world only."""
    from benchmark.suite.freeze import read_golden
    from graders.l2 import invented_claims

    w = SUITE.worlds["calorimetry.L2.equilibrium.standard_drift"]
    g = read_golden(w).values
    assert g["std_drift_at_300K_mK_per_min"] > 50 * g["drift_at_300K_mK_per_min"] and g["energy_scale"] == 1.0
    drift = {"issue": f"The Cu standard's pulses have large drifts that grow with temperature, "
                      f"{g['std_drift_at_300K_mK_per_min']} mK/min at 300 K; without drift correction its apparent "
                      f"calibration factor is off by up to {g['std_raw_scale_bias_max']:.3f}.", "changes_result": True,
             "value": g["std_raw_scale_bias_max"]}
    shift = {"issue": "Calibrating the specimen with the standard without drift correction would shift Tf by "
                      f"{g['std_raw_Tf_shift_K']} K; I drift-corrected both pulse sets.", "changes_result": True,
             "value": g["std_raw_Tf_shift_K"]}
    assert invented_claims(w.world, w.family, [drift, shift], g) == []
    assert invented_claims(w.world, w.family, [{**drift, "value": 400.0}], g) != []
    leak = {"issue": "Uncorrected drift of the specimen pulses biases the heat capacity.", "changes_result": True,
            "value": 3.0}
    assert invented_claims(w.world, w.family, [leak], g) == [("heat_leak_drift", True)]
    clean = SUITE.worlds["calorimetry.L2.equilibrium.clean"]
    assert invented_claims(clean.world, clean.family, [drift], read_golden(clean).values) != []
