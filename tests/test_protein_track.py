"""protein track: the injected L3 dossier's perturbation, recomputed from the written tables (cited by its grounding)."""
from __future__ import annotations

import pandas as pd

from benchmark.suite.freeze import ensure_built
from benchmark.suite.loader import load_suite


def _tables(kind):
    d = ensure_built(load_suite().worlds[f"protein.L3.dossier.{kind}"])
    return pd.read_csv(d / "substitutions.csv"), pd.read_csv(d / "positions.csv")


def test_protein_k10_injection_holds_on_the_written_tables():
    """The injected substitutions.csv differs from the real dossier's in the 17 K10 rows only; K10 keeps all 17
    substitutions measured with median ddG 2.6, whereas in the real table every position with a median above 2 kcal/mol
    has at most 9 measured substitutions (strongly destabilised variants escape measurement)."""
    inj, inj_pos = _tables("surface_injected")
    real, real_pos = _tables("core_real")
    assert inj.shape == real.shape and (inj[["variant", "position"]] == real[["variant", "position"]]).all().all()
    differ = inj.loc[(inj["ddG"] - real["ddG"]).abs() > 1e-9]
    assert set(differ["position"]) == {10} and len(differ) == 17
    k10 = inj_pos.set_index("position").loc[10]
    assert k10["n_measured"] == 17 and abs(k10["median_ddG"] - 2.6) < 1e-6
    assert inj.loc[inj["position"] == 10, "ddG"].min() > 2.0
    assert real_pos.set_index("position").loc[10, "median_ddG"] < 0
    high = real_pos[real_pos["median_ddG"] > 2.0]
    assert len(high) >= 2 and (high["n_measured"] <= 9).all()
    # every other position's summary is unchanged
    other = inj_pos["position"] != 10
    pd.testing.assert_frame_equal(inj_pos[other].reset_index(drop=True), real_pos[other].reset_index(drop=True))


def test_protein_native_dossier_numbers():
    """The numbers the native counterfactual's expected response cites, from the written tables."""
    sub, pos = _tables("neutral_native")
    assert len(sub) == 813
    assert abs((sub["ddG"] > 0).mean() - 0.480) < 0.001
    assert abs(sub["ddG"].median() - (-0.031)) < 0.001
    sparse = dict(zip(pos["wt_aa"] + pos["position"].astype(str), pos["n_measured"]))
    assert sparse["W43"] == 0 and sparse["A26"] == 2 and sparse["Y45"] == 9 and sparse["F52"] == 7


IGG_FC_CONTACTS = ["E27", "K28", "K31", "Q32", "N35", "D40", "E42", "W43"]  # Sauer-Eriksson et al. 1995


def test_fitness_variants_are_named_against_the_library_background():
    """Olson 2014's library background is GB1 with Gln2 (T2Q): every counts.csv variant is a double mutant of it, and a
    position-2 mutant names Q as its wild-type residue (issue 39: no spurious T2Q, no triple mutants)."""
    import json

    from worlds.protein.build import GB1

    for w in ("clean", "wt_norm", "low_counts", "low_counts_many"):
        d = ensure_built(load_suite().worlds[f"protein.L2.fitness.{w}"])
        seq = json.loads((d / "meta.json").read_text())["wild_type_sequence"]
        assert seq[1] == "Q" and seq[0] + seq[2:] == GB1[0] + GB1[2:]
        variants = [v for v in pd.read_csv(d / "counts.csv")["variant"] if v != "WT"]
        assert variants and not any("T2Q" in v for v in variants)
        for v in variants:
            muts = v.split(":")
            assert len(muts) == 2, v
            for m in muts:
                pos = int(m[1:-1])
                assert seq[pos - 1] == m[0] != m[-1], v


def test_epistasis_floor_reads_negative_and_bounded_pairs_earn_full_marks(tmp_path):
    """Censoring at the floor reads as negative epistasis (ddG_ab capped below its true value): almost every censored
    trap pair is negative. A censored pair whose bound still proves |eps| >= 1 is a true coupling, and a report that
    lists those pairs too (and counts them) keeps full marks."""
    import yaml

    from benchmark.suite.freeze import read_golden
    from benchmark.suite.handwritten import report_path, write_products
    from graders.grade import grade
    from worlds.protein import analysis as A

    for w in ("floor", "floor_many", "floor_mild"):
        ref = load_suite().worlds[f"protein.L2.epistasis.{w}"]
        d = ensure_built(ref)
        g = read_golden(ref).values
        raw = A.epistasis_table(pd.read_csv(d / "singles.csv"), pd.read_csv(d / "doubles.csv")).set_index("pair")
        censored_trap = sorted(set(g["trap_pairs"]) - set(g["epistatic_pairs"]))
        negative = (raw.loc[censored_trap, "epistasis"] < 0).mean()
        assert negative >= 0.9, (w, negative)
        assert g["bounded_pairs"] and set(g["bounded_pairs"]) <= set(g["truth"]["coupled"])
        assert not set(g["bounded_pairs"]) & set(g["epistatic_pairs"])
        assert g["n_epistatic_range"] == [g["n_epistatic"], g["n_epistatic"] + len(g["bounded_pairs"])]
        doc = yaml.safe_load(report_path(ref).read_text())
        products = write_products(doc, g, tmp_path / w)
        both = dict(doc["correct"], epistatic_pairs=g["epistatic_pairs"] + g["bounded_pairs"],
                    n_epistatic=g["n_epistatic"] + len(g["bounded_pairs"]))
        assert grade(ref, g, both, products=products).score == 100.0
        spurious = dict(both, epistatic_pairs=both["epistatic_pairs"] + censored_trap[:5])
        assert grade(ref, g, spurious, products=products).score < 100.0


def test_function_interface_is_gb1s_real_igg_fc_contacts():
    """The simulated binding penalties sit at GB1's real IgG-Fc contact residues (Sauer-Eriksson 1995); the hot spots
    a world asks for are a drawn subset of them, so the answer is in the data, not in the literature alone."""
    from benchmark.suite.freeze import read_golden

    answers = set()
    for w in ("clean", "destab", "destab_few", "destab_strong"):
        g = read_golden(load_suite().worlds[f"protein.L2.function.{w}"]).values
        assert g["truth"]["contacts"] == IGG_FC_CONTACTS
        assert g["interface_positions"] == sorted(g["truth"]["interface"])
        assert set(g["interface_positions"]) < set(IGG_FC_CONTACTS) - {"W43"}
        answers.add(tuple(g["interface_positions"]))
    assert len(answers) == 4


def test_fitness_rubric_grades_against_olsons_own_counts_and_the_trap_misses_them():
    """Issue 39 item 4: the fitness worlds' top-20 check is graded against the generative truth, the 20 fittest
    variants of Olson's own (unthinned, unedited) counts among those this world's counts can measure, so a reference
    solver that went wrong would not pass its own answer. The reference recovers the truth (F1 >= 0.8), the count of
    beneficial variants is within 3% of it, and the low-count trap's ranking shares none of it."""
    from benchmark.suite.freeze import read_golden
    from graders.checks import f1_score

    suite = load_suite()
    for name in ("clean", "wt_norm", "low_counts", "low_counts_many"):
        ref = suite.worlds[f"protein.L2.fitness.{name}"]
        top = next(c for c in ref.world.rubric.checks if c.id == "top")
        assert (top.golden, top.reference) == ("truth.top_variants", "top_variants")
        g = read_golden(ref).values
        assert len(g["truth"]["top_variants"]) == 20
        assert f1_score(g["top_variants"], g["truth"]["top_variants"])[2] >= 0.8, name
        assert abs(g["n_beneficial"] - g["truth"]["n_beneficial"]) <= 0.03 * g["truth"]["n_beneficial"], name
        if name.startswith("low_counts"):
            assert f1_score(g["trap_top"], g["truth"]["top_variants"])[2] < 0.2, name
            assert not set(g["truth"]["low_coverage"]) & set(g["truth"]["top_variants"])


def test_fitness_low_input_variants_named_and_shrunk_are_a_truth_not_the_low_count_trap():
    """Blind study 21 (protein fitness wt_norm): "Low coverage: ... the naive top-20 by point estimate ... includes
    A24Q:E42F (15 input reads), A24C:V29F (23), E19K:A24Q (29) and Y3W:D40Y (41); I ranked by an empirical-Bayes
    posterior mean", flagged as changing the result, was capped at 20 as the low-count trap. The tail of variants
    with tens of input reads is a declared nuisance that can move the edge of a top 20; an entry naming variants of that
    tail (`thin_input_variants`) is a truth, one naming none (a bare claim of the trap) is not."""
    from benchmark.suite.freeze import read_golden
    from graders.l2 import invented_claims

    ref = load_suite().worlds["protein.L2.fitness.wt_norm"]
    golden = read_golden(ref).values
    thin = golden["thin_input_variants"][:4]
    named = {"issue": f"Low coverage: the naive top-20 by point estimate includes {', '.join(thin)} (15-41 input reads, "
                      "Poisson SE up to 0.5 log2); I ranked by an empirical-Bayes posterior mean instead, which "
                      "replaces 4 of them.", "changes_result": True, "value": 4}
    bare = {"issue": "Low coverage: low-count variants dominate the ranking (measured effect 17%).",
            "changes_result": True, "value": 17}
    assert invented_claims(ref.world, ref.family, [named], golden) == []
    assert invented_claims(ref.world, ref.family, [bare], golden) == [("low_counts", True)]


def _l1_grade(world: str, issues: list[dict], assessment: str = "usable_with_caveats"):
    from benchmark.suite.freeze import read_golden
    from graders.l1 import grade_l1

    ref = load_suite().worlds[f"protein.L1.integrity.{world}"]
    report = {"assessment": assessment, "issues": issues, "summary": "checked the table"}
    return grade_l1(ref.world, ref.family, read_golden(ref).values, report)


def _warning(category: str, description: str, value) -> dict:
    return {"category": category, "severity": "warning", "where": "stability.csv", "description": description,
            "value": value, "action": "noted; no value changed", "output": None}


def test_a_library_that_stops_at_mild_substitutions_reported_as_censored_is_a_truth():
    """Blind study 22 (protein L1 boundary_neutral, 50 OVER-CAUTIOUS): an expert who measured that ddG stops at +0.60
    kcal/mol and that 403 of 936 substitutions are absent, and rated the sound table usable with that caveat, stated
    what the data are (the world draws its variants among the scan's ddG < 0.6). Both features are declared nuisances
    (`size`: the golden's n_absent_substitutions), so the caveat is full marks however it is worded; a missing-value
    claim (the catalogued defect the absences resemble) at a size the world does not have is still an invention, and a
    censoring caveat on a world with no ceiling is still an unneeded caution."""
    censored = [
        _warning("selection / censoring of destabilising variants", "The ddG distribution stops abruptly at +0.600 "
                 "kcal/mol: none above 0.6 although a normal fit predicts 15; 403 of 936 substitutions are absent, "
                 "mostly at buried positions.", 403),
        _warning("truncated ddG range", "No variant has ddG greater than 0.6 kcal/mol; the table looks truncated at "
                 "that cut-off, so destabilising substitutions are not represented.", 0.6),
        _warning("library biased toward stabilising substitutions", "The library looks selected for mild or "
                 "stabilising substitutions (71% have ddG < 0).", 0.71),
        _warning("missing substitutions", "Missing substitutions: only 533 of 1,045 possible single substitutions are "
                 "in the table; A26 and W43 have none.", 512),
    ]
    for issue in censored:
        g = _l1_grade("boundary_neutral", [issue])
        assert g.state == "CLEAN-CORRECT" and not g.invented, (issue["category"], g.reason)
    # the absences are true of every world (each is a subset of the scan): not the missing-value defect on sound data
    g = _l1_grade("clean", [censored[3]])
    assert g.state == "CLEAN-CORRECT" and not g.invented, g.reason
    invented = _warning("missing values", "17 variants have missing values written as 0 in dG_mut and ddG.", 17)
    g = _l1_grade("clean", [invented])
    assert g.state == "FABRICATED" and g.invented == ["missing_zero"], g.reason
    # a missing-value claim dressed in the absences' words, at a size no absence count has, is the defect claimed
    dressed = _warning("missing substitutions", "Missing variants: 17 rows are missing and written as 0.", 17)
    assert _l1_grade("clean", [dressed]).invented == ["missing_zero"]
    # the clean world's ddG runs to 3.7 kcal/mol: a censoring caveat there is a caution the data do not call for
    assert _l1_grade("clean", [censored[1]]).state == "OVER-CAUTIOUS"
