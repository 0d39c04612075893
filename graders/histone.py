"""Histone track reference solvers (gold side). Every golden is computed from the world's public files.

Conventions used by all solvers:
  * reads: primary, mapped; for counting, single-end reads are shifted to their fragment centre (+/- d/2, with
    d estimated by strand cross-correlation) and PCR duplicates (same contig, 5' position and strand) removed;
  * per-gene promoter signal: log2((ChIP CPM + 0.5) / (input CPM + 0.5)) in TSS +-1 kb (H3K4me3) or
    TSS +-2.5 kb (H3K27me3), spike-in contigs excluded from library sizes;
  * peak / domain calling: MACS3 3.0.x callpeak with the input as control, --nomodel --extsize d,
    -g = total length of the panel's human contigs; --broad for H3K27me3 (a broad mark), narrow for H3K4me3.
"""
from __future__ import annotations

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

from benchmark.registry import solver

SPIKE_PREFIX = "dm6_"
BROAD_MARKS = {"H3K27me3", "H3K9me3", "H3K36me3", "H3K79me2"}
EOF_BLOCK = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")


# ------------------------------------------------------------------ reading

@dataclass
class Lib:
    contigs: list[tuple[str, int]]
    chrom: np.ndarray      # contig index
    pos5: np.ndarray       # 5' position (0-based)
    rev: np.ndarray
    mapq: np.ndarray
    sorted_header: bool
    truncated: bool
    indexed: bool
    error: str | None = None

    def human_lengths(self) -> dict[str, int]:
        return {c: l for c, l in self.contigs if not c.startswith(SPIKE_PREFIX)}


def _samtools() -> str:
    return shutil.which("samtools") or "samtools"


def read_bam(path: Path, min_mapq: int = 0) -> Lib:
    """All primary mapped reads of a BAM in file order (via `samtools view`, which also reads past a missing
    EOF block up to the cut); the header's contigs and SO tag; whether the file is truncated or indexed."""
    import io

    raw_tail = path.read_bytes()[-28:]
    truncated = raw_tail != EOF_BLOCK
    indexed = Path(str(path) + ".bai").exists()
    hdr = subprocess.run([_samtools(), "view", "-H", str(path)], capture_output=True, text=True).stdout
    contigs = [(m.group(1), int(m.group(2))) for m in re.finditer(r"^@SQ\tSN:(\S+)\tLN:(\d+)", hdr, re.M)]
    so = re.search(r"^@HD.*\tSO:(\S+)", hdr, re.M)
    proc = subprocess.run([_samtools(), "view", "-F", "0x904", str(path)], capture_output=True)
    err = proc.stderr.decode(errors="replace").strip() or None
    if proc.returncode != 0:
        truncated = True
    body = proc.stdout
    if body:
        df = pd.read_csv(io.BytesIO(body), sep="\t", header=None, usecols=[1, 2, 3, 4, 5], quoting=3,
                         names=["flag", "rname", "pos", "mapq", "cigar"], dtype={"rname": str, "cigar": str})
    else:
        df = pd.DataFrame({"flag": [], "rname": [], "pos": [], "mapq": [], "cigar": []})
    cidx = {c: i for i, (c, _) in enumerate(contigs)}
    reflen = {c: sum(int(n) for n, op in re.findall(r"(\d+)([MDN=X])", c)) for c in pd.unique(df["cigar"])}
    rev = (df["flag"].to_numpy().astype(np.int64) & 16) > 0
    start = df["pos"].to_numpy().astype(np.int64) - 1
    rl = df["cigar"].map(reflen).to_numpy().astype(np.int64) if len(df) else np.zeros(0, np.int64)
    lib = Lib(contigs, df["rname"].map(cidx).to_numpy().astype(np.int64), np.where(rev, start + rl - 1, start), rev,
              df["mapq"].to_numpy().astype(np.int64), bool(so and so.group(1) == "coordinate"), truncated, indexed, err)
    if min_mapq:
        keep = lib.mapq >= min_mapq
        lib.chrom, lib.pos5, lib.rev, lib.mapq = lib.chrom[keep], lib.pos5[keep], lib.rev[keep], lib.mapq[keep]
    return lib


def dedup_mask(lib: Lib) -> np.ndarray:
    key = np.stack([lib.chrom, lib.pos5, lib.rev.astype(np.int64)])
    _, first = np.unique(key, axis=1, return_index=True)
    m = np.zeros(len(lib.chrom), dtype=bool)
    m[first] = True
    return m


def duplicate_fraction(lib: Lib) -> float:
    return float(1 - dedup_mask(lib).sum() / max(len(lib.chrom), 1))


def is_position_sorted(lib: Lib) -> bool:
    if len(lib.chrom) < 2:
        return True
    start = np.where(lib.rev, lib.pos5 - 49, lib.pos5)
    key = lib.chrom * 10**10 + start
    return bool(np.all(np.diff(key) >= 0))


def fragment_length(lib: Lib, max_lag: int = 400) -> int:
    """Strand cross-correlation peak over 10-bp bins of the human contigs (lags 60..max_lag)."""
    best, best_lag = -np.inf, 200
    hl = lib.human_lengths()
    names = [c for c, _ in lib.contigs]
    fw, rv = [], []
    for ci, (c, L) in enumerate(lib.contigs):
        if c not in hl:
            continue
        nb = L // 10 + 1
        m = lib.chrom == ci
        fw.append(np.bincount(lib.pos5[m & ~lib.rev] // 10, minlength=nb).astype(float))
        rv.append(np.bincount(lib.pos5[m & lib.rev] // 10, minlength=nb).astype(float))
    f, r = np.concatenate(fw), np.concatenate(rv)
    f -= f.mean()
    r -= r.mean()
    for lag in range(6, max_lag // 10 + 1):
        v = float(np.dot(f[:-lag], r[lag:]))
        if v > best:
            best, best_lag = v, lag * 10
    return int(best_lag)


def centres(lib: Lib, d: int) -> np.ndarray:
    return np.where(lib.rev, lib.pos5 - d // 2, lib.pos5 + d // 2)


def norm_chrom(c: str) -> str:
    c = str(c)
    return c if c.startswith("chr") or c.startswith(SPIKE_PREFIX) else f"chr{c}"


def window_counts(lib: Lib, genes: pd.DataFrame, half: int, d: int, mask: np.ndarray | None = None) -> np.ndarray:
    """Fragment-centre counts in [tss - half, tss + half] per gene; contigs matched after chr-normalisation."""
    cen = centres(lib, d)
    idx = {norm_chrom(c): i for i, (c, _) in enumerate(lib.contigs)}
    out = np.zeros(len(genes))
    m_all = np.ones(len(cen), bool) if mask is None else mask
    for cname, sub in genes.groupby(genes["chrom"].map(norm_chrom)):
        if cname not in idx:
            continue
        m = m_all & (lib.chrom == idx[cname])
        x = np.sort(cen[m])
        tss = sub["tss"].to_numpy()
        out[sub.index.to_numpy()] = np.searchsorted(x, tss + half, "right") - np.searchsorted(x, tss - half, "left")
    return out


def human_total(lib: Lib, mask: np.ndarray | None = None) -> int:
    hl = lib.human_lengths()
    human_idx = [i for i, (c, _) in enumerate(lib.contigs) if c in hl]
    m = np.isin(lib.chrom, human_idx)
    if mask is not None:
        m &= mask
    return int(m.sum())


def promoter_signal(chip: Lib, inp: Lib, genes: pd.DataFrame, half: int, d: int) -> np.ndarray:
    mc, mi = dedup_mask(chip), dedup_mask(inp)
    c = window_counts(chip, genes, half, d, mc) / human_total(chip, mc) * 1e6
    i = window_counts(inp, genes, half, d, mi) / human_total(inp, mi) * 1e6
    return np.log2((c + 0.5) / (i + 0.5))


# ------------------------------------------------------------------ MACS3

def macs3_bin() -> str:
    cand = Path(sys.executable).with_name("macs3")
    return str(cand) if cand.exists() else (shutil.which("macs3") or "macs3")


def call_peaks(chip, control, broad: bool, gsize: int, extsize: int, extra: list[str] | None = None) -> pd.DataFrame:
    chips = [str(x) for x in (chip if isinstance(chip, (list, tuple)) else [chip])]
    with tempfile.TemporaryDirectory(prefix="histone-macs-") as tmp:
        cmd = [macs3_bin(), "callpeak", "-t", *chips, "-f", "BAM", "-g", str(gsize), "-n", "ref", "--outdir", tmp,
               "--nomodel", "--extsize", str(extsize), "--seed", "0"]
        if control is not None:
            cmd += ["-c", *[str(x) for x in (control if isinstance(control, (list, tuple)) else [control])]]
        if broad:
            cmd += ["--broad"]
        cmd += extra or []
        subprocess.run(cmd, check=True, capture_output=True)
        f = Path(tmp) / ("ref_peaks.broadPeak" if broad else "ref_peaks.narrowPeak")
        if f.stat().st_size == 0:
            return pd.DataFrame(columns=["chrom", "start", "end"])
        df = pd.read_csv(f, sep="\t", header=None).iloc[:, :3]
    df.columns = ["chrom", "start", "end"]
    return df[~df.chrom.astype(str).str.startswith(SPIKE_PREFIX)]


def summarize_domains(df: pd.DataFrame) -> dict:
    return {"n": int(len(df)), "total_mb": round(float((df.end - df.start).sum()) / 1e6, 4)}


def read_genes(world_dir: Path) -> pd.DataFrame:
    return pd.read_csv(world_dir / "genes.csv")


def read_meta(world_dir: Path) -> dict:
    return json.loads((world_dir / "meta.json").read_text())


# ------------------------------------------------------------------ L1 integrity

def concentration(lib: Lib, d: int, top: float = 0.01) -> float:
    """Share of fragment centres in the top 1% of 1-kb bins of the human contigs (a fingerprint statistic)."""
    cen = centres(lib, d)
    counts = []
    for ci, (c, L) in enumerate(lib.contigs):
        if c.startswith(SPIKE_PREFIX):
            continue
        m = lib.chrom == ci
        counts.append(np.bincount(np.clip(cen[m], 0, L - 1) // 1000, minlength=L // 1000 + 1))
    x = np.sort(np.concatenate(counts))[::-1]
    k = max(1, int(len(x) * top))
    return float(x[:k].sum() / max(x.sum(), 1))


def enrichment_bins(chip: Lib, inp: Lib, d: int, binsize: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    """Per-bin log2 ChIP/input (depth-normalised, 1-kb bins, 3-bin smoothing) and a mask of bins sharing a
    contig with the next bin."""
    cc, ci_, same = [], [], []
    cidx = {c: i for i, (c, _) in enumerate(inp.contigs)}
    for i, (c, L) in enumerate(chip.contigs):
        if c.startswith(SPIKE_PREFIX) or c not in cidx:
            continue
        nb = L // binsize + 1
        a = np.bincount(np.clip(centres(chip, d)[chip.chrom == i], 0, L - 1) // binsize, minlength=nb)
        b = np.bincount(np.clip(centres(inp, d)[inp.chrom == cidx[c]], 0, L - 1) // binsize, minlength=nb)
        k = np.ones(3)
        cc.append(np.convolve(a, k, "same"))
        ci_.append(np.convolve(b, k, "same"))
        s = np.ones(nb, bool)
        s[-1] = False
        same.append(s)
    a, b = np.concatenate(cc).astype(float), np.concatenate(ci_).astype(float)
    a, b = a / a.sum() * 1e6, b / b.sum() * 1e6
    return np.log2((a + 1) / (b + 1)), np.concatenate(same)


def profile_shape(chip: Lib, inp: Lib, d: int) -> tuple[str, float]:
    """'broad' when enriched 1-kb bins are mostly flanked by enriched bins 5 kb away, else 'narrow'."""
    lr, _ = enrichment_bins(chip, inp, d)
    enr = lr > 1.0
    if enr.sum() < 20:
        return "unclear", 0.0
    idx = np.flatnonzero(enr)
    lo, hi = idx - 5, idx + 5
    ok = (lo >= 0) & (hi < len(enr))
    frac = float(np.mean(enr[lo[ok]] & enr[hi[ok]]))
    return ("broad" if frac > 0.3 else "narrow"), round(frac, 4)


def tss_signal_fraction(chip: Lib, inp: Lib, genes: pd.DataFrame, d: int, offsets_ok: bool = True) -> float:
    """Among the top-quartile expressed genes, the fraction whose TSS +-1 kb has ChIP/input (CPM) >= 2."""
    top = genes[genes.gene_expression >= genes.gene_expression.quantile(0.75)]
    sig = promoter_signal(chip, inp, top.reset_index(drop=True), 1000, d)
    return round(float(np.mean(sig >= 1.0)), 4)


@solver("histone.L1.integrity", version="1")
def integrity(world_dir: Path, world) -> dict:
    meta = read_meta(world_dir)
    genes = read_genes(world_dir)
    files = meta["files"]
    chip_p, inp_p = world_dir / files["chip_bam"], world_dir / files["input_bam"]
    findings: set[str] = set()
    affected: list[str] = []
    libs = {}
    for role, p in (("chip", chip_p), ("input", inp_p)):
        lib = read_bam(p)
        libs[role] = lib
        rel = str(p.relative_to(world_dir))
        if lib.truncated:
            findings.add("truncated_bam")
            affected.append(rel)
        elif not lib.sorted_header or not lib.indexed or not is_position_sorted(lib):
            findings.add("unsorted_bam")
            affected.append(rel)
    chip, inp = libs["chip"], libs["input"]
    out: dict = {"affected_files": sorted(affected), "n_reads_chip": int(len(chip.chrom)), "n_reads_input": int(len(inp.chrom))}
    # contig naming
    bam_names = {c for c, _ in chip.contigs}
    gene_names = set(genes.chrom.astype(str))
    out["bam_chrom_style"] = "chr-prefixed" if all(c.startswith("chr") for c in bam_names) else "no-prefix"
    out["genes_chrom_style"] = "chr-prefixed" if all(c.startswith("chr") for c in gene_names) else "no-prefix"
    if not gene_names & bam_names and {norm_chrom(c) for c in gene_names} & {norm_chrom(c) for c in bam_names}:
        findings.add("chrom_naming_mismatch")
    d = fragment_length(chip)
    out["fragment_length"] = d
    # which file holds the enrichment
    conc_c, conc_i = concentration(chip, d), concentration(inp, d)
    out["concentration_chip_file"], out["concentration_input_file"] = round(conc_c, 4), round(conc_i, 4)
    real_chip, real_inp = (chip, inp)
    out["chip_bam"], out["input_bam"] = files["chip_bam"], files["input_bam"]
    if conc_i > conc_c * 1.5:
        findings.add("chip_input_swap")
        real_chip, real_inp = inp, chip
        out["chip_bam"], out["input_bam"] = files["input_bam"], files["chip_bam"]
    # duplicates (in the library holding the enrichment)
    out["duplicate_fraction_chip"] = round(duplicate_fraction(real_chip), 4)
    out["duplicate_fraction_input"] = round(duplicate_fraction(real_inp), 4)
    if out["duplicate_fraction_chip"] > 0.3:
        findings.add("pcr_duplicates")
    # profile shape vs the stated mark
    shape, frac = profile_shape(real_chip, real_inp, d)
    out["mark_profile"], out["broad_flank_fraction"] = shape, frac
    stated = meta["target_mark"]
    want = "broad" if stated in BROAD_MARKS else "narrow"
    if shape != "unclear" and shape != want:
        findings.add("wrong_mark_label")
    # genes vs alignments: TSS signal of highly expressed genes (after contig-name harmonisation)
    out["tss_signal_fraction"] = tss_signal_fraction(real_chip, real_inp, genes, d)
    lens = {norm_chrom(c): l for c, l in chip.contigs}
    out["genes_beyond_contig_end"] = int(sum(int(e) > lens.get(norm_chrom(c), 0) for c, e in zip(genes.chrom, genes.end)))
    if shape == "narrow" and want == "narrow" and out["tss_signal_fraction"] < 0.3:
        findings.add("genome_build_mismatch")
    out["findings"] = sorted(findings)
    return out


# ------------------------------------------------------------------ L2 quantify

@solver("histone.L2.quantify", version="1")
def quantify(world_dir: Path, world) -> dict:
    meta = read_meta(world_dir)
    genes = read_genes(world_dir)
    mark = meta["target_mark"]
    chip_p, inp_p = world_dir / meta["files"]["chip_bam"], world_dir / meta["files"]["input_bam"]
    chip, inp = read_bam(chip_p), read_bam(inp_p)
    d = int(meta.get("library_fragment_size_bp") or fragment_length(chip))
    broad = mark in BROAD_MARKS
    half = 2500 if broad else 1000
    sig = promoter_signal(chip, inp, genes, half, d)
    rho = float(spearmanr(sig, genes.gene_expression).statistic)
    # the naive per-gene signal: ChIP CPM alone, duplicates kept
    raw = window_counts(chip, genes, half, d) / human_total(chip) * 1e6
    rho_raw = float(spearmanr(raw, genes.gene_expression).statistic)
    gsize = sum(chip.human_lengths().values())
    dom = call_peaks(chip_p, inp_p, broad=broad, gsize=gsize, extsize=d)
    return {
        "target_mark": mark,
        "fragment_length": d,
        "promoter_window_bp": half,
        "signal_expression_spearman": round(rho, 4),
        "direction": "positive" if rho > 0.1 else "negative" if rho < -0.1 else "none",
        "naive_raw_chip_spearman": round(rho_raw, 4),
        "domains": summarize_domains(dom),
        "effective_genome_size": gsize,
        "peak_mode": "broad" if broad else "narrow",
    }


# ------------------------------------------------------------------ L2 differential

def domain_counts(lib: Lib, dom: pd.DataFrame, d: int, mask: np.ndarray) -> np.ndarray:
    cen = centres(lib, d)
    idx = {c: i for i, (c, _) in enumerate(lib.contigs)}
    out = np.zeros(len(dom))
    for c, sub in dom.groupby("chrom"):
        x = np.sort(cen[mask & (lib.chrom == idx[c])])
        out[sub.index.to_numpy()] = np.searchsorted(x, sub.end.to_numpy(), "left") - np.searchsorted(x, sub.start.to_numpy(), "left")
    return out


def spike_total(lib: Lib, mask: np.ndarray) -> int:
    sp = [i for i, (c, _) in enumerate(lib.contigs) if c.startswith(SPIKE_PREFIX)]
    return int((np.isin(lib.chrom, sp) & mask).sum())


def _diff_stats(libs: dict, dom: pd.DataFrame, d: int, mapq: int, dedup: bool, use_spike: bool, use_input: bool) -> dict:
    cnt, fac = {}, {}
    for k, lib in libs.items():
        m = np.ones(len(lib.chrom), bool)
        if mapq:
            m &= lib.mapq >= mapq
        if dedup:
            m &= dedup_mask(lib)
        cnt[k] = domain_counts(lib, dom, d, m)
        fac[k] = spike_total(lib, m) if (use_spike and k.endswith("chip")) else human_total(lib, m)
    t = cnt["treated_chip"] / fac["treated_chip"]
    c = cnt["control_chip"] / fac["control_chip"]
    g = float(np.log2(t.sum() / c.sum()))
    per = np.log2((t + 1 / fac["treated_chip"]) / (c + 1 / fac["control_chip"]))
    if use_input:
        ti = cnt["treated_input"] / fac["treated_input"]
        ci = cnt["control_input"] / fac["control_input"]
        g -= float(np.log2(ti.sum() / ci.sum()))
        per -= np.log2((ti + 1 / fac["treated_input"]) / (ci + 1 / fac["control_input"]))
    return {"global_log2fc": round(g, 4), "changed_fraction": round(float(np.mean(np.abs(per) > np.log2(1.5))), 4),
            "direction": "decrease" if g < -0.4 else "increase" if g > 0.4 else "no_change"}


@solver("histone.L2.differential", version="1")
def differential(world_dir: Path, world) -> dict:
    """Reference: domains = MACS3 broad calls on the pooled ChIPs vs the pooled inputs (a condition-blind consensus,
    so that selecting domains on one condition does not bias the fold change); per domain, deduplicated MAPQ>=30
    fragment centres; ChIP scaled by its spike-in (dm6) read count (ChIP-Rx), input by its human read count;
    log2 fold change = log2(treated/control ChIP) - log2(treated/control input) (copy-number correction)."""
    meta = read_meta(world_dir)
    f = meta["files"]
    libs = {k: read_bam(world_dir / f[k]) for k in ("control_chip", "control_input", "treated_chip", "treated_input")}
    d = int(meta.get("library_fragment_size_bp", 200))
    gsize = sum(libs["control_chip"].human_lengths().values())
    dom = call_peaks([world_dir / f["control_chip"], world_dir / f["treated_chip"]],
                     [world_dir / f["control_input"], world_dir / f["treated_input"]], True, gsize, d).reset_index(drop=True)
    ref = _diff_stats(libs, dom, d, mapq=30, dedup=True, use_spike=True, use_input=True)
    naive = _diff_stats(libs, dom, d, mapq=0, dedup=False, use_spike=False, use_input=False)
    libsize = _diff_stats(libs, dom, d, mapq=30, dedup=True, use_spike=False, use_input=True)
    spike = {k: spike_total(v, np.ones(len(v.chrom), bool)) for k, v in libs.items()}
    mapq0 = {k: round(float(np.mean(v.mapq < 30)), 4) for k, v in libs.items()}
    return {**ref, "domains": summarize_domains(dom), "naive_library_size_no_input": naive,
            "library_size_with_input": libsize, "spike_in_reads": spike, "low_mapq_fraction": mapq0}


# ------------------------------------------------------------------ L3 dossier

@solver("histone.L3.dossier", version="1")
def dossier_stats(world_dir: Path, world) -> dict:
    """Key statistics of the dossier, recomputed from its evidence table."""
    from worlds.histone.dossier import summary

    t = pd.read_csv(world_dir / "evidence" / "promoter_marks.csv")
    t["h3k4me3_marked"] = t.h3k4me3_promoter_log2enr >= 2
    t["h3k27me3_marked"] = t.h3k27me3_promoter_log2enr >= 0.58
    return summary(t)
