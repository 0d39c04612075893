"""Scripted agents of the crispr track (gold side): code cells run in the sandbox's persistent kernel with the world's
public files in the working directory. The oracle inlines the reference analysis (worlds/crispr/analysis.py and the
L1 detectors of solvers.py, as source text) and adds data-driven diagnostics that name only what they find; the naive
agent runs tool defaults without checking (L1: loads the table and accepts it; L2: analysis.naive_table - median
normalisation over all guides, no count filter, replicates pooled, test against the initial sample, no copy-number
correction, no scaling between lines). The L1 oracle's issue per defect is data, in scripted.yaml; worlds/scaffold.py
registers the agents and writes that cell.
"""
from __future__ import annotations

import inspect

from worlds.crispr import analysis as A
from worlds.scaffold import l1_oracle_cell, scripted


def _analysis_cell() -> str:
    src = inspect.getsource(A).replace("from __future__ import annotations", "")
    return src + "\nprint('reference analysis loaded')\n"


def _l1_helpers() -> str:
    from worlds.crispr import solvers as S

    consts = [f"{k} = {getattr(S, k)!r}" for k in ("GINI_BOTTLENECK", "ZERO_FRACTION_BOTTLENECK", "LOW_DEPTH_RATIO",
                                                    "LOW_DEPTH_MEDIAN", "SWAP_PC_LFC")]
    body = "\n\n".join(inspect.getsource(f) for f in (S.read_raw, S.recover_counts, S.gini_log, S.detect))
    head = "import json\nfrom pathlib import Path\nimport numpy as np\nimport pandas as pd\n\n\nclass _A:\n    gini = staticmethod(gini)\n\n\nA = _A\n"
    return head + "\n".join(consts) + "\n\n\n" + body + "\nprint('detectors loaded')\n"


_L1_HELPERS = r"""
print('rows', v['n_rows'], 'library', v['n_library'], 'findings', f)
print('depth', v['total_reads'], 'gini', v['initial_gini'], 'PC lfc', v['positive_control_lfc'])


def corrected_table(name, rename=None, recover=False):
    t = d['table'].drop_duplicates('sgRNA').reset_index(drop=True).copy()
    if recover:
        for s in d['samples']:
            t[s] = recover_counts(np.nan_to_num(t[s].to_numpy(float)))[0].astype(int)
    if rename:
        t = t.rename(columns=rename)
        t = t[['sgRNA', 'Gene'] + sorted(c for c in t.columns if c not in ('sgRNA', 'Gene'))]
    t.to_csv(name, sep='\t', index=False)
    return name


def other_ginis():
    return ', '.join(f"{s} {g:.2f}" for s, g in v['gini'].items() if s not in v['bottlenecked_samples'])


def swapped_columns():
    ren = {}
    for line in v['swapped_lines']:
        ren[f'{line}.initial'], ren[f'{line}.final'] = f'{line}.final', f'{line}.initial'
    return ren
"""

_L1_NAIVE = r"""
import json
import pandas as pd

t = pd.read_csv('counts.txt', sep='\t')
print(t.describe())
report = {'assessment': 'usable', 'issues': [],
          'summary': f'Loaded {len(t)} sgRNAs x {t.shape[1] - 2} samples; the counts look fine.'}
print(json.dumps(report))
"""

scripted("crispr.L1.integrity", [_analysis_cell, _l1_helpers, l1_oracle_cell(__file__, _L1_HELPERS)], [_L1_NAIVE])


# ---------------------------------------------------------------- L2

# the oracle's report: hits normalised on the non-targeting controls (the cell goes on with the method's filtering)
_ORACLE_REPORT = r"""report = {
    'hits': hits, 'n_hits': len(hits), 'gene_table': 'gene_table.csv',
    'method': {'normalization': 'median-ratio size factors on the non-targeting control sgRNAs',
"""

_L2_ORACLE = r"""
d = read_screen('.')
task = d['meta']['task']
kind = KIND
fn = {'essential': essential_analysis, 'selective': selective_analysis, 'resistance': resistance_analysis}[kind]
direction = 'up' if kind == 'resistance' else 'down'
t, info = fn(d)
hits = hits_of(t, direction)
t[['gene', 'lfc', 'fdr', 'n_guides']].to_csv('gene_table.csv', index=False)
print(t.sort_values('fdr').head(15).to_string())
issues = []
lines = [task['cell_line']] if 'cell_line' in task else [task['query_line'], task['comparison_line']]
# 1. normalisation: does a median over all guides move the non-targeting controls?
for line in lines:
    test, ref = ('drug', 'vehicle') if kind == 'resistance' else ('final', 'initial')
    g_all = guide_lfc(d, line, test, ref, controls_norm=False)
    shift = float(g_all.loc[g_all['category'] == 'non_targeting', 'lfc'].median())
    if abs(shift) > 0.4:
        frac = float((guide_lfc(d, line, test, ref)['lfc'] < -1).mean())
        issues.append(f'{line}: strong depletion of a large share of guides ({frac:.0%} of guides below -1) shifts a median '
                      f'normalisation over all guides: non-targeting controls would sit at {shift:+.2f}; normalised to the '
                      f'non-targeting controls instead')
# 2. copy number: amplified genes deplete by cutting toxicity
if d['cn'] is not None:
    amp = {ln: info.get(ln, info).get('amplified_genes', []) if kind == 'selective' else info.get('amplified_genes', []) for ln in lines}
    for ln, genes in amp.items():
        if len(genes) >= 3:
            gam = info[ln]['gamma'] if kind == 'selective' else info['gamma']
            if gam > 0.05:
                issues.append(f'{ln}: copy-number amplified genes ({", ".join(genes)}; CN >= 5) deplete together '
                              f'({gam:.2f} log2 per extra copy): Cas9 cutting toxicity at amplified loci, not gene '
                              f'function; corrected their guides for copy number')
# 3. under-represented guides: genes losing most guides to the initial-count filter
for line in lines[:1]:
    g = guide_lfc(d, line, 'final' if kind != 'resistance' else 'drug', 'initial')
    low = g[(g['category'] == 'targeting') & (g['initial'] < MIN_INITIAL)]
    per = low.groupby('gene').size()
    many = sorted(per[per >= 5].index)
    if len(many) >= 3 and kind != 'resistance':
        lfc_low = float(low['lfc'].median())
        issues.append(f'under-represented guides in the initial library: {len(low)} guides below {MIN_INITIAL:.0f} '
                      f'normalised initial reads, concentrated in {", ".join(many)}; their fold changes are noise / '
                      f'bottleneck drift (median LFC {lfc_low:+.2f}), so low-count guides were filtered out before '
                      f'gene-level testing')
# 4. two lines: dynamic range
if kind == 'selective':
    q, o = task['query_line'], task['comparison_line']
    r = info[q]['scale'] / info[o]['scale']
    if r > 1.5 or r < 0.67:
        issues.append(f'the screens differ in dynamic range: positive-control (core-essential) guides deplete '
                      f'{info[q]["scale"]:.2f} log2 in {q} vs {info[o]["scale"]:.2f} in {o} (a longer or stronger screen); '
                      f'raw LFC differences would call shared core essentials {q}-selective, so each line was scaled by '
                      f'its essential-control range')
# 5. drug screens: the vehicle arm
if kind == 'resistance':
    veh = hits_of(gene_test(guide_lfc(d, task['cell_line'], 'vehicle', 'initial'), 'up'), 'up')
    if len(veh) >= 2:
        issues.append(f'genes enriched in the vehicle arm as well ({", ".join(veh)}): their knockout confers a '
                      f'proliferation advantage independent of the drug; resistance was tested drug vs vehicle, not vs the '
                      f'initial sample')
""" + _ORACLE_REPORT + r"""               'filtering': f'sgRNAs with < {MIN_INITIAL:.0f} normalised initial reads removed; genes need >= {MIN_GUIDES} sgRNAs',
               'test': 'replicate-averaged sgRNA log2 fold changes; gene = median sgRNA LFC; one-sided Mann-Whitney test of '
                       'the gene\'s sgRNAs against the non-targeting sgRNAs; Benjamini-Hochberg FDR; hit: FDR < 0.05 and '
                       f'|LFC| >= {MIN_EFFECT}',
               'corrections': 'copy-number (cutting toxicity) correction of amplified genes; lines scaled by essential-control '
                              'range; drug vs vehicle'},
    'issues_found': issues,
    'analysis_usable': True,
    'summary': f'{len(hits)} hits at FDR 5%: {", ".join(hits[:12])}.',
}
print(json.dumps(report))
"""

def _naive_cell(table: str, test: str) -> str:
    """The naive agent's L2 cell: hits of a tool-default gene table (`table`: the lines that set `t` and `hits`),
    reported with the test it ran (`test`: its text as a literal)."""
    return "\nd = read_screen('.')\n" + table + r"""
t[['gene', 'lfc', 'fdr']].to_csv('gene_results.csv', index=False)
print(t.sort_values('fdr').head(15).to_string())
report = {
    'hits': hits, 'n_hits': len(hits), 'gene_table': 'gene_results.csv',
    'method': {'normalization': 'median-ratio normalisation over all sgRNAs (tool default)', 'filtering': 'none',
               'test': """ + test + r""",
               'corrections': 'none'},
    'issues_found': [], 'analysis_usable': True,
    'summary': f'{len(hits)} hits: {", ".join(hits[:12])}.',
}
print(json.dumps(report))
"""


_L2_NAIVE = _naive_cell("t = naive_table(d)\ndirection = 'up' if KIND == 'resistance' else 'down'\nhits = hits_of(t, direction)",
                        r"'Mann-Whitney of each gene\'s sgRNA LFCs (all replicate columns) against all sgRNAs, BH'")

KINDS = {"crispr.L2.essential": "essential", "crispr.L2.selective": "selective", "crispr.L2.resistance": "resistance"}


for _fam, _kind in KINDS.items():
    scripted(_fam, [_analysis_cell, f"KIND = {_kind!r}\n" + _L2_ORACLE], [_analysis_cell, f"KIND = {_kind!r}\n" + _L2_NAIVE])


# ---------------------------------------------------------------- L2 guide-level family

_GL_ORACLE = r"""
d = read_screen('.')
line = d['meta']['task']['cell_line']
t, info = guide_level_analysis(d)
hits = hits_of(t, 'down')
t[['gene', 'lfc', 'fdr', 'n_guides']].to_csv('gene_table.csv', index=False)
print(t.sort_values('fdr').head(15).to_string())
v = guide_diagnostics(d)
print({k: v[k] for k in sorted(v)})
issues = []
if len(v['single_guide_genes']) >= 3:
    issues.append(f"{len(v['single_guide_genes'])} genes ({', '.join(v['single_guide_genes'])}) have one outlier sgRNA "
                  f"below -2 log2 while their other sgRNAs are neutral: a single guide (off-target or outlier) would "
                  f"carry the gene call; gene level uses the median sgRNA and a rank test, so >= 2 concordant guides are needed")
if len(v['multi_locus_genes']) >= 3:
    issues.append(f"{len(v['multi_locus_genes'])} genes ({', '.join(v['multi_locus_genes'])}) have several sgRNAs with "
                  f"multiple perfect-match sites (paralogs / duplicated loci): multi-cut toxicity depletes them regardless "
                  f"of gene function; sgRNAs with > 1 perfect match removed")
if len(v['not_expressed_depleted']) >= 2:
    issues.append(f"genes not expressed in {line} (TPM < 1) deplete: {', '.join(v['not_expressed_depleted'])}; a "
                  f"knockout of a silent gene removes no function, so this is a gene-independent (off-target / cutting) "
                  f"artefact; non-expressed genes were not tested")
if v['t0_plasmid_discordant_share'] > 0.05:
    issues.append(f"the T0 sample differs from the plasmid library for {v['t0_plasmid_discordant_share']:.0%} of sgRNAs "
                  f"(more than 2-fold; Gini {v['gini_plasmid']:.2f} plasmid vs {v['gini_t0']:.2f} T0): a transduction "
                  f"bottleneck; the endpoint is compared with T0, not with the plasmid")
""" + _ORACLE_REPORT + r"""               'filtering': f'final vs T0; sgRNAs with > 1 perfect-match site and sgRNAs with < {MIN_INITIAL:.0f} '
                            f'normalised T0 reads removed; genes with TPM < 1 not tested; genes need >= {MIN_GUIDES} sgRNAs',
               'test': 'replicate-averaged sgRNA LFC; gene = median sgRNA LFC; one-sided Mann-Whitney against the '
                       'non-targeting sgRNAs; Benjamini-Hochberg FDR; hit: FDR < 0.05 and LFC <= -0.5',
               'corrections': 'none beyond the filters'},
    'issues_found': issues, 'analysis_usable': True,
    'summary': f'{len(hits)} hits at FDR 5%: {", ".join(hits[:12])}.',
}
print(json.dumps(report))
"""

_GL_NAIVE = _naive_cell("t = guide_naive_table(d)\nhits = hits_of(t, 'down')",
                        "'sgRNA z-scores against all sgRNAs (endpoint vs library), Fisher-combined per gene, BH'")

scripted("crispr.L2.guide_level", [_analysis_cell, _GL_ORACLE], [_analysis_cell, _GL_NAIVE])
