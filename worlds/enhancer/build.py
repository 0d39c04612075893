"""Enhancer track: massively parallel reporter assay (MPRA) barcode counts built on real reporter activities.

Substrate (real data, no network)
---------------------------------
`package_file("mavenn", "mpsa_data.csv.gz")` (mavenn 1.1.4 sdist, mavenn/examples/datasets/): the massively parallel
splicing assay of Wong et al. 2018 (Mol Cell 71:1012): 30,483 9-nt 5' splice-site variants (positions -3..+6 around
the exon-intron junction, written in RNA letters, the +1/+2 dinucleotide GU or GC) cloned into a barcoded three-exon
minigene reporter, each with its measured activity `y` (log10 of percent spliced in, PSI, as mavenn ships it; total
and inclusion read counts tot_ct >= 10, ex_ct). The distribution is MPRA-like: most variants sit at a basal mode
(y about -0.3) and a minority (consensus-like CAG|GUAAGU sites) are up to 2.5 log10 units more active. No package
ships true enhancer-MPRA barcode counts (worlds/../SUBSTRATES.md), so the real per-element activities are the truth
and the MPRA barcode layer is simulated on top.

Each element is one real variant, named by its DNA sequence (U -> T); its true log2 activity is
a = log2(10) * (y - y0), y0 = the median y of the pool (0 = the library's typical basal element).

Simulated MPRA layer (documented, seeded; Melnikov 2012, Tewhey 2016 design)
---------------------------------------------------------------------------
- barcodes: every element carries n_bc barcodes (drawn per element within the world's range), random 14-mers;
- plasmid (DNA) counts: barcode abundance w = r_e * exp(Normal(0, bc_sd)) (r_e = the element's representation in
  the plasmid pool, 1 unless skewed); dna_count ~ Poisson(dna_depth * w);
- RNA counts: rna_count ~ NegativeBinomial(mean = rna_depth * w * 2^a, size = phi): barcode-level RNA counts are
  overdispersed relative to Poisson, which is why MPRAnalyze (Ashuach et al. 2019 Genome Biol 20:183) models them
  with a negative binomial and mpralm (Myint et al. 2019 Genome Biol 20:209) with a mean-variance trend; phi is drawn
  per world (5-20, i.e. squared coefficient of variation 0.05-0.2 above Poisson);
- negative controls (`neg_001`...): scrambled sequences without a splice donor, true activity Normal(0, sd_neg)
  (sd_neg = element-to-element basal variation, drawn).

L1 `library` (barcode-level counts, barcode map, design): edits `swap_columns` (dna_count <-> rna_rep1),
`uncollapse` (drawn barcodes split over two rows, counts split binomially), `unmapped` (drawn extra barcodes absent
from the association map), `strand_flip` (drawn elements written reverse-complemented in the map), `truncate` (the
counts file cut after a drawn fraction, last line partial), `normalise_dna` (dna_count written as counts per million),
`bottleneck` (drawn elements keep 1-3 barcodes), `copy_replicate` (rna_rep2 = rna_rep1).
L2 activity (`activity_lib`): one replicate; edits `depth` (RNA library sequenced at a drawn 2^c times the basal
ratio), `low_dna` (most barcodes of drawn elements get 1-3 plasmid reads, RNA kept: undersampled plasmid library).
L2 calling (`calling_lib`): three RNA replicates, negative controls with drawn element-level basal variation.
L2 batch (`batch_lib`): two transfection batches, RNA yield of batch 2 = 2^b times batch 1 (drawn b), elements with
G at +5 assigned to batch 2 with a drawn probability.
L3 `dossier`: per-element activities and per-position summaries of the real MPSA table.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from benchmark.suite.canonical import CanonicalWriter
from benchmark.suite.registry import recipe, substrate, writer

TRACK = "enhancer"
LOG2_10 = float(np.log2(10.0))
BC_LEN = 14
POSITIONS = ["-3", "-2", "-1", "+1", "+2", "+3", "+4", "+5", "+6"]


@dataclass
class Lib:
    kind: str = ""
    elements: pd.DataFrame | None = None      # element, role, activity (truth), [batch]
    bc: pd.DataFrame | None = None            # barcode, element, dna_count, rna columns
    bmap: pd.DataFrame | None = None          # barcode, element (association map, L1)
    meta: dict = field(default_factory=dict)
    truth: dict = field(default_factory=dict)
    dossier: dict | None = None
    text_counts: str | None = None            # L1 truncated file written verbatim


@substrate("mpsa_wong")
def mpsa_wong(seed: int = 0) -> pd.DataFrame:
    """The real MPSA table: element (DNA letters), y, tot_ct, activity = log2(10) * (y - median y)."""
    from benchmark.suite.package_data import package_file

    d = pd.read_csv(package_file("mavenn", "mpsa_data.csv.gz"), usecols=["tot_ct", "ex_ct", "y", "x"])
    d["element"] = d["x"].str.replace("U", "T")
    d = d.drop_duplicates("element").sort_values("element", kind="stable").reset_index(drop=True)
    y0 = float(d["y"].median())
    d["activity"] = np.round((d["y"] - y0) * LOG2_10, 4)
    return d[["element", "y", "tot_ct", "activity"]]


def rc(s: str) -> str:
    return s[::-1].translate(str.maketrans("ACGT", "TGCA"))


def _barcodes(rng, n: int) -> np.ndarray:
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        for row in rng.integers(0, 4, (n - len(out) + 16, BC_LEN)):
            s = "".join("ACGT"[i] for i in row)
            if s not in seen:
                seen.add(s)
                out.append(s)
            if len(out) == n:
                break
    return np.array(out)


def _pick(sub: pd.DataFrame, rng, n: int, a_max: float | None = None, min_ct: int = 50) -> pd.DataFrame:
    pool = sub[sub["tot_ct"] >= min_ct]
    if a_max is not None:
        pool = pool[pool["activity"] <= a_max]
    idx = np.sort(rng.choice(len(pool), n, replace=False))
    e = pool.iloc[idx][["element", "activity"]].reset_index(drop=True)
    e["role"] = "test"
    return e


def _controls(rng, n: int, sd: float) -> pd.DataFrame:
    return pd.DataFrame({"element": [f"neg_{i + 1:03d}" for i in range(n)],
                         "activity": np.round(rng.normal(0.0, sd, n), 4), "role": "negative_control"})


def _nb(rng, mu: np.ndarray, phi: float) -> np.ndarray:
    mu = np.maximum(np.asarray(mu, dtype=float), 1e-9)
    return rng.negative_binomial(phi, phi / (phi + mu)).astype(np.int64)


def _simulate(e: pd.DataFrame, rng, bc_low: int, bc_high: int, dna_depth: float, rna_depth: float, phi: float,
              reps: int = 1, bc_sd: float = 0.35, rep_depths: list | None = None,
              rep_col: str = "rna_rep") -> pd.DataFrame:
    """Barcode-level counts for the elements `e` (element, activity, [rep_factor]); see the module docstring."""
    nbc = rng.integers(bc_low, bc_high + 1, len(e))
    el = np.repeat(e["element"].to_numpy(), nbc)
    act = np.repeat(e["activity"].to_numpy(), nbc)
    rep_e = np.repeat(e["rep"].to_numpy() if "rep" in e else np.ones(len(e)), nbc)
    yld = np.repeat(e["yield"].to_numpy() if "yield" in e else np.ones(len(e)), nbc)
    w = rep_e * np.exp(rng.normal(0.0, bc_sd, len(el)))
    t = pd.DataFrame({"barcode": _barcodes(rng, len(el)), "element": el})
    t["dna_count"] = rng.poisson(dna_depth * w).astype(np.int64)
    depths = rep_depths or [1.0] * reps
    for r in range(reps):
        name = "rna_count" if reps == 1 else f"{rep_col}{r + 1}"
        t[name] = _nb(rng, rna_depth * depths[r] * yld * w * np.power(2.0, act), phi)
    return t


# ---------------------------------------------------------------- L1: the barcode library

@recipe(TRACK, "library")
def library(sub: pd.DataFrame, rng, n: int, n_neg: int, bc_low: int, bc_high: int, phi: float,
            a_max: float | None = None, rep2_depth: float = 1.0, bc_sd: float = 0.35) -> Lib:
    e = pd.concat([_pick(sub, rng, n, a_max), _controls(rng, n_neg, 0.15)], ignore_index=True)
    t = _simulate(e, rng, bc_low, bc_high, 120.0, 60.0, phi, reps=2, bc_sd=bc_sd, rep_depths=[1.0, rep2_depth])
    p = Lib(kind="integrity", elements=e, bc=t, bmap=t[["barcode", "element"]].copy())
    p.truth["n_barcodes"] = int(len(t))
    return p


def _rows(n: int, rng, lo: int, hi: int) -> np.ndarray:
    return np.sort(rng.choice(n, int(rng.integers(lo, hi + 1)), replace=False))


@recipe(TRACK, "swap_columns")
def swap_columns(p: Lib, rng) -> Lib:
    t = p.bc
    t["dna_count"], t["rna_rep1"] = t["rna_rep1"].copy(), t["dna_count"].copy()
    return p


@recipe(TRACK, "uncollapse")
def uncollapse(p: Lib, rng, n_low: int, n_high: int) -> Lib:
    t = p.bc
    r = _rows(len(t), rng, n_low, n_high)
    dup = t.iloc[r].copy()
    for c in ("dna_count", "rna_rep1", "rna_rep2"):
        part = rng.binomial(dup[c].to_numpy(), 0.5)
        t.loc[t.index[r], c] = dup[c].to_numpy() - part
        dup[c] = part
    p.bc = pd.concat([t, dup], ignore_index=True)
    p.truth["uncollapsed"] = sorted(dup["barcode"])
    return p


@recipe(TRACK, "unmapped")
def unmapped(p: Lib, rng, n_low: int, n_high: int) -> Lib:
    t = p.bc
    k = int(rng.integers(n_low, n_high + 1))
    new = [b for b in _barcodes(rng, k + len(t)) if b not in set(t["barcode"])][:k]
    src = t.iloc[rng.choice(len(t), k, replace=False)]
    extra = pd.DataFrame({"barcode": new, "element": "", "dna_count": src["dna_count"].to_numpy(),
                          "rna_rep1": src["rna_rep1"].to_numpy(), "rna_rep2": src["rna_rep2"].to_numpy()})
    p.bc = pd.concat([t, extra], ignore_index=True)
    p.truth["unmapped"] = sorted(new)
    return p


@recipe(TRACK, "strand_flip")
def strand_flip(p: Lib, rng, n_low: int, n_high: int) -> Lib:
    e = p.elements
    names = set(e["element"])
    pool = [x for x in e.loc[e["role"] == "test", "element"] if rc(x) not in names and rc(x) != x]
    k = int(rng.integers(n_low, n_high + 1))
    chosen = sorted(str(x) for x in rng.choice(pool, k, replace=False))
    m = p.bmap["element"].isin(chosen)
    p.bmap.loc[m, "element"] = p.bmap.loc[m, "element"].map(rc)
    p.truth["flipped"] = chosen
    return p


@recipe(TRACK, "truncate")
def truncate(p: Lib, rng, keep_low: float, keep_high: float) -> Lib:
    t = p.bc.sort_values("barcode", kind="stable").reset_index(drop=True)
    keep = int(len(t) * float(rng.uniform(keep_low, keep_high)))
    body = t.iloc[:keep][["barcode", "dna_count", "rna_rep1", "rna_rep2"]]
    nxt = t.iloc[keep]
    text = body.to_csv(index=False, lineterminator="\n") + f"{nxt['barcode']},{int(nxt['dna_count'])}\n"
    p.text_counts = text
    p.truth["missing"] = sorted(t["barcode"].iloc[keep:])
    return p


@recipe(TRACK, "normalise_dna")
def normalise_dna(p: Lib, rng) -> Lib:
    t = p.bc
    p.meta["dna_total"] = int(t["dna_count"].sum())
    t["dna_count"] = t["dna_count"] / t["dna_count"].sum() * 1e6
    return p


@recipe(TRACK, "bottleneck")
def bottleneck(p: Lib, rng, n_low: int, n_high: int) -> Lib:
    e = p.elements
    pool = e.loc[e["role"] == "test", "element"].to_numpy()
    k = int(rng.integers(n_low, n_high + 1))
    chosen = sorted(str(x) for x in rng.choice(pool, k, replace=False))
    drop = []
    for el in chosen:
        idx = np.flatnonzero((p.bc["element"] == el).to_numpy())
        keep = int(rng.integers(1, 4))
        drop.extend(idx[keep:])
        # the survivors were amplified through the bottleneck (jackpot): their plasmid counts rise accordingly
        p.bc.loc[p.bc.index[idx[:keep]], ["dna_count", "rna_rep1", "rna_rep2"]] *= int(rng.integers(3, 8))
    p.bc = p.bc.drop(index=p.bc.index[drop]).reset_index(drop=True)
    p.bmap = p.bc[["barcode", "element"]].copy()
    p.truth["bottlenecked"] = chosen
    return p


@recipe(TRACK, "copy_replicate")
def copy_replicate(p: Lib, rng) -> Lib:
    p.bc["rna_rep2"] = p.bc["rna_rep1"]
    return p


# ---------------------------------------------------------------- L2 activity

@recipe(TRACK, "activity_lib")
def activity_lib(sub: pd.DataFrame, rng, n: int, n_neg: int, phi: float, bc_low: int = 10, bc_high: int = 25,
                 depth_log2: float = 0.0, dna_depth: float = 150.0) -> Lib:
    e = pd.concat([_pick(sub, rng, n), _controls(rng, n_neg, 0.1)], ignore_index=True)
    rna_depth = dna_depth * 2.0 ** depth_log2
    t = _simulate(e, rng, bc_low, bc_high, dna_depth, rna_depth, phi, bc_sd=0.3)
    p = Lib(kind="activity", elements=e, bc=t)
    p.truth["activity"] = {k: float(v) for k, v in zip(e["element"], e["activity"])}
    p.truth["depth_log2"] = round(float(depth_log2), 3)
    return p


@recipe(TRACK, "low_dna")
def low_dna(p: Lib, rng, n_low: int, n_high: int, min_activity: float = 0.3, max_activity: float = 1.0) -> Lib:
    e = p.elements
    m = (e["role"] == "test") & (e["activity"] >= min_activity) & (e["activity"] < max_activity)
    pool = e.loc[m, "element"].to_numpy()
    chosen = sorted(str(x) for x in rng.choice(pool, int(rng.integers(n_low, n_high + 1)), replace=False))
    t = p.bc
    for el in chosen:
        idx = np.flatnonzero((t["element"] == el).to_numpy())
        t.loc[t.index[idx], "dna_count"] = rng.integers(1, 3, len(idx))
    p.truth["low_dna"] = chosen
    return p


# ---------------------------------------------------------------- L2 calling

@recipe(TRACK, "calling_lib")
def calling_lib(sub: pd.DataFrame, rng, n: int, n_neg: int, phi: float, sd_neg: float, bc_low: int,
                bc_high: int) -> Lib:
    test = _pick(sub, rng, n)
    # element-to-element basal variation: inactive test elements vary like the controls do
    test["activity"] = np.round(test["activity"] + rng.normal(0.0, sd_neg, len(test)), 4)
    e = pd.concat([test, _controls(rng, n_neg, sd_neg)], ignore_index=True)
    t = _simulate(e, rng, bc_low, bc_high, 100.0, 100.0, phi, reps=3, bc_sd=0.3)
    p = Lib(kind="calling", elements=e, bc=t)
    p.truth["sd_neg"] = round(float(sd_neg), 3)
    return p


# ---------------------------------------------------------------- L2 batch

@recipe(TRACK, "batch_lib")
def batch_lib(sub: pd.DataFrame, rng, n: int, n_neg: int, phi: float, batch_log2: float, p_g5: float) -> Lib:
    """Two transfection batches; elements with G at +5 go to batch 2 with probability p_g5, the others with
    1 - p_g5; the negative controls are split evenly. Batch 2's RNA yield is 2^batch_log2 times batch 1's."""
    test = _pick(sub, rng, n)
    g5 = test["element"].str[7] == "G"
    test["batch"] = np.where(rng.uniform(size=len(test)) < np.where(g5, p_g5, 1.0 - p_g5), 2, 1)
    neg = _controls(rng, n_neg, 0.1)
    neg["batch"] = np.where(np.arange(n_neg) % 2 == 0, 1, 2)
    e = pd.concat([test, neg], ignore_index=True)
    e["yield"] = np.where(e["batch"] == 2, 2.0 ** batch_log2, 1.0)
    t = _simulate(e, rng, 10, 25, 150.0, 150.0, phi, bc_sd=0.3)
    p = Lib(kind="batch", elements=e, bc=t)
    te = e[e["role"] == "test"]
    g = te["element"].str[7] == "G"
    p.truth["g5_effect"] = round(float(te.loc[g, "activity"].mean() - te.loc[~g, "activity"].mean()), 4)
    p.truth["batch_log2"] = round(float(batch_log2), 3)
    return p


# ---------------------------------------------------------------- L3 dossier (real MPSA activities)

@recipe(TRACK, "dossier")
def dossier(sub: pd.DataFrame, rng, kind: str, edit: dict | None = None) -> Lib:
    """Per-element activities (log2, relative to the pool median) of the real MPSA table for elements with at least 50
    reads, and the per-position, per-nucleotide mean activity. `edit` (injected): {"position": p, "nucleotide": n,
    "shift": s} adds s to the activity of every element carrying nucleotide n at position p."""
    t = sub[sub["tot_ct"] >= 50][["element", "activity", "tot_ct"]].rename(columns={"tot_ct": "reads"}).copy()
    t = t.reset_index(drop=True)
    if edit:
        i = POSITIONS.index(str(edit["position"]))
        m = t["element"].str[i] == edit["nucleotide"]
        t.loc[m, "activity"] = t.loc[m, "activity"] + float(edit["shift"])
    t["activity"] = t["activity"].round(3)
    rows = []
    for i, pos in enumerate(POSITIONS):
        for nt in "ACGT":
            v = t.loc[t["element"].str[i] == nt, "activity"]
            rows.append({"position": pos, "nucleotide": nt, "n_elements": int(len(v)),
                         "mean_activity": round(float(v.mean()), 3) if len(v) else None,
                         "fraction_active": round(float((v >= 2.0).mean()), 3) if len(v) else None})
    pos_tab = pd.DataFrame(rows)
    md = "\n".join([
        "# Evidence dossier: reporter activity of 5' splice-site variants",
        "",
        "## Data",
        "A barcoded three-exon minigene reporter library in which the 9-nt 5' splice site of the middle exon (positions",
        "-3 to -1 in the exon, +1 to +6 in the intron; +1/+2 are GT or GC) was varied; each variant's activity is the",
        "inclusion of the middle exon measured by RNA sequencing of the reporter (Wong et al. 2018, as distributed with the",
        "mavenn package). Variants with at least 50 reporter reads are listed. activity = log2 fold change of inclusion",
        "relative to the median variant of the library (0 = a typical variant; 2 = four-fold the median).",
        "",
        "## Tables",
        "- elements.csv: element (the 9-nt sequence, positions -3..+6, DNA letters), activity, reads",
        "- positions.csv: position, nucleotide, n_elements, mean_activity, fraction_active (share with activity >= 2)",
        "",
        "## Question",
        DOSSIER_Q[kind],
    ])
    p = Lib(kind="dossier")
    p.dossier = {"dossier.md": md, "positions.csv": pos_tab,
                 "elements.csv": t.sort_values("element", kind="stable").reset_index(drop=True)}
    return p


DOSSIER_Q = {
    "consensus_real": "Which features of the 5' splice site sequence determine reporter activity in this library?",
    "gc_native": "Can 5' splice sites with GC at +1/+2 (instead of GT) support high reporter activity in this library, "
                 "and what determines which ones do?",
    "plus4_injected": "Which features of the 5' splice site sequence determine reporter activity in this library?",
}


# ---------------------------------------------------------------- writer

@writer(TRACK)
def write(p: Lib, w: CanonicalWriter) -> None:
    if p.dossier is not None:
        w.files(p.dossier)
        return
    if p.truth:
        w.truth(**p.truth)
    files = {"meta.json": "this description"}
    meta: dict = {"assay": "massively parallel reporter assay: each element (a 9-nt 5' splice-site variant, positions "
                           "-3..+6, in a three-exon minigene reporter) is cloned with many random 14-nt barcodes; the "
                           "plasmid library (DNA) and the reporter transcripts (RNA) are sequenced and barcodes counted",
                  "element_naming": "test elements are named by their 9-nt sequence (DNA letters, the sense strand of "
                                    "the reporter); neg_### are scrambled negative controls without a splice donor"}
    e = p.elements.sort_values("element", kind="stable").reset_index(drop=True)
    if p.kind == "integrity":
        w.table("elements.csv", e[["element", "role"]])
        w.table("barcode_map.csv", p.bmap.sort_values("barcode", kind="stable")[["barcode", "element"]])
        if p.text_counts is not None:
            w.text("counts.csv", p.text_counts)
        else:
            t = p.bc.sort_values(["barcode"], kind="stable")[["barcode", "dna_count", "rna_rep1", "rna_rep2"]]
            w.table("counts.csv", t, float_format="%.3f")
        files.update({
            "elements.csv": "the designed elements (CSV: element, role = test | negative_control)",
            "barcode_map.csv": "the barcode-to-element association from subassembly sequencing of the plasmid library "
                               "(CSV: barcode, element)",
            "counts.csv": "read counts per barcode, collapsed (one row per barcode; CSV: barcode, dna_count = plasmid "
                          "library reads, rna_rep1, rna_rep2 = reporter RNA reads of two transfection replicates)"})
        reads = {c: int(p.bc[c].sum()) for c in ("dna_count", "rna_rep1", "rna_rep2")}
        if "dna_total" in p.meta:
            reads["dna_count"] = p.meta["dna_total"]
        meta.update({"counts": "raw integer read counts, one row per unique barcode",
                     "sequenced_reads": reads,
                     "replicates": "one plasmid (DNA) library; RNA from two independent transfections"})
    else:
        w.table("elements.csv", e[["element", "role"] + (["batch"] if p.kind == "batch" else [])])
        t = p.bc.sort_values(["element", "barcode"], kind="stable")
        w.table("counts.csv", t)
        files["elements.csv"] = ("the designed elements (CSV: element, role = test | negative_control"
                                 + (", batch = the transfection batch the element's RNA was measured in)"
                                    if p.kind == "batch" else ")"))
        if p.kind == "calling":
            files["counts.csv"] = ("read counts per barcode (CSV: barcode, element, dna_count = plasmid library reads, "
                                   "rna_rep1..rna_rep3 = reporter RNA reads of three independent transfections)")
        else:
            files["counts.csv"] = ("read counts per barcode (CSV: barcode, element, dna_count = plasmid library reads, "
                                   "rna_count = reporter RNA reads)")
        if p.kind == "batch":
            meta["batches"] = ("the library was split in two sub-pools transfected and sequenced on different days "
                               "(batch 1, batch 2); half of the negative controls are in each")
    meta["files"] = dict(sorted(files.items()))
    w.json("meta.json", meta)
