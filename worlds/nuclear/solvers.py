"""Reference solvers of the nuclear track (gold side); every golden is computed from the world's public files.

nuclear.L1.integrity  worlds.nuclear.analysis.detect: logged acquisitions without a spectrum, byte-identical spectra,
                      start times out of order (longest increasing run kept), live time above real time, 1332.5 keV
                      peak positions against each spectrum's own calibration, the summary's net areas recomputed
                      with the documented method.
nuclear.L2.decay      Co-60 rate in the laboratory's 700-1450 keV window per second of live time: gain tracked per
                      spectrum from the 1332.5 keV centroid, background spectrum subtracted, the independent Mn-54
                      source's reference spectrum scaled out when its 834.8 keV peak is present; weighted fit of
                      ln(rate) against time -> half-life and its standard error. The trap's answer (fixed channels,
                      counts / real time) is kept beside it for zero_if. With the pile-up rejector off the pulser
                      peak gives the undistorted fraction S = exp(-n tau_p) (one tau_p fitted to all spectra) and the
                      piled pulses inside the window (the fold of the pile-up-free shape) are removed; a logged
                      re-seat or move of the source starts a new amplitude (common decay constant). A moved source's
                      half-life by the solid-angle ratio alone (summing ignored) is kept for zero_if.
nuclear.L3.dossier    half-lives of the two Co-60 lines and of the Mn-54 control, the 1332/1173 ratio's trend.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.suite.registry import solver
from worlds.nuclear import analysis as A


@solver("nuclear.L1.integrity", version="1")
def l1_integrity(world_dir: Path, world) -> dict:
    return A.detect(world_dir)


def _geometric_half_life(world_dir: Path, tab) -> float | None:
    """The half-life of a route that puts a moved source back on one scale with the point-source solid-angle ratio
    (no coincidence summing, as a single-line efficiency transfer would): the rates after the move divided by
    Omega(d_new) / Omega(d_old), one exponential fitted. None where the source was not moved."""
    import math
    import re

    meta = A.read_meta(world_dir)
    moved = [e for e in meta.get("source_log", []) if "moved to" in e["entry"]]
    if not moved:
        return None
    d_new = float(re.search(r"([0-9.]+) cm position", moved[0]["entry"]).group(1))
    d_old = float(meta["source_distance_cm"])
    om = lambda d: 0.5 * (1 - d / math.sqrt(d * d + 3.81 ** 2))  # noqa: E731 - a 3x3 in. crystal's face
    acq = pd.read_csv(Path(world_dir) / "acquisitions.csv", dtype={"spectrum_id": str}).set_index("spectrum_id")
    seg = A.remount_segments(meta, acq.loc[tab["spectrum_id"], "start_time"].tolist())
    live = acq.loc[tab["spectrum_id"], "live_time_s"].to_numpy(dtype=float)
    r = tab["co60_rate"].to_numpy(dtype=float) / np.where(seg > 0, om(d_new) / om(d_old), 1.0)
    return round(A.fit_decay(tab["day"].to_numpy(dtype=float), r * live, live)["half_life_days"], 2)


@solver("nuclear.L2.decay", version="4")
def l2_decay(world_dir: Path, world) -> dict:
    tab, fit, info = A.co60_table(world_dir)
    ntab, nfit, _ = A.co60_table(world_dir, naive=True)
    geo = _geometric_half_life(world_dir, tab)
    rate = dict(zip(tab["spectrum_id"], tab["co60_rate"]))
    trap = dict(zip(ntab["spectrum_id"], ntab["co60_rate"]))
    dev = np.abs(ntab["co60_rate"].to_numpy() / tab["co60_rate"].to_numpy() - 1)
    return {"half_life_days": round(fit["half_life_days"], 2),
            "half_life_uncertainty_days": round(fit["half_life_se_days"], 2),
            # the middle of the band [0.5, 8.5] x the statistical standard error, for a check that also accepts a
            # systematic (live-time clock) added at high dead time: rel_tol 8/9 around 4.5 x se spans that band
            "half_life_uncertainty_band_mid_days": round(4.5 * round(fit["half_life_se_days"], 2), 3),
            "decay_constant_per_day": round(fit["decay_constant_per_day"], 9),
            "co60_rate": {k: round(float(v), 4) for k, v in rate.items()},
            "first_rate": round(float(tab["co60_rate"].iloc[0]), 3), "last_rate": round(float(tab["co60_rate"].iloc[-1]), 3),
            "trap_half_life_days": round(nfit["half_life_days"], 2),
            "trap_rate": {k: round(float(v), 4) for k, v in trap.items()},
            "trap_max_deviation": round(float(dev.max()), 4),
            "trap_share_off_2pct": round(float((dev > 0.02).mean()), 4),
            "n_spectra": info["n_spectra"], "gain_min": info["gain_min"], "gain_max": info["gain_max"],
            "gain_range_pct": round(100 * (info["gain_max"] - info["gain_min"]), 2),
            "mn54_fraction_first": info.get("mn54_fraction_first", 0.0),
            "dead_time_fraction_first": info["dead_time_fraction_first"],
            "geometric_half_life_days": geo if geo is not None else 0.0,
            "pileup_tau_us": info.get("pileup_tau_us", 0.0), "pileup_loss_first": info.get("pileup_loss_first", 0.0),
            "remount_steps": info.get("remount_steps", []), "remount_first": info.get("remount_first", []),
            **({"co60_rate_pulser_each": {k: round(float(v), 4) for k, v in zip(tab["spectrum_id"], info["rate_pulser_each"])}}
               if "rate_pulser_each" in info else {})}


def _hl(t, n, live):
    f = A.fit_decay(t, n, live)
    return round(f["half_life_days"], 1), round(f["half_life_se_days"], 1)


@solver("nuclear.L3.dossier", version="1")
def l3_dossier(world_dir: Path, world) -> dict:
    t = pd.read_csv(Path(world_dir) / "daily.csv")
    h1, s1 = _hl(t["day"], t["net_counts_1173"], t["live_time_s"])
    h2, s2 = _hl(t["day"], t["net_counts_1332"], t["live_time_s"])
    hm, sm = _hl(t["day"], t["mn54_net_counts"], t["mn54_live_time_s"])
    r = np.log(t["net_counts_1332"].to_numpy(float) / t["net_counts_1173"].to_numpy(float))
    x = t["day"].to_numpy(float)
    slope = float(np.sum((x - x.mean()) * (r - r.mean())) / np.sum((x - x.mean()) ** 2))
    return {"half_life_1173_days": h1, "half_life_1173_se": s1, "half_life_1332_days": h2, "half_life_1332_se": s2,
            "half_life_mn54_days": hm, "half_life_mn54_se": sm,
            "ratio_1332_1173_first_30d": round(float(np.exp(r[:30].mean())), 4),
            "ratio_1332_1173_last_30d": round(float(np.exp(r[-30:].mean())), 4),
            "log_ratio_slope_per_day": round(slope, 8), "n_days": int(len(t))}


from worlds.nuclear import scripted  # noqa: E402,F401
