"""Scripted agents of the enhancer track (gold side). The oracle inlines worlds/enhancer/analysis.py as source text and
does what each world's careful_scientist says; the naive agent trusts the tables and the defaults (L1: accepts the
files; activity: raw log2(sum RNA / sum DNA) over every barcode; calling: a t-test of barcode-level ratios against the
control barcodes; batch: activities centred on all negative controls together)."""
from __future__ import annotations

import inspect

from benchmark.suite.registry import naive, oracle
from worlds.enhancer import analysis as A


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
    meta = json.loads(Path('meta.json').read_text())
    t = pd.read_csv('counts.csv', dtype={'barcode': str}).dropna()
    if v['swapped_with']:
        t['dna_count'], t[v['swapped_with']] = t[v['swapped_with']].copy(), t['dna_count'].copy()
    if 'dna_normalised' in f:
        t['dna_count'] = (t['dna_count'] * meta['sequenced_reads']['dna_count'] / 1e6).round().astype(int)
    t = t.groupby('barcode', sort=True)[['dna_count', 'rna_rep1', 'rna_rep2']].sum().reset_index()
    t.to_csv(name, index=False)
    return name


issues = []
if 'uncollapsed_barcodes' in f:
    issues.append({'category': 'barcodes not collapsed', 'severity': 'warning', 'where': 'counts.csv barcode',
                   'value': v['n_uncollapsed'], 'description': f"{v['n_uncollapsed']} barcodes occur on more than one row: the counts were not collapsed to one row per barcode",
                   'action': 'summed the rows of each barcode; listed the barcodes', 'output': write_lines('uncollapsed_barcodes.txt', v['uncollapsed_barcodes'])})
if 'truncated_table' in f:
    issues.append({'category': 'truncated counts file', 'severity': 'blocking', 'where': 'counts.csv (end of file)',
                   'value': v['n_missing'], 'description': f"counts.csv ends in an incomplete line and {v['n_missing']} mapped barcodes (the end of the barcode order) have no complete row: the file was truncated",
                   'action': 'listed the lost barcodes; request the complete file', 'output': write_lines('missing_barcodes.txt', v['missing_barcodes'])})
if 'unmapped_barcodes' in f:
    issues.append({'category': 'unmapped barcodes', 'severity': 'warning', 'where': 'counts.csv vs barcode_map.csv',
                   'value': v['n_unmapped'], 'description': f"{v['n_unmapped']} counted barcodes are not in the association map: they cannot be assigned to an element",
                   'action': 'excluded and listed them', 'output': write_lines('unmapped_barcodes.txt', v['unmapped_barcodes'])})
if 'error_barcodes' in f:
    issues.append({'category': 'sequencing-error barcodes', 'severity': 'warning', 'where': 'counts.csv barcode',
                   'value': v['n_error_barcodes'], 'description': f"{v['n_error_barcodes']} counted barcodes ({v['error_fraction']:.1%}) are one mismatch from a mapped barcode and hold part of its reads: barcode error correction (Hamming collapsing) was not done",
                   'action': 'merged them into their parent barcodes; listed them', 'output': write_lines('error_barcodes.txt', v['error_barcodes'])})
if 'barcode_collisions' in f:
    issues.append({'category': 'barcode collisions', 'severity': 'warning', 'where': 'barcode_map.csv barcode',
                   'value': v['n_collisions'], 'description': f"{v['n_collisions']} barcodes ({v['collision_fraction']:.1%}) are assigned to two elements in barcode_map.csv: each was cloned with two elements and cannot be attributed",
                   'action': 'dropped them; listed them', 'output': write_lines('collided_barcodes.txt', v['collided_barcodes'])})
if 'low_replicate_correlation' in f:
    issues.append({'category': 'low replicate correlation', 'severity': 'warning', 'where': 'counts.csv rna_rep2',
                   'value': v['replicate_r'], 'description': f"element-level log2 RNA/DNA of rna_rep1 and rna_rep2 correlate at r = {v['replicate_r']:.2f} and differ with a robust sd of {v['replicate_diff_sd']:.2f} log2 (sound transfections: about 0.4): a failed second transfection",
                   'action': 'excluded rna_rep2 from activity estimates; request a repeat', 'output': None})
if 'strand_flipped' in f:
    issues.append({'category': 'elements on the opposite strand', 'severity': 'warning', 'where': 'barcode_map.csv element',
                   'value': v['n_flipped'], 'description': f"{v['n_flipped']} designed elements are written in the map as their reverse complement ({v['n_flipped_barcodes']} barcodes): the map names are on the other strand",
                   'action': 'reassigned them to the designed element; listed the elements', 'output': write_lines('flipped_elements.txt', v['flipped_elements'])})
if 'plasmid_bottleneck' in f:
    issues.append({'category': 'plasmid bottleneck', 'severity': 'warning', 'where': 'barcode_map.csv',
                   'value': v['n_bottleneck'], 'description': f"{v['n_bottleneck']} elements have only 1-4 mapped barcodes (median {v['median_barcodes_per_element']:.0f}) with jackpot plasmid counts: too few barcodes for a reliable activity",
                   'action': 'listed them; excluded from activity estimates', 'output': write_lines('bottleneck_elements.txt', v['bottleneck_elements'])})
if 'dna_normalised' in f:
    issues.append({'category': 'plasmid counts already normalised', 'severity': 'blocking', 'where': 'counts.csv dna_count',
                   'value': v['nonint_fraction'], 'description': f"{v['nonint_fraction']:.0%} of dna_count values are non-integer and sum to 1e6: counts per million, not raw counts",
                   'action': 'recovered raw counts from the stated sequenced reads', 'output': corrected('counts_raw_dna.csv')})
if 'replicate_copy' in f:
    issues.append({'category': 'identical replicates', 'severity': 'blocking', 'where': 'counts.csv rna_rep2',
                   'value': v['identical_fraction'], 'description': f"rna_rep2 equals rna_rep1 on {v['identical_fraction']:.0%} of barcodes: the second replicate is a copy of the first",
                   'action': 'use one replicate; request the second', 'output': None})
if 'swapped_columns' in f:
    sd = v['element_sd']
    issues.append({'category': 'DNA and RNA columns swapped', 'severity': 'blocking', 'where': f"counts.csv dna_count and {v['swapped_with']}",
                   'value': v['swap_fraction'], 'description': f"dna_count varies more between elements (sd {sd['dna_count']:.2f} log2) than {v['swapped_with']} ({sd[v['swapped_with']]:.2f}): the plasmid and RNA columns are swapped",
                   'action': 'swapped them back', 'output': corrected('counts_corrected.csv')})
block = any(i['severity'] == 'blocking' for i in issues)
report = {'assessment': 'usable_with_caveats' if issues else 'usable', 'issues': issues,
          'summary': ('Problems: ' + ', '.join(i['category'] for i in issues)) if issues else
                     f"All checks pass: {v['n_rows']} barcodes, map, design, integer counts and replicates consistent."}
print(json.dumps(report))
"""

_L1_NAIVE = r"""
import json
import pandas as pd
t = pd.read_csv('counts.csv')
print(t.describe())
print(json.dumps({'assessment': 'usable', 'issues': [], 'summary': f'{len(t)} barcodes loaded; looks fine.'}))
"""


@oracle("enhancer.L1.integrity", version="1")
def l1_oracle(ref) -> list[str]:
    return [_cell(), _L1_ORACLE]


@naive("enhancer.L1.integrity", version="1")
def l1_naive(ref) -> list[str]:
    return [_L1_NAIVE]


_ACT = r"""
t, el = load('.')
g = ratios(t, el, 'rna_count', careful=not NAIVE)
g[g['role'] == 'test'][['element', 'activity']].to_csv('activity.csv', index=False)
tv = top(g)
na = n_active(g)
raw = ratios(t, el, 'rna_count', careful=False)
shift = float(raw.loc[raw['role'] == 'negative_control', 'activity'].median())
low = sorted(set(t.loc[t['dna_count'] < MIN_DNA, 'element']))
issues = []
if not NAIVE and abs(shift) > 0.3:
    issues.append(f'the negative controls themselves have log2(RNA/DNA) = {shift:.2f}: activities normalised to the negative controls (raw ratios carry the libraries depth)')
kept = t[t['dna_count'] >= MIN_DNA]
out = kept[outlier_barcodes(kept, 'rna_count')]
if not NAIVE and len(out):
    issues.append(f"{len(out)} barcodes of {out['element'].nunique()} elements read more than {2 ** OUTLIER_LOG2:.0f}-fold above their element's median barcode ratio (RNA jackpots, outliers): excluded before summing")
if not NAIVE and low:
    issues.append(f'{len(low)} elements have barcodes with fewer than {MIN_DNA} plasmid reads (low counts): those barcodes excluded, elements left with < {MIN_GOOD_BC} measured barcodes not scored')
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


def _mk(fam: str, is_naive: bool):
    def cells(ref) -> list[str]:
        return [_cell(), f"NAIVE = {is_naive!r}\n" + _L2[fam]]
    return cells


for _fam in _L2:
    oracle(_fam, version="1")(_mk(_fam, False))
    naive(_fam, version="1")(_mk(_fam, True))
