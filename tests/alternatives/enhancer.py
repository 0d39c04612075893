"""enhancer: sound analyses other than the reference solver's (worlds/enhancer/analysis.py), from the public files only:

- activity: ratio of the mean RNA to the mean plasmid count per barcode (pseudocount 1, not 0.5), barcodes with at
            least 20 plasmid reads (not 10), centred on the mean (not the median) of the negative controls.
- calling:  per-replicate activities from barcodes with >= 5 plasmid reads, averaged; a robust z against the negative
            controls (median and MAD x 1.4826 of their element-level activities, not mean and sd); one-sided normal p,
            Benjamini-Hochberg 5% (written out by hand, not the reference's helper).
- batch:    library-size normalisation within each batch and centring on the mean of the batch's own negative
            controls, barcodes with >= 5 plasmid reads.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm

from tests.alternatives import alternative


def _load(d: Path):
    return (pd.read_csv(d / "counts.csv", dtype={"barcode": str, "element": str}),
            pd.read_csv(d / "elements.csv", dtype={"element": str}))


def _mean_ratio(t: pd.DataFrame, rna: str, min_dna: int, min_bc: int) -> pd.Series:
    t = t[t["dna_count"] >= min_dna]
    g = t.groupby("element").agg(r=(rna, "mean"), d=("dna_count", "mean"), n=("barcode", "size"))
    g = g[g["n"] >= min_bc]
    return np.log2((g["r"] + 1.0) / (g["d"] + 1.0)) + np.log2(t["dna_count"].sum() / t[rna].sum())


@alternative("enhancer.L2.activity", "aggregate ratio of mean RNA to mean DNA per barcode with pseudocount 1, barcodes "
             "with >= 20 plasmid reads, centred on the mean of the negative controls",
             ["enhancer.L2.activity.clean", "enhancer.L2.activity.depth", "enhancer.L2.activity.low_dna",
              "enhancer.L2.activity.low_dna_many"])
def activity_mean_ratio(world_dir: Path, out: Path) -> dict:
    t, el = _load(world_dir)
    a = _mean_ratio(t, "rna_count", 20, 2)
    role = el.set_index("element")["role"].reindex(a.index)
    raw = np.log2((t.groupby("element")["rna_count"].sum() + 1) / (t.groupby("element")["dna_count"].sum() + 1))
    shift = float(raw[el.loc[el["role"] == "negative_control", "element"]].mean())
    a = a - float(a[role == "negative_control"].mean())
    test = a[role == "test"]
    pd.DataFrame({"element": test.index, "activity": test.to_numpy()}).to_csv(out / "activity_alt.csv", index=False)
    top = test.round(6).reset_index().sort_values([0, "element"], ascending=[False, True])["element"].head(20)
    n_low = int(t.loc[t["dna_count"] < 20, "element"].nunique())
    issues = []
    if abs(shift) > 0.3:
        issues.append(f"negative controls read log2 {shift:.2f}: activities normalised to the negative controls")
    if n_low:
        issues.append(f"{n_low} elements have barcodes with fewer than 20 plasmid reads (low counts), excluded")
    return {"top_elements": top.tolist(), "n_active": int((test.round(6) >= 1.0).sum()), "table": "activity_alt.csv",
            "issues_found": issues, "analysis_usable": True, "summary": f"{len(test)} elements scored"}


@alternative("enhancer.L2.activity", "median of per-barcode log2(RNA/DNA) ratios per element (pseudocount 1), barcodes "
             "with >= 10 plasmid reads, library-size normalised, centred on the median of the negative controls",
             ["enhancer.L2.activity.clean", "enhancer.L2.activity.depth", "enhancer.L2.activity.low_dna",
              "enhancer.L2.activity.low_dna_many", "enhancer.L2.activity.outlier_rna",
              "enhancer.L2.activity.outlier_rna_many"])
def activity_barcode_median(world_dir: Path, out: Path) -> dict:
    t, el = _load(world_dir)
    t = t[t["dna_count"] >= 10]
    lr = np.log2((t["rna_count"] + 1.0) / (t["dna_count"] + 1.0)) + np.log2(t["dna_count"].sum() / t["rna_count"].sum())
    n = t.groupby("element").size()
    a = lr.groupby(t["element"]).median()[n >= 2]
    role = el.set_index("element")["role"].reindex(a.index)
    a = a - float(a[role == "negative_control"].median())
    test = a[role == "test"]
    pd.DataFrame({"element": test.index, "activity": test.to_numpy()}).to_csv(out / "activity_med.csv", index=False)
    top = test.round(6).reset_index().sort_values([0, "element"], ascending=[False, True])["element"].head(20)
    dev = lr - lr.groupby(t["element"]).transform("median")
    issues = []
    if int((dev > 3).sum()):
        issues.append(f"{int((dev > 3).sum())} outlier barcodes (RNA jackpots) read > 8-fold above their element's "
                      "median barcode; the per-barcode median ignores them")
    raw = np.log2((el.merge(t, on="element").groupby("role")["rna_count"].sum()
                   / el.merge(t, on="element").groupby("role")["dna_count"].sum()))
    if abs(float(raw.get("negative_control", 0.0))) > 0.3:
        issues.append("negative controls read a raw log2 ratio away from 0: activities normalised to the negative controls")
    if (world_dir / "counts.csv").exists() and int((pd.read_csv(world_dir / "counts.csv")["dna_count"] < 10).sum()):
        issues.append("barcodes with fewer than 10 plasmid reads (low counts) excluded")
    return {"top_elements": top.tolist(), "n_active": int((test.round(6) >= 1.0).sum()), "table": "activity_med.csv",
            "issues_found": issues, "analysis_usable": True, "summary": f"{len(test)} elements scored"}


@alternative("enhancer.L2.calling", "robust z against the negative controls (median and MAD of their element-level "
             "activities), per-replicate activities from barcodes with >= 5 plasmid reads averaged, "
             "Benjamini-Hochberg 5%",
             ["enhancer.L2.calling.clean", "enhancer.L2.calling.pseudorep", "enhancer.L2.calling.pseudorep_mild",
              "enhancer.L2.calling.pseudorep_deep"])
def calling_robust_z(world_dir: Path, out: Path) -> dict:
    t, el = _load(world_dir)
    reps = sorted(c for c in t.columns if c.startswith("rna_rep"))
    neg_ids = set(el.loc[el["role"] == "negative_control", "element"])
    parts = []
    for r in reps:
        a = _mean_ratio(t, r, 5, 2)
        parts.append(a - float(a[a.index.isin(neg_ids)].median()))
    act = pd.concat(parts, axis=1).mean(axis=1)
    neg = act[act.index.isin(neg_ids)]
    med = float(neg.median())
    mad = float(1.4826 * (neg - med).abs().median())
    test = act[~act.index.isin(neg_ids)].sort_index()
    p = np.asarray(norm.sf((test - med) / mad), dtype=float)
    m = len(p)
    order = np.argsort(p, kind="stable")
    ranked = p[order] * m / np.arange(1, m + 1)
    q = np.empty(m)
    q[order] = np.minimum.accumulate(ranked[::-1])[::-1]
    active = sorted(test.index[q < 0.05])
    pd.DataFrame({"element": test.index, "activity": test.to_numpy()}).to_csv(out / "activity_alt.csv", index=False)
    (out / "active_alt.txt").write_text("".join(f"{x}\n" for x in active))
    sd = float(neg.std(ddof=1))
    issues = [f"controls vary by sd {sd:.2f} between elements: barcodes are technical replicates (pseudo-replication); "
              "elements tested against the controls' element-level distribution"] if sd > 0.2 else []
    return {"n_active": len(active), "active_list": "active_alt.txt", "table": "activity_alt.csv", "issues_found": issues,
            "analysis_usable": True, "summary": f"{len(active)} active"}


@alternative("enhancer.L2.batch", "per-batch library-size normalisation and centring on the mean (not median) of the "
             "batch's own negative controls, barcodes with >= 5 plasmid reads",
             ["enhancer.L2.batch.clean", "enhancer.L2.batch.confounded", "enhancer.L2.batch.confounded_reverse",
              "enhancer.L2.batch.confounded_strong"])
def batch_per_batch_mean(world_dir: Path, out: Path) -> dict:
    t, el = _load(world_dir)
    t = t.merge(el[["element", "batch"]], on="element")
    parts, shifts = [], {}
    for b, tb in t.groupby("batch"):
        tb = tb[tb["dna_count"] >= 5]
        s = tb.groupby("element")[["rna_count", "dna_count"]].sum()
        a = np.log2((s["rna_count"] + 0.5) / (s["dna_count"] + 0.5)) + np.log2(tb["dna_count"].sum() / tb["rna_count"].sum())
        negm = a[a.index.str.startswith("neg_")]
        shifts[b] = float(negm.mean()) - np.log2(tb["dna_count"].sum() / tb["rna_count"].sum())
        parts.append(a - float(negm.mean()))
    act = pd.concat(parts)
    test = act[~act.index.str.startswith("neg_")].sort_index()
    g5 = test.index.str[7] == "G"
    eff = float(test[g5].mean() - test[~g5].mean())
    pd.DataFrame({"element": test.index, "activity": test.to_numpy()}).to_csv(out / "activity_alt.csv", index=False)
    gap = shifts.get(2, 0.0) - shifts.get(1, 0.0)
    issues = [f"batch 2 controls differ by {gap:+.2f} log2 and the +5G elements are unevenly spread over batches: "
              "confounded; referenced each batch to its own controls"] if abs(gap) > 0.3 else []
    return {"g5_effect": round(eff, 4), "table": "activity_alt.csv", "issues_found": issues, "analysis_usable": True,
            "summary": f"+5G effect {eff:+.2f}"}


@alternative("enhancer.L2.batch", "ordinary least squares of the pooled, control-centred log2 activity on a +5G indicator "
             "and a batch indicator over the test elements (a textbook regression with a batch covariate); the batch "
             "coefficient removed from batch-2 activities, re-centred on the controls",
             ["enhancer.L2.batch.clean", "enhancer.L2.batch.confounded", "enhancer.L2.batch.confounded_reverse",
              "enhancer.L2.batch.confounded_strong"])
def batch_regression(world_dir: Path, out: Path) -> dict:
    t, el = _load(world_dir)
    t = t[t["dna_count"] >= 10]
    s = t.groupby("element")[["rna_count", "dna_count"]].sum()
    a = np.log2((s["rna_count"] + 0.5) / (s["dna_count"] + 0.5)) + np.log2(t["dna_count"].sum() / t["rna_count"].sum())
    x = el.set_index("element").reindex(a.index)
    a = a - float(a[x["role"] == "negative_control"].median())
    test = x["role"] == "test"
    g5 = (a.index.str[7] == "G") & test
    b2 = (x["batch"] == 2).to_numpy(dtype=float)
    X = np.column_stack([np.ones(int(test.sum())), g5[test].astype(float), b2[test.to_numpy()]])
    beta = np.linalg.lstsq(X, a[test].to_numpy(), rcond=None)[0]
    adj = a - beta[2] * b2  # the batch coefficient removed from every batch-2 element, controls included
    adj = (adj - float(adj[(x["role"] == "negative_control").to_numpy()].median()))[test]
    pd.DataFrame({"element": adj.index, "activity": adj.to_numpy()}).to_csv(out / "activity_ols.csv", index=False)
    issues = [f"batch effect: batch 2 reads {beta[2]:+.2f} log2 against batch 1 in a regression with a batch covariate, "
              "and the +5G elements are unevenly spread over the batches (confounded); adjusted for batch"] \
        if abs(beta[2]) > 0.3 else []
    return {"g5_effect": round(float(beta[1]), 4), "table": "activity_ols.csv", "issues_found": issues,
            "analysis_usable": True, "summary": f"+5G effect {beta[1]:+.2f} (OLS with a batch covariate)"}
