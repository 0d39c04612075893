"""Scripted agents of the protein track (gold side). The oracle inlines worlds/protein/analysis.py as source text and
does what each world's careful_scientist says; the naive agent trusts the table and the defaults (L1: accepts the
file; fitness: raw log2(selected / input) of every variant; function: fitness read as binding; epistasis: every
double mutant's deviation from additivity as measured)."""
from __future__ import annotations

import inspect

from benchmark.suite.registry import naive, oracle
from worlds.protein import analysis as A


def _cell() -> str:
    return inspect.getsource(A) + "\nprint('analysis loaded')\n"


_L1_ORACLE = r"""
v = detect('.')
f = v['findings']
print('findings', f, 'rows', v['n_rows'])


def write_lines(name, items):
    Path(name).write_text(''.join(f'{x}\n' for x in items))
    return name


def corrected(name):
    t = pd.read_csv('stability.csv')
    t = t.drop_duplicates(['position', 'wt_aa', 'mut_aa'])
    kj = t['plate'].isin(v['kj_plates'])
    for c in ('dG_wt', 'dG_mut'):
        t.loc[kj, c] = (t.loc[kj, c] / KJ).round(3)
    t['ddG'] = (t['dG_wt'] - t['dG_mut']).round(3)
    t['position'] = t['position'] - v['offset']
    t['variant'] = t['wt_aa'] + t['position'].astype(str) + t['mut_aa']
    t.to_csv(name, index=False)
    return name


issues = []
if 'duplicate_variants' in f:
    issues.append({'category': 'duplicated variants', 'severity': 'warning', 'where': 'stability.csv',
                   'value': v['n_duplicate_rows'], 'description': f"{v['n_duplicate_rows']} variant rows appear twice (same position, wild-type and mutant residue)",
                   'action': 'kept one copy of each; listed the duplicated variants', 'output': write_lines('duplicated_variants.txt', v['duplicated_variants'])})
if 'numbering_offset' in f:
    issues.append({'category': 'residue numbering offset', 'severity': 'blocking', 'where': 'stability.csv position',
                   'value': v['offset'], 'description': f"only {v['wt_match_fraction']:.0%} of rows agree with construct.fasta at the stated position; shifted by {v['offset']:+d} residues, {v['best_shift_match_fraction']:.0%} agree: positions are offset from the GB1 numbering",
                   'action': f"renumbered (position - {v['offset']})", 'output': corrected('stability_renumbered.csv')})
if 'wt_mismatch' in f:
    issues.append({'category': 'wild-type residue mismatch', 'severity': 'warning', 'where': 'stability.csv wt_aa',
                   'value': v['n_wt_mismatch'], 'description': f"{v['n_wt_mismatch']} rows name a wild-type residue that is not the residue of construct.fasta at that position",
                   'action': 'listed them; excluded until the mutation is confirmed', 'output': write_lines('wt_mismatch_variants.txt', v['mismatch_variants'])})
if 'missing_zero' in f:
    issues.append({'category': 'missing values coded as zero', 'severity': 'warning', 'where': 'stability.csv dG_mut/ddG',
                   'value': v['n_zero'], 'description': f"{v['n_zero']} variants have dG_mut = 0 and ddG = 0 although their plate wild type is not 0: unmeasured values written as 0",
                   'action': 'set them to missing and listed them', 'output': write_lines('zero_variants.txt', v['zero_variants'])})
if 'kj_units' in f:
    issues.append({'category': 'mixed energy units (kJ/mol)', 'severity': 'warning', 'where': f"stability.csv plates {v['kj_plates']}",
                   'value': v['n_kj_rows'], 'description': f"the wild-type control of plates {v['kj_plates']} reads 4.18 times the others: {v['n_kj_rows']} rows are in kJ/mol, not kcal/mol",
                   'action': 'listed them; divided by 4.184', 'output': write_lines('kj_variants.txt', v['kj_variants'])})
if 'sign_flip' in f:
    issues.append({'category': 'ddG sign convention inverted', 'severity': 'blocking', 'where': 'stability.csv ddG',
                   'value': v['sign_inconsistent_fraction'], 'description': f"ddG = dG_mut - dG_wt for {v['sign_inconsistent_fraction']:.0%} of rows, the opposite sign to the declared convention: destabilising substitutions read as stabilising",
                   'action': 'recomputed ddG = dG_wt - dG_mut', 'output': corrected('stability_corrected.csv')})
if 'unreferenced' in f:
    issues.append({'category': 'ddG not referenced to the wild type', 'severity': 'blocking', 'where': 'stability.csv ddG',
                   'value': v['unreferenced_fraction'], 'description': f"the ddG column equals dG_mut for {v['unreferenced_fraction']:.0%} of rows: it holds the absolute dG of the mutant",
                   'action': 'recomputed ddG = dG_wt - dG_mut', 'output': corrected('stability_corrected.csv')})
block = any(i['severity'] == 'blocking' for i in issues)
report = {'assessment': 'usable_with_caveats' if issues else 'usable', 'issues': issues,
          'summary': ('Problems: ' + ', '.join(i['category'] for i in issues)) if issues else
                     f"All checks pass: {v['n_rows']} variants, numbering, residues, units and ddG consistent."}
print(json.dumps(report))
"""

_L1_NAIVE = r"""
import json
import pandas as pd
t = pd.read_csv('stability.csv')
print(t.describe())
print(json.dumps({'assessment': 'usable', 'issues': [], 'summary': f'{len(t)} variants loaded; looks fine.'}))
"""


@oracle("protein.L1.integrity", version="1")
def l1_oracle(ref) -> list[str]:
    return [_cell(), _L1_ORACLE]


@naive("protein.L1.integrity", version="1")
def l1_naive(ref) -> list[str]:
    return [_L1_NAIVE]


_FIT = r"""
t = pd.read_csv('counts.csv')
f = fitness_table(t, normalise=not NAIVE, min_input=0 if NAIVE else MIN_INPUT)
f.to_csv('fitness.csv', index=False)
tv = top(f)
nb = int((f['fitness'].round(6) > 0).sum())
wt = t[t['variant'] == 'WT'].iloc[0]
shift = float(np.log2((wt['selected_count'] + PSEUDO) / (wt['input_count'] + PSEUDO)))
low = int(((t['variant'] != 'WT') & (t['input_count'] < MIN_INPUT)).sum())
issues = []
if not NAIVE and abs(shift) > 0.2:
    issues.append(f'the wild type itself has log2(selected/input) = {shift:.2f}: scores normalised to the wild type (raw ratios carry library depth)')
if not NAIVE and low:
    issues.append(f'{low} variants have fewer than {MIN_INPUT} input reads: their ratios are unreliable (low counts), excluded from the ranking')
print(json.dumps({'top_variants': tv, 'n_beneficial': nb, 'table': 'fitness.csv', 'issues_found': issues,
                  'analysis_usable': True, 'summary': f'{len(f)} variants scored, {nb} fitter than the wild type'}))
"""

_FUN = r"""
t = pd.read_csv('scan.csv')
g = json.loads(Path('meta.json').read_text())['dG_background']
b = binding_table(t, None if NAIVE else float(g))
b[['variant', 'binding_effect']].to_csv('binding.csv', index=False)
s = sites(b)
stab = (b['fitness'] - b['binding_effect'])
raw = sites(b.assign(x=b['fitness']), col='x')
issues = []
if not NAIVE and set(raw) - set(s):
    issues.append(f"destabilised variants lose binding through unfolding (background dG {g} kcal/mol): fitness corrected for the fraction folded (two-state model); {len(set(raw) - set(s))} positions low in fitness are stability, not interface")
print(json.dumps({'interface_positions': s, 'n_interface': len(s), 'table': 'binding.csv', 'issues_found': issues,
                  'analysis_usable': True, 'summary': f'{len(s)} interface positions'}))
"""

_EPI = r"""
s, db = pd.read_csv('singles.csv'), pd.read_csv('doubles.csv')
lim = limits_of('.')
e = epistasis_table(s, db, None if NAIVE else lim)
e[['pair', 'epistasis']].to_csv('epistasis.csv', index=False)
pairs = interacting(e)
n_cens = len(db) - len(e)
issues = []
if not NAIVE and n_cens:
    issues.append(f'{n_cens} double mutants (or their singles) sit at a limit of the dynamic range {lim}: censored, their epistasis cannot be measured and is excluded')
print(json.dumps({'epistatic_pairs': pairs, 'n_epistatic': len(pairs), 'table': 'epistasis.csv', 'issues_found': issues,
                  'analysis_usable': True, 'summary': f'{len(pairs)} interacting pairs'}))
"""

_L2 = {"protein.L2.fitness": _FIT, "protein.L2.function": _FUN, "protein.L2.epistasis": _EPI}


def _mk(fam: str, is_naive: bool):
    def cells(ref) -> list[str]:
        return [_cell(), f"NAIVE = {is_naive!r}\n" + _L2[fam]]
    return cells


for _fam in _L2:
    oracle(_fam, version="1")(_mk(_fam, False))
    naive(_fam, version="1")(_mk(_fam, True))
