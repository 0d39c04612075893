"""protein: sound analyses other than the reference solver's (worlds/protein/analysis.py), from the public files only:

- fitness:   Enrich2-style log ratio with pseudocount 1 (not 0.5), variants with fewer than 5 input reads left out
             (not 10), scores relative to the wild type's own ratio.
- function:  the folding term fitted from the scan itself: the background dG that minimises the absolute deviation of
             fitness from log2(f(G - ddG) / f(G)) over all variants (a global-epistasis fit, Otwinowski 2018), not
             the dG_background that meta.json states; the fitted term is subtracted.
- epistasis: censoring judged with a tolerance (any dG within 0.02 kcal/mol of a dynamic-range limit), epistasis
             computed from dG directly (dG_a + dG_b - dG_ab - dG_WT).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from tests.alternatives import alternative

RT = 0.5925


@alternative("protein.L2.fitness", "Enrich2-style ratio with pseudocount 1, a minimum of 5 input reads and wild-type "
             "normalisation",
             ["protein.L2.fitness.clean", "protein.L2.fitness.wt_norm", "protein.L2.fitness.low_counts",
              "protein.L2.fitness.low_counts_many"])
def fitness_enrich2(world_dir: Path, out: Path) -> dict:
    t = pd.read_csv(world_dir / "counts.csv")
    wt = t[t["variant"] == "WT"].iloc[0]
    shift = float(np.log2((wt["selected_count"] + 1) / (wt["input_count"] + 1)))  # the wild type's own log2 ratio
    v = t[(t["variant"] != "WT") & (t["input_count"] >= 5)].copy()
    v["fitness"] = np.log2((v["selected_count"] + 1) / (v["input_count"] + 1)) - shift
    v[["variant", "fitness"]].to_csv(out / "enrich2.csv", index=False)
    top = v.assign(r=v["fitness"].round(6)).sort_values(["r", "variant"], ascending=[False, True])["variant"].head(20)
    n_low = int(((t["variant"] != "WT") & (t["input_count"] < 5)).sum())
    issues = []
    if abs(shift) > 0.2:
        issues.append(f"wild-type log2 ratio {shift:.2f}: scores normalised to the wild type")
    if n_low:
        issues.append(f"{n_low} variants with fewer than 5 input reads (low counts) left out")
    return {"top_variants": top.tolist(), "n_beneficial": int((v["fitness"].round(6) > 0).sum()), "table": "enrich2.csv",
            "issues_found": issues, "analysis_usable": True, "summary": f"{len(v)} variants scored"}


def _folded(g):
    return 1.0 / (1.0 + np.exp(-np.asarray(g, dtype=float) / RT))


@alternative("protein.L2.function", "global fit of the folding term: the background dG estimated from the scan itself "
             "(least absolute deviation of fitness on the two-state curve of ddG), then subtracted",
             ["protein.L2.function.clean", "protein.L2.function.destab", "protein.L2.function.destab_strong",
              "protein.L2.function.destab_few"])
def function_global_fit(world_dir: Path, out: Path) -> dict:
    t = pd.read_csv(world_dir / "scan.csv")
    ddg, fit = t["ddG"].to_numpy(), t["fitness"].to_numpy()
    grid = np.round(np.arange(0.5, 10.0001, 0.01), 2)
    loss = [float(np.abs(fit - np.log2(_folded(g - ddg) / _folded(g))).sum()) for g in grid]
    g = float(grid[int(np.argmin(np.round(loss, 6)))])
    t["binding_effect"] = fit - np.log2(_folded(g - ddg) / _folded(g))
    t[["variant", "binding_effect"]].to_csv(out / "binding_fit.csv", index=False)
    m = t.groupby(["position", "wt_aa"])["binding_effect"].agg(["median", "count"]).reset_index()
    m = m[(m["count"] >= 3) & (m["median"] <= -1.0)]
    sites = sorted(f"{a}{p}" for p, a in zip(m["position"], m["wt_aa"]))
    raw = t.groupby(["position"])["fitness"].median()
    n_conf = int((raw <= -1.0).sum()) - len(sites)
    return {"interface_positions": sites, "n_interface": len(sites), "table": "binding_fit.csv",
            "issues_found": [f"fitted background dG {g:.2f}: destabilised variants unfold; the folding term was "
                             "subtracted"] if n_conf > 0 else [],
            "analysis_usable": True, "summary": f"{len(sites)} interface positions"}


@alternative("protein.L2.epistasis", "censoring as any dG within 0.02 kcal/mol of a dynamic-range limit, epistasis "
             "computed from dG directly",
             ["protein.L2.epistasis.clean", "protein.L2.epistasis.floor", "protein.L2.epistasis.floor_many",
              "protein.L2.epistasis.floor_mild"])
def epistasis_tolerant(world_dir: Path, out: Path) -> dict:
    lo, hi = json.loads((world_dir / "meta.json").read_text())["dynamic_range_kcal_per_mol"]
    s = pd.read_csv(world_dir / "singles.csv").set_index("variant")["dG"]
    d = pd.read_csv(world_dir / "doubles.csv")
    near = lambda x: (x - lo) < 0.02 or (hi - x) < 0.02  # noqa: E731
    rows, n_cens = [], 0
    for pair, dg in zip(d["variant"], d["dG"]):
        a, b = pair.split(":")
        if any(near(x) for x in (dg, s[a], s[b], s["WT"])):
            n_cens += 1
            continue
        rows.append((pair, s[a] + s[b] - dg - s["WT"]))
    e = pd.DataFrame(rows, columns=["pair", "epistasis"])
    e.to_csv(out / "epistasis_tol.csv", index=False)
    pairs = sorted(e.loc[e["epistasis"].abs() >= 1.0, "pair"])
    return {"epistatic_pairs": pairs, "n_epistatic": len(pairs), "table": "epistasis_tol.csv",
            "issues_found": [f"{n_cens} pairs with a value near the assay floor or ceiling: censored, left out"]
            if n_cens else [], "analysis_usable": True, "summary": f"{len(pairs)} pairs"}


def _translate(fasta: Path) -> str:
    dna = "".join(x.strip() for x in fasta.read_text().splitlines() if not x.startswith(">")).upper()
    nt, aas = "TCAG", "FFLLSSSSYY**CC*WLLLLPPPPHHQQRRRRIIIMTTTTNNKKSSRRVVVVAAAADDEEGGGG"
    return "".join(aas[16 * nt.index(dna[i]) + 4 * nt.index(dna[i + 1]) + nt.index(dna[i + 2])]
                   for i in range(0, len(dna) - 2, 3)).split("*")[0]


def _global_alignment(a: str, b: str, gap: int = -2) -> dict[int, int]:
    """Needleman-Wunsch (match +1, mismatch -1, linear gap): index in b -> index in a of each aligned pair."""
    n, m = len(a), len(b)
    s = np.zeros((n + 1, m + 1), dtype=int)
    s[:, 0], s[0, :] = np.arange(n + 1) * gap, np.arange(m + 1) * gap
    bb = np.array(list(b))
    for i in range(1, n + 1):
        sub = np.where(bb == a[i - 1], 1, -1)
        row = np.maximum(s[i - 1, :-1] + sub, s[i - 1, 1:] + gap)
        for j in range(1, m + 1):  # the horizontal gap depends on the cell to the left
            s[i, j] = max(row[j - 1], s[i, j - 1] + gap)
    pairs, i, j = {}, n, m
    while i > 0 and j > 0:
        if s[i, j] == s[i - 1, j - 1] + (1 if a[i - 1] == b[j - 1] else -1):
            pairs[j - 1] = i - 1
            i, j = i - 1, j - 1
        elif s[i, j] == s[i - 1, j] + gap:
            i -= 1
        else:
            j -= 1
    return pairs


@alternative("protein.L2.structure", "first protomer only: RSA from the first chain in the file that holds each site (not "
             "the mean over the three protomers), tolerance as the Shannon entropy in bits (a monotone function of the "
             "effective number), and each chain's numbering matched by a global alignment of its sequence to WSN HA (not "
             "an offset search)",
             ["protein.L2.structure.clean", "protein.L2.structure.mature_numbering",
              "protein.L2.structure.ha1_ha2_chains", "protein.L2.structure.dssp_mature"])
def structure_first_protomer_alignment(world_dir: Path, out: Path) -> dict:
    max_asa = dict(A=129, R=274, N=195, D=193, C=167, Q=225, E=223, G=104, H=224, I=197, L=201, K=236, M=224, F=240,
                   P=159, S=155, T=172, W=285, Y=263, V=174)
    lines = (world_dir / "1RVX_trimer.dssp").read_text().splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("  #  RESIDUE")) + 1
    res = [(x[11], int(x[5:10]), x[13], int(x[34:38])) for x in lines[start:] if x[13] != "!"]
    wt = _translate(world_dir / "WSN-HA.fasta")
    rsa, shifted = {}, 0
    for chain in dict.fromkeys(r[0] for r in res):
        a = [r for r in res if r[0] == chain]
        for j, i in _global_alignment(wt, "".join(r[2] for r in a)).items():
            shifted += a[j][1] != i + 1
            rsa.setdefault(i + 1, a[j][3] / max_asa[a[j][2]])
    prefs = pd.read_csv(world_dir / "prefs.csv")
    p = prefs[list("ACDEFGHIKLMNPQRSTVWY")].to_numpy()
    t = pd.DataFrame({"site": prefs["site"], "tolerance": -(p * np.log2(p)).sum(axis=1)})
    t = t[t["site"].isin(rsa)].copy()
    t["rsa"] = t["site"].map(rsa)
    t["wt_aa"] = [wt[s - 1] for s in t["site"]]
    t[["site", "wt_aa", "rsa", "tolerance"]].to_csv(out / "first_protomer.csv", index=False)
    rho = float(t["tolerance"].rank().corr(t["rsa"].rank()))
    m = (t["rsa"] < 0.2) & (t["tolerance"] >= np.log2(15.0))
    bt = sorted(f"{w}{s}" for w, s in zip(t.loc[m, "wt_aa"], t.loc[m, "site"]))
    issues = [f"residue numbering of the structure differs from the scan's for {shifted} of {len(res)} residues (global "
              "alignment): renumbered to the scan's"] if shifted > len(res) // 2 else []
    return {"spearman": round(rho, 4), "n_sites": int(len(t)), "buried_tolerant": bt, "n_buried_tolerant": len(bt),
            "table": "first_protomer.csv", "issues_found": issues, "analysis_usable": True,
            "summary": f"{len(t)} sites, Spearman {rho:.2f}"}
