"""Scripted agents of the nuclear track (gold side). The oracle inlines worlds/nuclear/analysis.py as source text and
does what each world's careful_scientist says; the naive agent trusts the files and the defaults (L1: accepts the
series; L2: gross counts in the window's channels at the nominal calibration, divided by real time). The L1 oracle's
issue per defect is data, in scripted.yaml; worlds/scaffold.py registers the agents and writes that cell."""
from __future__ import annotations

from functools import partial

from worlds.nuclear import analysis as A
from worlds.scaffold import accepting_cell, l1_oracle_cell, module_cell, scripted, switched

_cell = partial(module_cell, A)


scripted("nuclear.L1.integrity", [_cell, l1_oracle_cell(__file__)], [accepting_cell('acquisitions.csv', 'acquisitions', var='a')])


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

switched({"nuclear.L2.decay": _L2}, _cell)
