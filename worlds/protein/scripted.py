"""Scripted agents of the protein track (gold side). The oracle inlines worlds/protein/analysis.py as source text and
does what each world's careful_scientist says; the naive agent trusts the table and the defaults (L1: accepts the
file; fitness: raw log2(selected / input) of every variant; function: fitness read as binding; epistasis: every
double mutant's deviation from additivity as measured). The L1 oracle's issue per defect is data, in scripted.yaml;
worlds/scaffold.py registers the agents and writes that cell."""
from __future__ import annotations

from functools import partial

from worlds.protein import analysis as A
from worlds.scaffold import L2_KIT, accepting_cell, l1_oracle_cell, module_cell, scripted, switched

_cell = partial(module_cell, A)

_L1_HELPERS = r"""
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
"""

scripted("protein.L1.integrity", [_cell, l1_oracle_cell(__file__, _L1_HELPERS)], [accepting_cell('stability.csv', 'variants')])


_FIT = L2_KIT + r"""
t = pd.read_csv('counts.csv')
f = fitness_table(t, normalise=not NAIVE, min_input=0 if NAIVE else MIN_INPUT)
f.to_csv('fitness.csv', index=False)
tv = top(f)
nb = int((f['fitness'].round(6) > 0).sum())
wt = t[t['variant'] == 'WT'].iloc[0]
shift = float(np.log2((wt['selected_count'] + PSEUDO) / (wt['input_count'] + PSEUDO)))
low = int(((t['variant'] != 'WT') & (t['input_count'] < MIN_INPUT)).sum())
found(not NAIVE and abs(shift) > 0.2, f'the wild type itself has log2(selected/input) = {shift:.2f}: scores normalised to the wild type (raw ratios carry library depth)')
found(not NAIVE and low, f'{low} variants have fewer than {MIN_INPUT} input reads: their ratios are unreliable (low counts), excluded from the ranking')
print(json.dumps({'top_variants': tv, 'n_beneficial': nb, 'table': 'fitness.csv', 'issues_found': issues,
                  'analysis_usable': True, 'summary': f'{len(f)} variants scored, {nb} fitter than the wild type'}))
"""

_FUN = L2_KIT + r"""
t = pd.read_csv('scan.csv')
g = json.loads(Path('meta.json').read_text())['dG_background']
b = binding_table(t, None if NAIVE else float(g))
b[['variant', 'binding_effect']].to_csv('binding.csv', index=False)
s = sites(b)
stab = (b['fitness'] - b['binding_effect'])
raw = sites(b.assign(x=b['fitness']), col='x')
found(not NAIVE and set(raw) - set(s), f"destabilised variants lose binding through unfolding (background dG {g} kcal/mol): fitness corrected for the fraction folded (two-state model); {len(set(raw) - set(s))} positions low in fitness are stability, not interface")
print(json.dumps({'interface_positions': s, 'n_interface': len(s), 'table': 'binding.csv', 'issues_found': issues,
                  'analysis_usable': True, 'summary': f'{len(s)} interface positions'}))
"""

_EPI = L2_KIT + r"""
s, db = pd.read_csv('singles.csv'), pd.read_csv('doubles.csv')
lim = limits_of('.')
e = epistasis_table(s, db, None if NAIVE else lim)
e[['pair', 'epistasis']].to_csv('epistasis.csv', index=False)
pairs = interacting(e)
n_cens = len(db) - len(e)
found(not NAIVE and n_cens, f'{n_cens} double mutants (or their singles) sit at a limit of the dynamic range {lim}: censored, their epistasis cannot be measured and is excluded')
print(json.dumps({'epistatic_pairs': pairs, 'n_epistatic': len(pairs), 'table': 'epistasis.csv', 'issues_found': issues,
                  'analysis_usable': True, 'summary': f'{len(pairs)} interacting pairs'}))
"""

_L2 = {"protein.L2.fitness": _FIT, "protein.L2.function": _FUN, "protein.L2.epistasis": _EPI}

switched(_L2, _cell)
