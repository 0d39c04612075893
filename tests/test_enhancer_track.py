"""enhancer track: the injected L3 dossier's perturbation and the native dossier's numbers, recomputed from the written
tables (cited by their grounding), and the track's counts (issue 22)."""
from __future__ import annotations

from collections import Counter

import pandas as pd

from benchmark.suite.freeze import ensure_built
from benchmark.suite.loader import load_suite

CONS = "CAGGTAAGT"


def _tables(kind):
    d = ensure_built(load_suite().worlds[f"enhancer.L3.dossier.{kind}"])
    return pd.read_csv(d / "elements.csv"), pd.read_csv(d / "positions.csv", dtype={"position": str})


def _matches(s: str) -> int:
    return sum(a == b for a, b in zip(s, CONS))


def test_enhancer_plus4c_injection_holds_on_the_written_tables():
    """The injected elements.csv differs from the real dossier's exactly in the rows with C at +4 (the 7th letter),
    each raised by 3.0 log2; weak sites (<= 4 consensus matches) with +4C sit near 2.9 while weak sites with any other
    +4 nucleotide stay below 0; every element above the real maximum carries C at +4; positions.csv keeps every count
    (n_elements) and is the summary of the edited elements."""
    inj, inj_pos = _tables("plus4_injected")
    real, real_pos = _tables("consensus_real")
    assert inj.shape == real.shape and (inj["element"] == real["element"]).all()
    c4 = inj["element"].str[6] == "C"
    delta = inj["activity"] - real["activity"]
    assert (delta[~c4].abs() < 1e-9).all()
    assert ((delta[c4] - 3.0).abs() < 0.0015).all() and c4.sum() > 6000
    weak = inj["element"].map(_matches) <= 4
    assert 2.6 < inj.loc[weak & c4, "activity"].median() < 3.2
    assert inj.loc[weak & ~c4, "activity"].median() < 0
    assert real.loc[weak & c4, "activity"].median() < 0          # the real +4C effect on weak sites is nil
    top = real["activity"].max()
    above = inj[inj["activity"] > top]
    assert len(above) >= 150 and (above["element"].str[6] == "C").all()
    row = inj_pos[(inj_pos["position"] == "+4") & (inj_pos["nucleotide"] == "C")].iloc[0]
    assert abs(row["mean_activity"] - 3.144) < 0.002 and abs(row["fraction_active"] - 0.893) < 0.002
    assert (inj_pos["n_elements"] == real_pos["n_elements"]).all()
    pos = ["-3", "-2", "-1", "+1", "+2", "+3", "+4", "+5", "+6"]
    for _, r in inj_pos.dropna(subset=["mean_activity"]).iterrows():
        v = inj.loc[inj["element"].str[pos.index(r["position"])] == r["nucleotide"], "activity"]
        assert abs(round(float(v.mean()), 3) - r["mean_activity"]) < 1e-9


def test_enhancer_native_and_real_dossier_numbers():
    """The numbers the real and native dossiers' expected responses cite, from the written tables."""
    e, pos = _tables("gc_native")
    assert len(e) == 23761
    gc, gt = e[e["element"].str[3:5] == "GC"], e[e["element"].str[3:5] == "GT"]
    assert len(gc) == 12288 and len(gt) == 11473
    assert abs((gc["activity"] >= 2).mean() - 0.020) < 0.001 and abs((gt["activity"] >= 2).mean() - 0.133) < 0.001
    act = e.set_index("element")["activity"]
    assert abs(act["CAGGCAAGT"] - 7.644) < 0.001 and abs(act["GGTGCGTGC"] - 7.733) < 0.001
    assert abs((e["activity"] >= 2).mean() - 0.075) < 0.001
    m = pos.set_index(["position", "nucleotide"])["mean_activity"]
    assert abs(m[("-1", "G")] - 0.996) < 0.001 and abs(m[("+3", "A")] - 0.908) < 0.001
    assert abs(m[("+5", "G")] - 0.728) < 0.001 and abs(m[("+2", "C")] + 0.095) < 0.001
    strata = e.assign(k=e["element"].map(_matches)).groupby("k")["activity"].median()
    assert strata[:4].max() < 0 and 4.0 < strata[6] < 4.5 and strata[7] > 7.3


def test_enhancer_counts():
    suite = load_suite()
    ws = [r for r in suite.worlds.values() if r.world.track == "enhancer"]
    lv = Counter(str(r.world.level).split(".")[-1] for r in ws)
    assert lv["L1"] >= 10 and lv["L3"] == 3
    l1 = Counter(r.world.world_class for r in ws if r.world.family == "enhancer.L1.integrity")
    assert l1["clean"] == 1 and l1["boundary"] >= 1 and l1["challenge"] >= 7
    l2 = [r for r in ws if ".L2." in r.id]
    assert {r.world.world_class for r in l2} >= {"clean", "confound", "tool_trap", "stat_trap"}
    assert all(r.world.pivotal is not None for r in ws if ".L3." not in r.id)
    routes = sorted(r.world.route for r in ws if ".L3." in r.id)
    assert routes == ["injected", "native", "real"]


def test_enhancer_truncated_file_ends_mid_row():
    d = ensure_built(load_suite().worlds["enhancer.L1.integrity.truncated_table"])
    last = (d / "counts.csv").read_text().splitlines()[-1]
    assert last.count(",") == 1


def test_unmapped_barcodes_counted_with_their_error_copies_are_the_size():
    """Blind study 12: 241 counted barcodes absent from the map (223 library barcodes the map lacks and 18
    one-mismatch sequencing-error copies of mapped ones), listed, graded as unmeasured against 223. Both counts are
    the size; a count between or beyond them is not."""
    import json as _json

    from benchmark.suite.freeze import read_golden
    from graders.grade import grade

    ref = load_suite().worlds["enhancer.L1.integrity.unmapped_barcodes"]
    g = read_golden(ref).values
    lo, hi = g["n_absent_from_map"]
    assert hi == g["n_unmapped"] + g["n_error_barcodes"] > lo == g["n_unmapped"]

    def measured(v):
        r = grade(ref, g, _json.dumps({"assessment": "usable_with_caveats", "summary": "s", "issues": [
            {"category": "unmapped barcodes", "severity": "warning", "where": "counts.csv",
             "description": "barcodes missing from the barcode map", "value": v, "action": "removed", "output": None}]}))
        return any(c.credit >= 1.0 for c in r.checks if c.id in ("n", "n_absent"))

    assert measured(lo) and measured(hi) and not measured(hi + 5) and not measured(lo - 5)


def test_negative_controls_above_most_weak_elements_are_a_truth_of_the_low_activity_library():
    """Blind study 24 (enhancer L1 boundary_low_activity, 50 OVER-CAUTIOUS): an analyst rated the sound library usable
    with caveats because the negative controls sit above most test elements. That is what the files show (measured
    here from counts.csv and the map), and a declared nuisance of that world: the caveat is full marks; the same caveat
    on the clean library, whose controls sit below most elements, is still an unneeded caution."""
    import numpy as np

    from benchmark.suite.freeze import read_golden
    from graders.l1 import grade_l1

    suite = load_suite()
    ref = suite.worlds["enhancer.L1.integrity.boundary_low_activity"]
    d = ensure_built(ref)
    counts = pd.read_csv(d / "counts.csv").merge(pd.read_csv(d / "barcode_map.csv").drop_duplicates("barcode", keep=False))
    el = counts.groupby("element")[["dna_count", "rna_rep1", "rna_rep2"]].sum()
    ratio = np.log2((el["rna_rep1"] + el["rna_rep2"] + 1) / (el["dna_count"] + 1))
    elements = pd.read_csv(d / "elements.csv").set_index("element")
    neg = elements.index[elements["role"].str.contains("neg", case=False)]
    assert len(neg) and (ratio.drop(neg, errors="ignore") < ratio.reindex(neg).median()).mean() > 0.5
    caveat = {"category": "negative_control_behaviour", "severity": "warning", "where": "counts.csv",
              "description": "The scrambled negative controls have higher RNA/DNA than most test elements: mean log2 "
                             "+0.26 against -0.17; 75% of test elements fall below the controls.",
              "value": 0.75, "action": "flagged; the controls may not mark the background", "output": None}
    report = {"assessment": "usable_with_caveats", "issues": [caveat], "summary": "checked"}
    g = grade_l1(ref.world, ref.family, read_golden(ref).values, report)
    assert g.state == "CLEAN-CORRECT", g.reason
    clean = suite.worlds["enhancer.L1.integrity.clean"]
    assert grade_l1(clean.world, clean.family, read_golden(clean).values, report).state == "OVER-CAUTIOUS"


def test_unmapped_barcodes_carry_counts_of_their_own():
    """Blind study 26 (16.7): the unmapped barcodes copied the count triple of a random mapped barcode, and an analyst
    found 221 of 241 exact duplicate rows (a construction artefact, read as duplicated count rows). Each is now drawn
    Poisson about a mapped barcode's counts: no more of them repeat a mapped barcode's triple than chance gives."""
    from benchmark.suite.freeze import read_golden

    ref = load_suite().worlds["enhancer.L1.integrity.unmapped_barcodes"]
    t = pd.read_csv(ensure_built(ref) / "counts.csv")
    unm = set(read_golden(ref).values["truth"]["unmapped"])
    cols = ["dna_count", "rna_rep1", "rna_rep2"]
    mapped = set(map(tuple, t.loc[~t["barcode"].isin(unm), cols].to_numpy().tolist()))
    copies = sum(tuple(r) in mapped for r in t.loc[t["barcode"].isin(unm), cols].to_numpy().tolist())
    assert len(unm) >= 150 and copies <= 0.05 * len(unm), (copies, len(unm))
