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
    if info['gain_max'] - info['gain_min'] > 0.02:
        issues.append(f"the 1332.5 keV peak moves by {100 * (info['gain_max'] - info['gain_min']):.1f}% in gain with the detector temperature: the window was set per spectrum from the tracked peak, not in fixed channels")
print(json.dumps({'half_life_days': round(fit['half_life_days'], 2), 'half_life_uncertainty_days': round(fit['half_life_se_days'], 2),
                  'table': 'co60_rates.csv', 'issues_found': issues, 'analysis_usable': True,
                  'summary': f"{len(tab)} spectra; Co-60 half-life {fit['half_life_days']:.0f} +- {fit['half_life_se_days']:.0f} d"}))
"""

switched({"nuclear.L2.decay": _L2}, _cell)
