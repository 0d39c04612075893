"""Scripted agents of the bulkrna track (gold side): per family, the oracle's and the naive agent's code cells.

Cells run in the sandbox kernel with the world's public files in the working directory; the reference helpers travel
as source text (inspect.getsource). Registered on import of worlds.bulkrna.solvers.
"""
from __future__ import annotations

import inspect
from functools import partial

from worlds.bulkrna import solvers as S
from worlds.scaffold import scripted

_CONSTS = ("SEX_Y", "SLOPE_FINDING", "SHIFT_FINDING", "TOP_K", "CONDITION_GENES", "TECHREP_RATIO", "CHI2_1_MEDIAN", "NUISANCE",
           "CONTAM_LOG2", "CONTAM_MIN_GENES")


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
    groups = '; '.join(' = '.join(g) for g in v['duplicate_groups'])
    issues.append({'category': 'duplicated sample (identical columns)', 'severity': 'warning', 'where': 'counts.tsv columns ' + ', '.join(v['duplicated_samples']),
                   'value': v['n_duplicate_extra'],
                   'description': f"identical count columns in every gene ({groups}): {v['n_duplicate_extra']} extra "
                                  'copies of libraries already in the matrix',
                   'action': 'keep one copy of each library', 'output': lines('duplicated_samples.txt', v['duplicated_samples'])})
if 'resequenced_specimen' in f:
    groups = '; '.join(' + '.join(g) for g in v['techrep_groups'])
    issues.append({'category': 'technical replicates listed as separate biological samples', 'severity': 'warning',
                   'where': 'counts.tsv columns ' + ', '.join(v['techrep_samples']), 'value': v['n_techrep_extra'],
                   'description': f"these columns differ only by Poisson sampling ({groups}: median pairwise Pearson X2 "
                                  f"{v['techrep_min_ratio']:.2f} x its chi-square(1) median; every other pair >= "
                                  f"{v['bio_min_ratio']:.1f} x): libraries of one RNA specimen, not biological replicates; "
                                  f"{v['n_techrep_extra']} extra columns",
                   'action': 'sum each group into one sample (collapse technical replicates) before DE',
                   'output': lines('technical_replicates.txt', v['techrep_samples'])})
if 'swapped_samples' in f:
    sw = v['swapped_samples']
    fixed = restore_sheet(d['sheet'], sw, {s: (v['expressed_condition'][s], v['inferred_sex'][s]) for s in sw})
    fixed.to_csv('samples_corrected.csv', index=False)
    issues.append({'category': 'swapped sample-sheet rows', 'severity': 'warning', 'where': 'samples.csv rows ' + ', '.join(sw),
                   'value': v['n_swapped_samples'],
                   'description': f"XIST / chrY expression contradicts the recorded sex of {v['sex_discordant_samples']} and the "
                                  f"expression profile the recorded condition of {v['condition_discordant_samples']}; the rows of "
                                  f"these {len(sw)} samples are each other's: they were moved between them",
                   'action': 'gave each sample back the row its expression shows', 'output': 'samples_corrected.csv'})
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


scripted("bulkrna.L1.integrity",
         [partial(_helpers, S.length_slopes, S.infer_sex, S.expressed_condition, S.pair_poisson_ratios, S.restore_sheet, S.detect), _L1_ORACLE],
         [_L1_NAIVE], versions=("2", "1"))


_DE_COMMON = r"""
d = read_world('.')
X, sheet, genes, meta = d['X'], d['sheet'], d['genes'], d['meta']
test, ref = meta['task']['test_condition'], meta['task']['reference_condition']
issues = []


def finish(res, design, norm, used):
    padj = res['padj'].fillna(1.0)
    de = sorted(res.index[padj < 0.05])
    pd.DataFrame({'gene': res.index, 'log2fc': res['log2FoldChange'].to_numpy(), 'padj': padj.to_numpy()}).to_csv('de_results.csv', index=False)
    med = float(res.loc[res['baseMean'] >= 20, 'log2FoldChange'].median())
    lfc = res['log2FoldChange']
    rep = {'test_condition': test, 'reference_condition': ref, 'de_genes': de, 'n_de_genes': len(de),
           'up_genes': sorted(g for g in de if lfc[g] > 0), 'down_genes': sorted(g for g in de if lfc[g] < 0),
           'de_table': 'de_results.csv', 'median_log2fc': round(med, 4),
           'method': {'design': design, 'normalization': norm, 'samples_used': used},
           'issues_found': issues, 'analysis_usable': True,
           'summary': f'{len(de)} genes at FDR 5% ({design}, {norm}).'}
    if 'normalisation' in str(meta.get('files', {}).get('genes.tsv', '')) or 'spike_in' in str(meta.get('files', {}).get('genes.tsv', '')):
        rep = {k: v for k, v in rep.items() if k not in ('de_genes', 'up_genes', 'down_genes')}
        rep['n_up'], rep['n_down'] = int((lfc[de] > 0).sum()), int((lfc[de] < 0).sum())
    print(json.dumps(rep))
"""

_CDE_ORACLE = r"""
print('processing:', meta.get('processing'))
filt = outcome_filter_scan(meta, test, ref)
print('steps that selected genes on the conditions:', filt)
contam = contamination_scan(X)
print('genes >= 32-fold above their median, per library:', contam['n_high_genes'])
print('read share of the outlying gene set:', contam['share'])
if filt['outcome_filtered']:
    issues.append(f"matrix selected on the outcome: meta.json processing says genes were kept only when their {test} / {ref} "
                  f"mean-CPM ratio passed a |log2| threshold in these same libraries ({filt['outcome_filter_steps'][0]}): a non-independent "
                  'filter (Bourgon 2010), so the kept genes\' null p-values are not uniform and BH does not control the FDR; '
                  'the unfiltered matrix is needed, with a label-blind (mean-count) filter')
    print(json.dumps({'test_condition': test, 'reference_condition': ref, 'de_genes': [], 'n_de_genes': 0, 'up_genes': [],
                      'down_genes': [], 'de_table': 'none', 'median_log2fc': 0.0,
                      'method': {'design': 'none: matrix selected on the fold change', 'normalization': 'n/a', 'samples_used': 'none'},
                      'issues_found': issues, 'analysis_usable': False,
                      'summary': 'Not usable: genes were selected on the between-condition fold change before testing; no DE list.'}))
else:
    slopes = length_slopes(X, genes.set_index('gene_id')['length'])
    dropped = sorted({s for s, x in slopes.items() if abs(x) > SLOPE_FINDING} | set(contam['contaminated']))
    keep = [s for s in X.columns if s not in dropped]
    sh = sheet[sheet['sample'].isin(keep)]
    design = estimable_design(sh)
    print(pd.crosstab(sh['condition'], sh['batch']) if 'batch' in sh else sh)
    if contam['contaminated']:
        issues.append(f"contaminated libraries {', '.join(contam['contaminated'])}: a set of {len(contam['signature'])} genes "
                      'the other libraries barely express sits >= 32-fold above its median there and takes '
                      + ', '.join(f"{contam['share'][s]:.1%}" for s in contam['contaminated'])
                      + ' of their reads (a foreign tissue); excluded before testing')
    if 'batch' in design:
        tab = pd.crosstab(sh['condition'], sh['batch'])
        if (tab == 0).any().any():
            issues.append('batch partially confounded with condition: ' + '; '.join(f'{b}: ' + ', '.join(f'{c} {tab.loc[c, b]}' for c in tab.index) for b in tab.columns)
                          + ' -> batch included as a covariate (~ batch + condition)')
    if 'donor' in design:
        issues.append('paired design: each donor gives a control and a treated sample; donor blocked (~ donor + condition)')
    res = run_deseq(X[keep].T, sh, design, ['condition', test, ref])
    finish(res, design, 'DESeq2 median-of-ratios', ', '.join(keep))
"""

_NORM_ORACLE = r"""
dec = spike_decision(X, sheet, genes, test, ref)
print('log2 spike/endogenous size-factor difference between conditions', dec['log2_sf_ratio_diff'])
if dec['use_spikes']:
    issues.append(f"global transcriptional shift: spike-in and endogenous median-of-ratios size factors disagree by "
                  f"{dec['log2_sf_ratio_diff']:+.2f} log2 between conditions; normalised to the ERCC spike-ins")
res = run_deseq(X.T, sheet, '~condition', ['condition', test, ref], control_genes=dec['spikes'] if dec['use_spikes'] else None)
res = res.loc[dec['endo']]
finish(res, '~condition', 'spike-in size factors (ERCC)' if dec['use_spikes'] else 'median-of-ratios (spike-ins agree)', 'all')
"""

# The naive agent's DE: pydeseq2 with its defaults on the matrix and sheet as they come (~condition).
_DESEQ_DEFAULTS = r"""
import json, logging, warnings
import pandas as pd
from pydeseq2.dds import DeseqDataSet
from pydeseq2.ds import DeseqStats
from pydeseq2.default_inference import DefaultInference
warnings.simplefilter('ignore')
meta = json.load(open('meta.json'))
test, ref = meta['task']['test_condition'], meta['task']['reference_condition']
X = pd.read_csv('counts.tsv', sep='\t', index_col=0)
s = pd.read_csv('samples.csv').set_index('sample').loc[X.columns]
inf = DefaultInference(n_cpus=1)
dds = DeseqDataSet(counts=X.T, metadata=s, design='~condition', inference=inf, quiet=True)
dds.deseq2()
st = DeseqStats(dds, contrast=['condition', test, ref], inference=inf, quiet=True)
st.summary()
"""

_DE_NAIVE = _DESEQ_DEFAULTS + r"""res = st.results_df
padj = res['padj'].fillna(1.0)
de = sorted(res.index[padj < 0.05])
pd.DataFrame({'gene': res.index, 'log2fc': res['log2FoldChange'].to_numpy(), 'padj': padj.to_numpy()}).to_csv('de.csv', index=False)
lfc = res['log2FoldChange']
print(json.dumps({'test_condition': test, 'reference_condition': ref, 'de_genes': de, 'n_de_genes': len(de),
                  'up_genes': sorted(g for g in de if lfc[g] > 0), 'down_genes': sorted(g for g in de if lfc[g] < 0),
                  'de_table': 'de.csv', 'median_log2fc': round(float(lfc[res['baseMean'] >= 20].median()), 4),
                  'method': {'design': '~condition', 'normalization': 'DESeq2 default', 'samples_used': 'all'},
                  'issues_found': [], 'analysis_usable': True, 'summary': f'{len(de)} DE genes.'}))
"""
_NORM_NAIVE = _DE_NAIVE.replace("print(json.dumps({'test_condition': test, 'reference_condition': ref, 'de_genes': de, 'n_de_genes': len(de),\n                  'up_genes': sorted(g for g in de if lfc[g] > 0), 'down_genes': sorted(g for g in de if lfc[g] < 0),",
    "print(json.dumps({'test_condition': test, 'reference_condition': ref, 'n_de_genes': len(de),\n                  'n_up': int((lfc[de] > 0).sum()), 'n_down': int((lfc[de] < 0).sum()),")
assert _NORM_NAIVE != _DE_NAIVE

_RANK_ORACLE = r"""
d = read_world('.')
X, sheet, meta = d['X'], d['sheet'], d['meta']
test, ref = meta['task']['test_condition'], meta['task']['reference_condition']
res = run_deseq(X.T, sheet, '~condition', ['condition', test, ref], shrink=True)
padj = res['padj'].fillna(1.0)
r = res.dropna(subset=['log2FoldChange'])
raw = r.assign(a=r['log2FoldChange'].abs()).sort_values('a', ascending=False).index[:TOP_K].tolist()
top = r.assign(a=r['shrunk_lfc'].abs()).sort_values('a', ascending=False).index[:TOP_K].tolist()
print(res.loc[raw, ['baseMean', 'log2FoldChange', 'lfcSE', 'shrunk_lfc']])
issues = []
if len(set(raw) - set(top)) >= 5:
    issues.append(f"{len(set(raw) - set(top))} of the 20 largest MLE fold changes are low-count genes (median baseMean "
                  f"{res.loc[raw, 'baseMean'].median():.1f}) with noisy, inflated LFCs; ranked on apeGLM-shrunk LFCs instead")
pd.DataFrame({'gene': r.index, 'log2fc': r['shrunk_lfc'].to_numpy(), 'padj': padj[r.index].to_numpy()}).to_csv('ranking.csv', index=False)
print(json.dumps({'test_condition': test, 'reference_condition': ref, 'top_genes': top, 'ranking_table': 'ranking.csv',
                  'n_de_genes': int((padj < 0.05).sum()), 'method': {'fold_change': 'apeGLM-shrunk log2FC (pydeseq2 lfc_shrink)', 'ranking': '|shrunk log2FC|'},
                  'issues_found': issues, 'analysis_usable': True, 'summary': 'Top 20 by shrunk LFC: ' + ', '.join(top[:5])}))
"""

_RANK_NAIVE = _DE_NAIVE.split("padj = res['padj']")[0] + r"""
padj = res['padj'].fillna(1.0)
r = res.dropna(subset=['log2FoldChange'])
top = r.assign(a=r['log2FoldChange'].abs()).sort_values('a', ascending=False).index[:20].tolist()
pd.DataFrame({'gene': r.index, 'log2fc': r['log2FoldChange'].to_numpy(), 'padj': padj[r.index].to_numpy()}).to_csv('ranking.csv', index=False)
print(json.dumps({'test_condition': test, 'reference_condition': ref, 'top_genes': top, 'ranking_table': 'ranking.csv',
                  'n_de_genes': int((padj < 0.05).sum()), 'method': {'fold_change': 'DESeq2 log2FoldChange', 'ranking': '|log2FC|'},
                  'issues_found': [], 'analysis_usable': True, 'summary': 'Top 20: ' + ', '.join(top[:5])}))
"""


scripted("bulkrna.L2.condition_de",
         [partial(_helpers, S.length_slopes, S.run_deseq, S.estimable_design, S.contamination_scan, S.outcome_filter_scan), _DE_COMMON + _CDE_ORACLE],
         [_DE_NAIVE], versions=("2", "1"))


scripted("bulkrna.L2.normalisation",
         [partial(_helpers, S.run_deseq, S.spike_decision), _DE_COMMON + _NORM_ORACLE],
         [_NORM_NAIVE])


scripted("bulkrna.L2.lfc_ranking", [partial(_helpers, S.run_deseq), _RANK_ORACLE], [_RANK_NAIVE])


# ---------------------------------------------------------------- L2 design

_DESIGN_ORACLE = r"""
d = read_world('.')
X, sheet, genes, meta = d['X'], d['sheet'], d['genes'], d['meta']
test, ref = meta['task']['test_condition'], meta['task']['reference_condition']
issues = []
print(sheet.to_string())
C, sh, groups = collapse_technical(X, sheet)
if groups:
    r = pair_poisson_ratios(X[groups[0]])
    issues.append(f"technical replicates: {len(groups)} specimens were sequenced on several runs each (same specimen and index; "
                  f"runs differ by Poisson sampling only, median pairwise X2 / chi2(1) median {min(r.values()):.2f}); "
                  f"summed the runs of each specimen (collapseReplicates): {X.shape[1]} runs -> {C.shape[1]} biological samples")
al = aliased_factors(sh)
levels = sorted(sheet['condition'].unique())
if levels[0] == test:
    issues.append(f"reference level: ~condition takes the alphabetically first level '{levels[0]}' (the test condition) as "
                  f"the reference, so its one coefficient is {ref} over {test}; contrast set explicitly {test} over {ref} (relevel)")
base = {'test_condition': test, 'reference_condition': ref}
if al:
    tab = pd.crosstab(sh['condition'], sh[al[0]])
    issues.append(f"condition confounded with {', '.join(al)}: " + '; '.join(f'{c}: ' + ', '.join(f'{b} {tab.loc[c, b]}' for b in tab.columns) for c in tab.index)
                  + ' -> every sample of a condition shares one level; the treatment effect is aliased with it and not estimable')
    print(json.dumps({**base, 'estimable': False, 'aliased_with': al, 'de_genes': [], 'n_de_genes': 0, 'up_genes': [], 'down_genes': [],
                      'de_table': None, 'median_log2fc': None,
                      'method': {'design': 'none: condition aliased with ' + ', '.join(al), 'normalization': 'n/a', 'samples_used': 'all'},
                      'issues_found': issues, 'analysis_usable': False, 'summary': 'Not estimable: condition and ' + ', '.join(al) + ' coincide; no DE genes can be attributed to the treatment.'}))
else:
    design = estimable_design(sh)
    res = run_deseq(C.T, sh, design, ['condition', test, ref])
    padj = res['padj'].fillna(1.0)
    de = sorted(res.index[padj < 0.05])
    lfc = res['log2FoldChange']
    pd.DataFrame({'gene': res.index, 'log2fc': lfc.to_numpy(), 'padj': padj.to_numpy()}).to_csv('de_results.csv', index=False)
    print(json.dumps({**base, 'estimable': True, 'aliased_with': [], 'de_genes': de, 'n_de_genes': len(de),
                      'up_genes': sorted(g for g in de if lfc[g] > 0), 'down_genes': sorted(g for g in de if lfc[g] < 0),
                      'de_table': 'de_results.csv', 'median_log2fc': round(float(lfc[res['baseMean'] >= 20].median()), 4),
                      'method': {'design': design, 'normalization': 'DESeq2 median-of-ratios', 'samples_used': ', '.join(C.columns)},
                      'issues_found': issues, 'analysis_usable': True, 'summary': f'{len(de)} genes at FDR 5% ({design}, {C.shape[1]} biological samples).'}))
"""

_DESIGN_NAIVE = _DESEQ_DEFAULTS + r"""coeff = [c for c in st.LFC.columns if c.startswith('condition[')][0]
st.lfc_shrink(coeff=coeff)  # apeGLM-shrunk effect sizes, as the pydeseq2 tutorial does
res = st.results_df
padj = res['padj'].fillna(1.0)
de = sorted(res.index[padj < 0.05])
lfc = res['log2FoldChange']
pd.DataFrame({'gene': res.index, 'log2fc': lfc.to_numpy(), 'padj': padj.to_numpy()}).to_csv('de.csv', index=False)
print(json.dumps({'test_condition': test, 'reference_condition': ref, 'estimable': True, 'aliased_with': [],
                  'de_genes': de, 'n_de_genes': len(de),
                  'up_genes': sorted(g for g in de if lfc[g] > 0), 'down_genes': sorted(g for g in de if lfc[g] < 0),
                  'de_table': 'de.csv', 'median_log2fc': round(float(lfc[res['baseMean'] >= 20].median()), 4),
                  'method': {'design': '~condition', 'normalization': 'DESeq2 default', 'samples_used': 'all'},
                  'issues_found': [], 'analysis_usable': True, 'summary': f'{len(de)} DE genes.'}))
"""


scripted("bulkrna.L2.design",
         [partial(_helpers, S.run_deseq, S.estimable_design, S.pair_poisson_ratios, S.collapse_technical, S.aliased_factors), _DESIGN_ORACLE],
         [_DESIGN_NAIVE])
