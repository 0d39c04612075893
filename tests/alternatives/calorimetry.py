"""calorimetry: a sound analysis other than the reference solver's (worlds/calorimetry/analysis.py), from the public
files only:

- equilibrium: Shomate-type polynomial fits instead of trapezoid integration; the energy scale from the Cu standard
  against a cubic spline of its reference (mean ratio 150-350 K instead of the median). The alloy Cp of every pulse is
  drift-corrected (rise minus the fore drift over the first half of the heating interval and the after drift from the
  mid-time to the reading), fitted by a degree-6 polynomial in T (scaled), and integrated analytically; each
  n-heptane phase is fitted by its own cubic and integrated analytically, the enthalpy of fusion added at the triple
  point; the balance root is found by Brent's method (scipy.optimize.brentq).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.polynomial import Polynomial
from scipy.optimize import brentq

from tests.alternatives import alternative


def _fit_h(t, c, deg):
    p = Polynomial.fit(t, c, deg)
    return p.integ()


def _rise(p):
    half = 0.5 * (p["t_off_s"] - p["t_on_s"])
    rise = (p["T_read_K"] - p["T_on_K"]) - p["fore_drift_mK_per_min"] / 60000 * half \
        - p["after_drift_mK_per_min"] / 60000 * (p["t_read_s"] - p["t_on_s"] - half)
    t_mid = p["T_on_K"] + p["fore_drift_mK_per_min"] / 60000 * half + 0.5 * rise
    return t_mid, rise


@alternative("calorimetry.L2.equilibrium", "Shomate-type polynomial fit of the drift-corrected, standard-calibrated alloy "
             "Cp and of each heptane phase, integrated analytically, with the fusion enthalpy at the triple point and a "
             "root of the balance by Brent's method",
             ["calorimetry.L2.equilibrium.clean", "calorimetry.L2.equilibrium.enthalpy_reference",
              "calorimetry.L2.equilibrium.heat_leak_drift", "calorimetry.L2.equilibrium.phase_blind",
              "calorimetry.L2.equilibrium.energy_calibration", "calorimetry.L2.equilibrium.standard_drift"])
def equilibrium_polyfit(world_dir: Path, out: Path) -> dict:
    meta = json.loads((world_dir / "meta.json").read_text())
    ex, mm = meta["experiment"], meta["molar_mass_g_per_mol"]
    # energy scale: the Cu standard's drift-corrected Cp against a cubic spline of its reference, mean ratio 150-350 K
    from scipy.interpolate import CubicSpline
    s = pd.read_csv(world_dir / "standard_pulses.csv")
    ref = pd.read_csv(world_dir / "standard_cp.csv")
    ts, rs = _rise(s)
    cs = s["energy_J"] / (float(meta["standard_amount_mol"]) * rs)
    spl = CubicSpline(ref["T_K"].to_numpy(float), ref["Cp_J_per_mol_K"].to_numpy(float))
    w = (ts > 150) & (ts < 350)
    k = float(np.mean(cs[w] / spl(ts[w])))
    p = pd.read_csv(world_dir / "specimen_pulses.csv")
    t_mid, rise = _rise(p)
    cp = p["energy_J"] / (k * float(meta["specimen_mass_g"]) * rise)
    h_b = _fit_h(t_mid.to_numpy(), cp.to_numpy(), 6)
    hep = pd.read_csv(world_dir / "heptane_cp.csv")
    ttp = float(meta["heptane_triple_point_K"])
    hfus = float(meta["heptane_enthalpy_of_fusion_J_per_mol"])
    s, lq = hep[hep["phase"] == "solid"], hep[hep["phase"] == "liquid"]
    hs = _fit_h(s["T_K"].to_numpy(float), s["Cp_J_per_mol_K"].to_numpy(float), 3)
    hl = _fit_h(lq["T_K"].to_numpy(float), lq["Cp_J_per_mol_K"].to_numpy(float), 3)

    def h_hep(x):
        return hl(x) - hl(ttp) if x >= ttp else hs(x) - hs(ttp) - hfus

    m_b, n_hep = float(ex["block_mass_g"]), ex["heptane_mass_g"] / mm["n-heptane"]
    tc, th = float(ex["block_initial_T_K"]), float(ex["heptane_initial_T_K"])
    bal = lambda x: m_b * (h_b(x) - h_b(tc)) + n_hep * (h_hep(x) - h_hep(th))  # noqa: E731
    tf = brentq(bal, min(tc, th), max(tc, th), xtol=1e-6)
    grid = list(range(190, 361, 5))
    pd.DataFrame({"T_K": grid, "balance_J": [round(float(bal(float(x))), 1) for x in grid]}).to_csv(out / "balance_fit.csv", index=False)
    issues = []
    tab = pd.read_csv(world_dir / "enthalpy_table.csv").set_index("T_K")
    if abs(tab.loc[299, "H_block_J_per_g"] - tab.loc[298, "H_block_J_per_g"] - float(cp[(t_mid - 298.5).abs().idxmin()])) > 1.0:
        issues.append("the software's H_block changes enthalpy reference at 298.15 K (H - H(0 K) below): not used")
    if (p["after_drift_mK_per_min"].abs() > 1.0).any():
        issues.append("large heat-leak drift: every rise drift-corrected")
    if abs(k - 1.0) > 0.005:
        issues.append(f"the Cu standard reads {k:.4f} of its reference: heater energy scale calibrated")
    if th < ttp < tf:
        issues.append("the heptane melts: enthalpy of fusion added at the triple point")
    return {"Tf_K": round(float(tf), 3), "Q_heptane_J": round(float(n_hep * (h_hep(tf) - h_hep(th))), 1),
            "table": "balance_fit.csv", "issues_found": issues, "analysis_usable": True,
            "summary": f"Tf = {tf:.2f} K"}
