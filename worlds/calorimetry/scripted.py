"""Scripted agents of the calorimetry track (gold side). The oracle inlines worlds/calorimetry/analysis.py as source
text and does what each world's careful_scientist says; the naive agent trusts the files and the lab software's
defaults (L1: accepts the series; L2: the software's enthalpy table, interpolated as it comes)."""
from __future__ import annotations

import inspect

from benchmark.suite.registry import naive, oracle
from worlds.calorimetry import analysis as A


def _cell() -> str:
    return inspect.getsource(A) + "\nprint('analysis loaded')\n"


_L1_ORACLE = r"""
v = detect('.')
f = v['findings']
print('findings', f, 'rows', v['n_rows'])


def write_lines(name, items):
    Path(name).write_text(''.join(f'{x}\n' for x in items))
    return name


issues = []
if 'duplicate_points' in f:
    issues.append({'category': 'duplicated points', 'severity': 'warning', 'where': 'cp_series.csv point_id',
                   'value': v['n_duplicate_rows'], 'description': f"{v['n_duplicate_rows']} heat pulses are written twice (same point_id, same values)",
                   'action': 'kept one copy of each; listed the duplicated points', 'output': write_lines('duplicated_points.txt', v['duplicated_points'])})
if 'missing_points' in f:
    issues.append({'category': 'missing points', 'severity': 'warning', 'where': 'cp_series.csv point numbering',
                   'value': v['n_missing'], 'description': f"{v['n_missing']} pulses are absent: gaps in the point numbering inside a run, and the temperature steps there are twice the neighbouring ones",
                   'action': 'listed the absent pulses; series kept, gaps noted', 'output': write_lines('missing_points.txt', v['missing_points'])})
if 'gram_units' in f:
    issues.append({'category': 'Cp per gram in one run', 'severity': 'blocking', 'where': f"cp_series.csv run {v['gram_run']}",
                   'value': v['n_gram_rows'], 'description': f"in run {v['gram_run']} energy/(n dT) is 63.5 times the Cp column (the molar mass): that run's Cp is a specific heat capacity in J/(g K), not J/(mol K)",
                   'action': 'multiplied by the molar mass; listed the points', 'output': write_lines('per_gram_points.txt', v['gram_points'])})
if 'misaligned_cp' in f:
    issues.append({'category': 'Cp column misaligned', 'severity': 'blocking', 'where': f"cp_series.csv run {v['misaligned_run']}",
                   'value': v['n_misaligned_rows'], 'description': f"in run {v['misaligned_run']} the Cp column disagrees with energy/(n dT) on {v['n_misaligned_rows']} rows and matches the next row's value: Cp is shifted by one row against T",
                   'action': 'recomputed Cp = energy/(n dT) for those rows; listed them', 'output': write_lines('misaligned_points.txt', v['misaligned_points'])})
if 'cal_units' in f:
    issues.append({'category': 'run recorded in calories', 'severity': 'blocking', 'where': f"cp_series.csv run {v['cal_run']}",
                   'value': v['n_cal_rows'], 'description': f"Cp of run {v['cal_run']} is 4.18 times lower than the adjoining runs where they meet (ratios {v['run_boundary_cp_ratios']}): energy and Cp in cal, not J",
                   'action': 'multiplied energy and Cp by 4.184; listed the points', 'output': write_lines('cal_points.txt', v['cal_points'])})
if 'uncertainty_k2' in f:
    issues.append({'category': 'expanded uncertainty (k=2) in one run', 'severity': 'warning', 'where': f"cp_series.csv run {v['k2_run']} u_Cp",
                   'value': v['n_k2_rows'], 'description': f"u_Cp/Cp of run {v['k2_run']} is twice that of the adjoining runs where they meet (ratios {v['run_boundary_u_ratios']}): coverage factor k = 2 written as a standard uncertainty",
                   'action': 'divided that run by 2; listed the points', 'output': write_lines('k2_points.txt', v['k2_points'])})
report = {'assessment': 'usable_with_caveats' if issues else 'usable', 'issues': issues,
          'summary': ('Problems: ' + ', '.join(i['category'] for i in issues)) if issues else
                     f"All checks pass: {v['n_rows']} pulses, numbering contiguous, Cp = energy/(n dT) on every row, runs continuous in Cp and u/Cp."}
print(json.dumps(report))
"""

_L1_NAIVE = r"""
import json
import pandas as pd
t = pd.read_csv('cp_series.csv')
print(t.describe())
print(json.dumps({'assessment': 'usable', 'issues': [], 'summary': f'{len(t)} points loaded; looks fine.'}))
"""


@oracle("calorimetry.L1.integrity", version="1")
def l1_oracle(ref) -> list[str]:
    return [_cell(), _L1_ORACLE]


@naive("calorimetry.L1.integrity", version="1")
def l1_naive(ref) -> list[str]:
    return [_L1_NAIVE]


_L2 = r"""
L = load_l2('.')
r = solve(L, naive=NAIVE)
pd.DataFrame({'T_K': [int(k) for k in r['balance']], 'balance_J': list(r['balance'].values())}).to_csv('balance.csv', index=False)
issues = []
if not NAIVE:
    g = diagnostics(L)
    if abs(g['table_H_block_step_at_298']) > 1.0:
        issues.append(f"the software's H_block jumps by {-g['table_H_block_step_at_298']:+.2f} J/g between 298 and 299 K: enthalpy reference changes there (H - H(0 K) less the handbook copper H(298.15) - H(0) below, H - H(298.15 K) above); enthalpies recomputed from the pulses on one reference")
    if abs(g['cp_drift_bias']) > 0.003:
        issues.append(f"heat-leak drift of {g['drift_at_300K_mK_per_min']:.2f} mK/min near 300 K is not corrected in the software table (Cp biased {g['cp_drift_bias']:+.1%}); temperature rises drift-corrected to the mid-time of heating")
    if abs(g['energy_scale'] - 1.0) > 0.005:
        issues.append(f"the Cu standard's apparent Cp is {g['energy_scale']:.4f} times its reference: the heater energy scale is off; specimen energies calibrated against the standard")
    if L['T_hep'] < L['ttp'] < r['Tf_K'] and g['table_heptane_jump_at_ttp'] < 0.5 * L['hfus']:
        issues.append(f"heptane melts at {L['ttp']:.2f} K during the experiment but the software interpolates H through the melting without the enthalpy of fusion ({L['hfus']:.0f} J/mol); enthalpy integrated by phase")
print(json.dumps({'Tf_K': r['Tf_K'], 'Q_heptane_J': r['Q_J'], 'table': 'balance.csv', 'issues_found': issues,
                  'analysis_usable': True, 'summary': f"equilibrium at {r['Tf_K']:.2f} K; heptane takes up {r['Q_J']:.0f} J"}))
"""


def _mk(is_naive: bool):
    def cells(ref) -> list[str]:
        return [_cell(), f"NAIVE = {is_naive!r}\n" + _L2]
    return cells


oracle("calorimetry.L2.equilibrium", version="2")(_mk(False))
naive("calorimetry.L2.equilibrium", version="2")(_mk(True))
