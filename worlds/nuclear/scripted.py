"""Scripted agents of the nuclear track (gold side). The oracle inlines worlds/nuclear/analysis.py as source text and
does what each world's careful_scientist says; the naive agent trusts the files and the defaults (L1: accepts the
series; L2: gross counts in the window's channels at the nominal calibration, divided by real time)."""
from __future__ import annotations

import inspect

from benchmark.suite.registry import naive, oracle
from worlds.nuclear import analysis as A


def _cell() -> str:
    return inspect.getsource(A) + "\nprint('analysis loaded')\n"


_L1_ORACLE = r"""
v = detect('.')
f = v['findings']
print('findings', f, 'spectra', v['n_spectra'], 'acquisitions', v['n_acquisitions'])


def write_lines(name, items):
    Path(name).write_text(''.join(f'{x}\n' for x in items))
    return name


issues = []
if 'missing_spectra' in f:
    issues.append({'category': 'spectra absent from the data', 'severity': 'warning', 'where': 'spectra.csv.gz vs acquisitions.csv',
                   'value': v['n_missing'], 'description': f"{v['n_missing']} logged acquisitions have no spectrum in spectra.csv.gz (missing data)",
                   'action': 'listed them; the series has gaps there', 'output': write_lines('missing_spectra.txt', v['missing_spectra'])})
if 'duplicate_spectra' in f:
    issues.append({'category': 'duplicated spectra', 'severity': 'warning', 'where': 'spectra.csv.gz',
                   'value': v['n_duplicated'], 'description': f"{v['n_duplicated']} spectra have channel contents identical to another spectrum: a copy, not a new acquisition (Poisson counts never repeat exactly)",
                   'action': 'excluded the copies; listed them', 'output': write_lines('duplicated_spectra.txt', v['duplicated_spectra'])})
if 'clock_reset' in f:
    issues.append({'category': 'timestamps out of order (clock reset)', 'severity': 'warning', 'where': 'acquisitions.csv start_time',
                   'value': v['n_bad_timestamps'], 'description': f"{v['n_bad_timestamps']} start times jump backwards out of the daily sequence: the MCA clock was reset",
                   'action': 'listed them; their times must be restored from the daily schedule before any decay fit', 'output': write_lines('bad_timestamps.txt', v['bad_timestamps'])})
if 'live_exceeds_real' in f:
    issues.append({'category': 'live time exceeds real time', 'severity': 'warning', 'where': 'acquisitions.csv live_time_s',
                   'value': v['n_live_exceeds_real'], 'description': f"{v['n_live_exceeds_real']} acquisitions have live_time_s > real_time_s, which is impossible: the two fields are swapped",
                   'action': 'listed them; swap back before live-time correction', 'output': write_lines('live_gt_real.txt', v['live_exceeds_real'])})
if 'channel_shift' in f:
    issues.append({'category': 'peak channel offset', 'severity': 'warning', 'where': 'spectra.csv.gz',
                   'value': len(v['shifted_spectra']), 'description': f"in {v['n_shifted']} spectra the 1332.5 keV peak sits {v['channel_offset']:+.0f} channels from where their recorded calibration puts it (offset not in the calibration record)",
                   'action': 'listed them; re-align before any fixed-channel analysis', 'output': write_lines('shifted_spectra.txt', v['shifted_spectra'])})
if 'summary_mismatch' in f:
    issues.append({'category': 'summary net counts disagree with the spectra', 'severity': 'warning', 'where': 'summary.csv',
                   'value': v['n_summary_mismatch'], 'description': f"recomputing net_counts_1173/1332 from the spectra with the documented method disagrees for {v['n_summary_mismatch']} spectra",
                   'action': 'listed them; use areas recomputed from the spectra', 'output': write_lines('summary_mismatch.txt', v['summary_mismatch'])})
report = {'assessment': 'usable_with_caveats' if issues else 'usable', 'issues': issues,
          'summary': ('Problems: ' + ', '.join(i['category'] for i in issues)) if issues else
                     f"All checks pass: {v['n_spectra']} spectra, one per logged acquisition, times in order, live <= real, peaks where each spectrum's calibration puts them ({v['n_calibrations']} calibration(s) recorded), summary reproduced."}
print(json.dumps(report))
"""

_L1_NAIVE = r"""
import json
import pandas as pd
a = pd.read_csv('acquisitions.csv')
print(a.describe())
print(json.dumps({'assessment': 'usable', 'issues': [], 'summary': f'{len(a)} acquisitions loaded; looks fine.'}))
"""


@oracle("nuclear.L1.integrity", version="1")
def l1_oracle(ref) -> list[str]:
    return [_cell(), _L1_ORACLE]


@naive("nuclear.L1.integrity", version="1")
def l1_naive(ref) -> list[str]:
    return [_L1_NAIVE]


_L2 = r"""
tab, fit, info = co60_table('.', naive=NAIVE)
tab[['spectrum_id', 'co60_rate']].to_csv('co60_rates.csv', index=False)
issues = []
if not NAIVE:
    if info['dead_time_fraction_first'] > 0.05:
        issues.append(f"dead time {info['dead_time_fraction_first']:.0%} at the start, falling as the source decays: counts divided by live time, not real time (a real-time rate understates the early rates and lengthens the half-life)")
    if info.get('mn54_fraction_first', 0) > 0:
        issues.append(f"a Mn-54 834.8 keV peak sits inside the counting window ({info['mn54_fraction_first']:.0%} of the window counts at the start, decaying with 312 d): subtracted with the reference Mn-54 spectrum")
    for sid, f in zip(info.get('remount_first', []), info.get('remount_steps', [])[1:]):
        issues.append(f"the source was re-seated after the logged leak test (from {sid} on): the efficiency steps by {100 * (f - 1):+.1f}%, so the decay was fitted with one amplitude per mounting and a common decay constant")
    if info.get('pileup_loss_first', 0) > 0:
        issues.append(f"pulse pile-up with the rejector off: the pulser peak shows {info['pileup_loss_first']:.1%} of the pulses piled at the start (resolving time {info['pileup_tau_us']:.2f} us), a loss the analyser's clock misses; rates restored with the pulser's undistorted fraction and the piled pulses inside the window removed")
    if len(info.get('remount_steps', [])) > 1 and any('moved' in e['entry'] for e in read_meta('.').get('source_log', [])):
        issues.append("the source was moved closer to the detector (source_log): the rate steps by more than the solid angle because true-coincidence summing of the 1173/1332 keV cascade grows at close geometry (the 2505.7 keV sum peak grows); fitted with one free amplitude per geometry rather than an inverse-square or single-line efficiency transfer")
    if info['gain_max'] - info['gain_min'] > 0.02:
        issues.append(f"the 1332.5 keV peak moves by {100 * (info['gain_max'] - info['gain_min']):.1f}% in gain with the detector temperature: the window was set per spectrum from the tracked peak, not in fixed channels")
print(json.dumps({'half_life_days': round(fit['half_life_days'], 2), 'half_life_uncertainty_days': round(fit['half_life_se_days'], 2),
                  'table': 'co60_rates.csv', 'issues_found': issues, 'analysis_usable': True,
                  'summary': f"{len(tab)} spectra; Co-60 half-life {fit['half_life_days']:.0f} +- {fit['half_life_se_days']:.0f} d"}))
"""


def _mk(is_naive: bool):
    def cells(ref) -> list[str]:
        return [_cell(), f"NAIVE = {is_naive!r}\n" + _L2]
    return cells


oracle("nuclear.L2.decay", version="1")(_mk(False))
naive("nuclear.L2.decay", version="1")(_mk(True))
