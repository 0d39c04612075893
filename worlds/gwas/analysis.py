"""Reference analyses of the gwas track (standard library + numpy/scipy/pandas only: the scripted oracle inlines this
module's source in the sandbox)."""
import json
from pathlib import Path

import numpy as np
import pandas as pd

COMP = {"A": "T", "T": "A", "C": "G", "G": "C"}
GWS = 5e-8
AF_TOL = 0.15          # |AF1 - expected| above this: the frequency belongs to the other allele
FRACTION_ALL = 0.9     # an edit on >= 90% of SNPs is a whole-column problem
BUILD_MATCH = 0.5      # fewer than half the positions in the GRCh37 panel: another build
MIN_OR_ROWS = 10       # SNPs whose P follows ln(BETA)/SE, not BETA/SE, before odds ratios are a finding
PAL_MAF = 0.4          # palindromic (A/T, C/G) SNPs with panel MAF at or above this: strand ambiguous by frequency


def read(path) -> pd.DataFrame:
    t = pd.read_csv(path, sep="\t")
    t["SNP"] = t["CHR"].astype(str) + ":" + t["POS"].astype(str)
    return t


def detect(world: str = ".") -> dict:
    d = Path(world)
    t = read(d / "sumstats.tsv")
    panel = pd.read_csv(d / "panel.tsv", sep="\t")
    panel["SNP"] = panel["CHR"].astype(str) + ":" + panel["POS"].astype(str)
    v = {"n_rows": int(len(t))}
    findings = []
    dup = t["SNP"].duplicated(keep="first")
    v["n_duplicate_rows"] = int(dup.sum())
    v["duplicate_fraction"] = round(float(dup.mean()), 4)
    v["duplicated_snps"] = sorted(set(t.loc[dup, "SNP"]))
    if dup.any():
        findings.append("duplicate_rows")
    t = t[~dup].reset_index(drop=True)
    m = t.merge(panel[["SNP", "REF", "ALT", "EUR_AF"]], on="SNP", how="left")
    matched = m["REF"].notna()
    v["panel_match_fraction"] = round(float(matched.mean()), 4)
    v["n_unmatched"] = int((~matched).sum())
    v["unmatched_fraction"] = round(float((~matched).mean()), 4)
    if matched.mean() < BUILD_MATCH:
        findings.append("build_mismatch")
    m = m[matched].reset_index(drop=True)
    same = ((m["A1"] == m["ALT"]) & (m["A2"] == m["REF"])) | ((m["A1"] == m["REF"]) & (m["A2"] == m["ALT"]))
    c1, c2 = m["A1"].map(COMP), m["A2"].map(COMP)
    flip = ~same & (((c1 == m["ALT"]) & (c2 == m["REF"])) | ((c1 == m["REF"]) & (c2 == m["ALT"])))
    v["strand_flipped_snps"] = sorted(m.loc[flip, "SNP"])
    v["n_strand_flipped"] = int(flip.sum())
    if flip.any():
        findings.append("strand_flip")
    a1 = m["A1"].where(~flip, c1)
    exp = np.where(a1 == m["ALT"], m["EUR_AF"], 1 - m["EUR_AF"])
    af = m["AF1"].to_numpy(float)
    ok = (same | flip).to_numpy()
    other = ok & (np.abs(af - exp) > AF_TOL) & (np.abs(af - (1 - exp)) < AF_TOL)
    frac_other = float(other.sum() / max(ok.sum(), 1))
    v["af_other_allele_fraction"] = round(frac_other, 4)
    v["n_af_other_allele"] = int(other.sum())
    # palindromic (A/T, C/G) SNPs: their letters read the same on both strands, so only the frequency tells the strand;
    # where the panel MAF is below PAL_MAF, AF1 nearer the panel frequency of the other allele means the reverse strand
    pal = ok & (m["A1"].map(COMP) == m["A2"]).to_numpy()
    eur = m["EUR_AF"].to_numpy(float)
    amb = pal & (np.minimum(eur, 1 - eur) >= PAL_MAF)
    pal_flip = pal & ~amb & (np.abs(af - (1 - exp)) < np.abs(af - exp))
    v["n_palindromic"] = int(pal.sum())
    v["palindromic_fraction"] = round(float(pal.sum() / max(len(m), 1)), 4)
    v["n_palindromic_ambiguous"] = int(amb.sum())
    v["palindromic_flipped_snps"] = sorted(m.loc[pal_flip, "SNP"])
    v["n_palindromic_flipped"] = int(pal_flip.sum())
    v["palindromic_flipped_fraction"] = round(float(pal_flip.sum() / max(len(t), 1)), 4)
    # missing values written as 0
    zero = (m["SE"] <= 0) | ((m["BETA"] == 0) & (m["P"] >= 1))
    v["zero_snps"] = sorted(m.loc[zero, "SNP"])
    v["n_zero"] = int(zero.sum())
    v["zero_fraction"] = round(float(zero.mean()), 4)
    if zero.any():
        findings.append("missing_zero")
    good = ~zero.to_numpy()
    if frac_other >= FRACTION_ALL:
        findings.append("complemented_eaf")
        v["n_complemented"] = int(other.sum())
    elif (other & ~pal).any():
        findings.append("allele_swap")
        v["swapped_snps"] = sorted(m.loc[other, "SNP"])
        v["n_swapped"] = int(other.sum())
    elif pal_flip.any():   # only palindromic SNPs read against the other allele: reverse strand, not label swaps
        findings.append("palindromic_strand")
    # P against BETA/SE
    from scipy.stats import norm as _norm  # imported where used: the harness imports this module for its cells

    p = m["P"].to_numpy(float)
    b_col, se = m["BETA"].to_numpy(float), m["SE"].to_numpy(float)

    def disagree(z):  # P against 2 Phi(-|z|), on the log scale
        p_exp = 2 * _norm.sf(np.abs(z))
        return good & (np.abs(np.log10(np.clip(p, 1e-300, None)) - np.log10(np.clip(p_exp, 1e-300, None))) > 0.05)

    positive = good & (b_col > 0)
    with np.errstate(divide="ignore", invalid="ignore"):  # SE written as 0 (missing_zero) is outside `good`
        raw_bad = disagree(b_col / se)
        z_ln = np.log(np.where(positive, b_col, 1.0)) / se
    v["n_beta_positive"] = int(positive.sum())
    v["beta_median"] = round(float(np.median(b_col[good])), 4) if good.any() else 0.0
    v["beta_or_fraction"] = 0.0
    v["n_beta_or"] = 0
    # odds ratios under a BETA header, row by row (a table merged from two pipelines may carry them for part of its
    # SNPs): P follows ln(BETA)/SE and not BETA/SE; a sound log odds ratio is never read so, since its ln is undefined
    # or its P would disagree. Read as log odds ratios, those rows' P is consistent again
    as_or = positive & ~disagree(z_ln) & raw_bad
    bad_p = raw_bad
    if as_or.sum() >= MIN_OR_ROWS:
        findings.append("odds_ratio")
        v["beta_or_fraction"] = round(float(as_or[good].mean()), 4)
        v["n_beta_or"] = int(as_or.sum())
        v["p_inconsistent_raw_fraction"] = round(float(raw_bad[good].mean()), 4)
        v["beta_or_snps"] = sorted(m.loc[as_or, "SNP"])
        bad_p = raw_bad & ~as_or
    v["p_inconsistent_fraction"] = round(float(bad_p[good].mean()), 4) if good.any() else 0.0
    v["n_p_above_1"] = int((p > 1).sum())
    v["n_p_inconsistent"] = int(bad_p.sum())
    if v["p_inconsistent_fraction"] > 0.5:
        findings.append("log10_p")
    # a whole-column edit touches every row: the SNPs whose P disagrees are its least count (a -log10 P near 0.4 reads as
    # its own P by chance), every row its greatest, and an analyst may give either
    v["p_affected_range"] = [v["n_p_inconsistent"], int(good.sum())]
    v["p_affected_fraction_range"] = [v["p_inconsistent_fraction"], 1.0 if good.any() else 0.0]
    # corrected reference rows: a sample of SNPs with their right A1 (panel strand), BETA, AF1, P
    corr = {}
    sel = np.flatnonzero(ok & good)
    extra = np.flatnonzero(other | flip.to_numpy() | (as_or & ~as_or.all())).tolist()[:40]
    for i in sel[:: max(len(sel) // 40, 1)][:40].tolist() + extra:
        r = m.iloc[i]
        allele = a1.iloc[i]
        beta, f = float(r["BETA"]), float(r["AF1"])
        if as_or[i]:
            beta = float(np.log(beta))
        if other[i] and frac_other < FRACTION_ALL:   # labels swapped: BETA/AF1 belong to A2
            allele = COMP[r["A2"]] if flip.iloc[i] else r["A2"]
        if other[i] and frac_other >= FRACTION_ALL:
            f = 1 - f
        pv = float(r["P"])
        if "log10_p" in findings:
            pv = float(10 ** -pv)
        corr[r["SNP"]] = {"A1": allele, "BETA": beta, "AF1": round(f, 4), "P": pv}
    v["corrected_rows"] = dict(sorted(corr.items()))
    v["n_snps_checked"] = int(len(m))
    return {"findings": sorted(set(findings)), **v}


# ---------------------------------------------------------------- L2

def gc_table(t: pd.DataFrame) -> tuple[pd.DataFrame, float]:
    from scipy.stats import chi2 as _chi2

    chi = (t["BETA"] / t["SE"]) ** 2
    lam = float(np.median(chi) / float(_chi2.ppf(0.5, 1)))  # the 1-df chi-square median, 0.4549
    c = chi / max(lam, 1.0)
    out = pd.DataFrame({"SNP": t["SNP"], "chisq": c, "p": _chi2.sf(c, 1)})
    return out, lam


def align(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Study B's effects expressed for study A's A1 (same allele, the other allele, or either on the other strand)."""
    m = a.merge(b, on="SNP", suffixes=("_a", "_b"))
    same = (m["A1_a"] == m["A1_b"]) & (m["A2_a"] == m["A2_b"])
    swap = (m["A1_a"] == m["A2_b"]) & (m["A2_a"] == m["A1_b"])
    c1, c2 = m["A1_b"].map(COMP), m["A2_b"].map(COMP)
    fsame = (m["A1_a"] == c1) & (m["A2_a"] == c2)
    fswap = (m["A1_a"] == c2) & (m["A2_a"] == c1)
    sign = np.select([same | fsame, swap | fswap], [1.0, -1.0], 0.0)
    m["BETA_b"] = m["BETA_b"] * sign
    return m[sign != 0].reset_index(drop=True)


def meta_table(a: pd.DataFrame, b: pd.DataFrame, aligned: bool = True, rho: float = 0.0,
               gls: bool = False) -> pd.DataFrame:
    """Fixed-effect inverse-variance meta-analysis; `rho`, the correlation of the two studies' sampling errors (shared
    samples), adds the covariance term: var = (wa + wb + 2 rho sqrt(wa wb)) / (wa + wb)^2 (Lin & Sullivan 2009).
    `gls`: the generalised (covariance-weighted) fixed effect instead, weights 1' Sigma^-1 with Sigma's off-diagonal
    rho sa sb: the minimum-variance pooled effect, var = 1 / (1' Sigma^-1 1); the same as inverse-variance at rho 0."""
    from scipy.stats import norm as _norm

    m = align(a, b) if aligned else a.merge(b, on="SNP", suffixes=("_a", "_b"))
    wa, wb = 1 / m["SE_a"] ** 2, 1 / m["SE_b"] ** 2
    beta = (wa * m["BETA_a"] + wb * m["BETA_b"]) / (wa + wb)
    se = np.sqrt(wa + wb + 2 * rho * np.sqrt(wa * wb)) / (wa + wb)
    if gls:
        va, vb = m["SE_a"] ** 2, m["SE_b"] ** 2
        cov = rho * m["SE_a"] * m["SE_b"]
        ga, gb = vb - cov, va - cov  # Sigma^-1 1, up to the determinant
        beta = (ga * m["BETA_a"] + gb * m["BETA_b"]) / (ga + gb)
        se = np.sqrt((va * vb - cov ** 2) / (ga + gb))
    return pd.DataFrame({"SNP": m["SNP"], "beta": beta, "se": se, "p": 2 * _norm.sf(np.abs(beta / se))})


def error_correlation(a: pd.DataFrame, b: pd.DataFrame, z_max: float = 3.0) -> tuple[float, float]:
    """(rho, its standard error): the correlation of the two studies' z-scores (B aligned to A) over the SNPs with
    |z| < z_max in both, nearly all without a true effect, where shared samples are the only source of correlation
    (Lin & Sullivan 2009; the cross-trait LD-score intercept measures the same). At z_max 3 the true effects that
    remain add about 0.03 and the truncation takes about 0.01 off a rho of 0.5 (measured on these worlds: 4 lets
    more true effects in, 2 cuts rho by a fifth)."""
    m = align(a, b)
    za, zb = m["BETA_a"] / m["SE_a"], m["BETA_b"] / m["SE_b"]
    keep = (za.abs() < z_max) & (zb.abs() < z_max)
    n = int(keep.sum())
    return float(np.corrcoef(za[keep], zb[keep])[0, 1]), float(1 / np.sqrt(max(n - 3, 1)))


OVERLAP_Z = 2.58  # an error correlation is corrected for only where it is significant (one-sided, 99.5%)


def overlap_rho(a: pd.DataFrame, b: pd.DataFrame) -> tuple[float, float, float]:
    """(the rho to pool with, the estimate, its SE): the estimated error correlation where it exceeds OVERLAP_Z SEs
    (shared samples), else 0 (independent studies: a correlation of noise is no reason to widen every SE)."""
    rho, se = error_correlation(a, b)
    return (rho if rho > OVERLAP_Z * se else 0.0), rho, se


def clump(t: pd.DataFrame, ld: pd.DataFrame, r2: float = 0.1, kb: int = 500) -> list[str]:
    """PLINK-style clumping: significant SNPs by ascending P; each lead absorbs the significant SNPs within `kb` with
    r^2 >= r2 (pairs absent from ld.tsv have r^2 < 0.01)."""
    sig = t[t["P"] < GWS].sort_values(["P", "SNP"]).reset_index(drop=True)
    pairs = {}
    for a_, b_, r in zip(ld["SNP_A"], ld["SNP_B"], ld["R2"]):
        pairs[(a_, b_)] = pairs[(b_, a_)] = float(r)
    pos = dict(zip(sig["SNP"], zip(sig["CHR"], sig["POS"])))
    taken, leads = set(), []
    for s in sig["SNP"]:
        if s in taken:
            continue
        leads.append(s)
        taken.add(s)
        for o in sig["SNP"]:
            if o not in taken and pos[o][0] == pos[s][0] and abs(pos[o][1] - pos[s][1]) <= kb * 1000 \
                    and pairs.get((s, o), 0.0) >= r2:
                taken.add(o)
    return sorted(leads)


def ldsc(t: pd.DataFrame, scores: pd.DataFrame, n_blocks: int = 25) -> dict:
    """LD-score regression (Bulik-Sullivan et al. 2015) of chi2 = (BETA/SE)^2 on N l_j / M: weighted least squares
    with the LDSC weights 1 / (max(l, 1) (I + N h l / M)^2), refitted twice from I = 1; SNPs with chi2 > max(80,
    0.001 N) dropped; standard errors from a block jackknife over `n_blocks` contiguous blocks of SNPs."""
    m = t.merge(scores[["CHR", "POS", "L2"]], on=["CHR", "POS"]).sort_values(["CHR", "POS"]).reset_index(drop=True)
    chi = ((m["BETA"] / m["SE"]) ** 2).to_numpy(float)
    n, ell = m["N"].to_numpy(float), m["L2"].to_numpy(float)
    keep = chi <= max(80.0, 0.001 * float(np.median(n)))
    chi, n, ell = chi[keep], n[keep], ell[keep]
    M = len(chi)

    def fit(ii):
        x, y, nn = ell[ii], chi[ii], n[ii]
        h = max((y.mean() - 1) * M / (nn.mean() * x.mean()), 0.0)
        i0 = 1.0
        for _ in range(2):
            w = 1.0 / (np.maximum(x, 1.0) * (i0 + nn * h * x / M) ** 2)
            a = np.c_[np.ones(len(ii)), x * nn / M] * np.sqrt(w)[:, None]
            i0, h = np.linalg.lstsq(a, y * np.sqrt(w), rcond=None)[0]
            i0, h = max(float(i0), 0.5), max(float(h), 0.0)
        return np.array([i0, h])

    full = fit(np.arange(M))
    blocks = np.array_split(np.arange(M), n_blocks)
    jk = np.array([fit(np.concatenate([b for k, b in enumerate(blocks) if k != j])) for j in range(n_blocks)])
    se = np.sqrt((n_blocks - 1) / n_blocks * ((jk - jk.mean(0)) ** 2).sum(0))
    from scipy.stats import chi2 as _chi2

    lam = float(np.median((m["BETA"] / m["SE"]) ** 2) / float(_chi2.ppf(0.5, 1)))
    return {"intercept": float(full[0]), "intercept_se": float(se[0]), "slope_h2": float(full[1]),
            "mean_chisq": float(chi.mean()), "lambda_gc": lam, "n_snps": int(M)}


def ldsc_table(t: pd.DataFrame, intercept: float) -> pd.DataFrame:
    """Chi-squares divided by the LD-score intercept when it exceeds 1 (confounding), as they are otherwise."""
    from scipy.stats import chi2 as _chi2

    c = (t["BETA"] / t["SE"]) ** 2 / max(intercept, 1.0)
    return pd.DataFrame({"SNP": t["SNP"], "chisq": c, "p": _chi2.sf(c, 1)})
