"""Reference analyses of the protein track (standard library + numpy/pandas only: the scripted oracle inlines this
module's source in the sandbox)."""
import json
from pathlib import Path

import numpy as np
import pandas as pd

KJ = 4.184
RT = 0.5925            # kcal/mol at 25 C
TOL = 0.0025           # |ddG - (dG_wt - dG_mut)| within rounding of three decimals
WHOLE = 0.9            # a relation holding for >= 90% of rows is a whole-column property
MIN_INPUT = 10         # input reads below this: the variant's ratio is not measured
PSEUDO = 0.5
TOP_N = 20
SITE_CUT = -1.0        # median binding effect (log2) at or below this: an interface position
EPI_CUT = 1.0          # |epistasis| (kcal/mol) at or above this: an interacting pair


def read_fasta(path) -> str:
    return "".join(line.strip() for line in Path(path).read_text().splitlines() if not line.startswith(">"))


def vkey(pos, wt, mut) -> str:
    return f"{wt}{int(pos)}{mut}"


def detect(world: str = ".") -> dict:
    d = Path(world)
    t = pd.read_csv(d / "stability.csv")
    seq = read_fasta(d / "construct.fasta")
    v = {"n_rows": int(len(t))}
    findings = []
    key = t["position"].astype(str) + t["wt_aa"] + t["mut_aa"]
    dup = key.duplicated(keep="first")
    v["n_duplicate_rows"] = int(dup.sum())
    v["duplicated_variants"] = sorted(set(t.loc[dup, "variant"]))
    if dup.any():
        findings.append("duplicate_variants")
    t = t[~dup].reset_index(drop=True)
    v["n_variants"] = int(len(t))

    def match(shift: int) -> np.ndarray:
        pos = t["position"].to_numpy() - shift
        ok = (pos >= 1) & (pos <= len(seq))
        res = np.array([seq[p - 1] if o else "" for p, o in zip(pos, ok)])
        return res == t["wt_aa"].to_numpy()

    m0 = match(0)
    v["wt_match_fraction"] = round(float(m0.mean()), 4)
    shifts = {s: float(match(s).mean()) for s in range(-6, 7)}
    best = max(sorted(shifts), key=lambda s: (shifts[s], -abs(s)))
    v["offset"], v["neg_offset"] = 0, 0
    if m0.mean() < 0.5 and shifts[best] >= WHOLE:
        findings.append("numbering_offset")
        v["offset"], v["neg_offset"] = int(best), int(-best)
        v["best_shift_match_fraction"] = round(shifts[best], 4)
        m0 = match(best)
    bad = ~m0
    v["n_wt_mismatch"] = int(bad.sum())
    v["mismatch_variants"] = sorted(t.loc[bad, "variant"])
    if bad.any() and bad.mean() < 0.5:
        findings.append("wt_mismatch")
    zero = (t["ddG"] == 0) & (t["dG_mut"] == 0)
    v["n_zero"] = int(zero.sum())
    v["zero_variants"] = sorted(t.loc[zero, "variant"])
    if zero.any():
        findings.append("missing_zero")
    plate_wt = t.groupby("plate")["dG_wt"].median()
    kj_plates = sorted(int(p) for p in plate_wt.index[plate_wt / float(plate_wt.min()) > 2.5])
    kj = t["plate"].isin(kj_plates)
    v["kj_plates"] = sorted(int(p) for p in t.loc[kj, "plate"].unique())
    v["n_kj_rows"] = int(kj.sum())
    v["kj_fraction"] = round(float(kj.mean()), 4)
    v["kj_variants"] = sorted(t.loc[kj, "variant"])
    if kj.any():
        findings.append("kj_units")
    ok = ~zero
    diff = t["dG_wt"] - t["dG_mut"]
    cons = (t["ddG"] - diff).abs() <= TOL * np.where(kj, KJ, 1.0) + 1e-9
    flip = (t["ddG"] + diff).abs() <= TOL * np.where(kj, KJ, 1.0) + 1e-9
    unref = (t["ddG"] - t["dG_mut"]).abs() <= 1e-9
    frac = lambda m: round(float((m & ok).sum() / max(ok.sum(), 1)), 4)  # noqa: E731
    v["consistent_fraction"] = frac(cons)
    v["sign_inconsistent_fraction"] = frac(flip & ~cons)
    v["unreferenced_fraction"] = frac(unref & ~cons)
    if v["sign_inconsistent_fraction"] >= WHOLE:
        findings.append("sign_flip")
    if v["unreferenced_fraction"] >= WHOLE:
        findings.append("unreferenced")
    # corrected reference rows: GB1 numbering, kcal/mol, ddG = dG_wt - dG_mut
    shift = v["offset"]
    corr = {}
    sel = np.flatnonzero((ok & m0).to_numpy())
    for i in sel[:: max(len(sel) // 40, 1)][:40]:
        r = t.iloc[i]
        ddg = float(r["dG_wt"] - r["dG_mut"]) / (KJ if kj.iloc[i] else 1.0)
        corr[vkey(r["position"] - shift, r["wt_aa"], r["mut_aa"])] = round(ddg, 3)
    v["corrected_rows"] = dict(sorted(corr.items()))
    # what the table leaves out (a nuisance, not a defect: a library is a subset of the scan): the single substitutions
    # of residues 2..L (19 each) it does not hold, the size of the protein L1 absent-substitutions nuisance
    v["n_absent_substitutions"] = int(max((len(seq) - 1) * 19 - v["n_variants"], 0))
    return {"findings": sorted(set(findings)), **v}


# ---------------------------------------------------------------- L2 fitness

def fitness_table(t: pd.DataFrame, normalise: bool = True, min_input: int = MIN_INPUT) -> pd.DataFrame:
    wt = t[t["variant"] == "WT"].iloc[0]
    v = t[t["variant"] != "WT"].copy()
    r = np.log2((v["selected_count"] + PSEUDO) / (v["input_count"] + PSEUDO))
    if normalise:
        r = r - np.log2((wt["selected_count"] + PSEUDO) / (wt["input_count"] + PSEUDO))
    v["fitness"] = r
    v = v[v["input_count"] >= min_input]
    return v[["variant", "fitness", "input_count", "selected_count"]].reset_index(drop=True)


def top(v: pd.DataFrame, n: int = TOP_N, col: str = "fitness") -> list:
    o = v.assign(r=v[col].round(6)).sort_values(["r", "variant"], ascending=[False, True])
    return o["variant"].head(n).tolist()


# ---------------------------------------------------------------- L2 function

def folded(g):
    return 1.0 / (1.0 + np.exp(-np.asarray(g, dtype=float) / RT))


def binding_table(t: pd.DataFrame, dg_bg: float | None) -> pd.DataFrame:
    """fitness minus the folding term log2(f(G - ddG) / f(G)) of a two-state model (G = dG_background); G None: no
    correction (fitness read as binding)."""
    out = t.copy()
    stab = 0.0 if dg_bg is None else np.log2(folded(dg_bg - t["ddG"].to_numpy()) / folded(dg_bg))
    out["binding_effect"] = t["fitness"] - stab
    return out


def sites(b: pd.DataFrame, col: str = "binding_effect", cut: float = SITE_CUT, min_n: int = 3) -> list:
    g = b.groupby(["position", "wt_aa"])[col].agg(["median", "count"]).reset_index()
    g = g[(g["count"] >= min_n) & (g["median"].round(6) <= cut)]
    return sorted(f"{a}{p}" for p, a in zip(g["position"], g["wt_aa"]))


# ---------------------------------------------------------------- L2 epistasis

def epistasis_table(singles: pd.DataFrame, doubles: pd.DataFrame, limits=None) -> pd.DataFrame:
    """eps = ddG_ab - ddG_a - ddG_b with ddG_x = dG_WT - dG_x; `limits` (floor, ceiling): pairs with any value at a
    limit are censored (dropped)."""
    s = dict(zip(singles["variant"], singles["dG"]))
    wt = s["WT"]
    rows = []
    for pair, dg in zip(doubles["variant"], doubles["dG"]):
        a, b = pair.split(":")
        vals = [dg, s[a], s[b], wt]
        cens = limits is not None and any(abs(x - limits[0]) < 1e-6 or abs(x - limits[1]) < 1e-6 for x in vals)
        eps = (wt - dg) - (wt - s[a]) - (wt - s[b])
        rows.append({"pair": pair, "epistasis": eps, "censored": bool(cens)})
    e = pd.DataFrame(rows)
    return e[~e["censored"]].reset_index(drop=True) if limits is not None else e


def interacting(e: pd.DataFrame, cut: float = EPI_CUT) -> list:
    return sorted(e.loc[e["epistasis"].abs().round(6) >= cut, "pair"])


def bounded(singles: pd.DataFrame, doubles: pd.DataFrame, limits, cut: float = EPI_CUT) -> list:
    """Censored pairs whose epistasis is nonetheless proven beyond the cutoff. eps = dG_a + dG_b - dG_ab - dG_WT, and
    a value at the floor is an upper bound on its true dG (at the ceiling, a lower bound); so a floor value of dG_ab
    or dG_WT (a ceiling value of dG_a or dG_b) can only raise the true eps above the observed one, and the opposite
    cases only lower it. A pair whose censored values all push one way, with the observed eps already beyond the
    cutoff in that direction (>= cut when they raise it, <= -cut when they lower it), is interacting whatever the
    censored values are (e.g. only the double mutant at the floor and observed eps >= 1)."""
    s = dict(zip(singles["variant"], singles["dG"]))
    wt = s["WT"]
    lo, hi = limits
    out = []
    for pair, dg in zip(doubles["variant"], doubles["dG"]):
        a, b = pair.split(":")
        up = down = False
        for x, sign in ((dg, -1), (wt, -1), (s[a], 1), (s[b], 1)):
            if abs(x - lo) < 1e-6:
                up, down = up or sign < 0, down or sign > 0
            elif abs(x - hi) < 1e-6:
                up, down = up or sign > 0, down or sign < 0
        eps = round(float(s[a] + s[b] - dg - wt), 6)
        if (up and not down and eps >= cut) or (down and not up and eps <= -cut):
            out.append(pair)
    return sorted(out)


def limits_of(world: str = ".") -> tuple:
    m = json.loads((Path(world) / "meta.json").read_text())
    lo, hi = m["dynamic_range_kcal_per_mol"]
    return float(lo), float(hi)
