"""Nuclear track: repeated 2048-channel NaI(Tl) spectra of a Co-60 source, simulated from documented physics.

What is real, what is simulated
-------------------------------
No package ships measured NaI(Tl) spectra or counting series (worlds/README.md; SUBSTRATES.md, 2026-12-01: becquerel,
curie, riid, bayesdecay ship none), so every count in this track is simulated; no package file is read. The
reference constants are real, taken from the DDEP/LNHB recommended data (Laboratoire National Henri Becquerel,
"Table de Radionucleides"; not ICRP-107, the evaluation the radioactivedecay package carries, which differs in the
last digits):

  Co-60  T1/2 = 5.2711 (8) y = 1925.28 d; gamma lines 1173.228 keV (99.85%), 1332.492 keV (99.9826%)
  Mn-54  T1/2 = 312.19 d; gamma line 834.848 keV (99.976%)
  K-40   1460.82 keV (room background), Bi-214 609.3 keV (radon progeny in the background), Pb K x-rays ~75 keV

Detector response (Knoll, Radiation Detection and Measurement, 4th ed., chapters 10 and 17)
------------------------------------------------------------------------------------------
For each gamma line E0 a unit-area template on a 0.5 keV grid: a Gaussian full-energy peak with FWHM = 7% at
662 keV scaling as sqrt(E) (relative resolution ~ 1/sqrt(E)); a Compton continuum with the Klein-Nishina recoil
electron distribution up to the Compton edge Ec = E0 (1 - 1/(1 + 2 E0/511)), plus a small multiple-scattering fill
between Ec and E0, smeared with the resolution at Ec; a backscatter peak at E0 - Ec. Peak-to-total 0.25 (3x3 in.
NaI, 1.2-1.3 MeV). Full-energy-peak efficiency ~ 1/E between the two Co-60 lines. Channel k spans [k - 0.5, k + 0.5]
and channel position x maps to energy E = a + b x / g (a, b: the recorded calibration; g: the gain factor of the day);
the expected counts of a channel are the template's integral over its energy interval, drawn Poisson. A lower-level
discriminator removes everything below 30 keV.
Background (shielded detector): a falling continuum, Pb x-rays, Bi-214 609 keV and K-40 1460.8 keV, about 3 cps.
Dead time: non-paralysable, tau = 4 us per recorded pulse: live = real / (1 + n tau) for a true rate n above the
discriminator; the recorded counts are Poisson(rate x live time) (the live-time clock compensates exactly).
Gain drift: g = 1 + kappa (T - 22 C); NaI(Tl) light output together with the photomultiplier gain drifts by a few
tenths of a percent per degree C near room temperature (Knoll ch. 8; Casanovas et al. 2012 Radiat Meas 47:588).
Environment: temperature, pressure, relative humidity and a room background monitor per spectrum; pressure and
humidity do not act on a sealed NaI(Tl) detector.

L1 `l1_series`: 36-48 daily 600 s spectra with acquisition metadata (start time, real and live time, dead time,
detector, high voltage, calibration), environment and the acquisition software's summary of net peak areas.
Edits: duplicate_spectra (a spectrum's channel contents copied into the next day's slot), missing_spectra (logged
acquisitions whose spectra are absent), clock_reset (a block of start times from an MCA clock reset to its epoch),
live_exceeds_real (live and real time swapped in the export), summary_mismatch (summary net counts that do not come
from the spectra), channel_shift (a block of spectra offset by some channels, calibration unchanged). Boundary:
`service` (a documented detector service: HV changed and the calibration re-recorded from a date on).
L2 `l2_series`: 274 daily spectra on a 0-3000 keV range with a 50 Hz pulser at 2900 keV in every spectrum and Co-60
true-coincidence summing at the source distance (co60_template); traps: a hot source with ~25% dead time
(`co60_total`), pulse pile-up with the rejector off (`tau_p_us`, `pileup_rejection`: S = exp(-n tau_p) of the pulses
recorded undistorted, the rest at the summed amplitude, unseen by the live-time clock), a Mn-54 source in the
counting position (`mn54_ratio`), an unconditioned room with seasonal temperature (`seasonal`, `kappa`), a source
moved closer (`move_to_cm`: the window rate steps by the solid angle and the summing change); a logged leak-test
re-seat (`remount_factor`) in the hot worlds. The per-spectrum truth is the spectrum's own drawn counts in the window
(survivors restored by S) less the expected background and Mn-54, per live second, so no curve drawn from a few
spectra and the tabulated half-life reproduces it; meta.json ships no half-life.
L3 `dossier`: the frozen 274-day series as daily net peak rates, regenerated with a changed effective Co-60 decay
constant (`factor`) on the same schedule, with the Mn-54 control source and the background unchanged.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd

from benchmark.suite.canonical import CanonicalWriter
from benchmark.suite.registry import recipe, substrate, writer
from worlds.nuclear import analysis as A

TRACK = "nuclear"
T_CO60 = 1925.28           # d, DDEP (5.2711 y)
T_MN54 = 312.19            # d, DDEP
CO60 = ((1173.228, 0.9985), (1332.492, 0.999826))
MN54 = ((834.848, 0.99976),)
K40, BI214, PBX = 1460.82, 609.31, 75.0
TAU = 4.0e-6               # s, non-paralysable dead time per pulse
LLD = 30.0                 # keV
NCH = 2048
DE = 0.5
GRID = np.arange(0.0, 3300.0 + DE, DE)       # template grid edges (keV)
MID = GRID[:-1] + DE / 2
T_CAL = 22.0
REAL_S = 600.0


def sigma(e):
    return A.fwhm_kev(e) / 2.3548


def _gauss(mu, s):
    z = (MID - mu) / s
    g = np.exp(-0.5 * z * z)
    return g / float(np.sum(g))


@functools.lru_cache(maxsize=None)
def line_template(e0: float, p2t: float = 0.25, bs: float = 0.04) -> np.ndarray:
    """Unit-peak-area response (counts per bin of 0.5 keV per full-energy count) of a NaI(Tl) detector to E0."""
    eps = e0 / 511.0
    ec = e0 * (1 - 1 / (1 + 2 * eps))
    s = np.clip(MID / e0, 0, None)
    kn = np.where(MID <= ec, 2 + s * s / (eps * eps * (1 - s) ** 2) + s / (1 - s) * (s - 2 / eps), 0.0)
    fill = np.where((MID > ec) & (MID < e0), 0.12 * kn[int(ec / DE) - 1], 0.0)
    comp = kn + fill
    k = _gauss(0.0, sigma(ec))
    half = int(5 * sigma(ec) / DE)
    kern = k[:half + 1]
    kern = np.concatenate([kern[::-1], kern[1:]])
    comp = np.convolve(comp, kern / float(np.sum(kern)), mode="same")
    comp = comp / float(np.sum(comp)) * (1 / p2t - 1 - bs)
    back = _gauss(e0 - ec, 1.6 * sigma(e0 - ec)) * bs
    return _gauss(e0, sigma(e0)) + comp + back


R_DET = 3.81               # cm, crystal radius (3x3 in.)
INTRINSIC = (0.80, 0.78)   # intrinsic total efficiency of 76 mm of NaI(Tl) on axis at 1173 / 1332 keV (1 - exp(-mu L))
DIST0 = 10.0               # cm, the holder's counting position
PULSER_HZ, PULSER_KEV = 50.0, 2900.0


def solid_fraction(d_cm: float) -> float:
    """Omega / 4 pi of the crystal's face for a point source on axis at d_cm."""
    return 0.5 * (1 - d_cm / math.sqrt(d_cm * d_cm + R_DET * R_DET))


def fold(r1: np.ndarray, r2: np.ndarray) -> np.ndarray:
    """Density of the summed energy of two independent deposits on the 0.5 keV grid (direct convolution)."""
    m = len(MID)
    s = np.convolve(r1, r2)[:m]             # s[k]: energy (k + 1) DE, the edge between bins k and k + 1
    out = 0.5 * s
    out[1:] += 0.5 * s[:m - 1]
    return out


@functools.lru_cache(maxsize=None)
def co60_template(dist_cm: float = DIST0) -> np.ndarray:
    """Co-60 deposited-energy density per decay at a source distance dist_cm, true-coincidence summing included.
    The 1173 and 1332 keV photons of one decay (cascade through the 1332 keV level of Ni-60) each interact with total
    efficiency T = Omega/4pi x intrinsic; a decay whose two photons both interact records ONE pulse at the summed
    energy (Debertin & Helmer 1988, ch. 5): T1 (1 - T2) r1 + T2 (1 - T1) r2 + T1 T2 (r1 * r2), r the single-photon
    response normalised to one interaction; angular correlation (W(0) ~ 1.17) neglected. At 10 cm T ~ 0.026 (a small
    2505.7 keV sum peak, full-energy peaks ~2.5% low); at 2.5 cm T ~ 0.18."""
    (e1, i1), (e2, i2) = CO60
    lt1, lt2 = line_template(e1), line_template(e2)
    r1, r2 = lt1 / float(np.sum(lt1)), lt2 / float(np.sum(lt2))
    g = solid_fraction(dist_cm)
    t1, t2 = i1 * g * INTRINSIC[0], i2 * g * INTRINSIC[1]
    return t1 * (1 - t2) * r1 + t2 * (1 - t1) * r2 + t1 * t2 * fold(r1, r2)


@functools.lru_cache(maxsize=None)
def pulser_template() -> np.ndarray:
    """A precision pulser's peak (electronic noise only: 0.3% FWHM), unit area."""
    return _gauss(PULSER_KEV, 0.003 * PULSER_KEV / 2.3548)


@functools.lru_cache(maxsize=None)
def background_template() -> np.ndarray:
    """Shielded-detector background, counts per second per bin (about 3 cps above 30 keV)."""
    cont = 0.004 * np.exp(-MID / 220.0) * DE + 0.00018 * DE * np.exp(-MID / 1500.0)
    return (cont + 0.10 * line_template(PBX, 0.9, 0.0) + 0.05 * line_template(BI214, 0.28)
            + 0.12 * line_template(K40, 0.22))


def _cdf(dens: np.ndarray) -> np.ndarray:
    d = np.where(MID < LLD, 0.0, dens)
    return np.concatenate([[0.0], np.cumsum(d)])


def expected(dens: np.ndarray, a: float, b: float, gain: float = 1.0, shift: float = 0.0) -> np.ndarray:
    """Expected counts per channel (per unit exposure) of a spectrum density at calibration a + b x / gain."""
    x = np.arange(NCH + 1) - 0.5 - shift
    e = a + b * x / gain
    c = np.interp(e, GRID, _cdf(dens))
    return np.clip(np.diff(c), 0.0, None)


def total_rate(dens: np.ndarray) -> float:
    return float(_cdf(dens)[-1])


def window_rate(dens: np.ndarray, e_lo: float, e_hi: float) -> float:
    c = _cdf(dens)
    return float(np.interp(e_hi, GRID, c) - np.interp(e_lo, GRID, c))


@dataclass
class Nuc:
    kind: str = ""
    ids: list = field(default_factory=list)
    start: list = field(default_factory=list)
    real: np.ndarray | None = None
    live: np.ndarray | None = None
    counts: np.ndarray | None = None
    cal: list = field(default_factory=list)        # (a, b) per spectrum
    hv: list = field(default_factory=list)
    env: pd.DataFrame | None = None
    meta: dict = field(default_factory=dict)
    truth: dict = field(default_factory=dict)
    drop: set = field(default_factory=set)
    summary_factor: dict = field(default_factory=dict)
    background: np.ndarray | None = None
    mn54_ref: np.ndarray | None = None
    dossier: dict | None = None


@substrate("co60_nai")
def co60_nai(seed: int = 0) -> dict:
    """The reference constants (real, DDEP/LNHB) the simulations use."""
    return {"T_co60_d": T_CO60, "T_mn54_d": T_MN54, "co60_lines": CO60, "mn54_line": MN54}


def _schedule(rng, n: int, start: datetime):
    days = [start + timedelta(days=i, seconds=int(rng.integers(0, 50))) for i in range(n)]
    return days


def _environment(rng, ids, t_days, temp) -> pd.DataFrame:
    n = len(ids)
    doy = np.asarray(t_days)
    press = 1009.0 + 4.0 * np.cos(2 * np.pi * doy / 365.0) + rng.normal(0, 2.5, n)
    hum = np.clip(48 + 10 * np.sin(2 * np.pi * doy / 365.0) + rng.normal(0, 4, n), 15, 90)
    bkg = 0.118 + rng.normal(0, 0.006, n)
    return pd.DataFrame({"spectrum_id": ids, "temperature_C": np.round(temp, 2), "pressure_hPa": np.round(press, 1),
                         "relative_humidity_pct": np.round(hum, 1), "room_background_uSv_h": np.round(bkg, 3)})


def _simulate(rng, n, start, co60_total, temp, kappa, cal, shift=None, mn54_ratio=0.0, t_offset=0.0, eff=None):
    """Counts, real and live times of n daily spectra (activity referenced to the first spectrum's start)."""
    tmpl = co60_template()
    per = total_rate(tmpl)
    scale = co60_total / per
    win = window_rate(tmpl, *A.WINDOW_KEV) * scale
    mn = line_template(MN54[0][0], 0.30) if mn54_ratio else None
    mn_scale = mn54_ratio * win
    bkg = background_template()
    t = np.array([(s - start).total_seconds() / 86400.0 + t_offset for s in _schedule_dummy(start, n)])
    counts = np.zeros((n, NCH), dtype=np.int64)
    live = np.zeros(n)
    net = np.zeros(n)
    for i in range(n):
        ti = i + t_offset
        dens = tmpl * scale * (1.0 if eff is None else eff[i]) * math.exp(-math.log(2) * ti / T_CO60) + bkg
        if mn is not None:
            dens = dens + mn * mn_scale * math.exp(-math.log(2) * ti / T_MN54)
        g = 1.0 + kappa * (temp[i] - T_CAL)
        a, b = cal[i]
        lt = REAL_S / (1.0 + total_rate(dens) * TAU)
        lam = expected(dens, a, b, g, 0.0 if shift is None else shift[i]) * lt
        counts[i] = rng.poisson(lam)
        live[i] = round(lt, 3)
        # the generative truth of spectrum i: its drawn counts in the energy window (at the day's true gain) less the
        # expected (noise-free) background and Mn-54 counts there, per second of live time. It carries the spectrum's
        # own Poisson draw, which no curve extrapolated from other spectra can know
        other = bkg if mn is None else bkg + mn * mn_scale * math.exp(-math.log(2) * ti / T_MN54)
        net[i] = (A.window_counts(counts[i], *A.WINDOW_KEV, a, b, g) - window_rate(other, *A.WINDOW_KEV) * lt) / live[i]
    return counts, live, t, net


def _simulate_l2(rng, n, co60_total, temp, kappa, a, b, mn54_ratio=0.0, eff=None, dist=None, tau_p=0.0,
                 pur=True):
    """L2 spectra: as _simulate, on the extended energy range, with a 50 Hz pulser at 2900 keV, true-coincidence
    summing at each spectrum's source distance and pulse pile-up. Pile-up (Knoll ch. 17; Debertin & Helmer ch. 4): a
    recorded pulse survives undistorted when no other pulse (true rate n above the discriminator, pulser included)
    arrives within the resolving time tau_p: S = exp(-n tau_p). With the pile-up rejector on (pur) the piled pulses are
    rejected and the live-time clock is extended over them (live = real / (1 + n tau) x S), so counts per live second
    are exact; with it off they are recorded at the summed energy (the self-convolution of the spectrum above the
    discriminator; pulses below it are taken not to pile) and the live-time clock does not see them, so counts per
    live second lose 1 - S in every peak and window. Returns counts, recorded live times and the per-spectrum truth."""
    dist = np.full(n, DIST0) if dist is None else np.asarray(dist, dtype=float)
    scale = co60_total / total_rate(co60_template(DIST0))
    mn = line_template(MN54[0][0], 0.30) if mn54_ratio else None
    mn_scale = mn54_ratio * window_rate(co60_template(DIST0), *A.WINDOW_KEV) * scale
    bkg = background_template()
    pul = pulser_template() * PULSER_HZ
    counts = np.zeros((n, NCH), dtype=np.int64)
    live = np.zeros(n)
    net = np.zeros(n)
    surv_frac = np.zeros(n)
    for i in range(n):
        decay = math.exp(-math.log(2) * i / T_CO60)
        co = co60_template(float(dist[i])) * scale * (1.0 if eff is None else float(eff[i])) * decay
        other = bkg if mn is None else bkg + mn * mn_scale * math.exp(-math.log(2) * i / T_MN54)
        dens = co + other
        hi = np.where(MID < LLD, 0.0, dens + pul)
        ntot = float(np.sum(hi))
        lt = REAL_S / (1.0 + ntot * TAU)
        sv = math.exp(-ntot * tau_p)
        g = 1.0 + kappa * (temp[i] - T_CAL)
        surv = rng.poisson(expected(dens * sv, a, b, g) * lt)
        c = surv + rng.poisson(expected(pul * sv, a, b, 1.0) * lt)   # the pulser's channel does not follow the gain
        if tau_p > 0 and not pur:
            c = c + rng.poisson(expected(fold(hi, hi) / ntot * (1 - sv), a, b, g) * lt)
        counts[i] = c
        live[i] = round(lt * sv if pur else lt, 3)
        # generative truth: the spectrum's own drawn survivors in the window (at the day's true gain), restored by the
        # survival fraction, less the expected background (and Mn-54), per second of true live time
        net[i] = (A.window_counts(surv, *A.WINDOW_KEV, a, b, g) / sv - window_rate(other, *A.WINDOW_KEV) * lt) / lt
        surv_frac[i] = sv
    return counts, live, net, surv_frac


def _schedule_dummy(start, n):
    return [start + timedelta(days=i) for i in range(n)]


def _cal0(rng):
    return round(float(rng.uniform(0.5, 2.5)), 3), round(float(rng.uniform(0.736, 0.746)), 5)


def _cal2(rng):
    """L2: the MCA set to 0-3000 keV (a 50 Hz pulser at 2900 keV and the 2505.7 keV Co-60 sum peak in range)."""
    return round(float(rng.uniform(0.5, 2.5)), 3), round(float(rng.uniform(1.46, 1.50)), 5)


# ---------------------------------------------------------------- L1

@recipe(TRACK, "l1_series")
def l1_series(sub, rng, n: int, co60_total: float) -> Nuc:
    start = datetime(2017, 1, 1, 8, 0, 0, tzinfo=timezone.utc) + timedelta(days=int(rng.integers(0, 700)))
    a, b = _cal0(rng)
    temp = 22.0 + rng.normal(0, 0.15, n)
    p = Nuc(kind="integrity")
    p.ids = [f"S{i + 1:03d}" for i in range(n)]
    p.start = _schedule(rng, n, start)
    p.cal = [(a, b)] * n
    p.hv = [710] * n
    p.meta["service_log"] = [
        {"date": (start - timedelta(days=int(rng.integers(20, 60)))).date().isoformat(),
         "entry": "quarterly check with a Cs-137 source: resolution 7.0% FWHM at 662 keV; no adjustment"},
        {"date": (start + timedelta(days=int(rng.integers(3, n - 3)))).date().isoformat(),
         "entry": "lead shield door re-seated after cleaning; no change to the detector or electronics"}]
    p.meta["_temp"] = temp
    p.env = _environment(rng, p.ids, np.arange(n, dtype=float), temp)
    p.meta["_co60_total"] = co60_total
    p.meta["_start"] = start
    p.truth["n_spectra"] = n
    return p


def _realise(p: Nuc, rng, shift=None):
    n = len(p.ids)
    counts, live, _, _ = _simulate(rng, n, p.meta["_start"], p.meta["_co60_total"], p.meta["_temp"], -0.004,
                                   p.cal, shift)
    p.counts, p.live, p.real = counts, live, np.full(n, REAL_S)


@recipe(TRACK, "service")
def service(p: Nuc, rng, at_low: float, at_high: float, factors: list) -> Nuc:
    n = len(p.ids)
    j = int(rng.integers(int(at_low * n), int(at_high * n) + 1))
    f = float(rng.choice(factors))
    a, b = p.cal[0]
    a2, b2 = round(a + float(rng.uniform(-0.8, 0.8)), 3), round(b * f, 5)
    # PMT gain ~ V^7: the gain change 1/f needs dV = 710 (f^(-1/7) - 1), +4.2..+5.2 V or -4.9..-8.7 V here; the
    # re-set voltage is rounded away from 710 (+5/+6 or -5/-7/-9 V, the new base's divider accounts for the rest)
    dv = 710.0 * (f ** (-1 / 7) - 1)
    hv2 = 710 + int(math.copysign(math.ceil(abs(dv)), dv))
    p.cal = [(a, b)] * j + [(a2, b2)] * (n - j)
    p.hv = [710] * j + [hv2] * (n - j)
    d = p.start[j].date() - timedelta(days=1)
    p.meta["service_log"][1] = {"date": d.isoformat(),
                                "entry": f"photomultiplier base (voltage divider) replaced; high voltage re-set to "
                                         f"{hv2} V; energy calibration re-done with Cs-137 and Co-60 (slope {b2} "
                                         f"keV/channel, offset {a2} keV), recorded in acquisitions.csv from the next "
                                         "acquisition on"}
    p.truth["service_index"] = j
    return p


@recipe(TRACK, "realise")
def realise(p: Nuc, rng) -> Nuc:
    _realise(p, rng)
    return p


@recipe(TRACK, "channel_shift")
def channel_shift(p: Nuc, rng, k_low: int, k_high: int, off_low: int, off_high: int) -> Nuc:
    n = len(p.ids)
    k = int(rng.integers(k_low, k_high + 1))
    j = int(rng.integers(2, n - k - 1))
    off = int(rng.integers(off_low, off_high + 1)) * int(rng.choice([-1, 1]))
    shift = np.zeros(n)
    shift[j:j + k] = off
    _realise(p, rng, shift)
    p.truth.update(shifted=p.ids[j:j + k], offset=off)
    return p


def _pick(rng, n, k_low, k_high, lo=1):
    k = int(rng.integers(k_low, k_high + 1))
    return sorted(int(x) for x in rng.choice(np.arange(lo, n - 1), k, replace=False))


@recipe(TRACK, "duplicate_spectra")
def duplicate_spectra(p: Nuc, rng, k_low: int, k_high: int) -> Nuc:
    n = len(p.ids)
    idx = []
    for i in _pick(rng, n // 2, k_low, k_high):
        idx.append(2 * i)                     # non-adjacent slots
    for i in idx:
        p.counts[i + 1] = p.counts[i]
    p.truth["duplicates"] = [p.ids[i + 1] for i in idx]
    return p


@recipe(TRACK, "missing_spectra")
def missing_spectra(p: Nuc, rng, k_low: int, k_high: int) -> Nuc:
    idx = _pick(rng, len(p.ids), k_low, k_high)
    p.drop = {p.ids[i] for i in idx}
    p.truth["missing"] = sorted(p.drop)
    return p


@recipe(TRACK, "clock_reset")
def clock_reset(p: Nuc, rng, k_low: int, k_high: int) -> Nuc:
    n = len(p.ids)
    k = int(rng.integers(k_low, k_high + 1))
    j = int(rng.integers(3, n - k - 2))
    epoch = datetime(2000, 1, 1, 0, 0, 0, tzinfo=timezone.utc)
    base = p.start[j - 1]
    for m in range(k):
        p.start[j + m] = epoch + (p.start[j + m] - base) - timedelta(hours=1)
    p.truth["reset"] = p.ids[j:j + k]
    return p


@recipe(TRACK, "live_exceeds_real")
def live_exceeds_real(p: Nuc, rng, k_low: int, k_high: int) -> Nuc:
    idx = _pick(rng, len(p.ids), k_low, k_high)
    for i in idx:
        p.live[i], p.real[i] = p.real[i], p.live[i]
    p.truth["swapped"] = [p.ids[i] for i in idx]
    return p


@recipe(TRACK, "summary_mismatch")
def summary_mismatch(p: Nuc, rng, k_low: int, k_high: int) -> Nuc:
    idx = _pick(rng, len(p.ids), k_low, k_high)
    for i in idx:
        f = float(rng.uniform(1.06, 1.2)) if rng.random() < 0.5 else float(rng.uniform(0.8, 0.94))
        p.summary_factor[p.ids[i]] = round(f, 4)
    p.truth["summary_edited"] = sorted(p.summary_factor)
    return p


def summary_rows(p: Nuc, roi: dict, nb: int) -> pd.DataFrame:
    rows = []
    for i, s in enumerate(p.ids):
        a, b = p.cal[i]
        r = {"spectrum_id": s}
        for key, col in (("1173", "net_counts_1173"), ("1332", "net_counts_1332")):
            lo = int(round(A.channel_of(roi[key][0], a, b)))
            hi = int(round(A.channel_of(roi[key][1], a, b)))
            r[col] = int(round(A.net_area(p.counts[i], lo, hi, nb) * p.summary_factor.get(s, 1.0)))
        rows.append(r)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- L2

@recipe(TRACK, "l2_series")
def l2_series(sub, rng, n: int, co60_total: float, mn54_ratio: float = 0.0, seasonal: bool = False,
              kappa: float = -0.004, t_mid: float = 26.0, t_amp: float = 7.0, phase: float = -45.0,
              remount_factor: float = 1.0, remount_at: float = 0.5, move_to_cm: float = 0.0, move_at: float = 0.5,
              tau_p_us: float = 0.0, pileup_rejection: bool = True, dist_cm: float = DIST0) -> Nuc:
    start = datetime(2016, 1, 1, 8, 0, 0, tzinfo=timezone.utc) + timedelta(days=int(rng.integers(0, 900)))
    a, b = _cal2(rng)
    t = np.arange(n, dtype=float)
    if seasonal:
        temp = t_mid - t_amp * np.cos(2 * np.pi * (t + phase) / 365.0) + rng.normal(0, 0.4, n)
    else:
        temp = 22.0 + rng.normal(0, 0.15, n)
    p = Nuc(kind="decay")
    p.ids = [f"D{i + 1:03d}" for i in range(n)]
    p.start = _schedule(rng, n, start)
    p.cal = [(a, b)] * n
    p.hv = [710] * n
    eff = None
    if remount_factor != 1.0:
        # a logged leak (wipe) test: the source taken out of its holder and re-seated before acquisition j; the holder
        # sits a millimetre or two closer to the detector, so the efficiency steps by remount_factor
        j = int(round(remount_at * n))
        eff = np.where(np.arange(n) < j, 1.0, remount_factor)
        day = (start + timedelta(days=j - 1)).date().isoformat()
        p.meta["source_log"] = [
            {"date": (start - timedelta(days=30)).date().isoformat(),
             "entry": "source mounted in the counting holder; leak (wipe) test passed"},
            {"date": day, "entry": "six-monthly leak (wipe) test: source taken out of the holder, wiped, re-seated in "
                                   "the holder after the last acquisition of the day; wipe below 185 Bq, passed"}]
        p.truth.update(remount_index=j, remount_factor=remount_factor)
    dist = np.full(n, float(dist_cm))
    p.meta["distance_cm"] = float(dist_cm)
    if move_to_cm:
        # the source moved to a closer holder position from acquisition j on, as the log records, to raise the count
        # rate: the window rate steps by the solid angle AND by the change of true-coincidence summing
        j = int(round(move_at * n))
        dist[j:] = move_to_cm
        day = (start + timedelta(days=j - 1)).date().isoformat()
        p.meta["source_log"] = [
            {"date": (start - timedelta(days=30)).date().isoformat(),
             "entry": f"source mounted in the counting holder at {dist_cm:g} cm from the detector face"},
            {"date": day, "entry": f"source moved to the holder's {move_to_cm:g} cm position (closer to the detector "
                                   "face, to raise the count rate) after the last acquisition of the day"}]
        p.truth.update(move_index=j, move_to_cm=move_to_cm,
                       summing_loss_1332_at_move=round(INTRINSIC[0] * solid_fraction(move_to_cm), 4))
    tau_p = tau_p_us * 1e-6
    counts, live, net, sv = _simulate_l2(rng, n, co60_total, temp, kappa, a, b, mn54_ratio, eff, dist, tau_p,
                                         pileup_rejection)
    p.meta["pileup_rejection"] = pileup_rejection
    p.counts, p.live, p.real = counts, live, np.full(n, REAL_S)
    bg = background_template()
    p.background = rng.poisson(expected(bg, a, b) * 86400.0)
    mnt = line_template(MN54[0][0], 0.30) * 400.0 + bg        # the independent Mn-54 source alone, 400 peak cps
    p.mn54_ref = rng.poisson(expected(mnt, a, b) * 7200.0)
    p.env = _environment(rng, p.ids, t + start.timetuple().tm_yday, temp)
    p.meta.update(calibration={"offset_keV": a, "slope_keV_per_ch": b})
    sc = co60_total / total_rate(co60_template(DIST0))
    p.truth["co60_rate"] = {s: round(float(net[i]), 4) for i, s in enumerate(p.ids)}
    p.truth["co60_rate_expected"] = {s: round(window_rate(co60_template(float(dist[i])), *A.WINDOW_KEV) * sc
                                              * (1.0 if eff is None else float(eff[i]))
                                              * math.exp(-math.log(2) * i / T_CO60), 4) for i, s in enumerate(p.ids)}
    p.truth.update(pileup_survival_first=round(float(sv[0]), 5), pileup_survival_last=round(float(sv[-1]), 5),
                   tau_p_us=tau_p_us)
    p.truth.update(half_life_days=T_CO60, dead_time_fraction_first=round(float(1 - live[0] / REAL_S), 4),
                   mn54_ratio=mn54_ratio, kappa=kappa if seasonal else 0.0)
    return p


# ---------------------------------------------------------------- L3 dossier

def dossier_series(factor_1173: float, factor_1332: float, n: int = 274, data_seed: int = 2731) -> pd.DataFrame:
    """Daily net full-energy-peak rates of the two Co-60 lines (one detector), the Mn-54 control source (a second
    detector) and the background, on a fixed schedule. The Co-60 lines decay with lambda x factor; every other
    column, and the schedule, come from their own random streams and are identical whatever the factors."""
    ss = np.random.SeedSequence(data_seed).spawn(5)
    r_sched, r_1173, r_1332, r_mn, r_env = (np.random.default_rng(s) for s in ss)
    start = datetime(2018, 2, 1, 8, 0, 0, tzinfo=timezone.utc)
    t = np.arange(n, dtype=float) + r_sched.integers(0, 50, n) / 86400.0
    live = np.round(REAL_S / (1 + 1400.0 * TAU * np.exp(-math.log(2) * t / T_CO60)), 3)
    lam = math.log(2) / T_CO60
    p1 = 165.0 * np.exp(-lam * factor_1173 * t)
    p2 = 165.0 * (CO60[1][1] / CO60[0][1]) * (CO60[0][0] / CO60[1][0]) * np.exp(-lam * factor_1332 * t)
    n1 = r_1173.poisson(p1 * live)
    n2 = r_1332.poisson(p2 * live)
    mn_live = 1800.0
    nm = r_mn.poisson(41.0 * np.exp(-math.log(2) * t / T_MN54) * mn_live)
    bkg = r_env.poisson(0.118 * 3600.0, n)
    temp = 22.0 + r_env.normal(0, 0.15, n)
    return pd.DataFrame({
        "day": np.round(t, 4), "date": [(start + timedelta(days=float(x))).date().isoformat() for x in t],
        "live_time_s": live, "net_counts_1173": n1, "net_counts_1332": n2,
        "rate_1173_cps": np.round(n1 / live, 4), "rate_1332_cps": np.round(n2 / live, 4),
        "mn54_net_counts": nm, "mn54_live_time_s": mn_live, "mn54_rate_cps": np.round(nm / mn_live, 4),
        "background_counts_1h": bkg, "temperature_C": np.round(temp, 2)})


DOSSIER_Q = {
    "real": ("Does the Co-60 count-rate series behave as expected for this source, and what half-life does it give?"),
    "native": ("The Co-60 atoms of this source were held fully ionised (bare 60Co27+ ions) at low temperature, as in "
               "a heavy-ion storage ring, for the whole series. Does the Co-60 decay rate differ from the tabulated "
               "neutral-atom value, and what explains what you find?"),
    "injected": ("The Co-60 atoms of this source were held fully ionised (bare 60Co27+ ions) at low temperature, as in "
                 "a heavy-ion storage ring, for the whole series. Does the Co-60 decay rate differ from the tabulated "
                 "neutral-atom value, and what explains what you find?"),
}


@recipe(TRACK, "dossier")
def dossier(sub, rng, kind: str, factor_1173: float = 1.0, factor_1332: float = 1.0) -> Nuc:
    t = dossier_series(factor_1173, factor_1332)
    cond = ("held as neutral atoms in a sealed capsule at room temperature" if kind == "real" else
            "held fully ionised (bare 60Co27+ ions) at low temperature, as in a heavy-ion storage ring, for the "
            "whole series; the Mn-54 control source and the background detector were not ionised and sat in the "
            "ordinary laboratory")
    md = "\n".join([
        "# Evidence dossier: a 274-day Co-60 counting series",
        "",
        "## Data",
        "A Co-60 source counted once a day for 274 days with a 3x3 in. NaI(Tl) detector (600 s real time per",
        "acquisition, live-time corrected), gain-stabilised, in a temperature-controlled room. The source was " + cond + ".",
        "For each acquisition the net full-energy-peak counts of the two Co-60 gamma lines (1173.2 and 1332.5 keV,",
        "emitted in cascade by the same Ni-60 level scheme: every Co-60 beta decay to the 2505.7 keV level of",
        "Ni-60 gives both photons) were extracted. An independent Mn-54 control source (834.8 keV line) was counted",
        "the same days on a second, identical detector (1800 s live), and a shielded background monitor counted 1 h.",
        "Tabulated half-lives (DDEP/LNHB, neutral atoms): Co-60 1925.28 d (5.2711 y); Mn-54 312.19 d.",
        "All counts in this dossier are simulated: the series, its counting statistics and the room are generated from",
        "documented Co-60 and Mn-54 decay data and detector physics (no package ships a measured counting series).",
        "",
        "## Tables",
        "- daily.csv: day (days since the first acquisition), date, live_time_s, net_counts_1173, net_counts_1332,",
        "  rate_1173_cps, rate_1332_cps (net counts / live time), mn54_net_counts, mn54_live_time_s, mn54_rate_cps,",
        "  background_counts_1h, temperature_C",
        "",
        "## Question",
        DOSSIER_Q[kind],
    ])
    p = Nuc(kind="dossier")
    p.dossier = {"dossier.md": md, "daily.csv": t}
    return p


# ---------------------------------------------------------------- writer

ROI = {"1173": [1100.0, 1245.0], "1332": [1260.0, 1410.0]}
NB = 3
DETECTOR = "NaI(Tl) 76 x 76 mm (3x3 in.) scintillator with photomultiplier, 2048-channel MCA, in a 10 cm lead shield"


def _spectra_table(ids, counts) -> pd.DataFrame:
    t = pd.DataFrame(counts, columns=[str(c) for c in range(NCH)])
    t.insert(0, "spectrum_id", ids)
    return t


def _iso(d: datetime) -> str:
    return d.strftime("%Y-%m-%dT%H:%M:%SZ")


@writer(TRACK)
def write(p: Nuc, w: CanonicalWriter) -> None:
    if p.dossier is not None:
        w.files(p.dossier)
        return
    if p.truth:
        w.truth(**p.truth)
    files = {"meta.json": "this description"}
    meta = {"data": "simulated: every count, time and record was generated by a simulation of a NaI(Tl) counting "
                    "series (documented detector response, Poisson counting, dead time), not measured",
            "detector": DETECTOR, "source": f"Co-60 sealed point source on a fixed holder "
                                            f"{p.meta.get('distance_cm', DIST0):g} cm from the detector face",
            "acquisition": "one spectrum a day, started by the scheduler at about 08:00 UTC, preset real time 600 s",
            "live_time_clock": "the MCA's live-time clock: live_time_s is the time the MCA was able to accept pulses; "
                               "the dead-time fraction is (real - live) / real",
            "reference_data": {"Co-60": {"lines_keV": [1173.228, 1332.492]}, "Mn-54": {"lines_keV": [834.848]},
                               "source": "DDEP/LNHB recommended gamma energies"}}
    n = len(p.ids)
    if p.kind == "integrity":
        summ = summary_rows(p, ROI, NB)
        keep = [i for i, s in enumerate(p.ids) if s not in p.drop]
        w.bytes("spectra.csv.gz", _spectra_table([p.ids[i] for i in keep], p.counts[keep]).to_csv(index=False).encode())
        acq = pd.DataFrame({
            "spectrum_id": p.ids, "start_time": [_iso(s) for s in p.start], "real_time_s": np.round(p.real, 3),
            "live_time_s": np.round(p.live, 3),
            "dead_time_pct": np.round(100 * (np.maximum(p.real, p.live) - np.minimum(p.real, p.live))
                                      / np.maximum(p.real, p.live), 3),
            "detector": "NaI-3x3-0417", "high_voltage_V": p.hv,
            "cal_offset_keV": [c[0] for c in p.cal], "cal_slope_keV_per_ch": [c[1] for c in p.cal]})
        w.table("acquisitions.csv", acq, float_format="%.6g")
        w.table("environment.csv", p.env, float_format="%.6g")
        w.table("summary.csv", summ)
        files.update({
            "spectra.csv.gz": "one row per spectrum: spectrum_id, then the counts of channels 0..2047",
            "acquisitions.csv": "acquisition log, one row per acquisition: spectrum_id, start_time (UTC), real_time_s, "
                                "live_time_s, dead_time_pct, detector, high_voltage_V, cal_offset_keV, "
                                "cal_slope_keV_per_ch (energy = offset + slope x channel)",
            "environment.csv": "room conditions at each acquisition: temperature_C, pressure_hPa, "
                               "relative_humidity_pct, room_background_uSv_h (an independent area monitor)",
            "summary.csv": "the acquisition software's summary: net_counts_1173 and net_counts_1332, net peak areas of "
                           "the two Co-60 lines (summary_method)"})
        meta["summary_method"] = {"roi_keV": ROI, "background_channels_each_side": NB,
                                  "definition": "ROI channels = round((E - cal_offset_keV) / cal_slope_keV_per_ch) for "
                                                "the ROI's energies, with each spectrum's own calibration; net = sum "
                                                "of the ROI channels minus (mean of the 3 channels below the ROI + mean "
                                                "of the 3 channels above it) / 2 x the number of ROI channels"}
        meta["service_log"] = p.meta["service_log"]
        meta["temperature_control"] = "air-conditioned counting room, 22 +- 0.5 C"
    else:
        w.bytes("spectra.csv.gz", _spectra_table(p.ids, p.counts).to_csv(index=False).encode())
        acq = pd.DataFrame({"spectrum_id": p.ids, "start_time": [_iso(s) for s in p.start],
                            "real_time_s": np.round(p.real, 3), "live_time_s": np.round(p.live, 3)})
        w.table("acquisitions.csv", acq, float_format="%.6g")
        w.table("environment.csv", p.env, float_format="%.6g")
        w.table("background.csv", pd.DataFrame({"channel": np.arange(NCH), "counts": p.background}))
        w.table("mn54_reference.csv", pd.DataFrame({"channel": np.arange(NCH), "counts": p.mn54_ref}))
        files.update({
            "spectra.csv.gz": "one row per daily spectrum: spectrum_id, then the counts of channels 0..2047",
            "acquisitions.csv": "acquisition log: spectrum_id, start_time (UTC), real_time_s, live_time_s",
            "environment.csv": "conditions at each acquisition: temperature_C (at the detector), pressure_hPa, "
                               "relative_humidity_pct, room_background_uSv_h",
            "background.csv": "a background spectrum without the source (channel, counts), live time in meta.json",
            "mn54_reference.csv": "a spectrum of the laboratory's independent Mn-54 source counted alone on the same "
                                  "detector at 22 C (channel, counts; background included), live time in meta.json"})
        meta["calibration"] = dict(p.meta["calibration"], note="energy = offset + slope x channel, established at "
                                                               "commissioning at 22 C")
        if "source_log" in p.meta:
            meta["source_log"] = p.meta["source_log"]
        meta["pulser"] = {"rate_Hz": PULSER_HZ, "equivalent_energy_keV": PULSER_KEV,
                          "note": "a precision pulser feeds the preamplifier's test input during every acquisition; "
                                  "its pulses pass the same shaping, pile-up and dead time as the detector's"}
        meta["pileup_rejection"] = ("on: piled-up pulses are rejected and the live-time clock is extended over them"
                                    if p.meta.get("pileup_rejection", True) else
                                    "off: the rejector was disabled for this series; the live-time clock counts only "
                                    "the analyser's conversion dead time")
        meta["source_distance_cm"] = p.meta.get("distance_cm", DIST0)
        meta["counting_window_keV"] = list(A.WINDOW_KEV)
        meta["counting_window_note"] = ("the laboratory's integral Co-60 counting window: both full-energy peaks "
                                        "and the upper Compton continuum")
        meta["background"] = {"live_time_s": 86400.0, "note": "same detector and shield, source removed"}
        meta["mn54_reference"] = {"live_time_s": 7200.0, "note": "independent Mn-54 source (834.848 keV) alone, "
                                                                 "counted at commissioning"}
    meta["files"] = dict(sorted(files.items()))
    w.json("meta.json", meta)
