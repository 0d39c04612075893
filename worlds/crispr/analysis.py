"""Reference analysis of pooled CRISPR screens (gold side; the scripted oracle inlines these functions into the sandbox).

Everything reads only a world's public files: counts.txt (MAGeCK count format), library.csv, meta.json and, where a
world ships it, copy_number.csv. Plain functions over numpy/pandas/scipy so they run unchanged in the sandbox.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

MIN_INITIAL = 30.0       # guides with fewer normalised initial reads are noise-dominated and are filtered out
MIN_GUIDES = 3           # genes need at least this many guides passing the filter to be tested
FDR = 0.05
MIN_EFFECT = 0.5         # a hit also needs |median LFC| >= this (log2 units; after scaling for line comparisons)
AMPLIFIED_CN = 5         # genes at or above this copy number are corrected for cutting toxicity
PSEUDO = 1.0


def gini(x) -> float:
    x = np.sort(np.asarray(x, float))
    n = len(x)
    return float((2 * np.arange(1, n + 1) - n - 1).dot(x) / (n * x.sum())) if n and x.sum() > 0 else 0.0


def read_screen(world_dir) -> dict:
    d = Path(world_dir)
    counts = pd.read_csv(d / "counts.txt", sep="\t")
    lib = pd.read_csv(d / "library.csv")
    meta = json.loads((d / "meta.json").read_text())
    cn = pd.read_csv(d / "copy_number.csv") if (d / "copy_number.csv").exists() else None
    return {"counts": counts, "library": lib, "meta": meta, "cn": cn}


def bh(p) -> np.ndarray:
    p = np.asarray(p, float)
    n = len(p)
    if n == 0:
        return p
    order = np.argsort(p)
    q = p[order] * n / np.arange(1, n + 1)
    q = np.minimum.accumulate(q[::-1])[::-1]
    out = np.empty(n)
    out[order] = np.minimum(q, 1.0)
    return out


def size_factors(c: pd.DataFrame, rows=None) -> pd.Series:
    """Median-ratio size factors (MAGeCK/DESeq) over the given guide rows (all guides when None)."""
    x = c if rows is None else c.loc[rows]
    x = x[(x > 0).all(1)]
    lg = np.log(x)
    return np.exp((lg.sub(lg.mean(1), axis=0)).median())


def samples_of(meta: dict, line: str | None = None, condition: str | None = None) -> list[str]:
    out = []
    for name, s in meta["samples"].items():
        if condition is not None and s["condition"] != condition:
            continue
        if line is not None and line not in str(s["cell_line"]).split(","):
            continue
        out.append(name)
    return sorted(out, key=lambda n: (meta["samples"][n]["replicate"], n))


def guide_lfc(d: dict, line: str, test: str, ref: str, controls_norm: bool = True) -> pd.DataFrame:
    """Per guide: normalised counts (size factors from non-targeting controls, or all guides), replicate-averaged
    log2 fold change of condition `test` over `ref` (the initial sample when ref == 'initial'), and the normalised
    initial count used to filter under-represented guides."""
    c = d["counts"].set_index("sgRNA")
    meta = d["meta"]
    lib = d["library"].set_index("sgRNA")
    initial = samples_of(meta, None, "initial")
    tcols = samples_of(meta, line, test)
    rcols = initial if ref == "initial" else samples_of(meta, line, ref)
    cols = sorted(set(initial + tcols + rcols))
    x = c[cols].astype(float)
    rows = lib.index[lib["category"] == "non_targeting"] if controls_norm else None
    sf = size_factors(x, rows)
    n = x / sf
    lt = np.log2(n[tcols] + PSEUDO).mean(1)
    lr = np.log2(n[rcols] + PSEUDO).mean(1)
    out = pd.DataFrame({"gene": lib.reindex(n.index)["Gene"], "category": lib.reindex(n.index)["category"],
                        "lfc": lt - lr, "initial": n[initial].mean(1)})
    return out


def cn_correct(g: pd.DataFrame, cn: pd.DataFrame | None, line: str) -> tuple[pd.DataFrame, dict]:
    """Cutting-toxicity correction: for genes at CN >= AMPLIFIED_CN, estimate the per-copy depletion gamma as the median
    over those genes of (gene median LFC) / (CN - 2) and subtract gamma * (CN - 2) from their guides (most amplified
    genes are not dependencies, so the median measures the cutting effect)."""
    info = {"amplified_genes": [], "gamma": 0.0}
    if cn is None:
        return g, info
    cnl = cn[cn["cell_line"] == line].set_index("gene")["copy_number"]
    gcn = g["gene"].map(cnl).fillna(2.0)
    amp = sorted(set(g.loc[(gcn >= AMPLIFIED_CN) & (g["category"] == "targeting"), "gene"]))
    if len(amp) < 3:
        return g, info
    med = g[g["gene"].isin(amp)].groupby("gene")["lfc"].median()
    gamma = float(np.median([-med[x] / (cnl[x] - 2) for x in amp]))
    gamma = max(gamma, 0.0)
    g = g.copy()
    m = g["gene"].isin(amp)
    g.loc[m, "lfc"] = g.loc[m, "lfc"] + gamma * (gcn[m] - 2)
    info = {"amplified_genes": amp, "gamma": round(gamma, 4)}
    return g, info


def gene_test(g: pd.DataFrame, direction: str, null: str = "controls", filter_initial: bool = True) -> pd.DataFrame:
    """Gene level: median guide LFC and a one-sided Mann-Whitney test of the gene's guides against the null guides
    (non-targeting controls, or every guide), BH over genes. Guides below MIN_INITIAL normalised initial reads are
    dropped first; genes with fewer than MIN_GUIDES guides left are not tested (fdr 1)."""
    from scipy.stats import mannwhitneyu

    if filter_initial:
        g = g[g["initial"] >= MIN_INITIAL]
    nul = g[g["category"] == "non_targeting"]["lfc"].to_numpy() if null == "controls" else g["lfc"].to_numpy()
    alt = "less" if direction == "down" else "greater"
    rows = []
    for gene, sub in g[g["category"] == "targeting"].groupby("gene", sort=True):
        x = sub["lfc"].to_numpy()
        p = float(mannwhitneyu(x, nul, alternative=alt).pvalue) if len(x) >= MIN_GUIDES else np.nan
        rows.append({"gene": gene, "lfc": float(np.median(x)), "n_guides": len(x), "p": p})
    t = pd.DataFrame(rows)
    ok = t["p"].notna().to_numpy()
    t["fdr"] = 1.0
    t.loc[ok, "fdr"] = bh(t.loc[ok, "p"].to_numpy())
    t["p"] = t["p"].fillna(1.0)
    return t


def hits_of(t: pd.DataFrame, direction: str) -> list[str]:
    sgn = t["lfc"] <= -MIN_EFFECT if direction == "down" else t["lfc"] >= MIN_EFFECT
    return sorted(t[(t["fdr"] < FDR) & sgn]["gene"])


def control_scale(g: pd.DataFrame) -> float:
    """Dynamic range of a screen: the median LFC of the positive-control (core-essential) guides minus that of the
    non-targeting guides (negative)."""
    pc = g[g["category"] == "positive_control"]["lfc"].median()
    nt = g[g["category"] == "non_targeting"]["lfc"].median()
    return float(pc - nt)


def essential_analysis(d: dict) -> tuple[pd.DataFrame, dict]:
    line = d["meta"]["task"]["cell_line"]
    g = guide_lfc(d, line, "final", "initial", controls_norm=True)
    g, info = cn_correct(g, d["cn"], line)
    t = gene_test(g, "down")
    return t, info


def selective_analysis(d: dict) -> tuple[pd.DataFrame, dict]:
    """Dependencies stronger in the query line than in the comparison line: each line's guide LFCs (control-normalised,
    copy-number corrected) divided by its dynamic range |control_scale| so that a core-essential knockout is -1 in
    both (then multiplied by the comparison line's range, so the difference is in that line's log2 units), then the
    per-guide difference query - comparison is tested against the non-targeting guides' differences."""
    task = d["meta"]["task"]
    q, o = task["query_line"], task["comparison_line"]
    out, info = {}, {}
    for line in (q, o):
        g = guide_lfc(d, line, "final", "initial", controls_norm=True)
        g, inf = cn_correct(g, d["cn"], line)
        sc = abs(control_scale(g))
        info[line] = {"scale": round(sc, 4), **inf}
        out[line] = g.assign(lfc=g["lfc"] / sc)
    ref_scale = info[o]["scale"]
    diff = out[q].copy()
    diff["lfc"] = (out[q]["lfc"] - out[o]["lfc"]) * ref_scale
    t = gene_test(diff, "down")
    return t, info


def resistance_analysis(d: dict) -> tuple[pd.DataFrame, dict]:
    line = d["meta"]["task"]["cell_line"]
    g = guide_lfc(d, line, "drug", "vehicle", controls_norm=True)
    t = gene_test(g, "up")
    return t, {}


def naive_table(d: dict) -> pd.DataFrame:
    """Tool defaults, no checks (what scripted/naive runs): median-ratio normalisation over ALL guides, no filter, every
    replicate column of the test condition pooled with the guides as observations (pseudo-replicates), test against the
    initial sample, Mann-Whitney against every guide, no copy-number correction, no scaling between lines."""
    from scipy.stats import mannwhitneyu

    task = d["meta"]["task"]
    meta = d["meta"]
    c = d["counts"].set_index("sgRNA").astype({k: float for k in meta["samples"]})
    lib = d["library"].set_index("sgRNA")
    kind = task.get("kind_name", "")
    cols = list(meta["samples"])
    sf = size_factors(c[cols])
    n = np.log2(c[cols] / sf + PSEUDO)
    init = n[samples_of(meta, None, "initial")].mean(1)
    if "query_line" in task:
        q, o = task["query_line"], task["comparison_line"]
        qa, oa = samples_of(meta, q, "final"), samples_of(meta, o, "final")
        obs = pd.concat([(n[a] - n[b]) for a, b in zip(qa, oa)], axis=0)
        direction = "less"
    elif "test_condition" in task:
        obs = pd.concat([n[s] - init for s in samples_of(meta, task["cell_line"], "drug")], axis=0)
        direction = "greater"
    else:
        obs = pd.concat([n[s] - init for s in samples_of(meta, task["cell_line"], "final")], axis=0)
        direction = "less"
    gene = lib.reindex(obs.index)["Gene"].to_numpy()
    cat = lib.reindex(obs.index)["category"].to_numpy()
    allv = obs.to_numpy()
    rows = []
    for gname in sorted(set(gene[cat == "targeting"])):
        x = allv[gene == gname]
        rows.append({"gene": gname, "lfc": float(np.median(x)),
                     "p": float(mannwhitneyu(x, allv, alternative=direction).pvalue)})
    t = pd.DataFrame(rows)
    t["fdr"] = bh(t["p"].to_numpy())
    return t
