"""Reference analyses of the enhancer track (standard library + numpy/scipy/pandas only: the scripted oracle inlines this
module's source in the sandbox)."""
import json
from pathlib import Path

import numpy as np
import pandas as pd

ERR_SHARE = 1.0       # a one-mismatch neighbour with no more reads than a mapped barcode: a sequencing error of it
BACKGROUND = 0.01     # error barcodes or collisions above this share of barcodes: more than a library's background
MAX_REP_SD = 0.6     # element-level log2 difference of two transfections (robust sd) above this: a failed replicate
MIN_BC = 5             # an element with fewer mapped barcodes than this went through a plasmid bottleneck
WHOLE = 0.9            # a property of >= 90% of rows is a whole-column property
MIN_DNA = 10           # barcodes with fewer plasmid reads than this: their RNA/DNA ratio is not measured
MIN_GOOD_BC = 2        # an element needs this many measured barcodes
PSEUDO = 0.5
OUTLIER_LOG2 = 3.0     # a barcode 8-fold above its element's median barcode ratio: an RNA jackpot, excluded
TOP_N = 20
ACTIVE = 1.0           # log2 activity over the negative controls at or above this: active (two-fold)
FDR = 0.05


def rc(s):
    return s[::-1].translate(str.maketrans("ACGT", "TGCA"))


def _log_mean(t, col):
    return np.log2(t.groupby("element")[col].mean() + 1.0)


def detect(world="."):
    d = Path(world)
    c = pd.read_csv(d / "counts.csv", dtype={"barcode": str})
    m = pd.read_csv(d / "barcode_map.csv", dtype={"barcode": str, "element": str})
    e = pd.read_csv(d / "elements.csv", dtype={"element": str})
    meta = json.loads((d / "meta.json").read_text())
    design = set(e["element"])
    v = {"n_rows": int(len(c)), "n_elements": int(len(e))}
    findings = []
    rna_cols = ["rna_rep1", "rna_rep2"]
    complete = c.dropna(subset=["dna_count"] + rna_cols)

    # barcodes not collapsed: one barcode on several rows
    dup = c["barcode"].duplicated(keep=False)
    v["uncollapsed_barcodes"] = sorted(set(c.loc[dup, "barcode"]))
    v["n_uncollapsed"] = len(v["uncollapsed_barcodes"])
    if v["n_uncollapsed"]:
        findings.append("uncollapsed_barcodes")

    # mapped barcodes without a complete row: a truncated counts file
    mapped = set(m["barcode"])
    v["missing_barcodes"] = sorted(mapped - set(complete["barcode"]))
    v["n_missing"] = len(v["missing_barcodes"])
    if v["n_missing"]:
        findings.append("truncated_table")

    # counted barcodes absent from the association map; a one-mismatch neighbour of a mapped barcode with at most
    # ERR_SHARE of its reads is a sequencing error of that barcode (background of every library), not an unmapped one
    reads = c.groupby("barcode")[["dna_count"] + rna_cols].sum().sum(axis=1)
    errors, unmapped = [], []
    for b in sorted(set(c["barcode"]) - mapped):
        par = [b[:i] + x + b[i + 1:] for i in range(len(b)) for x in "ACGT" if x != b[i]]
        par = [q for q in par if q in mapped]
        if par and any(q not in reads.index or reads[b] <= ERR_SHARE * reads[q] for q in par):
            errors.append(b)
        else:
            unmapped.append(b)
    v["error_barcodes"] = errors
    v["n_error_barcodes"] = len(errors)
    v["error_fraction"] = round(len(errors) / max(len(set(c["barcode"])), 1), 4)
    if v["error_fraction"] > BACKGROUND:
        findings.append("error_barcodes")
    multi = m.groupby("barcode")["element"].nunique()
    v["collided_barcodes"] = sorted(multi.index[multi > 1])
    v["n_collisions"] = len(v["collided_barcodes"])
    v["collision_fraction"] = round(v["n_collisions"] / max(len(multi), 1), 4)
    if v["collision_fraction"] > BACKGROUND:
        findings.append("barcode_collisions")
    v["unmapped_barcodes"] = unmapped
    v["n_unmapped"] = len(v["unmapped_barcodes"])
    # every counted barcode absent from the map, as an analyst may count them before setting the one-mismatch
    # sequencing-error copies of mapped barcodes apart
    v["n_absent_from_map"] = sorted([v["n_unmapped"], v["n_unmapped"] + v["n_error_barcodes"]])
    if v["n_unmapped"]:
        findings.append("unmapped_barcodes")

    # map elements not in the design whose reverse complement is: written on the other strand
    stray = sorted(set(m["element"]) - design)
    v["flipped_elements"] = sorted(rc(x) for x in stray if rc(x) in design)
    v["n_flipped"] = len(v["flipped_elements"])
    v["n_flipped_barcodes"] = int(m["element"].isin(stray).sum())
    if v["n_flipped"]:
        findings.append("strand_flipped")

    # plasmid bottleneck: designed elements with very few mapped barcodes
    per = m[m["element"].isin(design)].groupby("element").size()
    v["bottleneck_elements"] = sorted(per.index[per < MIN_BC])
    v["n_bottleneck"] = len(v["bottleneck_elements"])
    v["median_barcodes_per_element"] = float(per.median())
    if v["n_bottleneck"]:
        findings.append("plasmid_bottleneck")

    # DNA counts no longer integer: already normalised
    dna = complete["dna_count"].to_numpy(dtype=float)
    v["nonint_fraction"] = round(float((np.abs(dna - np.round(dna)) > 1e-9).mean()), 4)
    if v["nonint_fraction"] >= 0.5:
        findings.append("dna_normalised")

    # replicate exported twice
    v["identical_fraction"] = round(float((complete["rna_rep1"] == complete["rna_rep2"]).mean()), 4)
    if v["identical_fraction"] >= WHOLE:
        findings.append("replicate_copy")

    # DNA and RNA columns swapped: plasmid representation varies little between elements, RNA a lot
    j = complete.merge(m.drop_duplicates("barcode"), on="barcode")
    j = j[j.groupby("element")["barcode"].transform("size") >= 3]
    sd = {col: round(float(_log_mean(j, col).std()), 4) for col in ["dna_count"] + rna_cols}
    v["element_sd"] = sd
    v["swapped_with"] = ""
    v["swap_fraction"] = 0.0
    if "dna_normalised" not in findings and sd["dna_count"] > min(sd[r] for r in rna_cols):
        findings.append("swapped_columns")
        v["swapped_with"] = min(rna_cols, key=lambda r: (sd[r], r))
        v["swap_fraction"] = 1.0

    # replicate agreement: element-level log2(RNA/DNA) of the two replicates (elements with >= MIN_BC barcodes)
    jj = j[j.groupby("element")["barcode"].transform("size") >= MIN_BC].groupby("element")[["dna_count"] + rna_cols].sum()
    lr = [np.log2((jj[r] + 1.0) / (jj["dna_count"] + 1.0)) for r in rna_cols]
    v["replicate_r"] = round(float(np.corrcoef(lr[0], lr[1])[0, 1]), 4) if len(jj) > 2 else None
    dd = (lr[0] - lr[1]) - float(np.median(lr[0] - lr[1]))
    v["replicate_diff_sd"] = round(float(1.4826 * np.median(np.abs(dd))), 4) if len(jj) > 2 else None
    # "how many elements are affected" (the L1 prompt's value): the elements whose replicate ratio leaves the median
    # by more than a fold cut-off; analysts choose 1.5- to 3-fold, so the golden is the interval those cut-offs give
    off = np.abs(dd.to_numpy()) if len(jj) > 2 else np.zeros(0)
    v["discordant_elements"] = [int((off > np.log2(3.0)).sum()), int((off > np.log2(1.5)).sum())]
    v["discordant_fraction"] = [round(float((off > np.log2(3.0)).mean()), 4) if len(off) else 0.0,
                                round(float((off > np.log2(1.5)).mean()), 4) if len(off) else 0.0]
    if (v["replicate_diff_sd"] is not None and v["replicate_diff_sd"] > MAX_REP_SD and not v["swapped_with"]
            and "replicate_copy" not in findings):
        findings.append("low_replicate_correlation")

    # corrected plasmid counts for a fixed sample of barcodes
    fixed = complete.copy()
    if v["swapped_with"]:
        fixed["dna_count"] = complete[v["swapped_with"]]
    if "dna_normalised" in findings:
        fixed["dna_count"] = np.round(fixed["dna_count"] * meta["sequenced_reads"]["dna_count"] / 1e6)
    fixed = fixed[fixed["barcode"].isin(mapped)].groupby("barcode", sort=True)["dna_count"].sum()
    keys = list(fixed.index[:: max(len(fixed) // 60, 1)])
    v["corrected_dna"] = {k: int(round(float(fixed[k]))) for k in keys}
    v["findings"] = findings
    return v


# ---------------------------------------------------------------- L2

def load(world="."):
    d = Path(world)
    return (pd.read_csv(d / "counts.csv", dtype={"barcode": str, "element": str}),
            pd.read_csv(d / "elements.csv", dtype={"element": str}))


def outlier_barcodes(t, rna):
    """Barcodes whose log2(RNA/DNA) exceeds their element's median barcode by more than OUTLIER_LOG2 (an RNA jackpot)."""
    lr = np.log2((t[rna] + 1.0) / (t["dna_count"] + 1.0))
    return (lr - lr.groupby(t["element"]).transform("median")) > OUTLIER_LOG2


def ratios(t, el, rna, careful=True, by=None, normalise=True):
    """Per-element log2(RNA/DNA) over the barcodes with >= MIN_DNA plasmid reads and no RNA jackpot (careful) or over
    every barcode (naive); careful: library-size normalised and centred on the median negative control (of the
    element's own `by` group when given), unless `normalise` is False (the filters alone)."""
    if careful:
        t = t[t["dna_count"] >= MIN_DNA]
        t = t[~outlier_barcodes(t, rna)]
    g = t.groupby("element").agg(dna=("dna_count", "sum"), rna=(rna, "sum"), n_bc=("barcode", "size")).reset_index()
    if careful:
        g = g[g["n_bc"] >= MIN_GOOD_BC]
    g = g.merge(el, on="element")
    a = np.log2((g["rna"] + PSEUDO) / (g["dna"] + PSEUDO))
    if careful and normalise:
        a = a + np.log2(t["dna_count"].sum() / t[rna].sum())
        keys = g[by] if by else pd.Series(0, index=g.index)
        neg = g["role"] == "negative_control"
        for k in sorted(set(keys)):
            sel = keys == k
            a[sel] = a[sel] - float(np.median(a[sel & neg]))
    g["activity"] = a
    return g


def top(g, n=TOP_N):
    x = g[g["role"] == "test"].assign(r=g["activity"].round(6))
    return x.sort_values(["r", "element"], ascending=[False, True])["element"].head(n).tolist()


def n_active(g):
    x = g[g["role"] == "test"]
    return int((x["activity"].round(6) >= ACTIVE).sum())


def negligible_offset(g) -> bool:
    """Whether the negative controls' median log2 ratio in `g` lies within two standard errors of 0 (SE of a median:
    1.2533 robust sd / sqrt(n)): an offset that small may be left uncorrected, so the count it gives is right too."""
    from scipy.stats import median_abs_deviation

    neg = g.loc[g["role"] == "negative_control", "activity"].to_numpy(float)
    if len(neg) < 3:
        return False
    se = 1.2533 * float(median_abs_deviation(neg, scale="normal")) / np.sqrt(len(neg))
    return abs(float(np.median(neg))) <= 2.0 * se


def bh(p):
    p = np.asarray(p, dtype=float)
    n = len(p)
    order = np.argsort(p, kind="stable")
    q = p[order] * n / np.arange(1, n + 1)
    q = np.minimum.accumulate(q[::-1])[::-1]
    out = np.empty(n)
    out[order] = np.minimum(q, 1.0)
    return out


def call_careful(t, el):
    """Element-level activity (mean of three replicates' centred log2 ratios); the null is the negative controls'
    own element-level distribution (mean, sd); one-sided normal p, Benjamini-Hochberg over the test elements."""
    from scipy.stats import norm

    reps = [c for c in t.columns if c.startswith("rna_rep")]
    parts = [ratios(t, el, r).set_index("element")["activity"] for r in reps]
    g = ratios(t, el, reps[0])[["element", "role"]].set_index("element")
    g["activity"] = pd.concat(parts, axis=1).mean(axis=1)
    g = g.reset_index()
    neg = g.loc[g["role"] == "negative_control", "activity"]
    mu, sd = float(neg.mean()), float(neg.std(ddof=1))
    test = g[g["role"] == "test"].copy()
    test["p"] = norm.sf((test["activity"] - mu) / sd)
    test["q"] = bh(test["p"].to_numpy())
    active = sorted(test.loc[test["q"].round(8) < FDR, "element"])
    return g, active, round(sd, 4)


def call_naive(t, el):
    """Barcode-level log2 ratios (every replicate) of each element against all negative-control barcodes, Welch t
    one-sided, Benjamini-Hochberg: barcodes treated as independent replicates."""
    from scipy.stats import ttest_ind

    reps = [c for c in t.columns if c.startswith("rna_rep")]
    x = t.merge(el, on="element")
    vals = []
    for r in reps:
        lr = np.log2((x[r] + 1.0) / (x["dna_count"] + 1.0))
        vals.append(lr - float(np.median(lr[x["role"] == "negative_control"])))
    long = pd.DataFrame({"element": np.tile(x["element"], len(reps)), "role": np.tile(x["role"], len(reps)),
                         "lr": np.concatenate([v.to_numpy() for v in vals])})
    negv = long.loc[long["role"] == "negative_control", "lr"].to_numpy()
    rows = []
    for name, grp in long[long["role"] == "test"].groupby("element", sort=True):
        p = ttest_ind(grp["lr"].to_numpy(), negv, equal_var=False, alternative="greater").pvalue
        rows.append((name, float(grp["lr"].mean()), float(p)))
    test = pd.DataFrame(rows, columns=["element", "activity", "p"])
    test["q"] = bh(test["p"].fillna(1.0).to_numpy())
    g = long.groupby(["element", "role"], sort=True)["lr"].mean().reset_index().rename(columns={"lr": "activity"})
    return g, sorted(test.loc[test["q"].round(8) < FDR, "element"])


def g5_effect(g):
    x = g[g["role"] == "test"]
    m = x["element"].str[7] == "G"
    return round(float(x.loc[m, "activity"].mean() - x.loc[~m, "activity"].mean()), 4)
