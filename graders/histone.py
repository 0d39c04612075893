"""Histone track reference solvers (gold side). Every golden is computed from the world's public files.

Conventions used by all solvers:
  * reads: primary, mapped; for counting, single-end reads are shifted to their fragment centre (+/- d/2, with
    d estimated by strand cross-correlation) and PCR duplicates (same contig, 5' position and strand) removed;
  * per-gene promoter signal: log2((ChIP CPM + 0.5) / (input CPM + 0.5)) in TSS +-1 kb (H3K4me3) or
    TSS +-2.5 kb (H3K27me3), spike-in contigs excluded from library sizes;
  * peak / domain calling: MACS3 3.0.x callpeak with the input as control, --nomodel --extsize d,
    -g = total length of the panel's human contigs; --broad for H3K27me3 (a broad mark), narrow for H3K4me3.

Scripted agents (end of file): each L1/L2 family has an oracle (the reference analysis above, its helpers inlined into
the sandbox with inspect.getsource, plus data-driven diagnostics that name what they find) and a naive agent (tool
defaults: pysam counts, MACS3 defaults, CPM; checks nothing, reports no issue).
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
from scipy.stats import spearmanr

from benchmark.registry import naive, oracle, solver

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


def integrity_values(world_dir: Path) -> dict:
    """Every defect detector of the L1 catalog on a world's files (used by the solver and by the scripted oracle)."""
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


@solver("histone.L1.integrity", version="1")
def integrity(world_dir: Path, world) -> dict:
    return integrity_values(world_dir)


# ------------------------------------------------------------------ L2 quantify

def quantify_analysis(world_dir: Path) -> tuple[dict, pd.DataFrame]:
    """Reference promoter signal + MACS3 calling; returns the golden values and the per-gene table."""
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
    values = {
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
    return values, pd.DataFrame({"gene_id": genes.gene_id, "promoter_signal": np.round(sig, 4)})


@solver("histone.L2.quantify", version="1")
def quantify(world_dir: Path, world) -> dict:
    return quantify_analysis(world_dir)[0]


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


def differential_analysis(world_dir: Path) -> tuple[dict, pd.DataFrame, dict]:
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
    values = {**ref, "domains": summarize_domains(dom), "naive_library_size_no_input": naive,
              "library_size_with_input": libsize, "spike_in_reads": spike, "low_mapq_fraction": mapq0}
    diag = {"duplicate_fraction": {k: round(duplicate_fraction(v), 4) for k, v in libs.items()},
            "n_reads": {k: int(len(v.chrom)) for k, v in libs.items()},
            # spike-in share among the reads that are counted (MAPQ >= 30, deduplicated)
            "spike_share_filtered": {k: round(spike_total(v, m) / max(int(m.sum()), 1), 5) for k, v in libs.items()
                                     for m in [(v.mapq >= 30) & dedup_mask(v)]}}
    return values, dom, diag


@solver("histone.L2.differential", version="1")
def differential(world_dir: Path, world) -> dict:
    return differential_analysis(world_dir)[0]


# ------------------------------------------------------------------ L3 dossier

@solver("histone.L3.dossier", version="1")
def dossier_stats(world_dir: Path, world) -> dict:
    """Key statistics of the dossier, recomputed from its evidence table."""
    from worlds.histone.dossier import summary

    t = pd.read_csv(world_dir / "evidence" / "promoter_marks.csv")
    t["h3k4me3_marked"] = t.h3k4me3_promoter_log2enr >= 2
    t["h3k27me3_marked"] = t.h3k27me3_promoter_log2enr >= 0.58
    return summary(t)


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


def jackpot_positions(lib: Lib, min_copies: int = 30) -> int:
    """Number of (contig, 5' position, strand) keys carried by at least `min_copies` reads (PCR jackpots)."""
    key = np.stack([lib.chrom, lib.pos5, lib.rev.astype(np.int64)])
    _, counts = np.unique(key, axis=1, return_counts=True)
    return int((counts >= min_copies).sum())


def input_gain_regions(inp: Lib, binsize: int = 100_000, min_ratio: float = 1.5) -> list[dict]:
    """Runs of >= 2 adjacent 100-kb bins whose input depth is >= min_ratio x the median bin (copy-number gains)."""
    out = []
    per = []
    for ci, (c, L) in enumerate(inp.contigs):
        if c.startswith(SPIKE_PREFIX):
            continue
        per.append((c, np.bincount(np.clip(inp.pos5[inp.chrom == ci], 0, L - 1) // binsize, minlength=L // binsize + 1)[: L // binsize]))
    med = float(np.median(np.concatenate([b for _, b in per])))
    for c, b in per:
        hi = b >= min_ratio * med
        i = 0
        while i < len(hi):
            if hi[i]:
                j = i
                while j < len(hi) and hi[j]:
                    j += 1
                if j - i >= 2:
                    out.append({"chrom": c, "start": i * binsize, "end": j * binsize,
                                "ratio": round(float(b[i:j].mean() / med), 2)})
                i = j
            else:
                i += 1
    return out


_HELPERS = (Lib, _samtools, read_bam, dedup_mask, duplicate_fraction, is_position_sorted, fragment_length, centres,
            norm_chrom, window_counts, human_total, promoter_signal, macs3_bin, call_peaks, summarize_domains, read_genes,
            read_meta, concentration, enrichment_bins, profile_shape, tss_signal_fraction, integrity_values,
            quantify_analysis, domain_counts, spike_total, _diff_stats, differential_analysis, jackpot_positions,
            input_gain_regions)


def _helpers_cell() -> str:
    consts = [f"SPIKE_PREFIX = {SPIKE_PREFIX!r}", f"BROAD_MARKS = {BROAD_MARKS!r}", f"EOF_BLOCK = {EOF_BLOCK!r}"]
    body = "\n\n".join(inspect.getsource(f) for f in _HELPERS)
    return _HELPER_IMPORTS + "\n".join(consts) + "\n\n\n" + body + "\nprint('reference helpers loaded')\n"


# ---- L1 integrity

_L1_ORACLE = r"""
W = Path('.')
v = integrity_values(W)
print({k: v[k] for k in sorted(v)})
ISSUES = {
    'chrom_naming_mismatch': ('warning', 'Chromosome naming mismatch: the BAM contigs use Ensembl-style names without the '
        'chr prefix while genes.csv uses UCSC chr-prefixed names, so gene/read lookups silently find nothing',
        lambda v: f"bam_chrom_style={v['bam_chrom_style']}, genes_chrom_style={v['genes_chrom_style']}; after "
                  f"harmonising names tss_signal_fraction={v['tss_signal_fraction']}"),
    'genome_build_mismatch': ('blocking', 'Genome build mismatch: genes.csv coordinates do not match the assembly of the '
        'alignments (coordinates offset / from a different build): highly expressed promoters show no enrichment',
        lambda v: f"tss_signal_fraction={v['tss_signal_fraction']} of top-quartile genes enriched at their stated TSS; "
                  f"{v['genes_beyond_contig_end']} genes end beyond their contig"),
    'chip_input_swap': ('blocking', 'ChIP/input swap: the file labelled input holds the enrichment and the file labelled '
        'ChIP looks like a flat input (labels swapped)',
        lambda v: f"top-1% 1-kb bin share: chip file {v['concentration_chip_file']}, input file {v['concentration_input_file']}"),
    'pcr_duplicates': ('warning', 'High PCR duplicate rate in the ChIP library (low library complexity, over-amplification)',
        lambda v: f"duplicate_fraction_chip={v['duplicate_fraction_chip']} (input {v['duplicate_fraction_input']})"),
    'truncated_bam': ('blocking', 'Truncated BAM: the file has no BGZF EOF block and reading stops early (incomplete transfer)',
        lambda v: f"affected_files={v['affected_files']}; {v['n_reads_chip']} reads readable"),
    'unsorted_bam': ('warning', 'BAM not coordinate-sorted and missing its .bai index',
        lambda v: f"affected_files={v['affected_files']}; header SO and read order checked"),
    'wrong_mark_label': ('blocking', 'Wrong mark label: the ChIP shows a broad domain profile (H3K27me3-like), not the '
        'narrow promoter peaks of the stated mark',
        lambda v: f"mark_profile={v['mark_profile']}, broad_flank_fraction={v['broad_flank_fraction']}"),
}
ACTIONS = {
    'chrom_naming_mismatch': 'harmonised contig names (added the chr prefix to BAM contigs) before any gene-level lookup',
    'genome_build_mismatch': 'flagged genes.csv for liftover to the alignment build; gene-level results withheld until then',
    'chip_input_swap': 'swapped the ChIP and input roles back according to where the enrichment is',
    'pcr_duplicates': 'removed PCR duplicates (same contig, 5-prime position and strand) before any counting',
    'truncated_bam': 'stopped: the truncated BAM must be re-transferred; checked the EOF marker of every BAM',
    'unsorted_bam': 'sorted the unsorted BAM with samtools sort and indexed it with samtools index',
    'wrong_mark_label': 'treated the data as a broad mark; did not use it as the stated narrow mark',
}
actions = ['checked every BAM for an EOF block, coordinate order and index; compared contig names and TSS enrichment with '
           'genes.csv; located the enrichment by bin concentration; measured duplicates and the profile shape']
if 'unsorted_bam' in v['findings']:
    for f in v['affected_files']:
        fixed = f.replace('.bam', '.sorted.bam')
        subprocess.run([_samtools(), 'sort', '-o', fixed, f], check=True, capture_output=True)
        subprocess.run([_samtools(), 'index', fixed], check=True, capture_output=True)
        print('sorted + indexed', fixed, Path(fixed + '.bai').exists())
for f in v['findings']:
    actions.append(ACTIONS[f])
issues = [{'category': f, 'severity': ISSUES[f][0], 'description': ISSUES[f][1], 'evidence': ISSUES[f][2](v)}
          for f in v['findings']]
assessment = 'usable'
if issues:
    assessment = 'unusable' if 'truncated_bam' in v['findings'] else 'usable_with_caveats'
report = {
    'assessment': assessment,
    'issues': issues,
    'actions_taken': actions,
    'values': {k: v[k] for k in ('chip_bam', 'input_bam', 'n_reads_chip', 'duplicate_fraction_chip', 'mark_profile',
                                 'bam_chrom_style', 'genes_chrom_style', 'tss_signal_fraction', 'affected_files')},
    'summary': ('Integrity problems found: ' + ', '.join(v['findings']) + '; handled as listed.') if issues
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
n = int(p.stdout.strip() or 0) if p.stdout.strip().isdigit() else 0
print('mapped reads in', chip, n)
report = {
    'assessment': 'usable', 'issues': [], 'actions_taken': ['counted the mapped reads of the ChIP BAM with samtools view -c'],
    'values': {'chip_bam': chip, 'input_bam': inp, 'n_reads_chip': n, 'affected_files': []},
    'summary': f"{meta['target_mark']} ChIP with {n} mapped reads and its input; the delivery looks fine.",
}
print(json.dumps(report))
"""


@oracle("histone.L1.integrity", version="1")
def l1_oracle(ref) -> list[str]:
    return [_helpers_cell(), _L1_ORACLE]


@naive("histone.L1.integrity", version="1")
def l1_naive(ref) -> list[str]:
    return [_L1_NAIVE]


# ---- L2 quantify

_QUANTIFY_ORACLE = r"""
W = Path('.')
values, table = quantify_analysis(W)
table.to_csv('promoter_signal.csv', index=False)
meta = read_meta(W)
chip, inp = read_bam(W / meta['files']['chip_bam']), read_bam(W / meta['files']['input_bam'])
print(values)
issues, notes = [], []
# copy number: input depth in 100-kb bins
gains = input_gain_regions(inp)
for g in gains:
    issues.append(f"Copy-number gain (amplification) in {g['chrom']}:{g['start']}-{g['end']}: input depth {g['ratio']}x the "
                  "median bin; raw ChIP coverage there reflects DNA copy number, so per-gene signal was normalised to the input")
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
    issues.append(f"{values['target_mark']} is a broad mark: MACS3's default narrow mode fragments its domains into short "
                  f"peaks ({narrow['n']} peaks, {narrow['total_mb']} Mb vs {values['domains']['n']} broad domains, "
                  f"{values['domains']['total_mb']} Mb); used --broad")
    notes.append('narrow-mode comparison run to show the default narrow fragmentation of broad domains')
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


@oracle("histone.L2.quantify", version="1")
def quantify_oracle(ref) -> list[str]:
    return [_helpers_cell(), _QUANTIFY_ORACLE]


@naive("histone.L2.quantify", version="1")
def quantify_naive(ref) -> list[str]:
    return [_QUANTIFY_NAIVE]


# ---- L2 differential

_DIFFERENTIAL_ORACLE = r"""
W = Path('.')
values, dom, diag = differential_analysis(W)
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
# per-domain table: deduplicated MAPQ>=30 fragment-centre counts
libs = {k: read_bam(W / meta['files'][k]) for k in ('control_chip', 'treated_chip')}
d = int(meta.get('library_fragment_size_bp', 200))
for k, lib in libs.items():
    dom[k + '_count'] = domain_counts(lib, dom, d, (lib.mapq >= 30) & dedup_mask(lib)).astype(int)
dom.to_csv('domains.csv', index=False)
report = {
    'output_path': 'domains.csv',
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

_DIFFERENTIAL_NAIVE = r"""
import json
import os
import subprocess

import numpy as np
import pandas as pd
import pysam

meta = json.load(open('meta.json'))
f = meta['files']
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
report = {
    'output_path': 'domains.csv',
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


@oracle("histone.L2.differential", version="1")
def differential_oracle(ref) -> list[str]:
    return [_helpers_cell(), _DIFFERENTIAL_ORACLE]


@naive("histone.L2.differential", version="1")
def differential_naive(ref) -> list[str]:
    return [_DIFFERENTIAL_NAIVE]
