"""crispr: sound analyses other than the reference solver's (which is median guide LFC + Mann-Whitney against the
non-targeting guides, BH; worlds/crispr/analysis.py). Written from the public files only, without that module:

- essential:  MAGeCK-like alpha-RRA. Control-sgRNA median-ratio normalisation (MAGeCK --control-sgrna), sgRNA p-values
              from the empirical null of the non-targeting sgRNAs' fold changes, alpha-robust rank aggregation of each
              gene's sgRNA p-values, Monte-Carlo (permutation) p-values, BH. Copy-number bias removed by a robust
              regression of gene fold changes on extra copies (CRISPRcleanR/CERES-like, not the reference's median ratio).
- resistance: gene-level median of count-aware sgRNA z-scores (drug vs vehicle LFC over the sd from its read counts
              plus the non-targeting spread) against an empirical null of random same-size sets of non-targeting
              sgRNAs, BH; the reported LFC is the gene's median sgRNA LFC.
- selective:  two-point scaled fold changes (non-targeting = 0, core-essential positive controls = -1, as BAGEL/
              Hart et al. scale screens), per-sgRNA query - comparison differences, alpha-RRA against the
              non-targeting differences.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from tests.alternatives import alternative

PSEUDO = 0.5
MIN_READS = 20.0          # sgRNAs below this many normalised initial reads (or 10% of the median) are not scored
N_PERM = 20000


def _load(world_dir: Path):
    counts = pd.read_csv(world_dir / "counts.txt", sep="\t").set_index("sgRNA")
    lib = pd.read_csv(world_dir / "library.csv").set_index("sgRNA")
    meta = json.loads((world_dir / "meta.json").read_text())
    cnp = world_dir / "copy_number.csv"
    cn = pd.read_csv(cnp) if cnp.exists() else None
    return counts, lib, meta, cn


def _cols(meta: dict, line: str | None, condition: str) -> list[str]:
    return [n for n, s in meta["samples"].items()
            if s["condition"] == condition and (line is None or line in str(s["cell_line"]).split(","))]


def _norm(counts: pd.DataFrame, lib: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """Median-ratio size factors over the non-targeting sgRNAs (MAGeCK --control-sgrna)."""
    x = counts[cols].astype(float)
    nt = x.loc[lib.index[lib["category"] == "non_targeting"].intersection(x.index)]
    nt = nt[(nt > 0).all(1)]
    lg = np.log(nt)
    sf = np.exp(lg.sub(lg.mean(1), axis=0).median())
    return x / sf


def _lfc(world_dir: Path, line: str, test: str, ref: str) -> pd.DataFrame:
    counts, lib, meta, _ = _load(world_dir)
    ini, tc = _cols(meta, None, "initial"), _cols(meta, line, test)
    rc = ini if ref == "initial" else _cols(meta, line, ref)
    n = _norm(counts, lib, sorted(set(ini + tc + rc)))
    lt = np.log2(n[tc] + PSEUDO).mean(1)
    lr = np.log2(n[rc] + PSEUDO).mean(1)
    # the Poisson (counting) part of each sgRNA's LFC variance, for count-aware scores
    pois = (1 / np.log(2)) ** 2 * (1 / (n[tc].sum(1) + PSEUDO) + 1 / (n[rc].sum(1) + PSEUDO))
    out = pd.DataFrame({"gene": lib.reindex(n.index)["Gene"], "category": lib.reindex(n.index)["category"],
                        "lfc": lt - lr, "reads0": n[ini].mean(1), "pois_var": pois})
    return out[out["reads0"] >= max(MIN_READS, 0.1 * out["reads0"].median())]


def _cn_regress(g: pd.DataFrame, cn: pd.DataFrame | None, line: str) -> pd.DataFrame:
    """Remove the copy-number (cutting) bias, low-level gains included: a robust (Theil-Sen) slope of gene median LFC
    on extra copies, fitted on all targeting genes, subtracted from every sgRNA of a gene with CN > 2."""
    from scipy.stats import theilslopes

    if cn is None:
        return g
    cnl = cn[cn["cell_line"] == line].set_index("gene")["copy_number"]
    med = g[g["category"] == "targeting"].groupby("gene")["lfc"].median()
    extra = (cnl.reindex(med.index).fillna(2) - 2).clip(lower=0)
    if (extra >= 1).sum() < 3:
        return g
    slope = min(theilslopes(med.to_numpy(), extra.to_numpy())[0], 0.0)
    g = g.copy()
    g["lfc"] = g["lfc"] - slope * (g["gene"].map(cnl).fillna(2) - 2).clip(lower=0)
    return g


def _bh(p: np.ndarray) -> np.ndarray:
    from scipy.stats import false_discovery_control

    return false_discovery_control(np.asarray(p, float)) if len(p) else np.asarray(p, float)


def _rra(g: pd.DataFrame, direction: str, seed: int = 7, ranks: bool = False) -> pd.DataFrame:
    """alpha-RRA: sgRNA p-value = share of non-targeting sgRNAs at least as extreme; per gene rho = min over the
    sgRNAs with p <= alpha of the Beta(k, n-k+1) CDF of the k-th smallest p; Monte-Carlo p-value of rho under uniform
    sgRNA p-values (same n); BH."""
    from scipy.stats import beta

    rng = np.random.default_rng(seed)
    nt = np.sort(g.loc[g["category"] == "non_targeting", "lfc"].to_numpy())
    x = g["lfc"].to_numpy()
    if ranks:   # MAGeCK's own scheme: an sgRNA's percentile among ALL scored sgRNAs
        r = pd.Series(x).rank(method="average").to_numpy()
        p = r / len(x) if direction == "down" else (len(x) - r + 1) / len(x)
    elif direction == "down":
        p = (np.searchsorted(nt, x, side="right") + 1) / (len(nt) + 1)
    else:
        p = (len(nt) - np.searchsorted(nt, x, side="left") + 1) / (len(nt) + 1)
    g = g.assign(p=p)
    alpha = 0.25

    def rho(u: np.ndarray) -> np.ndarray:   # u: (m, n) sorted along axis 1
        n = u.shape[1]
        k = np.arange(1, n + 1)
        b = beta.cdf(u, k, n - k + 1)
        b = np.where(u <= alpha, b, 1.0)
        return b.min(1)

    null: dict[int, np.ndarray] = {}
    rows = []
    for gene, sub in g[g["category"] == "targeting"].groupby("gene", sort=True):
        n = len(sub)
        if n < 3:
            continue
        r = rho(np.sort(sub["p"].to_numpy())[None, :])[0]
        if n not in null:
            null[n] = np.sort(rho(np.sort(rng.random((N_PERM, n)), axis=1)))
        pv = (np.searchsorted(null[n], r, side="right") + 1) / (N_PERM + 1)
        rows.append({"gene": gene, "lfc": float(np.median(sub["lfc"])), "n_sgrnas": n, "p": float(pv)})
    t = pd.DataFrame(rows)
    t["fdr"] = _bh(t["p"].to_numpy())
    return t


def _median_null(g: pd.DataFrame, direction: str, seed: int = 11) -> pd.DataFrame:
    """Gene median LFC against the medians of random same-size sets of non-targeting sgRNAs (empirical null)."""
    rng = np.random.default_rng(seed)
    nt = g.loc[g["category"] == "non_targeting", "lfc"].to_numpy()
    null: dict[int, np.ndarray] = {}
    rows = []
    for gene, sub in g[g["category"] == "targeting"].groupby("gene", sort=True):
        n = len(sub)
        if n < 3:
            continue
        if n not in null:
            idx = np.argsort(rng.random((N_PERM, len(nt))), axis=1)[:, :n]
            null[n] = np.sort(np.median(nt[idx], axis=1))
        m = float(np.median(sub["lfc"]))
        ext = N_PERM - np.searchsorted(null[n], m, side="left") if direction == "up" else np.searchsorted(null[n], m, side="right")
        rows.append({"gene": gene, "lfc": m, "n_sgrnas": n, "p": float((ext + 1) / (N_PERM + 1))})
    t = pd.DataFrame(rows)
    t["fdr"] = _bh(t["p"].to_numpy())
    return t


def _report(t: pd.DataFrame, out: Path, direction: str, method: dict, issues: list[str]) -> dict:
    sig = t["fdr"] < 0.05
    eff = t["lfc"] <= -0.5 if direction == "down" else t["lfc"] >= 0.5
    hits = sorted(t.loc[sig & eff, "gene"])
    t[["gene", "lfc", "fdr"]].round({"lfc": 4}).to_csv(out / "gene_results.csv", index=False)
    return {"hits": hits, "n_hits": len(hits), "gene_table": "gene_results.csv", "method": method,
            "issues_found": issues, "analysis_usable": True, "summary": f"{len(hits)} hits at FDR 5%"}


def _issues(g: pd.DataFrame, world_dir: Path, line: str) -> list[str]:
    """What an expert would note from the data (data-driven, only what is seen)."""
    counts, lib, meta, cn = _load(world_dir)
    out = []
    x = counts[_cols(meta, None, "initial")].astype(float).mean(1)
    if (x < MIN_READS * x.median() / 300).mean() > 0.03:
        out.append("low-count (under-represented) sgRNAs in the initial library were filtered out before testing")
    if cn is not None and (cn[cn["cell_line"] == line]["copy_number"] >= 6).sum() >= 3:
        out.append("amplified genes deplete by copy-number cutting toxicity: corrected by regression on copy number")
    return out


def _essential(world_dir: Path, out: Path, ranks: bool, test: str) -> dict:
    """Gene-level RRA of depletion after copy-number regression; `ranks`: sgRNA ranks among all sgRNAs instead of
    empirical p-values against the non-targeting sgRNAs."""
    _, _, meta, cn = _load(world_dir)
    line = meta["task"]["cell_line"]
    g = _cn_regress(_lfc(world_dir, line, "final", "initial"), cn, line)
    t = _rra(g, "down", ranks=ranks)
    issues = _issues(g, world_dir, line)
    if g[g["category"] == "targeting"]["lfc"].median() < -0.5:
        issues.append("strong, widespread depletion: most sgRNAs deplete, so I normalised to the non-targeting controls")
    return _report(t, out, "down", {"normalization": "median ratio over non-targeting sgRNAs",
                                    "filtering": f"sgRNAs with < {MIN_READS:.0f} normalised initial reads removed",
                                    "test": test, "corrections": "copy-number regression"}, issues)


@alternative("crispr.L2.essential", "MAGeCK-like alpha-RRA of sgRNA p-values against the non-targeting sgRNAs "
             "(control-sgRNA normalisation, permutation p-values, copy-number regression)",
             ["crispr.L2.essential.clean", "crispr.L2.essential.strong_depletion", "crispr.L2.essential.amplicon",
              "crispr.L2.essential.low_representation"])
def essential_rra(world_dir: Path, out: Path) -> dict:
    return _essential(world_dir, out, False, "alpha-RRA of sgRNA empirical p-values, permutation p-values, BH")


@alternative("crispr.L2.essential", "MAGeCK RRA on sgRNA ranks among all sgRNAs (control-sgRNA normalisation, "
             "alpha 0.25, permutation p-values, copy-number regression); not for focused libraries, where its rank null "
             "(most sgRNAs neutral) fails",
             ["crispr.L2.essential.clean", "crispr.L2.essential.amplicon", "crispr.L2.essential.low_representation"])
def essential_rank_rra(world_dir: Path, out: Path) -> dict:
    return _essential(world_dir, out, True, "RRA of sgRNA ranks among all sgRNAs, permutation p-values, BH")


@alternative("crispr.L2.resistance", "gene median count-aware z-score (drug vs vehicle LFC over its Poisson + "
             "non-targeting spread) against an empirical null of random non-targeting sgRNA sets",
             ["crispr.L2.resistance.clean", "crispr.L2.resistance.proliferation", "crispr.L2.resistance.sensitisation",
              "crispr.L2.resistance.sensitisation_moderate"])
def resistance_median_null(world_dir: Path, out: Path) -> dict:
    _, _, meta, _ = _load(world_dir)
    line = meta["task"]["cell_line"]
    g = _lfc(world_dir, line, "drug", "vehicle")
    # count-aware score: LFC over its sd (Poisson part from the counts + the extra spread of the non-targeting sgRNAs)
    nt = g["category"] == "non_targeting"
    extra = max(float(g.loc[nt, "lfc"].var() - g.loc[nt, "pois_var"].mean()), 0.01)
    z = g.assign(lfc=g["lfc"] / np.sqrt(extra + g["pois_var"]))
    t = _median_null(z, "up")
    t["lfc"] = t["gene"].map(g[g["category"] == "targeting"].groupby("gene")["lfc"].median())
    issues = []
    if g[g["category"] == "targeting"]["lfc"].median() < -0.3:
        issues.append("the drug depletes many knockouts (global depletion): normalised to the non-targeting controls")
    veh = _lfc(world_dir, line, "vehicle", "initial")
    if (veh.groupby("gene")["lfc"].median() > 1).sum() >= 2:
        issues.append("some knockouts enrich in the vehicle arm too (proliferation advantage), so drug is compared "
                      "with vehicle, not with the initial sample")
    return _report(t, out, "up", {"normalization": "median ratio over non-targeting sgRNAs", "filtering":
                                  f"sgRNAs with < {MIN_READS:.0f} normalised initial reads removed",
                                  "test": "gene median LFC vs random non-targeting sets, BH", "corrections": "none"},
                   issues)


@alternative("crispr.L2.selective", "two-point scaled fold changes (non-targeting 0, core essentials -1) and "
             "alpha-RRA of per-sgRNA line differences against the non-targeting differences",
             ["crispr.L2.selective.clean", "crispr.L2.selective.amplicon", "crispr.L2.selective.screen_strength",
              "crispr.L2.selective.low_representation"])
def selective_scaled_rra(world_dir: Path, out: Path) -> dict:
    _, _, meta, cn = _load(world_dir)
    q, o = meta["task"]["query_line"], meta["task"]["comparison_line"]
    sc, gl = {}, {}
    for line in (q, o):
        g = _cn_regress(_lfc(world_dir, line, "final", "initial"), cn, line)
        nt = g.loc[g["category"] == "non_targeting", "lfc"].median()
        pc = g.loc[g["category"] == "positive_control", "lfc"].median()
        sc[line] = float(nt - pc)
        gl[line] = g.assign(lfc=(g["lfc"] - nt) / sc[line])
    both = gl[q].index.intersection(gl[o].index)
    d = gl[q].loc[both].copy()
    d["lfc"] = (gl[q].loc[both, "lfc"] - gl[o].loc[both, "lfc"]) * sc[o]
    t = _rra(d, "down")
    issues = _issues(d, world_dir, q) + _issues(d, world_dir, o)
    if max(sc.values()) / min(sc.values()) > 1.5:
        issues.append(f"the lines' dynamic ranges differ (screen strength {sc[q]:.2f} vs {sc[o]:.2f} log2): "
                      "each line scaled to its core-essential controls before comparing")
    return _report(t, out, "down", {"normalization": "median ratio over non-targeting sgRNAs; per line scaled to "
                                    "non-targeting 0 and positive controls -1", "filtering": "low initial reads",
                                    "test": "alpha-RRA of per-sgRNA differences vs non-targeting differences",
                                    "corrections": "copy-number regression"}, sorted(set(issues)))


@alternative("crispr.L2.guide_level", "RIGER-like second-best sgRNA score (the second most depleted sgRNA of each "
             "gene, T0 reference, multi-match sgRNAs and non-expressed genes excluded) against an empirical null of "
             "random non-targeting sgRNA sets, BH; gene LFC = median sgRNA LFC",
             ["crispr.L2.guide_level.clean", "crispr.L2.guide_level.single_guide", "crispr.L2.guide_level.multi_locus",
              "crispr.L2.guide_level.non_expressed", "crispr.L2.guide_level.plasmid_reference"])
def guide_level_second_best(world_dir: Path, out: Path, seed: int = 5) -> dict:
    """Endpoint vs T0 (the sample of condition 'initial'; never the plasmid), control-sgRNA normalisation, low-T0 filter,
    sgRNAs with > 1 perfect-match site dropped, genes with TPM < 1 untested; gene score = its second-lowest sgRNA LFC
    (Luo et al. 2008's second-best rank: two concordant reagents needed), p = share of random same-size sets of
    non-targeting sgRNAs whose second-lowest LFC is at least as low; BH."""
    _, lib, meta, _ = _load(world_dir)
    line = meta["task"]["cell_line"]
    g = _lfc(world_dir, line, "final", "initial")
    pm = lib.reindex(g.index)["perfect_matches"].fillna(1)
    g = g[~((pm > 1) & (g["category"] == "targeting"))]
    ex = pd.read_csv(world_dir / "expression.csv").set_index("gene")["tpm"]
    silent = set(ex.index[ex < 1.0])
    g = g[~g["gene"].isin(silent)]
    rng = np.random.default_rng(seed)
    nt = g.loc[g["category"] == "non_targeting", "lfc"].to_numpy()
    null: dict[int, np.ndarray] = {}
    rows = []
    for gene, sub in g[g["category"] == "targeting"].groupby("gene", sort=True):
        x = np.sort(sub["lfc"].to_numpy())
        n = len(x)
        if n < 3:
            continue
        if n not in null:
            idx = np.argsort(rng.random((N_PERM, len(nt))), axis=1)[:, :n]
            null[n] = np.sort(np.sort(nt[idx], axis=1)[:, 1])
        ext = np.searchsorted(null[n], x[1], side="right")
        rows.append({"gene": gene, "lfc": float(np.median(x)), "p": float((ext + 1) / (N_PERM + 1))})
    t = pd.DataFrame(rows)
    t["fdr"] = _bh(t["p"].to_numpy())
    issues = _guide_issues(world_dir, g, lib, silent, line)
    return _report(t, out, "down", {"normalization": "median ratio over non-targeting sgRNAs",
                                    "filtering": "endpoint vs T0; low T0 reads, multi-match sgRNAs and genes with "
                                                 "TPM < 1 removed",
                                    "test": "second-best sgRNA LFC vs random non-targeting sets, BH",
                                    "corrections": "none"}, issues)


def _guide_issues(world_dir: Path, g: pd.DataFrame, lib: pd.DataFrame, silent: set, line: str) -> list[str]:
    """What the second-best analysis sees on the way (data-driven; only what is there)."""
    counts, _, meta, _ = _load(world_dir)
    out = []
    tg = g[g["category"] == "targeting"]
    lone = [gene for gene, sub in tg.groupby("gene") if len(sub) >= 3 and np.sort(sub["lfc"].to_numpy())[0] < -2.0
            and np.median(np.sort(sub["lfc"].to_numpy())[1:]) > -0.3]
    if len(lone) >= 3:
        out.append(f"one outlier sgRNA alone is depleted in {len(lone)} genes; second-best scoring needs two concordant guides")
    tl = lib[lib["category"] == "targeting"]
    per = tl[tl["perfect_matches"] > 1].groupby("Gene").size()
    if (per >= 2).sum() >= 3:
        out.append(f"{int((per >= 2).sum())} genes have sgRNAs with multiple perfect-match sites (multi-cut toxicity): "
                   "those sgRNAs were removed")
    full = _lfc(world_dir, line, "final", "initial")
    full = full[lib.reindex(full.index)["perfect_matches"].fillna(1) <= 1]
    sil = full[full["gene"].isin(silent)].groupby("gene")["lfc"].median()
    if (sil <= -0.5).sum() >= 2:
        out.append(f"{int((sil <= -0.5).sum())} non-expressed genes (TPM < 1) deplete: an off-target / cutting artefact, "
                   "not a dependency; not tested")
    pl = [s for s, v in meta["samples"].items() if v["condition"] == "plasmid"]
    t0 = _cols(meta, None, "initial")
    n = _norm(counts, lib, pl + t0)
    r = np.log2((n[t0].mean(1) + PSEUDO) / (n[pl].mean(1) + PSEUDO))
    if (r.abs() > 1).mean() > 0.05:
        out.append(f"T0 differs from the plasmid for {(r.abs() > 1).mean():.0%} of sgRNAs (transduction bottleneck): "
                   "fold changes are taken against T0")
    return out
