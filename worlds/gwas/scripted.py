"""Scripted agents of the gwas track (gold side). The oracle inlines worlds/gwas/analysis.py as source text and does
what each world's careful_scientist says; the naive agent trusts the table and the tool defaults (L1: accepts the
file; inflation: P < 5e-8 on the reported P; meta: merges on position and averages BETA; loci: one locus per
significant SNP)."""
from __future__ import annotations

import inspect

from benchmark.suite.registry import naive, oracle
from worlds.gwas import analysis as A


def _cell() -> str:
    return inspect.getsource(A) + "\nprint('analysis loaded')\n"


_L1_ORACLE = r"""
v = detect('.')
f = v['findings']
print('findings', f, 'panel match', v['panel_match_fraction'])


def write_lines(name, items):
    Path(name).write_text(''.join(f'{x}\n' for x in items))
    return name


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
    t.drop(columns=['SNP']).to_csv(name, sep='\t', index=False)
    return name


issues = []
if 'duplicate_rows' in f:
    issues.append({'category': 'duplicated SNP rows', 'severity': 'warning', 'where': 'sumstats.tsv',
                   'value': v['n_duplicate_rows'], 'description': f"{v['n_duplicate_rows']} SNP rows (same CHR:POS) appear twice",
                   'action': 'kept one copy of each; listed the duplicated SNPs', 'output': write_lines('duplicated_snps.txt', v['duplicated_snps'])})
if 'build_mismatch' in f:
    issues.append({'category': 'genome build mismatch', 'severity': 'blocking', 'where': 'sumstats.tsv POS',
                   'value': v['unmatched_fraction'],
                   'description': f"only {v['panel_match_fraction']:.1%} of positions exist in the GRCh37 panel: positions are on another build (not GRCh37)",
                   'action': 'positions must be lifted over to GRCh37 before any merge', 'output': None})
if 'strand_flip' in f:
    issues.append({'category': 'strand flips', 'severity': 'warning', 'where': 'sumstats.tsv A1/A2',
                   'value': v['n_strand_flipped'], 'description': f"{v['n_strand_flipped']} SNPs carry the complementary alleles of the panel (opposite strand)",
                   'action': 'listed them; complemented to the forward strand', 'output': write_lines('strand_flipped_snps.txt', v['strand_flipped_snps'])})
if 'allele_swap' in f:
    issues.append({'category': 'effect and other allele swapped', 'severity': 'warning', 'where': 'sumstats.tsv A1/A2',
                   'value': v['n_swapped'], 'description': f"{v['n_swapped']} SNPs: AF1 matches the panel frequency of A2, not A1: A1/A2 labels exchanged (effect sign inverted)",
                   'action': 'listed them; exchanged the labels back', 'output': write_lines('swapped_snps.txt', v['swapped_snps'])})
if 'complemented_eaf' in f:
    issues.append({'category': 'effect allele frequency complemented', 'severity': 'warning', 'where': 'sumstats.tsv AF1',
                   'value': v['af_other_allele_fraction'], 'description': f"AF1 equals the panel frequency of A2 for {v['af_other_allele_fraction']:.1%} of SNPs: the column holds 1 - EAF",
                   'action': 'replaced AF1 by 1 - AF1', 'output': corrected('sumstats_corrected.tsv')})
if 'missing_zero' in f:
    issues.append({'category': 'missing values coded as zero', 'severity': 'warning', 'where': 'sumstats.tsv BETA/SE',
                   'value': v['n_zero'], 'description': f"{v['n_zero']} SNPs have SE = 0 and BETA = 0 with P = 1: missing values written as 0",
                   'action': 'set them to missing and listed them', 'output': write_lines('zero_snps.txt', v['zero_snps'])})
if 'log10_p' in f:
    issues.append({'category': 'P column holds -log10 P', 'severity': 'blocking', 'where': 'sumstats.tsv P',
                   'value': v['p_inconsistent_fraction'], 'description': f"{v['n_p_above_1']} values of P exceed 1 and P disagrees with 2*Phi(-|BETA/SE|) for {v['p_inconsistent_fraction']:.1%} of SNPs: it is -log10(P)",
                   'action': 'converted P = 10^-value', 'output': corrected('sumstats_corrected.tsv')})
report = {'assessment': 'unusable' if 'build_mismatch' in f else 'usable_with_caveats' if issues else 'usable',
          'issues': issues,
          'summary': ('Problems: ' + ', '.join(i['category'] for i in issues)) if issues else
                     f"All checks pass: {v['n_rows']} SNPs, alleles, frequencies, build and P consistent with the panel."}
print(json.dumps(report))
"""

_L1_NAIVE = r"""
import json
import pandas as pd
t = pd.read_csv('sumstats.tsv', sep='\t')
print(t.describe())
print(json.dumps({'assessment': 'usable', 'issues': [], 'summary': f'{len(t)} SNPs loaded; looks fine.'}))
"""


@oracle("gwas.L1.integrity", version="1")
def l1_oracle(ref) -> list[str]:
    return [_cell(), _L1_ORACLE]


@naive("gwas.L1.integrity", version="1")
def l1_naive(ref) -> list[str]:
    return [_L1_NAIVE]


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
m = meta_table(a, b, aligned=not NAIVE)
m.to_csv('meta.csv', index=False)
hits = sorted(m.loc[m['p'] < GWS, 'SNP'])
n_rec = int((a.merge(b, on='SNP').eval('A1_x != A1_y')).sum())
issues = [] if NAIVE or n_rec == 0 else [f'{n_rec} SNPs coded on a different effect allele (or strand) in study B: aligned alleles (BETA sign flipped) before meta-analysis']
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


def _mk(fam: str, is_naive: bool):
    def cells(ref) -> list[str]:
        return [_cell(), f"NAIVE = {is_naive!r}\n" + _L2[fam]]
    return cells


for _fam in _L2:
    oracle(_fam, version="1")(_mk(_fam, False))
    naive(_fam, version="1")(_mk(_fam, True))
