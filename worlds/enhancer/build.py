"""Enhancer track: barcoded reporter-assay (MPRA design) counts, simulated on the real exon inclusion of 5' splice sites.

What the data are
-----------------
REAL: `package_file("mavenn", "mpsa_data.csv.gz")` (mavenn 1.1.4 sdist, mavenn/examples/datasets/): the massively
parallel splicing assay (MPSA) of Wong et al. 2018 (Mol Cell 71:1012): 30,483 9-nt 5' splice-site variants (positions
-3..+6 around the exon-intron junction, written in RNA letters, the +1/+2 dinucleotide GU or GC) cloned into a barcoded
three-exon minigene reporter, each with its measured `y` (log10 of percent spliced in, PSI, of the middle exon, as
mavenn ships it; total and inclusion read counts tot_ct >= 10, ex_ct). This is a SPLICING measure: a 5' splice-site
change alters exon inclusion (which isoform the reporter makes), not reporter RNA level. Most variants sit at a basal
mode (y about -0.3: barely any inclusion) and a minority (consensus-like CAG|GUAAGU sites) include the exon up to 2.5
log10 units more.

Each element is one real variant, named by its DNA sequence (U -> T); its true log2 activity is its exon inclusion,
a = log2(10) * (y - y0), y0 = the median y of the pool (0 = the library's typical, basal element).

SIMULATED (seeded; barcoded-reporter design after Melnikov 2012 and Tewhey 2016): the barcode count layer. No package
ships true enhancer-MPRA barcode counts (shared/SUBSTRATES.md). The RNA column counts reads of the exon-INCLUDED
reporter isoform (barcode read out across the exon junctions), so RNA / plasmid DNA per barcode is proportional to
PSI under the assumption, made by this simulation, that every variant is transcribed alike per plasmid copy (the
splice site lies in the transcript body, not the promoter). Every text of the track names the activity as exon
inclusion relative to the library median and the counts as simulated.
- barcodes: every element carries n_bc barcodes (drawn per element within the world's range), random 14-mers;
- plasmid (DNA) counts: barcode abundance w = r_e * exp(Normal(0, bc_sd)) (r_e = the element's representation in
  the plasmid pool, 1 unless skewed); dna_count ~ Poisson(dna_depth * w);
- RNA counts: rna_count ~ NegativeBinomial(mean = rna_depth * w * 2^(a + t), size = phi): barcode-level RNA counts are
  overdispersed relative to Poisson, which is why MPRAnalyze (Ashuach et al. 2019 Genome Biol 20:183) models them
  with a negative binomial and mpralm (Myint et al. 2019 BMC Genomics 20:209) with a mean-variance trend; phi is drawn
  per world (5-20, i.e. squared coefficient of variation 0.05-0.2 above Poisson: a range chosen for this simulation,
  not taken from a publication);
- transfection-level variance (L1 and L2 calling): each replicate shifts each element's log2 activity by
  t ~ Normal(0, rep_sd) and has its own RNA yield, so biological replicates correlate like independent transfections
  (element-level r 0.96-0.99 in worlds spanning the full activity range; r also falls with a narrow range: 0.81 in
  L1 boundary_low_activity), not like resampled reads (r above 0.995);
- plasmid carry-over (L1 and L2 calling): each RNA library also holds Poisson(carry * rna_depth * w) plasmid reads
  per barcode (carry 0.2-1%: a low level chosen for this simulation);
- barcode collisions and sequencing-error barcodes (L1, `_background`; the L1 family's declared nuisance features):
  about 0.2% of barcodes are assigned by the association to two elements (the collided barcode's counts are the sum
  of both clones), and about 0.2% of rows are one-mismatch neighbours of a mapped barcode holding 0.5-3% of its reads,
  absent from the map. The L1 defects `unmapped` and `uncollapse` are drawn well above this background (150-400
  unmapped barcodes with full-size counts; 100-250 exact barcodes on two rows) and their goldens count only the defect;
- negative controls (`neg_001`...): scrambled sequences without a splice donor (the assay's background inclusion),
  true activity Normal(0, sd_neg) (sd_neg = element-to-element basal variation, drawn).

L1 `library` (barcode-level counts, barcode map, design): edits `swap_columns` (dna_count <-> rna_rep1),
`uncollapse` (drawn barcodes split over two rows, counts split binomially), `unmapped` (drawn extra barcodes absent
from the association map), `strand_flip` (drawn elements written reverse-complemented in the map), `truncate` (the
counts file cut after a drawn fraction, last line partial), `normalise_dna` (dna_count written as counts per million),
`bottleneck` (drawn elements keep 1-3 barcodes), `copy_replicate` (rna_rep2 = rna_rep1), `collisions` (a drawn
1.5-8% of barcodes cloned with two elements: an association not filtered for collisions), `error_barcodes` (a drawn
1.5-8% of barcodes get a one-mismatch neighbour holding 5-20% of their reads: no Hamming error correction),
`discordant` (rna_rep2 of every element scaled by 2^Normal(0, sd): a failed second transfection).
L2 activity (`activity_lib`): one replicate; edits `depth` (RNA library sequenced at a drawn 2^c times the basal
ratio), `low_dna` (most barcodes of drawn elements get 1-3 plasmid reads, RNA kept: undersampled plasmid library),
`outlier_rna` (one barcode of each of a few drawn elements gets 2^k times its RNA reads: an RNA jackpot).
L2 calling (`calling_lib`): three RNA replicates, negative controls with drawn element-level basal variation.
L2 batch (`batch_lib`): two transfection batches, RNA yield of batch 2 = 2^b times batch 1 (drawn b), elements with
G at +5 assigned to batch 2 with a drawn probability.
L3 `dossier`: per-element exon inclusion (log2 PSI relative to the median) and per-position summaries of the real
MPSA table, presented as splicing.
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
              rep_col: str = "rna_rep", rep_sd: float = 0.0, carry: float = 0.0) -> pd.DataFrame:
    """Barcode-level counts for the elements `e` (element, activity, [rep_factor]); see the module docstring.
    rep_sd: transfection-level variance (each replicate shifts each element's log2 activity by Normal(0, rep_sd));
    carry: plasmid carry-over (each RNA library also holds Poisson(carry * rna_depth * w) plasmid reads per barcode)."""
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
        tv = np.repeat(rng.normal(0.0, rep_sd, len(e)), nbc) if rep_sd > 0 else 0.0
        t[name] = _nb(rng, rna_depth * depths[r] * yld * w * np.power(2.0, act + tv), phi)
        if carry > 0:
            t[name] = t[name] + rng.poisson(carry * rna_depth * depths[r] * w)
    return t


def _neighbour(rng, bc: str) -> str:
    """A one-mismatch neighbour of a barcode (a sequencing error)."""
    i = int(rng.integers(0, len(bc)))
    return bc[:i] + str(rng.choice([x for x in "ACGT" if x != bc[i]])) + bc[i + 1:]


def _collide(p: "Lib", rng, f_collide: float, min_k: int = 2) -> list:
    """Barcode collisions: a drawn share of barcodes is cloned with two elements; the association lists the barcode
    under both, and its counts are the sum of both clones (the second clone's own barcode row disappears)."""
    t = p.bc
    if "origin" not in t:
        t["origin"] = ""
    n = len(t)
    k = max(int(round(n * f_collide)), min_k)
    pairs = rng.choice(n, 2 * k, replace=False).reshape(k, 2)
    pairs = pairs[t["element"].to_numpy()[pairs[:, 0]] != t["element"].to_numpy()[pairs[:, 1]]]
    pairs = pairs[(t["origin"].to_numpy()[pairs] == "").all(axis=1) & (t["element"].to_numpy()[pairs] != "").all(axis=1)]
    # a barcode whose sequencing-error neighbour is already counted keeps its own row and map entry: dropping it would
    # orphan that neighbour, which would then read as a full unmapped barcode (seen at campaign seed 7001)
    parents = set(t["origin"]) - {""}
    pairs = pairs[~np.isin(t["barcode"].to_numpy()[pairs[:, 1]], list(parents))]
    cols = [c for c in t.columns if c.endswith("_count") or c.startswith("rna_rep")]
    keep_i, drop_i = pairs[:, 0], pairs[:, 1]
    t.loc[t.index[keep_i], cols] = t.iloc[keep_i][cols].to_numpy() + t.iloc[drop_i][cols].to_numpy()
    extra_map = pd.DataFrame({"barcode": t["barcode"].to_numpy()[keep_i], "element": t["element"].to_numpy()[drop_i]})
    gone = set(t["barcode"].to_numpy()[drop_i])
    p.bc = t.drop(index=t.index[drop_i]).reset_index(drop=True)
    base = p.bmap[~p.bmap["barcode"].isin(gone)] if p.bmap is not None else p.bc[["barcode", "element"]]
    p.bmap = pd.concat([base, extra_map], ignore_index=True)
    return sorted(extra_map["barcode"])


def _errors(p: "Lib", rng, f_error: float, lo: float = 0.005, hi: float = 0.03, take: bool = False) -> list:
    """Sequencing-error barcodes: a drawn share of rows gets a one-mismatch neighbour holding lo-hi of its reads
    (taken from the parent when `take`), absent from the association map."""
    t = p.bc
    cols = [c for c in t.columns if c.endswith("_count") or c.startswith("rna_rep")]
    m = int(round(len(t) * f_error))
    cand = np.flatnonzero(((t["origin"] == "") & (t["element"] != "")).to_numpy())
    src = t.iloc[np.sort(rng.choice(cand, min(m, len(cand)), replace=False))]
    seen = set(t["barcode"]) | set(p.bmap["barcode"])
    rows = []
    for ix, r in src.iterrows():
        nb = _neighbour(rng, r["barcode"])
        if nb in seen:
            continue
        seen.add(nb)
        frac = float(rng.uniform(lo, hi))
        row = {"barcode": nb, "element": "", "origin": r["barcode"]}
        for c in cols:
            row[c] = int(rng.binomial(int(r[c]), frac))
            if take:
                t.loc[ix, c] = int(r[c]) - row[c]
        if sum(row[c] for c in cols) == 0:
            row[cols[0]] = 1
        rows.append(row)
    p.bc = pd.concat([t, pd.DataFrame(rows, columns=list(t.columns))], ignore_index=True)
    return sorted(r["barcode"] for r in rows)


def _background(p: "Lib", rng, f_collide: float, f_error: float) -> None:
    """The barcode-level background of a real library (the L1 family's nuisance features): barcode collisions (the
    association assigns a barcode to two elements; its counts are the sum of both clones), sequencing-error barcodes
    (one-mismatch neighbours of a mapped barcode with a few per cent of its reads, absent from the map)."""
    p.bc["origin"] = ""
    p.truth["n_collisions"] = len(_collide(p, rng, f_collide))
    p.truth["n_error_barcodes"] = len(_errors(p, rng, f_error))


# ---------------------------------------------------------------- L1: the barcode library

@recipe(TRACK, "library")
def library(sub: pd.DataFrame, rng, n: int, n_neg: int, bc_low: int, bc_high: int, phi: float,
            a_max: float | None = None, rep2_depth: float = 1.0, bc_sd: float = 0.35, rep_sd: float = 0.25,
            carry: float = 0.005, f_collide: float = 0.002, f_error: float = 0.002) -> Lib:
    e = pd.concat([_pick(sub, rng, n, a_max), _controls(rng, n_neg, 0.15)], ignore_index=True)
    t = _simulate(e, rng, bc_low, bc_high, 120.0, 60.0, phi, reps=2, bc_sd=bc_sd, rep_depths=[1.0, rep2_depth],
                  rep_sd=rep_sd, carry=carry)
    p = Lib(kind="integrity", elements=e, bc=t, bmap=t[["barcode", "element"]].copy())
    p.truth["n_barcodes"] = int(len(t))
    _background(p, rng, f_collide, f_error)
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
    # each an unassigned barcode of a real element: its own counts, Poisson about a random mapped barcode's (a copy
    # of that barcode's counts would be an exact duplicate row, which blind study 26's analyst found in 221 of 241)
    extra = pd.DataFrame({"barcode": new, "element": "",
                          **{c: rng.poisson(src[c].to_numpy(dtype=float)) for c in ("dna_count", "rna_rep1", "rna_rep2")}})
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
    p.truth["missing"] = sorted(set(t["barcode"].iloc[keep:]) & set(p.bmap["barcode"]))
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
    gone = set(p.bc["barcode"].iloc[drop])
    # sequencing-error barcodes of a lost clone are lost with it
    drop = sorted(set(drop) | set(np.flatnonzero(p.bc["origin"].isin(gone).to_numpy())))
    p.bc = p.bc.drop(index=p.bc.index[drop]).reset_index(drop=True)
    p.bmap = p.bmap[~p.bmap["barcode"].isin(gone)].reset_index(drop=True)
    p.truth["bottlenecked"] = chosen
    return p


@recipe(TRACK, "collisions")
def collisions(p: Lib, rng, f_low: float, f_high: float) -> Lib:
    """The association was not filtered for collisions: a drawn f_low-f_high of the barcodes are listed under two
    elements (each cloned with both), far above the library's ~0.2% background."""
    p.truth["collided"] = _collide(p, rng, float(rng.uniform(f_low, f_high)))
    return p


@recipe(TRACK, "error_barcodes")
def error_barcodes(p: Lib, rng, f_low: float, f_high: float, share_low: float = 0.05, share_high: float = 0.2) -> Lib:
    """Counting without barcode error correction (no Hamming collapsing): a drawn f_low-f_high of the barcodes get a
    one-mismatch neighbour holding share_low-share_high of their reads (taken from them), absent from the map."""
    p.truth["errors_added"] = _errors(p, rng, float(rng.uniform(f_low, f_high)), share_low, share_high, take=True)
    return p


@recipe(TRACK, "discordant")
def discordant(p: Lib, rng, sd_low: float, sd_high: float) -> Lib:
    """A failed second transfection: every element's rna_rep2 reads scaled by 2^Normal(0, sd) (sd drawn in
    sd_low-sd_high, per element, on top of the ordinary transfection variance), so the replicates correlate poorly."""
    sd = float(rng.uniform(sd_low, sd_high))
    els = p.elements["element"].to_numpy()
    z = dict(zip(els, rng.normal(0.0, sd, len(els))))
    t = p.bc
    f = np.power(2.0, t["element"].map(z).fillna(0.0).to_numpy())
    t["rna_rep2"] = rng.poisson(t["rna_rep2"].to_numpy() * f).astype(np.int64)
    p.truth["discordant_sd"] = round(sd, 3)
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
    te = e[e["role"] == "test"].assign(r=e["activity"].round(6))
    p.truth["top_elements"] = te.sort_values(["r", "element"], ascending=[False, True])["element"].head(20).tolist()
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


@recipe(TRACK, "outlier_rna")
def outlier_rna(p: Lib, rng, n_low: int, n_high: int, log2_low: float, log2_high: float, min_activity: float = -1.0,
                max_activity: float = 1.0) -> Lib:
    """RNA jackpots: one barcode of each of n_low-n_high drawn test elements (true activity in min-max) gets its RNA
    reads multiplied by 2^k (k drawn per barcode in log2_low-log2_high, raised where needed so that the element's
    summed RNA/DNA lands 0.5 log2 above the 10th highest summed RNA/DNA of the test elements: a draw whose top
    elements are very active would otherwise hide most jackpots below the top 20, as at campaign seed 7001), as a PCR jackpot or a
    barcode in an integration hot spot does; the plasmid count is kept."""
    e = p.elements
    t0 = p.bc.groupby("element")[["dna_count", "rna_count"]].sum()
    test_ratio = (t0["rna_count"] / t0["dna_count"].clip(lower=1)).reindex(e.loc[e["role"] == "test", "element"])
    top10 = float(np.sort(test_ratio.dropna().to_numpy())[-min(10, len(test_ratio.dropna()))])
    m = (e["role"] == "test") & (e["activity"] >= min_activity) & (e["activity"] <= max_activity)
    chosen = sorted(str(x) for x in rng.choice(e.loc[m, "element"].to_numpy(), int(rng.integers(n_low, n_high + 1)),
                                                replace=False))
    t = p.bc
    bcs = []
    for el in chosen:
        idx = np.flatnonzero(((t["element"] == el) & (t["dna_count"] >= 20)).to_numpy())
        i = int(rng.choice(idx))
        k = float(rng.uniform(log2_low, log2_high))
        own = (t["element"] == el).to_numpy()
        r_i, rest = max(int(t["rna_count"].iloc[i]), 5), float(t.loc[own, "rna_count"].sum()) - int(t["rna_count"].iloc[i])
        need = top10 * 2.0 ** 0.5 * float(t.loc[own, "dna_count"].sum()) - rest  # summed RNA/DNA 0.5 log2 above the 10th
        k = max(k, float(np.log2(max(need, 1.0) / r_i)))
        t.loc[t.index[i], "rna_count"] = int(round(r_i * 2.0 ** k))
        bcs.append(str(t["barcode"].iloc[i]))
    p.truth["outlier_elements"] = chosen
    p.truth["outlier_barcodes"] = sorted(bcs)
    return p


# ---------------------------------------------------------------- L2 calling

@recipe(TRACK, "calling_lib")
def calling_lib(sub: pd.DataFrame, rng, n: int, n_neg: int, phi: float, sd_neg: float, bc_low: int,
                bc_high: int, rep_sd: float = 0.0, carry: float = 0.0) -> Lib:
    """Three transfections: each shifts every element's log2 activity by Normal(0, rep_sd) (transfection-level
    variance) and yields a drawn 0.7-1.4 of the nominal RNA depth; RNA libraries carry `carry` plasmid reads."""
    test = _pick(sub, rng, n)
    # element-to-element basal variation: inactive test elements vary like the controls do
    test["activity"] = np.round(test["activity"] + rng.normal(0.0, sd_neg, len(test)), 4)
    e = pd.concat([test, _controls(rng, n_neg, sd_neg)], ignore_index=True)
    depths = [1.0, 1.0, 1.0] if rep_sd <= 0 else [float(x) for x in rng.uniform(0.7, 1.4, 3)]
    t = _simulate(e, rng, bc_low, bc_high, 100.0, 100.0, phi, reps=3, bc_sd=0.3, rep_depths=depths, rep_sd=rep_sd,
                  carry=carry)
    p = Lib(kind="calling", elements=e, bc=t)
    p.truth["sd_neg"] = round(float(sd_neg), 3)
    p.truth["rep_sd"] = round(float(rep_sd), 3)
    te = e[e["role"] == "test"]
    # generative truth: test elements whose true activity lies above the basal (negative-control) distribution,
    # more than 3 sd_neg over its mean 0
    p.truth["active_elements"] = sorted(te.loc[te["activity"] > 3.0 * sd_neg, "element"])
    p.truth["activity"] = {k: float(v) for k, v in zip(te["element"], te["activity"])}
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
    meta: dict = {"assay": "massively parallel splicing reporter assay (MPRA design): each element (a 9-nt 5' "
                           "splice-site variant, positions -3..+6, of the middle exon of a three-exon minigene reporter) "
                           "is cloned with many random 14-nt barcodes; the plasmid library (DNA) and the reporter "
                           "transcripts that include the middle exon (RNA) are sequenced and barcodes counted. RNA/DNA "
                           "measures exon inclusion (percent spliced in) up to a constant, not transcript abundance",
                  "data_origin": "the elements and their exon inclusion are real (the 5' splice-site library of Wong "
                                 "et al. 2018, as distributed with the mavenn package); the barcode counts are "
                                 "simulated around them",
                  "element_naming": "test elements are named by their 9-nt sequence (DNA letters, the sense strand of "
                                    "the reporter); neg_### are scrambled negative controls without a splice donor "
                                    "(the assay's background inclusion)"}
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
                          "library reads, rna_rep1, rna_rep2 = reads of the exon-included reporter RNA of two "
                          "transfection replicates)"})
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
                                   "rna_rep1..rna_rep3 = reads of the exon-included reporter RNA of three independent "
                                   "transfections)")
        else:
            files["counts.csv"] = ("read counts per barcode (CSV: barcode, element, dna_count = plasmid library reads, "
                                   "rna_count = reads of the exon-included reporter RNA)")
        if p.kind == "batch":
            meta["batches"] = ("the library was split in two sub-pools transfected and sequenced on different days "
                               "(batch 1, batch 2); half of the negative controls are in each")
    meta["files"] = dict(sorted(files.items()))
    w.json("meta.json", meta)
