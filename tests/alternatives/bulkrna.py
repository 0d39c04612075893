"""bulkrna: sound analyses other than the reference solver's (pydeseq2 Wald with the estimable design, apeGLM).

- condition_de: a limma-trend-style moderated t (Smyth 2004, Stat Appl Genet Mol Biol 3:3; Law et al. 2014 Genome Biol
  15:R29) on log-CPM with the right design (batch when it varies within condition, donor when donors carry both),
  written here with numpy/scipy: per-gene least squares, an empirical-Bayes prior on the residual variances (its
  scale following the mean log-CPM), moderated t, Benjamini-Hochberg.
- lfc_ranking: DESeq2 MLE fold changes ranked after a baseMean >= 10 filter; and the significant genes (padj < 0.05)
  ranked by their MLE fold change.
- normalisation: ERCC spike-in size factors (median of ratios over the spike-ins) with the same moderated t.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from tests.alternatives import alternative


def _load(world_dir: Path):
    counts = pd.read_csv(world_dir / "counts.tsv", sep="\t", index_col=0)
    sheet = pd.read_csv(world_dir / "samples.csv")
    meta = json.loads((world_dir / "meta.json").read_text())
    return counts, sheet, meta["task"]["test_condition"], meta["task"]["reference_condition"]


# ---------------------------------------------------------------- limma-style moderated t (numpy / scipy)

def _ratio_factors(X: np.ndarray) -> np.ndarray:
    pos = (X > 0).all(1)
    lg = np.log(X[pos])
    return np.exp(np.median(lg - lg.mean(1, keepdims=True), axis=0))


def _design(sheet: pd.DataFrame, test: str) -> tuple[np.ndarray, str]:
    """Intercept, nuisance terms that are estimable (batch varying within a condition, donors carrying both
    conditions), then the condition indicator (last column)."""
    cols, terms = [np.ones(len(sheet))], []
    if "batch" in sheet and sheet["batch"].nunique() > 1 and sheet.groupby("condition")["batch"].nunique().max() > 1:
        for b in sorted(sheet["batch"].unique())[1:]:
            cols.append((sheet["batch"] == b).to_numpy(float))
        terms.append("batch")
    if "donor" in sheet and (sheet.groupby("donor")["condition"].nunique() > 1).any():
        for d in sorted(sheet["donor"].unique())[1:]:
            cols.append((sheet["donor"] == d).to_numpy(float))
        terms.append("donor")
    cols.append((sheet["condition"] == test).to_numpy(float))
    return np.column_stack(cols), "~ " + " + ".join(terms + ["condition"])


def _squeeze(s2: np.ndarray, df: int, amean: np.ndarray) -> tuple[np.ndarray, float]:
    """Empirical-Bayes posterior variances (Smyth 2004): the prior scale s0^2 follows a cubic trend of log s2 on the
    mean log-CPM (limma-trend), the prior df d0 from the excess variance of log s2 over its sampling variance."""
    from scipy.optimize import brentq
    from scipy.special import digamma, polygamma

    e = np.log(s2) - digamma(df / 2) + np.log(df / 2)
    trend = np.polyval(np.polyfit(amean, e, 3), amean)
    r = e - trend
    excess = np.mean(r ** 2) * len(r) / (len(r) - 4) - float(polygamma(1, df / 2))
    d0 = 2 * brentq(lambda x: float(polygamma(1, x)) - excess, 1e-4, 1e6) if excess > 1e-8 else np.inf
    s0 = np.exp(trend + (digamma(d0 / 2) - np.log(d0 / 2) if np.isfinite(d0) else 0.0))
    post = s0 if not np.isfinite(d0) else (d0 * s0 + df * s2) / (d0 + df)
    return post, d0


def moderated_t(X: pd.DataFrame, sheet: pd.DataFrame, test: str, sf: np.ndarray | None = None,
                genes: list[str] | None = None) -> tuple[pd.DataFrame, str]:
    """log-CPM (counts scaled by median-of-ratios or given size factors, prior count 0.5) of the genes with >= 10
    normalised counts in at least as many samples as the smaller condition; OLS per gene, moderated t, BH."""
    from scipy.stats import false_discovery_control, t as tdist

    sheet = sheet.set_index("sample").loc[X.columns].reset_index()
    A = X.to_numpy(float)
    sf = _ratio_factors(A) if sf is None else sf
    lib = A.sum(0).mean() * sf
    norm = A / sf[None, :]
    small = int(sheet["condition"].value_counts().min())
    keep = (norm >= 10).sum(1) >= small
    if genes is not None:
        keep &= X.index.isin(genes)
    Y = np.log2((A[keep] + 0.5) / (lib[None, :] + 1.0) * 1e6)
    D, design = _design(sheet, test)
    n, p = D.shape
    coef, *_ = np.linalg.lstsq(D, Y.T, rcond=None)
    res = Y.T - D @ coef
    df = n - p
    s2 = np.maximum((res ** 2).sum(0) / df, 1e-8)
    post, d0 = _squeeze(s2, df, Y.mean(1))
    unscaled = np.linalg.inv(D.T @ D)[-1, -1]
    tstat = coef[-1] / np.sqrt(post * unscaled)
    pval = 2 * tdist.sf(np.abs(tstat), df + min(d0, 1e6))
    out = pd.DataFrame({"gene": X.index[keep], "log2fc": coef[-1], "padj": false_discovery_control(pval),
                        "mean_norm": norm[keep].mean(1)})
    return out, design


def _de_report(out: pd.DataFrame, test: str, base: str, design: str, norm: str, issues: list[str], path: Path) -> dict:
    out[["gene", "log2fc", "padj"]].to_csv(path, index=False)
    de = out[out["padj"] < 0.05]
    return {"test_condition": test, "reference_condition": base, "de_genes": sorted(de["gene"]), "n_de_genes": len(de),
            "up_genes": sorted(de.loc[de["log2fc"] > 0, "gene"]), "down_genes": sorted(de.loc[de["log2fc"] < 0, "gene"]),
            "de_table": path.name, "median_log2fc": round(float(out.loc[out["mean_norm"] >= 20, "log2fc"].median()), 4),
            "method": {"design": design, "normalization": norm, "samples_used": "all"},
            "issues_found": issues, "analysis_usable": True, "summary": f"{len(de)} genes at FDR 5% (moderated t)"}


def _foreign_libraries(counts: pd.DataFrame) -> tuple[list[str], int]:
    """Sample QC written apart from the reference's scan: per library, the genes with >= 10 CPM whose CPM is >= 50x
    their median CPM over the libraries; a library with >= 10 of them carries a foreign transcript set."""
    cpm = counts / counts.sum(0) * 1e6
    med = cpm.median(1)
    high = (cpm >= 10).to_numpy() & (cpm.to_numpy() >= 50 * (med.to_numpy()[:, None] + 0.05))
    n = high.sum(0)
    bad = sorted(str(c) for c, k in zip(counts.columns, n) if k >= 10)
    return bad, int(high[:, counts.columns.isin(bad)].any(1).sum())


def _selected_on_labels(meta: dict) -> str | None:
    """The processing step (meta.json) that kept genes by a between-condition ratio or fold change, if any."""
    conds = {meta["task"]["test_condition"].lower(), meta["task"]["reference_condition"].lower()}
    for step in meta.get("processing") or []:
        low = str(step).lower()
        if ("kept" in low or "filter" in low) and ("ratio" in low or "fold" in low) and any(c in low for c in conds):
            return str(step)
    return None


@alternative("bulkrna.L2.condition_de", "limma-trend-style moderated t on log-CPM with the estimable design",
             ["bulkrna.L2.condition_de.clean", "bulkrna.L2.condition_de.batch_confound",
              "bulkrna.L2.condition_de.batch_confound_n5", "bulkrna.L2.condition_de.paired_donors",
              "bulkrna.L2.condition_de.contaminated_samples", "bulkrna.L2.condition_de.prefiltered_on_outcome"])
def limma_moderated_t(world_dir: Path, out: Path) -> dict:
    counts, sheet, test, base = _load(world_dir)
    meta = json.loads((world_dir / "meta.json").read_text())
    step = _selected_on_labels(meta)
    if step:
        return {"test_condition": test, "reference_condition": base, "de_genes": [], "n_de_genes": 0, "up_genes": [],
                "down_genes": [], "de_table": "none", "median_log2fc": 0.0,
                "method": {"design": "none", "normalization": "n/a", "samples_used": "none"},
                "issues_found": [f"genes were selected on the fold change between the conditions before testing ({step}): "
                                 "a non-independent filter; request the unfiltered counts"],
                "analysis_usable": False, "summary": "not usable"}
    issues = []
    bad, n_sig = _foreign_libraries(counts)
    if bad:
        counts = counts.drop(columns=bad)
        sheet = sheet[~sheet["sample"].isin(bad)].reset_index(drop=True)
        issues.append(f"contaminated libraries {', '.join(bad)}: {n_sig} genes >= 50x their median CPM there; excluded")
    res, design = moderated_t(counts, sheet, test)
    tab = pd.crosstab(sheet["condition"], sheet["batch"]) if "batch" in design else None
    if tab is not None and (tab == 0).any().any():  # a balanced batch is a covariate, not a problem
        issues.append("batch partially confounded with condition (" + tab.to_string().replace("\n", "; ")
                      + "): batch in the design")
    if "donor" in design:
        issues.append("paired samples: donor blocked in the design")
    return _de_report(res, test, base, design, "median-of-ratios scaled log-CPM", issues, out / "de_limma.csv")


@alternative("bulkrna.L2.normalisation", "ERCC spike-in size factors with a limma-trend-style moderated t",
             ["bulkrna.L2.normalisation.clean", "bulkrna.L2.normalisation.global_down",
              "bulkrna.L2.normalisation.global_up", "bulkrna.L2.normalisation.partial_shift"])
def spike_in_moderated_t(world_dir: Path, out: Path) -> dict:
    counts, sheet, test, base = _load(world_dir)
    genes = pd.read_csv(world_dir / "genes.tsv", sep="\t")
    spikes = genes.loc[genes.get("type", "gene") == "spike_in", "gene_id"].tolist()
    endo = [g for g in counts.index if g not in set(spikes)]
    sf_s = _ratio_factors(counts.loc[spikes].to_numpy(float))
    sf_e = _ratio_factors(counts.loc[endo].to_numpy(float))
    cond = sheet.set_index("sample")["condition"].reindex(counts.columns).to_numpy()
    shift = float(np.mean(np.log2(sf_e / sf_s)[cond == test]) - np.mean(np.log2(sf_e / sf_s)[cond == base]))
    use = abs(shift) > 0.3
    res, design = moderated_t(counts, sheet, test, sf=sf_s if use else None, genes=endo)
    issues = ([f"global transcriptional shift: spike-in and endogenous size factors differ by {shift:+.2f} log2 between "
               "conditions; normalised to the ERCC spike-ins"] if use else [])
    rep = _de_report(res, test, base, design, "ERCC spike-in size factors" if use else "median-of-ratios (spike-ins agree)",
                     issues, out / "de_spike.csv")
    lfc = res.set_index("gene")["log2fc"]
    de = rep.pop("de_genes")
    rep.pop("up_genes"), rep.pop("down_genes")
    rep["n_up"], rep["n_down"] = int((lfc[de] > 0).sum()), int((lfc[de] < 0).sum())
    return rep


# ---------------------------------------------------------------- lfc_ranking

def _deseq(world_dir: Path):
    from pydeseq2.dds import DeseqDataSet
    from pydeseq2.default_inference import DefaultInference
    from pydeseq2.ds import DeseqStats

    counts, sheet, test, base = _load(world_dir)
    inf = DefaultInference(n_cpus=1)
    dds = DeseqDataSet(counts=counts.T.astype(int), metadata=sheet.set_index("sample").loc[counts.columns],
                       design="~condition", inference=inf, quiet=True)
    dds.deseq2()
    st = DeseqStats(dds, contrast=["condition", test, base], inference=inf, quiet=True)
    st.summary()
    return st.results_df, test, base


def _rank_report(kept: pd.DataFrame, res: pd.DataFrame, test: str, base: str, how: str, issue: str, path: Path,
                 table: pd.DataFrame | None = None) -> dict:
    top = kept.assign(a=kept["log2FoldChange"].abs()).sort_values("a", ascending=False).index[:20].tolist()
    r = res.dropna(subset=["log2FoldChange"])
    raw = r.assign(a=r["log2FoldChange"].abs()).sort_values("a", ascending=False).index[:20]
    n_low = int((r.loc[raw, "baseMean"] < 10).sum())  # the problem named only where it shows in the data
    issues = [f"{n_low} of the 20 largest MLE fold changes are low-count genes (baseMean < 10): {issue}"] if n_low >= 5 else []
    table = kept if table is None else table
    pd.DataFrame({"gene": table.index, "log2fc": table["log2FoldChange"].round(4), "padj": table["padj"]}).to_csv(path, index=False)
    return {"test_condition": test, "reference_condition": base, "top_genes": top, "ranking_table": path.name,
            "n_de_genes": int((res["padj"] < 0.05).sum()), "method": {"fold_change": how, "ranking": "|log2FC|"},
            "issues_found": issues, "analysis_usable": True, "summary": "ranked the well-measured genes"}


LFC_WORLDS = ["bulkrna.L2.lfc_ranking.clean", "bulkrna.L2.lfc_ranking.lowcount", "bulkrna.L2.lfc_ranking.lowcount_many",
              "bulkrna.L2.lfc_ranking.lowcount_n4"]


@alternative("bulkrna.L2.lfc_ranking", "DESeq2 MLE fold changes ranked after a baseMean >= 10 filter", LFC_WORLDS)
def filtered_mle_ranking(world_dir: Path, out: Path) -> dict:
    """An expert may drop genes with baseMean < 10 and rank the unshrunk (MLE) fold changes instead of shrinking."""
    res, test, base = _deseq(world_dir)
    kept = res[res["baseMean"] >= 10].dropna(subset=["log2FoldChange"])
    return _rank_report(kept, res, test, base, "DESeq2 MLE after removing genes with baseMean < 10",
                        "low-count genes have noisy fold changes; filtered them out before ranking", out / "rank.csv")


@alternative("bulkrna.L2.lfc_ranking", "significant genes (padj < 0.05) ranked by DESeq2 MLE fold change", LFC_WORLDS)
def significant_by_fold_change(world_dir: Path, out: Path) -> dict:
    """Rank only the genes significant at FDR 5% by their MLE fold change: a low-count gene with a wild MLE fold change
    is rarely significant, so the significance filter does the work shrinkage does."""
    res, test, base = _deseq(world_dir)
    kept = res[res["padj"].fillna(1.0) < 0.05].dropna(subset=["log2FoldChange"])
    return _rank_report(kept, res, test, base, "DESeq2 MLE of the genes significant at FDR 5%",
                        "low-count genes have noisy fold changes; ranked only significant genes", out / "rank.csv",
                        table=res.dropna(subset=["log2FoldChange"]))


# ---------------------------------------------------------------- design

DESIGN_WORLDS = ["bulkrna.L2.design.clean", "bulkrna.L2.design.batch_aliased", "bulkrna.L2.design.reference_flip",
                 "bulkrna.L2.design.technical_lanes"]


@alternative("bulkrna.L2.design",
             "limma-trend-style moderated t on log-CPM of the biological samples (technical runs summed) with the estimable design",
             DESIGN_WORLDS)
def design_moderated_t(world_dir: Path, out: Path) -> dict:
    """Written independently of the reference solver: runs of one specimen summed (the unit of replication is the
    specimen), a factor whose levels coincide with the conditions makes the contrast inestimable (the design matrix
    with it and condition is rank-deficient: checked by its rank, not by the reference's level tabulation), otherwise
    the moderated t with the test-condition indicator as the contrast (its sign never depends on level order)."""
    counts, sheet, test, base = _load(world_dir)
    issues = []
    if sheet["specimen"].nunique() < len(sheet):
        spec = sheet.set_index("sample")["specimen"].reindex(counts.columns)
        counts = counts.T.groupby(spec.to_numpy()).sum().T
        n_runs = len(sheet)
        sheet = sheet.drop_duplicates("specimen").drop(columns=["sample"]).rename(columns={"specimen": "sample"})
        issues.append(f"technical replicates: {n_runs} runs of {len(sheet)} specimens; runs of each specimen summed (collapse)")
    rep_base = {"test_condition": test, "reference_condition": base}
    for f in ("batch",):
        if sheet[f].nunique() > 1:
            D = np.column_stack([np.ones(len(sheet)), (sheet[f] == sorted(sheet[f].unique())[1]).to_numpy(float),
                                 (sheet["condition"] == test).to_numpy(float)])
            if np.linalg.matrix_rank(D) < D.shape[1]:
                issues.append(f"condition confounded with {f}: the design is rank-deficient, the treatment effect is not estimable")
                return {**rep_base, "estimable": False, "aliased_with": [f], "de_genes": [], "n_de_genes": 0, "up_genes": [],
                        "down_genes": [], "de_table": None, "median_log2fc": None,
                        "method": {"design": "none", "normalization": "n/a", "samples_used": "all"},
                        "issues_found": issues, "analysis_usable": False, "summary": "not estimable"}
    if sorted(sheet["condition"].unique())[0] == test:
        issues.append("reference level: the test condition sorts first alphabetically; contrast coded as the test indicator")
    res, design = moderated_t(counts, sheet, test)
    rep = _de_report(res, test, base, design, "median-of-ratios scaled log-CPM", issues, out / "de_design.csv")
    return {**rep, "estimable": True, "aliased_with": []}
