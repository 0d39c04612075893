"""Calorimetry track: adiabatic heat-capacity series of Cu and an adiabatic Cu-heptane equilibrium.

Substrate (real evaluated tables, no network)
---------------------------------------------
chemicals 1.5.2 sdist, read with `package_file("chemicals", ...)`:
- JANAF_1998_solid_Cp.json, key 7440-50-8: Cu Cp at 26 temperatures 0-2000 K (24.442 J/(mol K) at 298.15 K);
- CRCHeatCapacitySolids.tsv: Cu Cp 200-600 K (22.63 at 200 K, 24.48 at 300 K);
- CRC Handbook Heat of Fusion.tsv: n-heptane (142-82-5) enthalpy of fusion 14,030 J/mol;
- Staveley 1981.tsv: n-heptane triple point 182.571971 K;
- Perry_Table_2-153_DIPPR_114.tsv: n-heptane liquid Cp, DIPPR equation 114 (J/(kmol K), 182.57-520 K), evaluated
  with Tc = 540.2 K (DIPPR; 224.4 J/(mol K) at 298.15 K).

Physics model (the generative truth; simulated around the tables)
-----------------------------------------------------------------
Cu: Cp(T) = C_Debye(T; theta_D = 343 K) + gamma T + A Cv(T)^2 T (electronic term, gamma = 0.695 mJ/(mol K^2),
Kittel; Cp - Cv by the Nernst-Lindemann form), A fitted in closed form to the JANAF (100-400 K) and CRC (200-400 K)
points. H(T) - H(0 K) by cumulative trapezoid on a 0.1-K grid (5.0 kJ/mol at 298.15 K; JANAF lists 5.004).
n-heptane: liquid Cp from the DIPPR-114 coefficients; solid Cp SIMULATED (no solid-heptane Cp ships): linear,
141 J/(mol K) at the triple point, slope 0.50 J/(mol K^2) (illustrative magnitude); fusion of 14,030 J/mol at the
triple point, spread over 0.03 K below it (premelting of a 99.9 % sample). Enthalpy referenced to the liquid at
298.15 K.

Measurements (simulated, seeded)
--------------------------------
L1 `pulse_series`: a heat-pulse series of a specimen (n mol): five runs (Cu; 15-320 K, rises of 5 % of T within 0.8-2 K)
or two runs (n-heptane through its melting), each pulse delivering E joules (net of the empty-vessel addenda) for a drawn temperature rise; the
recorded rise carries relative noise u_rel(T) = 0.0008 + 0.004 (20 K / T)^2 (standard, k = 1; Lang et al. 2006 quote
0.1 % above 30 K); Cp = E / (n dT) is written with the standard uncertainty u_Cp = u_rel Cp. Edits: duplicated rows,
dropped rows, a run in calories, a run's Cp in J/(g K), a run's Cp column shifted by one row against T/E/dT, a run's
uncertainty written as the expanded (k = 2) one.
L2 `equilibrium` (all simulated): the block is a Cu-Ni alloy of undisclosed composition whose heat capacity is in no
table: its high-temperature Debye temperature (298-325 K), electronic coefficient (1.5-4.5 mJ/(mol K^2)) and Ni fraction
(0.2-0.45, fixing its molar mass, never published) are drawn per world, with the Cu Cp - Cv term; the files are the raw
heat pulses of a specimen of that alloy (per gram) and of the calorimeter's Cu heat-capacity standard (Osborne et al.
1967) with the standard's reference Cp (the Cu model above), the n-heptane evaluated Cp table (solid and liquid rows)
and the lab software's enthalpy table (nominal heater energies, no drift correction, phase-blind trapezoid through the
heptane rows; in one world the alloy's low-temperature series H - H(0 K) put on the 298.15-K reference with the
handbook copper H(298.15) - H(0) = 5004 J/mol instead of the alloy's own). Pulses: rises of 1-3 K (1 % of T), 300-420 s
of heating, 900-1200 s to the reading; the heat leak drifts the temperature at d(T) = d_ref (T / 300 K)^3 (radiative
leak of a lagging shield; under 0.05 mK/min for a working shield, 2.5-3.5 mK/min at 300 K for a failing one), at the
starting temperature's rate in the fore period, the final one's in the after period, passing between them during the
heating, so the fore and after lines extrapolated to the mid-time of heating bracket the true rise (Stout 1968). Every
reported energy (specimen and standard) is the true one times k_energy (1, or 1.02-1.04 for a miscalibrated heater);
the standard's session has its own drift. The generative truth (CanonicalWriter.truth: the equilibrium temperature,
the heptane's heat and the balance on 190-360 K from the drawn alloy and the heptane model) grades the answers.
L3 `dossier`: Cu specimen heat capacities and Cu-heptane equilibria; the counterfactual specimens carry a
nanocrystalline excess heat capacity (Rupp & Birringer 1987: +9-11 % for 8-nm Cu, 150-300 K) and their equilibria
are REGENERATED from the raised heat capacity (never edited).
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from benchmark.suite.canonical import CanonicalWriter
from benchmark.suite.registry import recipe, substrate, writer

TRACK = "calorimetry"
R = 8.314462618
THETA_D = 343.0
GAMMA = 0.000695
M_CU = 63.546
M_HEP = 100.204
TC_HEP = 540.2
CAL = 4.184
T298 = 298.15
W_MELT = 0.03
CP_S_TP, CP_S_SLOPE = 141.0, 0.50


def u_rel(t):
    t = np.asarray(t, dtype=float)
    return 0.0008 + 0.004 * (20.0 / t) ** 2


@dataclass
class Cal:
    kind: str = ""
    table: pd.DataFrame | None = None
    tables: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    truth: dict = field(default_factory=dict)
    dossier: dict | None = None


# ---------------------------------------------------------------- substrate

def theta_eff(t, theta_hi: float) -> np.ndarray:
    """Effective Debye temperature: the calorimetric limit 343 K as T -> 0, theta_hi (fitted) above ~30 K."""
    t = np.asarray(t, dtype=float)
    return theta_hi + (THETA_D - theta_hi) * np.exp(-(t / 15.0) ** 2)


def _debye_cv(t: np.ndarray, theta_hi: float = THETA_D) -> np.ndarray:
    t = np.asarray(t, dtype=float)
    th = theta_eff(t, theta_hi)
    out = np.zeros_like(t)
    nodes = 2001
    for i, tt in enumerate(t):
        if tt <= 0:
            continue
        xm = min(th[i] / tt, 60.0)
        x = np.linspace(0.0, xm, nodes)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            f = np.where(x > 0, x ** 4 * np.exp(x) / np.expm1(x) ** 2, 0.0)
        h = xm / (nodes - 1)
        integral = h / 3.0 * (f[0] + f[-1] + 4.0 * f[1:-1:2].sum() + 2.0 * f[2:-1:2].sum())
        out[i] = 9.0 * R * (tt / th[i]) ** 3 * integral
    return out


@substrate("cu_heptane_refs")
def cu_heptane_refs(seed: int = 0) -> dict:
    from benchmark.suite.package_data import package_file

    janaf = json.loads(package_file("chemicals", "JANAF_1998_solid_Cp.json").read_text())["7440-50-8"]
    jt, jc = np.array(janaf[0], dtype=float), np.array(janaf[1], dtype=float)
    crc = pd.read_csv(package_file("chemicals", "CRCHeatCapacitySolids.tsv"), sep="\t", dtype=str)
    row = crc[crc.iloc[:, 0].str.strip() == "7440-50-8"].iloc[0]
    ct = np.array([float(c) for c in crc.columns[2:]])
    cc = np.array([float(x) if str(x).strip() not in ("", "nan") else np.nan for x in row.iloc[2:]])
    hf = pd.read_csv(package_file("chemicals", "CRC_Handbook_Heat_of_Fusion.tsv"), sep="\t", dtype=str)
    hfus = float(hf[hf["CAS"].str.strip() == "142-82-5"]["Hfus"].iloc[0])
    st = pd.read_csv(package_file("chemicals", "Staveley_1981.tsv"), sep="\t", dtype=str)
    ttp = float(st[st["CAS"].str.strip() == "142-82-5"]["Tt"].iloc[0])
    pe = pd.read_csv(package_file("chemicals", "Perry_Table_2-153_DIPPR_114.tsv"), sep="\t", dtype=str)
    pr = pe[pe["CAS"].str.strip() == "142-82-5"].iloc[0]
    dippr = {k: float(pr[k]) for k in ("A", "B", "C", "D", "Tmin", "Tmax")}
    # anchor: fit A of the Cp - Cv term to JANAF 100-400 K and CRC 200-400 K
    ft = np.concatenate([jt[(jt >= 100) & (jt <= 400)], ct[(ct <= 400) & ~np.isnan(cc)]])
    fy = np.concatenate([jc[(jt >= 100) & (jt <= 400)], cc[(ct <= 400) & ~np.isnan(cc)]])
    best = None
    for k in range(0, 181):   # theta_hi on a 0.25-K grid, 300-345 K; A in closed form for each
        th = 300.0 + 0.25 * k
        cv = _debye_cv(ft, th)
        g = cv ** 2 * ft
        a = float(((fy - cv - GAMMA * ft) * g).sum() / (g * g).sum())
        sse = round(float(((fy - cv - GAMMA * ft - a * g) ** 2).sum()), 9)
        if best is None or sse < best[0]:
            best = (sse, th, a)
    _, theta_hi, a = best
    return {"janaf_T": jt.tolist(), "janaf_Cp": jc.tolist(), "crc_T": ct.tolist(), "crc_Cp": cc.tolist(),
            "hfus": hfus, "ttp": ttp, "dippr": dippr, "A": round(a, 12), "theta_hi": theta_hi}


@functools.lru_cache(maxsize=4)
def _cu_grid(a: float, theta_hi: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = np.round(np.arange(0, 4201) * 0.1, 1)
    cv = _debye_cv(t, theta_hi)
    cp = cv + GAMMA * t + a * cv ** 2 * t
    h = np.concatenate([[0.0], np.cumsum(0.5 * (cp[1:] + cp[:-1]) * 0.1)])
    return t, cp, h


def cu_cp(sub: dict, t, excess=None) -> np.ndarray:
    gt, gc, _ = _cu_grid(sub["A"], sub["theta_hi"])
    c = np.interp(np.asarray(t, dtype=float), gt, gc)
    return c if excess is None else c * (1.0 + excess(np.asarray(t, dtype=float)))


def cu_h_grid(sub: dict, excess=None) -> tuple[np.ndarray, np.ndarray]:
    gt, gc, gh = _cu_grid(sub["A"], sub["theta_hi"])
    if excess is None:
        return gt, gh
    c = gc * (1.0 + excess(gt))
    return gt, np.concatenate([[0.0], np.cumsum(0.5 * (c[1:] + c[:-1]) * 0.1)])


def hep_cp_liquid(sub: dict, t) -> np.ndarray:
    d = sub["dippr"]
    tau = 1.0 - np.asarray(t, dtype=float) / TC_HEP
    a, b, c, dd = d["A"], d["B"], d["C"], d["D"]
    y = a * a / tau + b - 2 * a * c * tau - a * dd * tau ** 2 - c * c * tau ** 3 / 3 - c * dd * tau ** 4 / 2 \
        - dd * dd * tau ** 5 / 5
    return y / 1000.0


def hep_cp_solid(sub: dict, t) -> np.ndarray:
    return CP_S_TP + CP_S_SLOPE * (np.asarray(t, dtype=float) - sub["ttp"])


@functools.lru_cache(maxsize=2)
def _hep_grid_cached(ttp: float, hfus: float, key: str) -> tuple[np.ndarray, np.ndarray]:
    sub = json.loads(key)
    t = np.round(100.0 + np.arange(0, 300001) * 0.001, 3)
    cp = np.where(t >= ttp, hep_cp_liquid(sub, t), hep_cp_solid(sub, t))
    melt = (t > ttp - W_MELT) & (t <= ttp)
    cp = cp + np.where(melt, hfus / W_MELT, 0.0)
    h = np.concatenate([[0.0], np.cumsum(0.5 * (cp[1:] + cp[:-1]) * 0.001)])
    h = h - np.interp(T298, t, h)
    return t, h


def hep_h_grid(sub: dict) -> tuple[np.ndarray, np.ndarray]:
    key = json.dumps({"dippr": sub["dippr"], "ttp": sub["ttp"]}, sort_keys=True)
    return _hep_grid_cached(sub["ttp"], sub["hfus"], key)


def _r6(x):
    return float(f"{float(x):.6g}")


# ---------------------------------------------------------------- L1: heat-pulse series

CU_RUNS = [(15.0, 41.0), (38.0, 91.0), (88.0, 161.0), (158.0, 242.0), (238.0, 320.0)]
HEP_RUNS = [(140.0, 178.0), (175.0, 215.0)]


def _series(sub: dict, rng, sample: str, n: float) -> pd.DataFrame:
    if sample == "Cu":
        gt, gh = cu_h_grid(sub)
        # rises of 5 % of T (0.8-2 K): 19-41 pulses a run, so each run's scatter about a smooth curve is measured to
        # about 15 % and a run whose stated u is doubled (uncertainty_k2) stands out from every other
        runs, step = CU_RUNS, (lambda t: float(np.clip(0.05 * t, 0.8, 2.0)))
    else:
        gt, gh = hep_h_grid(sub)
        runs, step = HEP_RUNS, (lambda t: 2.5)
    rows = []
    for r, (t0, t1) in enumerate(runs, start=1):
        t = t0 + float(rng.uniform(0.0, 1.5))
        k = 0
        while True:
            target = step(t) * float(rng.uniform(0.95, 1.05))
            h0 = float(np.interp(t, gt, gh))
            e_mol = float(np.interp(t + target, gt, gh)) - h0
            if sample != "Cu" and abs(t - sub["ttp"]) < 3.0 and t < sub["ttp"] + 0.5:
                e_mol = max(e_mol, 2200.0 * float(rng.uniform(0.95, 1.05)))   # larger pulses through the melting
            t_end = float(np.interp(h0 + e_mol, gh, gt))
            if t_end > t1:
                break
            k += 1
            dt_true = t_end - t
            tm = 0.5 * (t + t_end)
            dt_rec = round(dt_true * (1.0 + float(rng.normal(0.0, float(u_rel(tm))))), 5)
            energy = round(e_mol * n, 5)
            rows.append({"run": r, "point": k, "T_mean_K": round(tm, 4), "delta_T_K": dt_rec, "energy_J": energy})
            t = t_end
    d = pd.DataFrame(rows)
    d["Cp_J_per_mol_K"] = [_r6(e / (n * dt)) for e, dt in zip(d["energy_J"], d["delta_T_K"])]
    d["u_Cp_J_per_mol_K"] = [_r6(c * float(u_rel(t))) for c, t in zip(d["Cp_J_per_mol_K"], d["T_mean_K"])]
    d["point_id"] = [f"S{r}-{k:03d}" for r, k in zip(d["run"], d["point"])]
    return d


@recipe(TRACK, "pulse_series")
def pulse_series(sub: dict, rng, sample: str = "Cu", n_low: float = 0.10, n_high: float = 0.16) -> Cal:
    n = round(float(rng.uniform(n_low, n_high)), 6)
    d = _series(sub, rng, sample, n)
    p = Cal(kind="integrity", table=d)
    p.meta.update({"sample": sample, "n_mol": n, "molar_mass": M_CU if sample == "Cu" else M_HEP,
                   "calorimeter": f"AC-{int(rng.integers(10, 100))}"})
    p.truth["n_rows"] = int(len(d))
    return p


def _run_rows(p: Cal, run: int) -> np.ndarray:
    return np.flatnonzero((p.table["run"] == run).to_numpy())


@recipe(TRACK, "duplicate_points")
def duplicate_points(p: Cal, rng, n_low: int, n_high: int) -> Cal:
    r = np.sort(rng.choice(len(p.table), int(rng.integers(n_low, n_high + 1)), replace=False))
    p.table = pd.concat([p.table, p.table.iloc[r]], ignore_index=True)
    p.truth["duplicated"] = sorted(p.table.iloc[r]["point_id"].tolist())
    return p


@recipe(TRACK, "missing_points")
def missing_points(p: Cal, rng, n_low: int, n_high: int) -> Cal:
    t = p.table
    inner = [i for i in range(len(t)) if 0 < i < len(t) - 1 and t.at[i - 1, "run"] == t.at[i, "run"] == t.at[i + 1, "run"]]
    k = int(rng.integers(n_low, n_high + 1))
    pick: list[int] = []
    for i in rng.permutation(inner):
        if all(abs(int(i) - j) > 2 for j in pick):
            pick.append(int(i))
        if len(pick) == k:
            break
    p.truth["missing"] = sorted(t.loc[pick, "point_id"].tolist())
    p.table = t.drop(index=pick).reset_index(drop=True)
    return p


@recipe(TRACK, "cal_units")
def cal_units(p: Cal, rng, runs: list) -> Cal:
    run = int(rng.choice(runs))
    m = _run_rows(p, run)
    t = p.table
    for c in ("energy_J", "Cp_J_per_mol_K", "u_Cp_J_per_mol_K"):
        t.loc[m, c] = [_r6(x / CAL) for x in t.loc[m, c]]
    p.truth["cal_run"] = run
    return p


@recipe(TRACK, "gram_units")
def gram_units(p: Cal, rng, runs: list) -> Cal:
    run = int(rng.choice(runs))
    m = _run_rows(p, run)
    t = p.table
    for c in ("Cp_J_per_mol_K", "u_Cp_J_per_mol_K"):
        t.loc[m, c] = [_r6(x / p.meta["molar_mass"]) for x in t.loc[m, c]]
    p.truth["gram_run"] = run
    return p


@recipe(TRACK, "misaligned_cp")
def misaligned_cp(p: Cal, rng, runs: list) -> Cal:
    run = int(rng.choice(runs))
    m = _run_rows(p, run)
    t = p.table
    for c in ("Cp_J_per_mol_K", "u_Cp_J_per_mol_K"):
        t.loc[m[:-1], c] = t.loc[m[1:], c].to_numpy()
    p.table = t.drop(index=[int(m[-1])]).reset_index(drop=True)
    p.truth["misaligned_run"] = run
    return p


@recipe(TRACK, "uncertainty_k2")
def uncertainty_k2(p: Cal, rng, runs: list) -> Cal:
    run = int(rng.choice(runs))
    m = _run_rows(p, run)
    p.table.loc[m, "u_Cp_J_per_mol_K"] = [_r6(2.0 * x) for x in p.table.loc[m, "u_Cp_J_per_mol_K"]]
    p.truth["k2_run"] = run
    return p


# ---------------------------------------------------------------- L2: adiabatic alloy-heptane equilibrium

H298_CU_HANDBOOK = 5004.0          # JANAF H(298.15 K) - H(0 K) of copper, J/mol: the software's default reference shift


@functools.lru_cache(maxsize=8)
def _alloy_grid(theta_hi: float, gamma: float, a: float, molar_mass: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-gram Cp and H(T) - H(0 K) of the Cu-Ni block alloy on a 0.1-K grid (Debye lattice term with the alloy's own
    drawn high-temperature Debye temperature, electronic term gamma T, Cp - Cv term A Cv^2 T)."""
    t = np.round(np.arange(0, 4201) * 0.1, 1)
    cv = _debye_cv(t, theta_hi)
    cp = (cv + gamma * t + a * cv ** 2 * t) / molar_mass
    h = np.concatenate([[0.0], np.cumsum(0.5 * (cp[1:] + cp[:-1]) * 0.1)])
    return t, cp, h


def alloy_h_grid(alloy: dict) -> tuple[np.ndarray, np.ndarray]:
    gt, _, gh = _alloy_grid(alloy["theta_hi"], alloy["gamma"], alloy["A"], alloy["M"])
    return gt, gh


def _drift(d_ref: float, t: float) -> float:
    """Heat-leak drift (K/s) of a lagging adiabatic shield: the leak is radiative, about T^3."""
    return d_ref * (t / 300.0) ** 3


def _pulses(gt: np.ndarray, gh: np.ndarray, rng, amount: float, d_ref: float, k_energy: float = 1.0,
            t_lo: float = 80.0, t_hi: float = 395.0) -> pd.DataFrame:
    """Raw heat pulses (intermittent heating) of a specimen of `amount` units of the grid (mol or g).
    The heat leak drifts the temperature at d(T) = d_ref (T/300)^3 K/s: the fore period drifts at the rate of the
    starting temperature, the after period at the rate of the final one, and during the heating the shield lags the
    rising calorimeter so the leak moves from the one rate to the other (Stout 1968); the fore and after drift lines
    extrapolated to the mid-time of heating therefore bracket the true rise. energy_J is the heater energy as the
    calorimeter's electrical measurement reports it: the true energy times k_energy (1 for a calibrated heater)."""
    t, clock, rows, k = t_lo + float(rng.uniform(0, 1.0)), 0.0, [], 0
    T_on = t
    while True:
        target = float(np.clip(0.01 * t, 1.0, 3.0)) * float(rng.uniform(0.95, 1.05))
        heat = float(rng.choice([300.0, 360.0, 420.0]))
        settle = float(rng.choice([900.0, 1080.0, 1200.0]))
        t_on = clock + 600.0
        t_mid = t_on + 0.5 * heat
        t_off = t_on + heat
        t_read = t_off + settle
        d_on = _drift(d_ref, T_on)
        T1 = T_on + d_on * (t_mid - t_on)                 # fore line at mid-time: the true start of the rise
        h1 = float(np.interp(T1, gt, gh))
        e = float(np.interp(T1 + target, gt, gh)) - h1
        T2 = float(np.interp(h1 + e, gh, gt))
        if T2 > t_hi:
            break
        k += 1
        d_after = _drift(d_ref, T2)
        T_read = T2 + d_after * (t_read - t_mid)
        en = amount * e * k_energy * (1.0 + float(rng.normal(0, 0.0003)))
        a = d_on * 60000.0 * (1.0 + float(rng.normal(0, 0.02))) + float(rng.normal(0, 0.002))   # mK/min
        b = d_after * 60000.0 * (1.0 + float(rng.normal(0, 0.02))) + float(rng.normal(0, 0.002))
        rows.append({"pulse": k, "t_on_s": round(t_on, 1), "t_off_s": round(t_off, 1), "t_read_s": round(t_read, 1),
                     "energy_J": round(en, 5), "T_on_K": round(T_on + float(rng.normal(0, 1e-4)), 5),
                     "T_read_K": round(T_read + float(rng.normal(0, 1e-4)), 5),
                     "fore_drift_mK_per_min": round(a, 4), "after_drift_mK_per_min": round(b, 4)})
        clock = t_read
        T_on = T_read + d_after * 600.0
        t = T_on
    return pd.DataFrame(rows)


def hep_table(sub: dict, rng) -> pd.DataFrame:
    """The evaluated n-heptane table, tabulated on a grid whose origin is drawn per world (3-K steps)."""
    ttp = sub["ttp"]
    s0, l0 = round(float(rng.uniform(118.5, 121.5)), 2), round(float(rng.uniform(184.0, 187.0)), 2)
    ts = [round(s0 + 3 * k, 2) for k in range(40) if s0 + 3 * k < ttp - 0.5] + [round(ttp, 3)]
    tl = [round(ttp, 3)] + [round(l0 + 3 * k, 2) for k in range(80) if l0 + 3 * k <= 383.0]
    rows = [{"T_K": x, "phase": "solid", "Cp_J_per_mol_K": round(float(hep_cp_solid(sub, x)), 2)} for x in ts]
    rows += [{"T_K": x, "phase": "liquid", "Cp_J_per_mol_K": round(float(hep_cp_liquid(sub, x)), 2)} for x in tl]
    return pd.DataFrame(rows)


def standard_table(sub: dict, rng) -> pd.DataFrame:
    """Reference molar heat capacity of the Cu calibration standard (the Debye model anchored to JANAF/CRC), tabulated
    on a 4-K grid whose origin is drawn per world (as the heptane table's)."""
    t0 = round(float(rng.uniform(72.0, 76.0)), 2)
    t = np.round(t0 + 4.0 * np.arange(0, 82), 2)
    t = t[t <= 401.0]
    return pd.DataFrame({"T_K": t, "Cp_J_per_mol_K": np.round(cu_cp(sub, t), 4)})


def _software_table(pul: pd.DataFrame, m_spec: float, hep: pd.DataFrame, splice_shift: float | None) -> pd.DataFrame:
    """The lab reduction software: Cp = E / (m (T_read - T_on)) at (T_on + T_read)/2 (nominal heater energy, no
    drift correction), trapezoid integration; heptane: one smooth trapezoid through every row (phase-blind, no fusion).
    splice_shift: the low-temperature segment (below 298.15 K) put on the 298.15-K reference with the handbook copper
    H(298.15) - H(0) per gram instead of the specimen's own (the integral of its own Cp from 0 K)."""
    tm = 0.5 * (pul["T_on_K"] + pul["T_read_K"]).to_numpy()
    cp = (pul["energy_J"] / (m_spec * (pul["T_read_K"] - pul["T_on_K"]))).to_numpy()
    hc = np.concatenate([[0.0], np.cumsum(0.5 * (cp[1:] + cp[:-1]) * np.diff(tm))])
    ht = hep["T_K"].to_numpy(dtype=float)
    hcp = hep["Cp_J_per_mol_K"].to_numpy(dtype=float)
    hh = np.concatenate([[0.0], np.cumsum(0.5 * (hcp[1:] + hcp[:-1]) * np.diff(ht))])
    grid = np.arange(125, 381).astype(float)
    h_b = np.interp(grid, tm, hc) - np.interp(T298, tm, hc)
    if splice_shift is not None:
        h_b = np.where(grid < T298, h_b + splice_shift, h_b)
    h_hep = np.interp(grid, ht, hh) - np.interp(T298, ht, hh)
    return pd.DataFrame({"T_K": grid.astype(int), "H_block_J_per_g": np.round(h_b, 4),
                         "H_heptane_J_per_mol": np.round(h_hep, 2)})


def _balance_fn(sub, grid_b, m_b, t_b, n_hep, t_hep):
    bt, bh = grid_b
    ht, hh = hep_h_grid(sub)
    return lambda x: m_b * (np.interp(x, bt, bh) - np.interp(t_b, bt, bh)) + n_hep * (np.interp(x, ht, hh) - np.interp(t_hep, ht, hh))  # noqa: E731


def _tf_truth(sub, n_cu, t_cu, n_hep, t_hep, excess=None, grid=None) -> float:
    f = _balance_fn(sub, grid if grid is not None else cu_h_grid(sub, excess), n_cu, t_cu, n_hep, t_hep)
    lo, hi = min(t_cu, t_hep), max(t_cu, t_hep)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if f(mid) > 0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


BAL_GRID = list(range(190, 361, 5))


@recipe(TRACK, "equilibrium")
def equilibrium(sub: dict, rng, d_ref: float, m_cu: float, t_cu: float, m_hep: float, t_hep: float,
                splice: bool = False, k_energy: float = 1.0, theta_hi: float = 330.0, gamma_mJ: float = 3.0,
                x_ni: float = 0.3, d_std: float = 0.02) -> Cal:
    """d_ref: heat-leak drift at 300 K (mK/min); m_cu, t_cu: the block's mass and initial temperature (the block is
    the Cu-Ni alloy); k_energy: the heater's reported energy over the true one (1: calibrated); theta_hi, gamma_mJ,
    x_ni: the alloy's own Debye temperature, electronic coefficient (mJ/(mol K^2)) and Ni fraction (its molar mass,
    never published); d_std: the drift of the Cu standard's run at 300 K (mK/min; the standard is measured in a session
    of its own)."""
    alloy = {"theta_hi": float(theta_hi), "gamma": float(gamma_mJ) / 1000.0, "A": sub["A"],
             "M": round((1.0 - x_ni) * M_CU + x_ni * 58.6934, 4)}
    bt, bh = alloy_h_grid(alloy)
    m_spec = round(float(rng.uniform(7.0, 10.0)), 4)
    pul = _pulses(bt, bh, rng, m_spec, d_ref / 60000.0, k_energy)
    n_std = round(float(rng.uniform(0.12, 0.16)), 6)
    st_grid = cu_h_grid(sub)
    std = _pulses(st_grid[0], st_grid[1], rng, n_std, d_std / 60000.0, k_energy)
    hep = hep_table(sub, rng)
    h298_0 = float(np.interp(T298, bt, bh))
    err = round(h298_0 - H298_CU_HANDBOOK / M_CU, 4) if splice else None
    tab = _software_table(pul, m_spec, hep, err)
    p = Cal(kind="equilibrium")
    p.tables = {"specimen_pulses.csv": pul, "standard_pulses.csv": std, "standard_cp.csv": standard_table(sub, rng),
                "heptane_cp.csv": hep, "enthalpy_table.csv": tab}
    m_cu, m_hep, t_cu, t_hep = round(m_cu, 2), round(m_hep, 2), round(t_cu, 2), round(t_hep, 2)
    p.meta.update({"m_spec": m_spec, "n_std": n_std, "m_cu": m_cu, "m_hep": m_hep, "T_cu0": t_cu, "T_hep0": t_hep,
                   "hfus": sub["hfus"], "ttp": round(sub["ttp"], 3), "splice": splice})
    n_hep = m_hep / M_HEP
    bal = _balance_fn(sub, (bt, bh), m_cu, t_cu, n_hep, t_hep)
    tf = _tf_truth(sub, m_cu, t_cu, n_hep, t_hep, grid=(bt, bh))
    ht, hh = hep_h_grid(sub)
    p.truth.update({"Tf_K": round(tf, 4),
                    "Q_heptane_J": round(float(n_hep * (np.interp(tf, ht, hh) - np.interp(t_hep, ht, hh))), 2),
                    "balance": {str(x): round(float(bal(float(x))), 2) for x in BAL_GRID},
                    "alloy_cp_298_J_per_g_K": round(float(np.interp(T298, bt, _alloy_grid(alloy["theta_hi"], alloy["gamma"], alloy["A"], alloy["M"])[1])), 5),
                    "energy_scale": k_energy, "drift_300K_mK_per_min": d_ref,
                    "splice_error_J_per_g": err})
    return p


# ---------------------------------------------------------------- L3 dossier: bulk prior vs nanocrystalline specimens

def _nc_excess(amp: float):
    """Nanocrystalline excess heat capacity (fraction of the bulk value): amp at 300 K, rising gently with T over
    150-300 K as Rupp & Birringer 1987 report for 8-nm Cu (+9 % to +11 %), fading below ~100 K."""
    def f(t):
        t = np.asarray(t, dtype=float)
        return amp * (0.8 + 0.2 * np.clip((t - 150.0) / 150.0, 0.0, 1.0)) * np.clip(t / 100.0, 0.0, 1.0)
    return f


@recipe(TRACK, "dossier")
def dossier(sub: dict, rng, kind: str, amp_b: float = 0.0, amp_a: float = 0.0) -> Cal:
    specs = {"Cu-A": {"preparation": "99.999 % Cu rod, annealed 4 h at 900 K", "grain_size_nm": 40000,
                      "density_fraction": 1.000, "amp": amp_a},
             "Cu-B": ({"preparation": "inert-gas condensation, consolidated at 1.4 GPa (as prepared)",
                       "grain_size_nm": 8, "density_fraction": 0.92, "amp": amp_b} if kind != "bulk_real" else
                      {"preparation": "99.999 % Cu rod, cold-rolled and annealed 4 h at 900 K", "grain_size_nm": 25000,
                       "density_fraction": 1.000, "amp": amp_b})}
    ref_t = np.arange(150, 301, 10).astype(float)
    ref = pd.DataFrame({"T_K": ref_t.astype(int), "Cp_bulk_J_per_mol_K": np.round(cu_cp(sub, ref_t), 3)})
    cp_rows, eq_rows, spec_rows = [], [], []
    r_cp = np.random.default_rng(20871)   # the measurement noise is shared by the three dossiers
    r_eq = np.random.default_rng(20872)
    for sid, s in specs.items():
        ex = _nc_excess(s["amp"]) if s["amp"] else None
        mass = {"Cu-A": 8.914, "Cu-B": 7.352}[sid]
        for t in ref_t + 0.0:
            c = float(cu_cp(sub, [t], ex)[0])
            cp_rows.append({"specimen": sid, "T_K": int(t), "Cp_J_per_mol_K": round(c * (1 + float(r_cp.normal(0, 0.001))), 3),
                            "u_Cp_J_per_mol_K": round(c * 0.001, 3)})
        for run in range(1, 5):
            m_cu = round(float(r_eq.uniform(60, 90)), 2)
            t_cu = round(float(r_eq.uniform(330, 360)), 2)
            m_hep = round(float(r_eq.uniform(25, 35)), 2)
            t_hep = round(float(r_eq.uniform(200, 230)), 2)
            tf = _tf_truth(sub, m_cu / M_CU, t_cu, m_hep / M_HEP, t_hep, ex)
            pred = _tf_truth(sub, m_cu / M_CU, t_cu, m_hep / M_HEP, t_hep, None)
            eq_rows.append({"specimen_material": sid, "run": run, "m_Cu_g": m_cu, "T_Cu0_K": t_cu, "m_heptane_g": m_hep,
                            "T_heptane0_K": t_hep, "Tf_measured_K": round(tf + float(r_eq.normal(0, 0.03)), 2),
                            "Tf_predicted_bulk_K": round(pred, 2)})
        spec_rows.append({"specimen": sid, "preparation": s["preparation"], "grain_size_nm": s["grain_size_nm"],
                          "density_fraction": s["density_fraction"], "calorimetric_mass_g": mass})
    md = "\n".join([
        "# Evidence dossier: heat capacity of two Cu specimens and their adiabatic Cu-heptane equilibria",
        "",
        "## Background",
        "The frozen equilibrium model predicts the final temperature of an adiabatic vessel in which a Cu block at",
        "T_Cu0 meets liquid n-heptane at T_heptane0, from the bulk-Cu heat capacity (Debye model, theta_D = 343 K,",
        "anchored to the JANAF/CRC tables: reference_cp.csv) and the n-heptane liquid heat capacity (DIPPR-114).",
        "Two follow-up specimens were measured in the same adiabatic calorimeter (standard uncertainty 0.1 %), and",
        "blocks of the same material were used in four equilibrium runs each. All measurements in this dossier are",
        "simulated (the bulk prior is the Debye model anchored to the evaluated JANAF/CRC copper tables).",
        "",
        "## Tables",
        "- specimens.csv: specimen, preparation, grain_size_nm (XRD line broadening), density_fraction, calorimetric_mass_g",
        "- specimen_cp.csv: specimen, T_K, Cp_J_per_mol_K, u_Cp_J_per_mol_K (measured)",
        "- reference_cp.csv: T_K, Cp_bulk_J_per_mol_K (the bulk-Cu prior of the equilibrium model)",
        "- equilibria.csv: specimen_material, run, m_Cu_g, T_Cu0_K, m_heptane_g, T_heptane0_K, Tf_measured_K,",
        "  Tf_predicted_bulk_K (the frozen model's prediction from the bulk-Cu prior)",
        "",
        "## Question",
        "Does the bulk-Cu heat-capacity prior of the equilibrium model hold for these specimens? If not, what explains",
        "the difference, and what should be done before the model is used for them?",
    ])
    p = Cal(kind="dossier")
    p.dossier = {"dossier.md": md, "specimens.csv": pd.DataFrame(spec_rows), "specimen_cp.csv": pd.DataFrame(cp_rows),
                 "reference_cp.csv": ref, "equilibria.csv": pd.DataFrame(eq_rows)}
    return p


# ---------------------------------------------------------------- writer

L1_FILES = {
    "cp_series.csv": ("the heat-capacity series (CSV: point_id, run, point, T_mean_K, delta_T_K, energy_J, Cp_J_per_mol_K, "
                      "u_Cp_J_per_mol_K); one row per heat pulse: energy_J = energy delivered to the specimen (empty-"
                      "vessel addenda subtracted), delta_T_K = drift-corrected temperature rise, T_mean_K = mean "
                      "temperature of the pulse, Cp = energy_J / (n_mol * delta_T_K), u_Cp = standard uncertainty (k = 1)"),
}


@writer(TRACK)
def write(p: Cal, w: CanonicalWriter) -> None:
    if p.dossier is not None:
        w.files(p.dossier)
        return
    if p.truth:
        w.truth(**p.truth)
    files = {"meta.json": "this description"}
    meta: dict = {"method": "adiabatic heat-capacity calorimetry, intermittent heating (heat pulses with fore and "
                            "after drift periods)"}
    if p.kind == "integrity":
        t = p.table.sort_values(["run", "point"], kind="stable")[
            ["point_id", "run", "point", "T_mean_K", "delta_T_K", "energy_J", "Cp_J_per_mol_K", "u_Cp_J_per_mol_K"]]
        w.table("cp_series.csv", t, float_format="%.6g")
        files.update(L1_FILES)
        s = p.meta["sample"]
        meta.update({"data": "simulated heat-pulse series (around the JANAF/CRC copper and DIPPR/CRC n-heptane reference "
                             "data)",
                     "sample": "copper, 99.999 %" if s == "Cu" else "n-heptane, 99.9 % (sealed in the vessel)",
                     "amount_mol": p.meta["n_mol"], "molar_mass_g_per_mol": p.meta["molar_mass"],
                     "mass_g": round(p.meta["n_mol"] * p.meta["molar_mass"], 4), "calorimeter": p.meta["calorimeter"],
                     "units": {"T": "K", "energy": "J", "Cp": "J/(mol K)", "u_Cp": "J/(mol K), standard uncertainty k = 1"},
                     "runs": "each run is a continuous series of heat pulses started after cooling; runs overlap slightly "
                             "in temperature"})
    elif p.kind == "equilibrium":
        m = p.meta
        for name in ("specimen_pulses.csv", "standard_pulses.csv", "standard_cp.csv", "heptane_cp.csv",
                     "enthalpy_table.csv"):
            w.table(name, p.tables[name], float_format="%.10g")
        cols = ("(CSV: pulse, t_on_s, t_off_s, t_read_s, energy_J, T_on_K, T_read_K, fore_drift_mK_per_min, "
                "after_drift_mK_per_min): heating from t_on to t_off; energy_J = heater energy as the calorimeter's "
                "electrical measurement reports it (addenda subtracted); T_on_K = temperature at t_on (end of the fore "
                "period), T_read_K = temperature read at t_read after equilibration; the drift rates are the slopes of "
                "temperature against time measured in the fore period (before t_on) and the after period (from t_read)")
        files["specimen_pulses.csv"] = ("simulated raw heat pulses of a specimen cut from the block's alloy (mass in "
                                        "meta.json) " + cols)
        files["standard_pulses.csv"] = ("simulated raw heat pulses of the calorimeter's Cu heat-capacity standard "
                                        "(99.999 % Cu, amount in meta.json), measured in the same calorimeter with the "
                                        "same heater and electrical measurement " + cols)
        files["standard_cp.csv"] = ("reference molar heat capacity of the Cu standard (CSV: T_K, Cp_J_per_mol_K; a Debye "
                                    "model anchored to the JANAF 1998 and CRC copper tables)")
        files["heptane_cp.csv"] = ("evaluated molar heat capacity of n-heptane (CSV: T_K, phase, Cp_J_per_mol_K), solid "
                                   "rows up to the triple point (simulated: no solid-heptane table ships) and liquid rows "
                                   "from it (DIPPR-114)")
        files["enthalpy_table.csv"] = ("the lab reduction software's enthalpy table (CSV: T_K, H_block_J_per_g, "
                                       "H_heptane_J_per_mol), integrated from specimen_pulses.csv and heptane_cp.csv")
        meta.update({
            "data": "simulated: the pulses, drifts, noise and experiment are simulated around evaluated reference tables",
            "experiment": {"block_material": "Cu-Ni alloy of undisclosed composition (heat capacity not tabulated)",
                           "block_mass_g": m["m_cu"], "block_initial_T_K": m["T_cu0"], "heptane_mass_g": m["m_hep"],
                           "heptane_initial_T_K": m["T_hep0"],
                           "vessel": "adiabatic; the block and the n-heptane exchange heat only with each other; "
                                     "the vessel's own heat capacity is negligible"},
            "specimen_mass_g": m["m_spec"], "standard_amount_mol": m["n_std"],
            "molar_mass_g_per_mol": {"Cu (standard)": M_CU, "n-heptane": M_HEP},
            "heptane_triple_point_K": m["ttp"], "heptane_enthalpy_of_fusion_J_per_mol": m["hfus"],
            "enthalpy_table": {
                "software": "lab reduction software, default settings",
                "H_block_J_per_g": ("below 298.15 K: the low-temperature series H(T) - H(0 K) less the software's default "
                                    "H(298.15 K) - H(0 K) (copper, JANAF: 5004 J/mol = 78.75 J/g); from 298.15 K up: "
                                    "H(T) - H(298.15 K); merged by the software")
                if m["splice"] else "H(T) - H(298.15 K) at every temperature",
                "H_heptane_J_per_mol": "H(T) - H(298.15 K, liquid)"},
        })
    meta["files"] = dict(sorted(files.items()))
    w.json("meta.json", meta)
