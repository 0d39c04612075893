"""Reference solvers of the protein track (gold side); every golden is computed from the world's public files.

protein.L1.integrity   worlds.protein.analysis.detect: duplicated variants, numbering against construct.fasta (constant
                       offset vs isolated wild-type mismatches), missing values written as 0, plates in kJ/mol (plate
                       wild-type control 4.184x the others), ddG against dG_wt - dG_mut (sign, reference); corrected
                       reference rows for the product validator; the count of substitutions the table leaves out
                       (the size of its absent-substitutions nuisance, v2).
protein.L2.fitness     log2 enrichment (pseudocount 0.5) relative to the wild type, variants with < 10 input reads
                       not measured; the 20 fittest, the number fitter than the wild type.
protein.L2.function    binding effect = fitness - log2(f(G - ddG) / f(G)), two-state folding (G = dG_background);
                       interface positions = median binding effect <= -1 (>= 3 variants).
protein.L2.epistasis   eps = ddG_ab - ddG_a - ddG_b on dG values inside the assay's dynamic range; |eps| >= 1 kcal/mol;
                       censored pairs whose one-sided bound still proves |eps| >= 1 (bounded_pairs) may be reported too
                       (n_epistatic_range: the count without and with them).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.suite.registry import product_maker, solver
from graders.registry import product_validator
from worlds.protein import analysis as A


@solver("protein.L1.integrity", version="2")
def l1_integrity(world_dir: Path, world) -> dict:
    return A.detect(world_dir)


def _keyed(t: pd.DataFrame) -> pd.Series:
    if {"position", "wt_aa", "mut_aa"} <= set(t.columns):
        return t["wt_aa"].astype(str) + t["position"].astype(int).astype(str) + t["mut_aa"].astype(str)
    return t["variant"].astype(str)


@product_validator("protein.corrected_stability")
def corrected_stability(path: Path, golden: dict, check) -> tuple[float, str]:
    """A corrected stability table (CSV or TSV with variant, or position/wt_aa/mut_aa, and ddG): for the reference's
    sample of variants, named in GB1 numbering (Met1 = 1), ddG in kcal/mol with positive = destabilising matches the
    reference within 0.01 for >= 90%."""
    want = golden.get("corrected_rows") or {}
    try:
        t = pd.read_csv(path, sep=None, engine="python")
        t = t.assign(k=_keyed(t)).drop_duplicates("k").set_index("k")
        got = t["ddG"].astype(float)
    except Exception as exc:  # noqa: BLE001
        return 0.0, f"not a readable stability table ({exc})"
    good = sum(1 for k, x in want.items() if k in got.index and abs(float(got[k]) - x) <= 0.01)
    return float(good / max(len(want), 1) >= 0.9), f"{good} of {len(want)} reference variants right (need 90%)"


@product_maker("protein.recompute_ddg")
def make_recompute(src: Path, dest: Path) -> None:
    """stability.csv with ddG = dG_wt - dG_mut (the declared convention)."""
    t = pd.read_csv(src)
    t["ddG"] = (t["dG_wt"] - t["dG_mut"]).round(3)
    t.to_csv(dest, index=False)


@product_maker("protein.renumber")
def make_renumber(src: Path, dest: Path) -> None:
    """stability.csv renumbered to construct.fasta (the offset read from the world itself)."""
    t = pd.read_csv(src)
    k = A.detect(src.parent)["offset"]
    t["position"] = t["position"] - k
    t["variant"] = t["wt_aa"] + t["position"].astype(str) + t["mut_aa"]
    t.to_csv(dest, index=False)


THIN_INPUT = 100  # "tens of reads": the measured-but-noisy tail of input counts a careful analyst may shrink


@solver("protein.L2.fitness", version="2")  # 2: thin_input_variants, the measured variants with tens of input reads
def l2_fitness(world_dir: Path, world) -> dict:
    t = pd.read_csv(Path(world_dir) / "counts.csv")
    f = A.fitness_table(t)
    raw = A.fitness_table(t, normalise=False, min_input=0)
    wt = t[t["variant"] == "WT"].iloc[0]
    good = f[(f["input_count"] >= 30) & (f["selected_count"] >= 30)].sort_values("variant")
    keys = good["variant"].tolist()
    keys = sorted(set(keys[:: max(len(keys) // 120, 1)]) | set(A.top(f)) & set(keys))
    fm, rm = f.set_index("variant")["fitness"], raw.set_index("variant")["fitness"]
    low = sorted(t.loc[(t["variant"] != "WT") & (t["input_count"] < A.MIN_INPUT), "variant"])
    return {"top_variants": A.top(f), "n_beneficial": int((f["fitness"].round(6) > 0).sum()),
            "n_measured": int(len(f)), "n_low_input": len(low), "low_input_variants": low,
            "thin_input_variants": sorted(f.loc[f["input_count"] < THIN_INPUT, "variant"]),
            "wt_log2_ratio": round(float(np.log2((wt["selected_count"] + A.PSEUDO) / (wt["input_count"] + A.PSEUDO))), 4),
            "fitness": {k: round(float(fm[k]), 4) for k in keys},
            "trap_top": A.top(raw), "n_trap_beneficial": int((raw["fitness"].round(6) > 0).sum()),
            "trap_fitness": {k: round(float(rm[k]), 4) for k in keys}}


@solver("protein.L2.function", version="1")
def l2_function(world_dir: Path, world) -> dict:
    d = Path(world_dir)
    t = pd.read_csv(d / "scan.csv")
    g = float(json.loads((d / "meta.json").read_text())["dG_background"])
    b = A.binding_table(t, g)
    trap = A.binding_table(t, None)
    s, ts = A.sites(b), A.sites(trap)
    b = b.sort_values("variant")
    keys = b["variant"].tolist()[:: max(len(b) // 100, 1)]
    destab = b.loc[(b["fitness"] - b["binding_effect"]).abs() > 0.5, "variant"].tolist()
    keys = sorted(set(keys) | set(destab[:60]))
    bm = b.set_index("variant")["binding_effect"]
    fm = b.set_index("variant")["fitness"]
    return {"interface_positions": s, "n_interface": len(s), "trap_positions": ts, "n_trap_positions": len(ts),
            "confounded_positions": sorted(set(ts) - set(s)), "n_confounded": len(set(ts) - set(s)),
            "dG_background": g, "n_destabilised": len(destab),
            "binding_effect": {k: round(float(bm[k]), 4) for k in keys},
            "trap_binding": {k: round(float(fm[k]), 4) for k in sorted(destab[:60])}}


@solver("protein.L2.epistasis", version="2")
def l2_epistasis(world_dir: Path, world) -> dict:
    d = Path(world_dir)
    s, db = pd.read_csv(d / "singles.csv"), pd.read_csv(d / "doubles.csv")
    lim = A.limits_of(d)
    e = A.epistasis_table(s, db, lim)
    raw = A.epistasis_table(s, db)
    pairs, trap = A.interacting(e), A.interacting(raw)
    bound = A.bounded(s, db, lim)
    em = e.set_index("pair")["epistasis"]
    keys = e["pair"].tolist()
    return {"epistatic_pairs": pairs, "n_epistatic": len(pairs), "trap_pairs": trap, "n_trap_pairs": len(trap),
            "bounded_pairs": bound, "n_bounded": len(bound), "n_epistatic_range": [len(pairs), len(pairs) + len(bound)],
            "n_pairs": int(len(db)), "n_censored": int(len(db) - len(e)), "censored_fraction": round(1 - len(e) / len(db), 4),
            "epistasis": {k: round(float(em[k]), 4) for k in keys}}


@solver("protein.L3.dossier", version="1")
def l3_dossier(world_dir: Path, world) -> dict:
    d = Path(world_dir)
    p = pd.read_csv(d / "positions.csv")
    s = pd.read_csv(d / "substitutions.csv")
    m = p.dropna(subset=["median_ddG"]).sort_values(["median_ddG", "position"], ascending=[False, True])
    return {"top_positions": [f"{a}{q}" for a, q in zip(m["wt_aa"].head(8), m["position"].head(8))],
            "n_substitutions": int(len(s)), "fraction_stabilising": round(float((s["ddG"] < 0).mean()), 3),
            "median_ddG": round(float(s["ddG"].median()), 3),
            "unmeasured_positions": [f"{a}{q}" for a, q, n in zip(p["wt_aa"], p["position"], p["n_measured"]) if n == 0],
            "sparse_positions": [f"{a}{q}" for a, q, n in zip(p["wt_aa"], p["position"], p["n_measured"]) if 0 < n <= 9]}


from worlds.protein import scripted  # noqa: E402,F401
