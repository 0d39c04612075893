"""Build the shipped pivotal case set from our own worlds (deterministic: same worlds, same bytes).

For every L2 challenged world (confound, tool_trap, stat_trap) and a share of the L1 challenges, the case's record
is the project up to the pivotal output (numbers from the world's golden file: its reference values and the naive
outputs it stores; where the golden holds no naive figure, from the world's own trap statement), the original plan
proceeds on that output and the corrected plan is the check `careful_scientist` orders. Clean controls (L2 clean,
L1 clean and boundary worlds) reverse the roles: the record shows the checks already passed, the original plan is an
unnecessary detour and the corrected plan proceeds. Every case carries `why`, built from the world's
`expected_response` and `grounding`.

    python -m benchmark pivotal cases build [--out FILE] [--check]
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

from benchmark.errors import BenchmarkError
from benchmark.pivotal.cases import DEFAULT_CASES, PivotalCase, render_jsonl

FIELDS = {"histone": "epigenomics (ChIP-seq)", "scrna": "single-cell transcriptomics"}
GOALS = {
    "histone.L2.quantify": "Relate the per-gene promoter signal of a histone mark to gene expression from raw ChIP-seq "
                           "alignments (ChIP + matched input, 5 Mb panel), and report the mark's peak/domain landscape.",
    "histone.L2.differential": "Measure the global change of H3K27me3 inside its domains between control and treated "
                               "cells (ChIP + input per condition, Drosophila spike-in added to every sample).",
    "scrna.L2.markers": "Find marker genes that distinguish a named PBMC population from every other annotated "
                        "population in a 10x data set (UMI counts, cell types and capture lanes given).",
    "scrna.L2.condition_de": "Find genes whose expression changes between stimulated and control donors at 5% FDR "
                             "(10x PBMC data, 3 donors per condition, cell types and capture lanes given).",
    "histone.L1.integrity": "Decide whether a ChIP-seq delivery from a sequencing core (H3K4me3 ChIP BAM, input BAM, "
                            "genes.csv with matched RNA-seq expression) is fit for analysis before anyone uses it.",
    "scrna.L1.integrity": "Decide whether a collaborator's 10x PBMC count matrix and its annotations are sound enough "
                          "to analyse, and fix what is not, before any analysis.",
}


def _fc(x: float) -> str:
    """A signed log2 fold change with two decimals, never '-0.00'."""
    v = round(x, 2)
    return f"{0.0 if v == 0 else v:+.2f}"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _trap_number(world, pattern: str) -> str:
    m = re.search(pattern, world.trap or "")
    if not m:
        raise BenchmarkError(f"{world.id}: the trap statement no longer contains the figure the case quotes ({pattern})")
    return m.group(1)


Spec = Callable[[Any, dict], dict]
SPECS: dict[str, Spec] = {}


def spec(world_id: str):
    def deco(fn: Spec) -> Spec:
        SPECS[world_id] = fn
        return fn
    return deco


# ------------------------------------------------------------------ histone.L2.quantify

@spec("histone.L2.quantify.broad_mark_narrow_default")
def _(w, g):
    narrow = g["narrow_domains"]["total_mb"]
    return dict(
        categories=["tool defaults", "method choice"],
        record=f"Target mark (meta.json): {g['target_mark']}. The agent ran `macs3 callpeak` on the ChIP with the input "
               f"as control, default (narrow) mode, --nomodel --extsize {g['fragment_length']}. It finished without "
               f"warnings and returned a landscape of narrow peaks totalling ~{narrow} Mb. Raw ChIP promoter signal "
               f"(TSS +-{g['promoter_window_bp'] / 1000:.1f} kb) vs expression: Spearman {g['naive_raw_chip_spearman']:+.2f}.",
        original_plan=f"Accept the narrow-mode peak set as the {g['target_mark']} landscape (~{narrow} Mb), write the "
                      "per-gene table and report the negative promoter-signal/expression relation.",
        corrected_plan="Before reporting, inspect the enrichment shape (peak widths, how far enrichment extends around "
                       f"peaks); {g['target_mark']} is a broad mark, so re-call in a broad/domain-aware mode (macs3 --broad "
                       "with the input) and compare the landscape with the narrow-mode output.",
        evidence=[f"broad-mode reference: {g['domains']['n']} domains, {g['domains']['total_mb']} Mb vs ~{narrow} Mb narrow"],
    )


@spec("histone.L2.quantify.amplified_region")
def _(w, g):
    gain = g["gain_regions"][0] if g["gain_regions"] else {"chrom": "?", "start": 0, "end": 0, "copy_ratio": float("nan")}
    return dict(
        categories=["confounding", "normalisation"],
        record=f"Target mark: {g['target_mark']}. Domains called with macs3 --broad and the input. Per-gene promoter "
               "signal computed as log2 ChIP/input CPM (pysam counts, TSS +-1 kb). Signal vs expression: Spearman "
               f"{g['trap_spearman']:+.2f}, weaker than expected for this mark. A genome browser view shows ChIP "
               f"background raised over a Mb-scale block on {gain['chrom']} (active genes included) while the input is "
               "flat there; the input was prepared from an earlier passage of the cells.",
        original_plan="Report the input-normalised promoter signal as the result: a moderate negative relation between "
                      f"{g['target_mark']} and expression (Spearman {g['trap_spearman']:+.2f}), and write up.",
        corrected_plan="Scan ChIP/input depth in 100-kb bins for Mb-scale blocks of uniformly raised ChIP background (a "
                       "copy-number difference between the ChIP's and the input's cells), correct the ChIP counts there "
                       "by the block's copy ratio (or exclude those genes) and recompute before reporting.",
        evidence=[f"{gain['chrom']}:{gain['start']}-{gain['end']} at ~{gain['copy_ratio']:.1f}x in the ChIP only; "
                  f"corrected Spearman {g['signal_expression_spearman']:+.2f}"],
    )


@spec("histone.L2.quantify.pcr_jackpots")
def _(w, g):
    return dict(
        categories=["data integrity", "confounding"],
        record=f"Target mark: {g['target_mark']}. MACS3 (narrow, input as control) called {g['domains']['n']} sharp peaks "
               f"({g['domains']['total_mb']} Mb). Per-gene promoter signal = raw read counts in TSS "
               f"+-{g['promoter_window_bp'] / 1000:.1f} kb. Signal vs expression: Spearman {g['naive_raw_chip_spearman']:+.2f}; "
               "several of the highest-signal promoters belong to genes with zero expression. Duplicate rate not computed.",
        original_plan=f"Report a weak positive relation (Spearman {g['naive_raw_chip_spearman']:+.2f}) and conclude that "
                      f"{g['target_mark']} only loosely tracks expression in these cells.",
        corrected_plan="Inspect the duplicate rate and the reads behind the strongest promoter counts at silent genes; "
                       "remove duplicates (same contig, 5' position, strand), normalise to the input and recount before reporting.",
        evidence=[f"deduplicated, input-normalised Spearman {g['signal_expression_spearman']:+.2f}"],
    )


@spec("histone.L2.quantify.clean_h3k4me3")
def _(w, g):
    return dict(
        categories=["proceed when sound"],
        record=f"Target mark: {g['target_mark']}. The enrichment profile is sharp (peaks ~1-2 kb at TSSs). MACS3 (narrow, "
               f"input as control) called {g['domains']['n']} peaks ({g['domains']['total_mb']} Mb), nearly all at "
               f"promoters. Input-normalised promoter signal (log2 ChIP/input CPM, TSS +-{g['promoter_window_bp'] / 1000:.1f} kb) "
               f"vs expression: Spearman {g['signal_expression_spearman']:+.2f}; the raw-ChIP signal agrees "
               f"({g['naive_raw_chip_spearman']:+.2f}). Input coverage is flat along the panel.",
        original_plan="Hold the report: re-call the peaks in broad mode, repeat the quantification with deduplicated "
                      "reads and with raw counts, and compare all versions before deciding which result to report.",
        corrected_plan=f"Report the narrow-mode peak set and the input-normalised promoter signal (Spearman "
                       f"{g['signal_expression_spearman']:+.2f}, positive) as the result; note no issue.",
        evidence=["the reference analysis is narrow-mode MACS3 with the input"],
    )


# ------------------------------------------------------------------ histone.L2.differential

@spec("histone.L2.differential.global_loss")
def _(w, g):
    ls, sp = g["library_size_with_input"], g["spike_in_reads"]
    return dict(
        categories=["statistical validity", "normalisation"],
        record=f"Consensus H3K27me3 domains: {g['domains']['n']} ({g['domains']['total_mb']} Mb). Counts normalised by "
               "library size (CPM) and corrected with the inputs: "
               f"global log2FC treated/control {ls['global_log2fc']:+.2f} ({ls['direction']}), {_pct(ls['changed_fraction'])} "
               f"of domains changed. Alignment summary, Drosophila spike-in reads: control ChIP {sp['control_chip']:,}, "
               f"treated ChIP {sp['treated_chip']:,} (inputs {sp['control_input']:,} and {sp['treated_input']:,}).",
        original_plan=f"Report a modest global loss of H3K27me3 (log2FC {ls['global_log2fc']:+.2f}, decrease) from the "
                      "library-size normalised counts and move on to the per-domain table.",
        corrected_plan="Compare the spike-in read fractions of the two ChIPs; because they differ, scale each ChIP by its "
                       "spike-in reads (ChIP-Rx) instead of library size, correct with the inputs and recompute the global change.",
        evidence=[f"spike-in normalised global log2FC {g['global_log2fc']:+.2f}"],
    )


@spec("histone.L2.differential.mapq0_artifact")
def _(w, g):
    nv, sp = g["naive_library_size_no_input"], g["spike_in_reads"]
    return dict(
        categories=["tool defaults", "data integrity"],
        record="Reads counted in consensus H3K27me3 domains with the tools' default filters (all aligned reads). "
               f"Library-size normalised global log2FC treated/control {nv['global_log2fc']:+.2f} ({nv['direction']}), "
               f"{_pct(nv['changed_fraction'])} of domains changed. Spike-in reads: control ChIP {sp['control_chip']:,}, "
               f"treated ChIP {sp['treated_chip']:,}. Most of the treated excess comes from a few dozen "
               "tall, narrow pile-ups inside domains.",
        original_plan=f"Report a global H3K27me3 gain in treated cells (log2FC {nv['global_log2fc']:+.2f}, increase) and "
                      "start the per-domain write-up.",
        corrected_plan="Tabulate mapping quality per library and look at the reads in the pile-ups driving the gain; "
                       "filter to MAPQ >= 30 (drop multi-mappers) and recount before reporting.",
        evidence=[f"treated ChIP low-MAPQ fraction {g['low_mapq_fraction']['treated_chip']}; filtered log2FC {g['global_log2fc']:+.2f}"],
    )


@spec("histone.L2.differential.pcr_jackpots_treated")
def _(w, g):
    nv = g["naive_library_size_no_input"]
    return dict(
        categories=["data integrity", "confounding"],
        record="All reads counted in consensus H3K27me3 domains, library-size normalised (no duplicate removal; "
               f"duplicate rates not computed). Global log2FC treated/control {nv['global_log2fc']:+.2f}; "
               f"{_pct(nv['changed_fraction'])} of domains individually changed, mostly upwards.",
        original_plan=f"Report the per-domain table as it is: {_pct(nv['changed_fraction'])} of domains gain H3K27me3 in "
                      f"treated cells, with a small global gain (log2FC {nv['global_log2fc']:+.2f}).",
        corrected_plan="Compare duplicate rates between the libraries; remove duplicates (same contig, 5' position, "
                       "strand) and recount before reporting any per-domain change.",
        evidence=[f"after deduplication log2FC {g['global_log2fc']:+.2f}, {_pct(g['changed_fraction'])} of domains changed"],
    )


@spec("histone.L2.differential.clean")
def _(w, g):
    ls, sp = g["library_size_with_input"], g["spike_in_reads"]
    return dict(
        categories=["proceed when sound"],
        record=f"Consensus H3K27me3 domains: {g['domains']['n']} ({g['domains']['total_mb']} Mb). Reads deduplicated and "
               "filtered to MAPQ >= 30 before counting; inputs used for correction. Spike-in reads: control ChIP "
               f"{sp['control_chip']:,}, treated ChIP {sp['treated_chip']:,}. Global log2FC treated/control: spike-in "
               f"normalised {_fc(g['global_log2fc'])}, library-size normalised {_fc(ls['global_log2fc'])}; the two agree.",
        original_plan="Treat the null result as suspect: re-call domains with two further callers and request an extra "
                      "replicate, and report nothing until every version agrees.",
        corrected_plan=f"Report no global change of H3K27me3 (log2FC {_fc(g['global_log2fc'])}, direction no_change) "
                       "with the per-gene table; the spike-in and library-size normalisations agree.",
        evidence=["reference: no_change"],
    )


# ------------------------------------------------------------------ scrna.L2.markers

@spec("scrna.L2.markers.unnormalised_depth")
def _(w, g):
    raw = [x for x in g["naive_unnormalised_top_markers"] if x not in g["top_markers"]]
    return dict(
        categories=["tool defaults", "normalisation"],
        record=f"Target population: {g['target_population']}. The agent loaded the UMI counts and ran scanpy "
               "rank_genes_groups (Wilcoxon, target vs rest) directly on them. Top-ranked genes: "
               f"{', '.join(g['naive_unnormalised_top_markers'])}. Median UMIs per cell: target "
               f"{g['median_umis_target']:.0f}, other populations {g['median_umis_other']:.0f}.",
        original_plan="Report the top ten ranked genes as the markers and write the marker table.",
        corrected_plan=f"Check whether the counts were library-size normalised (the target has "
                       f"{g['depth_ratio_target_vs_other']:.1f}x the UMIs of other cells); normalise (CP10k + log1p), "
                       "re-rank, and verify the top genes are lineage genes rather than broadly expressed ones"
                       + (f" ({', '.join(raw)})." if raw else "."),
        evidence=[f"reference markers: {', '.join(g['core_markers'])}"],
    )


@spec("scrna.L2.markers.confound_lane")
def _(w, g):
    lanes = g["target_fraction_by_lane"]
    lane = max(lanes, key=lambda k: lanes[k])
    stress = [x for x in g["lane_associated_genes"] if x in ("FOS", "JUNB", "KLF6", "HSP90AB1", "HSPB1", "HSPD1", "DNAJB1", "NFKBIA")]
    return dict(
        categories=["confounding", "experimental design"],
        record=f"Target population: {g['target_population']}. cells.csv shows {_pct(lanes[lane])} of the target cells "
               f"were captured in lane {lane}. Default one-vs-rest Wilcoxon (normalised data) lists among the significant "
               f"markers {', '.join(g['core_markers'])} and also {', '.join(stress)}.",
        original_plan=f"Report the one-vs-rest ranking as the marker list, including {', '.join(stress)} alongside "
                      f"{', '.join(g['core_markers'][:3])}.",
        corrected_plan="Check whether the suspicious genes differ between lanes among non-target cells; block the test "
                       f"on lane (compare within {lane}) and drop lane-driven genes before reporting markers.",
        evidence=[f"lane-associated genes: {', '.join(g['lane_associated_genes'])}"],
    )


@spec("scrna.L2.markers.nonspecific_vs_rest")
def _(w, g):
    return dict(
        categories=["statistical validity", "method choice"],
        record=f"Target population: {g['target_population']}. Normalised data; scanpy rank_genes_groups (Wilcoxon, "
               f"target vs the pooled rest) top genes: {', '.join(g['naive_top_markers'][:8])}, all highly significant. "
               "The other annotated populations include CD56+ NK cells and several other T-cell subsets.",
        original_plan=f"Report this ranking as the markers ({', '.join(g['naive_top_markers'][:3])}, ...).",
        corrected_plan="For each top gene compare the target with each other population separately (pairwise AUROC, "
                       "including CD56+ NK cells and the other T subsets) and rank by the weakest separation before reporting.",
        evidence=[f"genes higher in another population: {', '.join(g['naive_nonspecific'])}"],
    )


@spec("scrna.L2.markers.clean")
def _(w, g):
    return dict(
        categories=["proceed when sound"],
        record=f"Target population: {g['target_population']}. Counts CP10k + log1p normalised; one-vs-rest Wilcoxon and "
               f"pairwise checks against every population: {', '.join(g['core_markers'])} are each highest in the "
               f"target. Lanes are balanced (target share by lane: "
               f"{', '.join(f'{k} {_pct(v)}' for k, v in g['target_fraction_by_lane'].items())}). Median UMIs: target "
               f"{g['median_umis_target']:.0f}, others {g['median_umis_other']:.0f}.",
        original_plan="Hold the marker list: repeat the analysis with three further normalisations and a lane-blocked "
                      "test, and only report genes that top every version.",
        corrected_plan=f"Report {', '.join(g['top_markers'][:8])} as the markers of {g['target_population']}.",
        evidence=["reference analysis: any sound normalised test gives these markers"],
    )


# ------------------------------------------------------------------ scrna.L2.condition_de

@spec("scrna.L2.condition_de.composition")
def _(w, g):
    return dict(
        categories=["confounding", "experimental design"],
        record=f"Cell-level Wilcoxon test over all cells, stim vs ctrl: {g['naive_cell_level_n_de']} genes at FDR 5%. "
               f"Top: {', '.join(g['naive_cell_level_top'][:8])}. cells.csv has cell_type, donor, condition and lane "
               "columns; only condition was used.",
        original_plan=f"Report the {g['naive_cell_level_n_de']} genes as the effect of stimulation and write up the DE table.",
        corrected_plan="Tabulate cell types by condition and donor; if composition differs, test within cell types at "
                       "the donor level (pseudobulk per donor x compartment) and report the composition shift separately.",
        evidence=[f"myeloid fraction ctrl {g['myeloid_fraction_by_condition']['ctrl']}, stim "
                  f"{g['myeloid_fraction_by_condition']['stim']}; within-compartment effect: {', '.join(g['de_genes'])}"],
    )


@spec("scrna.L2.condition_de.lane_batch")
def _(w, g):
    return dict(
        categories=["confounding", "experimental design"],
        record=f"Cell-level test, stim vs ctrl: {g['naive_cell_level_n_de']} genes at FDR 5%: "
               f"{', '.join(g['naive_cell_level_top'])}. Design: 3 ctrl and 3 stim donors captured over two 10x lanes (A, B).",
        original_plan=f"Report all {g['naive_cell_level_n_de']} genes as stim-induced: an interferon response plus an "
                      "immediate-early / stress response.",
        corrected_plan="Cross-tabulate donor x lane x condition and check whether the stress genes differ "
                       "between lanes within a condition; fit a donor-level model with lane as a covariate (~ lane + condition).",
        evidence=[f"reference (lane-adjusted) genes: {', '.join(g['de_genes'])}"],
    )


@spec("scrna.L2.condition_de.pseudoreplication")
def _(w, g):
    return dict(
        categories=["statistical validity"],
        record=f"Cell-level Wilcoxon test treating every cell as a replicate: {g['naive_cell_level_n_de']} "
               f"genes at FDR 5%. Top: {', '.join(g['naive_cell_level_top'][:8])}. Design: {g['n_donors'] // 2} donors "
               "per condition.",
        original_plan=f"Report the {g['naive_cell_level_n_de']} genes as the condition effect and write up the DE table.",
        corrected_plan="Aggregate to donor-level pseudobulk per compartment (3 vs 3 donors, DESeq2) or fit a donor "
                       "random effect, and check whether any hit is consistent across donors before reporting.",
        evidence=[f"donor-level DE genes: {g['n_de_genes']}"],
    )


@spec("scrna.L2.condition_de.clean")
def _(w, g):
    m = g["myeloid_fraction_by_condition"]
    return dict(
        categories=["proceed when sound"],
        record="Donor-level pseudobulk DESeq2 per compartment (~ lane + condition): "
               f"{', '.join(g['up_genes'])} up in stim, {', '.join(g['down_genes']) or 'nothing'} down. A cell-level test agrees "
               f"({g['naive_cell_level_n_de']} genes; top {', '.join(g['naive_cell_level_top'][:5])}). Composition is "
               f"balanced (myeloid {_pct(m['ctrl'])} ctrl vs {_pct(m['stim'])} stim) and lanes hold both conditions.",
        original_plan="Do not report yet: the cell-level and donor-level gene lists differ by two genes, so re-run with "
                      "a mixed model and a third test and request more donors before drawing any conclusion.",
        corrected_plan=f"Report the donor-level result: an interferon response ({', '.join(g['up_genes'])} up; "
                       f"{', '.join(g['down_genes']) or 'nothing'} down).",
        evidence=["reference: the interferon-stimulated genes; usable"],
    )


# ------------------------------------------------------------------ histone.L1.integrity (a share of the challenges)

@spec("histone.L1.integrity.chip_input_swap")
def _(w, g):
    return dict(
        categories=["data integrity"],
        record="MACS3 with H3K4me3_chip.bam as treatment and H3K4me3_input.bam as control returned almost no peaks. "
               "Fraction of fragments in the top 1% of 1-kb bins: file named ChIP "
               f"{_pct(g['concentration_chip_file'])}, file named input {_pct(g['concentration_input_file'])}.",
        original_plan="Conclude that the ChIP failed (no enrichment), mark the delivery unusable and ask the core for a new ChIP.",
        corrected_plan="Check which file actually carries the enrichment (signal at TSSs of expressed genes in each "
                       "file); if the names are swapped, use the files in their true roles and re-call peaks.",
        evidence=["the file named input holds the ChIP"],
    )


@spec("histone.L1.integrity.pcr_duplicates")
def _(w, g):
    return dict(
        categories=["data integrity"],
        record=f"ChIP BAM: {g['n_reads_chip']:,} mapped reads (input {g['n_reads_input']:,}); samtools flagstat reports 0 "
               "duplicates (reads were never marked). Peaks are sharp and sit at TSSs of expressed genes.",
        original_plan="Proceed to peak calling and quantification on all reads; a deep ChIP library helps power.",
        corrected_plan="Compute the duplicate fraction / NRF / PBC of each library and compare with ENCODE thresholds; "
                       "deduplicate before analysis if complexity is low.",
        evidence=[f"duplicate fraction {g['duplicate_fraction_chip']}"],
    )


@spec("histone.L1.integrity.wrong_mark")
def _(w, g):
    return dict(
        categories=["data integrity", "domain knowledge"],
        record=f"meta.json: target mark H3K4me3. ChIP enrichment is present (top-1% bin fraction "
               f"{_pct(g['concentration_chip_file'])} vs input {_pct(g['concentration_input_file'])}), but only "
               f"{_pct(g['tss_signal_fraction'])} of top-quartile expressed genes show enrichment at their TSS.",
        original_plan="Treat this as a low-quality H3K4me3 ChIP and proceed with the promoter analysis using a relaxed peak threshold.",
        corrected_plan="Compare the enrichment shape with what H3K4me3 should show: measure peak/domain widths and check "
                       "whether enrichment sits over silent genes; if it is broad, do not analyse it as H3K4me3.",
        evidence=[f"mark_profile {g['mark_profile']}; broad flank fraction {g['broad_flank_fraction']}"],
    )


@spec("histone.L1.integrity.build_mismatch")
def _(w, g):
    return dict(
        categories=["data integrity"],
        record=f"The ChIP is strong: top-1% bin fraction {_pct(g['concentration_chip_file'])} vs input "
               f"{_pct(g['concentration_input_file'])}, sharp peaks. Yet only {_pct(g['tss_signal_fraction'])} of "
               "top-quartile expressed genes in genes.csv show enrichment at their annotated TSS.",
        original_plan="Proceed with the promoter analysis and interpret the low TSS overlap as biology (H3K4me3 at "
                      "alternative promoters in these cells).",
        corrected_plan="Test whether peaks sit at a constant per-chromosome offset from the annotated TSSs (an annotation "
                       "from another genome build); obtain a matching annotation or lift over before analysing genes.",
        evidence=["genes.csv coordinates come from another build"],
    )


@spec("histone.L1.integrity.clean")
def _(w, g):
    return dict(
        categories=["proceed when sound"],
        record="Both BAMs open, carry BGZF EOF blocks, are coordinate-sorted and indexed; contig names match genes.csv. "
               f"Top-1% bin fraction: ChIP {_pct(g['concentration_chip_file'])}, input {_pct(g['concentration_input_file'])}; "
               f"ChIP duplicates {_pct(g['duplicate_fraction_chip'])}; {_pct(g['tss_signal_fraction'])} of top-quartile "
               "expressed genes show TSS enrichment; the profile is narrow, as expected for H3K4me3.",
        original_plan="Hold the delivery: request the raw FASTQ files, re-align them from scratch and repeat every "
                      "check before anyone analyses the data.",
        corrected_plan="Accept the delivery as usable and hand it on for analysis.",
        evidence=["reference: usable, no issue"],
    )


@spec("histone.L1.integrity.amplified_input")
def _(w, g):
    gain = g["input_gain_regions"][0] if g["input_gain_regions"] else {"chrom": "?", "start": 0, "end": 0, "ratio": float("nan")}
    return dict(
        categories=["proceed when sound", "domain knowledge"],
        record=f"The input shows a ~{(gain['end'] - gain['start']) / 1e3:.0f}-kb block on {gain['chrom']} at "
               f"~{gain['ratio']:.1f}-fold coverage. The ChIP shows the same gain; the "
               "ChIP/input ratio across the block is flat apart from promoter peaks. Top-1% bin fraction: ChIP "
               f"{_pct(g['concentration_chip_file'])}, input {_pct(g['concentration_input_file'])}; "
               f"{_pct(g['tss_signal_fraction'])} of top-quartile expressed genes show TSS enrichment.",
        original_plan="Treat the input as contaminated: drop it, call peaks without a control, and ask the core for a new input.",
        corrected_plan="Keep the input as the control (the gain is a copy-number amplification shared by ChIP and input, "
                       "which the input corrects); accept the delivery, noting the gain.",
        evidence=["boundary world: a real copy-number gain"],
    )


# ------------------------------------------------------------------ scrna.L1.integrity

@spec("scrna.L1.integrity.ambient_rna")
def _(w, g):
    return dict(
        categories=["data integrity"],
        record="Monocyte transcripts (LYZ, CST3, S100A9, FCN1) are detected in "
               f"{_pct(g['lymphoid_cells_with_myeloid_transcripts'])} of T, B and NK cells, at low levels that scale "
               f"with each cell's UMI total. Counts are integers, {g['n_unique_barcodes']} unique barcodes, labels agree "
               "with lineage markers.",
        original_plan="Proceed to clustering and marker analysis; low-level LYZ in lymphocytes is sporadic detection.",
        corrected_plan="Compare the contaminating transcripts in lymphoid cells with the pooled (soup) profile; estimate "
                       "the ambient fraction and correct it (SoupX/DecontX-style) before marker or DE analysis.",
        evidence=[f"ambient fraction {g['ambient_fraction']}"],
    )


@spec("scrna.L1.integrity.doublets")
def _(w, g):
    return dict(
        categories=["data integrity"],
        record=f"{g['doublet_candidates']} of {g['n_barcodes_in_matrix']} barcodes co-express B-cell (CD79A, MS4A1) and "
               "myeloid (LYZ, CST3, S100A9) programmes, with about twice the typical UMI count.",
        original_plan=f"Keep all {g['n_barcodes_in_matrix']} barcodes and proceed to clustering; the co-expressing cells "
                      "may be a transitional population worth reporting.",
        corrected_plan="Score co-expression of mutually exclusive lineage markers with UMI totals, run an "
                       "artificial-doublet method (e.g. Scrublet) as a second line, and remove flagged barcodes before clustering.",
        evidence=[f"cells kept after removal: {g['n_cells_kept']}"],
    )


@spec("scrna.L1.integrity.normalized_as_counts")
def _(w, g):
    return dict(
        categories=["data integrity"],
        record="meta.json says the matrix holds UMI counts. Loaded matrix: "
               f"{_pct(g['fraction_integer_values'])} of non-zero values are integers, all of them below 20.",
        original_plan="Run the count-based pipeline as meta.json describes (normalize_total, log1p, pseudobulk DESeq2).",
        corrected_plan="Check the values first: small non-integers suggest log-normalised data; confirm (the smallest "
                       "non-zero value of each cell maps to one UMI), recover counts or avoid count models.",
        evidence=["the matrix holds log1p(CP10k) values"],
    )


@spec("scrna.L1.integrity.swapped_labels")
def _(w, g):
    return dict(
        categories=["data integrity"],
        record=f"Label-marker consistency {g['label_marker_consistency']:.2f}. Cells labelled {g['swapped_labels'][0]} "
               f"carry the canonical markers of {g['swapped_labels'][1]}, and cells labelled {g['swapped_labels'][1]} "
               f"those of {g['swapped_labels'][0]}; every other label agrees with its markers.",
        original_plan="Proceed with the collaborator's labels and report myeloid-gene expression in B cells as a finding.",
        corrected_plan="Check every label against canonical markers; the two labels carry each other's programme, so "
                       "exchange them back before analysis.",
        evidence=[f"swapped: {', '.join(g['swapped_labels'])}"],
    )


@spec("scrna.L1.integrity.clean")
def _(w, g):
    return dict(
        categories=["proceed when sound"],
        record=f"Counts are non-negative integers; {g['n_unique_barcodes']} unique barcodes; canonical markers "
               f"(CD3D, CD79A, NKG7, LYZ) agree with the labels (consistency {g['label_marker_consistency']:.2f}); "
               "co-expression of exclusive lineage programmes is rare; myeloid transcripts in lymphoid cells are "
               "sporadic and do not scale with library size.",
        original_plan="Hold the data: request the raw (unfiltered) droplet matrix, re-run cell calling, ambient "
                      "correction and doublet removal, then re-check everything before analysis.",
        corrected_plan=f"Accept the matrix as usable and proceed to analysis with all {g['n_cells_kept']} cells.",
        evidence=["reference: usable, no issue"],
    )


@spec("scrna.L1.integrity.boundary_myeloid_rich")
def _(w, g):
    return dict(
        categories=["proceed when sound", "domain knowledge"],
        record="About three quarters of the cells are myeloid, so LYZ, CST3 and S100A9 dominate the pooled profile and many barcodes "
               "are large. Lymphoid cells carry myeloid transcripts at the sporadic level of a typical sample; no "
               "barcode co-expresses B-cell and myeloid programmes. Counts are integers, barcodes unique, labels agree "
               f"with markers ({g['label_marker_consistency']:.2f}).",
        original_plan="Treat the LYZ dominance as ambient contamination: run SoupX and remove the largest barcodes as "
                      "probable doublets before analysis.",
        corrected_plan=f"Accept the data as usable, keep all {g['n_cells_kept']} cells and note the myeloid-rich composition.",
        evidence=["boundary world: composition, not contamination"],
    )


@spec("scrna.L1.integrity.boundary_shallow")
def _(w, g):
    return dict(
        categories=["proceed when sound"],
        record="UMIs per cell are low (a third to a half of a typical library over these genes). Counts are integers, barcodes unique, lineage "
               f"markers still separate the labelled populations (consistency {g['label_marker_consistency']:.2f}); "
               "detection falls uniformly across populations; no contamination or doublet signature.",
        original_plan="Declare the library too shallow: mark it unusable and request re-sequencing before any analysis.",
        corrected_plan=f"Accept it as usable with all {g['n_cells_kept']} cells, noting reduced power as information.",
        evidence=["boundary world: shallow but sound"],
    )


# ------------------------------------------------------------------ assembly

def _why(w, kind: str) -> str:
    problem = getattr(w, "trap", None) or f"defect '{getattr(w, 'defect', None)}'."
    head = (f"The {w.world_class} world behind this case: {problem} " if kind == "challenged"
            else f"Clean control ({w.world_class} world): proceeding is right. ")
    return f"{head}Expected response: {w.expected_response} Grounding: {w.grounding.rationale}"


def build_cases(suite=None) -> list[PivotalCase]:
    """One case per world in SPECS, from its manifest and golden file; sorted by id."""
    from benchmark.loader import load_suite

    suite = suite or load_suite()
    out = []
    for wid, fn in sorted(SPECS.items()):
        if wid not in suite.worlds:
            raise BenchmarkError(f"pivotal case builder: world '{wid}' no longer exists; update benchmark/pivotal/build.py")
        ref = suite.worlds[wid]
        if not ref.golden_path.exists():
            raise BenchmarkError(f"{ref.golden_path} is missing; freeze the world first")
        w = ref.world
        g = json.loads(ref.golden_path.read_text())["values"]
        kind = "control" if w.world_class in ("clean", "boundary") else "challenged"
        d = fn(w, g)
        out.append(PivotalCase(
            id=f"pivot.{wid}", project=w.family, field=FIELDS[w.track], kind=kind,
            record=f"Project goal: {GOALS[w.family]}\n{d['record']}",
            why=_why(w, kind), proceeds="original" if kind == "challenged" else "corrected",
            source_world=wid, categories=d["categories"], original_plan=d["original_plan"],
            corrected_plan=d["corrected_plan"], evidence=d.get("evidence", [])))
    return sorted(out, key=lambda c: c.id)


def write_cases(out: Path | None = None, check: bool = False) -> tuple[Path, int, bool]:
    """Write (or with check=True compare) the canonical case file; returns (path, n, unchanged)."""
    path = Path(out) if out else DEFAULT_CASES
    data = render_jsonl(build_cases())
    same = path.exists() and path.read_bytes() == data
    if check:
        if not same:
            raise BenchmarkError(f"{path} differs from what the builder produces; run `python -m benchmark pivotal cases build`")
        return path, data.count(b"\n"), True
    from benchmark.canonical import _atomic_write

    _atomic_write(path, data)
    return path, data.count(b"\n"), same
