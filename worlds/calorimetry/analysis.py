"""Calorimetry analyses shared by the reference solvers and the scripted oracle (inlined as source text in the
sandbox, so standard library, numpy and pandas only).

L1 `detect`: checks of a heat-pulse heat-capacity series, in the order a calorimetrist runs them:
  1. duplicated point ids (the same pulse written twice);
  2. missing pulses: gaps in a run's point numbering (pulses are contiguous: one pulse's end is the next one's start);
  3. Cp against energy / (n dT) row by row: a run whose ratio is the molar mass is in J/(g K); other rows that
     disagree (a block of a run) hold the Cp of the neighbouring pulse (column shifted by one row);
  4. run-to-run continuity of Cp where runs meet (log-log extrapolation of the last three points of a run): a run
     lower by 4.184 is in calories (energy and Cp);
  5. run-to-run continuity of the relative uncertainty u/Cp: a run whose u/Cp is twice its neighbours' reports the
     expanded (k = 2) uncertainty as if standard.
L2 `equilibrium`: the heater's energy scale from the Cu standard's pulses (apparent Cp over the reference Cp); the
  block alloy's Cp from the specimen's raw pulses with the drift correction (fore and after drift lines extrapolated to
  the mid-time of heating, Stout 1968) and the energy scale, trapezoid enthalpy; n-heptane enthalpy by phase (solid rows to the triple point,
  the enthalpy of fusion, liquid rows from it); energy balance n_Cu dH_Cu + n_hep dH_hep = 0 solved by bisection.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

CAL = 4.184
T298 = 298.15
CONSIST_TOL = 2e-4


# ---------------------------------------------------------------- L1

def _extrap(t: np.ndarray, c: np.ndarray, at: float) -> float:
    lt, lc = np.log(t[-3:]), np.log(c[-3:])
    slope = (lc[-1] - lc[0]) / (lt[-1] - lt[0])
    return float(np.exp(lc[-1] + slope * (np.log(at) - lt[-1])))


def detect(world_dir) -> dict:
    d = Path(world_dir)
    meta = json.loads((d / "meta.json").read_text())
    n, mm = float(meta["amount_mol"]), float(meta["molar_mass_g_per_mol"])
    t = pd.read_csv(d / "cp_series.csv")
    findings: list[str] = []
    out: dict = {"n_rows": int(len(t)), "n_runs": int(t["run"].nunique())}
    # 1. duplicates
    dup = t[t.duplicated("point_id", keep="first")]
    out["duplicated_points"] = sorted(set(dup["point_id"]))
    out["n_duplicate_rows"] = int(len(dup))
    if len(dup):
        findings.append("duplicate_points")
    u = t.drop_duplicates("point_id", keep="first").sort_values(["run", "point"], kind="stable").reset_index(drop=True)
    # 2. missing pulses (numbering gaps inside a run)
    missing = []
    for run, g in u.groupby("run", sort=True):
        pts = sorted(int(x) for x in g["point"])
        have = set(pts)
        missing += [f"S{int(run)}-{k:03d}" for k in range(pts[0], pts[-1] + 1) if k not in have]
    out["missing_points"] = sorted(missing)
    out["n_missing"] = len(missing)
    if missing:
        findings.append("missing_points")
    # 3. Cp against energy / (n dT)
    implied = u["energy_J"] / (n * u["delta_T_K"])
    ratio = implied / u["Cp_J_per_mol_K"]
    bad = (ratio - 1.0).abs() > CONSIST_TOL
    gram_runs = sorted(int(r) for r, g in u[bad].groupby("run")
                       if ((ratio[g.index] / mm - 1.0).abs() < 0.01).mean() > 0.8)
    out["gram_run"] = gram_runs[0] if gram_runs else None
    gram_rows = u[u["run"].isin(gram_runs)]
    out["gram_points"] = sorted(gram_rows["point_id"])
    out["n_gram_rows"] = int(len(gram_rows))
    if gram_runs:
        findings.append("gram_units")
    mis = u[bad & ~u["run"].isin(gram_runs)]
    out["misaligned_points"] = sorted(mis["point_id"])
    out["n_misaligned_rows"] = int(len(mis))
    out["misaligned_run"] = int(mis["run"].mode().iloc[0]) if len(mis) else None
    if len(mis) >= 3:
        findings.append("misaligned_cp")
    out["consistent_fraction"] = round(float(1.0 - bad.mean()), 4)
    # 4./5. continuity between runs (Cp in molar units as far as known)
    cp = u["Cp_J_per_mol_K"].where(~u["run"].isin(gram_runs), u["Cp_J_per_mol_K"] * mm)
    runs = sorted(int(r) for r in u["run"].unique())
    cal_runs, k2_runs, jumps, ujumps = set(), set(), [], []
    for a, b in zip(runs[:-1], runs[1:]):
        ga, gb = u[u["run"] == a], u[u["run"] == b]
        ta, ca = ga["T_mean_K"].to_numpy(), cp[ga.index].to_numpy()
        tb0, cb0 = float(gb["T_mean_K"].iloc[0]), float(cp[gb.index[0]])
        r = cb0 / _extrap(ta, ca, tb0)
        jumps.append(round(r, 4))
        if abs(np.log(r) + np.log(CAL)) < 0.1:
            cal_runs.add(b)
        elif abs(np.log(r) - np.log(CAL)) < 0.1:
            cal_runs.add(a)
        ua = float(ga["u_Cp_J_per_mol_K"].iloc[-1] / ga["Cp_J_per_mol_K"].iloc[-1])
        ub = float(gb["u_Cp_J_per_mol_K"].iloc[0] / gb["Cp_J_per_mol_K"].iloc[0])
        ru = ub / ua
        ujumps.append(round(ru, 3))
        if abs(np.log(ru) - np.log(2.0)) < 0.25:
            k2_runs.add(b)
        elif abs(np.log(ru) + np.log(2.0)) < 0.25:
            k2_runs.add(a)
    out["run_boundary_cp_ratios"] = jumps
    out["run_boundary_u_ratios"] = ujumps
    out["cal_run"] = min(cal_runs) if cal_runs else None
    cal_rows = u[u["run"].isin(sorted(cal_runs))]
    out["cal_points"] = sorted(cal_rows["point_id"])
    out["n_cal_rows"] = int(len(cal_rows))
    if cal_runs:
        findings.append("cal_units")
    out["k2_run"] = min(k2_runs) if k2_runs else None
    k2_rows = u[u["run"].isin(sorted(k2_runs))]
    out["k2_points"] = sorted(k2_rows["point_id"])
    out["n_k2_rows"] = int(len(k2_rows))
    if k2_runs:
        findings.append("uncertainty_k2")
    out["max_apparent_cp"] = round(float(u["Cp_J_per_mol_K"].max()), 1)
    out["T_at_max_cp"] = round(float(u.loc[u["Cp_J_per_mol_K"].idxmax(), "T_mean_K"]), 2)
    out["T_min"] = round(float(u["T_mean_K"].min()), 2)
    out["Cp_at_T_min"] = round(float(u.loc[u["T_mean_K"].idxmin(), "Cp_J_per_mol_K"]), 4)
    out["findings"] = findings
    return out


# ---------------------------------------------------------------- L2

def cu_cp_points(p: pd.DataFrame, n: float, correct: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(T, Cp) of each pulse (per unit of n: mol or g). correct: fore and after drift lines extrapolated to the
    mid-time of heating (Stout 1968)."""
    if correct:
        tm = 0.5 * (p["t_on_s"] + p["t_off_s"])
        a = p["fore_drift_mK_per_min"] / 60000.0
        b = p["after_drift_mK_per_min"] / 60000.0
        t1 = p["T_on_K"] + a * (tm - p["t_on_s"])
        t2 = p["T_read_K"] - b * (p["t_read_s"] - tm)
    else:
        t1, t2 = p["T_on_K"], p["T_read_K"]
    dt = (t2 - t1).to_numpy()
    return (0.5 * (t1 + t2)).to_numpy(), (p["energy_J"].to_numpy() / (n * dt))


def h_points(t: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    o = np.argsort(t, kind="stable")
    t, c = t[o], c[o]
    return t, np.concatenate([[0.0], np.cumsum(0.5 * (c[1:] + c[:-1]) * np.diff(t))])


def hep_h(hep: pd.DataFrame, hfus: float, ttp: float, phase_aware: bool = True):
    """H(T) - H(298.15 K, liquid) of n-heptane from the evaluated Cp rows."""
    if not phase_aware:
        ht, hh = h_points(hep["T_K"].to_numpy(dtype=float), hep["Cp_J_per_mol_K"].to_numpy(dtype=float))
        h0 = float(np.interp(T298, ht, hh))
        return lambda x: np.interp(x, ht, hh) - h0
    s = hep[hep["phase"] == "solid"]
    lq = hep[hep["phase"] == "liquid"]
    st, sh = h_points(s["T_K"].to_numpy(dtype=float), s["Cp_J_per_mol_K"].to_numpy(dtype=float))
    lt, lh = h_points(lq["T_K"].to_numpy(dtype=float), lq["Cp_J_per_mol_K"].to_numpy(dtype=float))
    l_tp = float(np.interp(ttp, lt, lh))
    s_tp = float(np.interp(ttp, st, sh))
    l298 = float(np.interp(T298, lt, lh))

    def f(x):
        x = np.asarray(x, dtype=float)
        liq = np.interp(x, lt, lh) - l298
        sol = (l_tp - l298) - hfus - (s_tp - np.interp(x, st, sh))
        return np.where(x >= ttp, liq, sol)
    return f


def load_l2(world_dir) -> dict:
    d = Path(world_dir)
    meta = json.loads((d / "meta.json").read_text())
    ex = meta["experiment"]
    return {"meta": meta, "pulses": pd.read_csv(d / "specimen_pulses.csv"), "std": pd.read_csv(d / "standard_pulses.csv"),
            "std_cp": pd.read_csv(d / "standard_cp.csv"), "hep": pd.read_csv(d / "heptane_cp.csv"),
            "table": pd.read_csv(d / "enthalpy_table.csv"),
            "m_b": float(ex["block_mass_g"]), "T_b": float(ex["block_initial_T_K"]),
            "n_hep": ex["heptane_mass_g"] / meta["molar_mass_g_per_mol"]["n-heptane"],
            "T_hep": float(ex["heptane_initial_T_K"]), "m_spec": float(meta["specimen_mass_g"]),
            "n_std": float(meta["standard_amount_mol"]),
            "hfus": float(meta["heptane_enthalpy_of_fusion_J_per_mol"]), "ttp": float(meta["heptane_triple_point_K"])}


def standard_ratios(L: dict, correct: bool = True) -> np.ndarray:
    """The Cu standard's apparent Cp over its reference, pulse by pulse (drift-corrected, or from the raw rises)."""
    t, c = cu_cp_points(L["std"], L["n_std"], correct=correct)
    ref = np.interp(t, L["std_cp"]["T_K"].to_numpy(dtype=float), L["std_cp"]["Cp_J_per_mol_K"].to_numpy(dtype=float))
    return c / ref


def energy_scale(L: dict, correct: bool = True) -> float:
    """The heater's energy scale: median ratio of the Cu standard's apparent Cp (drift-corrected) to its reference;
    `correct=False` reads the raw rises (what an uncorrected standard run would make of it)."""
    return float(np.median(standard_ratios(L, correct)))


def functions(L: dict, naive: bool = False, std_correct: bool = True):
    """(H_block per g, H_hep per mol) as functions of T: from the raw files (careful) or the software table (naive)."""
    if naive:
        tab = L["table"]
        tt = tab["T_K"].to_numpy(dtype=float)
        hc, hh = tab["H_block_J_per_g"].to_numpy(dtype=float), tab["H_heptane_J_per_mol"].to_numpy(dtype=float)
        return (lambda x: np.interp(x, tt, hc)), (lambda x: np.interp(x, tt, hh))
    t, c = cu_cp_points(L["pulses"], L["m_spec"], correct=True)
    ct, ch = h_points(t, c / energy_scale(L, std_correct))
    return (lambda x: np.interp(x, ct, ch)), hep_h(L["hep"], L["hfus"], L["ttp"])


BAL_GRID = list(range(190, 361, 5))


def solve(L: dict, naive: bool = False, std_correct: bool = True) -> dict:
    hc, hh = functions(L, naive, std_correct)
    m_b, n_hep, tc, th = L["m_b"], L["n_hep"], L["T_b"], L["T_hep"]
    bal = lambda x: m_b * (hc(x) - hc(tc)) + n_hep * (hh(x) - hh(th))  # noqa: E731
    lo, hi = min(tc, th), max(tc, th)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if float(bal(mid)) > 0:
            hi = mid
        else:
            lo = mid
    tf = 0.5 * (lo + hi)
    q = float(n_hep * (hh(tf) - hh(th)))
    return {"Tf_K": round(tf, 3), "Q_J": round(q, 1),
            "balance": {str(x): round(float(bal(float(x))), 1) for x in BAL_GRID}}


def diagnostics(L: dict) -> dict:
    """What separates the careful analysis from the software table in this world."""
    p = L["pulses"]
    t, c = cu_cp_points(p, L["m_spec"], True)
    t0, c0 = cu_cp_points(p, L["m_spec"], False)
    w = (t > 250) & (t < 380)
    bias = float(np.median(c0[w] / c[w] - 1.0))
    tab = L["table"].set_index("T_K")
    col = tab["H_block_J_per_g"]
    step = float(col.loc[298] - col.loc[299]) if 298 in tab.index else 0.0
    st = L["table"]["H_heptane_J_per_mol"].to_numpy(dtype=float)
    tt = L["table"]["T_K"].to_numpy(dtype=float)
    i = int(np.searchsorted(tt, L["ttp"]))
    hep_jump = float(st[i] - st[i - 1]) if 0 < i < len(st) else 0.0
    d300 = float(np.interp(300.0, t, p["after_drift_mK_per_min"].to_numpy(dtype=float)))
    # the standard's own session: its drift, and the energy scale its raw rises would give (a lagging shield during
    # the calibration run makes the raw scale wrong by the drift's share of each rise)
    ts, _ = cu_cp_points(L["std"], L["n_std"], True)
    raw = np.abs(standard_ratios(L, correct=False) - 1.0)
    std = {"std_drift_at_300K_mK_per_min": round(float(np.interp(300.0, ts, L["std"]["after_drift_mK_per_min"].to_numpy(dtype=float))), 3),
           "std_raw_scale_bias_median": round(float(np.median(raw)), 4), "std_raw_scale_bias_max": round(float(raw.max()), 4)}
    return {"cp_drift_bias": round(bias, 4), "drift_at_300K_mK_per_min": round(d300, 3),
            "energy_scale": round(energy_scale(L), 4), "block_cp_298_J_per_g_K": round(float(np.interp(T298, t, c / energy_scale(L))), 4),
            "table_H_block_step_at_298": round(step, 2), "table_heptane_jump_at_ttp": round(hep_jump, 1), **std}
