"""nuclear: a sound analysis other than the reference solver's (worlds/nuclear/analysis.py), from the public files only.

- decay: both Co-60 peaks fitted per spectrum with a Gaussian on a straight line (scipy curve_fit), each peak's
         centroid regressed on the logged temperature, the gain the mean ratio of the two smoothed centroids to the
         laboratory's calibration (not the 1332.5 keV centroid alone, by a centre-of-mass search); the 700-1450 keV window
         integrated on that recalibrated axis; background from background.csv; Mn-54 from a least-squares fit of the
         reference Mn-54 spectrum plus a quadratic over 780-890 keV in every spectrum (not a straight line over +-1.5
         sigma), smoothed by its tabulated half-life, subtracted only where the 834.8 keV peak is seen; the half-life from a Poisson maximum-likelihood fit of the live-time-normalised counts with one amplitude
         per source mounting (not weighted least squares on the logarithm), its standard error from the curvature of
         the profile likelihood.
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
    env = pd.read_csv(world_dir / "environment.csv", dtype={"spectrum_id": str}).set_index("spectrum_id").loc[ids]
    temp = env["temperature_C"].to_numpy(float)
    cents = []
    for i in range(len(ids)):
        sm = np.convolve(y[i].astype(float), np.ones(15) / 15, mode="same")
        c = []
        for e in LINES:  # the peaks can have drifted far: coarse search within +-8% first, then fit
            x0 = (e - a) / b
            lo, hi = int(x0 * 0.92), int(x0 * 1.08)
            hi = min(hi, int((LINES[0] + 80 - a) / b * 1.08)) if e == LINES[0] else hi
            c.append(_gfit(y[i], lo + int(np.argmax(sm[lo:hi])), 55))
        cents.append(c)
    cents = np.array(cents)
    # each peak's fitted centroid follows the detector temperature: a straight line per peak against the logged
    # temperature (numpy polyfit) averages out the centroids' counting noise. The gain is the mean ratio of the two
    # smoothed centroids to their channels under the laboratory's calibration; a two-point recalibration from two
    # peaks 159 keV apart would extrapolate each centroid's fit bias threefold to the window's 700 keV edge
    cents = np.column_stack([np.polyval(np.polyfit(temp, cents[:, k], 1), temp) for k in range(2)])
    gains = (cents / np.array([(e - a) / b for e in LINES])).mean(axis=1)
    q, p = b / gains, np.full(len(ids), a)
    win = np.array([_integrate(y[i], (700 - p[i]) / q[i], (1450 - p[i]) / q[i]) for i in range(len(ids))])
    mn = []
    for i in range(len(ids)):
        r = _rebin(ref, p[i], q[i], a, b)
        lo, hi = int((780 - p[i]) / q[i]), int((890 - p[i]) / q[i])
        x = np.arange(lo, hi + 1, dtype=float)
        u = (x - x.mean()) / (hi - lo)
        X = np.column_stack([np.ones_like(u), u, u * u, r[lo:hi + 1]])
        mn.append(np.linalg.lstsq(X, y[i][lo:hi + 1].astype(float), rcond=None)[0][3])
    mn = np.array(mn)
    seen = np.median(mn) * ref_win > 0.01 * np.median(win)
    if seen:
        # the Mn-54 scale decays with its own half-life (312.20 d, DDEP): one amplitude fitted to the per-spectrum scales
        # by ordinary least squares smooths each spectrum's fit
        em = np.exp(-math.log(2) * t / 312.20)
        mn = float(np.sum(mn * em) / np.sum(em * em)) * em
    net = win - (mn * ref_win if seen else 0.0) - bg_win * live
    rate = net / live
    pd.DataFrame({"spectrum_id": ids, "co60_rate": rate}).to_csv(out / "rates_ml.csv", index=False)
    # one amplitude per source mounting (the source log's re-seats and moves), one decay constant for all
    days = sorted(e["date"] for e in meta.get("source_log", []) if "re-seat" in e["entry"] or "moved" in e["entry"])
    seg = np.array([sum(1 for d in days if s[:10] > d) for s in acq["start_time"]], dtype=int)
    nseg = int(seg.max()) + 1

    def nll(th):
        mu = np.exp(np.asarray(th)[seg] - th[-1] * t) * live
        return float(np.sum(mu - net * np.log(mu)))
    lam0 = -np.polyfit(t, np.log(rate), 1)[0]
    amp0 = [math.log(float(np.mean(rate[seg == j])) * math.exp(lam0 * float(np.mean(t[seg == j])))) for j in range(nseg)]
    r0 = minimize(nll, amp0 + [lam0], method="Nelder-Mead", options={"xatol": 1e-12, "fatol": 1e-9, "maxiter": 40000})
    lam = float(r0.x[-1])
    h = 1e-7

    def prof(lm):
        # the likelihood in lambda with every mounting's amplitude at its optimum for that lambda (closed form)
        amps = [math.log(float(np.sum(net[seg == j])) / float(np.sum(np.exp(-lm * t[seg == j]) * live[seg == j])))
                for j in range(nseg)]
        return nll(amps + [lm])
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
