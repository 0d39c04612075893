"""nuclear: a sound analysis other than the reference solver's (worlds/nuclear/analysis.py), from the public files only.

- decay: the gain of each spectrum from Gaussian-plus-straight-line fits (scipy curve_fit) of BOTH Co-60 peaks and a
         two-point energy calibration per spectrum (not the 1332.5 keV centroid ratio against the nominal calibration);
         the 700-1450 keV window integrated on that recalibrated axis; background from background.csv; Mn-54 from a
         least-squares fit of the reference Mn-54 spectrum plus a quadratic over 780-890 keV in every spectrum (no
         half-life smoothing), subtracted only where the 834.8 keV peak is seen; the half-life from a Poisson maximum-
         likelihood fit of the live-time-normalised counts (not weighted least squares on the logarithm), its standard
         error from the curvature of the likelihood.
"""
from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import curve_fit, minimize

from tests.alternatives import alternative

LINES = (1173.228, 1332.492)
MN = 834.848


def _gfit(y, guess, half):
    lo, hi = int(guess - half), int(guess + half)
    x = np.arange(lo, hi + 1, dtype=float)
    s = y[lo:hi + 1].astype(float)
    f = lambda x, a, mu, sg, c0, c1: a * np.exp(-0.5 * ((x - mu) / sg) ** 2) + c0 + c1 * (x - guess)  # noqa: E731
    p0 = [max(s.max() - s.min(), 1.0), float(x[np.argmax(np.convolve(s, np.ones(9) / 9, mode="same"))]), half / 2.5, s.min(), 0.0]
    p, _ = curve_fit(f, x, s, p0=p0, sigma=np.sqrt(np.maximum(s, 1.0)), maxfev=20000)
    return float(p[1])


def _integrate(y, x_lo, x_hi):
    cum = np.concatenate([[0.0], np.cumsum(y.astype(float))])
    edges = np.arange(len(y) + 1) - 0.5
    return float(np.interp(x_hi, edges, cum) - np.interp(x_lo, edges, cum))


def _rebin(ref, p, q, a, b):
    """Reference (nominal calibration a + b x) onto the channels of a spectrum calibrated as p + q x."""
    cum = np.concatenate([[0.0], np.cumsum(ref.astype(float))])
    edges = np.arange(len(ref) + 1) - 0.5
    e = p + q * edges
    return np.diff(np.interp((e - a) / b, edges, cum))


@alternative("nuclear.L2.decay", "Gaussian photopeak fits per spectrum for the gain (two-point calibration from both Co-60 "
             "peaks), the window integrated on the recalibrated energy axis, and a Poisson maximum-likelihood fit of the decay",
             ["nuclear.L2.decay.clean", "nuclear.L2.decay.dead_time", "nuclear.L2.decay.mn54", "nuclear.L2.decay.gain_drift"])
def decay_ml(world_dir: Path, out: Path) -> dict:
    meta = json.loads((world_dir / "meta.json").read_text())
    a, b = meta["calibration"]["offset_keV"], meta["calibration"]["slope_keV_per_ch"]
    sp = pd.read_csv(world_dir / "spectra.csv.gz", dtype={"spectrum_id": str})
    ids = sp["spectrum_id"].tolist()
    y = sp.drop(columns=["spectrum_id"]).to_numpy()
    acq = pd.read_csv(world_dir / "acquisitions.csv", dtype={"spectrum_id": str}).set_index("spectrum_id").loc[ids]
    t0 = datetime.fromisoformat(acq["start_time"].iloc[0].replace("Z", "+00:00"))
    t = np.array([(datetime.fromisoformat(s.replace("Z", "+00:00")) - t0).total_seconds() / 86400 for s in acq["start_time"]])
    t = t + acq["real_time_s"].to_numpy() / 2 / 86400
    live = acq["live_time_s"].to_numpy(float)
    bg = pd.read_csv(world_dir / "background.csv")["counts"].to_numpy()
    bg_live = meta["background"]["live_time_s"]
    ref = pd.read_csv(world_dir / "mn54_reference.csv")["counts"].to_numpy().astype(float)
    ref = ref - bg * meta["mn54_reference"]["live_time_s"] / bg_live
    bg_win = _integrate(bg, (700 - a) / b, (1450 - a) / b) / bg_live
    ref_win = _integrate(ref, (700 - a) / b, (1450 - a) / b)
    win, mn, gains = [], [], []
    for i in range(len(ids)):
        sm = np.convolve(y[i].astype(float), np.ones(15) / 15, mode="same")
        c = []
        for e in LINES:  # the peaks can have drifted far: coarse search within +-8% first, then fit
            x0 = (e - a) / b
            lo, hi = int(x0 * 0.92), int(x0 * 1.08)
            hi = min(hi, int((LINES[0] + 80 - a) / b * 1.08)) if e == LINES[0] else hi
            c.append(_gfit(y[i], lo + int(np.argmax(sm[lo:hi])), 55))
        q = (LINES[1] - LINES[0]) / (c[1] - c[0])
        p = LINES[1] - q * c[1]
        gains.append(b / q)
        win.append(_integrate(y[i], (700 - p) / q, (1450 - p) / q))
        r = _rebin(ref, p, q, a, b)
        lo, hi = int((780 - p) / q), int((890 - p) / q)
        x = np.arange(lo, hi + 1, dtype=float)
        u = (x - x.mean()) / (hi - lo)
        X = np.column_stack([np.ones_like(u), u, u * u, r[lo:hi + 1]])
        coef = np.linalg.lstsq(X, y[i][lo:hi + 1].astype(float), rcond=None)[0]
        mn.append(coef[3])
    win, mn = np.array(win), np.array(mn)
    seen = np.median(mn) * ref_win > 0.01 * np.median(win)
    net = win - (mn * ref_win if seen else 0.0) - bg_win * live
    rate = net / live
    pd.DataFrame({"spectrum_id": ids, "co60_rate": rate}).to_csv(out / "rates_ml.csv", index=False)

    def nll(th):
        mu = np.exp(th[0] - th[1] * t) * live
        return float(np.sum(mu - net * np.log(mu)))
    lam0 = -np.polyfit(t, np.log(rate), 1)[0]
    r0 = minimize(nll, [math.log(rate[0]), lam0], method="Nelder-Mead", options={"xatol": 1e-12, "fatol": 1e-9, "maxiter": 20000})
    lam = float(r0.x[1])
    h = 1e-7
    # profile over the amplitude: curvature of the likelihood in lambda with A at its optimum for each lambda
    def prof(l):
        a_hat = math.log(float(np.sum(net)) / float(np.sum(np.exp(-l * t) * live)))
        return nll([a_hat, l])
    curv = (prof(lam + h) - 2 * prof(lam) + prof(lam - h)) / h ** 2
    se = 1 / math.sqrt(curv)
    hl = math.log(2) / lam
    issues = []
    if 1 - live[0] / acq["real_time_s"].iloc[0] > 0.05:
        issues.append(f"dead time {1 - live[0] / acq['real_time_s'].iloc[0]:.0%}: live-time normalisation")
    if seen:
        issues.append("Mn-54 834.8 keV peak in the window: reference spectrum fitted and subtracted")
    if np.percentile(gains, 95) - np.percentile(gains, 5) > 0.02:
        issues.append("peak positions drift with temperature (gain): recalibrated every spectrum from both Co-60 peaks")
    return {"half_life_days": round(hl, 2), "half_life_uncertainty_days": round(hl * se / lam, 2), "table": "rates_ml.csv",
            "issues_found": issues, "analysis_usable": True, "summary": f"Poisson ML half-life {hl:.0f} d"}
