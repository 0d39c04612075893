"""L3 dossiers for the histone track, generated from the substrate's reads by the reference promoter analysis.

Per gene: H3K4me3 log2 ChIP/input CPM in TSS +-1 kb and H3K27me3 log2 ChIP/input CPM in TSS +-2.5 kb (fragment
centres, pseudocount 0.5 CPM), expression (TPM). A promoter is H3K4me3-marked at log2 enrichment >= 2 and
H3K27me3-marked at >= 0.58 (1.5-fold). The `bivalent` and `polycomb_repression` dossiers inject nothing: they report
relationships really present in the data. The `active_k27_injected` dossier is the same table with one edit
(`inject_active_k27`): promoter H3K27me3 raised at the most highly expressed genes.
Both describe the substrate's differentiated (K562-like) cell line: bivalent promoters are the textbook feature of
pluripotent cells, so the `bivalent` dossier is counter-prior only where the cells are NOT pluripotent (the
generative model keeps a bivalent gene class in every cell type; see worlds/histone/build.py).
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def _signal(d, chip_key: str, inp_key: str, half: int) -> np.ndarray:
    tot = {}
    for k in (chip_key, inp_key):
        lib = d.libs[k]
        tot[k] = len(lib)
    cidx = {c: i for i, (c, _) in enumerate(d.chroms)}
    vals = {}
    for k in (chip_key, inp_key):
        lib = d.libs[k]
        cen = lib.start + lib.flen // 2
        v = np.zeros(len(d.genes))
        for c, sub in d.genes.groupby("chrom"):
            x = np.sort(cen[lib.chrom == cidx[c]])
            t = sub.tss.to_numpy()
            v[sub.index.to_numpy()] = np.searchsorted(x, t + half, "right") - np.searchsorted(x, t - half, "left")
        vals[k] = v / tot[k] * 1e6
    return np.log2((vals[chip_key] + 0.5) / (vals[inp_key] + 0.5))


def gene_table(d) -> pd.DataFrame:
    g = d.genes.reset_index(drop=True)
    t = pd.DataFrame({"gene_id": g.gene_id, "chrom": g.chrom, "tss": g.tss, "gene_expression_tpm": g.gene_expression})
    t["h3k4me3_promoter_log2enr"] = np.round(_signal(d, "H3K4me3_chip", "H3K4me3_input", 1000), 3)
    t["h3k27me3_promoter_log2enr"] = np.round(_signal(d, "H3K27me3_chip", "H3K27me3_input", 2500), 3)
    t["h3k4me3_marked"] = t.h3k4me3_promoter_log2enr >= 2
    t["h3k27me3_marked"] = t.h3k27me3_promoter_log2enr >= 0.58
    return t


def summary(t: pd.DataFrame) -> dict:
    k4, k27 = t.h3k4me3_marked, t.h3k27me3_marked
    expressed = t.gene_expression_tpm >= 5
    biv = k4 & k27
    from scipy.stats import spearmanr  # imported where used: listing the dossier's module costs no scipy.stats

    return {
        "n_genes": int(len(t)),
        "spearman_h3k4me3_expression": round(float(spearmanr(t.h3k4me3_promoter_log2enr, t.gene_expression_tpm).statistic), 3),
        "spearman_h3k27me3_expression": round(float(spearmanr(t.h3k27me3_promoter_log2enr, t.gene_expression_tpm).statistic), 3),
        "n_h3k4me3_marked": int(k4.sum()),
        "n_h3k4me3_marked_not_expressed": int((k4 & ~expressed).sum()),
        "n_bivalent": int(biv.sum()),
        "median_tpm_bivalent": round(float(t.gene_expression_tpm[biv].median()), 3) if biv.any() else None,
        "median_tpm_k4_only": round(float(t.gene_expression_tpm[k4 & ~k27].median()), 3),
        "median_tpm_k27_only": round(float(t.gene_expression_tpm[k27 & ~k4].median()), 3),
        "n_h3k27me3_marked": int(k27.sum()),
        "fraction_k27_marked_not_expressed": round(float(np.mean(~expressed[k27])), 3),
        "fraction_expressed_k27_marked": round(float(np.mean(k27[expressed])), 3),
    }


def inject_active_k27(t: pd.DataFrame, rng: np.random.Generator, n_genes: int, log2enr: float) -> tuple[pd.DataFrame, list[str]]:
    """The injection of the `active_k27_injected` dossier: the promoter H3K27me3 log2 enrichment of the `n_genes` most
    highly expressed genes (ties broken by gene_id) is set to `log2enr` + N(0, 0.12), rounded to 3 decimals. Nothing
    else changes: their H3K4me3 and expression, and every other gene's values, are the reference analysis's."""
    t = t.copy()
    top = t.sort_values(["gene_expression_tpm", "gene_id"], ascending=[False, True]).head(int(n_genes))
    idx = top.index.sort_values()
    t.loc[idx, "h3k27me3_promoter_log2enr"] = np.round(log2enr + rng.normal(0, 0.12, len(idx)), 3)
    t["h3k27me3_marked"] = t.h3k27me3_promoter_log2enr >= 0.58
    return t, sorted(t.gene_id[idx].tolist())


def make_dossier(d, kind: str, rng: np.random.Generator | None = None, inject: dict | None = None) -> dict:
    t = gene_table(d)
    injected: list[str] = []
    if inject:
        t, injected = inject_active_k27(t, rng, **inject)
    s = summary(t)
    common = (
        f"# Evidence dossier\n\nSample: {d.cell_type}; ChIP-seq of H3K4me3 and H3K27me3 with matched inputs and RNA-seq "
        f"of the same cells, {len(t)} genes on a {sum(l for _, l in d.chroms) / 1e6:.1f} Mb {d.build} chromosome panel "
        "(chr19, chr20, chr21 windows).\n\nMethod: per gene, promoter enrichment = log2 ChIP/input (CPM, pseudocount 0.5) "
        "in TSS +-1 kb (H3K4me3) or TSS +-2.5 kb (H3K27me3); a promoter is called H3K4me3-marked at log2 enrichment "
        ">= 2 and H3K27me3-marked at >= 0.58 (1.5-fold). Expressed = TPM >= 5. The full table is evidence/promoter_marks.csv.\n\n"
    )
    if kind == "bivalent":
        biv = t[t.h3k4me3_marked & t.h3k27me3_marked].sort_values("h3k4me3_promoter_log2enr", ascending=False)
        body = (
            "## Findings\n\n"
            f"1. Across all genes, promoter H3K4me3 enrichment correlates with expression (Spearman rho = "
            f"{s['spearman_h3k4me3_expression']}).\n"
            f"2. However, {s['n_h3k4me3_marked_not_expressed']} of {s['n_h3k4me3_marked']} H3K4me3-marked promoters "
            "belong to genes that are not expressed (TPM < 5).\n"
            f"3. {s['n_bivalent']} promoters carry both H3K4me3 and H3K27me3; their median expression is "
            f"{s['median_tpm_bivalent']} TPM, versus {s['median_tpm_k4_only']} TPM for H3K4me3-only promoters and "
            f"{s['median_tpm_k27_only']} TPM for H3K27me3-only promoters.\n"
            "4. At these dual-marked promoters the H3K4me3 peak is typically lower than at highly expressed genes "
            "but well above input.\n\n## Dual-marked promoters (top 15 by H3K4me3)\n\n"
            + biv.head(15)[["gene_id", "gene_expression_tpm", "h3k4me3_promoter_log2enr", "h3k27me3_promoter_log2enr"]]
            .to_string(index=False) + "\n"
        )
    elif kind == "polycomb_repression":
        body = (
            "## Findings\n\n"
            f"1. {s['n_h3k27me3_marked']} promoters lie in H3K27me3-enriched regions; {s['fraction_k27_marked_not_expressed'] * 100:.0f}% "
            "of them belong to genes that are not expressed (TPM < 5).\n"
            f"2. Only {s['fraction_expressed_k27_marked'] * 100:.0f}% of expressed genes carry promoter H3K27me3.\n"
            f"3. Promoter H3K27me3 enrichment is anti-correlated with expression (Spearman rho = "
            f"{s['spearman_h3k27me3_expression']}); H3K4me3 is positively correlated (rho = {s['spearman_h3k4me3_expression']}).\n"
            "4. The H3K27me3 signal forms broad domains (10-100 kb) spanning the promoters and bodies of the silent genes.\n"
        )
    elif kind == "active_k27_injected":
        top = t.sort_values(["gene_expression_tpm", "gene_id"], ascending=[False, True]).head(15)
        hi = t.sort_values(["gene_expression_tpm", "gene_id"], ascending=[False, True]).head(10)
        k = int((hi.h3k27me3_marked).sum())
        body = (
            "## Findings\n\n"
            f"1. Promoter H3K27me3 enrichment is anti-correlated with expression across all genes (Spearman rho = "
            f"{s['spearman_h3k27me3_expression']}); H3K4me3 is positively correlated (rho = {s['spearman_h3k4me3_expression']}).\n"
            f"2. {s['n_h3k27me3_marked']} promoters are H3K27me3-marked; {s['fraction_k27_marked_not_expressed'] * 100:.0f}% "
            "of them belong to genes that are not expressed (TPM < 5).\n"
            f"3. Yet {k} of the 10 most highly expressed genes of the panel carry promoter H3K27me3 (log2 enrichment "
            f"{hi.h3k27me3_promoter_log2enr[hi.h3k27me3_marked].min():.2f}-{hi.h3k27me3_promoter_log2enr.max():.2f}) together "
            "with the strongest H3K4me3 of the panel.\n"
            f"4. {s['n_bivalent']} promoters carry both marks; their median expression is {s['median_tpm_bivalent']} TPM, "
            f"versus {s['median_tpm_k4_only']} TPM for H3K4me3-only promoters.\n\n"
            "## The 15 most highly expressed genes\n\n"
            + top[["gene_id", "chrom", "tss", "gene_expression_tpm", "h3k4me3_promoter_log2enr", "h3k27me3_promoter_log2enr"]]
            .to_string(index=False) + "\n"
        )
    else:
        raise ValueError(f"unknown dossier kind {kind!r}")
    out = t.drop(columns=["h3k4me3_marked", "h3k27me3_marked"])
    return {"files": {"dossier.md": common + body, "evidence/promoter_marks.csv": out}, "summary": s, "injected": injected}
