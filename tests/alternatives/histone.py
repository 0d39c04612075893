"""histone: sound analyses other than the reference solver's (samtools-view parsing, strand cross-correlation,
MACS3 --nomodel on pooled ChIPs, per-gene windows with numpy).

Written from the prompt and the public files only (BAMs, genes.csv, meta.json): reads are parsed with pysam, PCR
duplicates and low-MAPQ reads are dropped while reading, H3K27me3 domains of the differential question come from a
SICER-like window caller written here (Zang et al. 2009: 5-kb windows, Poisson enrichment over the input, gaps of
one window merged), and the quantify question's peaks from MACS3 with its own model-estimated fragment size.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import poisson, spearmanr

from tests.alternatives import alternative

BROAD = {"H3K27me3", "H3K9me3", "H3K36me3", "H3K79me2"}


class Bam:
    """Fragment centres of the kept reads (primary, mapped, MAPQ >= min_mapq, first read of each 5' position and
    strand), per contig; the spike-in reads counted apart."""

    def __init__(self, path: Path, frag: int, min_mapq: int = 30, spike_prefix: str = "dm6_"):
        import pysam

        self.centres: dict[str, list[int]] = {}
        self.lengths: dict[str, int] = {}
        self.spike = 0
        self.human = 0
        seen = set()
        with pysam.AlignmentFile(str(path), "rb") as bam:
            self.lengths = dict(zip(bam.references, bam.lengths))
            for r in bam.fetch(until_eof=True):
                if r.is_unmapped or r.is_secondary or r.is_supplementary or r.mapping_quality < min_mapq:
                    continue
                five = r.reference_end - 1 if r.is_reverse else r.reference_start
                key = (r.reference_id, five, r.is_reverse)
                if key in seen:
                    continue
                seen.add(key)
                c = r.reference_name
                if c.startswith(spike_prefix):
                    self.spike += 1
                    continue
                self.human += 1
                self.centres.setdefault(_chr(c), []).append(five - frag // 2 if r.is_reverse else five + frag // 2)
        self.sorted = {c: np.sort(np.array(v)) for c, v in self.centres.items()}
        self.lengths = {_chr(c): l for c, l in self.lengths.items() if not c.startswith(spike_prefix)}

    def count(self, chrom: str, lo, hi) -> np.ndarray:
        x = self.sorted.get(_chr(chrom), np.zeros(0, int))
        return np.searchsorted(x, np.asarray(hi), "left") - np.searchsorted(x, np.asarray(lo), "left")

    def bins(self, chrom: str, size: int) -> np.ndarray:
        L = self.lengths[chrom]
        x = self.sorted.get(chrom, np.zeros(0, int))
        return np.bincount(np.clip(x, 0, L - 1) // size, minlength=L // size + 1)


def _chr(c: str) -> str:
    c = str(c)
    return c if c.startswith("chr") or c.startswith("dm6_") else f"chr{c}"


def window_domains(chips: list[Bam], inputs: list[Bam], win: int = 5000, gap: int = 1, p: float = 1e-3) -> pd.DataFrame:
    """SICER-like broad domains: 5-kb windows whose pooled ChIP count exceeds the depth-scaled pooled input (floored
    at the genome-wide ChIP background) at Poisson p < `p`, merged across gaps of <= `gap` windows; islands of one
    window are dropped."""
    nc, ni = sum(b.human for b in chips), sum(b.human for b in inputs)
    rows = []
    for chrom in sorted(chips[0].lengths):
        c = sum(b.bins(chrom, win) for b in chips)
        i = sum(b.bins(chrom, win) for b in inputs)
        rows.append((chrom, c, i))
    bg = np.median(np.concatenate([c for _, c, _ in rows]))
    out = []
    for chrom, c, i in rows:
        lam = np.maximum(i * nc / ni, bg)
        hit = poisson.sf(c - 1, lam) < p
        idx = np.flatnonzero(hit)
        if not len(idx):
            continue
        start = prev = idx[0]
        for k in list(idx[1:]) + [None]:
            if k is not None and k - prev <= gap + 1:
                prev = k
                continue
            if prev > start:
                out.append({"chrom": chrom, "start": int(start * win), "end": int(min((prev + 1) * win, chips[0].lengths[chrom]))})
            if k is not None:
                start = prev = k
    return pd.DataFrame(out, columns=["chrom", "start", "end"])


def _domain_sum(b: Bam, dom: pd.DataFrame) -> int:
    return int(sum(b.count(r.chrom, r.start, r.end) for r in dom.itertuples()))


def _diff_issues(raw: dict, spikes: dict) -> list[str]:
    """Checks an analyst makes before trusting the comparison: the spike-in share of each ChIP among the reads kept
    (a change means the total amount of the mark changed), and how many reads the MAPQ and duplicate filters removed
    per library (duplicates counted among the MAPQ >= 30 reads, so multi-mapping pile-ups are not taken for PCR
    duplicates)."""
    issues = []
    sc, st = spikes["control_chip"], spikes["treated_chip"]
    if max(sc, st) / min(sc, st) > 1.5:
        issues.append(f"spike-in share differs between the ChIPs (control {sc:.3%}, treated {st:.3%}): the total amount "
                      "of H3K27me3 changed, so library-size normalisation is invalid; spike-in (ChIP-Rx) scaling used")
    for k in ("control_chip", "treated_chip"):
        o = "treated_chip" if k == "control_chip" else "control_chip"
        lowq = raw[k]["lowq"] / raw[k]["n"]
        if lowq > 3 * raw[o]["lowq"] / raw[o]["n"] + 0.01:
            issues.append(f"{k}: {lowq:.1%} of reads have MAPQ < 30 (multi-mapping pile-ups); filtered to MAPQ >= 30")
        dup = raw[k]["dup"] / (raw[k]["n"] - raw[k]["lowq"])
        if dup > 2 * raw[o]["dup"] / (raw[o]["n"] - raw[o]["lowq"]) + 0.02:
            issues.append(f"{k}: {dup:.1%} PCR duplicates (jackpots, low library complexity); deduplicated")
    return issues


def _raw_stats(path: Path) -> dict:
    """Read counts of a BAM by `samtools view -c`: all primary mapped reads, those with MAPQ < 30, and the number of
    MAPQ >= 30 reads that repeat an earlier read's 5' position and strand (samtools markdup would flag them)."""
    sam = shutil.which("samtools") or "samtools"
    n = int(subprocess.run([sam, "view", "-c", "-F", "0x904", str(path)], capture_output=True, text=True).stdout)
    hq = int(subprocess.run([sam, "view", "-c", "-F", "0x904", "-q", "30", str(path)], capture_output=True, text=True).stdout)
    import pysam

    seen, dup = set(), 0
    with pysam.AlignmentFile(str(path), "rb") as bam:
        for r in bam.fetch(until_eof=True):
            if r.is_unmapped or r.is_secondary or r.is_supplementary or r.mapping_quality < 30:
                continue
            key = (r.reference_id, r.reference_end - 1 if r.is_reverse else r.reference_start, r.is_reverse)
            if key in seen:
                dup += 1
            else:
                seen.add(key)
    return {"n": n, "lowq": n - hq, "dup": dup}


@alternative("histone.L2.differential",
             "SICER-like 5-kb window domains on pooled ChIPs, pysam counting (MAPQ >= 30, deduplicated), ChIP-Rx "
             "spike-in scaling with input correction",
             ["histone.L2.differential.clean", "histone.L2.differential.global_loss",
              "histone.L2.differential.mapq0_artifact", "histone.L2.differential.pcr_jackpots_treated"])
def sicer_spike_in(world_dir: Path, out: Path) -> dict:
    meta = json.loads((world_dir / "meta.json").read_text())
    f = meta["files"]
    frag = int(meta.get("library_fragment_size_bp", 200))
    libs = {k: Bam(world_dir / f[k], frag) for k in ("control_chip", "treated_chip", "control_input", "treated_input")}
    dom = window_domains([libs["control_chip"], libs["treated_chip"]], [libs["control_input"], libs["treated_input"]])
    chip_scale = {k: 1.0 / max(libs[k].spike, 1) for k in ("control_chip", "treated_chip")}
    inp_scale = {k: 1.0 / libs[k].human for k in ("control_input", "treated_input")}
    t = _domain_sum(libs["treated_chip"], dom) * chip_scale["treated_chip"]
    c = _domain_sum(libs["control_chip"], dom) * chip_scale["control_chip"]
    ti = _domain_sum(libs["treated_input"], dom) * inp_scale["treated_input"]
    ci = _domain_sum(libs["control_input"], dom) * inp_scale["control_input"]
    input_ratio = ti / ci
    g = float(np.log2(t / c) - np.log2(input_ratio))
    genes = pd.read_csv(world_dir / "genes.csv")
    inside = np.zeros(len(genes), bool)
    for r in dom.itertuples():
        inside |= ((genes.chrom.map(_chr) == r.chrom) & (genes.tss >= r.start) & (genes.tss < r.end)).to_numpy()
    rows = []
    for gr in genes[inside].itertuples():
        a = libs["treated_chip"].count(gr.chrom, gr.tss - 2500, gr.tss + 2500)
        b = libs["control_chip"].count(gr.chrom, gr.tss - 2500, gr.tss + 2500)
        lfc = np.log2((a + 1) * chip_scale["treated_chip"] / ((b + 1) * chip_scale["control_chip"])) - np.log2(input_ratio)
        rows.append({"gene_id": gr.gene_id, "log2fc": round(float(lfc), 4)})
    pd.DataFrame(rows, columns=["gene_id", "log2fc"]).to_csv(out / "gene_log2fc.csv", index=False)
    raw = {k: _raw_stats(world_dir / f[k]) for k in ("control_chip", "treated_chip")}
    spikes = {k: libs[k].spike / (libs[k].spike + libs[k].human) for k in ("control_chip", "treated_chip")}
    return {"output_path": "gene_log2fc.csv",
            "method": {"tool": "pysam + SICER-like 5-kb window caller (pooled ChIPs vs pooled inputs)",
                       "normalization": "each ChIP scaled by its deduplicated MAPQ>=30 spike-in (dm6) reads; inputs by "
                                        "their human reads; treated/control input ratio in the domains divided out",
                       "peak_mode": "broad (5-kb windows, gaps of one window merged)", "window": "TSS +-2.5 kb"},
            "global_log2fc": round(g, 4),
            "direction": "decrease" if g < -0.4 else "increase" if g > 0.4 else "no_change",
            "domains": {"n": int(len(dom)), "total_mb": round(float((dom.end - dom.start).sum()) / 1e6, 4)},
            "issues_found": _diff_issues(raw, spikes), "analysis_usable": True,
            "trajectory": "filtered reads, called consensus domains on both conditions, spike-in scaled counts"}


# ---------------------------------------------------------------- quantify

def _macs3() -> str:
    cand = Path(sys.executable).with_name("macs3")
    return str(cand) if cand.exists() else (shutil.which("macs3") or "macs3")


def macs3_model(chip: Path, inp: Path, gsize: int, broad: bool) -> pd.DataFrame:
    """MACS3 callpeak with its own fragment-size model (falling back to --nomodel --extsize 200 when the model
    fails), q < 0.01, --broad for a broad mark."""
    with tempfile.TemporaryDirectory() as tmp:
        base = [_macs3(), "callpeak", "-t", str(chip), "-c", str(inp), "-f", "BAM", "-g", str(gsize), "-n", "alt",
                "--outdir", tmp, "-q", "0.01"] + (["--broad"] if broad else [])
        p = subprocess.run(base, capture_output=True, text=True)
        if p.returncode != 0:
            p = subprocess.run(base + ["--nomodel", "--extsize", "200"], capture_output=True, text=True, check=True)
        f = Path(tmp) / ("alt_peaks.broadPeak" if broad else "alt_peaks.narrowPeak")
        if f.stat().st_size == 0:
            return pd.DataFrame(columns=["chrom", "start", "end"])
        df = pd.read_csv(f, sep="\t", header=None).iloc[:, :3]
    df.columns = ["chrom", "start", "end"]
    return df[~df.chrom.astype(str).str.startswith("dm6_")]


def gain_blocks(chip: Bam, inp: Bam, binsize: int = 100_000) -> list[dict]:
    """Copy-number differences between ChIP and input cells: runs of >= 3 adjacent 100-kb bins whose depth-scaled
    ChIP/input ratio is > 2x the genome median; the block's copy ratio is the median bin ratio in the block over the
    genome median."""
    ratios = {}
    for chrom in sorted(chip.lengths):
        a, b = chip.bins(chrom, binsize)[:-1].astype(float), inp.bins(chrom, binsize)[:-1].astype(float)
        ratios[chrom] = (a / chip.human) / np.maximum(b / inp.human, 1e-9)
    med = float(np.median(np.concatenate(list(ratios.values()))))
    out = []
    for chrom, r in ratios.items():
        hot = r > 2 * med
        i = 0
        while i < len(hot):
            if hot[i]:
                j = i
                while j < len(hot) and hot[j]:
                    j += 1
                if j - i >= 3:
                    out.append({"chrom": chrom, "start": i * binsize, "end": j * binsize,
                                "copy_ratio": float(np.median(r[i:j]) / med)})
                i = j
            else:
                i += 1
    return out


@alternative("histone.L2.quantify",
             "pysam counts (MAPQ >= 30, deduplicated) as log2 ChIP/input CPM with pseudocount 1, copy-number blocks "
             "from 100-kb ChIP/input bins, MACS3 with its own fragment model at q 0.01",
             ["histone.L2.quantify.clean_h3k4me3", "histone.L2.quantify.broad_mark_narrow_default",
              "histone.L2.quantify.amplified_region", "histone.L2.quantify.pcr_jackpots"])
def pysam_quantify(world_dir: Path, out: Path) -> dict:
    meta = json.loads((world_dir / "meta.json").read_text())
    mark = meta["target_mark"]
    broad = mark in BROAD
    frag = int(meta.get("library_fragment_size_bp", 200))
    chip_p, inp_p = world_dir / meta["files"]["chip_bam"], world_dir / meta["files"]["input_bam"]
    chip, inp = Bam(chip_p, frag, min_mapq=30), Bam(inp_p, frag, min_mapq=30)
    genes = pd.read_csv(world_dir / "genes.csv")
    half = 2500 if broad else 1000
    blocks = gain_blocks(chip, inp)
    issues = []
    cnum = np.ones(len(genes))
    for b in blocks:
        m = ((genes.chrom.map(_chr) == b["chrom"]) & (genes.tss >= b["start"]) & (genes.tss < b["end"])).to_numpy()
        cnum[m] = b["copy_ratio"]
        issues.append(f"copy-number gain in the ChIP cells only: {b['chrom']}:{b['start']}-{b['end']} "
                      f"({b['copy_ratio']:.1f}x vs input); ChIP counts there divided by the copy ratio")
    c = np.array([chip.count(g.chrom, g.tss - half, g.tss + half) for g in genes.itertuples()]) / cnum
    i = np.array([inp.count(g.chrom, g.tss - half, g.tss + half) for g in genes.itertuples()])
    sig = np.log2((c / chip.human * 1e6 + 1) / (i / inp.human * 1e6 + 1))
    pd.DataFrame({"gene_id": genes.gene_id, "promoter_signal": np.round(sig, 4)}).to_csv(out / "promoter.csv", index=False)
    rho = float(spearmanr(sig, genes.gene_expression).statistic)
    raw = _raw_stats(chip_p)
    top = _top_stack(chip_p)
    if top >= 50:
        issues.append(f"PCR jackpots: the ChIP has {top} 5' positions carrying >= 50 identical reads "
                      f"({raw['dup'] / max(raw['n'] - raw['lowq'], 1):.1%} duplicates); deduplicated before counting")
    gsize = sum(chip.lengths.values())
    dom = macs3_model(chip_p, inp_p, gsize, broad)
    if broad:
        narrow = macs3_model(chip_p, inp_p, gsize, False)
        nb, nn = float((dom.end - dom.start).sum()), float((narrow.end - narrow.start).sum())
        if nn < 0.6 * nb:
            issues.append(f"broad mark: MACS3's default narrow mode fragments the domains ({nn / 1e6:.3f} Mb vs "
                          f"{nb / 1e6:.3f} Mb in broad mode); called with --broad")
    return {"output_path": "promoter.csv",
            "method": {"tool": "pysam, MACS3 " + ("--broad" if broad else "narrow") + " (model-estimated fragment size)",
                       "normalization": "deduplicated MAPQ>=30 fragment centres, log2((ChIP CPM + 1) / (input CPM + 1))"
                                        + (", ChIP divided by the copy ratio inside ChIP-only gains" if blocks else ""),
                       "peak_mode": "broad" if broad else "narrow", "window": f"TSS +-{half} bp"},
            "signal_expression_spearman": round(rho, 4),
            "direction": "positive" if rho > 0.1 else "negative" if rho < -0.1 else "none",
            "domains": {"n": int(len(dom)), "total_mb": round(float((dom.end - dom.start).sum()) / 1e6, 4)},
            "issues_found": issues, "analysis_usable": True, "trajectory": "counted promoters, called peaks"}


def _top_stack(path: Path) -> int:
    """How many 5' positions (and strands) carry >= 50 identical reads."""
    import pysam
    from collections import Counter

    n = Counter()
    with pysam.AlignmentFile(str(path), "rb") as bam:
        for r in bam.fetch(until_eof=True):
            if not r.is_unmapped:
                n[(r.reference_id, r.reference_end - 1 if r.is_reverse else r.reference_start, r.is_reverse)] += 1
    return sum(v >= 50 for v in n.values())


def window_peaks(chip: Bam, inp: Bam, win: int = 500, step: int = 100, p: float = 1e-6) -> pd.DataFrame:
    """Narrow peaks from sliding windows (win bp, every step bp): ChIP fragment centres vs the input's, depth-scaled
    and floored at the ChIP's genome-wide background; windows at Poisson p < `p` merged when they overlap."""
    scale = chip.human / inp.human
    bg = chip.human * win / sum(chip.lengths.values())
    rows = []
    for chrom in sorted(chip.lengths):
        L = chip.lengths[chrom]
        starts = np.arange(0, L - win, step)
        c = chip.count(chrom, starts, starts + win)
        i = inp.count(chrom, starts, starts + win) * scale
        lam = np.maximum(i, bg)
        hit = poisson.sf(c - 1, lam) < p
        s0 = e0 = None
        for s, h in zip(starts, hit):
            if not h:
                continue
            if s0 is not None and s <= e0:
                e0 = s + win
            else:
                if s0 is not None:
                    rows.append((chrom, s0, e0))
                s0, e0 = s, s + win
        if s0 is not None:
            rows.append((chrom, s0, e0))
    return pd.DataFrame(rows, columns=["chrom", "start", "end"])


@alternative("histone.L2.peaks",
             "pysam reads (MAPQ >= 30, deduplicated), a sliding-window Poisson caller against the depth-scaled input, "
             "windows in blacklist.bed dropped, FRiP and promoter overlap from fragment centres",
             ["histone.L2.peaks.clean", "histone.L2.peaks.multimapper_pileups", "histone.L2.peaks.blacklist_artefacts",
              "histone.L2.peaks.jackpots_in_peaks"])
def window_caller_peaks(world_dir: Path, out: Path) -> dict:
    meta = json.loads((world_dir / "meta.json").read_text())
    frag = int(meta.get("library_fragment_size_bp", 200))
    chip_p, inp_p = world_dir / meta["files"]["chip_bam"], world_dir / meta["files"]["input_bam"]
    chip, inp = Bam(chip_p, frag, min_mapq=30), Bam(inp_p, frag, min_mapq=30)
    pk = window_peaks(chip, inp)
    bl = pd.read_csv(world_dir / meta["files"]["blacklist"], sep="\t", header=None).iloc[:, :3]
    bl.columns = ["chrom", "start", "end"]
    bad = np.array([bool(((bl.chrom == r.chrom) & (bl.start < r.end) & (bl.end > r.start)).any()) for r in pk.itertuples()],
                   dtype=bool)
    issues = []
    if bad.sum() >= 3:
        issues.append(f"{int(bad.sum())} peaks in blacklist.bed high-signal regions removed")
    pk = pk[~bad].reset_index(drop=True)
    raw = _raw_stats(chip_p)
    naive = window_peaks(Bam(chip_p, frag, min_mapq=0), Bam(inp_p, frag, min_mapq=0))
    if len(naive) - len(window_peaks(chip, inp)) >= 5:
        issues.append(f"MAPQ 0 multimapper pile-ups: {len(naive) - len(window_peaks(chip, inp))} extra peaks when "
                      f"MAPQ < 30 reads ({raw['lowq']} reads) are kept; filtered to MAPQ >= 30")
    if _top_stack(chip_p) >= 50:
        issues.append("PCR duplicate jackpots inside peaks; reads deduplicated before FRiP")
    inpk = sum(int(chip.count(r.chrom, [r.start], [r.end])[0]) for r in pk.itertuples())
    genes = pd.read_csv(world_dir / "genes.csv")
    marked = [g.gene_id for g in genes.itertuples()
              if ((pk.chrom == _chr(g.chrom)) & (pk.start < g.tss + 1000) & (pk.end > g.tss - 1000)).any()]
    (out / "marked.txt").write_text("".join(f"{x}\n" for x in marked))
    return {"output_path": "marked.txt",
            "method": {"tool": "sliding-window Poisson caller (500 bp / 100 bp, p < 1e-6) vs the input",
                       "filters": "MAPQ >= 30, deduplicated; blacklist.bed windows dropped", "peak_mode": "narrow"},
            "n_peaks": int(len(pk)), "frip": round(inpk / chip.human, 4), "n_marked_promoters": len(marked),
            "issues_found": issues, "analysis_usable": True, "trajectory": "window caller"}
