"""scRNA track: the real 10x PBMC 68k subsample shipped inside scanpy, recovered to UMI counts, and the recipes
that turn it into worlds.

Substrate (real data, no network)
---------------------------------
`scanpy/datasets/10x_pbmc68k_reduced.h5ad` is the file `scanpy.datasets.pbmc68k_reduced()` reads from the installed
package: 700 peripheral blood mononuclear cells of one donor ("Fresh 68k PBMCs, Donor A", 10x Genomics, v1
chemistry with 14-nt barcodes; Zheng et al. 2017 Nat Commun 8:14049) x 765 genes. `.X` is scaled; `.raw.X` holds
log1p(counts / n_counts * 1e4) where `obs.n_counts` is each cell's full-transcriptome UMI total. We recover integer
UMI counts as `rint(expm1(raw.X) * n_counts / 1e4)` (float64): 99.9994% of non-zero entries are within 0.05 of an
integer and the smallest non-zero value is exactly 1, so the recovery is exact up to float32 rounding of the stored
values. Cell-type labels are the dataset's `bulk_labels` (10 populations, assigned in the source by correlation with
purified-population reference profiles). Gene identifiers: the source ships HGNC symbols only, so `features.tsv.gz`
carries the symbol in both the gene_id and gene_symbol columns (meta.json says so). Cells are always written sorted
by barcode so no position encodes an edit.

Every perturbation below is a documented, seeded edit of these real counts. Wherever an effect (batch, donor,
condition, depth) must change expression, it is applied by binomial thinning of real counts (retention p <= 1), never
by inventing counts, except for the two L1 defects that are additions by nature (ambient soup; doublets = sums of two
real cells).

Recipes (names are registered as "scrna.<name>")
------------------------------------------------
Every L1/L2 world starts with
  subsample_cells(fraction, drop_genes)  a seeded random subsample of the cells (fraction drawn per world) and of the
                                      genes (drop_genes drawn, never a gene a recipe or reference analysis uses), so
                                      no world ships a file byte-identical to the substrate or to another world
L1 integrity
  subsample_groups(fractions | lymphoid_fraction)  keep a fraction of cells per label group (boundary: myeloid-rich
                                      sample); `lymphoid_fraction` keeps that fraction of T, B and NK cells
  thin_depth(retention)               binomial thinning of every count (boundary: shallow library)
  inject_ambient(rho)                 SoupX-style contamination: soup profile = pooled counts of all cells; each cell
                                      receives Multinomial(round(rho/(1-rho) * total_c), soup) so that a fraction
                                      rho of its final UMIs are ambient
  inject_doublets(n)                  n heterotypic doublets: a myeloid cell (CD14+ Monocyte / Dendritic) + a T or B
                                      cell, counts summed; the two source cells are removed (their RNA is in the
                                      doublet); fresh 14-nt barcodes with library suffixes drawn from the real cells'; label = label of
                                      the member with more UMIs (what a correlation-based annotator would assign)
  inject_empty_droplets(n, umis_low, umis_high)  n barcodes holding only ambient RNA (Multinomial draws of the pooled
                                      profile, umis_low..umis_high UMIs each) kept in the filtered matrix, labelled by
                                      best correlation with the populations' mean profiles
  counts_to_lognorm(target_sum)       the matrix holds log1p(counts / library size * target_sum) values (1e4: exactly
                                      the source `.raw.X`) although meta.json still calls it UMI counts
  duplicate_barcodes(n)               n cells appear twice (same barcode, identical counts: a merge concatenated a
                                      lane twice)
  swap_labels(a, b | pair)            the two populations' labels are exchanged in cells.csv (`pair`: [a, b])
  shift_features(shift, keep_last)    features.tsv.gz row i names the gene of matrix row i+shift, cyclically within
                                      the first n - keep_last rows (the last `keep_last` rows stay aligned, so both
                                      ends of the table remain plausible); the feature table is misaligned by `shift`
L2
  choose_target(target)               the population a markers task asks about (drawn per world); later steps that
                                      take no explicit target use it
  assign_samples(target, target_in_second, other_in_second, names)  split cells into two 10x lanes
  thin_others(retention)              binomial thinning of every count of the cells NOT in the target population
                                      (the target's libraries become 1/retention times deeper)
  thin_genes(genes, retention, column, values)   multiply the expected counts of `genes` (all genes if empty) in the
                                      cells whose `column` is in `values` by `retention` (binomial thinning)
  assign_donors(n_per_condition, conditions, myeloid_share)  split cells into pseudo-donors
  donor_effects(sigma)                per gene and donor, thinning with retention exp(sigma*(z_dg - max_d z_dg)),
                                      z ~ N(0,1): relative donor levels are log-normal with sd sigma
  assign_lanes(lanes)                 donor -> 10x library (lane), a mapping or a string of one lane letter per donor
                                      (D1 first); as with assign_samples, each barcode's -k suffix is
                                      rewritten to name its library (the 700 barcode cores are unique)
  set_task(kind, **task)              the task block of meta.json and the cells.csv columns
  composition (differential abundance; cells are drawn per donor, so these worlds start from the donors' design):
  donor_design(n_per_condition, conditions, sigma, lanes)  donors D1..D2n with conditions and lanes; each donor's
                                      absolute abundance of population k = the real share p_k x exp(sigma z_dk)
  abundance_effect(population, fold, condition, compensate)  the condition multiplies a population's abundance;
                                      `compensate` lets a second population absorb the change so that every other
                                      population keeps its share (recorded as the generative truth)
  lane_capture(population, retention, lane)  a technical loss of one population in one 10x library (not a condition
                                      effect)
  sample_donor_cells(cells_low, cells_high, retention_low)  N_d ~ U{low..high} cells per donor, populations
                                      Multinomial(N_d, composition); each cell a real cell of its population drawn with
                                      replacement and binomially thinned (retention U(retention_low, 1)) under a fresh
                                      barcode whose suffix names the lane; `pooled_call` (trap worlds) re-draws the
                                      donors' variation until the pooled-cell test calls an unchanged population,
                                      `lane_effect` until the reference's lane test shows the stated lane effect
                                      (a population's name) or none (False)
L3
  dossier(kind)                       replaces the files by a dossier (dossier.md + evidence tables) computed from the
                                      data by the reference analysis
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.suite.canonical import CanonicalWriter
from benchmark.suite.registry import recipe, substrate, writer

TRACK = "scrna"
MTX_DIR = "filtered_feature_bc_matrix"
MYELOID_LABELS = ("CD14+ Monocyte", "Dendritic")
T_LABELS = ("CD4+/CD25 T Reg", "CD4+/CD45RA+/CD25- Naive T", "CD4+/CD45RO+ Memory", "CD8+ Cytotoxic T",
            "CD8+/CD45RA+ Naive Cytotoxic")
B_LABELS = ("CD19+ B",)
NK_LABELS = ("CD56+ NK",)
# Interferon-stimulated genes present among the 765 genes (used for the injected condition effect).
ISG_GENES = ("BST2", "IFITM1", "IFITM3", "IRF7", "ISG20", "LY6E", "OAS1")
# Immediate-early / heat-shock genes of the dissociation-stress signature present among the 765 genes.
STRESS_GENES = ("FOS", "HSP90AB1", "HSPB1", "JUNB", "KLF6")


@dataclass
class ScData:
    counts: np.ndarray                 # cells x genes, float64 (integer-valued unless `integer` is False)
    barcodes: list[str]
    genes: list[str]                   # true gene of each matrix column
    obs: pd.DataFrame                  # per-cell annotations, row-aligned with counts (cell_type, ...)
    lib_full: np.ndarray               # full-transcriptome UMI totals (hidden; used to reproduce log-normalised values)
    feature_names: list[str] | None = None   # names written to features.tsv.gz (None: the true genes)
    integer: bool = True
    cells_columns: list[str] = field(default_factory=lambda: ["cell_type"])
    task: dict = field(default_factory=dict)
    dossier: dict | None = None        # {"dossier.md": str, "<table>.csv": DataFrame}
    target: str | None = None          # markers: the population the task asks about (choose_target)
    thinned_by: dict = field(default_factory=dict)   # gene -> {column: [values]} of every gene-specific thin_genes
    design: dict | None = None         # composition: donors, conditions, lanes, abundances (donor_design)

    def subset(self, idx: np.ndarray) -> "ScData":
        idx = np.asarray(idx)
        self.counts = self.counts[idx]
        self.barcodes = [self.barcodes[i] for i in idx]
        self.obs = self.obs.iloc[idx].reset_index(drop=True)
        self.lib_full = self.lib_full[idx]
        return self


def source_file() -> Path:
    spec = importlib.util.find_spec("scanpy")
    if spec is None or spec.origin is None:
        raise RuntimeError("scanpy is not installed; the scrna substrate reads its packaged PBMC68k file")
    return Path(spec.origin).parent / "datasets" / "10x_pbmc68k_reduced.h5ad"


@substrate("pbmc68k_reduced_counts")
def pbmc68k(seed: int = 0) -> ScData:
    import anndata as ad
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = ad.read_h5ad(source_file())
    raw = a.raw.X
    raw = raw.toarray() if hasattr(raw, "toarray") else np.asarray(raw)
    lib = a.obs["n_counts"].to_numpy(np.float64)
    counts = np.rint(np.expm1(raw.astype(np.float64)) * lib[:, None] / 1e4)
    obs = pd.DataFrame({"cell_type": a.obs["bulk_labels"].astype(str).to_numpy()})
    return ScData(counts=counts, barcodes=[str(b) for b in a.obs_names], genes=[str(g) for g in a.raw.var_names],
                  obs=obs, lib_full=lib)


# ---------------------------------------------------------------- helpers

def _gidx(data: ScData, genes) -> np.ndarray:
    pos = {g: i for i, g in enumerate(data.genes)}
    return np.array([pos[g] for g in genes], dtype=int)


def _mask(data: ScData, column: str | None, values) -> np.ndarray:
    if column is None:
        return np.ones(len(data.barcodes), bool)
    return data.obs[column].isin(list(values)).to_numpy()


def _new_barcodes(rng: np.random.Generator, n: int, taken: set[str]) -> list[str]:
    """Fresh 14-nt barcodes whose library suffix (-1 ... -8) is drawn from the suffixes of the existing cells."""
    suffixes = sorted(b.rsplit("-", 1)[1] for b in taken)
    out = []
    while len(out) < n:
        bc = "".join(rng.choice(list("ACGT"), 14)) + "-" + str(rng.choice(suffixes))
        if bc not in taken:
            taken.add(bc)
            out.append(bc)
    return out


def _thin(rng: np.random.Generator, counts: np.ndarray, p) -> np.ndarray:
    return rng.binomial(counts.astype(np.int64), np.clip(p, 0.0, 1.0)).astype(np.float64)


# ---------------------------------------------------------------- L1 recipes

# Genes a recipe or a reference analysis relies on: never dropped by subsample_cells.
PROTECTED_GENES = frozenset(
    {"CD3D", "CD3E", "CD3G", "CD79A", "MS4A1", "GNLY", "NKG7", "GZMB", "PRF1", "LYZ", "CST3", "S100A8", "S100A9", "FCN1",
     "MT-ND3", *ISG_GENES, *STRESS_GENES,
     "BST2", "IFI30", "IFITM1", "IFITM2", "IFITM3", "ISG20", "LY6E", "OAS1", "SP110",
     "DNAJB1", "FOS", "HSP90AB1", "HSPB1", "HSPD1", "JUNB", "KLF6", "NFKBIA",
     "VIM", "CLIC1", "PPIA", "C19orf43", "PSME2", "ERP29", "CALM1", "TAGLN2", "COPE", "NDUFA4", "LAMTOR4", "RNASET2",
     "NAP1L1", "SUMO2", "TRAPPC1", "TOMM7", "CSTB", "GPX4", "ATP5O", "GPX1", "EIF3G", "LDHA", "PPIB", "ATP6V1G1", "TCEB2",
     "ATP5B", "CAP1", "ATP6V0E1", "NDUFA11", "NDUFB11", "SAP18", "ICAM3", "EIF4A2", "ANXA5", "CCNI", "ATP5J2", "HNRNPDL",
     "TKT", "PSMB6", "MZT2B",
     # markers and trap genes the manifests name
     "CD79B", "TNFRSF13B", "SPIB", "CLIC3", "SPON2", "CTSW", "CD7", "FTL", "PSAP", "AIF1", "TYROBP", "FCER1G", "LST1",
     "FCGR3A", "CTSS", "CFD", "HLA-DRA", "HLA-DRB1", "HLA-DPA1", "HLA-DPB1", "LGALS2", "HLA-DQA1", "CCL5", "KLRG1",
     "GZMK", "LAG3", "LYAR", "CD8B", "CCR7", "IL32", "LDHB", "CST7", "GZMA", "PTPRCAP", "CD52", "RPS24", "NPM1", "CD74",
     "S100A4", "TMEM176B", "HMGB2", "IGLL5", "IGJ", "MZB1"})


@recipe(TRACK, "subsample_cells")
def subsample_cells(data: ScData, rng, fraction: float, drop_genes: int = 0) -> ScData:
    """Keep round(fraction * n) cells chosen at random (the world's seeded subsample of the real data), and drop
    `drop_genes` random genes that no recipe or reference analysis relies on (so even the feature table is the
    world's own)."""
    n = len(data.barcodes)
    k = int(round(fraction * n))
    data.subset(np.sort(rng.choice(n, k, replace=False)))
    if drop_genes:
        free = [i for i, g in enumerate(data.genes) if g not in PROTECTED_GENES]
        drop = set(int(i) for i in rng.choice(free, drop_genes, replace=False))
        keep = [i for i in range(len(data.genes)) if i not in drop]
        data.counts = data.counts[:, keep]
        data.genes = [data.genes[i] for i in keep]
    return data


@recipe(TRACK, "subsample_groups")
def subsample_groups(data: ScData, rng, fractions: dict | None = None, lymphoid_fraction: float | None = None) -> ScData:
    """fractions: {"myeloid"|"T"|"B"|"NK"|"other": fraction of that group's cells kept}; lymphoid_fraction: the same
    fraction for T, B and NK."""
    fractions = dict(fractions or {})
    if lymphoid_fraction is not None:
        fractions.update({g: lymphoid_fraction for g in ("T", "B", "NK")})
    group = np.array([_group(ct) for ct in data.obs["cell_type"]])
    keep = np.zeros(len(group), bool)
    for g in sorted(set(group)):
        idx = np.flatnonzero(group == g)
        k = int(round(fractions.get(g, 1.0) * len(idx)))
        keep[np.sort(rng.choice(idx, k, replace=False))] = True
    return data.subset(np.flatnonzero(keep))


def _group(ct: str) -> str:
    if ct in MYELOID_LABELS:
        return "myeloid"
    if ct in T_LABELS:
        return "T"
    if ct in B_LABELS:
        return "B"
    if ct in NK_LABELS:
        return "NK"
    return "other"


@recipe(TRACK, "thin_depth")
def thin_depth(data: ScData, rng, retention: float) -> ScData:
    data.counts = _thin(rng, data.counts, retention)
    data.lib_full = data.lib_full * retention
    return data


@recipe(TRACK, "inject_ambient")
def inject_ambient(data: ScData, rng, rho: float) -> ScData:
    soup = data.counts.sum(0) / data.counts.sum()
    tot = data.counts.sum(1)
    add = np.rint(rho / (1 - rho) * tot).astype(np.int64)
    for c in range(len(tot)):
        data.counts[c] += rng.multinomial(add[c], soup)
    data.lib_full = data.lib_full + add
    return data


@recipe(TRACK, "inject_doublets")
def inject_doublets(data: ScData, rng, n: int) -> ScData:
    ct = data.obs["cell_type"].to_numpy()
    mye = np.flatnonzero(np.isin(ct, MYELOID_LABELS))
    lym = np.flatnonzero(np.isin(ct, B_LABELS))
    a = rng.choice(mye, n, replace=False)
    b = rng.choice(lym, n, replace=False)
    dbl = data.counts[a] + data.counts[b]
    lab = np.where(data.counts[a].sum(1) >= data.counts[b].sum(1), ct[a], ct[b])
    bcs = _new_barcodes(rng, n, set(data.barcodes))
    keep = np.setdiff1d(np.arange(len(ct)), np.concatenate([a, b]))
    lib = data.lib_full[a] + data.lib_full[b]
    data.subset(keep)
    data.counts = np.vstack([data.counts, dbl])
    data.barcodes = data.barcodes + bcs
    extra = pd.DataFrame({"cell_type": lab})
    data.obs = pd.concat([data.obs, extra], ignore_index=True)
    data.lib_full = np.concatenate([data.lib_full, lib])
    return data


@recipe(TRACK, "inject_empty_droplets")
def inject_empty_droplets(data: ScData, rng, n: int, umis_low: int, umis_high: int) -> ScData:
    """n empty droplets kept by a too-lenient cell call: barcodes that captured no cell, only ambient RNA. Each
    holds Multinomial(u, pool) counts, u ~ U{umis_low..umis_high} UMIs and pool = the pooled profile of all cells
    (the ambient RNA of the run); fresh 14-nt barcodes with library suffixes drawn from the real cells'. Their
    cells.csv label is what a correlation-based annotator assigns: the population whose mean log-normalised profile
    correlates best with the droplet's."""
    pool = data.counts.sum(0) / data.counts.sum()
    u = rng.integers(umis_low, umis_high + 1, n)
    drops = np.vstack([rng.multinomial(int(k), pool) for k in u]).astype(np.float64)
    ln = lognorm(data.counts)
    ct = data.obs["cell_type"].to_numpy()
    pops = sorted(set(ct))
    means = np.vstack([ln[ct == p].mean(0) for p in pops])
    dl = lognorm(drops)
    dz = dl - dl.mean(1, keepdims=True)
    mz = means - means.mean(1, keepdims=True)
    corr = (dz @ mz.T) / np.maximum(np.linalg.norm(dz, axis=1)[:, None] * np.linalg.norm(mz, axis=1)[None, :], 1e-12)
    lab = [pops[int(np.argmax(r))] for r in np.round(corr, 10)]
    bcs = _new_barcodes(rng, n, set(data.barcodes))
    data.counts = np.vstack([data.counts, drops])
    data.barcodes = data.barcodes + bcs
    data.obs = pd.concat([data.obs, pd.DataFrame({"cell_type": lab})], ignore_index=True)
    data.lib_full = np.concatenate([data.lib_full, drops.sum(1)])
    return data


@recipe(TRACK, "counts_to_lognorm")
def counts_to_lognorm(data: ScData, rng, target_sum: float = 1e4) -> ScData:
    data.counts = np.log1p(data.counts / data.lib_full[:, None] * float(target_sum))
    data.integer = False
    return data


@recipe(TRACK, "duplicate_barcodes")
def duplicate_barcodes(data: ScData, rng, n: int) -> ScData:
    dup = np.sort(rng.choice(len(data.barcodes), n, replace=False))
    return data.subset(np.concatenate([np.arange(len(data.barcodes)), dup]))


@recipe(TRACK, "swap_labels")
def swap_labels(data: ScData, rng, a: str | None = None, b: str | None = None, pair: list[str] | None = None) -> ScData:
    if pair is not None:
        a, b = pair
    ct = data.obs["cell_type"].to_numpy().copy()
    ia, ib = ct == a, ct == b
    ct[ia], ct[ib] = b, a
    data.obs["cell_type"] = ct
    return data


@recipe(TRACK, "shift_features")
def shift_features(data: ScData, rng, shift: int, keep_last: int = 0) -> ScData:
    n = len(data.genes) - keep_last
    data.feature_names = [data.genes[(i + shift) % n] for i in range(n)] + data.genes[n:]
    return data


# ---------------------------------------------------------------- L2 recipes

@recipe(TRACK, "choose_target")
def choose_target(data: ScData, rng, target: str) -> ScData:
    data.target = target
    return data


@recipe(TRACK, "thin_others")
def thin_others(data: ScData, rng, retention: float) -> ScData:
    rows = np.flatnonzero(data.obs["cell_type"].to_numpy() != data.target)
    data.counts[rows] = _thin(rng, data.counts[rows], retention)
    data.lib_full[rows] = data.lib_full[rows] * retention
    return data


@recipe(TRACK, "assign_samples")
def assign_samples(data: ScData, rng, target_in_second: float, other_in_second: float, names: list[str],
                   target: str | None = None) -> ScData:
    ct = data.obs["cell_type"].to_numpy()
    target = target or data.target
    p = np.where(ct == target, target_in_second, other_in_second)
    second = rng.random(len(ct)) < p
    data.obs["sample"] = np.where(second, names[1], names[0])
    _suffix_by(data, "sample")
    return data


def _suffix_by(data: ScData, column: str) -> None:
    """Barcode suffix -k names the library: rewrite it so it agrees with the lane/sample column (cores are unique)."""
    levels = sorted(set(data.obs[column]))
    data.barcodes = [f"{b.rsplit('-', 1)[0]}-{levels.index(v) + 1}" for b, v in zip(data.barcodes, data.obs[column])]


@recipe(TRACK, "thin_genes")
def thin_genes(data: ScData, rng, retention: float, genes: list[str] | None = None, column: str | None = None,
               values: list | None = None) -> ScData:
    rows = np.flatnonzero(_mask(data, column, values or []))
    cols = _gidx(data, genes) if genes else np.arange(len(data.genes))
    for g in genes or []:
        data.thinned_by.setdefault(g, {}).setdefault(column, []).extend(values or [])
    sub = data.counts[np.ix_(rows, cols)]
    data.counts[np.ix_(rows, cols)] = _thin(rng, sub, retention)
    if not genes:
        data.lib_full[rows] = data.lib_full[rows] * retention
    return data


@recipe(TRACK, "assign_donors")
def assign_donors(data: ScData, rng, n_per_condition: int, conditions: list[str],
                  myeloid_share: list[float] | None = None) -> ScData:
    """Pseudo-donors: donors 1..n get conditions[0], n+1..2n conditions[1]. Without `myeloid_share` every cell
    is assigned uniformly at random (balanced composition); with it, myeloid cells go to a donor of condition k
    with probability proportional to myeloid_share[k] (and lymphoid cells to 1 - myeloid_share[k])."""
    n = len(data.barcodes)
    nd = 2 * n_per_condition
    mye = data.obs["cell_type"].isin(MYELOID_LABELS).to_numpy()
    donor = np.empty(n, dtype=int)
    for i in range(n):
        if myeloid_share is None:
            w = np.ones(nd)
        else:
            s = np.repeat(np.asarray(myeloid_share, float), n_per_condition)
            w = s if mye[i] else 1.0 - s
        donor[i] = rng.choice(nd, p=w / w.sum())
    data.obs["donor"] = [f"D{d + 1}" for d in donor]
    data.obs["condition"] = [conditions[d // n_per_condition] for d in donor]
    return data


@recipe(TRACK, "donor_effects")
def donor_effects(data: ScData, rng, sigma: float) -> ScData:
    donors = sorted(set(data.obs["donor"]))
    z = rng.standard_normal((len(donors), len(data.genes)))
    p = np.exp(sigma * (z - z.max(0, keepdims=True)))
    d = data.obs["donor"].to_numpy()
    for k, name in enumerate(donors):
        rows = np.flatnonzero(d == name)
        data.counts[rows] = _thin(rng, data.counts[rows], p[k][None, :])
    return data


@recipe(TRACK, "assign_lanes")
def assign_lanes(data: ScData, rng, lanes: dict | str) -> ScData:
    if isinstance(lanes, str):
        lanes = {f"D{i + 1}": x for i, x in enumerate(lanes)}
    data.obs["lane"] = [lanes[d] for d in data.obs["donor"]]
    _suffix_by(data, "lane")
    return data


@recipe(TRACK, "set_task")
def set_task(data: ScData, rng, kind: str, columns: list[str], **task) -> ScData:
    if kind == "markers" and "target_population" not in task:
        task["target_population"] = data.target
    data.task = {"kind": kind, **task}
    data.cells_columns = list(columns)
    return data


# ---------------------------------------------------------------- L2 composition (differential abundance)

@recipe(TRACK, "donor_design", version="2")
def donor_design(data: ScData, rng, n_per_condition: int, conditions: list[str], sigma: float, lanes: str) -> ScData:
    """The donors of a differential-abundance world, before any cell is drawn: donors D1..Dn get conditions[0],
    Dn+1..D2n conditions[1]; `lanes` gives one lane letter per donor (D1 first). Each donor's absolute abundance of
    population k is the real data's share p_k times exp(sigma * z_dk), z ~ N(0, 1) (biological donor-to-donor
    variation, log-normal with sd sigma). Later steps multiply these abundances; `sample_donor_cells` turns them
    into cells."""
    pops = sorted(set(data.obs["cell_type"]))
    share = np.array([(data.obs["cell_type"] == p).mean() for p in pops])
    nd = 2 * n_per_condition
    z = rng.standard_normal((nd, len(pops)))
    data.design = {
        "pops": pops,
        "donors": [f"D{i + 1}" for i in range(nd)],
        "condition": [conditions[i // n_per_condition] for i in range(nd)],
        "lane": list(lanes),
        "abundance": share[None, :] * np.exp(sigma * z),
        "changed": {},
        "sigma": float(sigma),  # the donor variation, kept so that `sample_donor_cells` can re-draw it
        "z": z,
    }
    return data


@recipe(TRACK, "abundance_effect")
def abundance_effect(data: ScData, rng, population: str, fold: float, condition: str,
                     compensate: str | None = None) -> ScData:
    """The condition changes a population's absolute abundance: multiply it by `fold` in every donor of
    `condition`. With `compensate`, that population changes by the factor that keeps the two populations' combined
    share of the base composition unchanged (one population expands at the other's expense, every other population
    keeps its share). The changed populations are the generative truth."""
    des = data.design
    pops = des["pops"]
    base = np.array([(data.obs["cell_type"] == p).mean() for p in pops])
    rows = np.array([c == condition for c in des["condition"]])
    i = pops.index(population)
    des["abundance"][rows, i] *= fold
    des["changed"][population] = float(fold)
    if compensate is not None:
        j = pops.index(compensate)
        g = 1.0 - base[i] * (fold - 1.0) / base[j]
        if not 0.05 < g < 20:
            raise ValueError(f"cannot compensate {population} x{fold} with {compensate} (factor {g:.3f})")
        des["abundance"][rows, j] *= g
        des["changed"][compensate] = float(g)
    return data


@recipe(TRACK, "lane_capture")
def lane_capture(data: ScData, rng, population: str, retention: float, lane: str) -> ScData:
    """A technical loss confined to one 10x library: only a fraction `retention` of the population's cells is
    recovered in the donors captured in `lane` (whatever their condition). Not a condition effect."""
    des = data.design
    rows = np.array([x == lane for x in des["lane"]])
    des["abundance"][rows, des["pops"].index(population)] *= retention
    return data


def _cells_of(ct: np.ndarray, donor: list[str], des: dict) -> pd.DataFrame:
    by = dict(zip(des["donors"], zip(des["condition"], des["lane"])))
    return pd.DataFrame({"cell_type": ct, "donor": donor, "condition": [by[d][0] for d in donor],
                         "lane": [by[d][1] for d in donor]})


def _pooled_trap_bites(ct: np.ndarray, donor: list[str], des: dict, pooled_call: str | bool) -> bool:
    """Whether the cell-level test (every cell a replicate: per-population Fisher test on pooled counts, BH; the
    naive analysis) makes a false call that the donor-level reference analysis does not make: it calls a population
    whose abundance the condition does not change and the reference does not call; `pooled_call` names that
    population, or (True) any such population with >= DA_NULL_MIN_MEAN cells per donor on average (one the graded
    per-population table must keep non-significant). False (a clean control, where the cell-level analysis must be
    right): it calls no population beyond the truly changed ones and the reference's calls."""
    from worlds.scrna.solvers import DA_NULL_MIN_MEAN, _called, da_test, donor_counts, pooled_fisher

    cells = _cells_of(ct, donor, des)
    test = des["condition"][-1]
    pooled = set(_called(pooled_fisher(cells, test)))
    C, info = donor_counts(cells)
    ref_calls = set(_called(da_test(C, info, test)))
    if pooled_call is False:  # a clean control: the pooled test calls nothing beyond the truth and the reference
        return not (pooled - set(des["changed"])) and not (pooled - ref_calls)
    calls = pooled - set(des["changed"]) - ref_calls
    if isinstance(pooled_call, str):
        return pooled_call in calls
    per_donor = cells["cell_type"].value_counts() / len(des["donors"])
    return any(per_donor.get(p, 0.0) >= DA_NULL_MIN_MEAN for p in calls)


def _lane_effect_as_stated(ct: np.ndarray, donor: list[str], des: dict, lane_effect: str | bool) -> bool:
    """Whether the data show the lane effect the world states, by the reference's own lane test (the lane term of
    y ~ lane + condition, quasi-Poisson, BH over the tested populations, padj < LANE_FDR: the rule that puts lane in
    the donor-level model): `lane_effect` names the population the lane must visibly affect, or False: no population
    shows one (a world with no lane effect whose donor variation happens to mimic one is not that world)."""
    from worlds.scrna.solvers import LANE_FDR, da_test, donor_counts

    C, info = donor_counts(_cells_of(ct, donor, des))
    res = da_test(C, info, des["condition"][-1])
    hit = set(res.loc[res["lane_padj"] < LANE_FDR, "cell_type"])
    return lane_effect in hit if isinstance(lane_effect, str) else not hit


@recipe(TRACK, "sample_donor_cells", version="2")
def sample_donor_cells(data: ScData, rng, cells_low: int, cells_high: int, retention_low: float = 0.75,
                       pooled_call: str | bool | None = None, lane_effect: str | bool | None = None,
                       max_redraws: int = 100) -> ScData:
    """Turn the donors' abundances into cells: donor d yields N_d ~ U{cells_low..cells_high} cells whose populations
    are Multinomial(N_d, abundance_d / sum abundance_d) (what a capture of a fixed number of cells measures: the
    composition). Each cell is a real cell of that population drawn at random (with replacement) whose counts are
    binomially thinned to a drawn retention in [retention_low, 1] (so no two cells share a profile), under a fresh
    barcode whose -k suffix names the donor's lane.

    `pooled_call` makes a trap world's trap bite at every seed: when the cell-level test (per-population Fisher test
    on pooled cells, BH 5%) calls no unchanged population that the donor-level reference test leaves uncalled
    (`pooled_call` names the population, or True: any such population with >= 10 cells per donor), the donors'
    biological variation z (donor_design) is re-drawn from the world's own generator and the cells drawn again
    (deterministic; at most `max_redraws` times). The donor-level model is unchanged (log-normal, sd sigma), only
    realisations where the pooled-cell analysis makes no false call are skipped. False (a clean control): re-drawn
    until the pooled test calls no population beyond the truly changed ones and the reference's calls. `lane_effect` re-draws in the same way until the data show the lane effect the world states, by
    the reference's lane test (BH padj < 0.01): the named population differs by lane (lane_capture), or (False) no
    population does (a world built without a lane effect)."""
    des = data.design
    pops = des["pops"]
    ct = data.obs["cell_type"].to_numpy()
    idx_by = {p: np.flatnonzero(ct == p) for p in pops}
    for attempt in range(max_redraws + 1):
        src, donor, cond, lane = [], [], [], []
        for d, name in enumerate(des["donors"]):
            n = int(rng.integers(cells_low, cells_high + 1))
            q = des["abundance"][d] / des["abundance"][d].sum()
            k = rng.multinomial(n, q)
            for j, p in enumerate(pops):
                if k[j]:
                    src.extend(rng.choice(idx_by[p], k[j], replace=True).tolist())
                    donor += [name] * int(k[j])
                    cond += [des["condition"][d]] * int(k[j])
                    lane += [des["lane"][d]] * int(k[j])
        drawn = ct[np.array(src, dtype=int)]
        if ((pooled_call is None or _pooled_trap_bites(drawn, donor, des, pooled_call))
                and (lane_effect is None or _lane_effect_as_stated(drawn, donor, des, lane_effect))):
            break
        z = rng.standard_normal(des["z"].shape)
        des["abundance"] = des["abundance"] * np.exp(des["sigma"] * (z - des["z"]))
        des["z"] = z
    else:
        raise ValueError(f"no draw where the pooled-cell test calls an unchanged population and the lane effect is as "
                         f"stated after {max_redraws} re-draws")
    des["redraws"] = attempt
    src = np.array(src, dtype=int)
    ret = rng.uniform(retention_low, 1.0, len(src))
    counts = _thin(rng, data.counts[src], ret[:, None])
    letters = np.array(list("ACGT"))
    bcs, seen = [], set()
    while len(bcs) < len(src):
        core = "".join(letters[rng.integers(0, 4, 14)])
        if core not in seen:
            seen.add(core)
            bcs.append(core + "-1")
    data.counts = counts
    data.lib_full = data.lib_full[src] * ret
    data.obs = pd.DataFrame({"cell_type": ct[src], "donor": donor, "condition": cond, "lane": lane})
    data.barcodes = bcs
    _suffix_by(data, "lane")
    return data


# ---------------------------------------------------------------- L3 dossier

def lognorm(counts: np.ndarray) -> np.ndarray:
    tot = counts.sum(1, keepdims=True)
    return np.log1p(counts / np.maximum(tot, 1) * 1e4)


def auroc(x: np.ndarray, y: np.ndarray) -> float:
    """P(X > Y) + 0.5 P(X = Y): the Mann-Whitney AUC of x (target) against y."""
    from scipy.stats import rankdata

    r = rankdata(np.concatenate([x, y]))
    n1, n2 = len(x), len(y)
    return float((r[:n1].sum() - n1 * (n1 + 1) / 2) / (n1 * n2))


def population_table(data: ScData, genes: list[str]) -> pd.DataFrame:
    """Per labelled population and gene: cells, median UMIs, mean log-normalised expression, fraction detected."""
    ln = lognorm(data.counts)
    ct = data.obs["cell_type"].to_numpy()
    rows = []
    for pop in sorted(set(ct)):
        m = ct == pop
        for g in genes:
            j = data.genes.index(g)
            rows.append({"population": pop, "n_cells": int(m.sum()), "median_umis": float(np.median(data.counts[m].sum(1))),
                         "gene": g, "mean_lognorm": float(ln[m, j].mean()), "frac_detected": float((data.counts[m, j] > 0).mean())})
    return pd.DataFrame(rows)


def pairwise_auc_table(data: ScData, target: str, genes: list[str]) -> pd.DataFrame:
    ln = lognorm(data.counts)
    ct = data.obs["cell_type"].to_numpy()
    rows = []
    for g in genes:
        j = data.genes.index(g)
        for pop in sorted(set(ct) - {target}):
            rows.append({"gene": g, "target": target, "versus": pop, "auroc": auroc(ln[ct == target, j], ln[ct == pop, j])})
    return pd.DataFrame(rows)


DOSSIER_GENES = {
    "b_cell_markers": ["CD79A", "MS4A1", "CD79B", "CD3D", "LYZ", "NKG7", "FCGR3A", "HLA-DRA"],
    "monocyte_labels": ["FCGR3A", "LYZ", "S100A8", "S100A9", "FCN1", "CST3", "FCER1A", "CLEC10A", "LST1", "AIF1",
                        "HLA-DRA", "NKG7", "GNLY", "CD3D", "CD79A"],
}
DOSSIER_TARGET = {"b_cell_markers": ("CD19+ B", ["CD79A", "MS4A1"]),
                  "monocyte_labels": ("CD14+ Monocyte", ["FCGR3A", "LYZ", "S100A8", "S100A9"])}
# Injected L3 dossiers (recipe `inject_l3_expression` first; see the end of this file): MHC class II panels.
MHC2_GENES = ["HLA-DRA", "HLA-DRB1", "HLA-DRB5", "HLA-DPA1", "HLA-DPB1", "HLA-DQA1", "HLA-DQB1", "HLA-DMA", "HLA-DMB"]
_MHC2_PANEL = ["HLA-DRA", "HLA-DRB1", "HLA-DPA1", "HLA-DPB1", "HLA-DQA1", "HLA-DMA", "HLA-DMB", "CD74", "LYZ", "CST3",
               "S100A9", "FCN1", "FCGR3A", "LST1", "AIF1", "FCER1A", "CLEC10A", "CD79A", "CD79B", "MS4A1", "CD3D", "NKG7"]
DOSSIER_GENES["mhc2_myeloid"] = _MHC2_PANEL
DOSSIER_GENES["b_plasma_programme"] = ["CD79A", "CD79B", "MS4A1", "BANK1", "CD37", "HLA-DRA", "HLA-DRB1", "HLA-DPB1",
                                        "HLA-DQA1", "HLA-DMB", "CD74", "IGJ", "MZB1", "TNFRSF17", "IGLL5", "LYZ", "CD3D", "NKG7"]
DOSSIER_TARGET["mhc2_myeloid"] = ("CD14+ Monocyte", ["HLA-DRA", "HLA-DPB1", "CD74", "LYZ"])
DOSSIER_TARGET["b_plasma_programme"] = ("CD19+ B", ["CD79A", "MS4A1", "HLA-DRA", "IGJ"])
# The source donor is healthy; injected dossiers do not say so (their evidence is constructed, see the manifests).
DOSSIER_DONOR = {"mhc2_myeloid": "one donor (clinical details not supplied)",
                 "b_plasma_programme": "one donor (clinical details not supplied)"}


@recipe(TRACK, "dossier")
def dossier(data: ScData, rng, kind: str) -> ScData:
    genes = DOSSIER_GENES[kind]
    target, auc_genes = DOSSIER_TARGET[kind]
    pop = population_table(data, genes)
    auc = pairwise_auc_table(data, target, auc_genes)
    n = len(data.barcodes)
    md = [
        "# Evidence dossier: marker expression across annotated PBMC populations",
        "",
        "## Data",
        f"Droplet scRNA-seq (10x Genomics, v1 chemistry) of {n} peripheral blood mononuclear cells from "
        f"{DOSSIER_DONOR.get(kind, 'one healthy donor')}",
        "(a subsample of the public 10x PBMC 68k data set, Zheng et al. 2017, Nat Commun 8:14049), 765 genes.",
        "Population labels are the data set's published annotation, assigned by correlating each cell's profile with",
        "reference expression profiles of purified (FACS-sorted) PBMC populations.",
        "",
        "## Reference analysis",
        "UMI counts per cell were scaled to 10,000 and log1p-transformed. For every population the tables give the",
        "number of cells, the median UMIs per cell (over the 765 genes), the mean log-normalised expression and the",
        f"fraction of cells with at least one UMI of each gene (`population_expression.csv`). `pairwise_auroc.csv` gives,",
        f"for the population labelled '{target}', the area under the ROC curve of each listed gene against each other",
        "population (Mann-Whitney AUC; 1 = perfectly higher in the target, 0.5 = no separation, 0 = perfectly lower).",
        "",
        "## Tables",
        "- population_expression.csv: population, n_cells, median_umis, gene, mean_lognorm, frac_detected",
        "- pairwise_auroc.csv: gene, target, versus, auroc",
    ]
    data.dossier = {"dossier.md": "\n".join(md), "population_expression.csv": pop, "pairwise_auroc.csv": auc}
    return data


# ---------------------------------------------------------------- writer

META_BASE = {
    "assay": "droplet single-cell RNA-seq (10x Genomics, v1 chemistry; 14-nt cell barcodes with a -N suffix naming the 10x library of the original data set)",
    "sample": "human peripheral blood mononuclear cells; a subsample of the public 10x PBMC 68k data set (Zheng et al. 2017, Nat Commun 8:14049)",
    "genes": "a gene subset of the transcriptome (n_genes below); per-cell totals cover these genes only",
    "gene_ids": "the source provides HGNC gene symbols only, so features.tsv.gz repeats the symbol in its gene_id and gene_symbol columns",
    "cell_type": "published annotation, assigned by correlating each cell with reference profiles of purified PBMC populations",
}
CELL_COLUMNS = {
    "barcode": "cell barcode, as in barcodes.tsv.gz",
    "cell_type": "annotated population",
    "sample": "10x library (lane) the cell was captured in",
    "donor": "donor the cell comes from",
    "condition": "condition of the donor",
    "lane": "sequencing lane (10x library) the cell was captured in",
}


@writer(TRACK)
def write(data: ScData, w: CanonicalWriter) -> None:
    if data.dossier is not None:
        w.files(data.dossier)
        return
    order = sorted(range(len(data.barcodes)), key=lambda i: (data.barcodes[i], i))
    counts = data.counts[order]
    barcodes = [data.barcodes[i] for i in order]
    obs = data.obs.iloc[order].reset_index(drop=True)
    names = data.feature_names or data.genes
    w.mtx(f"{MTX_DIR}/matrix.mtx.gz", counts.T, integer=data.integer)
    w.lines(f"{MTX_DIR}/barcodes.tsv.gz", barcodes)
    w.lines(f"{MTX_DIR}/features.tsv.gz", [f"{g}\t{g}\tGene Expression" for g in names])
    cells = pd.DataFrame({"barcode": barcodes})
    for c in data.cells_columns:
        cells[c] = obs[c].to_numpy()
    w.table("cells.csv", cells)
    meta = {
        **META_BASE,
        "files": {
            f"{MTX_DIR}/matrix.mtx.gz": "Matrix Market coordinate matrix, genes (rows) x cells (columns)",
            f"{MTX_DIR}/barcodes.tsv.gz": "one cell barcode per matrix column",
            f"{MTX_DIR}/features.tsv.gz": "gene_id, gene_symbol, feature_type per matrix row (10x layout, no header)",
            "cells.csv": {c: CELL_COLUMNS[c] for c in ["barcode", *data.cells_columns]},
            "meta.json": "this description",
        },
        "values": "UMI counts (non-negative integers), unnormalised",
        "n_cells": len(barcodes),
        "n_genes": len(names),
    }
    if data.task:
        meta["task"] = {k: v for k, v in data.task.items() if k != "kind"}
    w.json("meta.json", meta)
    if data.task.get("kind") == "composition":
        # generative truth (gold side only): the populations whose absolute abundance the condition changes
        ch = data.design["changed"]
        up = sorted(p for p, f in ch.items() if f > 1)
        down = sorted(p for p, f in ch.items() if f < 1)
        w.truth(changed=sorted(up + down), increased=up, decreased=down,
                log2_fold={p: round(float(np.log2(f)), 4) for p, f in sorted(ch.items())})
    if data.task.get("kind") == "condition_de":
        # generative truth (gold side only): the genes whose expression the condition changes are exactly those
        # thinned in the cells of one condition (up in the test condition when thinned in the reference's cells)
        test, ref = data.task["test_condition"], data.task["reference_condition"]
        by = {g: set(v.get("condition", [])) for g, v in data.thinned_by.items() if "condition" in v}
        up = sorted(g for g, v in by.items() if ref in v and test not in v)
        down = sorted(g for g, v in by.items() if test in v and ref not in v)
        w.truth(de_genes=sorted(up + down), up_genes=up, down_genes=down)


# ---------------------------------------------------------------- L3 injected counterfactuals

@recipe(TRACK, "inject_l3_expression")
def inject_l3_expression(data: ScData, rng, genes: list[str], retention: float, populations: list[str] | None = None,
                         extra: dict | None = None) -> ScData:
    """L3 injected counterfactual (seed 001 E.3: modify an upstream quantity, re-run the real scorer): binomial
    thinning, with the world's seeded RNG, of the real UMI counts of `genes` to `retention` (0 < retention <= 1) in
    the cells whose label is in `populations` (every cell when null). `extra` maps further genes to their own
    retention in the same cells. Nothing is invented: counts only go down. The `dossier` step that follows
    recomputes every table from the edited counts with the reference analysis, so all statistics stay consistent;
    tests/test_l3.py re-derives the effect from the written tables."""
    plan = [(list(genes), float(retention))] + [([g], float(r)) for g, r in sorted((extra or {}).items())]
    rows = np.flatnonzero(_mask(data, "cell_type" if populations else None, populations or []))
    for gs, ret in plan:
        if not 0 < ret <= 1:
            raise ValueError(f"retention must be in (0, 1], got {ret}")
        cols = _gidx(data, gs)
        data.counts[np.ix_(rows, cols)] = _thin(rng, data.counts[np.ix_(rows, cols)], ret)
    return data

