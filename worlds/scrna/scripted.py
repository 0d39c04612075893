"""Scripted agents of the scrna track (gold side): per family, the oracle's and the naive agent's code cells,
registered through worlds/scaffold.py on import of worlds.scrna.solvers (the track's solver_module); the L1
oracle's issue per defect is data, in scripted.yaml.

The oracle inlines the solvers' 10x readers, lineage scores and tests as source text (numpy, scipy, pandas in the
sandbox); the naive agent loads the matrix with scanpy and runs its defaults.
"""
from __future__ import annotations
import gzip
import inspect
from functools import partial
import json
from pathlib import Path
import numpy as np
import pandas as pd
from benchmark.suite.registry import solver
from graders.registry import product_validator
from worlds.scaffold import l1_oracle_cell, scripted

from worlds.scrna.solvers import (  # noqa: F401 - the reference helpers the cells carry as source
    AMBIENT_FINDING,
    DOUBLET_B_FRAC,
    DOUBLET_MYELOID_FRAC,
    DOUBLET_RATE_FINDING,
    EMPTY_MAX_FRACTION,
    EXPECTED_LINEAGE,
    LINEAGE_MARKERS,
    LINEAGE_SCALE,
    MARKER_MIN_AUROC,
    MIN_CELLS,
    MTX_DIR,
    MYELOID_LABELS,
    OFFSET_GAIN,
    _bh,
    _cells_aligned,
    _open,
    cell_level_wilcoxon,
    detect,
    label_consistency,
    lineage_calls,
    lineage_scores,
    lognorm,
    marker_table,
    one_vs_rest_top,
    one_vs_rest_z,
    pseudobulk,
    read_world,
    run_deseq,
)

# ---------------------------------------------------------------- scripted agents (oracle / naive)
# Cells run in the sandbox's persistent kernel, with the world's public files in the working directory. They import
# only the standard library and the sandbox's packages: the oracle's helpers are this module's plain functions,
# inlined as source text.

_HELPER_CONSTANTS = ("MARKER_MIN_AUROC", "MTX_DIR", "LINEAGE_MARKERS", "LINEAGE_SCALE", "EXPECTED_LINEAGE", "MYELOID_LABELS",
                     "DOUBLET_MYELOID_FRAC", "DOUBLET_B_FRAC", "DOUBLET_RATE_FINDING", "AMBIENT_FINDING", "OFFSET_GAIN",
                     "MIN_CELLS", "EMPTY_MAX_FRACTION")


def _stable_repr(v) -> str:
    """repr with sets sorted: a set's repr order varies between processes, and the cells must be the same bytes."""
    if isinstance(v, (set, frozenset)):
        return "{" + ", ".join(sorted(map(_stable_repr, v))) + "}" if v else "set()"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_stable_repr(k)}: {_stable_repr(x)}" for k, x in v.items()) + "}"
    if isinstance(v, tuple):
        return "(" + ", ".join(map(_stable_repr, v)) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, list):
        return "[" + ", ".join(map(_stable_repr, v)) + "]"
    return repr(v)


def _helpers_cell(*fns) -> str:
    head = ["import gzip", "import json", "from pathlib import Path", "", "import numpy as np", "import pandas as pd", ""]
    consts = [f"{k} = {_stable_repr(globals()[k])}" for k in _HELPER_CONSTANTS]
    body = "\n\n".join(inspect.getsource(f) for f in (_open, read_world, *fns))
    return "\n".join(head + consts) + "\n\n\n" + body + "\nprint('reference helpers loaded')\n"


_L1_HELPERS = r"""
import gzip as _gz
from scipy.io import mmwrite
from scipy.sparse import csr_matrix

print('barcodes', v['n_barcodes_in_matrix'], 'findings', v['findings'])


def write_mtx(name, cells_x_genes):
    with _gz.open(name, 'wb') as fh:
        mmwrite(fh, csr_matrix(cells_x_genes.T))
    return name


def recovered_counts():
    E = np.expm1(d['X'])
    nz = np.where(E > 0, E, np.inf).min(1)
    return write_mtx('recovered_counts.mtx.gz', np.rint(E / np.where(np.isfinite(nz), nz, 1.0)[:, None]))


def realigned_features():
    out = 'features_corrected.tsv.gz'
    with _gz.open(out, 'wt') as fh:
        fh.write(''.join(f'{g}\t{g}\tGene Expression\n' for g in v['corrected_features']))
    return out


def relabelled_cells():
    a_, b_ = v['swapped_labels']
    cells = d['cells'].copy()
    m_a, m_b = cells['cell_type'] == a_, cells['cell_type'] == b_
    cells.loc[m_a, 'cell_type'], cells.loc[m_b, 'cell_type'] = b_, a_
    cells.to_csv('cells_corrected.csv', index=False)
    return 'cells_corrected.csv'


def decontaminated_counts():
    X = d['X']
    soup = X.sum(0) / X.sum()
    rho = v['ambient_fraction']
    corr = np.maximum(X - rho * X.sum(1, keepdims=True) * soup[None, :], 0)
    return write_mtx('decontaminated_counts.mtx.gz', np.rint(corr))
"""

_L1_NAIVE = r"""
import json
import scanpy as sc

adata = sc.read_10x_mtx('filtered_feature_bc_matrix')
print(adata)
report = {'assessment': 'usable', 'issues': [],
          'summary': f'Loaded {adata.n_obs} cells x {adata.n_vars} genes with scanpy; the data look fine.'}
print(json.dumps(report))
"""


scripted("scrna.L1.integrity",
         [partial(_helpers_cell, lognorm, lineage_scores, lineage_calls, label_consistency, detect),
          l1_oracle_cell(__file__, _L1_HELPERS)],
         [_L1_NAIVE])


_MARKERS_NAIVE = r"""
import json
import numpy as np
import pandas as pd
import scanpy as sc

meta = json.load(open('meta.json'))
target = meta['task']['target_population']
adata = sc.read_10x_mtx('filtered_feature_bc_matrix')
cells = pd.read_csv('cells.csv').set_index('barcode')
adata.obs = adata.obs.join(cells)
# rank_genes_groups straight on the matrix as loaded (the tool does not normalise), target vs the pooled rest
sc.tl.rank_genes_groups(adata, 'cell_type', groups=[target], method='wilcoxon')
df = sc.get.rank_genes_groups_df(adata, group=target)
df[['names', 'scores']].rename(columns={'names': 'gene', 'scores': 'score'}).to_csv('markers.csv', index=False)
top = df['names'].head(10).tolist()
markers = df[(df['pvals_adj'] < 0.05) & (df['logfoldchanges'] > 1)]['names'].tolist()
print(df.head(10))
report = {
    'target_population': target, 'top_markers': top, 'marker_genes': markers, 'marker_table': 'markers.csv',
    'method': {'normalization': 'none (counts as loaded)', 'test': 'wilcoxon (scanpy rank_genes_groups)',
               'comparison': 'target vs rest', 'covariates': 'none'},
    'issues_found': [], 'analysis_usable': True,
    'summary': f'Top markers of {target}: {", ".join(top[:5])}.',
}
print(json.dumps(report))
"""

_MARKERS_ORACLE = r"""
d = read_world('.')
X, genes = d['X'], d['symbols']
cells = _cells_aligned(d)
labels = cells['cell_type'].to_numpy()
lane = cells['sample'].to_numpy()
target = d['meta']['task']['target_population']
t = labels == target
# markers: minimum pairwise AUROC against every other population, within lane (blocked), on log1p(CP10k)
tab = marker_table(X, genes, labels, target, lane)
tab[['gene', 'min_auroc']].rename(columns={'min_auroc': 'score'}).to_csv('marker_table.csv', index=False)
spec = tab[tab['mean_target'] > tab['max_mean_other']]
top = spec['gene'].head(10).tolist()
markers = spec[spec['min_auroc'] >= MARKER_MIN_AUROC]['gene'].tolist() or top[:1]
print(spec.head(12).to_string())
issues = []
# diagnostics: sequencing depth, lane/population confounding, specificity of pooled rankings
tot = X.sum(1)
depth = float(np.median(tot[t]) / np.median(tot[~t]))
if depth > 2 or depth < 0.5:
    raw_top = one_vs_rest_top(X, genes, labels, target, normalise=False)
    issues.append(f'sequencing depth differs: {target} cells have {depth:.1f}x the median UMIs per cell of the other cells; '
                  f'ranked without normalisation, abundant genes ({", ".join(g for g in raw_top if g not in top)}) come '
                  f'first, so counts were scaled to 10k per cell and log-transformed before testing')
lanes = sorted(set(lane))
fr = {s: (float((t & (lane == s)).sum() / t.sum()), float((~t & (lane == s)).sum() / (~t).sum())) for s in lanes}
worst = max(lanes, key=lambda s: (fr[s][0] - fr[s][1], s))  # the lane over-represented among target cells
if fr[worst][0] - fr[worst][1] > 0.5 and len(lanes) == 2:
    s1, s2 = lanes
    m1, m2 = X[~t & (lane == s1)], X[~t & (lane == s2)]
    cp1 = (m1 / m1.sum(1, keepdims=True)).mean(0) * 1e4
    cp2 = (m2 / m2.sum(1, keepdims=True)).mean(0) * 1e4
    lfc = np.log2(cp2 + 1) - np.log2(cp1 + 1)
    strong = [genes[i] for i in np.argsort(-np.abs(lfc)) if (cp1[i] + cp2[i]) / 2 >= 20 and abs(lfc[i]) > 1][:8]
    issues.append(f'population confounded with lane (batch): lane {worst} holds {fr[worst][0]:.0%} of {target} cells but '
                  f'only {fr[worst][1]:.0%} of the others; among non-target cells, genes differing between lanes (stress / '
                  f'immediate-early: {", ".join(strong)}) would pass as markers, so every comparison was made within lane')
naive_top = one_vs_rest_top(X, genes, labels, target, normalise=True)
ln = lognorm(X)
others = [p for p in sorted(set(labels)) if p != target and (labels == p).sum() >= MIN_CELLS]
spec_set = set(spec['gene'])
nonspec = [g for g in naive_top if g not in spec_set]
if len(nonspec) >= 4:
    where = {g: max(others, key=lambda p: ln[labels == p, genes.index(g)].mean()) for g in nonspec}
    issues.append('the pooled one-vs-rest ranking is not specific: ' + ', '.join(f'{g} (higher in {where[g]})' for g in nonspec)
                  + '; these genes are shared with another population, so markers were required to beat every '
                    'population pairwise')
report = {
    'target_population': target,
    'top_markers': top,
    'marker_genes': markers,
    'marker_table': 'marker_table.csv',
    'method': {'normalization': 'library-size normalisation to 10k counts per cell (CP10k), then log1p',
               'test': 'AUROC (Wilcoxon effect size) against each other population; genes ranked by the minimum pairwise '
                       'AUROC (scran findMarkers pval.type="all" logic)',
               'comparison': 'pairwise against every other population (>= 5 cells), each within lane',
               'covariates': 'lane (10x library) as a blocking factor: AUROCs computed within each lane and combined'},
    'issues_found': issues,
    'analysis_usable': True,
    'summary': f'{len(markers)} genes separate {target} from every other population (min pairwise AUROC >= '
               f'{MARKER_MIN_AUROC}); best: {", ".join(top[:5])}.',
}
print(json.dumps(report))
"""


_MARKERS_HELPERS = partial(_helpers_cell, lognorm, _cells_aligned, marker_table, one_vs_rest_z, one_vs_rest_top)
scripted("scrna.L2.markers", [_MARKERS_HELPERS, _MARKERS_ORACLE], [_MARKERS_NAIVE])


_DE_ORACLE = r"""
d = read_world('.')
X, genes = d['X'], d['symbols']
cells = _cells_aligned(d)
task = d['meta']['task']
test, ref = task['test_condition'], task['reference_condition']
# donor-level pseudobulk per compartment; one DESeq2 fit per compartment, lane as covariate where it is estimable
pb, pmeta = pseudobulk(X, cells)
pb.columns = genes
print(pmeta.to_string())
sig_parts, lfc_parts, designs, tables = [], {}, {}, []
for comp_name in ('lymphoid', 'myeloid'):
    sel = (pmeta['compartment'] == comp_name).to_numpy()
    m = pmeta[sel]
    if m.groupby('condition').size().reindex([test, ref]).fillna(0).min() < 2:
        continue
    terms = ['lane'] if 'lane' in m and m.groupby('condition')['lane'].nunique().max() > 1 else []
    design = '~' + ' + '.join(terms + ['condition'])
    designs[comp_name] = design
    res = run_deseq(pb[sel], m, design, ['condition', test, ref])
    tables.append(pd.DataFrame({'gene': res.index, 'log2fc': res['log2FoldChange'].to_numpy(),
                                'padj': res['padj'].fillna(1.0).to_numpy(), 'compartment': comp_name}))
    res = res.dropna(subset=['padj'])
    s_ = res[(res['padj'] < 0.05) & (res['log2FoldChange'].abs() > 0.5)]
    print(comp_name, design, len(s_), s_.sort_values('padj').head(10)[['log2FoldChange', 'padj']].round(4).to_dict('index'))
    sig_parts.append(s_)
    for g in s_.index:
        lfc_parts.setdefault(g, {})[comp_name] = float(s_.loc[g, 'log2FoldChange'])
de = sorted(set().union(*[set(s.index) for s in sig_parts])) if sig_parts else []
up = sorted(g for g in de if np.mean(list(lfc_parts[g].values())) > 0)
down = sorted(g for g in de if np.mean(list(lfc_parts[g].values())) < 0)
# per-gene table: each gene's result in the compartment where its condition effect is strongest (smallest padj)
tab = pd.concat(tables).sort_values(['gene', 'padj', 'compartment']).drop_duplicates('gene').set_index('gene')
tab = tab.reindex(genes)  # genes filtered out before testing (too few donors express them): not significant
tab['padj'] = tab['padj'].fillna(1.0)
tab.rename_axis('gene').reset_index()[['gene', 'log2fc', 'padj', 'compartment']].to_csv('de_results.csv', index=False)
issues = []
# composition
comp = cells.assign(myeloid=cells['cell_type'].isin(MYELOID_LABELS)).groupby('condition')['myeloid'].mean()
if abs(comp[test] - comp[ref]) > 0.15:
    issues.append(f'cell-type composition differs between conditions: myeloid fraction {comp[test]:.0%} in {test} vs '
                  f'{comp[ref]:.0%} in {ref}; pooled-cell DE would report cell-type identity genes as condition effects, '
                  f'so DE was tested within each compartment (myeloid, lymphoid)')
# lane structure
lanes = cells.groupby('lane')['condition'].agg(lambda s: sorted(set(s)))
single = {ln_: c[0] for ln_, c in lanes.items() if len(c) == 1}
if single:
    donors = cells.groupby('lane')['donor'].agg(lambda s: sorted(set(s)))
    issues.append('lane (batch) partially confounded with condition: ' + '; '.join(
        f'lane {ln_} holds only {c} donors ({", ".join(donors[ln_])})' for ln_, c in single.items())
        + '; lane was included as a covariate (design ' + ', '.join(f'{k}: {v}' for k, v in designs.items()) + ')')
# pseudoreplication
cl = cell_level_wilcoxon(X, genes, cells['condition'].to_numpy(), test)
n_cell = int(((cl['padj'] < 0.05) & (cl['log2fc'].abs() > 0.25)).sum())
if n_cell >= 3 * len(de) + 20 and not issues:
    issues.append(f'pseudoreplication: a cell-level Wilcoxon test treating cells as independent replicates calls {n_cell} '
                  f'genes, the donor-level pseudobulk test {len(de)}; cells of one donor are not independent, so the donor '
                  f'is the unit of replication ({cells["donor"].nunique()} donors)')
report = {
    'test_condition': test, 'reference_condition': ref,
    'de_genes': de, 'n_de_genes': len(de), 'up_genes': up, 'down_genes': down, 'de_table': 'de_results.csv',
    'method': {'unit_of_replication': 'donor: pseudobulk (sum of UMI counts) per donor x compartment',
               'test': 'pydeseq2 Wald test per compartment (myeloid, lymphoid), BH FDR 5%, |log2FC| > 0.5',
               'normalization': 'DESeq2 median-of-ratios size factors on pseudobulk counts',
               'covariates': 'compartment (separate fits); lane where it varies within a condition: '
                             + ', '.join(f'{k}: {v}' for k, v in designs.items())},
    'issues_found': issues,
    'analysis_usable': True,
    'summary': f'Donor-level pseudobulk DE within compartments: {len(de)} genes at FDR 5% ({len(up)} up, {len(down)} down in '
               f'{test}): {", ".join(de[:10])}.',
}
print(json.dumps(report))
"""

# the task's two conditions, as a naive cell reads them
_CONDITIONS = "meta = json.load(open('meta.json'))\ntest, ref = meta['task']['test_condition'], meta['task']['reference_condition']\n"


def _per_cell(test: str, normalization: str, summary: str) -> str:
    """The end of a naive condition cell's report: cells as the unit of replication, no covariate, no issue (`test`,
    `normalization` and `summary` as the cell's literals)."""
    return (f"    'method': {{'unit_of_replication': 'cell', 'test': {test},\n"
            f"               'normalization': {normalization}, 'covariates': 'none'}},\n"
            "    'issues_found': [], 'analysis_usable': True,\n"
            f"    'summary': {summary},\n}}\nprint(json.dumps(report))\n")

_DE_NAIVE = r"""
import json
import pandas as pd
import scanpy as sc

""" + _CONDITIONS + r"""adata = sc.read_10x_mtx('filtered_feature_bc_matrix')
cells = pd.read_csv('cells.csv').set_index('barcode')
adata.obs = adata.obs.join(cells)
sc.pp.normalize_total(adata, target_sum=1e4)
sc.pp.log1p(adata)
sc.tl.rank_genes_groups(adata, 'condition', groups=[test], reference=ref, method='wilcoxon')
df = sc.get.rank_genes_groups_df(adata, group=test)
sig = df[df['pvals_adj'] < 0.05]
df[['names', 'logfoldchanges', 'pvals_adj']].set_axis(['gene', 'log2fc', 'padj'], axis=1).to_csv('de.csv', index=False)
print(sig.head(20))
report = {
    'test_condition': test, 'reference_condition': ref,
    'de_genes': sig['names'].tolist(), 'n_de_genes': int(len(sig)),
    'up_genes': sig[sig['logfoldchanges'] > 0]['names'].tolist(), 'down_genes': sig[sig['logfoldchanges'] < 0]['names'].tolist(),
    'de_table': 'de.csv',
""" + _per_cell("'wilcoxon (scanpy rank_genes_groups), BH-adjusted p < 0.05'", "'normalize_total (1e4) + log1p'",
                 "f'{len(sig)} genes differ between {test} and {ref}.'")


_DE_HELPERS = partial(_helpers_cell, lognorm, _bh, _cells_aligned, pseudobulk, run_deseq, cell_level_wilcoxon)
scripted("scrna.L2.condition_de", [_DE_HELPERS, _DE_ORACLE], [_DE_NAIVE])


# ---------------------------------------------------------------- composition (differential abundance)

from worlds.scrna.solvers import (  # noqa: E402 - the composition helpers the cells carry as source
    DA_MIN_MEAN,
    LANE_FDR,
    _called,
    da_test,
    donor_counts,
    lane_effect_p,
    pooled_fisher,
)

_DA_ORACLE = r"""
cells = pd.read_csv('cells.csv', dtype=str, keep_default_na=False)
task = json.load(open('meta.json'))['task']
test, ref = task['test_condition'], task['reference_condition']
C, info = donor_counts(cells)
print(C.assign(condition=info['condition'], lane=info['lane']).to_string())
# donor-level differential abundance: counts per donor x population, median-of-ratios size factors over the tested
# populations (most populations unchanged), OLS ~ [lane +] condition per population, BH; lane enters only when the
# data show a lane effect (within-condition lane contrast BH padj < LANE_FDR in some population), else ~ condition
res = da_test(C, info, test)
print('lane covariate:', bool(res['lane_covariate'].iloc[0]), '; min lane padj:', round(float(res['lane_padj'].min()), 6))
res[['cell_type', 'log2fc', 'padj']].to_csv('da_results.csv', index=False)
print(res.round(4).to_string())
changed = _called(res)
lfc = dict(zip(res['cell_type'], res['log2fc']))
up = sorted(p for p in changed if lfc[p] > 0)
down = sorted(p for p in changed if lfc[p] < 0)
pooled = pooled_fisher(cells, test)
raw = da_test(C, info, test, normalise=False)
issues = []
# 1. compositional closure: raw shares call populations that the normalised test finds unchanged
extra_raw = [p for p in _called(raw) if p not in changed]
if extra_raw:
    L = np.log2(C[list(res['cell_type'])].to_numpy(float) + 0.5)
    sf = np.median(L - L.mean(0, keepdims=True), axis=1) - np.log2(C.to_numpy(float).sum(1))
    t_ = (info['condition'] == test).to_numpy()
    shift = float(sf[t_].mean() - sf[~t_].mean())
    issues.append(f"compositional closure: {', '.join(up) or 'one population'} expands, so the shares of the unchanged "
                  f"populations fall by one common factor (log2 {shift:+.2f}); a test on raw proportions calls "
                  f"{', '.join(extra_raw)} depleted although their ratios to each other are unchanged; abundance was "
                  f"normalised to the unchanged populations (median-of-ratios) before testing")
# 2. lane: the reference's own lane test (lane term of the within-condition lane contrast, BH padj < LANE_FDR: the
# rule that put lane in the model) found a lane effect, and the lane is unbalanced between conditions
lanes = sorted(set(info['lane']))
lane_pops = list(res.loc[res['lane_padj'] < LANE_FDR, 'cell_type'])
if len(lanes) == 2 and lane_pops:
    tested = list(res['cell_type'])
    L = np.log2(C[tested].to_numpy(float) + 0.5)
    Y = L - np.median(L - L.mean(0, keepdims=True), axis=1)[:, None]
    D = np.vstack([np.ones(len(info)), (info['lane'] == lanes[1]).to_numpy(float),
                   (info['condition'] == test).to_numpy(float)]).T
    beta, *_ = np.linalg.lstsq(D, Y, rcond=None)
    tab = info.groupby(['lane', 'condition']).size().unstack(fill_value=0)
    hit = [(p, beta[1, tested.index(p)]) for p in lane_pops]
    if tab.loc[lanes[1], test] != tab.loc[lanes[1], ref]:
        issues.append('lane (10x library) effect confounded with condition: ' + '; '.join(
            f'{p} is {2 ** abs(b):.1f}x {"lower" if b < 0 else "higher"} in the donors of lane {lanes[1]} whatever their '
            f'condition (lane term BH padj {float(res.loc[res["cell_type"] == p, "lane_padj"].iloc[0]):.2g})'
            for p, b in hit) + f'; lane {lanes[1]} holds {tab.loc[lanes[1], test]} {test} and {tab.loc[lanes[1], ref]} '
            f'{ref} donors, so a test ignoring lane reports it as a condition effect; lane was included as a covariate')
# 3. pseudoreplication: the pooled-cell test calls populations the donor-level test does not
extra_pooled = [p for p in _called(pooled) if p not in changed]
if extra_pooled and not issues:
    issues.append(f"pseudoreplication: a Fisher test on pooled cells (every cell a replicate) calls {', '.join(extra_pooled)} "
                  f"changed; the donor is the unit of replication ({len(C)} donors) and donors differ strongly in "
                  f"composition, so at the donor level none of them changes")
report = {
    'test_condition': test, 'reference_condition': ref,
    'changed_populations': changed, 'n_changed': len(changed), 'increased': up, 'decreased': down,
    'da_table': 'da_results.csv',
    'method': {'unit_of_replication': 'donor: cells counted per donor x population',
               'test': 'OLS on normalised log2 counts per population, t-test of the condition coefficient, BH FDR 5%',
               'normalization': 'median-of-ratios size factors over the tested populations (most populations unchanged)',
               'covariates': (f'lane: a within-condition lane effect is detected (lane term BH padj < {LANE_FDR} in '
                              f"{', '.join(res.loc[res['lane_padj'] < LANE_FDR, 'cell_type'])}), so lane is a covariate "
                              f'for every population') if bool(res['lane_covariate'].iloc[0]) else
                             f'none (no lane term reaches BH padj < {LANE_FDR}, so lane is left out)'},
    'issues_found': issues,
    'analysis_usable': True,
    'summary': f"Donor-level differential abundance: {len(changed)} populations change ({', '.join(up) or 'none'} up, "
               f"{', '.join(down) or 'none'} down in {test}).",
}
print(json.dumps(report))
"""

_DA_NAIVE = r"""
import json
import numpy as np
import pandas as pd
from scipy.stats import false_discovery_control, fisher_exact

""" + _CONDITIONS + r"""cells = pd.read_csv('cells.csv')
t = (cells['condition'] == test).to_numpy()
nt, nr = int(t.sum()), int((~t).sum())
rows = []
for p in sorted(set(cells['cell_type'])):
    m = (cells['cell_type'] == p).to_numpy()
    a, b = int((m & t).sum()), int((m & ~t).sum())
    rows.append({'cell_type': p, 'log2fc': float(np.log2(((a + 0.5) / nt) / ((b + 0.5) / nr))),
                 'pvalue': float(fisher_exact([[a, nt - a], [b, nr - b]]).pvalue)})
df = pd.DataFrame(rows)
df['padj'] = false_discovery_control(df['pvalue'].to_numpy())
df[['cell_type', 'log2fc', 'padj']].to_csv('da.csv', index=False)
print(df)
sig = df[df['padj'] < 0.05]
report = {
    'test_condition': test, 'reference_condition': ref,
    'changed_populations': sorted(sig['cell_type']), 'n_changed': int(len(sig)),
    'increased': sorted(sig[sig['log2fc'] > 0]['cell_type']), 'decreased': sorted(sig[sig['log2fc'] < 0]['cell_type']),
    'da_table': 'da.csv',
""" + _per_cell("\"Fisher's exact test on cell counts per population, BH\"", "'proportion of all cells'",
                 "f'{len(sig)} populations differ in proportion between {test} and {ref}.'")


def _composition_helpers() -> str:
    consts = f"DA_MIN_MEAN = {DA_MIN_MEAN!r}\nLANE_FDR = {LANE_FDR!r}\n"
    return consts + _helpers_cell(_bh, donor_counts, lane_effect_p, da_test, pooled_fisher, _called)


scripted("scrna.L2.composition", [_composition_helpers, _DA_ORACLE], [_DA_NAIVE], versions=("3", "1"))
