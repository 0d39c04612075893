"""Scripted agents of the calorimetry track (gold side). The oracle inlines worlds/calorimetry/analysis.py as source
text and does what each world's careful_scientist says; the naive agent trusts the files and the lab software's
defaults (L1: accepts the series; L2: the software's enthalpy table, interpolated as it comes). The L1 oracle's issue
per defect is data, in scripted.yaml; worlds/scaffold.py registers the agents and writes that cell."""
from __future__ import annotations

from functools import partial

from worlds.calorimetry import analysis as A
from worlds.scaffold import accepting_cell, l1_oracle_cell, module_cell, scripted, switched

_cell = partial(module_cell, A)


scripted("calorimetry.L1.integrity", [_cell, l1_oracle_cell(__file__)], [accepting_cell('cp_series.csv', 'points')])


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

switched({"calorimetry.L2.equilibrium": _L2}, _cell, versions=("2", "2"))
