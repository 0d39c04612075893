"""Reference solvers of the calorimetry track (gold side); every golden is computed from the world's public files.

calorimetry.L1.integrity     worlds.calorimetry.analysis.detect: duplicated point ids, gaps in a run's pulse numbering,
                             Cp against energy / (n dT) (J/(g K) runs, Cp shifted by one row), run-to-run continuity of
                             Cp (calorie runs) and of u/Cp (expanded uncertainties written as standard).
calorimetry.L2.equilibrium   the heater's energy scale from the Cu standard's pulses; the block alloy's Cp from the
                             specimen's raw pulses with the drift correction and that scale, trapezoid enthalpy; n-heptane enthalpy
                             by phase with the enthalpy of fusion at the triple point; Tf from the adiabatic energy
                             balance; the software table's (trap) answer beside it.
calorimetry.L3.dossier       specimen excess heat capacity over the bulk prior and the equilibrium residuals.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.suite.registry import solver
from worlds.calorimetry import analysis as A


@solver("calorimetry.L1.integrity", version="1")
def l1_integrity(world_dir: Path, world) -> dict:
    v = A.detect(world_dir)
    n = max(v["n_rows"], 1)
    for k in ("duplicate", "missing", "gram", "misaligned", "cal", "k2"):
        key = {"duplicate": "n_duplicate_rows", "missing": "n_missing"}.get(k, f"n_{k}_rows")
        v[f"{k}_fraction"] = round(v[key] / n, 4)
    return v


@solver("calorimetry.L2.equilibrium", version="3")  # 3: the standard's own drift and raw scale (nuisance sizes)
def l2_equilibrium(world_dir: Path, world) -> dict:
    L = A.load_l2(world_dir)
    good, trap = A.solve(L), A.solve(L, naive=True)
    out = {"Tf_K": good["Tf_K"], "Q_heptane_J": good["Q_J"], "balance": good["balance"],
           "trap_Tf_K": trap["Tf_K"], "trap_Q_heptane_J": trap["Q_J"], "trap_balance": trap["balance"],
           "Tf_shift_K": round(trap["Tf_K"] - good["Tf_K"], 3),
           "block_mass_g": L["m_b"], "n_heptane_mol": round(L["n_hep"], 5),
           "T_block0_K": L["T_b"], "T_heptane0_K": L["T_hep"], "heptane_melts": bool(L["T_hep"] < L["ttp"] < good["Tf_K"])}
    out.update(A.diagnostics(L))
    out["std_raw_Tf_shift_K"] = round(abs(A.solve(L, std_correct=False)["Tf_K"] - good["Tf_K"]), 3)
    return out


@solver("calorimetry.L3.dossier", version="1")
def l3_dossier(world_dir: Path, world) -> dict:
    d = Path(world_dir)
    cp = pd.read_csv(d / "specimen_cp.csv")
    ref = pd.read_csv(d / "reference_cp.csv").set_index("T_K")["Cp_bulk_J_per_mol_K"]
    eq = pd.read_csv(d / "equilibria.csv")
    out: dict = {}
    for sid, g in cp.groupby("specimen", sort=True):
        ex = g["Cp_J_per_mol_K"].to_numpy() / ref.loc[g["T_K"]].to_numpy() - 1.0
        out[f"excess_{sid}"] = round(float(np.mean(ex)), 4)
        e = eq[eq["specimen_material"] == sid]
        out[f"Tf_residual_{sid}_K"] = round(float((e["Tf_measured_K"] - e["Tf_predicted_bulk_K"]).mean()), 3)
    return out


from worlds.calorimetry import scripted  # noqa: E402,F401
