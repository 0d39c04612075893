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
    out = {"counts": counts, "library": lib, "meta": meta, "cn": cn}
    if (d / "expression.csv").exists():
        out["expression"] = pd.read_csv(d / "expression.csv")
    return out


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


NOT_EXPRESSED_TPM = 1.0  # genes below this TPM in the screened line are not expressed (Hart 2015 reference non-essentials)


def guide_level_analysis(d: dict) -> tuple[pd.DataFrame, dict]:
    """Guide-level family (plasmid, T0 and final samples; library.csv perfect_matches; expression.csv): final vs T0
    (never the plasmid: the transduction bottleneck sits between them), control-normalised; sgRNAs with more than one
    perfect-match site dropped (multi-cut toxicity); genes not expressed in the line (TPM < 1) not tested; then the
    robust gene test (median sgRNA LFC, Mann-Whitney against the non-targeting sgRNAs, low-T0 filter, >= MIN_GUIDES
    sgRNAs), so one outlier sgRNA cannot carry a gene."""
    line = d["meta"]["task"]["cell_line"]
    g = guide_lfc(d, line, "final", "initial", controls_norm=True)
    lib = d["library"].set_index("sgRNA")
    pm = lib.reindex(g.index)["perfect_matches"].fillna(1)
    multi = (pm > 1) & (g["category"] == "targeting")
    info = {"multi_match_sgrnas": int(multi.sum())}
    g = g[~multi]
    if d.get("expression") is not None:
        ex = d["expression"].set_index("gene")["tpm"]
        off = sorted(set(g.loc[g["category"] == "targeting", "gene"]) & set(ex.index[ex < NOT_EXPRESSED_TPM]))
        info["not_expressed"] = off
        g = g[~g["gene"].isin(off)]
    t = gene_test(g, "down")
    return t, info


def guide_naive_table(d: dict) -> pd.DataFrame:
    """Guide-level family, tool defaults without checks: median-ratio normalisation over all sgRNAs and samples, each
    final replicate against the library reference (the plasmid column), replicate-averaged sgRNA LFC, robust z-score
    of each sgRNA against all sgRNAs, one-sided normal p-values combined per gene by Fisher's method, gene LFC = mean
    sgRNA LFC, BH; every sgRNA and gene kept."""
    from scipy.stats import chi2, norm

    meta = d["meta"]
    c = d["counts"].set_index("sgRNA")
    lib = d["library"].set_index("sgRNA")
    cols = list(meta["samples"])
    x = c[cols].astype(float)
    n = np.log2(x / size_factors(x) + PSEUDO)
    ref = [s for s in cols if meta["samples"][s]["condition"] == "plasmid"] or samples_of(meta, None, "initial")
    fin = samples_of(meta, meta["task"]["cell_line"], "final")
    lfc = n[fin].mean(1) - n[ref].mean(1)
    mad = float(np.median(np.abs(lfc - lfc.median()))) * 1.4826
    p = pd.Series(norm.cdf((lfc - lfc.median()) / mad), index=lfc.index)
    gene = lib.reindex(lfc.index)["Gene"]
    cat = lib.reindex(lfc.index)["category"]
    rows = []
    for gname in sorted(set(gene[cat == "targeting"])):
        m = (gene == gname).to_numpy()
        pv = np.clip(p[m].to_numpy(), 1e-300, 1.0)
        stat = -2.0 * np.log(pv).sum()
        rows.append({"gene": gname, "lfc": float(lfc[m].mean()), "p": float(chi2.sf(stat, 2 * len(pv)))})
    t = pd.DataFrame(rows)
    t["fdr"] = bh(t["p"].to_numpy())
    return t


def guide_diagnostics(d: dict) -> dict:
    """What a careful analyst measures before trusting a gene call in the guide-level family (data-driven):
    single_guide_genes   genes whose most depleted sgRNA is below -2 while the median of the others is above -0.3
                         (T0 reference, multi-match sgRNAs excluded, low-T0 sgRNAs filtered);
    multi_locus_genes    genes with >= 2 sgRNAs of more than one perfect-match site (n_multi_match_sgrnas: every
                         targeting sgRNA of more than one site);
    mean_driven_genes    expressed genes whose mean sgRNA LFC passes -MIN_EFFECT while their median does not (one
                         sgRNA carries them under a mean; same sgRNA filters as single_guide_genes);
    not_expressed_depleted  genes with TPM < 1 whose sgRNAs deplete (median LFC <= -0.5, Mann-Whitney FDR < 0.05);
    t0_vs_plasmid        the share of sgRNAs whose T0 abundance differs from the plasmid by more than 2-fold, and
                         the Gini index of the plasmid and T0 counts."""
    line = d["meta"]["task"]["cell_line"]
    lib = d["library"].set_index("sgRNA")
    g = guide_lfc(d, line, "final", "initial", controls_norm=True)
    pm = lib.reindex(g.index)["perfect_matches"].fillna(1)
    tg = g[(g["category"] == "targeting") & (pm <= 1) & (g["initial"] >= MIN_INITIAL)]
    single = []
    for gene, sub in tg.groupby("gene", sort=True):
        x = np.sort(sub["lfc"].to_numpy())
        if len(x) >= 3 and x[0] < -2.0 and np.median(x[1:]) > -0.3:
            single.append(gene)
    # genes one sgRNA carries under a mean (mean LFC past the effect threshold, median not): guide-level noise makes
    # a few in every world; only a median-based gene score is robust to them
    off = set()
    if d.get("expression") is not None:
        ex = d["expression"].set_index("gene")["tpm"]
        off = set(ex.index[ex < NOT_EXPRESSED_TPM])
    expressed = tg[~tg["gene"].isin(off)]
    mean_driven = sorted(gene for gene, sub in expressed.groupby("gene", sort=True)
                         if len(sub) >= 3 and sub["lfc"].mean() <= -MIN_EFFECT and sub["lfc"].median() > -MIN_EFFECT)
    tl = d["library"][d["library"]["category"] == "targeting"]
    per = tl[tl["perfect_matches"] > 1].groupby("Gene").size()
    multi = sorted(per[per >= 2].index)
    off_dep = []
    if d.get("expression") is not None:
        gg = g[(pm <= 1) | (g["category"] != "targeting")]
        t = gene_test(gg, "down")
        off_dep = sorted(t[t["gene"].isin(off) & (t["fdr"] < FDR) & (t["lfc"] <= -MIN_EFFECT)]["gene"])
    meta = d["meta"]
    c = d["counts"].set_index("sgRNA")
    pl = [s for s in meta["samples"] if meta["samples"][s]["condition"] == "plasmid"]
    t0 = samples_of(meta, None, "initial")
    x = c[pl + t0].astype(float)
    n = x / size_factors(x)
    r = np.log2((n[t0].mean(1) + PSEUDO) / (n[pl].mean(1) + PSEUDO))
    return {"single_guide_genes": single, "multi_locus_genes": multi, "not_expressed_depleted": off_dep,
            "n_single_guide_genes": len(single), "n_multi_locus_genes": len(multi),
            "n_not_expressed_depleted": len(off_dep),
            "mean_driven_genes": mean_driven, "n_mean_driven_genes": len(mean_driven),
            "n_multi_match_sgrnas": int((tl["perfect_matches"] > 1).sum()),
            "t0_plasmid_discordant_share": round(float((r.abs() > 1).mean()), 4),
            "gini_plasmid": round(gini(c[pl].to_numpy(float).ravel()), 4),
            "gini_t0": round(gini(c[t0].mean(1).to_numpy(float)), 4)}
