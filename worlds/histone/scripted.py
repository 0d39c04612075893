"""Scripted agents of the histone track (gold side): per family, the oracle's and the naive agent's code cells,
registered through worlds/scaffold.py when worlds.histone.solvers (the solver_module) imports this module.

The oracle's first cell carries the solvers' BAM, peak and annotation helpers as source text (samtools and macs3 run
as tools); the naive agent counts and calls with tool defaults.
"""
from __future__ import annotations
import inspect
import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
import numpy as np
import pandas as pd
from benchmark.suite.registry import solver
from graders.registry import product_validator
from worlds.scaffold import scripted

from worlds.histone.solvers import (  # noqa: F401 - the reference helpers the cells carry as source
    BROAD_MARKS,
    EOF_BLOCK,
    Lib,
    SPIKE_PREFIX,
    _before,
    _diff_stats,
    _samtools,
    call_peaks,
    centres,
    chip_input_gain_regions,
    input_gain_regions,
    jackpot_positions,
    concentration,
    dedup_mask,
    differential_analysis,
    domain_counts,
    duplicate_fraction,
    enrichment_bins,
    fragment_length,
    gene_log2fc,
    gene_offsets,
    human_total,
    index_read_count,
    integrity_values,
    is_position_sorted,
    macs3_bin,
    naive_signal,
    norm_chrom,
    out_of_order_fraction,
    profile_shape,
    promoter_signal,
    quantify_analysis,
    read_bam,
    read_genes,
    read_meta,
    spike_total,
    summarize_domains,
    true_runs,
    tss_signal_fraction,
    window_counts,
    read_blacklist,
    overlaps_any,
    marked_genes,
    reads_in_peaks,
    filtered_bam,
    peaks_analysis,
)

# ------------------------------------------------------------------ scripted agents (oracle / naive)
# Cells run in the sandbox's kernel with the world's public files in the working directory. They import only the
# standard library and the sandbox's packages: the oracle's helpers are this module's plain functions above, inlined
# as source text (no benchmark/graders import). The oracle runs the reference analysis and its own data-driven
# diagnostics; the naive agent runs tool defaults, checks nothing and reports what it got.

_HELPER_IMPORTS = """import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr
"""


_HELPERS = (Lib, _samtools, read_bam, dedup_mask, duplicate_fraction, is_position_sorted, fragment_length, centres,
            norm_chrom, window_counts, human_total, promoter_signal, naive_signal, true_runs, chip_input_gain_regions, macs3_bin, call_peaks, summarize_domains, read_genes,
            read_meta, concentration, enrichment_bins, profile_shape, tss_signal_fraction, index_read_count,
            out_of_order_fraction, gene_offsets, _before, integrity_values,
            quantify_analysis, domain_counts, spike_total, _diff_stats, gene_log2fc, differential_analysis, jackpot_positions,
            input_gain_regions, read_blacklist, overlaps_any, marked_genes, reads_in_peaks, filtered_bam, peaks_analysis)


def _helpers_cell() -> str:
    consts = [f"SPIKE_PREFIX = {SPIKE_PREFIX!r}", "BROAD_MARKS = {" + ", ".join(map(repr, sorted(BROAD_MARKS))) + "}",  # sorted: a set's repr varies by process
              f"EOF_BLOCK = {EOF_BLOCK!r}"]
    body = "\n\n".join(inspect.getsource(f) for f in _HELPERS)
    return _HELPER_IMPORTS + "\n".join(consts) + "\n\n\n" + body + "\nprint('reference helpers loaded')\n"


# ---- L1 integrity

_L1_ORACLE = r"""
import os
import pysam

W = Path('.')
v = integrity_values(W)
print({k: v[k] for k in sorted(v) if k not in ('corrected_tss', 'files')})
os.makedirs('fixed', exist_ok=True)
genes = read_genes(W)
meta = read_meta(W)


def write_lines(name, items):
    p = f'fixed/{name}'
    Path(p).write_text(''.join(f'{x}\n' for x in items))
    return p


issues = []
F = set(v['findings'])
if 'chrom_naming_mismatch' in F:
    g = genes.copy()
    g['chrom'] = g['chrom'].astype(str).str.replace('^chr', '', regex=True)
    g.to_csv('fixed/genes_bam_contig_names.csv', index=False)
    issues.append(dict(category='contig naming mismatch', severity='warning',
                       where=f"BAM @SQ {v['bam_contigs']} vs genes.csv {v['genes_contigs']}",
                       description='Chromosome names differ between the BAMs (Ensembl style, no chr prefix) and genes.csv (UCSC '
                                   'chr-prefixed): no gene lies on a contig the BAMs name, so every lookup silently finds nothing',
                       value=v['genes_unmatched'], action='wrote genes.csv with the BAM contig names (chr prefix stripped); '
                       f"TSS enrichment after the fix {v['tss_signal_fraction']}", output='fixed/genes_bam_contig_names.csv'))
if 'genome_build_mismatch' in F:
    g = genes.copy()
    off = g.chrom.map(norm_chrom).map(v['gene_offsets']).fillna(0).astype(int)
    for col in ('start', 'end', 'tss'):
        g[col] = g[col] - off
    g.to_csv('fixed/genes_alignment_build.csv', index=False)
    first = sorted(v['gene_offsets'])[0]
    issues.append(dict(category='genome build mismatch', severity='blocking', where='genes.csv',
                       description='genes.csv coordinates come from a different assembly than the alignments: H3K4me3 peaks '
                                   'sit at a constant per-contig offset from the annotated TSSs (offsets genes minus alignments '
                                   f"{v['gene_offsets']}); only {v['tss_signal_fraction']} of top-quartile genes enriched at "
                                   'their stated TSS', value=v['gene_offset_' + first],
                       action=f"moved every gene by its contig's offset; TSS enrichment then {v['tss_signal_fraction_after_fix']}",
                       output='fixed/genes_alignment_build.csv'))
if 'chip_input_swap' in F:
    p = write_lines('swapped_files.txt', v['swapped_files'])
    issues.append(dict(category='ChIP/input swap', severity='blocking', where=', '.join(v['swapped_files']),
                       description=f"the file named input holds the enrichment ({v['concentration_input_file']} of fragments "
                                   f"in the top 1% of 1-kb bins vs {v['concentration_chip_file']} in the file named ChIP): "
                                   'the labels are swapped', value=v['n_reads_chip'],
                       action=f"used {v['chip_bam']} as the ChIP and {v['input_bam']} as the input", output=p))
if 'pcr_duplicates' in F:
    src = v['chip_bam']
    out = 'fixed/' + Path(src).name.replace('.bam', '.dedup.bam')
    seen = set()
    with pysam.AlignmentFile(src) as bam, pysam.AlignmentFile(out, 'wb', template=bam) as o:
        for r in bam:
            if r.is_unmapped or r.is_secondary or r.is_supplementary:
                continue
            key = (r.reference_id, r.reference_end - 1 if r.is_reverse else r.reference_start, r.is_reverse)
            if key in seen:
                continue
            seen.add(key)
            o.write(r)
    pysam.index(out)
    issues.append(dict(category='PCR duplicates', severity='warning', where=src,
                       description=f"duplicate fraction {v['duplicate_fraction_chip']} (NRF {v['nrf_chip']}; input "
                                   f"{v['duplicate_fraction_input']}): low library complexity from over-amplification",
                       value=v['duplicate_fraction_chip'], action='removed duplicates (same contig, 5-prime position, strand)',
                       output=out))
if 'multimapper_pileups' in F:
    src = v['chip_bam']
    out = 'fixed/' + Path(src).name.replace('.bam', '.mapq30.bam')
    subprocess.run([_samtools(), 'view', '-b', '-q', '30', '-o', out, src], check=True, capture_output=True)
    subprocess.run([_samtools(), 'index', out], check=True, capture_output=True)
    issues.append(dict(category='multimapper (MAPQ 0) pile-ups in the ChIP', severity='warning', where=src,
                       description=f"{v['low_mapq_fraction_chip']} of ChIP reads have MAPQ < 30 vs {v['low_mapq_fraction_input']} "
                                   'of input reads, piled in a few loci: multi-mapping repeat reads that MAPQ-blind tools '
                                   '(MACS3, bedtools, samtools depth) would count as enrichment',
                       value=v['low_mapq_fraction_chip'], action='filtered the ChIP to MAPQ >= 30 (samtools view -q 30)',
                       output=out))
if 'truncated_bam' in F:
    p = write_lines('truncated_files.txt', [st['path'] for st in v['files'].values() if st['truncated']])
    issues.append(dict(category='truncated BAM', severity='blocking', where=', '.join(v['affected_files']),
                       description=f"no BGZF EOF block; reading stops after {v['truncated_reads_readable']} reads of the "
                                   f"{v['truncated_reads_indexed']} its index records (incomplete transfer)",
                       value=v['truncated_reads_readable'], action='stopped; the file must be transferred again', output=p))
if 'unsorted_bam' in F:
    src = v['affected_files'][0]
    out = 'fixed/' + Path(src).name.replace('.bam', '.sorted.bam')
    subprocess.run([_samtools(), 'sort', '-o', out, src], check=True, capture_output=True)
    subprocess.run([_samtools(), 'index', out], check=True, capture_output=True)
    issues.append(dict(category='unsorted BAM without index', severity='warning', where=src,
                       description=f"header SO is not coordinate, {v['unsorted_out_of_order_fraction']} of adjacent records "
                                   'out of order, and no .bai', value=v['unsorted_n_reads'],
                       action='sorted with samtools sort and indexed with samtools index', output=out))
if 'wrong_mark_label' in F:
    issues.append(dict(category='wrong mark label', severity='blocking', where=v['chip_bam'],
                       description=f"meta.json says {meta['target_mark']} but the ChIP profile is broad (flank share "
                                   f"{v['broad_flank_fraction']}), TSSs of expressed genes are not enriched and promoter signal "
                                   f"is anti-correlated with expression ({v['promoter_expression_spearman']}): looks like H3K27me3",
                       value=v['tss_signal_fraction'], action='did not analyse it as the stated mark', output=None))
for g in ([] if F else v['input_gain_regions']):
    issues.append(dict(category='copy-number gain shared by ChIP and input', severity='info',
                       where=f"{g['chrom']}:{g['start']}-{g['end']}",
                       description=f"input depth {g['ratio']}x the median over this block and the ChIP shares it; the matched "
                                   'input corrects it', value=g['ratio'], action='none needed', output=None))
if not F and 'low_mapq_fraction_chip' in v:
    issues.append(dict(category='multimapping reads kept (MAPQ 0)', severity='info', where='both BAMs',
                       description=f"{v['low_mapq_fraction_chip']} of ChIP and {v['low_mapq_fraction_input']} of input reads "
                                   'have MAPQ < 30, spread evenly over both libraries (no pile-ups): the aligner output '
                                   'as delivered; filter to MAPQ >= 30 at analysis time', value=v['low_mapq_fraction_chip'],
                       action='none needed now', output=None))
alarms = [i for i in issues if i['severity'] != 'info']
assessment = 'usable'
if alarms:
    assessment = 'unusable' if F & {'truncated_bam', 'wrong_mark_label', 'genome_build_mismatch'} else 'usable_with_caveats'
report = {
    'assessment': assessment,
    'issues': issues,
    'summary': ('Integrity problems found: ' + ', '.join(i['category'] for i in alarms) + '; handled as listed.') if alarms
               else f"All integrity checks pass ({v['n_reads_chip']} ChIP reads, {v['mark_profile']} profile as expected).",
}
print(json.dumps(report))
"""

_L1_NAIVE = r"""
import json
import subprocess

meta = json.load(open('meta.json'))
chip, inp = meta['files']['chip_bam'], meta['files']['input_bam']
p = subprocess.run(['samtools', 'view', '-c', '-F', '0x904', chip], capture_output=True, text=True)
n = int(p.stdout.strip()) if p.stdout.strip().isdigit() else 0
print('mapped reads in', chip, n)
report = {
    'assessment': 'usable', 'issues': [],
    'summary': f"{meta['target_mark']} ChIP with {n} mapped reads and its input; the delivery looks fine.",
}
print(json.dumps(report))
"""


scripted("histone.L1.integrity", [_helpers_cell, _L1_ORACLE], [_L1_NAIVE], versions=("2", "2"))


# ---- L2 quantify

_W = "\nW = Path('.')\n"  # an L2 oracle cell's start: the world's folder

_QUANTIFY_ORACLE = _W + r"""values, table = quantify_analysis(W)
table.to_csv('promoter_signal.csv', index=False)
meta = read_meta(W)
chip, inp = read_bam(W / meta['files']['chip_bam']), read_bam(W / meta['files']['input_bam'])
print(values)
issues, notes = [], []
# copy number: ChIP vs input depth in 100-kb bins (a gain of the ChIP's cells that the input lacks)
for g in values['gain_regions']:
    issues.append(f"Copy-number mismatch between the ChIP's and the input's cells: {g['chrom']}:{g['start']}-{g['end']} has "
                  f"{g['copy_ratio']}x the ChIP/input depth of the rest of the genome over a Mb-scale block (an amplification "
                  "absent from the input), so input normalisation cannot cancel it; ChIP counts of the "
                  f"{len(values['genes_in_gain_regions'])} genes there were divided by the copy ratio")
# PCR jackpots: many identical reads at one 5' position
jp = jackpot_positions(chip)
dup = duplicate_fraction(chip)
if jp >= 5:
    issues.append(f"PCR duplicate jackpots: {jp} positions carry >=30 identical reads (duplicate fraction {dup:.3f}); "
                  "reads were deduplicated before counting")
# broad mark: compare with MACS3's default narrow mode
if values['peak_mode'] == 'broad':
    narrow = summarize_domains(call_peaks(W / meta['files']['chip_bam'], W / meta['files']['input_bam'], False,
                                          values['effective_genome_size'], values['fragment_length']))
    note = (f"{values['target_mark']} is a broad mark: MACS3's default narrow mode fragments its domains into short "
            f"peaks ({narrow['n']} peaks, {narrow['total_mb']} Mb vs {values['domains']['n']} broad domains, "
            f"{values['domains']['total_mb']} Mb); used --broad")
    # the landscape is only this report's result when no data problem overrides it; otherwise a method note
    (notes if issues else issues).append(note)
window = f"TSS +-{values['promoter_window_bp']} bp"
report = {
    'output_path': 'promoter_signal.csv',
    'method': {'tool': f"pysam/samtools counts; macs3 callpeak{' --broad' if values['peak_mode'] == 'broad' else ''} with the "
                       f"input as control, --nomodel --extsize {values['fragment_length']}, -g {values['effective_genome_size']}",
               'normalization': 'log2 ratio of ChIP CPM to input CPM (pseudocount 0.5) on deduplicated reads shifted to '
                                'fragment centres; spike-in contigs excluded',
               'peak_mode': values['peak_mode'],
               'window': window},
    'signal_expression_spearman': values['signal_expression_spearman'],
    'direction': values['direction'],
    'domains': values['domains'],
    'issues_found': issues,
    'analysis_usable': True,
    'trajectory': ('read meta.json; removed duplicates; computed input-normalised promoter signal in ' + window + '; '
                   'screened the input for copy-number gains and the ChIP for PCR jackpots; called regions with MACS3 '
                   'against the input. ' + ' '.join(notes)).strip(),
}
print(json.dumps(report))
"""

_QUANTIFY_NAIVE = r"""
import json
import os
import subprocess

import numpy as np
import pandas as pd
import pysam
from scipy.stats import spearmanr

meta = json.load(open('meta.json'))
genes = pd.read_csv('genes.csv')
chip, inp = meta['files']['chip_bam'], meta['files']['input_bam']


def cpm(path, half=1000):
    bam = pysam.AlignmentFile(path)
    c = np.array([bam.count(str(r.chrom), max(0, int(r.tss) - half), int(r.tss) + half) for r in genes.itertuples()])
    return c / bam.mapped * 1e6


sig = np.log2((cpm(chip) + 0.5) / (cpm(inp) + 0.5))
pd.DataFrame({'gene_id': genes.gene_id, 'promoter_signal': sig}).to_csv('promoter_signal.csv', index=False)
rho = float(spearmanr(sig, genes.gene_expression).statistic)
os.makedirs('macs', exist_ok=True)
cmd = ['macs3', 'callpeak', '-t', chip, '-c', inp, '-f', 'BAM', '-n', 'naive', '--outdir', 'macs']
if subprocess.run(cmd, capture_output=True).returncode != 0:  # model building failed: use the size from meta.json
    cmd += ['--nomodel', '--extsize', str(meta.get('library_fragment_size_bp', 200))]
    subprocess.run(cmd, check=True, capture_output=True)
pk = pd.read_csv('macs/naive_peaks.narrowPeak', sep='\t', header=None)
report = {
    'output_path': 'promoter_signal.csv',
    'method': {'tool': 'pysam count; macs3 callpeak with default settings', 'normalization': 'log2 ChIP CPM / input CPM',
               'peak_mode': 'narrow (MACS3 default)', 'window': 'TSS +-1 kb'},
    'signal_expression_spearman': round(rho, 4),
    'direction': 'positive' if rho > 0.1 else 'negative' if rho < -0.1 else 'none',
    'domains': {'n': int(len(pk)), 'total_mb': round(float((pk[2] - pk[1]).sum()) / 1e6, 4)},
    'issues_found': [], 'analysis_usable': True,
    'trajectory': 'counted reads at promoters with pysam, divided by the input, called peaks with macs3 callpeak',
}
print(json.dumps(report))
"""


scripted("histone.L2.quantify", [_helpers_cell, _QUANTIFY_ORACLE], [_QUANTIFY_NAIVE])


# ---- L2 differential

_DIFFERENTIAL_ORACLE = _W + r"""values, dom, diag = differential_analysis(W)
meta = read_meta(W)
print(values)
print(diag)
sp, nr, mq, dup = values['spike_in_reads'], diag['n_reads'], values['low_mapq_fraction'], diag['duplicate_fraction']
share = diag['spike_share_filtered']
issues = []
ratio = share['treated_chip'] / share['control_chip']
if abs(np.log2(ratio)) > np.log2(1.25):
    issues.append(f"Global change of H3K27me3: the spike-in (dm6) share of the treated ChIP is {ratio:.2f}x the control's "
                  f"({share['treated_chip']:.4f} vs {share['control_chip']:.4f}), so the total amount of the mark changed; "
                  "library-size normalisation assumes an unchanged total and underestimates the change "
                  f"(log2 {values['library_size_with_input']['global_log2fc']} vs {values['global_log2fc']} with spike-in scaling)")
for k in sorted(mq):
    if mq[k] > 0.05:
        issues.append(f"Low mapping quality: {mq[k]:.1%} of reads in {k} have MAPQ < 30 (multi-mapping pile-ups); "
                      "kept only MAPQ >= 30 reads")
if max(dup.values()) > 0.3 and abs(dup['treated_chip'] - dup['control_chip']) > 0.15:
    issues.append(f"PCR duplicates differ between conditions: duplicate fraction {dup['treated_chip']:.3f} (treated ChIP) vs "
                  f"{dup['control_chip']:.3f} (control ChIP); counting all reads would inflate one condition, so reads "
                  "were deduplicated")
# per-domain table: deduplicated MAPQ>=30 fragment-centre counts; per-gene table: the reference fold changes
libs = {k: read_bam(W / meta['files'][k]) for k in ('control_chip', 'treated_chip')}
d = int(meta.get('library_fragment_size_bp', 200))
for k, lib in libs.items():
    dom[k + '_count'] = domain_counts(lib, dom, d, (lib.mapq >= 30) & dedup_mask(lib)).astype(int)
dom.to_csv('domains.csv', index=False)
pd.DataFrame(sorted(values['gene_log2fc'].items()), columns=['gene_id', 'log2fc']).to_csv('gene_log2fc.csv', index=False)
report = {
    'output_path': 'gene_log2fc.csv',
    'method': {'tool': f'macs3 callpeak --broad on the pooled ChIPs vs pooled inputs (--nomodel --extsize {d}); '
                       'fragment-centre counts per domain',
               'normalization': 'spike-in (dm6, ChIP-Rx) scaling of each ChIP, input-corrected (treated/control input '
                                'ratio); MAPQ >= 30 reads only; PCR duplicates removed (dedup)',
               'peak_mode': 'broad',
               'window': 'condition-blind consensus domains'},
    'global_log2fc': values['global_log2fc'],
    'direction': values['direction'],
    'domains': values['domains'],
    'issues_found': issues,
    'analysis_usable': True,
    'trajectory': 'tabulated spike-in shares, MAPQ and duplicate rates per library; called consensus broad domains on '
                  'pooled ChIPs; counted deduplicated MAPQ>=30 fragments; scaled ChIPs by spike-in reads and corrected '
                  'with the inputs; compared with library-size normalisation',
}
print(json.dumps(report))
"""

_NAIVE_HEAD = r"""
import json
import os
import subprocess

import numpy as np
import pandas as pd
import pysam

meta = json.load(open('meta.json'))
"""

_DIFFERENTIAL_NAIVE = _NAIVE_HEAD + r"""f = meta['files']
os.makedirs('macs', exist_ok=True)
cmd = ['macs3', 'callpeak', '-t', f['control_chip'], f['treated_chip'], '-c', f['control_input'], f['treated_input'],
       '-f', 'BAM', '--broad', '-n', 'pooled', '--outdir', 'macs']
if subprocess.run(cmd, capture_output=True).returncode != 0:  # model building failed: use the size from meta.json
    cmd += ['--nomodel', '--extsize', str(meta.get('library_fragment_size_bp', 200))]
    subprocess.run(cmd, check=True, capture_output=True)
dom = pd.read_csv('macs/pooled_peaks.broadPeak', sep='\t', header=None).iloc[:, :3]
dom.columns = ['chrom', 'start', 'end']
for cond in ('control', 'treated'):
    bam = pysam.AlignmentFile(f[cond + '_chip'])
    cnt = np.array([bam.count(r.chrom, int(r.start), int(r.end)) for r in dom.itertuples()])
    dom[cond + '_cpm'] = cnt / bam.mapped * 1e6
dom.to_csv('domains.csv', index=False)
g = float(np.log2(dom.treated_cpm.sum() / dom.control_cpm.sum()))
genes = pd.read_csv('genes.csv')
rows = []
bams = {c: pysam.AlignmentFile(f[c + '_chip']) for c in ('control', 'treated')}
for r in genes.itertuples():
    if ((dom.chrom == r.chrom) & (dom.start <= r.tss) & (dom.end > r.tss)).any():
        v = {c: (b.count(r.chrom, max(0, int(r.tss) - 2500), int(r.tss) + 2500) + 1) / b.mapped for c, b in bams.items()}
        rows.append((r.gene_id, round(float(np.log2(v['treated'] / v['control'])), 4)))
pd.DataFrame(rows, columns=['gene_id', 'log2fc']).to_csv('gene_log2fc.csv', index=False)
report = {
    'output_path': 'gene_log2fc.csv',
    'method': {'tool': 'macs3 callpeak --broad (pooled); pysam count', 'normalization': 'CPM (library size)',
               'peak_mode': 'broad', 'window': 'MACS3 broad domains'},
    'global_log2fc': round(g, 4),
    'direction': 'decrease' if g < -0.4 else 'increase' if g > 0.4 else 'no_change',
    'domains': {'n': int(len(dom)), 'total_mb': round(float((dom.end - dom.start).sum()) / 1e6, 4)},
    'issues_found': [], 'analysis_usable': True,
    'trajectory': 'called broad domains with macs3, counted reads per domain with pysam, compared CPM between conditions',
}
print(json.dumps(report))
"""


scripted("histone.L2.differential", [_helpers_cell, _DIFFERENTIAL_ORACLE], [_DIFFERENTIAL_NAIVE])


# ---- L2 peaks

_PEAKS_ORACLE = _W + r"""values, pk = peaks_analysis(W)
print({k: v for k, v in values.items() if k != 'marked_genes'})
Path('marked_promoters.txt').write_text(''.join(g + '\n' for g in values['marked_genes']))
pk.to_csv('peaks.csv', index=False)
issues = []
low = values['low_mapq_fraction']
extra = values['naive_n_peaks'] - values['peaks_unfiltered_mapq30']
if extra >= 5:
    issues.append(f"Multi-mapping (MAPQ 0) read pile-ups: MACS3 keeps reads of any MAPQ, and {extra} of the "
                  f"{values['naive_n_peaks']} peaks called on the raw BAMs vanish once reads are filtered to MAPQ >= 30 "
                  f"(MAPQ < 30 share: ChIP {low['chip']:.3f}, input {low['input']:.3f}); called on MAPQ >= 30 reads")
chip = read_bam(W / read_meta(W)['files']['chip_bam'])
jp, dup = jackpot_positions(chip), duplicate_fraction(chip)
if jp >= 5:
    issues.append(f"PCR duplicate jackpots: {jp} positions carry >= 30 identical reads (duplicate fraction {dup:.3f}), "
                  "inside peaks; MACS3 collapses them (--keep-dup 1) but a raw read count would inflate FRiP, so FRiP "
                  "was computed on deduplicated reads")
if values['peaks_in_blacklist'] >= 3:
    issues.append(f"Blacklist artefacts: {values['peaks_in_blacklist']} called peaks fall in regions of the published "
                  f"exclusion list (blacklist.bed, {values['blacklist_regions']} regions; high-signal pile-ups in ChIP and "
                  "input); removed them before counting peaks and FRiP")
report = {
    'output_path': 'marked_promoters.txt',
    'method': {'tool': f"samtools view -q 30; macs3 callpeak narrow with the input as control, --nomodel --extsize "
                       f"{values['fragment_length']}, -g {values['effective_genome_size']}",
               'filters': 'MAPQ >= 30 primary reads; duplicates collapsed (MACS3 --keep-dup 1; deduplicated for FRiP); '
                          'peaks overlapping blacklist.bed removed',
               'peak_mode': 'narrow'},
    'n_peaks': values['n_peaks'],
    'frip': values['frip'],
    'n_marked_promoters': values['n_marked_promoters'],
    'issues_found': issues,
    'analysis_usable': True,
    'trajectory': 'tabulated MAPQ per library; filtered to MAPQ >= 30; called narrow peaks against the input; compared '
                  'with peaks on the raw BAMs; removed peaks in the exclusion list; FRiP on filtered deduplicated reads; '
                  'marked promoters = TSS +-1 kb overlapping a peak',
}
print(json.dumps(report))
"""

_PEAKS_NAIVE = _NAIVE_HEAD + r"""genes = pd.read_csv('genes.csv')
chip, inp = meta['files']['chip_bam'], meta['files']['input_bam']
os.makedirs('macs', exist_ok=True)
cmd = ['macs3', 'callpeak', '-t', chip, '-c', inp, '-f', 'BAM', '-n', 'naive', '--outdir', 'macs']
if subprocess.run(cmd, capture_output=True).returncode != 0:  # model building failed: use the size from meta.json
    cmd += ['--nomodel', '--extsize', str(meta.get('library_fragment_size_bp', 200))]
    subprocess.run(cmd, check=True, capture_output=True)
pk = pd.read_csv('macs/naive_peaks.narrowPeak', sep='\t', header=None).iloc[:, :3]
pk.columns = ['chrom', 'start', 'end']
bam = pysam.AlignmentFile(chip)
seen = set()
inpk = 0
for r in pk.itertuples():
    for a in bam.fetch(r.chrom, int(r.start), int(r.end)):
        if a.query_name not in seen:
            seen.add(a.query_name)
            inpk += 1
frip = inpk / bam.mapped
marked = []
for g in genes.itertuples():
    if ((pk.chrom == g.chrom) & (pk.start < g.tss + 1000) & (pk.end > g.tss - 1000)).any():
        marked.append(g.gene_id)
open('marked_promoters.txt', 'w').write(''.join(x + '\n' for x in marked))
report = {
    'output_path': 'marked_promoters.txt',
    'method': {'tool': 'macs3 callpeak with default settings', 'filters': 'none', 'peak_mode': 'narrow (MACS3 default)'},
    'n_peaks': int(len(pk)), 'frip': round(frip, 4), 'n_marked_promoters': len(marked),
    'issues_found': [], 'analysis_usable': True,
    'trajectory': 'called peaks with macs3 callpeak against the input; FRiP with pysam; promoters = TSS +-1 kb',
}
print(json.dumps(report))
"""


scripted("histone.L2.peaks", [_helpers_cell, _PEAKS_ORACLE], [_PEAKS_NAIVE])
