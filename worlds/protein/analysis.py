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


# ---------------------------------------------------------------- L2 structure

AA = "ACDEFGHIKLMNPQRSTVWY"
# theoretical maximum accessible surface area (A^2) per residue, Tien et al. 2013 PLoS ONE 8:e80635
MAX_ASA = dict(zip(AA, (129, 167, 193, 223, 240, 104, 224, 197, 236, 201, 224, 195, 159, 225, 274, 155, 172, 174, 285,
                        263)))
BURIED_RSA = 0.2        # relative solvent accessibility below this: buried
TOLERANT_NEFF = 15.0    # effective number of amino acids (exp of the entropy, natural log) at or above this: tolerant
MIN_IDENTITY = 0.8      # a numbering under which this share of scan sites match the structure's residue is the same


def protein_of(fasta) -> str:
    """The protein the coding sequence in a FASTA file encodes (standard code, up to the first stop)."""
    dna = read_fasta(fasta).upper()
    nt = "TCAG"
    table = "FFLLSSSSYY**CC*WLLLLPPPPHHQQRRRRIIIMTTTTNNKKSSRRVVVVAAAADDEEGGGG"
    idx = [16 * nt.index(dna[i]) + 4 * nt.index(dna[i + 1]) + nt.index(dna[i + 2]) for i in range(0, len(dna) - 2, 3)]
    return "".join(table[i] for i in idx).split("*")[0]


def read_dssp(path) -> pd.DataFrame:
    """chain, resnum, aa, acc of each residue line of a DSSP file (chain-break lines '!' skipped)."""
    lines = Path(path).read_text().splitlines()
    start = next((i + 1 for i, x in enumerate(lines) if x.startswith("  #  RESIDUE")), None)
    if start is None:
        raise ValueError(f"{path}: no '  #  RESIDUE' line opening the residue table")
    rows = [(x[11], int(x[5:10]), x[13], int(x[34:38])) for x in lines[start:] if x[13] != "!"]
    return pd.DataFrame(rows, columns=["chain", "resnum", "aa", "acc"])


def site_tolerance(prefs: pd.DataFrame) -> pd.DataFrame:
    """site and tolerance = exp(-sum p ln p) over the 20 amino-acid preferences (the effective number of amino acids)."""
    p = prefs[list(AA)].to_numpy(dtype=float)
    p = p / p.sum(axis=1, keepdims=True)
    h = -np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0).sum(axis=1)
    return pd.DataFrame({"site": prefs["site"].astype(int).to_numpy(), "tolerance": np.exp(h)})


def identity_by_offset(wt: str, chain: pd.DataFrame, sites) -> dict:
    """For each offset k (scan site = the chain's residue number + k), the share of the chain's residues at a scan
    site whose WSN residue is the chain's residue there, and how many residues that compares (>= 20 kept). Every
    offset that places the chain inside the protein is tried: a chain may be numbered from anywhere (HA2 from 1)."""
    num, aa = chain["resnum"].to_numpy(), chain["aa"].to_numpy()
    scan = np.zeros(len(wt) + 2, dtype=bool)
    scan[[s for s in sites if 1 <= s <= len(wt)]] = True
    seq = np.array(list(" " + wt + " "))
    out = {}
    for k in range(-int(num.max()), len(wt) - int(num.min()) + 1):
        site = num + k
        ok = (site >= 1) & (site <= len(wt))
        ok[ok] = scan[site[ok]]
        if ok.sum() >= 20:
            out[k] = (float((seq[site[ok]] == aa[ok]).mean()), int(ok.sum()))
    return out


def chain_offsets(wt: str, dssp: pd.DataFrame, sites, renumber: bool = True) -> dict:
    """Per chain, the offset to add to its residue numbers: 0 where the stated numbers match the scan's wild type
    (identity >= MIN_IDENTITY), else (renumber) the offset of highest identity when that one matches."""
    out = {}
    for c, ch in dssp.groupby("chain", sort=True):
        ident = identity_by_offset(wt, ch, sites)
        best = max(sorted(ident), key=lambda k: (round(ident[k][0], 6), -abs(k)))
        stated = ident.get(0, (0.0, 0))[0]
        out[c] = int(best) if renumber and stated < MIN_IDENTITY and ident[best][0] >= MIN_IDENTITY else 0
    return out


def _identity(wt: str, d: pd.DataFrame, sites) -> float:
    """The share of structure residues at a scan site (column `site`) that carry the WSN residue there."""
    m = d["site"].isin(set(sites)) & (d["site"] >= 1) & (d["site"] <= len(wt))
    return round(float((d.loc[m, "aa"] == [wt[s - 1] for s in d.loc[m, "site"]]).mean()), 4) if m.any() else 0.0


def structure_sites(world=".", renumber: bool = True) -> tuple[pd.DataFrame, dict]:
    """Per scan site (site, wt_aa, rsa, tolerance, structure_aa) joined to the structure: RSA = ACC / max ASA, the
    mean over the chains that hold the site after each chain's numbering is matched to the scan's (renumber), or
    by the stated residue numbers (renumber False, the join that trusts them); and what the join found."""
    d = Path(world)
    wt = protein_of(d / "WSN-HA.fasta")
    dssp = read_dssp(d / "1RVX_trimer.dssp")
    tol = site_tolerance(pd.read_csv(d / "prefs.csv"))
    sites = tol["site"].tolist()
    offs = chain_offsets(wt, dssp, sites, renumber)
    r = dssp.assign(rsa=dssp["acc"] / dssp["aa"].map(MAX_ASA), site=dssp["resnum"] + dssp["chain"].map(offs))
    info = {"chain_offsets": offs, "offsets": sorted(set(offs.values())),
            "identity_stated": _identity(wt, r.assign(site=r["resnum"]), sites), "identity": _identity(wt, r, sites),
            "n_scan_sites": int(len(tol)), "wt_length": len(wt)}
    per = r.sort_values(["site", "chain"]).groupby("site").agg(structure_aa=("aa", "first"), rsa=("rsa", "mean"))
    t = tol.merge(per.reset_index(), on="site", how="inner")
    t = t[(t["site"] >= 1) & (t["site"] <= len(wt))]
    t.insert(1, "wt_aa", [wt[s - 1] for s in t["site"]])
    return t.sort_values("site").reset_index(drop=True), info


def spearman(a, b) -> float:
    """Spearman's rank correlation (average ranks for ties)."""
    return float(pd.Series(np.asarray(a, dtype=float)).rank().corr(pd.Series(np.asarray(b, dtype=float)).rank()))


def buried_tolerant(t: pd.DataFrame) -> list:
    """Sites (wild-type residue and number, e.g. V45) buried (RSA < BURIED_RSA) yet tolerant (tolerance >=
    TOLERANT_NEFF)."""
    m = (t["rsa"].round(6) < BURIED_RSA) & (t["tolerance"].round(6) >= TOLERANT_NEFF)
    return sorted(f"{a}{s}" for a, s in zip(t.loc[m, "wt_aa"], t.loc[m, "site"]))
