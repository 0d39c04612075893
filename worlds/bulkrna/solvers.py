"""Reference solvers of the bulkrna track (gold side). Every golden is computed from the world's public files.

bulkrna.L1.integrity   every integrity detector on the files: values are integer counts (else recover counts as
                       value / smallest non-zero value of the sample), gene IDs of counts.tsv match genes.tsv (else
                       strip Ensembl version suffixes), counts.tsv is complete (rows with missing fields, annotation
                       genes absent), no two sample columns are identical (groups of identical columns: the copies
                       beyond one per library), recorded sex agrees with XIST / chrY expression and recorded condition
                       with the expression profile (leave-one-out nearest centroid); samples whose rows disagree and
                       whose rows are each other's (a swap or a rotation) = swapped sheet rows; no two non-identical
                       columns differ by Poisson sampling only (pairwise median Pearson X2: one specimen re-sequenced);
                       and no sample shows
                       a 3'-bias length trend (slope of its log ratio to the gene-wise geometric mean on log2 gene
                       length). It reports the findings, their sizes and the products a careful analyst writes.
bulkrna.L2.condition_de  DESeq2 (pydeseq2, Wald, BH) with every recorded covariate that is estimable (batch when it
                       varies within condition, donor when donors carry both conditions), after removing samples whose
                       length-trend slope marks RNA degradation and libraries carrying a foreign transcript set
                       (>= 10 genes >= 32-fold above their median over samples: contamination); DE = padj < 0.05; no
                       DE list (analysis_usable false) when meta.json processing records a gene filter that named the
                       conditions (selection on the outcome). Also the naive result (~condition,
                       every sample), its DE list (the trap's own result) and the genes it calls that the reference
                       finds null.
bulkrna.L2.normalisation  size factors from the ERCC spike-ins (median of ratios over spike-ins; pydeseq2
                       control_genes) when the spike-in and endogenous size factors disagree between conditions
                       (|difference of mean log2 ratio| > 0.3), else endogenous median of ratios; DE on genes only.
bulkrna.L2.lfc_ranking  DESeq2 ~condition, apeGLM-shrunk log2 fold changes (pydeseq2 lfc_shrink); the top 20 genes by
                       |shrunk LFC| over every tested gene (no p-value filter), and the unshrunk MLE (trap) ranking.
bulkrna.L2.design      runs of one specimen summed (collapseReplicates); a recorded factor whose levels coincide with the
                       conditions makes the effect not estimable (no DE genes, estimable = false); otherwise DESeq2 with the
                       estimable design and an explicit test-over-reference contrast. Also the trap's analysis: ~condition
                       on every run, apeGLM-shrunk LFCs of the formula's one condition coefficient (its reference level is
                       the alphabetically first, so the sign is reversed when the test level sorts first).
bulkrna.L3.dossier     the dossier's lane-dispersion statistics read back from its tables (real Marioni et al. 2008
                       kidney / liver lanes), and the tissues whose technical-replicate lanes are not Poisson.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.suite.registry import product_maker, solver
from graders.registry import product_validator

SEX_Y = ("RPS4Y1", "DDX3Y", "KDM5D", "UTY", "EIF1AY", "USP9Y", "ZFY")
SLOPE_FINDING = 0.2          # |length-trend slope| (log2 ratio per log2 length) that marks a degraded sample
SHIFT_FINDING = 0.3          # spike-in vs endogenous size-factor disagreement between conditions (log2)
TOP_K = 20
CONDITION_GENES = 200     # genes that best separate the recorded conditions, for the expressed-condition check
TECHREP_RATIO = 2.0       # a pair whose median Pearson X2 (against Poisson splitting) is < 2 x the chi2(1) median is
                          # one library sequenced twice: biological replicates add the extra-Poisson dispersion
CHI2_1_MEDIAN = 0.454936  # median of chi-square with 1 df
CONTAM_LOG2 = 5.0         # a gene >= 32-fold (log2 normalised count + 1) above its median over the samples in a library
CONTAM_MIN_GENES = 10     # a library with >= 10 such genes carries a foreign transcript set (contamination)


# ---------------------------------------------------------------- reading

def read_world(world_dir) -> dict:
    """counts (genes x samples, float; incomplete rows dropped and listed), sheet, annotation, meta."""
    wd = Path(world_dir)
    lines = (wd / "counts.tsv").read_text().split("\n")
    head = lines[0].split("\t")
    rows, ids, partial = [], [], []
    for ln in lines[1:]:
        if not ln:
            continue
        f = ln.split("\t")
        if len(f) != len(head):
            partial.append(f[0])
            continue
        ids.append(f[0])
        rows.append([float(x) for x in f[1:]])
    X = pd.DataFrame(np.array(rows, dtype=float).reshape(len(rows), len(head) - 1), index=ids, columns=head[1:])
    sheet = pd.read_csv(wd / "samples.csv", dtype=str, keep_default_na=False)
    genes = pd.read_csv(wd / "genes.tsv", sep="\t", dtype={"gene_id": str, "symbol": str})
    meta = json.loads((wd / "meta.json").read_text())
    return {"X": X, "sheet": sheet, "genes": genes, "meta": meta, "partial_rows": partial,
            "ends_with_newline": (wd / "counts.tsv").read_bytes().endswith(b"\n")}


def strip_version(g: str) -> str:
    return re.sub(r"\.\d+$", "", g) if g.startswith("ENSG") else g


def size_factors(X: np.ndarray) -> np.ndarray:
    """DESeq2 median of ratios over genes positive in every sample (X: genes x samples)."""
    pos = (X > 0).all(1)
    lg = np.log(X[pos])
    return np.exp(np.median(lg - lg.mean(1, keepdims=True), axis=0))


def length_slopes(X: pd.DataFrame, length: pd.Series) -> pd.Series:
    """Per sample: slope of log2(normalised count / gene-wise geometric mean) on log2(gene length), over genes with
    a mean of >= 20 counts, against the gene-wise median sample; ~0 for intact libraries, clearly negative under 3' bias (degradation)."""
    A = X.to_numpy(float)
    keep = (A.mean(1) >= 20) & (A > 0).all(1)
    L = np.log2(length.reindex(X.index).to_numpy(float))
    keep &= np.isfinite(L)
    lg = np.log2(A[keep] / size_factors(A)[None, :])
    r = lg - np.median(lg, axis=1, keepdims=True)  # the gene-wise median: one degraded sample does not move it
    x = L[keep] - L[keep].mean()
    return pd.Series((x[:, None] * r).sum(0) / (x ** 2).sum(), index=X.columns)


def infer_sex(X: pd.DataFrame, genes: pd.DataFrame) -> pd.Series:
    """F / M from XIST and the chrY genes (counts per million over the matrix); '?' for every sample when XIST or all
    of the chrY genes are absent from the matrix (a cut file: absent genes are no evidence)."""
    sym = genes.set_index("gene_id")["symbol"].reindex(X.index)
    is_x, is_y = sym.to_numpy() == "XIST", sym.isin(SEX_Y).to_numpy()
    if not is_x.any() or not is_y.any():
        return pd.Series("?", index=X.columns)
    cpm = X / X.sum(0) * 1e6
    xist = cpm[is_x].sum(0)
    y = cpm[is_y].sum(0)
    return pd.Series(np.where(xist > y, "F", "M"), index=X.columns)


def expressed_condition(X: pd.DataFrame, sheet: pd.DataFrame, genes: pd.DataFrame) -> pd.Series | None:
    """Per sample, the recorded condition its expression resembles: leave-one-out nearest centroid. For each sample,
    the other samples' current labels give two centroids (log2 size-factor-normalised counts of autosomal genes with
    a mean of >= 20, centred per gene) over the CONDITION_GENES genes that best separate them; the sample takes the
    label of the centroid it correlates with better. Starts from the sheet and repeats until no label changes, so a
    few mislabelled samples do not carry their group along. None when the sheet has no two conditions."""
    if "condition" not in sheet:
        return None
    rec = sheet.set_index("sample")["condition"].reindex(X.columns)
    conds = sorted(rec.dropna().unique())
    if len(conds) != 2 or rec.isna().any():
        return None
    sym = genes.set_index("gene_id")["symbol"].reindex(X.index)
    auto = ~sym.isin(("XIST", *SEX_Y)).to_numpy()
    A = X.to_numpy(float)[auto]
    A = A[(A.mean(1) >= 20) & (A > 0).all(1)]
    L = np.log2(A / size_factors(A)[None, :] + 1)
    L = L - L.mean(1, keepdims=True)
    lab = rec.to_numpy().copy()
    for _ in range(20):
        new = lab.copy()
        for j in range(L.shape[1]):
            oth = np.arange(L.shape[1]) != j
            g0, g1 = oth & (lab == conds[0]), oth & (lab == conds[1])
            if g0.sum() < 1 or g1.sum() < 1:
                continue
            m0, m1 = L[:, g0].mean(1), L[:, g1].mean(1)
            top = np.argsort(-np.abs(m1 - m0))[:CONDITION_GENES]
            r0 = np.corrcoef(L[top, j], m0[top])[0, 1]
            r1 = np.corrcoef(L[top, j], m1[top])[0, 1]
            new[j] = conds[0] if r0 > r1 else conds[1]
        if (new == lab).all():
            break
        lab = new
    return pd.Series(lab, index=X.columns)


# ---------------------------------------------------------------- L1

def detect(d: dict) -> dict:
    findings: list[str] = []
    X, sheet, genes = d["X"], d["sheet"], d["genes"]
    v: dict = {"n_samples": int(X.shape[1]), "n_gene_rows": int(X.shape[0]) + len(d["partial_rows"])}

    # 1. values are counts?
    A = X.to_numpy()
    nz = A[A != 0]
    frac_int = float(np.mean(np.abs(nz - np.rint(nz)) < 1e-6)) if nz.size else 1.0
    v["fraction_non_integer_values"] = round(1 - frac_int, 4)
    if frac_int < 0.999:
        findings.append("normalized_as_counts")
        mn = np.where(A > 0, A, np.inf).min(0)
        rec = np.rint(A / mn[None, :])
        v["recovered_size_factors"] = {s: round(float(1 / m), 6) for s, m in zip(X.columns, mn)}
        v["recovered_library_sizes"] = {s: int(t) for s, t in zip(X.columns, rec.sum(0))}
        v["n_samples_affected"] = int(X.shape[1])
        X = pd.DataFrame(rec, index=X.index, columns=X.columns)

    # 2. gene IDs against the annotation
    ann = set(genes["gene_id"])
    raw_match = float(np.mean([g in ann for g in X.index])) if len(X) else 1.0
    v["fraction_ids_in_annotation"] = round(raw_match, 4)
    if raw_match < 0.9:
        stripped = [strip_version(g) for g in X.index]
        if np.mean([g in ann for g in stripped]) >= 0.99:
            findings.append("gene_id_mismatch")
            v["n_unmatched_ids"] = int(sum(g not in ann for g in X.index))
            v["unmatched_fraction"] = round(1 - raw_match, 4)
            X.index = stripped
    v["annotation_ids"] = sorted(ann)

    # 3. complete file?
    present = set(X.index)
    missing = [g for g in genes["gene_id"] if g not in present]
    v["n_missing_genes"] = len(missing)
    v["missing_fraction"] = round(len(missing) / max(len(genes), 1), 4)
    v["missing_genes"] = sorted(missing)
    if missing or d["partial_rows"] or not d["ends_with_newline"]:
        findings.append("truncated_matrix")

    # 4. duplicated sample columns (identical count vectors: one library quantified twice)
    cols = list(X.columns)
    dup_pairs = [(a, b) for i, a in enumerate(cols) for b in cols[i + 1:] if np.array_equal(X[a].to_numpy(), X[b].to_numpy())]
    groups: list[set] = []
    for a, b in dup_pairs:
        hit = [g for g in groups if a in g or b in g]
        merged = set().union(*hit) | {a, b}
        groups = [g for g in groups if g not in hit] + [merged]
    v["duplicate_pairs"] = [list(p) for p in dup_pairs]
    v["duplicate_groups"] = sorted(sorted(g) for g in groups)
    v["duplicated_samples"] = sorted({s for g in groups for s in g})
    v["n_duplicate_extra"] = sum(len(g) - 1 for g in groups)     # columns to drop (one copy of each library kept)
    v["n_in_pairs"] = len(v["duplicated_samples"])               # columns that are copies of another
    if groups:
        findings.append("duplicate_sample")

    # 4b. technical replicates: two columns that differ by Poisson sampling only (one RNA specimen sequenced twice)
    ratios = pair_poisson_ratios(X)
    same = {tuple(sorted(p)) for p in dup_pairs}
    tech = [(a, b) for (a, b), r in ratios.items() if r < TECHREP_RATIO and (a, b) not in same]
    tgroups: list[set] = []
    for a, b in tech:
        hit = [g for g in tgroups if a in g or b in g]
        merged = set().union(*hit) | {a, b}
        tgroups = [g for g in tgroups if g not in hit] + [merged]
    v["techrep_groups"] = sorted(sorted(g) for g in tgroups)
    v["techrep_samples"] = sorted({s for g in tgroups for s in g})
    v["n_techrep_samples"] = len(v["techrep_samples"])
    v["n_techrep_extra"] = sum(len(g) - 1 for g in tgroups)
    v["techrep_min_ratio"] = round(min((ratios[p] for p in tech), default=0.0), 4)
    v["bio_min_ratio"] = round(min((r for p, r in ratios.items() if p not in same and p not in set(tech)), default=0.0), 4)
    if tgroups:
        findings.append("resequenced_specimen")

    # 5. recorded sex and condition vs expression: sheet rows moved between samples (a swap or a rotation)
    inferred = infer_sex(X, genes)
    rec_sex = sheet.set_index("sample")["sex"].reindex(X.columns) if "sex" in sheet else inferred
    bad = sorted(s for s in X.columns if inferred[s] != "?" and rec_sex[s] != inferred[s])
    v["inferred_sex"] = {s: str(inferred[s]) for s in X.columns}
    v["sex_discordant_samples"] = bad
    v["n_sex_discordant"] = len(bad)
    expressed = expressed_condition(X, sheet, genes)
    rec_cond = sheet.set_index("sample")["condition"].reindex(X.columns) if "condition" in sheet else expressed
    cbad = sorted(s for s in X.columns if expressed is not None and rec_cond[s] != expressed[s])
    v["expressed_condition"] = {s: str(expressed[s]) for s in X.columns} if expressed is not None else {}
    v["condition_discordant_samples"] = cbad
    v["n_condition_discordant"] = len(cbad)
    wrong = sorted(set(bad) | set(cbad))
    swapped: list[str] = []
    if len(wrong) >= 2 and expressed is not None and "sex" in sheet and all(inferred[s] != "?" for s in wrong):
        got = sorted((str(rec_cond[s]), str(rec_sex[s])) for s in wrong)
        shown = sorted((str(expressed[s]), str(inferred[s])) for s in wrong)
        if got == shown:        # the wrong rows are each other's: they moved between these samples
            swapped = wrong
            findings.append("swapped_samples")
    v["swapped_samples"] = swapped
    v["n_swapped_samples"] = len(swapped)
    v["swapped_fraction"] = round(len(swapped) / max(int(X.shape[1]), 1), 4)
    if swapped:
        corrected = restore_sheet(sheet, swapped, {s: (str(expressed[s]), str(inferred[s])) for s in swapped})
        v["corrected_condition"] = dict(zip(corrected["sample"], corrected["condition"]))
        v["corrected_sex"] = dict(zip(corrected["sample"], corrected["sex"]))

    # 6. degradation (3' bias): length trend of one sample's ratios
    slopes = length_slopes(X, genes.set_index("gene_id")["length"])
    v["length_slopes"] = {s: round(float(x), 4) for s, x in slopes.items()}
    deg = sorted(s for s, x in slopes.items() if abs(x) > SLOPE_FINDING)
    v["degraded_samples"] = deg
    v["n_degraded"] = len(deg)
    v["degraded_slope"] = round(float(slopes[deg[0]]), 4) if deg else 0.0
    if deg:
        findings.append("degraded_sample")
    lib = X.sum(0)
    v["library_sizes"] = {s: int(t) for s, t in lib.items()}
    v["min_library_ratio"] = round(float(lib.min() / lib.median()), 4)
    v["median_library_size"] = int(lib.median())
    v["n_samples_kept"] = int(X.shape[1]) - len(deg) - v["n_duplicate_extra"] - v["n_techrep_extra"]
    v["n_specimens"] = int(X.shape[1]) - v["n_duplicate_extra"] - v["n_techrep_extra"]
    return {"findings": sorted(findings), **v}


def pair_poisson_ratios(X: pd.DataFrame, min_total: float = 100.0) -> dict:
    """Per pair of sample columns (a, b), a < b: over the genes with >= min_total reads in the pair, the median of the
    Pearson statistic X2 = sum over the two samples (y - s t)^2 / (s t) (t the pair's reads of the gene, s the sample's
    share of the pair's library total) divided by the chi-square(1) median: ~1 when the two columns differ by Poisson
    sampling only (technical replicates of one library), 1 + alpha mu / 2-ish and more between biological replicates."""
    A = X.to_numpy(float)
    lib = A.sum(0)
    cols = list(X.columns)
    out = {}
    for i in range(len(cols)):
        for j in range(i + 1, len(cols)):
            t = A[:, i] + A[:, j]
            k = t >= min_total
            if not k.any():
                continue
            s = lib[i] / (lib[i] + lib[j])
            e1, e2 = s * t[k], (1 - s) * t[k]
            x2 = (A[k, i] - e1) ** 2 / e1 + (A[k, j] - e2) ** 2 / e2
            a, b = sorted((cols[i], cols[j]))
            out[(a, b)] = float(np.median(x2)) / CHI2_1_MEDIAN
    return out


def restore_sheet(sheet: pd.DataFrame, swapped: list, shown: dict) -> pd.DataFrame:
    """The sheet with the rows of the swapped samples given back: each takes the row (of those the swapped samples
    carry) whose condition and sex its expression shows."""
    out = sheet.copy()
    c = [k for k in out.columns if k != "sample"]
    idx = {s: out.index[out["sample"] == s][0] for s in swapped}
    rows = {s: out.loc[idx[s], c].to_numpy().copy() for s in swapped}
    free = list(swapped)
    for s in swapped:
        src = next(t for t in free if (str(rows[t][c.index("condition")]), str(rows[t][c.index("sex")])) == shown[s])
        free.remove(src)
        out.loc[idx[s], c] = rows[src]
    return out


@solver("bulkrna.L1.integrity", version="4")
def l1_integrity(world_dir: Path, world) -> dict:
    return detect(read_world(world_dir))


# ---------------------------------------------------------------- product validators

def _read_any(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, sep=None, engine="python", dtype=str)


@product_validator("bulkrna.recovered_counts")
def recovered_counts(path: Path, golden: dict, check) -> tuple[float, str]:
    """A recovered count matrix (gene_id then one column per sample, integers): one row per gene of the original
    (>= 99% of its rows, so a totals-only table is no matrix) and per-sample totals within 2% of the reference
    recovery for every sample. Or, the usual remedy, the raw counts requested from the provider: the list of the
    samples whose raw counts must be re-delivered, one a line (every sample: every column was normalised)."""
    want = golden.get("recovered_library_sizes") or {}
    lines = [ln.strip() for ln in Path(path).read_text(errors="replace").splitlines() if ln.strip() and not ln.startswith("#")]
    items = {ln.split(",")[0].split("\t")[0].strip() for ln in lines}
    if want and len(lines) <= len(want) + 1 and items - {"sample"} <= set(want):
        got = items - {"sample"}
        return float(got == set(want)), (f"raw counts requested for {len(got)} of the {len(want)} samples (all are "
                                         "normalised: request every one)")
    try:
        tab = _read_any(path)
        num = tab.iloc[:, 1:].apply(pd.to_numeric, errors="coerce")
    except Exception as exc:  # noqa: BLE001
        return 0.0, f"unreadable table ({exc})"
    miss = [s for s in want if s not in num.columns]
    if miss:
        return 0.0, f"sample columns missing: {miss[:5]}"
    n_ok = len(tab) >= 0.99 * int(golden.get("n_gene_rows", 0))
    vals = num[list(want)].to_numpy(float)
    integer = float(np.nanmean(np.abs(vals - np.rint(vals)) < 1e-6))
    share = float(np.mean([abs(np.nansum(num[s]) - t) <= 0.02 * t for s, t in want.items()]))
    return float(integer >= 0.99 and share >= 0.999 and n_ok), (
        f"{len(tab)} rows (need 99% of {golden.get('n_gene_rows')}); {integer:.1%} integer values; "
        f"{share:.0%} of samples with totals within 2%")


@product_validator("bulkrna.matched_ids")
def matched_ids(path: Path, golden: dict, check) -> tuple[float, str]:
    """A corrected count table: first column gene IDs found in genes.tsv (>= 99% of rows, and as many rows as the
    original) AND every sample's count column kept (per-sample totals within 0.5% of the original library sizes), so
    a copy of genes.tsv or an ID list alone is no corrected matrix."""
    ann = set(golden.get("annotation_ids") or [])
    libs = golden.get("library_sizes") or {}
    try:
        tab = _read_any(path)
        num = tab.iloc[:, 1:].apply(pd.to_numeric, errors="coerce")
    except Exception as exc:  # noqa: BLE001
        return 0.0, f"unreadable table ({exc})"
    ids = tab.iloc[:, 0].astype(str).tolist()
    share = float(np.mean([g in ann for g in ids])) if ids else 0.0
    n_ok = len(ids) >= 0.99 * int(golden.get("n_gene_rows", 0))
    miss = [s for s in libs if s not in num.columns]
    tot_ok = not miss and all(abs(float(np.nansum(num[s])) - t) <= 0.005 * t for s, t in libs.items())
    why = (f"{share:.1%} of {len(ids)} row IDs in the annotation (need 99% of {golden.get('n_gene_rows')}); "
           + (f"sample columns missing: {miss[:5]}" if miss else f"sample totals {'match' if tot_ok else 'differ from'} the original counts"))
    return float(share >= 0.99 and n_ok and tot_ok), why


@product_validator("bulkrna.corrected_sheet")
def corrected_sheet(path: Path, golden: dict, check) -> tuple[float, str]:
    """Either a corrected sample sheet (sample and condition columns: every sample carries the condition its
    expression shows) or the list of the swapped samples, one a line (all of them, nothing else)."""
    want = golden.get("corrected_condition") or {}
    swapped = set(golden.get("swapped_samples") or [])
    try:
        tab = _read_any(path)
        cols = [c.strip().lower() for c in tab.columns]
    except Exception:  # noqa: BLE001
        cols = []
    if "sample" in cols and "condition" in cols:
        tab.columns = cols
        got = dict(zip(tab["sample"], tab["condition"]))
        ok = float(np.mean([got.get(s) == c for s, c in want.items()])) if want else 0.0
        return float(ok == 1.0), f"corrected sheet: {ok:.0%} of samples carry their expressed condition (need all)"
    items = {ln.strip().split(",")[0] for ln in Path(path).read_text().splitlines() if ln.strip() and not ln.startswith("#")}
    items &= set(want) | swapped | {"sample"}
    items.discard("sample")
    return float(items == swapped), f"listed {sorted(items)}; swapped {sorted(swapped)}"


# ---------------------------------------------------------------- L2 helpers

def run_deseq(counts: pd.DataFrame, sheet: pd.DataFrame, design: str, contrast: list[str],
              control_genes: list[str] | None = None, shrink: bool = False) -> pd.DataFrame:
    """pydeseq2 with defaults (Cook's refit, independent filtering), one BLAS thread; counts: samples x genes.
    control_genes: size factors from these columns only. shrink: add an apeGLM-shrunk LFC column."""
    import logging
    import warnings

    from pydeseq2.dds import DeseqDataSet
    from pydeseq2.default_inference import DefaultInference
    from pydeseq2.ds import DeseqStats
    from threadpoolctl import threadpool_limits

    logging.getLogger("pydeseq2").setLevel(logging.ERROR)
    meta = sheet.set_index("sample").loc[counts.index]
    with warnings.catch_warnings(), threadpool_limits(limits=1):
        warnings.simplefilter("ignore")
        inf = DefaultInference(n_cpus=1)
        dds = DeseqDataSet(counts=counts.astype(int), metadata=meta, design=design, inference=inf, quiet=True,
                           control_genes=control_genes)
        dds.deseq2()
        st = DeseqStats(dds, contrast=contrast, inference=inf, quiet=True)
        st.summary()
        res = st.results_df.copy()
        if shrink:
            coeff = [c for c in st.LFC.columns if c.startswith(f"{contrast[0]}[")][0]
            st.lfc_shrink(coeff=coeff)
            sign = 1.0 if coeff.endswith(f"T.{contrast[1]}]") else -1.0
            res["shrunk_lfc"] = sign * st.results_df["log2FoldChange"]
    return res


def estimable_design(sheet: pd.DataFrame) -> str:
    terms = []
    by = sheet.groupby("condition")
    if "batch" in sheet and by["batch"].nunique().max() > 1 and sheet["batch"].nunique() > 1:
        terms.append("batch")
    if "donor" in sheet and (sheet.groupby("donor")["condition"].nunique() > 1).any():
        terms.append("donor")
    return "~" + " + ".join(terms + ["condition"])


def contamination_scan(X: pd.DataFrame) -> dict:
    """Sample QC for a foreign transcript set: log2(size-factor-normalised count + 1) of every gene, minus its median
    over the samples; a library with >= CONTAM_MIN_GENES genes >= CONTAM_LOG2 above their median carries transcripts
    the other libraries barely have (blood or a neighbouring tissue in the dissection). The signature is the genes
    that high in any such library; each library's share of its reads in the signature is the contamination score."""
    A = X.to_numpy(float)
    L = np.log2(A / size_factors(A)[None, :] + 1.0)
    hi = (L - np.median(L, axis=1, keepdims=True)) >= CONTAM_LOG2
    n_hi = hi.sum(0)
    flagged = sorted(str(c) for c, n in zip(X.columns, n_hi) if n >= CONTAM_MIN_GENES)
    fl = X.columns.isin(flagged)
    sig = sorted(X.index[hi[:, fl].any(1)]) if fl.any() else []
    share = X.loc[sig].sum(0) / X.sum(0) if sig else pd.Series(0.0, index=X.columns)
    return {"contaminated": flagged, "signature": sig, "n_high_genes": {str(c): int(n) for c, n in zip(X.columns, n_hi)},
            "share": {str(c): round(float(v), 4) for c, v in share.items()}}


def outcome_filter_scan(meta: dict, test: str, ref: str) -> dict:
    """Was the matrix selected on the outcome before testing? meta.json `processing` states the matrix's history, step
    by step, in every world of the family: a step that keeps or removes genes by a criterion naming the conditions
    (a test / reference ratio or fold change) used the labels the test compares (a non-independent filter, Bourgon et
    al. 2010); a filter on reads over all libraries is blind to them."""
    steps = [str(p) for p in meta.get("processing") or []]
    conds = [re.escape(c) for c in (test, ref)]
    hit = [p for p in steps if re.search(r"(?i)\b(kept|keep|removed|filter\w*|selected)\b", p)
           and any(re.search(rf"(?i)\b{c}\b", p) for c in conds)]
    return {"outcome_filter_steps": hit, "outcome_filtered": bool(hit)}


def load_l2(world_dir) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict]:
    d = read_world(world_dir)
    return d["X"], d["sheet"], d["genes"], d["meta"]


def _bool_padj(res: pd.DataFrame) -> pd.Series:
    return res["padj"].fillna(1.0)


def _table_golden(res: pd.DataFrame, de: list[str]) -> dict:
    return {g: round(float(res.loc[g, "log2FoldChange"]), 4) for g in de}


def naive_result(X: pd.DataFrame, sheet: pd.DataFrame, test: str, ref: str) -> pd.DataFrame:
    return run_deseq(X.T, sheet, "~condition", ["condition", test, ref])


# ---------------------------------------------------------------- L2 condition DE

@solver("bulkrna.L2.condition_de", version="2")
def l2_condition_de(world_dir: Path, world) -> dict:
    X, sheet, genes, meta = load_l2(world_dir)
    test, ref = meta["task"]["test_condition"], meta["task"]["reference_condition"]
    slopes = length_slopes(X, genes.set_index("gene_id")["length"])
    contam = contamination_scan(X)
    dropped = sorted({s for s, x in slopes.items() if abs(x) > SLOPE_FINDING} | set(contam["contaminated"]))
    keep = [s for s in X.columns if s not in dropped]
    sh = sheet[sheet["sample"].isin(keep)]
    design = estimable_design(sh)
    res = run_deseq(X[keep].T, sh, design, ["condition", test, ref])
    padj = _bool_padj(res)
    de = sorted(res.index[padj < 0.05])
    nv = naive_result(X, sheet, test, ref)
    npadj = _bool_padj(nv)
    naive_de = sorted(nv.index[npadj < 0.05])
    defect = getattr(world, "defect", None)
    null = sorted(g for g in naive_de if padj.get(g, 1.0) >= 0.05)
    extra: dict = {}
    if contam["contaminated"]:
        extra = {"contaminated_samples": contam["contaminated"], "n_contaminated": len(contam["contaminated"]),
                 "contaminant_genes": contam["signature"], "n_contaminant_genes": len(contam["signature"]),
                 "contaminant_share": {s: contam["share"][s] for s in contam["contaminated"]},
                 "naive_contaminant_calls": len(set(naive_de) & set(contam["signature"]))}
    filt = outcome_filter_scan(meta, test, ref)
    if filt["outcome_filtered"]:  # selected on the outcome: no test on this matrix controls the FDR
        extra = {"outcome_filtered": True, "outcome_filter_steps": filt["outcome_filter_steps"], "analysis_usable": False,
                 "processing": list(meta.get("processing") or [])}
        de = []
    out = {
        "test_condition": test, "reference_condition": ref, "design": design, "samples_dropped": dropped,
        "length_slopes": {s: round(float(x), 4) for s, x in slopes.items()},
        "de_genes": de, "n_de_genes": len(de),
        "up_genes": sorted(g for g in de if res.loc[g, "log2FoldChange"] > 0),
        "down_genes": sorted(g for g in de if res.loc[g, "log2FoldChange"] < 0),
        "de_log2fc": _table_golden(res, de),
        "naive_de_genes": naive_de, "naive_n_de": len(naive_de),
        "trap_de_genes": naive_de if defect else [],
        "null_padj": {g: 1.0 for g in null[:200]} if defect else {},
        "median_log2fc": round(float(res.loc[res["baseMean"] >= 20, "log2FoldChange"].median()), 4),
        "n_naive_false": len(null),
        "n_samples": int(X.shape[1]),
        "batch_by_condition": ({c: sorted(s["batch"]) for c, s in sheet.groupby("condition")} if "batch" in sheet else {}),
    }
    out.update(extra)
    return out


@product_validator("bulkrna.de_calls")
def de_calls(path: Path, golden: dict, check) -> tuple[float, str]:
    """The calls of a per-gene table (gene, padj): >= 70% of the reference DE genes significant AND >= 80% of the
    genes in the check's golden mapping (genes the trap calls DE that the reference finds null) not significant AND
    >= 70% of the table's significant genes reference DE genes (precision: a table calling every gene significant
    earns nothing where the trap's own list is empty, as on a clean control or when ~condition finds nothing)."""
    from graders.checks import read_table

    padj, why = read_table(Path(path), "gene", "padj")
    if padj is None:
        return 0.0, why
    de = [g.lower() for g in golden.get("de_genes") or []]
    null = [g.lower() for g in (golden.get(check.golden) or {})]
    sig = sum(padj.get(g, 1.0) < 0.05 for g in de) / len(de) if de else 1.0
    nul = sum(g in padj and padj[g] >= 0.05 for g in null) / len(null) if null else 1.0
    called = [g for g, p in padj.items() if p < 0.05]
    prec = len(set(called) & set(de)) / len(called) if called else (1.0 if not de else 0.0)
    return float(sig >= 0.7 and nul >= 0.8 and prec >= 0.7), (
        f"{sig:.0%} of {len(de)} reference DE genes significant (need 70%); {nul:.0%} of {len(null)} {check.golden} "
        f"genes not (need 80%); {prec:.0%} of the table's {len(called)} significant genes are reference DE genes (need 70%)")


def _recall_precision(called: set, truth: set) -> tuple[float, float]:
    tp = len(called & truth)
    return (tp / len(truth) if truth else 1.0), (tp / len(called) if called else (1.0 if not truth else 0.0))


@product_validator("bulkrna.de_calls_truth")
def de_calls_truth(path: Path, golden: dict, check) -> tuple[float, str]:
    """The calls of a per-gene table (gene, padj < 0.05) against the simulation's truth (golden['truth']['de_genes'],
    the genes the condition truly changes), with the reference solver's own calls as the bar: recall >= min(0.7,
    the reference's recall - bar_slack), precision >= min(0.8, the reference's precision - bar_slack), and of the
    truly unchanged genes the trap's analysis calls (golden trap_de_genes outside the truth; none on a clean control)
    >= min(0.8, the reference's share - bar_slack) not significant (a gene absent from the table, e.g. removed by a
    low-count filter, is not called). Any analysis as good as the reference passes,
    whatever its tool; the trap's own calls (batch genes, lost power) do not."""
    from graders.checks import read_table

    padj, why = read_table(Path(path), "gene", "padj")
    if padj is None:
        return 0.0, why
    truth = {g.lower() for g in (golden.get("truth") or {}).get("de_genes") or []}
    if not truth:
        return 0.0, "golden has no truth.de_genes (rubric/golden mismatch)"
    ref = {g.lower() for g in golden.get("de_genes") or []}
    null = {g.lower() for g in golden.get("trap_de_genes") or []} - truth
    called = {g for g, p in padj.items() if p < 0.05}
    slack = check.bar_slack
    rec, prec = _recall_precision(called, truth)
    r_rec, r_prec = _recall_precision(ref, truth)
    nul = sum(padj.get(g, 1.0) >= 0.05 for g in null) / len(null) if null else 1.0  # a gene left untested is not called
    r_nul = len(null - ref) / len(null) if null else 1.0
    need = (min(0.7, r_rec - slack), min(0.8, r_prec - slack), min(0.8, r_nul - slack))
    ok = rec >= need[0] - 1e-12 and prec >= need[1] - 1e-12 and nul >= need[2] - 1e-12
    return float(ok), (f"recall {rec:.2f} of {len(truth)} truly DE genes (need {need[0]:.2f}; reference {r_rec:.2f}); "
                       f"precision {prec:.2f} of {len(called)} calls (need {need[1]:.2f}; reference {r_prec:.2f}); "
                       f"{nul:.0%} of {len(null)} truly unchanged genes the trap calls not significant "
                       f"(need {need[2]:.0%}; reference {r_nul:.0%})")


# ---------------------------------------------------------------- L2 design

NUISANCE = ("batch", "donor", "sex")    # recorded sheet factors that may be aliased with condition


def collapse_technical(X: pd.DataFrame, sheet: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, list]:
    """DESeq2's collapseReplicates: the runs of one specimen (sheet column `specimen`) summed into one sample named after
    the specimen; the sheet keeps one row per specimen (its annotations must agree over its runs). Returns the
    collapsed counts, sheet and the groups of runs collapsed (specimens with more than one run)."""
    if "specimen" not in sheet or sheet["specimen"].nunique() == len(sheet):
        return X, sheet, []
    sh = sheet.set_index("sample").loc[X.columns]
    groups = sorted(sorted(g.index) for _, g in sh.groupby("specimen") if len(g) > 1)
    C = X.T.groupby(sh["specimen"].to_numpy()).sum().T
    cols = [c for c in sheet.columns if c not in ("sample", "specimen", "index")]
    one = sh.groupby("specimen")[cols].first()
    one = one.reset_index().rename(columns={"specimen": "sample"})
    return C[sorted(C.columns)], one.sort_values("sample").reset_index(drop=True), groups


def aliased_factors(sheet: pd.DataFrame) -> list[str]:
    """Recorded factors whose levels coincide with the condition's (each level in one condition only and each condition
    in one level only): their effect and the condition's are the same column of the design, not estimable apart."""
    out = []
    for c in NUISANCE:
        if c in sheet and sheet[c].nunique() > 1:
            if sheet.groupby(c)["condition"].nunique().max() == 1 and sheet.groupby("condition")[c].nunique().max() == 1:
                out.append(c)
    return out


def default_coefficient_sign(levels: list[str], test: str) -> float:
    """The sign of the one condition coefficient a formula design (~condition, reference = the alphabetically first
    level, as R and formulaic choose it) gives for the test-over-reference contrast: +1 when the test level sorts
    after the reference, -1 when the test level is the reference (the coefficient is reference over test)."""
    return 1.0 if sorted(levels)[0] != test else -1.0


@solver("bulkrna.L2.design", version="1")
def l2_design(world_dir: Path, world) -> dict:
    X, sheet, genes, meta = load_l2(world_dir)
    test, ref = meta["task"]["test_condition"], meta["task"]["reference_condition"]
    C, sh, groups = collapse_technical(X, sheet)
    aliased = aliased_factors(sh)
    out = {"test_condition": test, "reference_condition": ref, "n_samples": int(X.shape[1]),
           "n_specimens": int(C.shape[1]), "technical_groups": groups, "n_technical_groups": len(groups),
           "aliased": aliased, "estimable": not aliased,
           "default_reference": sorted(sheet["condition"].unique())[0],
           "sign_flip_by_default": default_coefficient_sign(list(sheet["condition"].unique()), test) < 0,
           "batch_by_condition": ({c: sorted(s["batch"]) for c, s in sheet.groupby("condition")} if "batch" in sheet else {})}
    # the trap's analysis: ~condition on every column, the shrunk LFCs of the design's one condition coefficient
    nv = run_deseq(X.T, sheet, "~condition", ["condition", test, ref], shrink=True)
    sign = default_coefficient_sign(list(sheet["condition"].unique()), test)
    nlfc = sign * nv["shrunk_lfc"]          # the coefficient as the table reports it (sign undone by run_deseq)
    npadj = _bool_padj(nv)
    naive_de = sorted(nv.index[npadj < 0.05])
    out.update({"naive_de_genes": naive_de, "naive_n_de": len(naive_de),
                "naive_up_genes": sorted(g for g in naive_de if nlfc[g] > 0)})
    out["naive_n_up"] = len(out["naive_up_genes"])
    defect = getattr(world, "defect", None)
    if aliased:
        out.update({"design": "not estimable (condition aliased with " + ", ".join(aliased) + ")", "de_genes": [],
                    "n_de_genes": 0, "up_genes": [], "n_up": 0, "down_genes": [], "de_log2fc": {}, "median_log2fc": 0.0,
                    "trap_de_genes": naive_de, "trap_up_genes": [], "null_padj": {}, "n_naive_false": len(naive_de)})
        return out
    design = estimable_design(sh)
    if groups or design != "~condition":
        res = run_deseq(C.T, sh, design, ["condition", test, ref])
    else:
        res = nv
    padj = _bool_padj(res)
    de = sorted(res.index[padj < 0.05])
    lfc = res["log2FoldChange"]
    up = sorted(g for g in de if lfc[g] > 0)
    null = sorted(g for g in naive_de if padj.get(g, 1.0) >= 0.05)
    out.update({"design": design, "de_genes": de, "n_de_genes": len(de), "up_genes": up, "n_up": len(up),
                "down_genes": sorted(g for g in de if lfc[g] < 0), "de_log2fc": _table_golden(res, de),
                "median_log2fc": round(float(lfc[res["baseMean"] >= 20].median()), 4),
                "trap_de_genes": naive_de if defect == "technical_replicates" else [],
                "trap_up_genes": out["naive_up_genes"] if defect == "reference_level" else [],
                "null_padj": {g: 1.0 for g in null[:200]} if defect == "technical_replicates" else {},
                "n_naive_false": len(null)})
    return out


# ---------------------------------------------------------------- L2 normalisation

def spike_decision(X: pd.DataFrame, sheet: pd.DataFrame, genes: pd.DataFrame, test: str, ref: str) -> dict:
    spikes = genes.loc[genes.get("type", pd.Series("gene", index=genes.index)) == "spike_in", "gene_id"].tolist()
    endo = [g for g in X.index if g not in set(spikes)]
    sf_e = size_factors(X.loc[endo].to_numpy(float))
    sf_s = size_factors(X.loc[spikes].to_numpy(float)) if spikes else sf_e
    r = pd.Series(np.log2(sf_e / sf_s), index=X.columns)
    cond = sheet.set_index("sample")["condition"].reindex(X.columns)
    diff = float(r[cond == test].mean() - r[cond == ref].mean())
    return {"spikes": spikes, "endo": endo, "log2_sf_ratio_diff": round(diff, 4), "use_spikes": abs(diff) > SHIFT_FINDING}


@solver("bulkrna.L2.normalisation", version="1")
def l2_normalisation(world_dir: Path, world) -> dict:
    X, sheet, genes, meta = load_l2(world_dir)
    test, ref = meta["task"]["test_condition"], meta["task"]["reference_condition"]
    dec = spike_decision(X, sheet, genes, test, ref)
    res = run_deseq(X.T, sheet, "~condition", ["condition", test, ref],
                    control_genes=dec["spikes"] if dec["use_spikes"] else None)
    res = res.loc[dec["endo"]]
    padj = _bool_padj(res)
    de = sorted(res.index[padj < 0.05])
    nv = naive_result(X, sheet, test, ref)
    naive_de = sorted(nv.index[_bool_padj(nv) < 0.05])
    defect = getattr(world, "defect", None)
    lfc = res["log2FoldChange"]
    expressed = res.index[res["baseMean"] >= 20]
    return {
        "test_condition": test, "reference_condition": ref, "normalisation": "spike-in" if dec["use_spikes"] else "median-of-ratios",
        "log2_sf_ratio_diff": dec["log2_sf_ratio_diff"], "n_spikes": len(dec["spikes"]),
        "de_genes": de, "n_de_genes": len(de),
        "n_up": int((lfc[de] > 0).sum()), "n_down": int((lfc[de] < 0).sum()),
        "fraction_up": round(float((lfc[de] > 0).mean()) if de else 0.0, 4),
        "median_log2fc": round(float(lfc[expressed].median()), 4),
        "de_log2fc": _table_golden(res, de),
        "null_padj": ({g: 1.0 for g in sorted(g for g in naive_de if g in padj.index and padj[g] >= 0.05)[:200]}
                      if defect else {}),
        "naive_de_genes": naive_de, "naive_n_de": len(naive_de),
        "naive_median_log2fc": round(float(nv.loc[expressed, "log2FoldChange"].median()), 4),
        "trap_de_genes": naive_de if defect else [],
    }


# ---------------------------------------------------------------- L2 LFC ranking

def rank_by_abs(lfc: pd.Series) -> list[str]:
    """Genes by |value| to 3 decimals, then by id: MLE fold changes of genes with a handful of reads pile up near
    the optimiser's bound and differ only in kernel noise, so their order must not come from the last bits."""
    return (pd.DataFrame({"a": np.round(lfc.abs().to_numpy(float), 3), "g": lfc.index})
            .sort_values(["a", "g"], ascending=[False, True])["g"].tolist())

@solver("bulkrna.L2.lfc_ranking", version="4")
def l2_lfc_ranking(world_dir: Path, world) -> dict:
    X, sheet, genes, meta = load_l2(world_dir)
    test, ref = meta["task"]["test_condition"], meta["task"]["reference_condition"]
    res = run_deseq(X.T, sheet, "~condition", ["condition", test, ref], shrink=True)
    padj = _bool_padj(res)
    sig = res.dropna(subset=["log2FoldChange"])  # every tested gene: shrunk LFCs rank without a p-value filter
    top = rank_by_abs(sig["shrunk_lfc"])[:TOP_K]
    raw_top = rank_by_abs(sig["log2FoldChange"])[:TOP_K]
    defect = getattr(world, "defect", None)
    base = res["baseMean"]
    return {
        "test_condition": test, "reference_condition": ref, "n_de_genes": int((padj < 0.05).sum()),
        "top_genes": sorted(top), "top_genes_ranked": top,
        # the shrunk top only: an analysis that filters low-count genes out of its table instead of shrinking them
        # is not faulted for their absence (the noisy genes are judged by `top` and the zero_if on trap_top_genes)
        "shrunk_table": {g: round(float(res.loc[g, "shrunk_lfc"]), 4) for g in top},
        "lfc_table": {g: round(float(res.loc[g, "shrunk_lfc"]), 4)
                      for g in sorted(set(res.index[res["baseMean"] >= 10]) | set(top) | set(raw_top))},
        # every tested gene's shrunk estimate: the reference's own answer when the table is scored against the truth
        "lfc_all": {g: round(float(x), 3) for g, x in sig["shrunk_lfc"].items()},
        "naive_top_genes": sorted(raw_top),
        "trap_top_genes": sorted(raw_top) if defect else [],
        "naive_top_median_basemean": round(float(base[raw_top].median()), 2) if raw_top else 0.0,
        "top_median_basemean": round(float(base[top].median()), 2) if top else 0.0,
        "n_trap_only": len(set(raw_top) - set(top)),
    }


# ---------------------------------------------------------------- L3 dossier

@solver("bulkrna.L3.dossier", version="1")
def l3_dossier(world_dir: Path, world) -> dict:
    """Read back the dossier's statistics and decide, per tissue, whether its technical-replicate lanes are
    Poisson: overdispersed when the fraction of genes with p < 0.05 exceeds 3x the nominal 5% or the median X2/df
    exceeds 1.5x its Poisson value (all lanes of the tissue)."""
    wd = Path(world_dir)
    lanes = pd.read_csv(wd / "lanes.csv")
    disp = pd.read_csv(wd / "lane_dispersion.csv")
    bins = pd.read_csv(wd / "dispersion_by_mean.csv")
    con = pd.read_csv(wd / "tissue_contrast.csv").set_index("statistic")["value"]
    out: dict = {"lane_totals": {r.lane: int(r.total_counts) for r in lanes.itertuples()}}
    over = []
    for r in disp.to_dict("records"):
        key = f"{r['tissue']}_{r['lanes_used'].replace(' ', '')}"
        out[key] = {"n_lanes": int(r["n_lanes"]), "n_genes_tested": int(r["n_genes_tested"]),
                    "frac_p_below_0.05": float(r["frac_p_below_0.05"]), "median_chi2_per_df": float(r["median_chi2_per_df"]),
                    "poisson_median_chi2_per_df": float(r["poisson_median_chi2_per_df"]),
                    "median_dispersion_mean_ge_100": float(r["median_dispersion_mean_ge_100"]),
                    "loglog_slope": float(r["loglog_slope_var_on_mean"])}
        if r["lanes_used"] == "all" and (r["frac_p_below_0.05"] > 0.15
                                         or r["median_chi2_per_df"] > 1.5 * r["poisson_median_chi2_per_df"]):
            over.append(r["tissue"])
    out["overdispersed_tissues"] = sorted(over)
    out["median_dispersion_by_bin"] = {f"{r.tissue} {r.mean_count_bin}": float(r.median_dispersion) for r in bins.itertuples()}
    out["contrast"] = {k.split(" ")[0]: (float(v) if k.startswith("fraction") or not float(v).is_integer() else int(v))
                       for k, v in con.items()}
    return out



# ---------------------------------------------------------------- product makers (hand-written reports' products)

@product_maker("bulkrna.strip_versions")
def make_stripped(src: Path, dest: Path) -> None:
    """counts.tsv with Ensembl version suffixes removed from the gene IDs (the gene_id_mismatch correction)."""
    lines = Path(src).read_text().splitlines(keepends=True)
    Path(dest).write_text(lines[0] + "".join(strip_version(ln.split("\t", 1)[0]) + "\t" + ln.split("\t", 1)[1] for ln in lines[1:]))


@product_maker("bulkrna.recover_counts")
def make_recovered(src: Path, dest: Path) -> None:
    """Integer counts recovered from normalised values: value / smallest non-zero value of the sample, rounded."""
    X = pd.read_csv(src, sep="\t", index_col=0)
    A = X.to_numpy(float)
    mn = np.where(A > 0, A, np.inf).min(0)
    pd.DataFrame(np.rint(A / mn[None, :]).astype(int), index=X.index, columns=X.columns).rename_axis("gene_id") \
        .reset_index().to_csv(dest, sep="\t", index=False)


import worlds.bulkrna.scripted  # noqa: E402,F401
