"""Reference solvers of the scrna track (gold side). Every golden is computed from the world's public files.

scrna.L1.integrity   runs every integrity detector of the catalog on the files (matrix type, duplicate barcodes,
                     feature/matrix alignment, label swaps, ambient RNA, heterotypic doublets after removing the
                     ambient share) and reports what it finds, the measured sizes the rubric's `measure` checks and the
                     products its `actions` check (flagged doublet and duplicated barcodes, relabelled cells, the
                     corrected feature table, recovered library sizes); @product_validator judges for those products.
scrna.L2.markers     markers of the population named in meta.json: genes higher in the target than in EVERY other
                     population, ranked by the minimum pairwise AUROC (scran findMarkers pval.type="all" logic,
                     Lun et al. 2016), on library-size-normalised log expression, computed within each 10x lane and
                     combined (blocking on lane). Also the scores the per-gene table is judged on (the reference's
                     40 best markers and the genes the world's trap promotes) and the trap ranking itself (zero_if).
scrna.L2.condition_de  condition DE by donor-level pseudobulk (sum of counts per donor x compartment, myeloid vs
                     lymphoid) and pydeseq2 (Wald test, BH, explicit contrast), one fit per compartment with design
                     ~ [lane +] condition (lane only when it varies within a condition); genes expressed (>= 5 counts)
                     in fewer than 2 donors of a condition are not tested; DE = padj < 0.05 and |log2FC| > 0.5 in
                     either compartment. Also the naive cell-level Wilcoxon result (the trap's list), the genes it
                     calls that the reference finds null, and the decoys (candidate effect genes not changed here).
scrna.L2.composition  differential abundance from cells.csv: cells counted per donor x population (populations with
                     >= 5 cells per donor on average), log2(count + 0.5) less a median-of-ratios size factor over the
                     tested populations (most populations unchanged, so one expansion does not depress the others'
                     estimates), OLS ~ [lane +] condition per population, t-test of the condition coefficient, BH;
                     changed = padj < 0.05. Lane enters (for every population) only when the data show a lane effect:
                     the within-condition lane contrast of ~ lane + condition has BH padj < 0.01 in some tested
                     population (lane must also vary within a condition); otherwise ~ condition. Also the traps' own answers: the
                     pooled-cell Fisher test (every cell a replicate; the naive agent's list), raw donor proportions
                     (closure) and the lane-blind fit.
scrna.L3.dossier     the dossier's key statistics, read back from its tables.

L1 also detects empty droplets (barcodes below EMPTY_MAX_FRACTION of the median UMI total): reported, listed and left
out of the other detectors; its golden keys appear only where it fires, so the goldens of the other worlds are
unchanged.

Scripted agents (end of file): each L1/L2 family has an oracle (the reference analysis above, its helpers inlined
into the sandbox with inspect.getsource, plus data-driven diagnostics that name what it finds; it writes the work
products) and a naive agent running tool defaults without checking: L1 loads the matrix and accepts it; markers
runs scanpy rank_genes_groups (Wilcoxon vs rest) on the matrix as loaded (the tool does not normalise); condition_de
runs normalize_total + log1p and a cell-level rank_genes_groups Wilcoxon between conditions.
"""
from __future__ import annotations

import gzip
import inspect
import json
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.suite.registry import naive, oracle, solver
from graders.registry import product_validator

MTX_DIR = "filtered_feature_bc_matrix"
LINEAGE_MARKERS = {
    "T": ("CD3D", "CD3E", "CD3G"),
    "B": ("CD79A", "MS4A1"),
    "NK": ("GNLY", "NKG7", "GZMB", "PRF1"),
    "M": ("LYZ", "CST3", "S100A8", "S100A9", "FCN1"),
}
LINEAGE_SCALE = {"T": 0.015, "B": 0.015, "NK": 0.08, "M": 0.05}
EXPECTED_LINEAGE = {
    "CD4+/CD25 T Reg": {"T"}, "CD4+/CD45RA+/CD25- Naive T": {"T"}, "CD4+/CD45RO+ Memory": {"T"},
    "CD8+ Cytotoxic T": {"T", "NK"}, "CD8+/CD45RA+ Naive Cytotoxic": {"T"},
    "CD19+ B": {"B"}, "CD56+ NK": {"NK"}, "CD14+ Monocyte": {"M"}, "Dendritic": {"M"},
}
MYELOID_LABELS = ("CD14+ Monocyte", "Dendritic")
# thresholds of the detectors (calibrated on the clean substrate; see tests and the L1 manifests)
DOUBLET_MYELOID_FRAC = 0.015    # myeloid-marker share of a cell's UMIs
DOUBLET_B_FRAC = 0.003          # B-marker share of a cell's UMIs (myeloid cells: 97th percentile 0.0014)
DOUBLET_RATE_FINDING = 0.02     # flagged fraction above which doublets are a finding
AMBIENT_FINDING = 0.05          # estimated contamination fraction above which ambient RNA is a finding
OFFSET_GAIN = 0.15              # consistency gain a feature offset must bring to be a finding
EMPTY_MAX_FRACTION = 0.2        # a barcode below this fraction of the median UMI total is an empty droplet (cells of
                                # the substrate hold >= 0.52 of the median, the injected empties <= 60 UMIs, ~0.1)


# ---------------------------------------------------------------- reading

def _open(path: Path):
    return gzip.open(path, "rt") if str(path).endswith(".gz") else open(path)


def read_world(world_dir: Path) -> dict:
    d = Path(world_dir) / MTX_DIR
    with _open(d / "matrix.mtx.gz") as fh:
        header = fh.readline()
        line = fh.readline()
        while line.startswith("%"):
            line = fh.readline()
        nr, nc, nnz = (int(x) for x in line.split())
        body = np.loadtxt(fh, ndmin=2) if nnz else np.zeros((0, 3))
    X = np.zeros((nc, nr))
    if len(body):
        X[body[:, 1].astype(int) - 1, body[:, 0].astype(int) - 1] = body[:, 2]
    with _open(d / "barcodes.tsv.gz") as fh:
        barcodes = [ln.rstrip("\n") for ln in fh if ln.strip()]
    with _open(d / "features.tsv.gz") as fh:
        feats = [ln.rstrip("\n").split("\t") for ln in fh if ln.strip()]
    cells = pd.read_csv(Path(world_dir) / "cells.csv", dtype=str, keep_default_na=False)
    meta = json.loads((Path(world_dir) / "meta.json").read_text())
    return {"X": X, "barcodes": barcodes, "gene_ids": [f[0] for f in feats], "symbols": [f[1] for f in feats],
            "cells": cells, "meta": meta, "declared_integer": "integer" in header}


def lognorm(X: np.ndarray) -> np.ndarray:
    tot = X.sum(1, keepdims=True)
    return np.log1p(X / np.maximum(tot, 1e-12) * 1e4)


def auroc(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import rankdata

    r = rankdata(np.concatenate([x, y]))
    n1, n2 = len(x), len(y)
    return float((r[:n1].sum() - n1 * (n1 + 1) / 2) / (n1 * n2))


# ---------------------------------------------------------------- L1 detectors

def lineage_scores(X: np.ndarray, symbols: list[str], offset: int = 0) -> dict[str, np.ndarray]:
    """Share of each cell's UMIs in each lineage's marker genes; `offset` k reads the gene named at features row
    i+k as matrix row i (so the gene named g sits at row index(g) - k)."""
    n = len(symbols)
    pos = {g: i for i, g in enumerate(symbols)}
    tot = np.maximum(X.sum(1), 1e-12)
    out = {}
    for lin, genes in LINEAGE_MARKERS.items():
        rows = [(pos[g] - offset) % n for g in genes if g in pos]
        out[lin] = X[:, rows].sum(1) / tot
    return out


def lineage_calls(scores: dict[str, np.ndarray]) -> np.ndarray:
    """Each cell's lineage: the marker set with the largest UMI share relative to that set's typical share in its
    own population (fixed scales, so the call does not depend on the sample's composition)."""
    names = sorted(scores)
    Z = np.vstack([scores[lin] / LINEAGE_SCALE[lin] for lin in names])
    return np.array(names)[np.argmax(Z, axis=0)]


def label_consistency(calls: np.ndarray, labels: np.ndarray) -> tuple[float, dict[str, str]]:
    ok = tot = 0
    majority = {}
    for lab in sorted(set(labels)):
        m = labels == lab
        vals, cnt = np.unique(calls[m], return_counts=True)
        majority[lab] = str(vals[np.argmax(cnt)])
        if lab in EXPECTED_LINEAGE:
            ok += int(np.isin(calls[m], list(EXPECTED_LINEAGE[lab])).sum())
            tot += int(m.sum())
    return ok / max(tot, 1), majority


def detect(d: dict) -> dict:
    """Every integrity detector on one world's files: the findings, their measured sizes and the products a careful
    analyst writes (flagged barcodes, relabelled cells, the corrected feature table, recovered library sizes)."""
    X = d["X"]
    findings: list[str] = []
    v: dict = {"n_barcodes_in_matrix": int(X.shape[0]), "n_genes": int(X.shape[1])}

    # 1. matrix type: UMI counts are non-negative integers
    nzv = X[X != 0]
    frac_int = float(np.mean(np.abs(nzv - np.rint(nzv)) < 1e-6)) if nzv.size else 1.0
    is_counts = bool(frac_int > 0.999 and X.min() >= 0)
    v["matrix_is_counts"] = is_counts
    v["fraction_integer_values"] = round(frac_int, 4)
    v["fraction_non_integer_values"] = round(1.0 - frac_int, 4)
    if not is_counts:
        findings.append("normalized_as_counts")
        # log1p(x / L * s): the smallest non-zero value of a cell is one UMI, so counts = expm1(x) / expm1(min x)
        E = np.expm1(X) if X.max() < 20 else X
        nz = np.where(E > 0, E, np.inf).min(1)
        nz = np.where(np.isfinite(nz), nz, 1.0)
        X = np.rint(E / nz[:, None])
        v["recovered_umis"] = {b: int(t) for b, t in zip(d["barcodes"], X.sum(1))}
        v["recovered_library_sizes_median"] = float(np.median(X.sum(1)))
        v["n_cells_affected"] = int(X.shape[0])

    # 2. duplicated barcodes
    bcs = np.array(d["barcodes"])
    _, first, cnt = np.unique(bcs, return_index=True, return_counts=True)
    dup_set = sorted(str(b) for b in np.unique(bcs)[cnt > 1])
    first = np.sort(first)
    v["n_duplicate_barcodes"] = int(len(bcs) - len(first))
    v["duplicate_fraction"] = round(v["n_duplicate_barcodes"] / max(len(bcs), 1), 4)
    v["duplicated_barcodes"] = dup_set
    v["n_duplicated_barcodes"] = len(dup_set)
    # the other count an expert may give: every column of a duplicated barcode, first copies included
    v["n_columns_in_duplicates"] = int(cnt[cnt > 1].sum())
    v["fraction_in_duplicates"] = round(v["n_columns_in_duplicates"] / max(len(bcs), 1), 4)
    if len(first) < len(bcs):
        findings.append("duplicate_barcodes")
        X, bcs = X[first], bcs[first]
    v["n_unique_barcodes"] = int(len(bcs))
    cells = d["cells"].drop_duplicates("barcode").set_index("barcode")
    labels = cells.reindex(bcs)["cell_type"].fillna("").to_numpy()

    # 2b. empty droplets: barcodes holding a small fraction of the median UMI total (in this sample every cell holds
    # at least about half of it) whose profile is the pooled one; reported, and left out of the checks below
    tot = X.sum(1)
    med = float(np.median(tot))
    empty = tot < EMPTY_MAX_FRACTION * med
    if empty.any():
        findings.append("empty_droplets")
        # the summed profile of the low barcodes against the pooled profile of the cells (log1p CP10k, Pearson)
        pool_ln = lognorm(X[~empty].sum(0, keepdims=True))[0]
        drop_ln = lognorm(X[empty].sum(0, keepdims=True))[0]
        v["n_empty_droplets"] = int(empty.sum())
        v["empty_fraction"] = round(float(empty.mean()), 4)
        v["empty_barcodes"] = sorted(str(b) for b in bcs[empty])
        v["empty_max_umis"] = int(tot[empty].max())
        v["cell_min_umis"] = int(tot[~empty].min())
        v["median_umis"] = med
        v["empty_profile_corr_with_pool"] = round(float(np.corrcoef(drop_ln, pool_ln)[0, 1]), 3)
        X, bcs, labels = X[~empty], bcs[~empty], labels[~empty]

    # 3. feature table aligned with the matrix rows?
    cons = {}
    for k in range(-3, 4):
        c, _ = label_consistency(lineage_calls(lineage_scores(X, d["symbols"], k)), labels)
        cons[k] = c
    best = max(cons, key=lambda k: (cons[k], -abs(k)))
    v["label_marker_consistency"] = round(cons[0], 4)
    offset = 0
    if best != 0 and cons[best] - cons[0] > OFFSET_GAIN:
        findings.append("feature_misalignment")
        offset = best
    v["feature_row_offset"] = offset
    v["feature_row_shift"] = -offset          # the same misalignment in the opposite sign convention
    v["features_aligned"] = offset == 0
    if offset:
        # matrix row i holds the gene named at features row i+k. The rows where the table wraps around cannot be
        # told apart by marker genes (at most |k| + 1 rows), so the product check tolerates 2% of rows
        n = len(d["symbols"])
        v["corrected_features"] = [d["symbols"][(i + offset) % n] for i in range(n)]
    scores = lineage_scores(X, v.get("corrected_features", d["symbols"]), 0)
    calls = lineage_calls(scores)

    # 4. swapped labels: two labels whose marker lineage is each other's expected lineage
    _, majority = label_consistency(calls, labels)
    sizes = pd.Series(labels).value_counts()
    bad = sorted(l for l, m in majority.items() if l in EXPECTED_LINEAGE and sizes[l] >= 10 and m not in EXPECTED_LINEAGE[l])
    swapped: list[str] = []
    if len(bad) == 2 and majority[bad[0]] in EXPECTED_LINEAGE[bad[1]] and majority[bad[1]] in EXPECTED_LINEAGE[bad[0]]:
        swapped = bad
        findings.append("swapped_labels")
    v["labels_contradicting_markers"] = bad
    v["swapped_labels"] = swapped
    rel = np.isin(labels, swapped) if swapped else np.zeros(len(labels), bool)
    v["relabelled_barcodes"] = sorted(str(b) for b in bcs[rel])
    v["n_relabelled"] = int(rel.sum())
    v["relabelled_fraction"] = round(float(rel.mean()), 4) if len(rel) else 0.0
    if swapped:
        other = {swapped[0]: swapped[1], swapped[1]: swapped[0]}
        v["corrected_labels"] = {str(b): other[l] for b, l in zip(bcs[rel], labels[rel])}

    # 5. ambient RNA: myeloid-specific transcripts inside T and NK cells (B cells are left out: they are the other
    # half of the doublets below), relative to the pooled (soup-like) profile
    fm = scores["M"]
    soup = X.sum(0) / X.sum()
    soup_m = float(fm @ X.sum(1) / X.sum())
    tnk = np.isin(calls, ["T", "NK"])
    rho = float(np.median(fm[tnk]) / soup_m) if tnk.any() and soup_m > 0 else 0.0
    v["ambient_fraction"] = round(rho, 4)
    ambient = rho > AMBIENT_FINDING
    rho_used = rho if ambient else 0.0

    # 6. heterotypic doublets: myeloid AND B-cell marker programmes in one barcode (mutually exclusive lineages),
    # after removing the ambient share each programme gets from the soup
    pos = {g: i for i, g in enumerate(v.get("corrected_features", d["symbols"]))}
    soup_b = float(soup[[pos[g] for g in LINEAGE_MARKERS["B"] if g in pos]].sum())
    flagged = (fm - rho_used * soup_m >= DOUBLET_MYELOID_FRAC) & (scores["B"] - rho_used * soup_b >= DOUBLET_B_FRAC)
    is_finding = flagged.mean() > DOUBLET_RATE_FINDING
    v["n_doublets_flagged"] = int(flagged.sum()) if is_finding else 0
    v["doublet_fraction"] = round(v["n_doublets_flagged"] / max(len(bcs), 1), 4)
    v["doublet_barcodes"] = sorted(str(b) for b in bcs[flagged]) if is_finding else []
    v["doublet_candidates"] = int(flagged.sum())
    if is_finding:
        findings.append("doublets")

    lymph = np.isin(calls, ["T", "B", "NK"]) & ~flagged
    v["lymphoid_cells_with_myeloid_transcripts"] = round(float((fm[lymph] > 0).mean()), 4) if lymph.any() else 0.0
    if ambient:
        findings.append("ambient_rna")

    v["n_cells_kept"] = int(len(bcs) - v["n_doublets_flagged"])
    return {"findings": sorted(findings), **v}


@solver("scrna.L1.integrity", version="2")
def l1_integrity(world_dir: Path, world) -> dict:
    return detect(read_world(world_dir))


# ---------------------------------------------------------------- L1 work products (product validators)

def _product_bytes(path: Path) -> bytes:
    """A product's bytes, a gzip product inflated within the grader's size and ratio caps (graders.product_io)."""
    from graders.product_io import read_bytes_bounded

    raw = Path(path).read_bytes()
    return read_bytes_bounded(Path(path)) if raw[:2] == b"\x1f\x8b" else raw


def _product_lines(path: Path) -> list[str]:
    raw = _product_bytes(path)
    return [ln for ln in raw.decode("utf-8", errors="replace").splitlines()]


def _read_mtx(path: Path, n_genes: int, n_cells: int) -> np.ndarray:
    """A Matrix Market product as cells x genes (either orientation accepted when it matches the world's shape)."""
    import io

    from scipy.io import mmread

    M = mmread(io.BytesIO(_product_bytes(path)))
    M = M.toarray() if hasattr(M, "toarray") else np.asarray(M)
    if M.shape == (n_genes, n_cells):
        return M.T.astype(float)
    if M.shape == (n_cells, n_genes):
        return M.astype(float)
    raise ValueError(f"matrix is {M.shape[0]} x {M.shape[1]}, expected {n_genes} genes x {n_cells} cells")


@product_validator("scrna.corrected_features", compressed=("gzip",))
def corrected_features(path: Path, golden: dict, check) -> tuple[float, str]:
    """A corrected features table: one row per matrix row (10x features.tsv layout, CSV, or one symbol a line); the
    gene symbol (second field when there are several, else the first) must name the gene the matrix row holds."""
    want = golden.get("corrected_features") or []
    rows = [ln for ln in _product_lines(path) if ln.strip() and not ln.startswith("#")]
    fields = [[f.strip().strip('"') for f in (ln.split("\t") if "\t" in ln else ln.split(","))] for ln in rows]
    if fields and len(fields) == len(want) + 1:
        fields = fields[1:]  # a header row
    names = [f[1] if len(f) > 1 and f[1] else f[0] for f in fields]
    if len(names) != len(want):
        return 0.0, f"{len(names)} feature rows for a matrix of {len(want)} rows"
    share = sum(a == b for a, b in zip(names, want)) / len(want)
    credit = 1.0 if share >= 0.98 else 0.5 if share >= 0.9 else 0.0
    return credit, f"{share:.1%} of rows name the gene the matrix row holds (need 98%)"


@product_validator("scrna.relabelled_cells", compressed=("gzip",))
def relabelled_cells(path: Path, golden: dict, check) -> tuple[float, str]:
    """Either a corrected cells table (barcode and cell_type columns: the swapped cells must carry the exchanged
    label) or the list of relabelled barcodes, one a line (F1 against the reference >= check.min_f1)."""
    from graders.checks import f1_score, read_items

    want = golden.get("corrected_labels") or {}
    lines = _product_lines(path)
    head = [h.strip().strip('"').lower() for h in (lines[0].split("\t") if lines and "\t" in lines[0] else (lines[0].split(",") if lines else []))]
    if "barcode" in head and "cell_type" in head:
        tab = pd.read_csv(path, sep=None, engine="python", dtype=str)
        tab.columns = [c.strip().lower() for c in tab.columns]
        lab = dict(zip(tab["barcode"], tab["cell_type"]))
        ok = sum(lab.get(b) == l for b, l in want.items()) / max(len(want), 1)
        credit = 1.0 if ok >= 0.95 else 0.5 if ok >= 0.8 else 0.0
        return credit, f"corrected table: {ok:.1%} of the swapped cells carry the exchanged label (need 95%)"
    items = read_items(path, list(want))
    prec, rec, f1 = f1_score(items, list(want))
    credit = 1.0 if f1 >= check.min_f1 else 0.5 if check.partial_f1 is not None and f1 >= check.partial_f1 else 0.0
    return credit, f"relabelled barcodes: precision {prec:.2f}, recall {rec:.2f}, F1 {f1:.2f} (need {check.min_f1:.2f})"


@product_validator("scrna.recovered_counts", compressed=("gzip",))
def recovered_counts(path: Path, golden: dict, check) -> tuple[float, str]:
    """The recovered UMI counts: the count matrix (Matrix Market, the world's gene and barcode order; integer values)
    or a per-cell table of the recovered library sizes (a `barcode` column and one numeric column). Per-cell totals
    must match the reference recovery within 2% for >= 95% of cells."""
    want = golden.get("recovered_umis") or {}
    bcs = sorted(want)
    tot = np.array([want[b] for b in bcs], float)
    head = (_product_lines(path) or [""])[0]
    if head.startswith("%%MatrixMarket"):
        X = _read_mtx(path, int(golden["n_genes"]), len(tot))
        nz = X[X != 0]
        integer = float(np.mean(np.abs(nz - np.rint(nz)) < 1e-6)) if nz.size else 0.0
        got = X.sum(1)
        what = f"matrix with {integer:.1%} integer values"
    else:
        tab = pd.read_csv(path, sep=None, engine="python")
        tab.columns = [str(c).strip().lower() for c in tab.columns]
        num = [c for c in tab.columns if c != "barcode" and pd.api.types.is_numeric_dtype(tab[c])]
        if "barcode" not in tab.columns or not num:
            return 0.0, f"neither a Matrix Market file nor a table with a barcode column and a numeric column ({list(tab.columns)[:6]})"
        m = dict(zip(tab["barcode"].astype(str), tab[num[0]]))
        got = np.array([float(m.get(b, np.nan)) for b in bcs])
        integer = 1.0
        what = f"per-cell table ({num[0]})"
    share = float(np.mean(np.abs(got - tot) <= 0.02 * tot))
    ok = integer >= 0.99 and share >= 0.95
    return float(ok), f"{what}; {share:.1%} of cells with totals within 2% of the reference recovery (need 95%)"


@product_validator("scrna.de_calls")
def de_calls(path: Path, golden: dict, check) -> tuple[float, str]:
    """The significance calls of a per-gene DE table (columns gene and padj): the truly changed genes are significant
    AND the genes of the golden mapping named by the check (`null_padj`: the genes the trap calls DE; `decoy_padj`:
    candidate effect genes this world did not change) are not (padj >= 0.05 for >= 80% of them; a gene missing from
    the table counts against). Both halves must hold: a table that calls nothing, or another world's effect, fails.
    A null gene the generative truth changed (one the reference missed) is left out of the null half: an analysis
    that finds more of the truth than the reference is not charged for it.

    The truly changed genes are the world's generative truth (`truth.de_genes`: the genes thinned in one condition's
    cells) where the golden has it, else the reference's DE genes. Against the truth, the share that must be
    significant is 60%, or the reference's own share less 0.05 where the reference recovers less of the truth (a
    world where even the reference misses part of the effect must not fail an analysis as good as it); a world with
    no injected effect (pseudoreplication) asks only that the null genes stay null."""
    from graders.checks import read_table

    padj, why = read_table(Path(path), "gene", "padj")
    if padj is None:
        return 0.0, why
    truth = (golden.get("truth") or {}).get("de_genes")
    ref_de = {g.lower() for g in golden.get("de_genes") or []}
    if truth is not None:
        de = [g.lower() for g in truth]
        ref_share = sum(g in ref_de for g in de) / len(de) if de else 1.0
        need = min(0.6, ref_share - 0.05)
        what = "truly changed"
    else:
        de, need, what = sorted(ref_de), 0.6, "reference DE"
    # a gene the generative truth changed is never one that must stay null, though the reference missed it
    null = [g.lower() for g in (golden.get(check.golden) or {}) if g.lower() not in set(de)]
    sig = sum(padj.get(g, 1.0) < 0.05 for g in de) / len(de) if de else 1.0
    nul = sum(g in padj and padj[g] >= 0.05 for g in null) / len(null) if null else 1.0
    ok = sig >= need and nul >= 0.8
    return float(ok), (f"{sig:.0%} of the {len(de)} {what} genes significant (need {need:.0%}); {nul:.0%} of the "
                       f"{len(null)} {check.golden} genes not significant (need 80%)")


@product_validator("scrna.trap_calls")
def trap_calls(path: Path, golden: dict, check) -> tuple[float, str]:
    """Holds (1) when a per-gene DE table (columns gene and padj) calls significant (padj < 0.05) at least half of
    the genes the trap's own analysis calls DE that the world did not change (the golden list named by the check,
    e.g. `trap_de_genes`, less the generative truth `truth.de_genes`): the trap's distinctive, false calls. Meant for
    a `zero_if`, beside the list overlap: a correct answer shares the truth genes with the trap's list (so the list
    overlap alone can fire on it when the trap adds few false calls), but it does not call the trap's false genes.
    A world whose trap adds no false call never fires it."""
    from graders.checks import read_table

    padj, why = read_table(Path(path), "gene", "padj")
    if padj is None:
        return 0.0, why
    truth = {g.lower() for g in ((golden.get("truth") or {}).get("de_genes") or golden.get("de_genes") or [])}
    false = sorted({g.lower() for g in (golden.get(check.golden) or [])} - truth)
    if not false:
        return 0.0, f"the trap's list ({check.golden}) has no call outside the truth"
    share = sum(padj.get(g, 1.0) < 0.05 for g in false) / len(false)
    return float(share >= 0.5), (f"{share:.0%} of the {len(false)} genes only the trap calls DE ({check.golden} less "
                                 "the truth) significant (fires at 50%)")


# ---------------------------------------------------------------- L2 markers

MIN_CELLS = 5
# The genes a condition effect of a condition_de world is drawn from (worlds/scrna/L2/condition_de/*.yaml): the
# interferon-stimulated genes (up in stim) and broadly expressed genes (a drawn few repressed in stim).
DE_CANDIDATES = ("BST2", "IFI30", "IFITM1", "IFITM2", "IFITM3", "ISG20", "LY6E", "OAS1", "SP110",
                 "VIM", "CLIC1", "PPIA", "C19orf43", "PSME2", "ERP29", "CALM1", "TAGLN2", "COPE", "NDUFA4", "LAMTOR4",
                 "RNASET2", "NAP1L1", "SUMO2", "TRAPPC1", "TOMM7", "CSTB", "GPX4", "ATP5O", "GPX1", "EIF3G", "LDHA",
                 "PPIB", "ATP6V1G1", "TCEB2", "ATP5B", "CAP1", "ATP6V0E1", "NDUFA11", "NDUFB11", "SAP18", "ICAM3",
                 "EIF4A2", "ANXA5", "CCNI", "ATP5J2", "HNRNPDL", "TKT", "PSMB6", "MZT2B")
MARKER_MIN_AUROC = 0.6      # a marker separates the target from every other population with AUROC >= this
STRICT_MIN_AUROC = 0.75     # a stricter bar (an identifying panel): the markers every sound calling rule keeps


def _cells_aligned(d: dict) -> pd.DataFrame:
    cells = d["cells"].set_index("barcode")
    return cells.reindex(d["barcodes"]).reset_index()


def marker_table(X: np.ndarray, genes: list[str], labels: np.ndarray, target: str, block: np.ndarray | None = None) -> pd.DataFrame:
    """For every gene: the minimum over other populations (>= MIN_CELLS cells) of the AUROC of the target against
    that population, on log1p(CP10k); AUROCs are computed within each block (lane) holding >= MIN_CELLS cells of both
    groups and averaged with weights n_target * n_other. Also the target's and the best other population's means."""
    ln = lognorm(X)
    block = np.zeros(len(labels), dtype=object) if block is None else block
    others = [p for p in sorted(set(labels)) if p != target and (labels == p).sum() >= MIN_CELLS]
    from scipy.stats import rankdata

    def auc_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        r = rankdata(np.vstack([a, b]), axis=0)
        n1, n2 = len(a), len(b)
        return (r[:n1].sum(0) - n1 * (n1 + 1) / 2) / (n1 * n2)

    min_auc = np.full(len(genes), np.inf)
    worst = np.array([""] * len(genes), dtype=object)
    for p in others:
        num = np.zeros(len(genes))
        den = 0.0
        for blk in sorted(set(block)):
            t = (labels == target) & (block == blk)
            o = (labels == p) & (block == blk)
            if t.sum() >= MIN_CELLS and o.sum() >= MIN_CELLS:
                w = t.sum() * o.sum()
                num += w * auc_matrix(ln[t], ln[o])
                den += w
        if den == 0:
            continue
        auc = num / den
        upd = auc < min_auc
        worst[upd] = p
        min_auc = np.minimum(min_auc, auc)
    mean_t = ln[labels == target].mean(0)
    best_other = np.max(np.vstack([ln[labels == p].mean(0) for p in others]), axis=0)
    df = pd.DataFrame({"gene": genes, "min_auroc": min_auc, "hardest_population": worst, "mean_target": mean_t,
                       "max_mean_other": best_other})
    return df.sort_values(["min_auroc", "gene"], ascending=[False, True]).reset_index(drop=True)


def one_vs_rest_z(X: np.ndarray, labels: np.ndarray, target: str, normalise: bool) -> np.ndarray:
    """scanpy's rank_genes_groups(method='wilcoxon', reference='rest') score: the z-score of the target's rank sum."""
    from scipy.stats import rankdata

    Y = lognorm(X) if normalise else X
    t = labels == target
    r = rankdata(Y, axis=0)
    n1, n2 = t.sum(), (~t).sum()
    return (r[t].sum(0) - n1 * (n1 + n2 + 1) / 2) / np.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)


def one_vs_rest_top(X: np.ndarray, genes: list[str], labels: np.ndarray, target: str, normalise: bool, k: int = 10) -> list[str]:
    """What scanpy's rank_genes_groups(method='wilcoxon', reference='rest') ranks first (z-score of the rank sum)."""
    z = one_vs_rest_z(X, labels, target, normalise)
    order = np.lexsort((np.array(genes), -z))
    return [genes[i] for i in order[:k]]


def naive_significant(vs_rest: pd.DataFrame) -> list[str]:
    """scanpy defaults on the target's Wilcoxon table against the pooled rest (`cell_level_wilcoxon`: normalize_total
    + log1p, rank_genes_groups(wilcoxon, vs rest)): BH padj < 0.05, log2FC > 1."""
    hit = vs_rest[(vs_rest["padj"] < 0.05) & (vs_rest["log2fc"] > 1) & (vs_rest["z"] > 0)]
    return sorted(hit["gene"])


def shared_vs_rest(vs_rest: pd.DataFrame, markers: list[str]) -> list[str]:
    """Genes significant against the pooled rest (the same table: BH padj < 0.05, higher in the target) that are not
    markers against every population: the shared programme a one-vs-rest test calls at any fold change (LST1, AIF1,
    TYROBP in dendritic cells, higher still in CD14+ monocytes; blind study 31)."""
    hit = vs_rest[(vs_rest["padj"] < 0.05) & (vs_rest["z"] > 0) & ~vs_rest["gene"].isin(set(markers))]
    return sorted(hit["gene"])


def _bh(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (scipy's); a function of its own so the oracle's helper cell ships it."""
    from scipy.stats import false_discovery_control

    return false_discovery_control(p)


@solver("scrna.L2.markers", version="3")  # 2: strict_marker_genes; 3: shared_vs_rest_genes
def l2_markers(world_dir: Path, world) -> dict:
    d = read_world(world_dir)
    X = d["X"]
    cells = _cells_aligned(d)
    labels = cells["cell_type"].to_numpy()
    lane = cells["sample"].to_numpy() if "sample" in cells else None
    target = d["meta"]["task"]["target_population"]
    genes = d["symbols"]
    tab = marker_table(X, genes, labels, target, lane)
    top = tab[tab["mean_target"] > tab["max_mean_other"]].head(10)
    unblocked = marker_table(X, genes, labels, target, None)
    naive = one_vs_rest_top(X, genes, labels, target, normalise=True)
    naive_raw = one_vs_rest_top(X, genes, labels, target, normalise=False)
    tot = X.sum(1)
    t = labels == target
    lanes = {}
    if lane is not None:
        for s in sorted(set(lane)):
            lanes[s] = round(float((t & (lane == s)).sum() / max(t.sum(), 1)), 4)
    # lane-associated genes: log2 fold change between lanes among NON-target cells (no population confound there)
    lane_genes: list[str] = []
    if lane is not None and len(set(lane)) == 2:
        s1, s2 = sorted(set(lane))
        nt = ~t
        m1, m2 = X[nt & (lane == s1)], X[nt & (lane == s2)]
        cp1 = (m1 / m1.sum(1, keepdims=True)).mean(0) * 1e4
        cp2 = (m2 / m2.sum(1, keepdims=True)).mean(0) * 1e4
        lfc = np.log2(cp2 + 1) - np.log2(cp1 + 1)
        expressed = (cp1 + cp2) / 2 >= 5.0
        lane_genes = sorted(genes[i] for i in np.flatnonzero(expressed & (np.abs(lfc) > 1.0)))
    spec = tab[tab["mean_target"] > tab["max_mean_other"]]
    nonspecific = [g for g in naive if g not in set(spec["gene"])]
    marker_genes = spec[spec["min_auroc"] >= MARKER_MIN_AUROC]["gene"].tolist() or spec["gene"].head(1).tolist()
    # the markers that hold at the stricter bar too: a gene between the two bars (GZMA, CST7 and HOPX at 0.65-0.71
    # against CD8 T cells) is a marker at one bar and "one-vs-rest only" at the other, as blind analysts called them
    strict_markers = spec[spec["min_auroc"] >= STRICT_MIN_AUROC]["gene"].tolist()
    # the genes the world's trap promotes: in the trap ranking's 50 best but not in the reference's 50 best, plus the
    # lane-associated genes the trap ranks among its 100 best
    defect = getattr(world, "defect", None)
    trap_normalise = defect != "unnormalised_depth"
    trap_z = one_vs_rest_z(X, labels, target, normalise=trap_normalise)
    trap_order = [genes[i] for i in np.lexsort((np.array(genes), -trap_z))]
    ref_order = tab["gene"].tolist()
    core = spec["gene"].iloc[10:40].tolist()
    if defect:
        promoted = [g for g in trap_order[:50] if g not in set(ref_order[:50])]
        if defect == "lane_confound":
            promoted += [g for g in lane_genes if g in set(trap_order[:100]) and g not in promoted]
        trap_set = sorted(set(core) | set(promoted))
    else:
        promoted, trap_set = [], []
    # the per-gene table is judged over the reference's 40 best markers and the trap-promoted genes (clean control:
    # its ranks 101-110); whether it IS the trap ranking, over ranks 11-40 and the trap-promoted genes (the 10 best
    # are left out there: every ranking, the trap's included, puts them first)
    contrast = sorted(set(spec["gene"].head(40)) | set(promoted or ref_order[100:110]))
    score = dict(zip(tab["gene"], tab["min_auroc"]))
    zpos = dict(zip(genes, trap_z))
    trap = trap_order[:10] if defect else []
    vs_rest = cell_level_wilcoxon(X, genes, labels, target)  # the target against the pooled rest, as scanpy tests it
    return {
        "target_population": target,
        "marker_genes": marker_genes,
        "strict_marker_genes": strict_markers,
        "contrast_scores": {g: round(float(score[g]), 4) for g in contrast},
        "trap_contrast_scores": {g: round(float(zpos[g]), 4) for g in trap_set},
        "trap_top_markers": trap,
        "top_markers": top["gene"].tolist(),
        "core_markers": top["gene"].tolist()[:5],
        "top_min_auroc": [round(float(x), 4) for x in top["min_auroc"]],
        "hardest_population": top["hardest_population"].tolist(),
        "naive_top_markers": naive,
        "naive_unnormalised_top_markers": naive_raw,
        "naive_nonspecific": sorted(nonspecific),
        "unblocked_top_markers": unblocked[unblocked["mean_target"] > unblocked["max_mean_other"]]["gene"].head(10).tolist(),
        "target_fraction_by_lane": lanes,
        "lane_associated_genes": lane_genes,
        "naive_significant_markers": naive_significant(vs_rest),
        "shared_vs_rest_genes": shared_vs_rest(vs_rest, marker_genes),
        "median_umis_target": float(np.median(tot[t])),
        "median_umis_other": float(np.median(tot[~t])),
        "depth_ratio_target_vs_other": round(float(np.median(tot[t]) / np.median(tot[~t])), 3),
    }


# ---------------------------------------------------------------- L2 condition DE

def pseudobulk(X: np.ndarray, cells: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Sum counts per donor x compartment (myeloid / lymphoid by label; CD34+ progenitors left out)."""
    comp = np.where(cells["cell_type"].isin(MYELOID_LABELS), "myeloid",
                    np.where(cells["cell_type"] == "CD34+", "", "lymphoid"))
    keys, rows, meta = [], [], []
    for donor in sorted(set(cells["donor"])):
        for c in ("lymphoid", "myeloid"):
            m = (cells["donor"].to_numpy() == donor) & (comp == c)
            if m.sum() < 5:
                continue
            keys.append(f"{donor}_{c}")
            rows.append(X[m].sum(0))
            first = cells[m].iloc[0]
            meta.append({"donor": donor, "compartment": c, "condition": first["condition"],
                         **({"lane": first["lane"]} if "lane" in cells else {}), "n_cells": int(m.sum())})
    counts = pd.DataFrame(np.rint(np.vstack(rows)).astype(int), index=keys)
    return counts, pd.DataFrame(meta, index=keys)


def run_deseq(counts: pd.DataFrame, meta: pd.DataFrame, design: str, contrast: list[str]) -> pd.DataFrame:
    import logging
    import warnings

    from pydeseq2.dds import DeseqDataSet
    from pydeseq2.default_inference import DefaultInference
    from pydeseq2.ds import DeseqStats

    from threadpoolctl import threadpool_limits

    logging.getLogger("pydeseq2").setLevel(logging.ERROR)
    # independent filtering before the test: a gene is tested when it has >= 5 counts in at least 2 donors of every
    # condition (a signal carried by one donor, e.g. a single plasma cell's immunoglobulin, is not reproducible)
    ok = (counts.sum(0) >= 30).to_numpy()
    for _, idx in meta.groupby("condition").groups.items():
        ok &= ((counts.loc[idx] >= 5).sum(0) >= 2).to_numpy()
    keep = counts.columns[ok]
    # one BLAS thread: the per-gene fits are tiny, and thread oversubscription makes them ~4x slower
    with warnings.catch_warnings(), threadpool_limits(limits=1):
        warnings.simplefilter("ignore")
        inf = DefaultInference(n_cpus=1)
        dds = DeseqDataSet(counts=counts[keep], metadata=meta, design=design, inference=inf, quiet=True)
        dds.deseq2()
        st = DeseqStats(dds, contrast=contrast, inference=inf, quiet=True)
        st.summary()
    return st.results_df


def cell_level_wilcoxon(X: np.ndarray, genes: list[str], cond: np.ndarray, test: str) -> pd.DataFrame:
    from scipy.stats import norm, rankdata

    ln = lognorm(X)
    t = cond == test
    r = rankdata(ln, axis=0)
    n1, n2 = t.sum(), (~t).sum()
    z = (r[t].sum(0) - n1 * (n1 + n2 + 1) / 2) / np.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
    p = 2 * norm.sf(np.abs(z))
    lfc = np.log2(np.expm1(ln[t]).mean(0) + 1e-9) - np.log2(np.expm1(ln[~t]).mean(0) + 1e-9)
    return pd.DataFrame({"gene": genes, "z": z, "padj": _bh(p), "log2fc": lfc})


@solver("scrna.L2.condition_de", version="2")
def l2_condition_de(world_dir: Path, world) -> dict:
    d = read_world(world_dir)
    X = d["X"]
    genes = d["symbols"]
    cells = _cells_aligned(d)
    task = d["meta"]["task"]
    test, ref = task["test_condition"], task["reference_condition"]
    pb, pmeta = pseudobulk(X, cells)
    pb.columns = genes
    # one DESeq2 fit per compartment (each donor contributes one pseudobulk sample per fit: no pseudoreplication);
    # a lane covariate only when lane varies within a condition (otherwise it is aliased with condition)
    sig_parts, lfc_parts, designs, min_padj = [], {}, {}, {}
    for comp_name in ("lymphoid", "myeloid"):
        sel = (pmeta["compartment"] == comp_name).to_numpy()
        m = pmeta[sel]
        if m.groupby("condition").size().reindex([test, ref]).fillna(0).min() < 2:
            continue
        terms = []
        if "lane" in m and m.groupby("condition")["lane"].nunique().max() > 1:
            terms.append("lane")
        design = "~" + " + ".join(terms + ["condition"])
        designs[comp_name] = design
        res = run_deseq(pb[sel], m, design, ["condition", test, ref]).dropna(subset=["padj"])
        for g, q in zip(res.index, res["padj"]):
            min_padj[g] = min(min_padj.get(g, 1.0), float(q))
        s_ = res[(res["padj"] < 0.05) & (res["log2FoldChange"].abs() > 0.5)]
        sig_parts.append(s_.assign(compartment=comp_name))
        for g in s_.index:
            lfc_parts.setdefault(g, {})[comp_name] = round(float(s_.loc[g, "log2FoldChange"]), 4)
    sig = pd.concat(sig_parts) if sig_parts else pd.DataFrame(columns=["log2FoldChange"])
    de = sorted(set(sig.index))
    up = sorted(g for g in de if np.mean(list(lfc_parts[g].values())) > 0)
    down = sorted(g for g in de if np.mean(list(lfc_parts[g].values())) < 0)
    design = designs
    cl = cell_level_wilcoxon(X, genes, cells["condition"].to_numpy(), test)
    cl_sig = cl[(cl["padj"] < 0.05) & (cl["log2fc"].abs() > 0.25)]
    comp = cells.assign(myeloid=cells["cell_type"].isin(MYELOID_LABELS)).groupby("condition")["myeloid"].mean()
    return {
        "test_condition": test,
        "reference_condition": ref,
        "design": design,
        "n_donors": int(cells["donor"].nunique()),
        "de_genes": de,
        "n_de_genes": len(de),
        "up_genes": up,
        "down_genes": down,
        "log2fc_by_compartment": {g: lfc_parts[g] for g in de},
        "naive_cell_level_n_de": int(len(cl_sig)),
        "naive_cell_level_top": ranked_top(cl_sig, 30),
        "myeloid_fraction_by_condition": {k: round(float(v), 4) for k, v in sorted(comp.items())},
        **_de_products(X, genes, de, lfc_parts, cl, min_padj, getattr(world, "defect", None)),
    }


def ranked_top(sig: pd.DataFrame, k: int) -> list[str]:
    """The k most significant genes, ordered by -log10 padj to 3 decimals and then by name: genes whose p-values
    differ only in the last bits (kernel noise) keep one order on every machine."""
    score = np.round(-np.log10(sig["padj"].clip(lower=1e-300).to_numpy(float)), 3)
    return sig.assign(_s=score).sort_values(["_s", "gene"], ascending=[False, True])["gene"].head(k).tolist()


def _de_products(X, genes, de, lfc_parts, cl, min_padj, defect) -> dict:
    """What the per-gene table is value-checked on: the reference log2FC of every DE gene (mean over the compartments
    where it is DE), and null genes whose padj must be >= 0.05 (golden value 1.0 with abs_tol 0.95): `null_padj`,
    the genes the world's trap calls DE that the reference finds null in every compartment (padj >= 0.05 or not
    testable; on the clean control, the decoys), and `decoy_padj`, the candidate effect genes that are null here."""
    naive_sig = cl[cl["padj"] < 0.05].sort_values(["padj", "gene"])
    trap_de = sorted(naive_sig["gene"]) if defect else []
    ref_null = {g for g in genes if min_padj.get(g, 1.0) >= 0.05}
    # decoys: the genes a condition effect is drawn from (DE_CANDIDATES) that are null in this world, so a table that
    # declares another world's effect (or every candidate) significant fails, whatever the trap
    decoys = [g for g in DE_CANDIDATES if g in ref_null and g in set(genes) and g not in set(naive_sig["gene"])]
    null = sorted([g for g in naive_sig["gene"] if g in ref_null][:30]) if defect else sorted(decoys)
    return {
        "de_log2fc": {g: round(float(np.mean(list(lfc_parts[g].values()))), 4) for g in de},
        "trap_de_genes": trap_de,
        "null_padj": {g: 1.0 for g in null},
        "decoy_padj": {g: 1.0 for g in sorted(decoys)},
        "naive_de_genes": sorted(naive_sig["gene"]),
    }


# ---------------------------------------------------------------- L2 composition (differential abundance)

DA_MIN_MEAN = 5.0       # a population is tested when it has >= 5 cells per donor on average
DA_NULL_MIN_MEAN = 10.0  # the null populations a table must keep non-significant have >= 10 cells per donor
LANE_FDR = 0.01         # lane enters the model when any tested population's lane term has BH padj < 0.01


def donor_counts(cells: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Cells per donor x population, and each donor's condition and lane."""
    C = pd.crosstab(cells["donor"], cells["cell_type"]).sort_index().sort_index(axis=1)
    info = cells.drop_duplicates("donor").set_index("donor").loc[C.index, ["condition", "lane"]]
    return C, info


def lane_effect_p(K: np.ndarray, D: np.ndarray, sf: np.ndarray) -> np.ndarray:
    """P-values of the lane term (column 1 of the design D: intercept, lane, condition) per population (columns of
    the donor x population count matrix K): a Poisson GLM per population, log E[count] = D b + the donor's size factor
    (log2 `sf`, as offset), fitted by statsmodels (GLM, Poisson family, IRLS); one quasi-Poisson dispersion shared by
    all populations (Pearson chi-square summed over the populations' fits / their summed residual degrees of freedom,
    at least 1), so that the lane test does not rest on the 5 residual degrees of freedom of one population; Wald t of
    the lane coefficient (its Poisson standard error scaled by the shared dispersion) against t(pooled dof)."""
    import statsmodels.api as sm
    from scipy.stats import t as t_dist

    off = sf * np.log(2.0)
    fits = [sm.GLM(y, D, family=sm.families.Poisson(), offset=off).fit(tol=1e-10, tol_criterion="params", maxiter=100)
            for y in K.T]
    dof = sum(f.df_resid for f in fits)
    phi = max(sum(f.pearson_chi2 for f in fits) / dof, 1.0)
    tstat = np.array([f.params[1] / f.bse[1] for f in fits]) / np.sqrt(phi)
    return 2 * t_dist.sf(np.abs(tstat), dof)


def da_test(C: pd.DataFrame, info: pd.DataFrame, test: str, normalise: bool = True, lane: bool = True) -> pd.DataFrame:
    """Donor-level differential abundance. y_dk = log2(cells_dk + 0.5) less the donor's size factor: with
    `normalise`, the median over tested populations of the donor's log2 ratio to each population's geometric mean
    (DESeq2's median-of-ratios, applied to populations: most populations are assumed unchanged, so one population's
    expansion does not make the others look depleted); without it, log2 of the donor's cell total (raw proportions).
    Then per population an OLS fit y ~ [lane +] condition, t-test on the condition coefficient, BH over the tested
    populations. Lane enters when the data show a lane effect, not merely because the design allows one: where lane
    varies within a condition, the lane term of y ~ lane + condition (the within-condition lane contrast) is t-tested
    per population (lane_effect_p: quasi-Poisson, dispersion shared by the populations), BH over the tested
    populations, and lane is included for every population when any population's lane padj < LANE_FDR (0.01);
    otherwise y ~ condition. (At a 3:1 lane layout the lane column is strongly correlated with condition, so an
    unneeded lane term costs the condition coefficient much of its precision.)"""
    from scipy.stats import t as t_dist

    def ols(D, Y, j):
        beta, *_ = np.linalg.lstsq(D, Y, rcond=None)
        dof = D.shape[0] - D.shape[1]
        s2 = ((Y - D @ beta) ** 2).sum(0) / dof
        tstat = beta[j] / np.maximum(np.sqrt(s2 * np.linalg.inv(D.T @ D)[j, j]), 1e-12)
        return beta[j], 2 * t_dist.sf(np.abs(tstat), dof)

    tested = [p for p in C.columns if C[p].mean() >= DA_MIN_MEAN]
    L = np.log2(C[tested].to_numpy(float) + 0.5)
    if normalise:
        sf = np.median(L - L.mean(0, keepdims=True), axis=1)
    else:
        sf = np.log2(C.to_numpy(float).sum(1))
    Y = L - sf[:, None]
    one = np.ones(len(info))
    cond = (info["condition"] == test).to_numpy(float)
    lanes = sorted(set(info["lane"]))
    lane_padj = np.ones(len(tested))
    if lane and len(lanes) > 1 and info.groupby("condition")["lane"].nunique().max() > 1:
        lane_col = (info["lane"] == lanes[1]).to_numpy(float)
        lane_padj = _bh(lane_effect_p(C[tested].to_numpy(float), np.vstack([one, lane_col, cond]).T, sf))
    use_lane = bool((lane_padj < LANE_FDR).any())
    D = np.vstack([one, lane_col, cond] if use_lane else [one, cond]).T
    b, p = ols(D, Y, D.shape[1] - 1)
    return pd.DataFrame({"cell_type": tested, "log2fc": b, "pvalue": p, "padj": _bh(p),
                         "lane_padj": lane_padj, "lane_covariate": use_lane})


def pooled_fisher(cells: pd.DataFrame, test: str) -> pd.DataFrame:
    """The cell-level test: every cell a replicate, per population Fisher's exact test of (in population, not) x
    (test, reference condition), BH over all populations; log2fc = log2 of the ratio of pooled proportions."""
    from scipy.stats import fisher_exact

    t = (cells["condition"] == test).to_numpy()
    nt, nr = int(t.sum()), int((~t).sum())
    rows = []
    for p in sorted(set(cells["cell_type"])):
        m = (cells["cell_type"] == p).to_numpy()
        a, b = int((m & t).sum()), int((m & ~t).sum())
        pv = fisher_exact([[a, nt - a], [b, nr - b]]).pvalue
        rows.append({"cell_type": p, "log2fc": float(np.log2(((a + 0.5) / nt) / ((b + 0.5) / nr))), "pvalue": float(pv)})
    df = pd.DataFrame(rows)
    df["padj"] = _bh(df["pvalue"].to_numpy())
    return df


def _called(df: pd.DataFrame) -> list[str]:
    return sorted(df.loc[df["padj"] < 0.05, "cell_type"])


@solver("scrna.L2.composition", version="2")
def l2_composition(world_dir: Path, world) -> dict:
    cells = pd.read_csv(Path(world_dir) / "cells.csv", dtype=str, keep_default_na=False)
    meta = json.loads((Path(world_dir) / "meta.json").read_text())
    test, ref = meta["task"]["test_condition"], meta["task"]["reference_condition"]
    C, info = donor_counts(cells)
    res = da_test(C, info, test)
    changed = _called(res)
    lfc = dict(zip(res["cell_type"], res["log2fc"]))
    up = sorted(p for p in changed if lfc[p] > 0)
    down = sorted(p for p in changed if lfc[p] < 0)
    # what the traps report: cells as replicates; raw proportions (no normalisation); lane ignored
    pooled = pooled_fisher(cells, test)
    raw = da_test(C, info, test, normalise=False)
    nolane = da_test(C, info, test, lane=False)
    naive = _called(pooled)
    defect = getattr(world, "defect", None)
    big = [p for p in res["cell_type"] if C[p].mean() >= DA_NULL_MIN_MEAN]
    # null populations the per-population table must keep non-significant: those the trap calls (clean: every
    # well-sampled population the reference finds unchanged)
    if defect:
        null = [p for p in naive if p in big and p not in changed]
    else:
        null = [p for p in big if p not in changed]
    share = cells.groupby("condition")["cell_type"].value_counts(normalize=True)
    lanes = {ln: f"{int((sub == ref).sum())} {ref} + {int((sub == test).sum())} {test} donors"
             for ln, sub in info.groupby("lane")["condition"]}
    L = np.log2(C[list(res["cell_type"])].to_numpy(float) + 0.5)
    sf = np.median(L - L.mean(0, keepdims=True), axis=1)
    t_mask = (info["condition"] == test).to_numpy()
    return {
        "test_condition": test,
        "reference_condition": ref,
        "n_donors": int(len(C)),
        "n_cells": int(len(cells)),
        "tested_populations": list(res["cell_type"]),
        "changed_populations": changed,
        "n_changed": len(changed),
        "increased": up,
        "decreased": down,
        "da_log2fc": {p: round(float(v), 4) for p, v in lfc.items()},
        "da_padj": {p: round(float(v), 6) for p, v in zip(res["cell_type"], res["padj"])},
        "changed_log2fc": {p: round(float(lfc[p]), 4) for p in changed},
        "lane_covariate": bool(res["lane_covariate"].iloc[0]),
        "lane_effect_populations": sorted(res.loc[res["lane_padj"] < LANE_FDR, "cell_type"]),
        "naive_changed": naive,
        "naive_n_changed": len(naive),
        "naive_log2fc": {r.cell_type: round(float(r.log2fc), 4) for r in pooled.itertuples()},
        "trap_changed": naive if defect else [],
        "null_padj": {p: 1.0 for p in null},
        "raw_proportion_changed": _called(raw),
        "lane_ignored_changed": _called(nolane),
        "size_factor_shift": round(float(sf[t_mask].mean() - sf[~t_mask].mean()), 4),
        "share_by_condition": {c: {p: round(float(share[c].get(p, 0.0)), 4) for p in C.columns} for c in (ref, test)},
        "conditions_by_lane": lanes,
        "donors_by_condition": {c: sorted(info.index[info["condition"] == c]) for c in (ref, test)},
    }


@product_validator("scrna.da_calls")
def da_calls(path: Path, golden: dict, check) -> tuple[float, str]:
    """The significance calls of a per-population table (columns cell_type and padj): the truly changed
    populations (the generative truth, else the reference's calls) are significant AND the null populations of the
    golden mapping the check names (`null_padj`: the populations the trap calls changed; on the clean control every
    well-sampled unchanged population) are not (padj >= 0.05 for >= 80% of them; a population missing from the
    table counts against). The share of truly changed populations that must be significant is the reference's own
    share less 0.05."""
    from graders.checks import read_table

    padj, why = read_table(Path(path), "cell_type", "padj")
    if padj is None:
        return 0.0, why
    truth = (golden.get("truth") or {}).get("changed")
    ref_ch = {g.lower() for g in golden.get("changed_populations") or []}
    ch = [g.lower() for g in (truth if truth is not None else sorted(ref_ch))]
    ref_share = sum(g in ref_ch for g in ch) / len(ch) if ch else 1.0
    need = ref_share - 0.05
    null = [g.lower() for g in (golden.get(check.golden) or {}) if g.lower() not in set(ch)]  # as scrna.de_calls
    sig = sum(padj.get(g, 1.0) < 0.05 for g in ch) / len(ch) if ch else 1.0
    nul = sum(g in padj and padj[g] >= 0.05 for g in null) / len(null) if null else 1.0
    ok = sig >= need and nul >= 0.8
    return float(ok), (f"{sig:.0%} of the {len(ch)} changed populations significant (need {need:.0%}); {nul:.0%} of "
                       f"the {len(null)} {check.golden} populations not significant (need 80%)")


# ---------------------------------------------------------------- L3 dossier

@solver("scrna.L3.dossier", version="1")
def l3_dossier(world_dir: Path, world) -> dict:
    pop = pd.read_csv(Path(world_dir) / "population_expression.csv")
    auc = pd.read_csv(Path(world_dir) / "pairwise_auroc.csv")
    out: dict = {"highest_population": {}, "mean_lognorm": {}, "frac_detected": {}}
    for g, sub in pop.groupby("gene", sort=True):
        sub = sub.sort_values(["mean_lognorm", "population"], ascending=[False, True])
        out["highest_population"][g] = sub["population"].iloc[0]
        out["mean_lognorm"][g] = {r.population: round(float(r.mean_lognorm), 4) for r in sub.itertuples()}
        out["frac_detected"][g] = {r.population: round(float(r.frac_detected), 4) for r in sub.itertuples()}
    out["target"] = str(auc["target"].iloc[0])
    out["min_auroc"] = {g: round(float(s["auroc"].min()), 4) for g, s in auc.groupby("gene", sort=True)}
    out["hardest_population"] = {g: str(s.sort_values("auroc")["versus"].iloc[0]) for g, s in auc.groupby("gene", sort=True)}
    return out


# The scripted agents' cells (oracle / naive) live beside the solvers; importing them registers them.
import worlds.scrna.scripted  # noqa: E402,F401
