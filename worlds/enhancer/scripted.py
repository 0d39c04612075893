"""Scripted agents of the enhancer track (gold side). The oracle inlines worlds/enhancer/analysis.py as source text and
does what each world's careful_scientist says; the naive agent trusts the tables and the defaults (L1: accepts the
files; activity: raw log2(sum RNA / sum DNA) over every barcode; calling: a t-test of barcode-level ratios against the
control barcodes; batch: activities centred on all negative controls together). The L1 oracle's issue per defect is
data, in scripted.yaml; worlds/scaffold.py registers the agents and writes that cell."""
from __future__ import annotations

from functools import partial

from worlds.enhancer import analysis as A
from worlds.scaffold import L2_KIT, accepting_cell, l1_oracle_cell, module_cell, scripted, switched

_cell = partial(module_cell, A)

_L1_HELPERS = r"""
def corrected(name):
    meta = json.loads(Path('meta.json').read_text())
    t = pd.read_csv('counts.csv', dtype={'barcode': str}).dropna()
    if v['swapped_with']:
        t['dna_count'], t[v['swapped_with']] = t[v['swapped_with']].copy(), t['dna_count'].copy()
    if 'dna_normalised' in f:
        t['dna_count'] = (t['dna_count'] * meta['sequenced_reads']['dna_count'] / 1e6).round().astype(int)
    t = t.groupby('barcode', sort=True)[['dna_count', 'rna_rep1', 'rna_rep2']].sum().reset_index()
    t.to_csv(name, index=False)
    return name
"""

scripted("enhancer.L1.integrity", [_cell, l1_oracle_cell(__file__, _L1_HELPERS)], [accepting_cell('counts.csv', 'barcodes')])


_ACT = L2_KIT + r"""
t, el = load('.')
g = ratios(t, el, 'rna_count', careful=not NAIVE)
g[g['role'] == 'test'][['element', 'activity']].to_csv('activity.csv', index=False)
tv = top(g)
na = n_active(g)
raw = ratios(t, el, 'rna_count', careful=False)
shift = float(raw.loc[raw['role'] == 'negative_control', 'activity'].median())
low = sorted(set(t.loc[t['dna_count'] < MIN_DNA, 'element']))
found(not NAIVE and abs(shift) > 0.3, f'the negative controls themselves have log2(RNA/DNA) = {shift:.2f}: activities normalised to the negative controls (raw ratios carry the libraries depth)')
kept = t[t['dna_count'] >= MIN_DNA]
out = kept[outlier_barcodes(kept, 'rna_count')]
found(not NAIVE and len(out), f"{len(out)} barcodes of {out['element'].nunique()} elements read more than {2 ** OUTLIER_LOG2:.0f}-fold above their element's median barcode ratio (RNA jackpots, outliers): excluded before summing")
found(not NAIVE and low, f'{len(low)} elements have barcodes with fewer than {MIN_DNA} plasmid reads (low counts): those barcodes excluded, elements left with < {MIN_GOOD_BC} measured barcodes not scored')
print(json.dumps({'top_elements': tv, 'n_active': na, 'table': 'activity.csv', 'issues_found': issues,
                  'analysis_usable': True, 'summary': f"{int((g['role'] == 'test').sum())} elements scored, {na} at least two-fold over the controls"}))
"""

_CALL = r"""
t, el = load('.')
if NAIVE:
    g, active = call_naive(t, el)
    sd = None
else:
    g, active, sd = call_careful(t, el)
g[g['role'] == 'test'][['element', 'activity']].to_csv('activity.csv', index=False)
Path('active.txt').write_text(''.join(f'{x}\n' for x in active))
issues = []
if not NAIVE and sd is not None and sd > 0.2:
    issues.append(f'negative controls vary between elements (sd {sd:.2f} log2): barcodes are technical replicates of one element (pseudo-replication); elements tested against the element-level control distribution')
print(json.dumps({'n_active': len(active), 'active_list': 'active.txt', 'table': 'activity.csv', 'issues_found': issues,
                  'analysis_usable': True, 'summary': f'{len(active)} active elements at FDR 5%'}))
"""

_BATCH = r"""
t, el = load('.')
g = ratios(t, el, 'rna_count', by=None if NAIVE else 'batch')
g[g['role'] == 'test'][['element', 'activity']].to_csv('activity.csv', index=False)
eff = g5_effect(g)
raw = ratios(t, el, 'rna_count', by=None)
negs = raw[raw['role'] == 'negative_control'].groupby('batch')['activity'].median()
shift = float(negs.get(2, 0.0) - negs.get(1, 0.0))
issues = []
if not NAIVE and abs(shift) > 0.3:
    x = el[el['role'] == 'test']
    g5 = x['element'].str[7] == 'G'
    issues.append(f"batch effect: the negative controls of batch 2 read {shift:+.2f} log2 against batch 1, and {(x.loc[g5, 'batch'] == 2).mean():.0%} of +5G elements vs {(x.loc[~g5, 'batch'] == 2).mean():.0%} of the others are in batch 2 (confounded); activities centred on each batch's own controls")
print(json.dumps({'g5_effect': eff, 'table': 'activity.csv', 'issues_found': issues, 'analysis_usable': True,
                  'summary': f'+5G elements differ by {eff:+.2f} log2 from the others'}))
"""

_L2 = {"enhancer.L2.activity": _ACT, "enhancer.L2.calling": _CALL, "enhancer.L2.batch": _BATCH}

switched(_L2, _cell)
