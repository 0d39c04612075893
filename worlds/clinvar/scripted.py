"""Scripted agents of the clinvar track: oracle (the reference analyses of solvers.py, inlined into the sandbox with
inspect.getsource, plus the work products a careful analyst writes) and naive (tool defaults, no checks):

L1 naive       counts the records with bcftools and accepts the call set.
frequency      bcftools query of the proband's genotypes; candidate = non-reference and INFO/AF < threshold.
carrier        bcftools query; table entries matched on the record's CHROM:POS:REF:ALT text as written; every
               non-reference genotype counted as a carrier.
findings       bcftools query; table entries joined on position; significance containing 'pathogenic'.

The L1 oracle's issue per defect is data, in scripted.yaml; worlds/scaffold.py registers the agents and writes that
cell.
"""
from __future__ import annotations

import inspect

from worlds.scaffold import L2_KIT, WRITE_LINES, l1_oracle_cell, scripted

_CONSTS = ("VCF", "BGZF_EOF", "POP_TAGS", "PLP", "MIN_GQ", "MIN_DP", "BA1_AF", "CONFLICTING", "MENDEL_FINDING",
           "CONTAM_AB", "CONTAM_FINDING", "KING_DUPLICATE", "MAX_VCF_INFLATED")


def _helpers() -> str:
    from worlds.clinvar import solvers as s

    fns = [s.read_text, s.read_vcf, s.info_dict, s.gt_alleles, s.sample_fields, s.norm_chrom, s.vkey, s.header_ids,
           s.genotype_counts, s.lis_length, s.dosage, s.mendel_errors, s.trim_alleles, s.read_balance, s.contig_lengths, s.pairwise_relatedness, s.uncarried_trim, s.detect, s.kg_prefix, s.filtering_af,
           s.frequency_analysis, s.split_alleles, s.carrier_analysis, s.findings_analysis, s._reliable,
           s.inheritance_analysis]
    head = ["import json", "import zlib", "from pathlib import Path", "import numpy as np", "import pandas as pd", ""]
    consts = [f"{k} = {getattr(s, k)!r}" for k in _CONSTS]
    body = "\n\n".join(inspect.getsource(f) for f in fns)
    return "\n".join(head + consts) + "\n\n\n" + body + "\nprint('reference helpers loaded')\n"


_WRITE_VCF = r"""
def write_vcf(name, header, samples, rows):
    cols = ['#CHROM', 'POS', 'ID', 'REF', 'ALT', 'QUAL', 'FILTER', 'INFO', 'FORMAT', *samples]
    Path(name).write_text('\n'.join(header + ['\t'.join(cols)] + ['\t'.join(r) for r in rows]) + '\n')
    return name

"""
_WRITE = _WRITE_VCF + WRITE_LINES + L2_KIT  # what the L2 oracles start with (the L1 oracle has L1_KIT)

_L1_HELPERS = _WRITE_VCF + r"""
print('records', v['n_records_read'], 'findings', v['findings'])
H, S, R = vcf['header'], vcf['samples'], vcf['rows']


def sorted_calls():
    order = sorted(range(len(R)), key=lambda i: (norm_chrom(R[i][0]), int(R[i][1]), i))
    return write_vcf('calls_sorted.vcf', H, S, [R[i] for i in order])


def header_fixed():
    def observed(kind, tag):
        vals = []
        for r in R:
            if kind == 'INFO':
                x = info_dict(r[7]).get(tag)
                vals += [] if x is None else [x]
            elif tag in r[8].split(':'):
                j = r[8].split(':').index(tag)
                vals += [s.split(':')[j] for s in r[9:] if len(s.split(':')) > j]
        return [x for x in vals if x not in ('', '.')]

    def numeric(xs, cast):
        try:
            [cast(p) for x in xs for p in x.split(',') if p != '.']
            return True
        except ValueError:
            return False

    extra = []
    for t in v['undefined_tags']:
        kind, tag = t.split('/')
        vals = observed(kind, tag)          # Number and Type from the values the records hold (no header to copy)
        typ = 'Integer' if vals and numeric(vals, int) else ('Float' if vals and numeric(vals, float) else 'String')
        num = '.' if any(',' in x for x in vals) else '1'
        extra.append(f'##{kind}=<ID={tag},Number={num},Type={typ},Description="restored definition (was missing)">')
    return write_vcf('calls_header_fixed.vcf', H + extra, S, R)


def recounted():
    rows = []
    for r in R:
        r = list(r)
        ac, an = genotype_counts(r, len(S))
        d = info_dict(r[7])
        d['AC'], d['AN'] = ','.join(map(str, ac)), str(an)
        d['AF'] = ','.join(f'{c / an:.4f}' if an else '0' for c in ac)
        r[7] = ';'.join(k if val == '' else f'{k}={val}' for k, val in d.items())
        rows.append(r)
    return write_vcf('calls_recounted.vcf', H, S, rows)


def trimmed_indels():
    rows = []
    for r in R:
        p, ref, alts = trim_alleles(int(r[1]), r[3], r[4].split(','))
        rows.append([r[0], str(p), r[2], ref, ','.join(alts)] + r[5:])
    rows.sort(key=lambda r: (norm_chrom(r[0]), int(r[1])))
    return write_vcf('calls_normalized.vcf', H, S, rows)


def reference_file():
    ref = [h for h in H if h.startswith('##reference=')]
    return ref[0].split('/')[-1] if ref else 'none'


def b37_header():
    b37 = [h for h in H if not h.startswith('##contig=')]
    return write_vcf('calls_b37_header.vcf', b37[:1] + ['##contig=<ID=22,length=51304566,assembly=b37>'] + b37[1:], S, R)
"""

_L1_NAIVE = r"""
import json, subprocess
out = subprocess.run(['bcftools', 'view', '-H', 'calls.vcf.gz'], capture_output=True, text=True)
n = len(out.stdout.splitlines())
print(n, 'records')
print(json.dumps({'assessment': 'usable', 'issues': [], 'summary': f'{n} records loaded with bcftools; the call set looks fine.'}))
"""


scripted("clinvar.L1.integrity", [_helpers, l1_oracle_cell(__file__, _L1_HELPERS)], [_L1_NAIVE], versions=("5", "1"))


_FREQ_ORACLE = _WRITE + r"""
meta = json.load(open('meta.json'))
vcf = read_vcf(VCF)
res = frequency_analysis(vcf, meta)
T = res['threshold']
pd.DataFrame({'variant': list(res['filter_af']), 'filter_af': list(res['filter_af'].values()),
              'rare': [res['passes'][k] for k in res['filter_af']]}).to_csv('af_table.csv', index=False)
write_lines('candidates.txt', res['rare_keys'])
found(res['af_tags'] == 'KG_',
      "INFO/AF is the allele frequency of this 5-sample call set (10 chromosomes: any carried allele has AF >= "
      "0.1); it says nothing about population frequency, so the 1000 Genomes KG_* frequencies were used")
found(res['trap_admitted'],
      f"{len(res['trap_admitted'])} of the proband's variants are rare globally (INFO/AF < {T}) but common in "
      f"a continental population (ancestry-specific, e.g. in the proband's {meta['task']['proband_ancestry']} "
      f"ancestry); filtered on the maximum population AF (popmax / filtering AF)")
report = {'proband': res['proband'], 'candidate_list': 'candidates.txt', 'af_table': 'af_table.csv',
          'n_candidates': res['n_rare'],
          'af_source': 'maximum over 1000 Genomes global and continental (AFR, AMR, ASN, EUR) allele frequencies',
          'issues_found': issues, 'analysis_usable': True,
          'summary': f"{res['n_rare']} of the proband's {res['n_carried']} variants have every population AF below {T}."}
print(json.dumps(report))
"""

_FREQ_NAIVE = r"""
import json, subprocess
import pandas as pd
meta = json.load(open('meta.json'))
pb, T = meta['task']['proband'], float(meta['task']['max_allele_frequency'])
out = subprocess.run(['bcftools', 'query', '-s', pb, '-f', '%CHROM:%POS:%REF:%ALT\t%INFO/AF[\t%GT]\n', 'calls.vcf.gz'],
                     capture_output=True, text=True).stdout
rows = []
for line in out.splitlines():
    k, af, gt = line.split('\t')
    if '1' in gt:
        a = float(af) if af not in ('.', '') else 0.0
        rows.append({'variant': k, 'filter_af': a, 'rare': int(a < T)})
tab = pd.DataFrame(rows)
tab.to_csv('af_table.csv', index=False)
cand = tab[tab['rare'] == 1]['variant'].tolist()
open('candidates.txt', 'w').write(''.join(c + '\n' for c in cand))
print(json.dumps({'proband': pb, 'candidate_list': 'candidates.txt', 'af_table': 'af_table.csv', 'n_candidates': len(cand),
                  'af_source': 'INFO/AF', 'issues_found': [], 'analysis_usable': True,
                  'summary': f'{len(cand)} candidate variants with AF < {T}.'}))
"""


scripted("clinvar.L2.frequency_filter", [_helpers, _FREQ_ORACLE], [_FREQ_NAIVE])


_CARRIER_ORACLE = _WRITE + r"""
vcf = read_vcf(VCF)
table = pd.read_csv('clinvar_like.tsv', sep='\t', dtype={'chrom': str})
res = carrier_analysis(vcf, table)
pd.DataFrame({'variant': list(res['n_carriers']), 'n_carriers': list(res['n_carriers'].values())}).to_csv('carriers.csv', index=False)
write_lines('carried_plp.txt', res['carried_plp'])
found(res['n_multiallelic_records'],
      f"{res['n_multiallelic_records']} multi-allelic records (several ALT alleles in one record): split into "
      f"biallelic records before matching table entries allele by allele")
found(set(map(norm_chrom, res['table_contigs'])) == set(map(norm_chrom, res['vcf_contigs'])) and set(res['table_contigs']) != set(res['vcf_contigs']),
      f"contig naming differs: table {res['table_contigs']} vs VCF {res['vcf_contigs']} ('chr' prefix); "
      f"contig names harmonised before matching")
low = res['low_confidence_calls']
found(sum(low.values()) >= 3,
      f"{sum(low.values())} non-reference calls at P/LP entries have low genotype quality or depth "
      f"(GQ < {MIN_GQ} or DP < {MIN_DP}); not counted as carriers")
report = {'carrier_table': 'carriers.csv', 'carrier_list': 'carried_plp.txt', 'n_carrier_genotypes': res['n_carrier_genotypes'],
          'genotype_filter': f'GQ >= {MIN_GQ} and DP >= {MIN_DP}; multi-allelic records split; contigs harmonised',
          'issues_found': issues, 'analysis_usable': True,
          'summary': f"{res['n_carrier_genotypes']} confident carrier genotypes over {res['n_carried_plp']} of "
                     f"{res['n_plp_entries']} P/LP entries."}
print(json.dumps(report))
"""

_CARRIER_NAIVE = r"""
import json, subprocess
import pandas as pd
table = pd.read_csv('clinvar_like.tsv', sep='\t', dtype={'chrom': str})
plp = table[table['clinical_significance'].isin(['Pathogenic', 'Likely_pathogenic', 'Pathogenic/Likely_pathogenic'])]
out = subprocess.run(['bcftools', 'query', '-f', '%CHROM:%POS:%REF:%ALT[\t%GT]\n', 'calls.vcf.gz'],
                     capture_output=True, text=True).stdout
gts = {}
for line in out.splitlines():
    f = line.split('\t')
    gts[f[0]] = f[1:]
rows = []
for e in plp.itertuples():
    k = f'{e.chrom}:{e.pos}:{e.ref}:{e.alt}'
    n = sum(1 for g in gts.get(k, []) if any(a not in ('0', '.') for a in g.replace('|', '/').split('/')))
    rows.append({'variant': k, 'n_carriers': n})
tab = pd.DataFrame(rows)
tab.to_csv('carriers.csv', index=False)
car = tab[tab['n_carriers'] > 0]['variant'].tolist()
open('carried_plp.txt', 'w').write(''.join(c + '\n' for c in car))
print(json.dumps({'carrier_table': 'carriers.csv', 'carrier_list': 'carried_plp.txt',
                  'n_carrier_genotypes': int(tab['n_carriers'].sum()), 'genotype_filter': 'none (GT as called)',
                  'issues_found': [], 'analysis_usable': True, 'summary': f'{int(tab["n_carriers"].sum())} carrier genotypes.'}))
"""


scripted("clinvar.L2.carrier_screen", [_helpers, _CARRIER_ORACLE], [_CARRIER_NAIVE])


def _analysed(table: str, analysis: str) -> str:
    """An L2 oracle cell's start: the call set, the family's table and the reference analysis of both (`res`)."""
    return _WRITE + ("\nmeta = json.load(open('meta.json'))\nvcf = read_vcf(VCF)\n"
                     f"table = pd.read_csv('{table}', sep='\\t', dtype={{'chrom': str}})\nres = {analysis}(vcf, table, meta)\n")


_FIND_ORACLE = _analysed('clinvar_like.tsv', 'findings_analysis') + r"""pd.DataFrame({'variant': list(res['proband_dosage']), 'proband_dosage': list(res['proband_dosage'].values()),
              'filter_af': [res['filter_af'].get(k, '') for k in res['proband_dosage']]}).to_csv('evidence.csv', index=False)
write_lines('findings.txt', res['findings'])
found(res['conflicting_carried'],
      f"{len(res['conflicting_carried'])} carried entries are 'Conflicting_interpretations_of_pathogenicity' "
      f"(submitters disagree): not reportable as pathogenic")
found(res['common_plp_carried'],
      f"{len(res['common_plp_carried'])} carried entries classified P/LP have a population allele frequency "
      f">= {BA1_AF} (BA1: too common for a rare highly penetrant disorder): classification not credible")
pos_only = [k for k in res['naive_findings'] if res['proband_dosage'].get(k, 0) == 0]
found(pos_only,
      f"{len(pos_only)} table entries share a position with a proband variant but name a different ALT "
      f"allele: matched on the exact allele, not the position")
report = {'proband': res['proband'], 'findings_list': 'findings.txt', 'evidence_table': 'evidence.csv',
          'n_findings': res['n_findings'], 'issues_found': issues, 'analysis_usable': True,
          'summary': f"{res['n_findings']} reportable P/LP findings (exact allele, aggregate P/LP, popmax AF < {BA1_AF})."}
print(json.dumps(report))
"""

_FIND_NAIVE = r"""
import json, subprocess
import pandas as pd
meta = json.load(open('meta.json'))
pb = meta['task']['proband']
table = pd.read_csv('clinvar_like.tsv', sep='\t', dtype={'chrom': str})
out = subprocess.run(['bcftools', 'query', '-s', pb, '-f', '%CHROM\t%POS[\t%GT]\n', 'calls.vcf.gz'],
                     capture_output=True, text=True).stdout
dos = {}
for line in out.splitlines():
    c, p, g = line.split('\t')
    dos[(c, int(p))] = sum(a not in ('0', '.') for a in g.replace('|', '/').split('/'))
rows, found = [], []
for e in table.itertuples():
    k = f'{e.chrom}:{e.pos}:{e.ref}:{e.alt}'
    d = dos.get((e.chrom, int(e.pos)), 0)
    rows.append({'variant': k, 'proband_dosage': d})
    if d > 0 and 'pathogenic' in e.clinical_significance.lower():
        found.append(k)
pd.DataFrame(rows).to_csv('evidence.csv', index=False)
open('findings.txt', 'w').write(''.join(f + '\n' for f in found))
print(json.dumps({'proband': pb, 'findings_list': 'findings.txt', 'evidence_table': 'evidence.csv', 'n_findings': len(found),
                  'issues_found': [], 'analysis_usable': True, 'summary': f'{len(found)} pathogenic findings.'}))
"""


scripted("clinvar.L2.reportable_findings", [_helpers, _FIND_ORACLE], [_FIND_NAIVE])


_INH_ORACLE = _analysed('candidates.tsv', 'inheritance_analysis') + r"""pd.DataFrame({'gene': list(res['haplotypes_hit']), 'copies_hit': list(res['haplotypes_hit'].values())}).to_csv('gene_table.csv', index=False)
write_lines('explained_genes.txt', res['explained_genes'])
found(res['single_het_ar_genes'],
      f"{len(res['single_het_ar_genes'])} AR genes ({', '.join(res['single_het_ar_genes'])}) carry only a single "
      f"heterozygous variant in the proband (carrier state, one intact copy): not explanatory without a second hit")
found(res['cis_ar_genes'],
      f"{len(res['cis_ar_genes'])} AR genes ({', '.join(res['cis_ar_genes'])}) have two hets both inherited from "
      f"the same parent (in cis, phase from the parents' genotypes): not a compound heterozygote")
found(res['dropout_variants'],
      f"{len(res['dropout_variants'])} apparent de novo variants rest on a parental hom-ref call with low depth "
      f"and GQ (possible allelic dropout): not called de novo; confirm in the parents")
report = {'gene_table': 'gene_table.csv', 'explained_list': 'explained_genes.txt', 'n_explained': res['n_explained'],
          'n_de_novo': res['n_de_novo'],
          'method': f'zygosity from GT; proband hets phased by transmission (parental genotypes); de novo only where both '
                    f'parents are hom-ref with GQ >= {MIN_GQ}, DP >= {MIN_DP} and no ALT reads',
          'issues_found': issues, 'analysis_usable': True,
          'summary': f"{res['n_explained']} of {res['n_candidate_genes']} candidate genes fit their inheritance mode; "
                     f"{res['n_de_novo']} confident de novo variant(s)."}
print(json.dumps(report))
"""

_INH_NAIVE = r"""
import json, subprocess
import pandas as pd
meta = json.load(open('meta.json'))
pb, parents = meta['family']['proband'], meta['family']['parents']
table = pd.read_csv('candidates.tsv', sep='\t', dtype={'chrom': str})
out = subprocess.run(['bcftools', 'query', '-f', '%CHROM:%POS:%REF:%ALT[\t%GT]\n', 'calls.vcf.gz'],
                     capture_output=True, text=True).stdout
order = subprocess.run(['bcftools', 'query', '-l', 'calls.vcf.gz'], capture_output=True, text=True).stdout.split()
gts = {}
for line in out.splitlines():
    f = line.split('\t')
    d = dict(zip(order, f[1:]))
    gts[f[0]] = [sum(a not in ('0', '.') for a in d[s].replace('|', '/').split('/')) for s in [pb] + parents]
copies, dn = {}, 0
for e in table.itertuples():
    g = gts.get(f'{e.chrom}:{e.pos}:{e.ref}:{e.alt}', [0, 0, 0])
    copies[e.gene] = min(2, copies.get(e.gene, 0) + g[0])
    if g[0] == 1 and g[1] == 0 and g[2] == 0:
        dn += 1
pd.DataFrame({'gene': list(copies), 'copies_hit': list(copies.values())}).to_csv('gene_table.csv', index=False)
expl = sorted(g for g, n in copies.items() if n > 0)
open('explained_genes.txt', 'w').write(''.join(g + '\n' for g in expl))
print(json.dumps({'gene_table': 'gene_table.csv', 'explained_list': 'explained_genes.txt', 'n_explained': len(expl),
                  'n_de_novo': dn, 'method': 'bcftools query GT', 'issues_found': [], 'analysis_usable': True,
                  'summary': f'{len(expl)} candidate genes carried by the proband.'}))
"""


scripted("clinvar.L2.inheritance", [_helpers, _INH_ORACLE], [_INH_NAIVE], versions=("1", "2"))
