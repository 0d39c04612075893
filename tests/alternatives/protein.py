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
