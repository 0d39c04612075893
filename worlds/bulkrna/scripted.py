"""Scripted agents of the bulkrna track (gold side): per family, the oracle's and the naive agent's code cells.

Cells run in the sandbox kernel with the world's public files in the working directory; the reference helpers travel
as source text (inspect.getsource). Registered on import of worlds.bulkrna.solvers.
"""
from __future__ import annotations

import inspect

from benchmark.registry import naive, oracle
from worlds.bulkrna import solvers as S

_CONSTS = ("SEX_Y", "SLOPE_FINDING", "SHIFT_FINDING", "TOP_K")


def _helpers(*fns) -> str:
    head = ["import json", "import re", "from pathlib import Path", "import numpy as np", "import pandas as pd", ""]
    consts = [f"{k} = {getattr(S, k)!r}" for k in _CONSTS]
    body = "\n\n".join(inspect.getsource(f) for f in (S.read_world, S.strip_version, S.size_factors, *fns))
    return "\n".join(head + consts) + "\n\n\n" + body + "\nprint('reference helpers loaded')\n"


_L1_ORACLE = r"""
d = read_world('.')
v = detect(d)
print('findings', v['findings'])
issues = []
f = v['findings']


def lines(name, items):
    Path(name).write_text(''.join(f'{x}\n' for x in items))
    return name


if 'normalized_as_counts' in f:
    X = d['X']
    mn = np.where(X.to_numpy() > 0, X.to_numpy(), np.inf).min(0)
    rec = pd.DataFrame(np.rint(X.to_numpy() / mn[None, :]).astype(int), index=X.index, columns=X.columns)
    rec.rename_axis('gene_id').reset_index().to_csv('counts_recovered.tsv', sep='\t', index=False)
    issues.append({'category': 'normalised values presented as raw counts', 'severity': 'blocking', 'where': 'counts.tsv',
                   'value': v['fraction_non_integer_values'],
                   'description': f"{v['fraction_non_integer_values']:.1%} of non-zero values are non-integer (normalised counts); "
                                  'meta.json calls them raw counts',
                   'action': 'recovered integer counts per sample as value / smallest non-zero value of the sample',
                   'output': 'counts_recovered.tsv'})
if 'gene_id_mismatch' in f:
    X = d['X'].copy()
    X.index = [strip_version(g) for g in X.index]
    X.rename_axis('gene_id').reset_index().to_csv('counts_ids_fixed.tsv', sep='\t', index=False)
    issues.append({'category': 'gene ID mismatch between matrix and annotation', 'severity': 'blocking', 'where': 'counts.tsv gene_id',
                   'value': v['n_unmatched_ids'],
                   'description': f"{v['n_unmatched_ids']} gene IDs of counts.tsv are absent from genes.tsv: they carry Ensembl version suffixes",
                   'action': 'stripped the version suffixes; every row now matches the annotation', 'output': 'counts_ids_fixed.tsv'})
if 'truncated_matrix' in f:
    issues.append({'category': 'truncated count file', 'severity': 'blocking', 'where': 'counts.tsv (end of file)',
                   'value': v['n_missing_genes'],
                   'description': f"the last line stops mid-row and {v['n_missing_genes']} annotation genes are missing from the matrix",
                   'action': 'listed the missing genes; the complete file must be re-obtained', 'output': lines('missing_genes.txt', v['missing_genes'])})
if 'duplicate_sample' in f:
    issues.append({'category': 'duplicated sample (identical columns)', 'severity': 'warning', 'where': 'counts.tsv columns ' + ', '.join(v['duplicated_samples']),
                   'value': v['n_duplicate_extra'],
                   'description': f"sample columns {' and '.join(v['duplicated_samples'])} are identical in every gene: one library twice",
                   'action': 'kept one copy', 'output': lines('duplicated_samples.txt', v['duplicated_samples'])})
if 'swapped_samples' in f:
    a, b = v['swapped_samples']
    sheet = d['sheet'].copy()
    i, j = sheet.index[sheet['sample'] == a][0], sheet.index[sheet['sample'] == b][0]
    c = [k for k in sheet.columns if k != 'sample']
    ra, rb = sheet.loc[i, c].copy(), sheet.loc[j, c].copy()
    sheet.loc[i, c], sheet.loc[j, c] = rb.to_numpy(), ra.to_numpy()
    sheet.to_csv('samples_corrected.csv', index=False)
    issues.append({'category': 'swapped sample-sheet rows', 'severity': 'warning', 'where': f'samples.csv rows {a}, {b}',
                   'value': v['n_sex_discordant'],
                   'description': f"XIST / chrY expression contradicts the recorded sex of {a} and {b} (opposite sexes): their rows are swapped",
                   'action': 'exchanged the two rows back', 'output': 'samples_corrected.csv'})
if 'degraded_sample' in f:
    issues.append({'category': 'degraded sample (3-prime bias)', 'severity': 'warning', 'where': ', '.join(v['degraded_samples']),
                   'value': v['n_degraded'],
                   'description': f"length-trend slope {v['degraded_slope']} (others ~0): longer genes lose counts, RNA degradation",
                   'action': 'flagged for removal before DE', 'output': lines('degraded_samples.txt', v['degraded_samples'])})
report = {'assessment': 'usable_with_caveats' if issues else 'usable', 'issues': issues,
          'summary': ('Integrity problems: ' + ', '.join(i['category'] for i in issues)) if issues else
                     f"All integrity checks pass; {v['n_samples']} samples, median library {v['median_library_size']} reads."}
print(json.dumps(report))
"""

_L1_NAIVE = r"""
import json
import pandas as pd
X = pd.read_csv('counts.tsv', sep='\t', index_col=0)
s = pd.read_csv('samples.csv')
print(X.shape, s.shape)
print(json.dumps({'assessment': 'usable', 'issues': [], 'summary': f'Loaded {X.shape[0]} genes x {X.shape[1]} samples; looks fine.'}))
"""


@oracle("bulkrna.L1.integrity", version="1")
def l1_oracle(ref) -> list[str]:
    return [_helpers(S.length_slopes, S.infer_sex, S.detect), _L1_ORACLE]


@naive("bulkrna.L1.integrity", version="1")
def l1_naive(ref) -> list[str]:
    return [_L1_NAIVE]
