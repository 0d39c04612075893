"""Scripted agents of the gwas track (gold side). The oracle inlines worlds/gwas/analysis.py as source text and does
what each world's careful_scientist says; the naive agent trusts the table and the tool defaults (L1: accepts the
file; inflation: P < 5e-8 on the reported P; meta: merges on position and averages BETA; loci: one locus per
significant SNP). The L1 oracle's issue per defect is data, in scripted.yaml; worlds/scaffold.py registers the agents
and writes that cell."""
from __future__ import annotations

from functools import partial

from worlds.gwas import analysis as A
from worlds.scaffold import accepting_cell, l1_oracle_cell, module_cell, scripted, switched

_cell = partial(module_cell, A)

_L1_HELPERS = r"""
def corrected(name):
    t = read('sumstats.tsv').drop_duplicates('SNP')
    for s, r in v['corrected_rows'].items():
        pass
    if 'strand_flip' in f:
        m = t['SNP'].isin(v['strand_flipped_snps'])
        t.loc[m, 'A1'] = t.loc[m, 'A1'].map(COMP)
        t.loc[m, 'A2'] = t.loc[m, 'A2'].map(COMP)
    if 'allele_swap' in f:
        m = t['SNP'].isin(v['swapped_snps'])
        a1 = t.loc[m, 'A1'].copy()
        t.loc[m, 'A1'] = t.loc[m, 'A2'].to_numpy()
        t.loc[m, 'A2'] = a1.to_numpy()
    if 'complemented_eaf' in f:
        t['AF1'] = (1 - t['AF1']).round(4)
    if 'log10_p' in f:
        t['P'] = 10 ** (-t['P'])
    if 'odds_ratio' in f:
        m = t['SNP'].isin(v['beta_or_snps'])
        t.loc[m, 'BETA'] = np.log(t.loc[m, 'BETA'])
    t.drop(columns=['SNP']).to_csv(name, sep='\t', index=False)
    return name
"""

scripted("gwas.L1.integrity", [_cell, l1_oracle_cell(__file__, _L1_HELPERS)], [accepting_cell('sumstats.tsv', 'SNPs', read_args=", sep='\\t'")])


_INFL = r"""
t = read('sumstats.tsv')
gc, lam = gc_table(t)
if NAIVE:
    gc = pd.DataFrame({'SNP': t['SNP'], 'chisq': (t['BETA'] / t['SE']) ** 2, 'p': t['P']})
gc.to_csv('gc_table.csv', index=False)
hits = sorted(gc.loc[gc['p'] < GWS, 'SNP'])
issues = [] if NAIVE or lam < 1.1 else [f'genomic inflation: lambda_GC = {lam:.3f} (median chi-square / 0.455); test statistics divided by lambda (genomic control)']
print(json.dumps({'lambda_gc': None if NAIVE else round(lam, 4), 'hits': hits, 'n_hits': len(hits), 'table': 'gc_table.csv',
                  'issues_found': issues, 'analysis_usable': True, 'summary': f'{len(hits)} genome-wide significant SNPs'}))
"""

_META = r"""
a, b = read('study_A.tsv'), read('study_B.tsv')
use, rho, rho_se = overlap_rho(a, b)
shared = not NAIVE and use != 0.0
m = meta_table(a, b, aligned=not NAIVE, rho=use if shared else 0.0)
m.to_csv('meta.csv', index=False)
hits = sorted(m.loc[m['p'] < GWS, 'SNP'])
n_rec = int((a.merge(b, on='SNP').eval('A1_x != A1_y')).sum())
issues = [] if NAIVE or n_rec == 0 else [f'{n_rec} SNPs coded on a different effect allele (or strand) in study B: aligned alleles (BETA sign flipped) before meta-analysis']
if shared:
    issues.append(f"sample overlap: the two studies' z-scores correlate at rho = {rho:.3f} (SE {rho_se:.3f}) over SNPs without an effect, as shared samples make them (study B's interim biobank release lies within study A's full release); the pooled SE includes the covariance term 2 rho sqrt(wA wB) (Lin & Sullivan 2009)")
print(json.dumps({'hits': hits, 'n_hits': len(hits), 'table': 'meta.csv', 'issues_found': issues, 'analysis_usable': True,
                  'summary': f'{len(hits)} genome-wide significant SNPs in the meta-analysis'}))
"""

_LOCI = r"""
t = read('sumstats.tsv')
ld = pd.read_csv('ld.tsv', sep='\t')
leads = sorted(t.loc[t['P'] < GWS, 'SNP']) if NAIVE else clump(t, ld)
n_sig = int((t['P'] < GWS).sum())
Path('leads.txt').write_text(''.join(f'{x}\n' for x in leads))
issues = [] if NAIVE or n_sig == len(leads) else [f'{n_sig} significant SNPs are correlated (LD r2 >= 0.1 with a stronger SNP): clumped into {len(leads)} independent loci']
print(json.dumps({'n_loci': len(leads), 'lead_snps': 'leads.txt', 'issues_found': issues, 'analysis_usable': True,
                  'summary': f'{len(leads)} independent loci'}))
"""

_LDSC = r"""
t = read('sumstats.tsv')
fit = ldsc(t, pd.read_csv('ldscores.tsv', sep='\t'))
gc, lam = gc_table(t)
tab = pd.DataFrame({'SNP': t['SNP'], 'chisq': (t['BETA'] / t['SE']) ** 2, 'p': t['P']}) if NAIVE else ldsc_table(t, fit['intercept'])
tab.to_csv('chisq.csv', index=False)
hits = sorted(tab.loc[tab['p'] < GWS, 'SNP'])
conf = (fit['intercept'] - 1) / fit['intercept_se'] > 3
issues = [] if NAIVE or not conf else [f"confounding: LD-score intercept {fit['intercept']:.3f} (SE {fit['intercept_se']:.3f}) well above 1; chi-squares divided by the intercept, not by lambda_GC {lam:.2f}"]
print(json.dumps({'lambda_gc': None if NAIVE else round(lam, 4), 'ldsc_intercept': None if NAIVE else round(fit['intercept'], 4),
                  'hits': hits, 'n_hits': len(hits), 'table': 'chisq.csv', 'issues_found': issues, 'analysis_usable': True,
                  'summary': f"{len(hits)} genome-wide significant SNPs; lambda_GC {lam:.2f}, LD-score intercept {fit['intercept']:.3f} +/- {fit['intercept_se']:.3f}"}))
"""

_L2 = {"gwas.L2.inflation": _INFL, "gwas.L2.ldscore": _LDSC, "gwas.L2.meta": _META, "gwas.L2.loci": _LOCI}

switched(_L2, _cell)
