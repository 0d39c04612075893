"""scrna: sound analyses other than the reference solver's (pydeseq2 on donor x compartment pseudobulk for condition
DE; minimum lane-blocked pairwise AUROC for markers).

Written from the prompt and the public files only (10x matrix, cells.csv, meta.json); the helpers below read the
files themselves and share no code with worlds/scrna/solvers.py.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.io import mmread
from scipy.special import digamma, polygamma
from scipy.stats import t as t_dist

from tests.alternatives import alternative

MYELOID = {"CD14+ Monocyte", "Dendritic"}     # the myeloid compartment of a PBMC sample (monocytes, DCs)


def _load(world_dir: Path):
    mtx = world_dir / "filtered_feature_bc_matrix"
    with gzip.open(mtx / "matrix.mtx.gz") as fh:
        X = sparse.csr_matrix(mmread(fh)).T.tocsr().astype(float)        # cells x genes
    with gzip.open(mtx / "barcodes.tsv.gz", "rt") as fh:
        barcodes = [x.strip() for x in fh if x.strip()]
    with gzip.open(mtx / "features.tsv.gz", "rt") as fh:
        genes = [x.rstrip("\n").split("\t")[1] for x in fh if x.strip()]
    cells = pd.read_csv(world_dir / "cells.csv", dtype=str, keep_default_na=False).set_index("barcode").loc[barcodes]
    meta = json.loads((world_dir / "meta.json").read_text())
    return X.toarray(), np.array(genes), cells.reset_index(), meta


def _bh(p: np.ndarray) -> np.ndarray:
    p = np.asarray(p, float)
    n = len(p)
    o = np.argsort(p)
    q = p[o] * n / np.arange(1, n + 1)
    q = np.minimum.accumulate(q[::-1])[::-1]
    out = np.empty(n)
    out[o] = np.minimum(q, 1.0)
    return out


# ---------------------------------------------------------------- limma-trend (Smyth 2004), written out

def _trigamma_inverse(x: float) -> float:
    """Solve trigamma(y) = x by Newton's method (limma's trigammaInverse)."""
    if x > 1e7:
        return 1 / np.sqrt(x)
    if x < 1e-6:
        return 1 / x
    y = 0.5 + 1 / x
    for _ in range(50):
        tri = float(polygamma(1, y))
        dif = tri * (1 - tri / x) / float(polygamma(2, y))
        y += dif
        if -dif / y < 1e-8:
            break
    return y


def _fit_f_dist(s2: np.ndarray, df: float, covariate: np.ndarray) -> tuple[float, np.ndarray]:
    """Empirical Bayes prior (d0, s0^2) for the residual variances, the prior's scale trending with the mean log
    expression (a quadratic in the covariate, limma-trend)."""
    s2 = np.maximum(s2, 1e-8)
    e = np.log(s2) - digamma(df / 2) + np.log(df / 2)
    A = np.vstack([np.ones_like(covariate), covariate, covariate ** 2]).T
    beta, *_ = np.linalg.lstsq(A, e, rcond=None)
    emean = A @ beta
    n = len(e)
    evar = float(np.sum((e - emean) ** 2) / (n - A.shape[1]) - polygamma(1, df / 2))
    if evar <= 0:
        return np.inf, np.exp(emean)
    d0 = 2 * _trigamma_inverse(evar)
    return d0, np.exp(emean + digamma(d0 / 2) - np.log(d0 / 2))


def limma_trend(logcpm: np.ndarray, design: np.ndarray, coef: int) -> tuple[np.ndarray, np.ndarray]:
    """Ordinary least squares per gene (genes x samples), empirical-Bayes moderated t for one coefficient:
    returns (coefficient, two-sided p-value)."""
    XtX_inv = np.linalg.inv(design.T @ design)
    B = logcpm @ design @ XtX_inv                       # genes x p
    resid = logcpm - B @ design.T
    df = design.shape[0] - design.shape[1]
    s2 = (resid ** 2).sum(1) / df
    d0, s02 = _fit_f_dist(s2, df, logcpm.mean(1))
    post = s2 if np.isinf(d0) else (d0 * s02 + df * s2) / (d0 + df)
    if np.isinf(d0):
        post = s02
    tstat = B[:, coef] / np.sqrt(post * XtX_inv[coef, coef])
    dft = df + (d0 if np.isfinite(d0) else 1e6)
    return B[:, coef], 2 * t_dist.sf(np.abs(tstat), dft)


def condition_design_issues(cells: pd.DataFrame, test: str, donor_sd: list[float]) -> list[str]:
    """What an analyst checks in the design before trusting any test: composition by condition, lanes that hold
    donors of one condition only, and how far donors of one condition differ (cells of a donor are not replicates)."""
    issues = []
    mye = cells.assign(m=cells["cell_type"].isin(MYELOID)).groupby("condition")["m"].mean()
    if mye.max() - mye.min() > 0.2:
        issues.append("cell-type composition differs between conditions (myeloid share "
                      + ", ".join(f"{k} {v:.2f}" for k, v in mye.items()) + "); tested within compartments")
    by_lane = cells.groupby("lane").agg(conds=("condition", "nunique"), donors=("donor", "nunique"))
    one = by_lane[(by_lane["conds"] == 1) & (by_lane["donors"] >= 2)]
    if len(one):
        issues.append("lane " + ", ".join(one.index) + " holds donors of one condition only: lane effect confounded "
                      "with condition; lane kept as a covariate")
    if donor_sd and max(donor_sd) > 0.4:
        issues.append(f"large donor-to-donor variation (median SD of log-CPM between donors {max(donor_sd):.2f}): "
                      "cells are not independent, a cell-level test would be pseudoreplication; the donor is the "
                      "unit of replication")
    return issues


@alternative("scrna.L2.condition_de",
             "donor x compartment pseudobulk, limma-trend moderated t on log-CPM (lane covariate when estimable)",
             ["scrna.L2.condition_de.clean", "scrna.L2.condition_de.composition", "scrna.L2.condition_de.lane_batch",
              "scrna.L2.condition_de.pseudoreplication"])
def pseudobulk_limma(world_dir: Path, out: Path) -> dict:
    """The donor is the unit of replication: UMI counts are summed per donor within the myeloid and the lymphoid
    compartment (so a shift in cell-type composition between conditions is not a condition effect), log-CPM with a
    prior count of 0.5, genes kept when they reach 1 CPM-equivalent (>= 5 counts) in >= 2 donors of each condition,
    and a linear model ~ [lane +] condition per compartment with limma's empirical-Bayes moderated t (prior
    variance trending with mean log-CPM). A gene is DE at BH FDR 5% with |log2FC| > 0.5 in either compartment."""
    X, genes, cells, meta = _load(world_dir)
    test, ref = meta["task"]["test_condition"], meta["task"]["reference_condition"]
    comp = np.where(cells["cell_type"].isin(MYELOID), "myeloid",
                    np.where(cells["cell_type"] == "CD34+", "other", "lymphoid"))
    rows, donor_sd = [], []
    for c in ("lymphoid", "myeloid"):
        keys, sums, info = [], [], []
        for donor in sorted(set(cells["donor"])):
            m = (cells["donor"].to_numpy() == donor) & (comp == c)
            if m.sum() < 10:
                continue
            keys.append(donor)
            sums.append(X[m].sum(0))
            info.append(cells[m].iloc[0][["condition", "lane"]].to_dict())
        info = pd.DataFrame(info, index=keys)
        if (info["condition"] == test).sum() < 2 or (info["condition"] == ref).sum() < 2:
            continue
        C = np.vstack(sums)                                 # donors x genes
        keep = np.ones(len(genes), bool)
        for cond in (test, ref):
            keep &= ((C[(info["condition"] == cond).to_numpy()] >= 5).sum(0) >= 2)
        C = C[:, keep]
        lib = C.sum(1, keepdims=True)
        logcpm = np.log2((C + 0.5) / (lib + 1) * 1e6).T     # genes x donors
        cols = [np.ones(len(info))]
        lanes = sorted(set(info["lane"]))
        cond_lane_aliased = info.groupby("condition")["lane"].nunique().max() <= 1
        if len(lanes) > 1 and not cond_lane_aliased:
            cols.append((info["lane"] == lanes[1]).to_numpy(float))
        cols.append((info["condition"] == test).to_numpy(float))
        design = np.vstack(cols).T
        if np.linalg.matrix_rank(design) < design.shape[1] or design.shape[0] - design.shape[1] < 2:
            design = design[:, [0, -1]]
        lfc, p = limma_trend(logcpm, design, design.shape[1] - 1)
        # donor-to-donor spread within a condition of well-measured genes (>= 50 counts in every donor)
        deep = (C >= 50).all(0)
        if deep.sum() >= 20:
            resid = logcpm[deep] - logcpm[deep] @ design @ np.linalg.pinv(design.T @ design) @ design.T
            donor_sd.append(float(np.median(np.sqrt((resid ** 2).sum(1) / (design.shape[0] - design.shape[1])))))
        rows.append(pd.DataFrame({"gene": genes[keep], "log2fc": lfc, "pvalue": p, "padj": _bh(p), "compartment": c}))
    res = pd.concat(rows, ignore_index=True)
    best = res.sort_values(["padj", "gene"]).groupby("gene", as_index=False).first()
    sig = res[(res["padj"] < 0.05) & (res["log2fc"].abs() > 0.5)]
    de = sorted(set(sig["gene"]))
    direction = sig.groupby("gene")["log2fc"].mean()
    table = best.copy()
    for g in de:    # a DE gene's row is the compartment where it is called
        r = sig[sig["gene"] == g].sort_values("padj").iloc[0]
        table.loc[table["gene"] == g, ["log2fc", "padj", "compartment"]] = [r["log2fc"], r["padj"], r["compartment"]]
    table[["gene", "log2fc", "padj", "compartment"]].to_csv(out / "de_limma.csv", index=False)
    issues = condition_design_issues(cells, test, donor_sd)
    return {"test_condition": test, "reference_condition": ref, "de_genes": de, "n_de_genes": len(de),
            "up_genes": sorted(g for g in de if direction[g] > 0), "down_genes": sorted(g for g in de if direction[g] < 0),
            "de_table": "de_limma.csv",
            "method": {"unit_of_replication": "donor (pseudobulk per donor and compartment)",
                       "test": "limma-trend moderated t, BH FDR 5%, |log2FC| > 0.5",
                       "normalization": "log2 CPM, prior count 0.5",
                       "covariates": "lane where it varies within a condition; myeloid and lymphoid tested apart"},
            "issues_found": issues, "analysis_usable": True,
            "summary": f"{len(de)} genes change with the condition across donors"}


# ---------------------------------------------------------------- markers: scran-style pairwise t-tests

def _welch(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ma, mb = a.mean(0), b.mean(0)
    va, vb = a.var(0, ddof=1) / len(a), b.var(0, ddof=1) / len(b)
    se = np.sqrt(va + vb) + 1e-12
    tstat = np.where(va + vb > 0, (ma - mb) / se, 0.0)
    dof = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1) + 1e-300)
    return ma - mb, tstat, dof


def marker_design_issues(X, ln, genes, ct, lane, target, min_lfc: dict) -> list[str]:
    """Checks before trusting a marker list: library depth of the target vs the other cells, the target's share of
    each lane vs the other cells' share, and genes a pooled one-vs-rest test would promote that another population
    expresses more highly."""
    issues = []
    tot = X.sum(1)
    t = ct == target
    ratio = float(np.median(tot[t]) / np.median(tot[~t]))
    if ratio > 2 or ratio < 0.5:
        issues.append(f"library depth differs: target cells have {ratio:.1f}x the median total counts per cell of the "
                      "others; counts normalised per cell before any test")
    for L in sorted(set(lane)):
        a, b = float(np.mean(lane[t] == L)), float(np.mean(lane[~t] == L))
        if abs(a - b) > 0.4:
            issues.append(f"lane {L} holds {a:.0%} of the target cells but {b:.0%} of the others: lane effect "
                          "confounded with population; compared within lane")
            break
    d, tt, _ = _welch(ln[t], ln[~t])
    rest_top = [genes[i] for i in np.lexsort((genes, -tt))[:10]]
    shared = [g for g in rest_top if min_lfc[g] <= 0]
    if len(shared) >= 2:
        issues.append("a pooled one-vs-rest test ranks non-specific genes among the top (" + ", ".join(shared)
                      + ": higher in another population); each population compared separately")
    return issues


@alternative("scrna.L2.markers",
             "scran-style findMarkers: pairwise Welch t-tests vs every population, blocked by lane, ranked by the "
             "minimum log-fold change (pval.type all)",
             ["scrna.L2.markers.clean", "scrna.L2.markers.confound_lane", "scrna.L2.markers.nonspecific_vs_rest",
              "scrna.L2.markers.unnormalised_depth"])
def scran_pairwise_t(world_dir: Path, out: Path) -> dict:
    """Library-size normalisation (counts per 10k, log1p), then for the target against EACH other population a
    Welch t-test within each lane holding >= 5 cells of both (lane effects cannot pass as markers); per pair the
    lanes' log-fold changes are averaged and their one-sided p-values combined (Stouffer, weighted by cells). A
    gene's score is its smallest log-fold change over the pairs, its p-value the largest (a marker must beat every
    population: scran's pval.type='all'); markers are those higher than every population by > 0.5 (natural-log
    units) with every pairwise test nominally significant (max p < 0.05)."""
    from scipy.stats import norm

    X, genes, cells, meta = _load(world_dir)
    target = meta["task"]["target_population"]
    ln = np.log1p(X / X.sum(1, keepdims=True) * 1e4)
    ct = cells["cell_type"].to_numpy()
    lane = cells["sample"].to_numpy() if "sample" in cells else np.zeros(len(ct), dtype=object)
    others = [p for p in sorted(set(ct)) if p != target and (ct == p).sum() >= 5]
    lfcs, pvals = [], []
    for p in others:
        num, wsum, zs, ws = np.zeros(len(genes)), 0.0, [], []
        for L in sorted(set(lane)):
            a, b = ln[(ct == target) & (lane == L)], ln[(ct == p) & (lane == L)]
            if len(a) < 5 or len(b) < 5:
                continue
            d, tt, dof = _welch(a, b)
            w = len(a) * len(b) / (len(a) + len(b))
            num += w * d
            wsum += w
            zs.append(norm.isf(t_dist.sf(tt, dof)))
            ws.append(np.sqrt(w))
        if not wsum:
            continue
        lfcs.append(num / wsum)
        ws = np.array(ws)
        z = (np.vstack(zs) * ws[:, None]).sum(0) / np.sqrt((ws ** 2).sum())
        pvals.append(norm.sf(z))
    lfcs, pvals = np.vstack(lfcs), np.vstack(pvals)
    score = lfcs.min(0)
    p_all = np.nan_to_num(pvals, nan=1.0).max(0)     # a gene constant in both groups carries no evidence
    fdr = _bh(p_all)
    tab = pd.DataFrame({"gene": genes, "score": np.round(score, 5), "p_all": p_all, "fdr": fdr})
    tab = tab.sort_values(["score", "gene"], ascending=[False, True])
    tab.to_csv(out / "markers_t.csv", index=False)
    markers = tab[(tab["p_all"] < 0.05) & (tab["score"] > 0.5)]["gene"].tolist()
    issues = marker_design_issues(X, ln, genes, ct, lane, target, dict(zip(genes, score)))
    return {"target_population": target, "top_markers": tab["gene"].head(10).tolist(), "marker_genes": markers,
            "marker_table": "markers_t.csv",
            "method": {"normalization": "counts per 10k, log1p",
                       "test": "Welch t-test per pair of populations within lane; Stouffer across lanes",
                       "comparison": "target vs each other population; min log-fold change, max p-value",
                       "covariates": "lane (block)"},
            "issues_found": issues, "analysis_usable": True, "summary": f"{len(markers)} markers of {target}"}


# ---------------------------------------------------------------- composition: edgeR-style DA (Lun et al. 2017)

def _tmm(C: np.ndarray, trim_m: float = 0.3, trim_a: float = 0.05) -> np.ndarray:
    """edgeR's TMM normalisation factors of the columns of a populations x samples count table (Robinson & Oshlack
    2010): reference = the sample whose upper-quartile-scaled total is closest to the mean; per sample the weighted
    mean of the log ratios to it after trimming 30% of M values and 5% of A values at each end."""
    lib = C.sum(0)
    uq = np.quantile(C / lib, 0.75, axis=0)
    ref = int(np.argmin(np.abs(uq - uq.mean())))
    out = np.ones(C.shape[1])
    for j in range(C.shape[1]):
        ok = (C[:, j] > 0) & (C[:, ref] > 0)
        pj, pr = C[ok, j] / lib[j], C[ok, ref] / lib[ref]
        m = np.log2(pj / pr)
        a = 0.5 * np.log2(pj * pr)
        v = (lib[j] - C[ok, j]) / lib[j] / C[ok, j] + (lib[ref] - C[ok, ref]) / lib[ref] / C[ok, ref]
        n = len(m)
        lo_m, hi_m = int(np.floor(n * trim_m)), n - int(np.floor(n * trim_m))
        lo_a, hi_a = int(np.floor(n * trim_a)), n - int(np.floor(n * trim_a))
        rm = np.argsort(np.argsort(m, kind="stable"), kind="stable")
        ra = np.argsort(np.argsort(a, kind="stable"), kind="stable")
        keep = (rm >= lo_m) & (rm < hi_m) & (ra >= lo_a) & (ra < hi_a)
        out[j] = 2 ** (np.sum(m[keep] / v[keep]) / np.sum(1 / v[keep])) if keep.any() else 1.0
    return out / np.exp(np.mean(np.log(out)))


def _quasi_poisson(y: np.ndarray, X: np.ndarray, offset: np.ndarray) -> tuple[float, float, int]:
    """Quasi-Poisson GLM by IRLS: the last coefficient, its p-value (t on n - p degrees of freedom, dispersion from
    the Pearson statistic, at least 1)."""
    beta = np.zeros(X.shape[1])
    beta[0] = np.log((y.sum() + 0.5) / np.exp(offset).sum())
    for _ in range(50):
        mu = np.exp(offset + X @ beta)
        z = X @ beta + (y - mu) / mu
        W = mu
        new = np.linalg.solve(X.T @ (W[:, None] * X), X.T @ (W * z))
        if np.max(np.abs(new - beta)) < 1e-10:
            beta = new
            break
        beta = new
    mu = np.exp(offset + X @ beta)
    dof = len(y) - X.shape[1]
    phi = max(1.0, float(((y - mu) ** 2 / mu).sum() / dof))
    cov = phi * np.linalg.inv(X.T @ (mu[:, None] * X))
    tstat = beta[-1] / np.sqrt(cov[-1, -1])
    return float(beta[-1]), float(2 * t_dist.sf(abs(tstat), dof)), dof


def _da_glm(C: pd.DataFrame, info: pd.DataFrame, test: str, tmm: bool = True, lane: bool = True) -> pd.DataFrame:
    pops = [p for p in C.columns if C[p].sum() >= 40]
    M = C[pops].to_numpy(float)
    lib = C.to_numpy(float).sum(1)
    nf = _tmm(M.T) if tmm else np.ones(len(lib))
    offset = np.log(lib * nf)
    cols = [np.ones(len(info))]
    lanes = sorted(set(info["lane"]))
    if lane and len(lanes) > 1 and info.groupby("condition")["lane"].nunique().max() > 1:
        cols.append((info["lane"] == lanes[1]).to_numpy(float))
    cols.append((info["condition"] == test).to_numpy(float))
    X = np.vstack(cols).T
    rows = []
    for j, p in enumerate(pops):
        b, pv, _ = _quasi_poisson(M[:, j], X, offset)
        rows.append({"cell_type": p, "log2fc": b / np.log(2), "pvalue": pv})
    df = pd.DataFrame(rows)
    df["padj"] = _bh(df["pvalue"].to_numpy())
    return df


def _lane_effects(C: pd.DataFrame, info: pd.DataFrame, test: str) -> dict[str, float]:
    """Populations whose abundance differs between lanes (log2 lane coefficient, p < 0.01, |log2| > 1) with
    condition in the model."""
    pops = [p for p in C.columns if C[p].sum() >= 40]
    lanes = sorted(set(info["lane"]))
    if len(lanes) < 2 or info.groupby("condition")["lane"].nunique().max() < 2:
        return {}
    M = C[pops].to_numpy(float)
    lib = C.to_numpy(float).sum(1)
    offset = np.log(lib * _tmm(M.T))
    X = np.vstack([np.ones(len(info)), (info["condition"] == test).to_numpy(float),
                   (info["lane"] == lanes[1]).to_numpy(float)]).T
    out = {}
    for j, p in enumerate(pops):
        b, pv, _ = _quasi_poisson(M[:, j], X, offset)
        if pv < 0.01 and abs(b / np.log(2)) > 1:
            out[p] = b / np.log(2)
    return out


@alternative("scrna.L2.composition",
             "edgeR-style differential abundance (Lun et al. 2017): donor x population counts, TMM-normalised quasi-Poisson "
             "GLM ~ [lane +] condition, BH",
             ["scrna.L2.composition.clean", "scrna.L2.composition.closure", "scrna.L2.composition.pseudoreplication",
              "scrna.L2.composition.lane_capture"])
def edger_style_da(world_dir: Path, out: Path) -> dict:
    """Differential abundance as Lun, Richard & Marioni (2017) test it in cytometry: cells counted per donor and
    population (the donor is the replicate), TMM normalisation factors over the populations (robust to a minority
    of changed populations, so one expansion does not depress the rest), a quasi-Poisson GLM per population with
    lane as a covariate where it varies within a condition, t-test of the condition coefficient, BH at 5%."""
    from scipy.stats import chi2_contingency

    cells = pd.read_csv(world_dir / "cells.csv", dtype=str, keep_default_na=False)
    task = json.loads((world_dir / "meta.json").read_text())["task"]
    test, ref = task["test_condition"], task["reference_condition"]
    C = pd.crosstab(cells["donor"], cells["cell_type"])
    info = cells.groupby("donor")[["condition", "lane"]].first().loc[C.index]
    res = _da_glm(C, info, test)
    res[["cell_type", "log2fc", "padj"]].to_csv(out / "da_glm.csv", index=False)
    sig = res[res["padj"] < 0.05]
    changed = sorted(sig["cell_type"])
    issues = []
    raw = _da_glm(C, info, test, tmm=False)
    extra_raw = sorted(set(raw.loc[raw["padj"] < 0.05, "cell_type"]) - set(changed))
    if extra_raw:
        issues.append("compositional closure: without TMM normalisation (library = all cells) "
                      + ", ".join(extra_raw) + " look depleted only because another population expanded")
    lane_fx = _lane_effects(C, info, test)
    if lane_fx and not extra_raw:
        issues.append("lane effect: " + ", ".join(f"{p} (log2 {b:+.1f} in lane B)" for p, b in lane_fx.items())
                      + " whatever the condition; the lane is unbalanced between conditions, so it is confounded "
                        "with condition unless kept as a covariate")
    if not issues:
        t = (cells["condition"] == test).to_numpy()
        pooled = []
        for p in sorted(set(cells["cell_type"])):
            m = (cells["cell_type"] == p).to_numpy()
            tab = [[int((m & t).sum()), int((~m & t).sum())], [int((m & ~t).sum()), int((~m & ~t).sum())]]
            pooled.append(chi2_contingency(tab).pvalue)
        q = _bh(np.array(pooled))
        hits = [p for p, x in zip(sorted(set(cells["cell_type"])), q) if x < 0.05 and p not in changed]
        if hits:
            issues.append("pseudoreplication: a chi-square test on pooled cells calls " + ", ".join(hits)
                          + " changed; the donor is the unit of replication")
    return {"test_condition": test, "reference_condition": ref, "changed_populations": changed, "n_changed": len(changed),
            "increased": sorted(sig.loc[sig["log2fc"] > 0, "cell_type"]),
            "decreased": sorted(sig.loc[sig["log2fc"] < 0, "cell_type"]),
            "da_table": "da_glm.csv",
            "method": {"unit_of_replication": "donor", "test": "quasi-Poisson GLM, t-test, BH FDR 5%",
                       "normalization": "TMM over populations", "covariates": "lane where estimable"},
            "issues_found": issues, "analysis_usable": True,
            "summary": f"{len(changed)} populations change in abundance across donors"}
