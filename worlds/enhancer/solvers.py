"""Reference solvers of the enhancer track (gold side); every golden is computed from the world's public files.

enhancer.L1.integrity  worlds.enhancer.analysis.detect: barcodes repeated in counts.csv, mapped barcodes missing from it
                       (truncation), counted barcodes missing from the map, map elements written reverse-complemented,
                       elements with < 5 mapped barcodes, non-integer plasmid counts, identical replicates, and DNA/RNA
                       columns swapped (the plasmid column must vary least between elements); corrected plasmid counts
                       of a fixed sample of barcodes for the product validator.
enhancer.L2.activity   log2(RNA/DNA) per element over barcodes with >= 10 plasmid reads (elements with >= 2 of them),
                       library-size normalised and centred on the median negative control; top 20, n >= 2-fold.
enhancer.L2.calling    element-level activity (mean of 3 replicates) tested against the negative controls' own
                       element-level distribution (one-sided normal, Benjamini-Hochberg 5%).
enhancer.L2.batch      activity centred on the negative controls of the element's own transfection batch; the mean
                       activity difference of elements with G at +5 minus the others.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from benchmark.suite.registry import solver
from graders.registry import product_validator
from worlds.enhancer import analysis as A


@solver("enhancer.L1.integrity", version="3")  # 3: n_absent_from_map
def l1_integrity(world_dir: Path, world) -> dict:
    return A.detect(world_dir)


@product_validator("enhancer.corrected_counts")
def corrected_counts(path: Path, golden: dict, check) -> tuple[float, str]:
    """A corrected count table (CSV or TSV with barcode and dna_count): for the reference's sample of barcodes, the raw
    integer plasmid read count (one row per barcode) matches the reference within 0.5 for >= 90%."""
    want = golden.get("corrected_dna") or {}
    try:
        t = pd.read_csv(path, sep=None, engine="python", dtype={"barcode": str})
        got = t.groupby("barcode")["dna_count"].sum()
    except Exception as exc:  # noqa: BLE001
        return 0.0, f"not a readable count table ({exc})"
    good = sum(1 for k, x in want.items() if k in got.index and abs(float(got[k]) - x) <= 0.5)
    return float(good / max(len(want), 1) >= 0.9), f"{good} of {len(want)} reference barcodes right (need 90%)"


def _sample(g: pd.DataFrame, extra=()) -> dict:
    x = g[g["role"] == "test"].sort_values("element")
    keys = set(x["element"].tolist()[:: max(len(x) // 100, 1)]) | (set(extra) & set(x["element"]))
    m = x.set_index("element")["activity"]
    return {k: round(float(m[k]), 4) for k in sorted(keys)}


@solver("enhancer.L2.activity", version="2")
def l2_activity(world_dir: Path, world) -> dict:
    t, el = A.load(world_dir)
    g = A.ratios(t, el, "rna_count")
    raw = A.ratios(t, el, "rna_count", careful=False)
    low = sorted(set(t.loc[t["dna_count"] < A.MIN_DNA, "element"]))
    kept = t[t["dna_count"] >= A.MIN_DNA]
    out = kept[A.outlier_barcodes(kept, "rna_count")]
    neg = raw[raw["role"] == "negative_control"]["activity"]
    tv = A.top(g)
    # the count at the two-fold threshold is also right without normalisation when the controls' own offset is within
    # noise of 0 (a depth-matched library): both analyses are standard there
    plain = A.ratios(t, el, "rna_count", normalise=False)
    counts = sorted({A.n_active(g), A.n_active(plain) if A.negligible_offset(plain) else A.n_active(g)})
    return {"top_elements": tv, "n_active": A.n_active(g), "n_active_range": [counts[0], counts[-1]],
            "n_scored": int((g["role"] == "test").sum()),
            "n_low_dna_elements": len(low), "low_dna_elements": low,
            "n_outlier_barcodes": int(len(out)), "outlier_elements": sorted(set(out["element"])),
            "control_log2_ratio": round(float(neg.median()), 4),
            "activity": _sample(g, tv), "trap_top": A.top(raw), "n_trap_active": A.n_active(raw),
            "trap_activity": _sample(raw.set_index("element").loc[g["element"]].reset_index(), tv)}


@solver("enhancer.L2.calling", version="1")
def l2_calling(world_dir: Path, world) -> dict:
    t, el = A.load(world_dir)
    g, active, sd = A.call_careful(t, el)
    ng, trap = A.call_naive(t, el)
    reps = sorted(c for c in t.columns if c.startswith("rna_rep"))
    per = pd.concat([A.ratios(t, el, r).set_index("element")["activity"] for r in reps], axis=1).dropna()
    cor = per.corr().to_numpy()
    rep_r = [round(float(cor[i, j]), 4) for i in range(len(reps)) for j in range(i + 1, len(reps))]
    return {"active_elements": active, "n_active": len(active), "control_sd": sd,
            "n_test": int((el["role"] == "test").sum()), "trap_active": trap, "n_trap_active": len(trap),
            "n_extra_trap": len(set(trap) - set(active)),
            "barcodes_per_element": float(t.groupby("element").size().median()),
            "replicate_r": rep_r,
            "activity": _sample(g, active[:40])}


@solver("enhancer.L2.batch", version="1")
def l2_batch(world_dir: Path, world) -> dict:
    t, el = A.load(world_dir)
    g = A.ratios(t, el, "rna_count", by="batch")
    raw = A.ratios(t, el, "rna_count", by=None)
    neg = g.assign(raw=raw["activity"])
    shift = neg[neg["role"] == "negative_control"].groupby("batch")["raw"].median()
    x = el[el["role"] == "test"]
    g5 = x["element"].str[7] == "G"
    return {"g5_effect": A.g5_effect(g), "trap_g5_effect": A.g5_effect(raw),
            "batch_shift": round(float(shift.get(2, 0.0) - shift.get(1, 0.0)), 4),
            "g5_in_batch2": round(float((x.loc[g5, "batch"] == 2).mean()), 4),
            "other_in_batch2": round(float((x.loc[~g5, "batch"] == 2).mean()), 4),
            "n_g5": int(g5.sum()), "n_other": int((~g5).sum()),
            "activity": _sample(g), "trap_activity": _sample(raw)}


@solver("enhancer.L3.dossier", version="1")
def l3_dossier(world_dir: Path, world) -> dict:
    d = Path(world_dir)
    e = pd.read_csv(d / "elements.csv")
    p = pd.read_csv(d / "positions.csv", dtype={"position": str})
    gc = e[e["element"].str[3:5] == "GC"]
    gt = e[e["element"].str[3:5] == "GT"]
    best = p.sort_values(["mean_activity", "position", "nucleotide"], ascending=[False, True, True])
    return {"n_elements": int(len(e)), "fraction_active": round(float((e["activity"] >= 2).mean()), 4),
            "gc_fraction_active": round(float((gc["activity"] >= 2).mean()), 4),
            "gt_fraction_active": round(float((gt["activity"] >= 2).mean()), 4),
            "top_elements": e.sort_values(["activity", "element"], ascending=[False, True])["element"].head(10).tolist(),
            "top_position_nucleotides": [f"{a}{b}" for a, b in zip(best["position"].head(8), best["nucleotide"].head(8))]}


from worlds.enhancer import scripted  # noqa: E402,F401
