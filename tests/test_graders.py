"""The grading contract (graders/README.md) on hand-made worlds, reports and work products (seed 001 J.1, I.3).

Each test pins one way a report could earn marks without the analysis: words instead of values, a list padded with
every candidate, an invented defect beside the right one, a product path that leaves the workspace.
"""
import json
import os
import tempfile
from pathlib import Path

import pytest

from graders.manifest import Check
from benchmark.suite.validate import conclusion_problems, contract_problems
from graders.checks import f1_score, run_check, run_checks
from graders.l1 import STATE_SCORES, fabrication_share, grade_l1
from graders.l2 import grade_l2
from tests.helpers import issue, l1_family, l1_report, l1_world, l2_family, l2_world

DUPS = ["AAAC-1", "AAAG-1", "CCCT-1", "GGGA-1", "TTTA-1"]
GOLD = {"n_dup": 5, "dup_fraction": 5 / 640, "dup_barcodes": DUPS, "all_barcodes": DUPS + [f"X{i}-1" for i in range(60)]}
MEASURE = [{"id": "n", "kind": "value", "field": "value", "golden": "n_dup", "rel_tol": 0.2},
           {"id": "frac", "kind": "value", "field": "value", "golden": "dup_fraction", "rel_tol": 0.2}]
ACT = [{"id": "flagged", "kind": "product_items", "field": "output", "golden": "dup_barcodes", "min_f1": 0.8}]


def _world(**kw):
    return l1_world(measure=MEASURE, actions=ACT, **kw)


@pytest.fixture
def products(tmp_path):
    d = tmp_path / "artifacts"
    d.mkdir()
    (d / "dups.txt").write_text("barcode\n" + "\n".join(DUPS) + "\n")
    (d / "everything.txt").write_text("\n".join(GOLD["all_barcodes"]) + "\n")
    return d


def dup(value=None, output=None, severity="blocking", text="duplicated barcodes found"):
    return issue(text, severity, value=value, output=output)


@pytest.mark.parametrize("issues,state", [
    ([], "MISS"),
    ([issue("the library looks shallow", "warning")], "NOTICE-WRONG"),
    ([dup()], "DIAGNOSE-NOT-ACT-PARTIAL"),                                   # named, but no measured value
    ([dup(value=17)], "DIAGNOSE-NOT-ACT-PARTIAL"),                           # a value that is not the measured one
    ([dup(value=5)], "DIAGNOSE-NOT-ACT"),
    ([dup(value=0.0079)], "DIAGNOSE-NOT-ACT"),                               # the fraction is as good as the count
    ([dup(value=5, output="everything.txt")], "DIAGNOSE-NOT-ACT"),          # every barcode flagged: recall 1, precision 0.08
    ([dup(output="dups.txt")], "DIAGNOSE-AND-ACT-PARTIAL"),                  # acted, value missing
    ([dup(value=5, output="dups.txt")], "DIAGNOSE-AND-ACT"),
    ([dup(value=5, output="/workspace/dups.txt")], "DIAGNOSE-AND-ACT"),     # the sandbox's absolute path is accepted
])
def test_l1_detect_states_need_values_and_products(issues, state, products):
    g = grade_l1(_world(), l1_family(), GOLD, l1_report("usable_with_caveats" if issues else "usable", issues), products=products)
    assert g.state == state, g.reason
    assert g.score == STATE_SCORES[state]


def test_l1_invented_defect_costs_on_a_challenge_world(products):
    good = l1_report("usable_with_caveats", [dup(value=5, output="dups.txt")])
    plus_one = l1_report("usable_with_caveats", [dup(value=5, output="dups.txt"), issue("ambient RNA contamination", "warning")])
    g0 = grade_l1(_world(), l1_family(), GOLD, good, products=products)
    g1 = grade_l1(_world(), l1_family(), GOLD, plus_one, products=products)
    assert g0.score == 3.0 and g1.score < g0.score
    assert g1.state == "FABRICATED" and g1.invented == ["ambient_rna"]


def test_l1_an_alarm_claims_one_defect_and_a_hedge_pays_only_when_its_claim_is_right(products):
    """One alarm, one claim (graders/claims.py): the defect its category names first. "duplicated barcodes or ambient
    soup" claims duplicated barcodes; on a world whose defect is ambient RNA the same hedge recognises nothing and
    invents duplicated barcodes, so listing every candidate in one alarm cannot pay on every world."""
    hedge = l1_report("usable_with_caveats", [dup(value=5, output="dups.txt", text="duplicated barcodes or ambient soup")])
    assert grade_l1(_world(), l1_family(), GOLD, hedge, products=products).state == "DIAGNOSE-AND-ACT"
    ambient = l1_world(defect="ambient_rna")
    g = grade_l1(ambient, l1_family(), GOLD, hedge, products=products)
    assert g.state == "FABRICATED" and g.invented == ["duplicated_barcodes"] and g.score == 0.0, g.reason


def test_l1_an_experts_context_words_are_not_claims(products):
    """The words around a claim are context: a description that mentions neighbouring defects (ruled out, or as the
    reason for the diagnosis) claims only its category's defect, on a challenge world and on sound data."""
    text = ("Duplicated barcodes: 5 barcodes occur twice with identical count columns. Identical columns cannot be "
            "ambient RNA or soup contamination, which would add counts rather than copy a cell; I also checked for "
            "ambient signal and found none.")
    rep = l1_report("usable_with_caveats", [{**dup(value=5, output="dups.txt"), "category": "duplicated barcodes",
                                             "description": text}])
    g = grade_l1(_world(), l1_family(), GOLD, rep, products=products)
    assert g.state == "DIAGNOSE-AND-ACT" and not g.invented, g.reason
    sound = l1_world(cls="clean", expect="accept")
    info = l1_report("usable", [{"category": "checks", "severity": "info", "description": text}])
    assert grade_l1(sound, l1_family(), GOLD, info).state == "CLEAN-CORRECT"


def test_l1_recognised_by_value_and_product_whatever_the_words(products):
    """An alarm whose measured value and work product check out against the golden recognises the defect, however it
    is worded; a value alone (no product) does not, and words alone stay partial."""
    odd = {"category": "barcode_collision_merge_artifact", "severity": "warning", "description": "columns repeated",
           "value": 5, "output": "dups.txt"}
    g = grade_l1(_world(), l1_family(), GOLD, l1_report("usable_with_caveats", [odd]), products=products)
    assert g.state == "DIAGNOSE-AND-ACT" and not g.invented, g.reason
    g = grade_l1(_world(), l1_family(), GOLD, l1_report("usable_with_caveats", [{**odd, "output": None}]), products=products)
    assert g.state == "NOTICE-WRONG", g.reason
    # the world's value and product under another catalogued defect's name: the work is recognised and not invented,
    # but the diagnosis is wrong, so it stays partial
    other = {**odd, "category": "ambient soup"}
    g = grade_l1(_world(), l1_family(), GOLD, l1_report("usable_with_caveats", [other]), products=products)
    assert g.state == "DIAGNOSE-AND-ACT-PARTIAL" and not g.invented, g.reason


def test_l1_a_declared_nuisance_feature_is_a_truth_not_an_invention(products):
    """A family's declared nuisance (present, harmless, measurable), reported even as a warning, is neither an
    invented defect nor an unneeded caution; claiming the defect it resembles without describing it still is."""
    fam = l1_family(nuisance=[{"feature": "a few ambient transcripts in every cell", "why_harmless": "at 1% of UMIs",
                               "patterns": [r"ambient.{0,40}(1 ?%|low|sporadic)"], "resembles": "ambient_rna"}])
    sound = l1_world(cls="clean", expect="accept")
    seen = issue("ambient RNA at a low 1% of UMIs per cell", "warning", value=0.01)
    assert grade_l1(sound, fam, GOLD, l1_report("usable_with_caveats", [seen])).state == "CLEAN-CORRECT"
    assert grade_l1(sound, fam, GOLD, l1_report("usable_with_caveats", [issue("ambient RNA contamination", "warning")])).state == "FABRICATED"
    g = grade_l1(_world(), fam, GOLD, l1_report("usable_with_caveats", [dup(value=5, output="dups.txt"), seen]), products=products)
    assert g.state == "DIAGNOSE-AND-ACT" and not g.invented, g.reason
    with pytest.raises(ValueError, match="resembles"):
        l1_family(nuisance=[{"feature": "f", "why_harmless": "w", "patterns": ["x"], "resembles": "no_such_code"}])


def test_l1_a_nuisance_reported_at_the_defects_size_is_the_defect(products):
    """A nuisance declares the golden keys that measure it: reported at its measured size (as a count, a fraction or a
    percentage) it is a truth; reported at ten times that size it is the defect it resembles, claimed where the world
    has only the background (the defect world's report pasted onto its sound sibling scored 100); with no number
    nothing contradicts it."""
    fam = l1_family(nuisance=[{"feature": "a few ambient transcripts in every cell", "why_harmless": "at 1% of UMIs",
                               "patterns": [r"ambient"], "resembles": "ambient_rna", "size": ["n_ambient", "ambient_fraction"]}])
    sound = l1_world(cls="clean", expect="accept")
    gold = {**GOLD, "n_ambient": 20, "ambient_fraction": 0.01}
    for v in (20, 0.012, 1.0, 55):
        g = grade_l1(sound, fam, gold, l1_report("usable_with_caveats", [issue("ambient RNA in the droplets", "warning", value=v)]))
        assert g.state == "CLEAN-CORRECT", (v, g.reason)
    g = grade_l1(sound, fam, gold, l1_report("usable_with_caveats", [issue("ambient RNA in 200 droplets: removed", "warning", value=200)]))
    assert g.state == "FABRICATED" and g.invented == ["ambient_rna"], g.reason
    g = grade_l1(sound, fam, gold, l1_report("usable_with_caveats", [issue("ambient RNA, about 1% of UMIs", "warning")]))
    assert g.state == "CLEAN-CORRECT", g.reason
    with pytest.raises(ValueError, match="size_factor"):
        l1_family(nuisance=[{"feature": "f", "why_harmless": "w", "patterns": ["x"], "size_factor": 1.0}])


def test_l1_a_defect_found_and_measured_in_an_info_note_is_noticed_words_alone_are_not(products):
    """Issue 38: an expert who found the defect, measured it exactly, fixed it in the join and called it `info`
    (harmless to the analysis) graded MISS, 0. A note that names the world's defect with a value within tolerance is
    now its diagnosis (acting on it still needs the product); a note that only names it, without the measured value,
    earns nothing, so listing every defect as notes is no shortcut."""
    note = {**dup(value=5), "severity": "info"}
    g = grade_l1(_world(), l1_family(), GOLD, l1_report("usable_with_caveats", [note]), products=products)
    assert g.state == "DIAGNOSE-NOT-ACT", g.reason
    g = grade_l1(_world(), l1_family(), GOLD, l1_report("usable_with_caveats", [{**note, "output": "dups.txt"}]),
                 products=products)
    assert g.state == "DIAGNOSE-AND-ACT", g.reason
    for words in ({**note, "value": None}, {**note, "value": 50}):
        g = grade_l1(_world(), l1_family(), GOLD, l1_report("usable", [words]), products=products)
        assert g.state == "MISS", g.reason


def test_l1_a_note_naming_two_defects_is_the_one_its_measured_value_shows(products):
    """Issue 38 (blind study 4): "unmapped barcodes from sequencing errors", measured exactly and merged, graded
    NOTICE-WRONG: its category names another catalogued defect first. A category that also names the world's defect
    is its diagnosis where its value is the world's; with a value that is not, it is still nothing."""
    both = {**issue("soup-like ambient reads from duplicated barcodes", "info", value=5, output="dups.txt")}
    g = grade_l1(_world(), l1_family(), GOLD, l1_report("usable_with_caveats", [both]), products=products)
    assert g.state == "DIAGNOSE-AND-ACT", g.reason
    g = grade_l1(_world(), l1_family(), GOLD, l1_report("usable", [{**both, "value": 50}]), products=products)
    assert g.state == "MISS", g.reason
    other = issue("ambient soup", "info", value=5, output="dups.txt")  # names only another defect
    g = grade_l1(_world(), l1_family(), GOLD, l1_report("usable", [other]), products=products)
    assert g.state == "MISS", g.reason


def test_l1_a_corrected_copy_that_merges_rows_is_read_as_the_rows_it_removed(tmp_path):
    """Merging error barcodes into their parents removes the errors and edits the parents' counts: the fixed records
    are the removed rows. Read as every changed row, the copy's precision halves; each reading is tried."""
    from graders.checks import changed_record_readings

    (tmp_path / "inputs").mkdir()
    (tmp_path / "products").mkdir()
    orig = tmp_path / "inputs" / "counts.csv"
    parents = [f"P{i:03d}" for i in range(40)]
    errors = [f"E{i:03d}" for i in range(10)]
    orig.write_text("barcode,dna\n" + "".join(f"{b},100\n" for b in parents) + "".join(f"{e},3\n" for e in errors))
    copy = tmp_path / "products" / "counts_fixed.csv"
    copy.write_text("barcode,dna\n" + "".join(f"{b},{103 if i < 10 else 100}\n" for i, b in enumerate(parents)))
    readings = changed_record_readings(orig, copy, errors)
    assert sorted(errors) in readings and len(readings[0]) == 20
    c = Check.model_validate({"id": "listed", "kind": "product_items", "field": "output", "golden": "errs", "min_f1": 0.95})
    r = run_check(c, {"output": "counts_fixed.csv"}, {"errs": errors}, tmp_path / "products", inputs=tmp_path / "inputs")
    assert r.credit == 1.0, r.detail


def test_l1_the_worlds_defect_measured_exactly_under_another_name_is_a_partial_diagnosis(products):
    """Issue 38 (blind study 5): AF1 measured as the other allele's frequency on every SNP, called an allele swap
    (the data show the same symptom), graded FABRICATED 0. Its value is the world's own: a misdiagnosis, partial; a
    value that is not the world's keeps the charge, and so does a small count (one sample, a fraction of 1.0 recur
    across a family's siblings: a pasted report would earn on them)."""
    from graders.l1 import SPECIFIC_VALUE

    many = {**GOLD, "n_dup": 25, "dup_fraction": 25 / 640}
    swapped = issue("ambient soup contamination", "warning", value=25)
    assert 25 >= SPECIFIC_VALUE
    g = grade_l1(_world(), l1_family(), many, l1_report("usable_with_caveats", [swapped]), products=products)
    assert g.state == "DIAGNOSE-NOT-ACT-PARTIAL" and not g.invented, g.reason
    g = grade_l1(_world(), l1_family(), many, l1_report("usable_with_caveats", [{**swapped, "value": 41}]),
                 products=products)
    assert g.state == "FABRICATED" and g.invented == ["ambient_rna"], g.reason
    g = grade_l1(_world(), l1_family(), GOLD, l1_report("usable_with_caveats", [{**swapped, "value": 5}]),
                 products=products)  # the world's own count, 5, is below SPECIFIC_VALUE
    assert g.state == "FABRICATED" and g.invented == ["ambient_rna"], g.reason


def test_l1_flag_everything_scores_nothing(products):
    every = l1_report("unusable", [issue("duplicated barcodes", "warning"), issue("ambient RNA", "warning"),
                                   issue("soup", "warning")])
    assert grade_l1(_world(), l1_family(), GOLD, every, products=products).score == 0.0


def test_l1_a_defect_named_by_its_code_is_named(products):
    g = grade_l1(_world(), l1_family(), GOLD, l1_report("usable_with_caveats", [dup(5, "dups.txt", text="duplicated_barcodes")]),
                 products=products)
    assert g.state == "DIAGNOSE-AND-ACT"


@pytest.mark.parametrize("path", ["../../../etc/passwd", "/etc/passwd", "link.txt", "missing.txt", ""])
def test_l1_products_outside_the_workspace_are_not_read(path, products):
    (products / "link.txt").symlink_to(products / "dups.txt")
    g = grade_l1(_world(), l1_family(), GOLD, l1_report("usable_with_caveats", [dup(5, path)]), products=products)
    assert g.state == "DIAGNOSE-NOT-ACT", g.reason


def test_l1_assessment_gate():
    w = l1_world(measure=MEASURE, acceptable_assessments=["usable_with_caveats"])
    g = grade_l1(w, l1_family(), GOLD, l1_report("unusable", [dup(value=5)]))
    assert g.state == "DIAGNOSE-NOT-ACT"


@pytest.mark.parametrize("report,state,score", [
    (l1_report("usable"), "CLEAN-CORRECT", 3.0),
    (l1_report("usable", [issue("low depth", "info")]), "CLEAN-CORRECT", 3.0),
    (l1_report("usable_with_caveats", [issue("some cells have high counts", "warning")]), "OVER-CAUTIOUS", 1.5),
    (l1_report("cannot_determine"), "OVER-CAUTIOUS", 1.5),
    (l1_report("usable_with_caveats", [issue("ambient RNA contamination in T cells", "warning")]), "FABRICATED", 0.5),
    (l1_report("usable_with_caveats", [issue("ambient RNA", "warning"), issue("duplicated barcodes", "warning")]), "FABRICATED", 0.0),
    (l1_report("unusable", [issue("something off")]), "FALSE-UNUSABLE", 0.0),
])
def test_l1_accept_states(report, state, score):
    g = grade_l1(l1_world("clean", "accept", None), l1_family(), {}, report)
    assert (g.state, g.score) == (state, score), g.reason


@pytest.mark.parametrize("report,state", [
    (l1_report("cannot_determine", [issue("no donor ids, so sample swap cannot be tested", "warning")]), "ABSTAIN-RECOGNIZED"),
    (l1_report("cannot_determine"), "ABSTAIN-OK"),
    (l1_report("unusable", [issue("duplicated barcodes")]), "OVER-DIAGNOSE"),
    (l1_report("usable"), "MISS"),
])
def test_l1_abstain_states(report, state):
    w = l1_world(expect="abstain", limit=[r"no donor"])
    assert grade_l1(w, l1_family(), {}, report).state == state


@pytest.mark.parametrize("bad", ["not json at all", {"assessment": "usable"}, None,
                                 {"assessment": "usable", "issues": [], "summary": "s", "values": {"n": 1}}])
def test_l1_malformed_is_noncompliant(bad):
    assert grade_l1(_world(), l1_family(), GOLD, bad).state == "NONCOMPLIANT"


def test_fabrication_heuristic_reads_code():
    rep = l1_report("usable_with_caveats", [issue("dups", evidence="n_dup = 50 barcodes")])
    assert fabrication_share(rep, ["df.barcode.duplicated().sum()  # n_dup"]) == 0.0
    assert fabrication_share(rep, ["print('hello')"]) == 1.0


# ---------------------------------------------------------------- checks

def test_overlap_scores_precision_and_recall():
    c = Check(id="o", kind="overlap", field="labels", golden="swapped", min_f1=0.8)
    gold = {"swapped": ["CD14+ Monocyte", "CD19+ B"]}
    assert run_check(c, {"labels": ["CD19+ B", "CD14+ Monocyte"]}, gold).credit == 1.0
    every = ["CD14+ Monocyte", "CD19+ B", "CD56+ NK", "Dendritic", "CD8+ Cytotoxic T", "CD4+/CD25 T Reg"]
    assert run_check(c, {"labels": every}, gold).credit == 0.0  # listing every label is not finding the swap
    assert f1_score(every, gold["swapped"])[1] == 1.0


def test_overlap_allowed_items_are_neither_required_nor_false_positives():
    """`allowed` names true-but-not-required items (a pair a censoring bound proves): listing them costs nothing,
    leaving them out costs nothing, and they cannot stand in for a required item."""
    c = Check(id="o", kind="overlap", field="pairs", golden="pairs", allowed="bounded", min_f1=0.9)
    gold = {"pairs": ["A1B:C2D", "E3F:G4H", "I5K:L6M", "N7P:Q8R"], "bounded": ["S9T:V10W", "Y11A:C12D"]}
    assert run_check(c, {"pairs": gold["pairs"]}, gold).credit == 1.0
    assert run_check(c, {"pairs": gold["pairs"] + gold["bounded"]}, gold).credit == 1.0
    assert run_check(c, {"pairs": gold["pairs"][:2] + gold["bounded"]}, gold).credit == 0.0
    assert run_check(c, {"pairs": gold["pairs"] + ["X1Y:Z2A"]}, gold).credit == 0.0  # F1 0.89: a false positive


def test_overlap_a_stricter_call_of_true_items_is_neither_inflated_nor_empty():
    """`strict_subset`: ten true markers called at a stricter threshold than the golden's 66 earn full credit (a blind
    analyst's AUROC >= 0.75 call had F1 0.26 against min_f1 0.4); fewer, or ten with two false, or the trap's
    inflated set do not."""
    gold = {"markers": [f"G{i}" for i in range(66)]}
    c = Check(id="calibrated", kind="overlap", field="m", golden="markers", min_f1=0.4, partial_f1=0.25, strict_subset=10)
    assert run_check(c, {"m": gold["markers"][:10]}, gold).credit == 1.0
    assert run_check(c, {"m": gold["markers"][:9]}, gold).credit == 0.0  # too few to be a call (F1 0.24)
    assert run_check(c, {"m": gold["markers"][:8] + ["X1", "X2"]}, gold).credit == 0.0  # precision 0.8
    inflated = gold["markers"][:20] + [f"X{i}" for i in range(200)]
    assert run_check(c, {"m": inflated}, gold).credit == 0.0
    without = Check(id="calibrated", kind="overlap", field="m", golden="markers", min_f1=0.4, partial_f1=0.25)
    assert run_check(without, {"m": gold["markers"][:10]}, gold).credit == 0.5  # partial by F1 alone


def test_overlap_a_stricter_call_where_the_strict_rule_itself_calls_few():
    """`strict_golden`: where the stricter standard rule calls fewer items than strict_subset (blind study 25: a
    population whose best marker separates at AUROC 0.72, so the AUROC 0.75 rule calls none), a true set that large,
    at least one item, is the stricter call; a set with a false item, or an empty one, is not. Where the strict rule
    calls 7, five are still needed."""
    gold = {"markers": [f"G{i}" for i in range(7)], "strict": []}
    c = Check(id="calibrated", kind="overlap", field="m", golden="markers", min_f1=0.4, partial_f1=0.25,
              strict_subset=5, strict_golden="strict")
    assert run_check(c, {"m": ["G0"]}, gold).credit == 1.0
    assert run_check(c, {"m": []}, gold).credit == 0.0
    assert run_check(c, {"m": ["G0", "X1"]}, gold).credit < 1.0  # precision 0.5
    gold2 = {"markers": [f"G{i}" for i in range(66)], "strict": [f"G{i}" for i in range(3)]}
    assert run_check(c, {"m": ["G0", "G1", "G2"]}, gold2).credit == 1.0
    assert run_check(c, {"m": ["G0", "G1"]}, gold2).credit == 0.0
    gold3 = {"markers": [f"G{i}" for i in range(66)], "strict": [f"G{i}" for i in range(7)]}
    assert run_check(c, {"m": [f"G{i}" for i in range(4)]}, gold3).credit == 0.0
    assert run_check(c, {"m": [f"G{i}" for i in range(5)]}, gold3).credit == 1.0


def test_value_against_an_interval_golden():
    c = Check(id="n", kind="value", field="n", golden="n_range", abs_tol=1)
    gold = {"n_range": [8, 10]}
    assert [run_check(c, {"n": n}, gold).credit for n in (6, 7, 8, 9, 10, 11, 12)] == [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    assert run_check(c, {"n": "many"}, gold).credit == 0.0


def test_mentions_reads_only_its_field():
    c = Check(id="m", kind="mentions", component="I", fields=["issues_found"], patterns=["pseudo.?replic"])
    assert run_check(c, {"issues_found": [], "summary": "pseudoreplication"}, {}).credit == 0.0
    assert run_check(c, {"issues_found": ["pseudoreplication of cells"]}, {}).credit == 1.0


def test_requires_halves_a_recognition_without_its_value():
    checks = [Check(id="n", kind="value", component="A", field="n", golden="n", abs_tol=2),
              Check(id="named", kind="mentions", component="I", fields=["issues_found"], patterns=["donor"], requires=["n"])]
    with_value = run_checks(checks, {"n": 1, "issues_found": ["donor effect"]}, {"n": 0})
    words_only = run_checks(checks, {"n": 120, "issues_found": ["donor effect"]}, {"n": 0})
    assert [r.credit for r in with_value] == [1.0, 1.0]
    assert [r.credit for r in words_only] == [0.0, 0.5]


def test_requires_gives_a_constant_conclusion_nothing_without_its_values():
    checks = [Check(id="n", kind="value", component="A", field="n", golden="n", abs_tol=2),
              Check(id="usable", kind="equals", component="C", field="ok", values=[True], requires=["n"])]
    assert [r.credit for r in run_checks(checks, {"n": 1, "ok": True}, {"n": 0})] == [1.0, 1.0]
    assert [r.credit for r in run_checks(checks, {"n": 50, "ok": True}, {"n": 0})] == [0.0, 0.0]


def test_product_table_spearman_and_share(tmp_path):
    gold = {"sig": {f"G{i}": float(i) for i in range(50)}}
    (tmp_path / "good.csv").write_text("gene_id,promoter_signal\n" + "".join(f"G{i},{i * 2 + 1}\n" for i in range(50)))
    (tmp_path / "shuffled.csv").write_text("gene_id,promoter_signal\n" + "".join(f"G{i},{(i * 37) % 50}\n" for i in range(50)))
    (tmp_path / "wrongcols.csv").write_text("gene,x\n" + "".join(f"G{i},{i}\n" for i in range(50)))
    c = Check(id="t", kind="product_table", field="output_path", golden="sig", key="gene_id", column="promoter_signal",
              min_spearman=0.9)
    assert run_check(c, {"output_path": "good.csv"}, gold, tmp_path).credit == 1.0
    assert run_check(c, {"output_path": "shuffled.csv"}, gold, tmp_path).credit == 0.0
    bad = run_check(c, {"output_path": "wrongcols.csv"}, gold, tmp_path)
    assert bad.credit == 0.0 and "gene_id" in bad.detail
    share = Check(id="s", kind="product_table", field="output_path", golden="sig", key="gene_id", column="promoter_signal",
                  min_share=0.9, rel_tol=0.05, abs_tol=0.01)
    assert run_check(share, {"output_path": "good.csv"}, gold, tmp_path).credit == 0.0  # ranks right, values not


def test_product_table_numeric_keys_compare_in_one_spelling(tmp_path):
    """Blind study 9 (calorimetry balance): a table keyed T_K = 190.0, 195.0 ... names the golden's rows 190, 195:
    0/35 keys were found. Numbers compare by value (9 significant digits); names stay text ('007' is not a gene 7)."""
    from graders.checks import table_key

    gold = {"bal": {str(t): float(t) * 2 for t in range(190, 361, 5)}}
    (tmp_path / "floats.csv").write_text("T_K,balance_J\n" + "".join(f"{t:.1f},{t * 2}\n" for t in range(190, 361, 5)))
    c = Check(id="b", kind="product_table", field="table", golden="bal", key="T_K", column="balance_J",
              min_coverage=0.9, min_share=0.9, abs_tol=0.5)
    assert run_check(c, {"table": "floats.csv"}, gold, tmp_path).credit == 1.0
    assert table_key("190.000") == table_key(190) == "190" and table_key("0.50") == table_key(0.5)
    assert table_key("G007") == "g007" and table_key("22:12345") == "22:12345"


def test_product_check_never_raises_on_a_hostile_file(tmp_path):
    (tmp_path / "bin.csv").write_bytes(os.urandom(4096))
    c = Check(id="t", kind="product_items", field="p", golden="g", min_f1=0.5)
    assert run_check(c, {"p": "bin.csv"}, {"g": ["a"]}, tmp_path).credit == 0.0
    assert run_check(c, {"p": "bin.csv"}, {"g": ["a"]}, None).detail.startswith("no work products")


# ---------------------------------------------------------------- L2

GOLD2 = {"total_mb": 6.4, "n_domains": 1900, "narrow_total_mb": 3.4}


def _l2(total, mode, issues, usable=True, n=1900):
    return {"total_mb": total, "peak_mode": mode, "issues_found": issues, "analysis_usable": usable, "n_domains": n}


def test_l2_full_marks_and_components():
    g = grade_l2(l2_world(), l2_family(), GOLD2, _l2(6.43, "broad", ["narrow default fragments domains"]))
    assert g.components == {"A": 1.0, "I": 1.0, "M": 1.0, "C": 1.0} and g.score == 1.0


def test_l2_trap_result_scores_zero_whatever_the_words():
    g = grade_l2(l2_world(), l2_family(), GOLD2, _l2(3.4, "narrow", ["narrow default fragments broad domains"], n=5000))
    assert g.score == 0.0 and any("zero_if" in c for c in g.caps)


def test_l2_zero_if_overlap_does_not_fire_when_the_reference_answer_is_the_trap_list():
    # the trap's list (a pooled test's calls) is empty and so is the reference's answer: an empty report matches the
    # trap's list with F1 1.0 but follows no trap. A trap list the reference does not share still zeroes the report
    # that repeats it, an empty one too (a power-loss trap that calls nothing where the reference calls genes).
    world = l2_world(
        checks=[*l2_world().rubric.model_dump()["checks"],
                {"id": "changed", "kind": "overlap", "component": "A", "field": "calls", "golden": "truth.calls",
                 "reference": "ref_calls", "min_f1": 0.99}],
        zero_if=[{"id": "trap_list", "kind": "overlap", "field": "calls", "golden": "trap_calls", "min_f1": 0.7}])
    report = {**_l2(6.43, "broad", ["narrow default fragments domains"]), "calls": []}
    gold = {**GOLD2, "truth": {"calls": []}, "ref_calls": [], "trap_calls": []}
    g = grade_l2(world, l2_family(), gold, report)
    assert g.score == 1.0 and not any(c.startswith("zero_if:") for c in g.caps)
    g = grade_l2(world, l2_family(), {**gold, "trap_calls": ["B"]}, {**report, "calls": ["B"]})
    assert g.score == 0.0 and any(c.startswith("zero_if:") for c in g.caps)
    g = grade_l2(world, l2_family(), {**gold, "truth": {"calls": ["A"]}, "ref_calls": ["A"]}, report)
    assert g.score == 0.0 and any(c.startswith("zero_if:") for c in g.caps)


def test_l2_zero_if_value_does_not_fire_when_the_truth_is_within_its_tolerance_of_the_trap():
    """At campaign seed 7003 the amplified block moved the mark-expression Spearman by 0.037 (-0.447 true, -0.410 the
    trap's), inside the zero_if tolerance 0.04: the truth itself matched the trap and the oracle scored 0. A trap that
    moved the statistic by more than the tolerance still zeroes the report that repeats it."""
    world = l2_world(
        checks=[*l2_world().rubric.model_dump()["checks"],
                {"id": "rho", "kind": "value", "component": "M", "field": "rho", "golden": "rho", "abs_tol": 0.1}],
        zero_if=[{"id": "trap_rho", "kind": "value", "field": "rho", "golden": "trap_rho", "abs_tol": 0.04}])
    report = {**_l2(6.43, "broad", ["narrow default fragments domains"]), "rho": -0.447}
    g = grade_l2(world, l2_family(), {**GOLD2, "rho": -0.447, "trap_rho": -0.410}, report)
    assert g.score == 1.0 and any(c.startswith("zero_if not applied") for c in g.caps), g.caps
    g = grade_l2(world, l2_family(), {**GOLD2, "rho": -0.466, "trap_rho": -0.309}, {**report, "rho": -0.309})
    assert g.score == 0.0 and any(c.startswith("zero_if:") for c in g.caps)


def test_l2_accuracy_cap_like_seed_opus_case():
    # broad mode + pitfall named but 28.21 Mb against 6.4: A = 0 -> world score 0.5 at most (seed 001 I.3)
    g = grade_l2(l2_world(), l2_family(), GOLD2, _l2(28.21, "broad", ["narrow mode fragments"]))
    assert g.components["A"] == 0.0 and g.score == 0.5


def test_l2_unusable_cap():
    g = grade_l2(l2_world(), l2_family(), GOLD2, _l2(6.4, "broad", ["narrow fragments"], usable=False))
    assert g.score == pytest.approx(1 / 3)


def test_l2_invented_traps_halve_recognition():
    fam = l2_family(defect_catalog={"narrow_default": ["narrow", "fragment"], "jackpots": ["jackpot", "PCR dup"],
                                    "amplified": ["amplif"]})
    good = grade_l2(l2_world(), fam, GOLD2, _l2(6.4, "broad", ["narrow default fragments domains"]))
    padded = grade_l2(l2_world(), fam, GOLD2, _l2(6.4, "broad", ["narrow default fragments domains", "PCR jackpots",
                                                                 "amplified input region"]))
    assert good.components["I"] == 1.0 and padded.components["I"] == 0.25 and padded.score < good.score
    assert padded.invented == ["amplified", "jackpots"]


def test_l2_malformed_is_noncompliant_not_an_exception():
    deep: object = 1
    for _ in range(50):
        deep = [deep]
    for bad in ("{", json.dumps({"total_mb": "x"}), json.dumps([1, 2]), None, "[" * 200_000 + "]" * 200_000,
                json.dumps({"total_mb": 6.4, "issues_found": deep})):
        g = grade_l2(l2_world(), l2_family(), GOLD2, bad)
        assert g.status == "NONCOMPLIANT" and g.score == 0.0


def test_l2_rubric_needs_every_component():
    with pytest.raises(Exception, match="no[n]e for C"):
        l2_world(checks=[{"id": "a", "kind": "value", "component": "A", "field": "total_mb", "golden": "total_mb", "rel_tol": 1},
                         {"id": "i", "kind": "present", "component": "I", "field": "total_mb"},
                         {"id": "m", "kind": "value", "component": "M", "field": "total_mb", "golden": "total_mb", "rel_tol": 1}])


def test_contract_lint_refuses_words_outside_recognition(tmp_path):
    w = l2_world(checks=[
        {"id": "a", "kind": "value", "component": "A", "field": "total_mb", "golden": "total_mb", "rel_tol": 0.3},
        {"id": "i", "kind": "mentions", "component": "I", "fields": ["issues_found"], "patterns": ["narrow"]},
        {"id": "m", "kind": "mentions", "component": "M", "fields": ["peak_mode"], "patterns": ["broad"]},
        {"id": "c", "kind": "value", "component": "C", "field": "n_domains", "golden": "n_domains", "rel_tol": 0.3}],
        zero_if=[{"id": "z", "kind": "mentions", "fields": ["issues_found"], "patterns": ["narrow"], "negate": True}])
    problems = contract_problems(tmp_path / "w.yaml", w, l2_family())
    assert any("check 'm'" in p and "component I" in p for p in problems)
    assert any("zero_if" in p and "check 'z'" in p for p in problems)
    assert contract_problems(tmp_path / "w.yaml", l2_world(), l2_family()) == []


def test_contract_lint_refuses_a_conclusion_every_sibling_shares(tmp_path):
    """`analysis_usable: true` is right in every world of a family: a sibling's pasted report would earn it, so the
    lint asks for `requires:` on a check of the world's own values (the pasted-report bound of issue 10)."""
    from types import SimpleNamespace

    base = [{"id": "a", "kind": "value", "component": "A", "field": "total_mb", "golden": "total_mb", "rel_tol": 0.3},
            {"id": "i", "kind": "mentions", "component": "I", "fields": ["issues_found"], "patterns": ["narrow"]},
            {"id": "m", "kind": "value", "component": "M", "field": "total_mb", "golden": "total_mb", "rel_tol": 0.3}]
    usable = {"id": "usable", "kind": "equals", "component": "C", "field": "analysis_usable", "values": [True]}

    def refs(check):
        return [SimpleNamespace(path=tmp_path / f"{n}.yaml", world=l2_world(checks=base + [check]), family=l2_family())
                for n in ("clean", "trap")]

    problems = conclusion_problems(refs(usable))
    assert len(problems) == 2 and all("check 'usable'" in p and "requires" in p for p in problems)
    assert conclusion_problems(refs({**usable, "requires": ["a"]})) == []


def test_line_list_reader_keeps_keys_with_commas_and_quotes(tmp_path):
    """A multiallelic key `22:26838292:G:A,C` is one item, listed bare or quoted; a CSV line still gives its first
    field; a validator's `canon` lets `chr22:` match a golden spelt `22:` (issue 18: the oracle lost 33 points)."""
    from graders.checks import read_items

    golden = ["22:26838292:G:A,C", "22:100:T:G"]
    p = tmp_path / "dups.txt"
    p.write_text('key\n22:26838292:G:A,C\n"22:100:T:G",second copy\n22:5:A:T,C\n')
    assert read_items(p, golden) == ["22:26838292:G:A,C", "22:100:T:G", "22:5:A:T"]
    p.write_text('"22:26838292:G:A,C"\n22:100:T:G\tnote\n')
    assert read_items(p, golden) == ["22:26838292:G:A,C", "22:100:T:G"]
    p.write_text("chr22:26838292:G:A,C\n")
    assert read_items(p, golden, canon=lambda x: x.removeprefix("chr")) == ["chr22:26838292:G:A,C"]


def test_verifier_is_given_the_graders_own_state_weights():
    """The LLM verifier's L1 rules come from graders.l1 (issue 18: it was told NOTICE-WRONG 1, OVER-CAUTIOUS 2 and
    FABRICATED 1 where the grader gives 0.5, 1.5 and 0.5)."""
    import re

    from benchmark.oversight.verify import L1_RULES, l2_rules
    from graders.l1 import STATE_SCORES

    told = dict(re.findall(r"([A-Z][A-Z-]+) ([0-9.]+) \(", L1_RULES))
    assert {k: float(v) for k, v in told.items()} == STATE_SCORES
    assert "caps it at 0.25" in l2_rules(0.25, 0.5) and "A = 0 caps it at 0.4" in l2_rules(1 / 3, 0.4)


def test_a_null_check_does_not_name_the_defect_it_looked_for():
    """'no gain drift observed' reports a check that found nothing: the defect's own code does not name it there
    (no invented trap on a clean world, no detection credit on a defective one), while an affirmative mention does."""
    from types import SimpleNamespace

    from graders.claims import named_codes

    def named_defects(fam, text):
        return set(named_codes(fam.defect_catalog, text))

    fam = SimpleNamespace(defect_catalog={"gain_drift": [], "duplicate_records": []})
    for text in ("no gain drift observed", "checked: not duplicate records", "no evidence of gain drift",
                 "ruled out gain drift (centroids stable)"):
        assert named_defects(fam, text) == set(), text
    assert named_defects(fam, "gain drift of 2% over the series") == {"gain_drift"}
    assert named_defects(fam, "47 duplicate_records at shard boundaries; no gain drift") == {"duplicate_records"}


def test_l2_a_trap_handled_in_the_values_but_not_named_earns_half_recognition(tmp_path):
    """A careful analysis that avoids the trap in every value (A and M full, no zero_if holds) but never names it
    earns half of recognition (I), as a named trap without its value does; naming it earns the rest."""
    import yaml

    from benchmark.suite.freeze import ensure_built, read_golden
    from benchmark.suite.handwritten import report_path, write_products
    from benchmark.suite.loader import load_suite
    from graders.grade import grade

    ref = load_suite().worlds["protein.L2.fitness.wt_norm"]
    doc = yaml.safe_load(report_path(ref).read_text())
    golden = read_golden(ref).values
    products = write_products(doc, golden, tmp_path / "products", ensure_built(ref) if doc.get("products_world") else None)
    named = grade(ref, golden, doc["correct"], products=products)
    silent = grade(ref, golden, {**doc["correct"], "issues_found": []}, products=products)
    assert named.score == pytest.approx(100.0), named.reason
    assert silent.components["I"] == pytest.approx(0.5) and silent.score == pytest.approx(87.5), silent.reason


def test_l2_a_routine_step_that_handles_the_trap_named_in_the_summary_is_recognition(tmp_path):
    """Issue 38 (blind study 4): an expert referenced every element to the negative controls as routine practice and
    said so in the summary, with every value right, and earned half of I. The trap's own patterns in the summary
    earn full recognition there, and only with every value right."""
    from benchmark.suite.freeze import ensure_built, read_golden
    from benchmark.suite.handwritten import report_path, write_products
    from benchmark.suite.loader import load_suite
    from graders.grade import grade
    import yaml

    ref = load_suite().worlds["protein.L2.fitness.wt_norm"]
    doc = yaml.safe_load(report_path(ref).read_text())
    golden = read_golden(ref).values
    products = write_products(doc, golden, tmp_path / "products", ensure_built(ref) if doc.get("products_world") else None)
    silent = {**doc["correct"], "issues_found": []}
    told = grade(ref, golden, {**silent, "summary": "Fitness is each variant's enrichment relative to the wild type."},
                 products=products)
    assert told.components["I"] == pytest.approx(1.0), told.reason
    quiet = grade(ref, golden, {**silent, "summary": "Fitness from the counts."}, products=products)
    assert quiet.components["I"] == pytest.approx(0.5), quiet.reason


def test_l2_an_entry_claims_one_trap_its_heading_or_lead():
    """An expert's entry on one finding names what it checked around it: only its heading (or lead sentence) is its
    claim, so the later words are context; an entry headed by another trap is that trap's claim."""
    fam = l2_family(defect_catalog={"narrow_default": ["narrow", "fragment"], "jackpots": ["jackpot", "PCR dup"],
                                    "amplified": ["amplif"]})
    context = "Input coverage: flat along every chromosome. I also looked for amplified regions and PCR jackpots."
    g = grade_l2(l2_world(), fam, GOLD2, _l2(6.4, "broad", ["narrow default fragments domains", context]))
    assert g.components["I"] == 1.0 and g.invented == []
    headed = "PCR jackpots: 40 stacks of identical reads in the ChIP, kept as they are."
    g = grade_l2(l2_world(), fam, GOLD2, _l2(6.4, "broad", ["narrow default fragments domains", headed]))
    assert g.invented == ["jackpots"] and g.components["I"] == 0.5


def test_l2_an_entry_naming_the_worlds_trap_beside_one_other_is_no_invention():
    """Issue 38 (blind study 5): "Pile-up losses are missing from the live time" names the world's pile-up trap and
    the dead-time one; read as its first code it capped a 100-point analysis at 20. An entry naming the world's trap
    beside one other claims the world's trap; a list of every trap still claims the others."""
    fam = l2_family(defect_catalog={"narrow_default": ["narrow", "fragment"], "jackpots": ["jackpot"],
                                    "amplified": ["amplif"]})
    both = {"issue": "PCR jackpots inflate the narrow default calls: 40 stacks.", "changes_result": True, "value": 40}
    g = grade_l2(l2_world(), fam, GOLD2, _l2(6.4, "broad", [both]))
    assert g.invented == [] and g.score == 1.0, g.reason
    every = {"issue": "PCR jackpots, amplified regions and the narrow default change the result: 40.",
             "changes_result": True, "value": 40}
    g = grade_l2(l2_world(), fam, GOLD2, _l2(6.4, "broad", [every]))
    assert g.invented and g.score <= 0.2, g.reason


def test_l2_a_pattern_the_prompt_itself_uses_is_a_topic_not_a_claim():
    """The prompt names an amplified-region track the world ships: an entry that uses it claims nothing; the trap's
    own name still does."""
    fam = l2_family(prompt="World directory: chip.bam, input.bam, amplified.bed (the amplified regions of the line).",
                    defect_catalog={"narrow_default": ["narrow", "fragment"], "copy_gain": ["amplif"]})
    used = "The amplified regions of amplified.bed hold 2% of the input reads."
    g = grade_l2(l2_world(), fam, GOLD2, _l2(6.4, "broad", ["narrow default fragments domains", used]))
    assert g.invented == []
    g = grade_l2(l2_world(), fam, GOLD2, _l2(6.4, "broad", ["narrow default fragments domains", "copy gain in the ChIP"]))
    assert g.invented == ["copy_gain"]


@pytest.mark.parametrize("can_move", [False, True])
def test_l2_a_nuisance_said_to_change_the_result_is_excused_only_where_it_can(can_move):
    nuisance = [{"feature": "a few PCR duplicate stacks", "why_harmless": "2% of reads", "patterns": ["jackpot"],
                 "resembles": "jackpots", "can_move_result": can_move}]
    fam = l2_family(defect_catalog={"narrow_default": ["narrow", "fragment"], "jackpots": ["jackpot"]}, nuisance=nuisance)
    measured = "PCR jackpots at 3 loci, 2% of the ChIP reads."
    effect = "PCR jackpots at 3 loci inflate the total domain length."
    g = grade_l2(l2_world(), fam, GOLD2, _l2(6.4, "broad", ["narrow default fragments domains", measured]))
    assert g.invented == []
    g = grade_l2(l2_world(), fam, GOLD2, _l2(6.4, "broad", ["narrow default fragments domains", effect]))
    assert (g.invented == []) == can_move
    assert (g.score <= 0.2) != can_move


# ------------------------------------------------------------------ issue 38: the second blind-analyst study

def test_l1_a_topic_word_of_the_prompt_claims_no_defect_and_a_category_names_its_code_in_any_order(products):
    """A nuclear analyst's warning "imprecise acquisition-software summary" (whose text says the summary's numbers
    are faithful) was charged with summary_mismatch because the bare pattern `summary` names a file every report
    reads. A pattern the family's prompt itself matches is a topic, not a claim (as in L2); and a category holds a
    code's words in its own order ("counts_normalised_not_raw" claims normalised_counts)."""
    fam = l1_family(prompt="World directory: counts.csv and summary.csv (the software's summary).",
                    defect_catalog={"duplicated_barcodes": [r"duplicat\w* barcode"],
                                    "summary_mismatch": [r"summary", r"net (counts|areas?).{0,40}(disagree|differ)"]})
    warn = {"category": "imprecise acquisition-software summary", "severity": "warning",
            "description": "its net areas scatter 1.5% about the trend; reproduced exactly from the spectra"}
    rep = l1_report("usable_with_caveats", [dup(value=5, output="dups.txt"), warn])
    g = grade_l1(_world(), fam, GOLD, rep, products=products)
    assert g.state == "DIAGNOSE-AND-ACT" and not g.invented, g.reason
    named = {**warn, "category": "summary_mismatch"}  # the code's own words still claim it
    g = grade_l1(_world(), fam, GOLD, l1_report("usable_with_caveats", [dup(value=5, output="dups.txt"), named]),
                 products=products)
    assert g.invented == ["summary_mismatch"], g.reason
    reordered = {"category": "barcodes_duplicated_in_matrix", "severity": "blocking", "description": "see list",
                 "value": 5, "output": "dups.txt"}
    g = grade_l1(_world(), l1_family(), GOLD, l1_report("usable_with_caveats", [reordered]), products=products)
    assert g.state == "DIAGNOSE-AND-ACT" and "named the defect" in g.reason, g.reason


def test_l1_a_product_another_issue_names_is_the_action(products):
    """An expert lists the affected items in one note and diagnoses in the alarm above it: the product is the action
    whichever issue names it; a wrong product anywhere earns nothing."""
    alarm = dup(value=5, output=None)
    note = {"category": "flagged barcodes", "severity": "info", "description": "the list", "output": "dups.txt"}
    g = grade_l1(_world(), l1_family(), GOLD, l1_report("usable_with_caveats", [alarm, note]), products=products)
    assert g.state == "DIAGNOSE-AND-ACT", g.reason
    wrong = {**note, "output": "everything.txt"}
    g = grade_l1(_world(), l1_family(), GOLD, l1_report("usable_with_caveats", [alarm, wrong]), products=products)
    assert g.state == "DIAGNOSE-NOT-ACT", g.reason


@pytest.mark.parametrize("entry,claims_it", [
    ("The energy calibration is sound. The standard reads 1.00008 of its reference.", False),
    ("Hit calls are the same with or without the CN correction and the amplified-gene scaling.", False),
    ("QC passes otherwise: plasmid and T0 correlate (Spearman 0.98), so transduction introduced no skew.", False),
    ("1199 SNPs coded on another allele in study B: amplified flips aligned before the meta-analysis", True),
    ("Amplified regions: 4 genes at CN 3-4 bias the calls.", True),
    ("The calibration is stable, but amplified genes bias the calls by 0.3 log2.", True),
    ("Replicates are identical in two amplified columns.", True),
    ("After the filter, treated and control agree in the amplified regions' input ratio (1.137 vs 1.134).", False),
    ("Amplified regions were checked against the input: 4 genes at CN 3-4, and they bias the calls.", True),
    ("The table was checked against my own reduction: counts redone, amplified genes checked against the "
     "input, and a smooth fit. They agree to 0.05%.", False),
    ("The table was checked against my own reduction: amplified genes checked against the input bias the calls.", True),
    ("Amplified genes and control do not agree: the CN 3-4 genes bias the calls.", True),
    ("Amplified regions are partly unbalanced inside the treated arm, but they have no detectable effect (0 genes).", False),
    ("Checks that passed: amplified genes cluster with the rest (r = 0.97), no global shift or composition bias.", False),
    ("Data QC passed: all reads are MAPQ 60; amplified regions are absent from the inputs.", False),
    ("Treated has more amplified-region reads (2.3% vs 1.35%), explained by two gained domains, so it is not a "
     "copy-number artefact.", False),
    ("Amplified regions: 4 genes at CN 3-4 are a copy-number artefact that biases the calls.", True),
])
def test_l2_a_verdict_of_soundness_or_a_long_heading_of_its_own_is_no_claim(entry, claims_it):
    fam = l2_family(defect_catalog={"narrow_default": ["narrow", "fragment"], "amplified": ["amplif"]})
    g = grade_l2(l2_world(), fam, GOLD2, _l2(6.4, "broad", ["narrow default fragments domains", entry]))
    assert (g.invented == ["amplified"]) == claims_it, (entry, g.invented, g.caps)


def test_l2_a_measured_problem_in_the_analysts_own_words_with_the_trap_handled_is_recognition(tmp_path):
    """Values that handle the trap and an entry that flags the problem with a measurement, in words no pattern
    knows ("83 variants have an input count of only 1-3 reads"), recognise the trap in full; an unmeasured or no
    entry stays at half (the silent report)."""
    import yaml

    from benchmark.suite.freeze import ensure_built, read_golden
    from benchmark.suite.handwritten import report_path, write_products
    from benchmark.suite.loader import load_suite
    from graders.grade import grade

    ref = load_suite().worlds["protein.L2.fitness.wt_norm"]
    doc = yaml.safe_load(report_path(ref).read_text())
    golden = read_golden(ref).values
    products = write_products(doc, golden, tmp_path / "products", ensure_built(ref) if doc.get("products_world") else None)
    own = grade(ref, golden, {**doc["correct"], "issues_found": ["The wild-type row holds 1,759,616 reads, not the "
                                                                  "construct row the table scales by (3.2-fold)"]},
                products=products)
    vague = grade(ref, golden, {**doc["correct"], "issues_found": ["Something about the reference looks off"]},
                  products=products)
    assert own.score == pytest.approx(100.0), own.reason
    assert vague.components["I"] == pytest.approx(0.5), vague.reason


def test_scrna_null_genes_leave_out_what_the_truth_changed(tmp_path):
    """The lane_batch reference misses 4 truly changed genes and listed them among the genes that must stay null: an
    analysis that found all 8 true genes failed its M check. A gene the generative truth changed is never a null."""
    from types import SimpleNamespace

    from worlds.scrna.solvers import de_calls

    golden = {"truth": {"de_genes": ["A", "B", "C", "D"]}, "de_genes": ["A", "B"],
              "null_padj": {"C": 1.0, "D": 1.0, "X": 1.0, "Y": 1.0, "Z": 1.0}}
    t = tmp_path / "de.csv"
    t.write_text("gene,log2fc,padj\nA,2,0.001\nB,2,0.001\nC,2,0.001\nD,2,0.001\nX,0,0.9\nY,0,0.9\nZ,0,0.9\n")
    credit, why = de_calls(t, golden, SimpleNamespace(golden="null_padj"))
    assert credit == 1.0 and "of the 3 null_padj genes" in why, why
    t.write_text("gene,log2fc,padj\nA,2,0.001\nB,2,0.001\nC,2,0.001\nD,2,0.001\nX,2,0.001\nY,2,0.001\nZ,0,0.9\n")
    assert de_calls(t, golden, SimpleNamespace(golden="null_padj"))[0] == 0.0


def test_a_table_of_the_analysts_own_rows_is_graded_on_the_true_set_it_holds(tmp_path):
    """histone differential: 'one row per gene whose TSS lies in a domain' depends on the analyst's domain caller. A
    table holding more of the true domain genes than the reference's calls (37 of 50 against its 18) is full credit
    when its values agree at each gene; too few true genes, or wrong values, are not."""
    from graders.checks import run_check
    from graders.manifest import Check

    universe = [f"G{i:02d}" for i in range(50)]
    gold = {"promoter": {g: i / 10 for i, g in enumerate(universe + ["X1", "X2"])},
            "ref": {g: i / 10 for i, g in enumerate(universe[:18])}, "truth": {"domain_genes": universe}}
    check = Check(id="t", kind="product_table", field="out", key="gene_id", column="log2fc", golden="promoter",
                  universe="truth.domain_genes", reference="ref", min_coverage=0.7, min_share=0.7, abs_tol=0.5)

    def credit(rows):
        (tmp_path / "t.csv").write_text("gene_id,log2fc\n" + "".join(f"{g},{v}\n" for g, v in rows))
        return run_check(check, {"out": "t.csv"}, gold, products=tmp_path)

    own = [(g, gold["promoter"][g] + 0.1) for g in universe[10:47]] + [("X1", 9.0)]  # 37 true genes, none of 8 ref's
    r = credit(own)
    assert r.credit == 1.0 and "37/50" in r.detail, r.detail
    assert credit(own[:10]).credit == 0.0  # 10/50 under the reference's 18/50 less slack
    assert credit([(g, v + 2) for g, v in own]).credit == 0.0  # the wrong normalisation
    with pytest.raises(ValueError, match="universe"):
        Check(id="t", kind="product_table", field="out", key="gene_id", column="log2fc", golden="promoter",
              universe="truth.domain_genes", min_share=0.7)


def test_a_rank_check_over_a_handful_of_true_genes_is_not_required(tmp_path):
    """Campaign seed 7001: a draw whose domains were barely callable left the reference (and the oracle) 2 of 53
    true domain genes; a Spearman over 2 genes is 0 and failed the oracle. Under MIN_RANK_KEYS genes of the true set in
    the reference, the values alone are judged; above it, a wrong order still fails."""
    from graders.checks import MIN_RANK_KEYS, run_check
    from graders.manifest import Check

    universe = [f"G{i:02d}" for i in range(50)]
    check = Check(id="t", kind="product_table", field="out", key="gene_id", column="log2fc", golden="promoter",
                  universe="truth.domain_genes", reference="ref", min_coverage=0.7, min_spearman=0.7, min_share=0.7,
                  abs_tol=0.5)

    def credit(ref_n, rows):
        gold = {"promoter": {g: i / 10 for i, g in enumerate(universe)},
                "ref": {g: i / 10 for i, g in enumerate(universe[:ref_n])}, "truth": {"domain_genes": universe}}
        (tmp_path / "t.csv").write_text("gene_id,log2fc\n" + "".join(f"{g},{v}\n" for g, v in rows))
        return run_check(check, {"out": "t.csv"}, gold, products=tmp_path)

    two = [(universe[0], 0.09), (universe[1], 0.01)]  # both within tolerance, in the reverse order of rank
    assert credit(2, two).credit == 1.0
    many = [(g, 4.9 - i / 10 + 0.0) for i, g in enumerate(universe[:MIN_RANK_KEYS + 3])]  # reversed order
    assert credit(MIN_RANK_KEYS + 3, many).credit == 0.0


def test_l2_structured_entries_say_which_is_a_claim_and_flagging_every_trap_harmless_earns_nothing():
    """An L2 issues_found entry may be {issue, changes_result, value} (the prompt says so): a check that found nothing,
    flagged false, is neither claim nor invention whatever it names; the trap flagged true is recognised; a report that
    lists every catalogued trap as harmless recognises none of them."""
    fam = l2_family(defect_catalog={"narrow_default": ["narrow", "fragment"], "amplified": ["amplif"]})
    assert "changes_result" in fam.prompt
    assert {"type": "string"} in fam.report_schema["properties"]["issues_found"]["items"]["anyOf"]
    trap = {"issue": "narrow default calls fragment the broad domains", "changes_result": True, "value": 3.4}
    sibling = {"issue": "Amplified regions: checked the input for copy-number gains", "changes_result": False,
               "value": 0}
    g = grade_l2(l2_world(), fam, GOLD2, _l2(6.43, "broad", [trap, sibling]))
    assert g.score == 1.0 and not g.invented, (g.caps, g.invented)
    g = grade_l2(l2_world(), fam, GOLD2, _l2(6.43, "broad", [trap, {**sibling, "changes_result": True}]))
    assert g.invented == ["amplified"], g.caps
    hedge = [{**trap, "changes_result": False}, {**sibling, "issue": "amplified regions bias the calls"}]
    g = grade_l2(l2_world(), fam, GOLD2, _l2(6.43, "broad", hedge))
    assert g.components["I"] < 1.0 and not g.invented, (g.components, g.caps)


def test_an_effect_word_taken_back_by_a_negation_in_its_clause_asserts_nothing():
    from graders.claims import asserts_effect

    assert not asserts_effect("The median log2FC is -0.016, so no global shift or composition bias.")
    assert not asserts_effect("It does not bias the calls.")
    assert not asserts_effect("The 2% offset doesn't bias the calls.")
    assert asserts_effect("No filter was applied, and the amplified genes bias the calls.")
    assert asserts_effect({"issue": "amplified genes", "changes_result": True})


def test_l2_a_declared_nuisance_reported_under_a_traps_word_and_a_count_of_guides_are_not_invented_traps():
    """Blind study 7 (crispr guide_level): three true observations read as invented traps, each capping a 100 report at
    20. "Jackpot/bottleneck in final replicate R3: ..." reports the declared jackpots ("bottleneck" is also a word of
    the plasmid-reference trap); "11 guides have ..." is no single guide ("1 guide" inside "11 guides"); a guide
    depleted in one replicate only is the replicate noise the family now declares. Real claims of those traps stay
    charged."""
    from benchmark.suite.loader import load_suite
    from graders.l2 import invented_claims

    suite = load_suite()
    multi, plasmid = (suite.worlds[f"crispr.L2.guide_level.{w}"] for w in ("multi_locus", "plasmid_reference"))
    jackpot = {"issue": "Jackpot/bottleneck in final replicate R3: one non-targeting guide holds 14.5% of R3 reads "
                        "(36,239 reads vs about 1,500 at T0). Total-count normalisation would be distorted.",
               "changes_result": True, "value": 0.145}
    assert invented_claims(multi.world, multi.family, [jackpot]) == []
    bottleneck = {"issue": "Bottleneck: the library lost 30% of its guides between plasmid and T0, which distorts every "
                           "gene's fold change.", "changes_result": True, "value": 0.3}
    assert invented_claims(multi.world, multi.family, [bottleneck]) == [("plasmid_reference", True)]
    low = {"issue": "Low-count or dropout guides: 11 guides have normalised T0 < 30 (several have 0 reads in every "
                    "sample). I removed them.", "changes_result": True, "value": 11}
    replicate = {"issue": "Replicate-specific single-guide dropouts occur (ABL1_m1 R1 -3.8 vs R2 -1.1); the replicate "
                          "guide-LFC correlation is 0.77.", "changes_result": True, "value": 0.77}
    assert invented_claims(plasmid.world, plasmid.family, [low, replicate]) == []
    single = {"issue": "One guide of ABL1 is depleted in every replicate while its other three are flat, and it drives "
                       "the gene's call.", "changes_result": True, "value": 1}
    assert invented_claims(plasmid.world, plasmid.family, [single]) == [("single_guide", True)]


def test_l2_guide_level_two_site_guides_and_mean_driven_genes_are_truths_at_their_measured_size():
    """Blind study 11 (crispr guide_level, non_expressed): a 100 report capped at 20 for two true, handled observations
    flagged `changes_result: true`: "8 sgRNAs have 2 perfect-match target sites" (the library's scattered 2-site
    guides, in every world) and "Two genes are significant only because one guide is depleted" (a mean over guides
    calls them, the median does not). Both are declared nuisances with golden sizes; at ten times the size, or as the
    trap's own claim (3-8 sites on most of a gene's guides), they stay charged."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.l2 import invented_claims

    suite = load_suite()
    w = suite.worlds["crispr.L2.guide_level.non_expressed"]
    g = read_golden(w).values
    assert g["n_multi_match_sgrnas"] > 0 and g["n_mean_driven_genes"] > 0
    two = {"issue": f"{g['n_multi_match_sgrnas']} sgRNAs have 2 perfect-match target sites; multi-site cutting depletes "
                    "them whatever the gene, so they were removed.", "changes_result": True, "value": g["n_multi_match_sgrnas"]}
    mean = {"issue": f"{g['n_mean_driven_genes']} genes are significant only because one guide is depleted (others near 0); "
                     "a mean-based gene LFC would call them, the median does not.", "changes_result": True,
            "value": g["n_mean_driven_genes"]}
    assert invented_claims(w.world, w.family, [two, mean], g) == []
    assert invented_claims(w.world, w.family, [{**two, "value": 10 * g["n_multi_match_sgrnas"]}], g) == [("multi_locus", True)]
    assert invented_claims(w.world, w.family, [{**mean, "value": 10 * g["n_mean_driven_genes"] + 10}], g) == [("single_guide", True)]
    trap = {"issue": "Multi-locus guides: 6 genes have 3-8 perfect-match sites on most of their guides and deplete "
                     "whatever their function.", "changes_result": True, "value": 6}
    assert invented_claims(w.world, w.family, [trap], g) == [("multi_locus", True)]


def test_l1_a_count_of_the_listed_items_is_a_measure_only_with_the_list():
    """Blind study 11 (crispr L1 low_depth_sample): "value: how many records are affected" given as 1 (the one failed
    sample) with that sample listed graded as unmeasured (83.3). A count equal to the items the golden lists now
    passes where the issue's own list passes; the same count with a wrong list, or with no list, does not."""
    from benchmark.suite.freeze import ensure_built, read_golden
    from benchmark.suite.loader import load_suite
    from graders.grade import grade

    ref = load_suite().worlds["crispr.L1.integrity.low_depth_sample"]
    gold = read_golden(ref).values
    [sample] = gold["low_depth_samples"]

    def report(listed: str | None) -> str:
        return json.dumps({"assessment": "usable_with_caveats", "summary": "one sample failed depth QC", "issues": [
            {"category": "sample with insufficient sequencing depth", "severity": "blocking", "where": sample,
             "description": f"{sample} has far fewer reads per sgRNA than the other samples.", "value": 1,
             "action": "excluded it", "output": "low.txt" if listed else None}]})

    def graded(listed: str | None, tmp: Path):
        if listed:
            (tmp / "low.txt").write_text(listed + "\n")
        return grade(ref, gold, report(listed), products=tmp, inputs=ensure_built(ref))

    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b, tempfile.TemporaryDirectory() as c:
        assert graded(sample, Path(a)).score == 100.0
        assert graded("KBM7.initial", Path(b)).score < 80
        assert graded(None, Path(c)).score < 100


def test_l2_a_handled_feature_of_every_world_flagged_as_changing_the_result_is_no_invented_trap():
    """Blind study 8: three true observations, each handled and flagged `changes_result: true` as the prompt asks
    ("true for a problem you had to handle"), capped 100-point reports at 20: depth that differs between PBMC
    populations (normalised away), wild type's larger share after selection (removed by normalising to wild type), and
    wider MLE fold changes of the less-expressed genes of a clean matrix (shrunk). Each is now a declared nuisance; a
    structured entry must give a size the world has (scrna: its own median UMIs or their ratio), and a bare claim of
    the trap stays charged."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.l2 import invented_claims

    suite = load_suite()
    lane = suite.worlds["scrna.L2.markers.confound_lane"]
    g = read_golden(lane).values
    depth = {"issue": f"Library depth varies across cell types: the target's median is {g['median_umis_target']:.0f} UMIs "
                      f"per cell and the rest's {g['median_umis_other']:.0f}; counts were normalised per cell before testing.",
             "changes_result": True, "value": g["median_umis_target"]}
    assert invented_claims(lane.world, lane.family, [depth], g) == []
    wrong_size = {**depth, "value": 17 * g["median_umis_target"]}
    assert invented_claims(lane.world, lane.family, [wrong_size], g) == [("unnormalised_depth", True)]
    bare = {"issue": "Unnormalised depth drives the marker ranking.", "changes_result": True, "value": 2.0}
    assert invented_claims(lane.world, lane.family, [bare], g) == [("unnormalised_depth", True)]

    fit = suite.worlds["protein.L2.fitness.low_counts"]
    share = {"issue": "Wild type is 54% of the input reads and 72% after selection; scores are taken relative to wild "
                      "type, since total-library normalisation would add a constant 0.42 log2.",
             "changes_result": True, "value": 0.42}
    assert invented_claims(fit.world, fit.family, [share], read_golden(fit).values) == []
    claim = {"issue": "Normalisation to the library is wrong here and changes the result.", "changes_result": True,
             "value": 1.4}
    assert invented_claims(fit.world, fit.family, [claim], read_golden(fit).values) == [("wt_normalisation", True)]

    clean = suite.worlds["bulkrna.L2.lfc_ranking.clean"]
    wider = {"issue": "Unshrunk LFCs are noisier for the lower-count genes (baseMean 30, LFC 2.9 +- 0.7); ranking on "
                      "shrunk estimates swaps one gene at rank 19.", "changes_result": True, "value": 1}
    assert invented_claims(clean.world, clean.family, [wider], read_golden(clean).values) == []
    trap = {"issue": "Noisy low-count genes dominate the ranking.", "changes_result": True, "value": None}
    assert invented_claims(clean.world, clean.family, [trap], read_golden(clean).values) == [("noisy_lfc", True)]


def test_l2_ldscore_hits_at_any_accepted_intercept_score_full_marks():
    """Blind study 8 (gwas ldscore.confounded): an intercept of 2.02 against the reference's 1.92 passed the intercept
    check (within 0.15) while its 37 hits failed the 51 required. The hits are now those of every intercept the check
    accepts: required at its strictest, allowed at its most lenient. Genomic control and the raw statistics still fail."""
    import pandas as pd

    from benchmark.suite.freeze import ensure_built, read_golden
    from benchmark.suite.loader import load_suite
    from graders.l2 import grade_l2
    from worlds.gwas import analysis as A

    ref = load_suite().worlds["gwas.L2.ldscore.confounded"]
    g = read_golden(ref).values
    t = A.read(ensure_built(ref) / "sumstats.tsv")

    def score(divisor: float | None, tmp: Path, label: str) -> float:
        tab = A.ldsc_table(t, divisor) if divisor else A.gc_table(t)[0]
        d = tmp / label
        d.mkdir()
        tab[["SNP", "chisq"]].to_csv(d / "corrected.csv", index=False)
        hits = sorted(tab.loc[tab["p"] < A.GWS, "SNP"])
        rep = {"ldsc_intercept": round(divisor or g["ldsc_intercept"], 3), "hits": hits, "n_hits": len(hits),
               "table": "corrected.csv", "analysis_usable": True, "issues_found": [
                   f"Confounding: the LD-score intercept is {g['ldsc_intercept']:.2f}; statistics divided by it."],
               "lambda_gc": g["lambda_gc"], "summary": "corrected"}
        return grade_l2(ref.world, ref.family, g, json.dumps(rep), d).score * 100

    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for k, shift in enumerate((-0.12, 0.0, 0.1, 0.14)):
            assert score(g["ldsc_intercept"] + shift, tmp, f"s{k}") == pytest.approx(100.0), shift
        assert score(None, tmp, "gc") < 50  # genomic control over-corrects
        assert score(1.0, tmp, "raw") == 0.0  # the raw statistics are the trap
    assert pd.Series(g["hits_required"]).isin(g["hits"]).all()


def test_l2_meta_sample_overlap_any_standard_correlation_estimate_scores_full_marks(tmp_path):
    """Issue 39 item 5 (gwas sample overlap): the pooled SEs with the shared samples' covariance are accepted whichever
    standard estimate of the error correlation an analyst takes: the sample sizes meta.json gives (N_shared /
    sqrt(N_A N_B)), the z-score correlation over SNPs with |z| < 2, < 3 or < 4 in both; treating the studies as
    independent is the trap and scores 0."""
    from benchmark.suite.freeze import ensure_built, read_golden
    from benchmark.suite.loader import load_suite
    from worlds.gwas import analysis as A

    ref = load_suite().worlds["gwas.L2.meta.sample_overlap"]
    g = read_golden(ref).values
    d = ensure_built(ref)
    a, b = A.read(d / "study_A.tsv"), A.read(d / "study_B.tsv")
    studies = json.loads((d / "meta.json").read_text())["studies"]
    shared = studies["study_B"]["cohorts"]["Biobank (interim release)"]  # the release study A analyses in full
    from_n = shared / (studies["study_A"]["N"] * studies["study_B"]["N"]) ** 0.5
    estimates = {"sample sizes": from_n, **{f"|z|<{t}": A.error_correlation(a, b, t)[0] for t in (2.0, 3.0, 4.0)}}

    def score(rho: float, label: str) -> float:
        m = A.meta_table(a, b, rho=rho)
        (tmp_path / label).mkdir()
        m.to_csv(tmp_path / label / "meta.csv", index=False)
        hits = sorted(m.loc[m["p"] < A.GWS, "SNP"])
        rep = {"hits": hits, "n_hits": len(hits), "table": "meta.csv", "analysis_usable": True, "summary": "meta",
               "issues_found": [f"Sample overlap: the studies' z-scores correlate at {rho:.2f}; pooled SEs include it."]}
        return grade_l2(ref.world, ref.family, g, json.dumps(rep), tmp_path / label).score * 100

    for k, (label, rho) in enumerate(sorted(estimates.items())):
        assert 0.3 < rho < 0.7 and score(rho, f"e{k}") == pytest.approx(100.0), (label, rho)
    assert score(0.0, "independent") == 0.0


def test_l1_a_count_of_affected_values_measures_the_fraction_it_reproduces():
    """Blind study 9 (enhancer dna_normalised): 7,654 non-integer DNA values of 7,657 rows is the 0.9996 fraction the
    rubric measures, stated as the count the prompt's `value` allows; it was read against the row total only (exact)
    and graded unmeasured. A count that reproduces no measured fraction stays unmeasured."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite

    ref = load_suite().worlds["enhancer.L1.integrity.dna_normalised"]
    g = read_golden(ref).values

    def status(value):
        rep = {"assessment": "usable_with_caveats", "summary": "DNA counts normalised", "issues": [
            {"category": "DNA counts are normalised (CPM), not raw reads", "severity": "warning", "where": "counts.csv",
             "description": "dna_count sums to one million and is non-integer", "value": value,
             "action": "listed", "output": None}]}
        return grade_l1(ref.world, ref.family, g, json.dumps(rep)).state

    assert status(round(g["nonint_fraction"] * g["n_rows"])) == "DIAGNOSE-NOT-ACT"
    assert status(g["n_rows"]) == "DIAGNOSE-NOT-ACT"
    assert status(g["nonint_fraction"]) == "DIAGNOSE-NOT-ACT"
    assert status(round(0.5 * g["n_rows"])) == "DIAGNOSE-NOT-ACT-PARTIAL"


def test_l1_jackpot_guides_of_a_sound_crispr_table_are_a_truth_not_a_caution():
    """Blind study 9 (crispr boundary_unequal_depth): two non-targeting guides ~30x their expected count in one final
    sample (the screen's clone-size noise, present across the family's worlds) reported as a warning made a sound world
    OVER-CAUTIOUS (50). The family declares jackpots a nuisance; an alarm about anything else stays a caution."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite

    ref = load_suite().worlds["crispr.L1.integrity.boundary_unequal_depth"]
    g = read_golden(ref).values

    def status(category, description, value=2):
        rep = {"assessment": "usable_with_caveats", "summary": "usable", "issues": [
            {"category": category, "severity": "warning", "where": "counts.txt", "description": description,
             "value": value, "action": "listed the guides", "output": None}]}
        return grade_l1(ref.world, ref.family, g, json.dumps(rep)).state

    assert status("jackpot sgRNAs", "NT_0001 and NT_0031 read about 30x their initial share in HL60.final") == "CLEAN-CORRECT"
    assert status("outlier read counts", "two guides spike in one sample (28x, 32x)") == "CLEAN-CORRECT"
    assert status("PCR duplicates", "two guides may be PCR duplicates of each other") == "OVER-CAUTIOUS"
    # blind study 10: the shallow-but-adequate world's own feature, low-count guides, is a truth of that world
    ref = load_suite().worlds["crispr.L1.integrity.boundary_shallow"]
    g = read_golden(ref).values
    # measured at a size the feature has there (its count of low-count sgRNAs, blind study 29), not at an unrelated one
    n = g["n_low_initial_guides"]
    assert status("low-count sgRNAs in the initial samples", f"{n} sgRNAs have fewer than 10 reads in an initial sample; "
                  "their fold changes are noisy", value=n) == "CLEAN-CORRECT"


def test_l1_a_copy_number_gain_shared_by_chip_and_input_is_a_truth_not_a_caution():
    """Blind study 10 (histone amplified_input): the boundary world's gain, present in the ChIP and its input alike and
    removed by input normalisation, reported as a warning with its fold was graded OVER-CAUTIOUS. It is the world's
    declared nuisance now; calling it contamination or a swap of the input stays an invention."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite

    ref = load_suite().worlds["histone.L1.integrity.amplified_input"]
    g = read_golden(ref).values

    def state(category, description):
        rep = {"assessment": "usable_with_caveats", "summary": "usable", "issues": [
            {"category": category, "severity": "warning", "where": "chr20", "description": description, "value": 3.3,
             "action": "normalise to the input", "output": None}]}
        return grade_l1(ref.world, ref.family, g, json.dumps(rep)).state

    assert state("copy-number gain", "a 0.6 Mb block of chr20 has 3.3x coverage in the input and the ChIP") == "CLEAN-CORRECT"
    assert state("input swapped with the ChIP", "the input file looks like the ChIP") != "CLEAN-CORRECT"


def test_l1_a_wrong_mark_is_recognised_in_its_own_words_and_counted_in_genes():
    """Blind study 11 (histone wrong_mark): "ChIP signal inconsistent with the declared mark (H3K4me3); looks like a
    repressive broad mark such as H3K27me3", valued as the 82 expressed genes without TSS signal, graded NOTICE-WRONG
    (16.7). The category names the defect, and the prompt's "how many genes are affected" is a size: any count from
    the top-quartile genes to every gene of TPM >= 1 without the mark's TSS signal. A count of every gene is not."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.grade import grade

    ref = load_suite().worlds["histone.L1.integrity.wrong_mark"]
    gold = read_golden(ref).values
    lo, hi = gold["n_expressed_without_tss_signal"]

    def report(value):
        return json.dumps({"assessment": "unusable", "summary": "not H3K4me3", "issues": [
            {"category": "ChIP signal inconsistent with the declared mark (H3K4me3); looks like a repressive broad mark "
                         "such as H3K27me3", "severity": "blocking", "where": "alignments/",
             "description": "Expressed genes lack TSS enrichment; silent genes are broadly enriched.", "value": value,
             "action": "stopped", "output": None}]})

    assert 0 < lo < hi
    assert grade(ref, gold, report((lo + hi) // 2)).score == 100.0
    g = grade(ref, gold, report(gold["n_genes"] * 10))
    assert g.status == "DIAGNOSE-AND-ACT-PARTIAL", g.reason


def test_l1_a_defect_in_its_own_words_is_recognised_by_its_subject_and_measured_value():
    """Blind study 14 (enhancer low_replicate_correlation_mild): "replicate_reproducibility: the two RNA replicates
    agree less well than expected", r = 0.895 against the golden 0.894, graded NOTICE-WRONG (16.7): no catalogued
    phrase names poor agreement in those words. An alarm that claims no catalogued defect, is about the defect's
    subject (replicates) and measures it is the diagnosis. A sound correlation, or the same value on another subject,
    is not."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.grade import grade

    ref = load_suite().worlds["enhancer.L1.integrity.low_replicate_correlation_mild"]
    gold = read_golden(ref).values

    def report(category, lead, value):
        return json.dumps({"assessment": "usable_with_caveats", "summary": "rep2 noisy", "issues": [
            {"category": category, "severity": "warning", "where": "rna_rep1 vs rna_rep2",
             "description": f"{lead}. Element-level Pearson r on log2 RNA/DNA; the excess noise sits in rna_rep2.",
             "value": value, "action": "down-weighted rna_rep2", "output": None}]})

    r = gold["replicate_r"]
    assert 0.8 < r < 0.95
    g = grade(ref, gold, report("replicate_reproducibility", "The two RNA replicates agree less well than expected",
                                round(r + 0.001, 3)))
    assert g.status == "DIAGNOSE-AND-ACT" and g.score == 100.0, g.reason
    assert grade(ref, gold, report("replicate_reproducibility", "The two RNA replicates agree less well than expected",
                                   0.975)).status == "NOTICE-WRONG"
    assert grade(ref, gold, report("barcode_quality", "Barcode representation is uneven",
                                   round(r + 0.001, 3))).status == "NOTICE-WRONG"
    # a sweep of values over the subject, one alarm each, is no measurement: none recognises
    sweep = json.loads(report("replicate_reproducibility", "The replicates agree less well than expected", 0.5))
    sweep["issues"] = [dict(sweep["issues"][0], value=round(v, 2)) for v in (0.5, 0.6, 0.7, 0.8, 0.9)]
    assert grade(ref, gold, json.dumps(sweep)).status == "NOTICE-WRONG"


def test_l1_corrected_copies_written_side_by_side_name_every_file_they_copy():
    """Blind study 13 (histone chip_input_swap): the analyst relabelled both BAMs into fixed/ and named one of them
    as the issue's `output` (one path per issue), valued 2 (the two files): recall 0.5, graded 50. The corrected
    copies of the same format beside the named one name their files too, and the count of the listed files is the
    size; one copy alone still names one file."""
    import shutil

    from benchmark.suite.freeze import ensure_built, read_golden
    from benchmark.suite.loader import load_suite
    from graders.grade import grade

    ref = load_suite().worlds["histone.L1.integrity.chip_input_swap"]
    gold, world = read_golden(ref).values, ensure_built(ref)
    report = json.dumps({"assessment": "usable_with_caveats", "summary": "swapped", "issues": [
        {"category": "ChIP / input BAM swap", "severity": "blocking", "where": "alignments/",
         "description": "The file named input carries the H3K4me3 signal and the file named ChIP is flat.", "value": 2,
         "action": "relabelled both into fixed/", "output": "fixed/H3K4me3_chip.bam"}]})
    with tempfile.TemporaryDirectory() as both, tempfile.TemporaryDirectory() as one:
        for root, names in ((both, ("chip", "input")), (one, ("chip",))):
            (Path(root) / "fixed").mkdir()
            for n in names:
                other = "input" if n == "chip" else "chip"
                shutil.copy(world / "alignments" / f"H3K4me3_{other}.bam", Path(root) / "fixed" / f"H3K4me3_{n}.bam")
        assert grade(ref, gold, report, products=Path(both), inputs=world).score == 100.0
        assert grade(ref, gold, report, products=Path(one), inputs=world).score < 80


def test_value_check_accepts_every_count_from_the_reference_to_the_truth():
    """Blind study 15 (scrna lane_batch): the analyst called the 8 genes the simulation changed and one more; the count
    check held 9 against the reference solver's 5 (+-3) and failed although the list beat the reference's against the
    truth. With `truth_end` every count between the reference's and the truth's is right; the tolerance applies
    beyond them, and a count past both still fails."""
    golden = {"n_de_genes": 5, "truth": {"de_genes": [f"G{i}" for i in range(8)]}}
    c = Check(id="n_de", kind="value", field="n", golden="n_de_genes", truth_end="truth.de_genes", abs_tol=3)
    assert run_check(c, {"n": 9}, golden).credit == 1.0
    assert run_check(c, {"n": 11}, golden).credit == 1.0  # 8 + the tolerance
    assert run_check(c, {"n": 12}, golden).credit == 0.0
    assert run_check(c, {"n": 1}, golden).credit == 0.0
    without = Check(id="n_de", kind="value", field="n", golden="n_de_genes", abs_tol=3)
    assert run_check(without, {"n": 9}, golden).credit == 0.0
    ranged = Check(id="n", kind="value", field="n", golden="r", truth_end="truth.de_genes", abs_tol=0)
    assert run_check(ranged, {"n": 3}, {"r": [2, 4], "truth": {"de_genes": ["a"] * 6}}).credit == 1.0
    assert run_check(ranged, {"n": 6}, {"r": [2, 4], "truth": {"de_genes": ["a"] * 6}}).credit == 1.0
    assert run_check(ranged, {"n": 7}, {"r": [2, 4], "truth": {"de_genes": ["a"] * 6}}).credit == 0.0
    numeric = Check(id="total", kind="value", field="mb", golden="mb", truth_end="truth.mb", rel_tol=0.1)
    assert run_check(numeric, {"mb": 0.8}, {"mb": 0.3, "truth": {"mb": 1.1}}).credit == 1.0  # a number: its value
    assert run_check(numeric, {"mb": 1.3}, {"mb": 0.3, "truth": {"mb": 1.1}}).credit == 0.0


def _l1_report(category, description, value, output):
    return json.dumps({"assessment": "usable_with_caveats", "summary": "see issues", "issues": [
        {"category": category, "severity": "warning", "where": "the data file", "description": description,
         "value": value, "action": "corrected", "output": output}]})


def test_l1_a_corrected_copy_that_merges_or_drops_columns_names_those_columns():
    """Blind study 16 (bulkrna technical_replicates): two technical replicates summed into one column, S06 into S02,
    in a corrected copy of counts.tsv, were read by rows (genes) and failed the listed samples (FABRICATED 0 with the
    words "duplicate library"). The golden items are the matrix's columns, so the copy is read by the columns it
    changes or removes; merging the wrong pair names the wrong columns."""
    import csv as _csv

    from benchmark.suite.freeze import ensure_built, read_golden
    from benchmark.suite.loader import load_suite
    from graders.grade import grade

    ref = load_suite().worlds["bulkrna.L1.integrity.technical_replicates"]
    gold, world = read_golden(ref).values, ensure_built(ref)
    a, b = gold["techrep_groups"][0][:2]
    rows = list(_csv.reader(open(world / "counts.tsv"), delimiter="\t"))
    head = rows[0]
    other = next(h for h in head[1:] if h not in (a, b))

    def collapsed(x, y):
        i, j = head.index(x), head.index(y)
        out = [[h for k, h in enumerate(head) if k != j]]
        for r in rows[1:]:
            r = list(r)
            r[i] = str(int(r[i]) + int(r[j]))
            out.append([v for k, v in enumerate(r) if k != j])
        return "\n".join("\t".join(r) for r in out) + "\n"

    desc = (f"{a} and {b} differ only by Poisson noise: the same library counted twice (technical replicates), "
            "listed as two biological samples")
    with tempfile.TemporaryDirectory() as right, tempfile.TemporaryDirectory() as wrong:
        (Path(right) / "counts_collapsed.tsv").write_text(collapsed(a, b))
        (Path(wrong) / "counts_collapsed.tsv").write_text(collapsed(a, other))
        rep = _l1_report("duplicate_library_pseudoreplicate", desc, 2, "counts_collapsed.tsv")
        g = grade(ref, gold, rep, products=Path(right), inputs=world)
        assert g.status == "DIAGNOSE-AND-ACT" and g.score == 100.0, g.reason
        assert grade(ref, gold, rep, products=Path(wrong), inputs=world).score < 80


def test_l1_a_bgzipped_vcf_corrected_in_its_own_format_is_read_by_its_sample_columns():
    """Blind study 16 (clinvar sample_swap, duplicate_individual): a corrected copy of calls.vcf.gz written as a bgzipped
    VCF (its original's own format) was refused as compressed, and read by rows once accepted. It is read by the
    sample columns it changes: the relabelled children of a swap, or the one copy of a duplicated individual dropped
    (the pair identified, one copy kept). A writer's padding of missing FORMAT sub-fields and reprinted numbers change
    no column; a copy that relabels the wrong samples names the wrong ones."""
    import pysam

    from benchmark.suite.freeze import ensure_built, read_golden
    from benchmark.suite.loader import load_suite
    from graders.checks import _read_text
    from graders.grade import grade

    def write_bgzf(text: str, path: Path) -> None:
        plain = path.with_suffix("")
        plain.write_text(text)
        pysam.tabix_compress(str(plain), str(path), force=True)
        plain.unlink()

    ref = load_suite().worlds["clinvar.L1.integrity.sample_swap"]
    gold, world = read_golden(ref).values, ensure_built(ref)
    listed = next(c for c in ref.world.rubric.actions if c.kind == "product_items")
    swapped = sorted(gold[listed.golden])
    lines = _read_text(world / "calls.vcf.gz").splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("#CHROM"))
    head = lines[at].split("\t")

    def relabel(names):  # rotate the labels of `names` (the swap put right, or a wrong one)
        h = list(head)
        idx = [h.index(n) for n in names]
        for k, i in enumerate(idx):
            h[i] = names[(k + 1) % len(names)]
        body = [ln.replace("./.:0,0:0", "./.:0,0:0:.:.:.") for ln in lines[at + 1:]]  # a writer's padding
        return "\n".join(lines[:at] + ["\t".join(h)] + body) + "\n"

    others = [h for h in head[9:] if h not in swapped][: len(swapped)]
    desc = f"The children of three trios are mislabelled in rotation: {', '.join(swapped)} (Mendelian errors 15-25%)"
    with tempfile.TemporaryDirectory() as right, tempfile.TemporaryDirectory() as wrong:
        write_bgzf(relabel(swapped), Path(right) / "calls.relabelled.vcf.gz")
        write_bgzf(relabel(others), Path(wrong) / "calls.relabelled.vcf.gz")
        rep = _l1_report("sample swap", desc, len(swapped), "calls.relabelled.vcf.gz")
        g = grade(ref, gold, rep, products=Path(right), inputs=world)
        assert g.status == "DIAGNOSE-AND-ACT", g.reason
        assert grade(ref, gold, rep, products=Path(wrong), inputs=world).status != "DIAGNOSE-AND-ACT"

    ref = load_suite().worlds["clinvar.L1.integrity.duplicate_individual"]
    gold, world = read_golden(ref).values, ensure_built(ref)
    lines = _read_text(world / "calls.vcf.gz").splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("#CHROM"))
    head = lines[at].split("\t")
    drop = head.index(gold["duplicate_samples"][0])
    cut = lambda ln: "\t".join(v for k, v in enumerate(ln.split("\t")) if k != drop)  # noqa: E731
    pair = " and ".join(gold["duplicate_samples"])
    with tempfile.TemporaryDirectory() as d:
        write_bgzf("\n".join(lines[:at] + [cut(ln) for ln in lines[at:]]) + "\n", Path(d) / "calls.corrected.vcf.gz")
        rep = _l1_report("duplicate individual", f"{pair} are the same person (IBS2 0.98); one copy removed",
                         gold["duplicate_kinship"], "calls.corrected.vcf.gz")
        g = grade(ref, gold, rep, products=Path(d), inputs=world)
        assert g.status == "DIAGNOSE-AND-ACT", g.reason


def test_crispr_corrected_counts_may_drop_a_jackpot_row_but_not_keep_the_swap():
    """Blind study 16 (crispr swapped_samples): the analyst swapped the HL60 columns back and also dropped one
    non-targeting guide holding a fifth of a sample's reads; the column sums then missed the reference's and the
    copy failed. A copy dropping up to 1% of the rows passes on the sums it can still hold; an unswapped copy, with
    or without the dropped row, still fails."""
    import pandas as pd

    from benchmark.suite.freeze import ensure_built, read_golden
    from benchmark.suite.loader import load_suite
    from worlds.crispr.solvers import corrected_counts

    ref = load_suite().worlds["crispr.L1.integrity.swapped_samples"]
    gold, world = read_golden(ref).values, ensure_built(ref)
    src = next(p for p in world.iterdir() if p.name.startswith("counts"))
    tab = pd.read_csv(src, sep=None, engine="python")
    line = gold["swapped_lines"][0]
    fixed = tab.rename(columns={f"{line}.initial": f"{line}.final", f"{line}.final": f"{line}.initial"})
    jackpot = int(fixed[f"{line}.final"].idxmax())
    with tempfile.TemporaryDirectory() as d:
        for name, t, ok in (("full", fixed, 1.0), ("dropped", fixed.drop(index=jackpot), 1.0),
                            ("unswapped", tab.drop(index=jackpot), 0.0)):
            p = Path(d) / f"{name}.tsv"
            t.to_csv(p, sep="\t", index=False)
            assert corrected_counts(p, gold, None)[0] == ok, (name, corrected_counts(p, gold, None))


def test_l2_low_count_guides_and_unrecorded_sex_are_truths_at_their_measured_size():
    """Blind study 16: two true, handled observations flagged `changes_result: true` capped 100 reports at 20.
    crispr essential strong_depletion: "9 sgRNAs have < 30 reads in the initial sample; removed" (a handful of
    low-count guides is every library's background; the golden counts them) read as the low_representation trap.
    bulkrna condition_de clean: "batch without sex gives artefactual log2FCs for XIST and the 7 chrY genes" (sex,
    unrecorded, is unbalanced across the batches) read as the batch confound. Both are declared nuisances now; at the
    trap's size, or without the sex genes, they stay charged."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.l2 import invented_claims

    suite = load_suite()
    w = suite.worlds["crispr.L2.essential.strong_depletion"]
    g = read_golden(w).values
    n = g["n_low_initial_guides"]
    low = {"issue": f"Low-count sgRNAs: {n} sgRNAs have < 30 reads in the initial sample, so their fold changes are "
                    "unmeasurable. Removed before testing.", "changes_result": True, "value": n}
    assert invented_claims(w.world, w.family, [low], g) == []
    assert invented_claims(w.world, w.family, [{**low, "value": 10 * n}], g) == [("low_representation", True)]
    w = suite.worlds["bulkrna.L2.condition_de.clean"]
    g = read_golden(w).values
    sex = {"issue": "Batch in ~batch+condition without sex gives artefactual condition log2FCs of -3.9 to -5.0 for "
                    "XIST and the 7 chrY genes, because batch is partly aligned with sex; sex was added to the design.",
           "changes_result": True, "value": 8}
    assert invented_claims(w.world, w.family, [sex], g) == []
    batch = {"issue": "Batch effect confounds the treatment: batch B shifts 180 genes and must be modelled.",
             "changes_result": True, "value": 180}
    assert invented_claims(w.world, w.family, [batch], g) == [("batch_confound", True)]


def test_study_17_true_features_in_an_experts_words_are_not_claims_of_other_defects():
    """Blind study 17: three sound reports marked down for true statements. calorimetry L1 clean: "the pulses' temperature
    intervals overlap at three run joins; summing energy over every row counts 8.94 J twice" (runs overlap by design)
    graded OVER-CAUTIOUS; a duplicate-points claim without the overlap is still an invention. nuclear L2 summing_mid:
    "room background subtracted by scaling the background spectrum to each live time", flagged as changing the result,
    claimed the dead-time trap through the words "live time"; a dead-time claim still is one. histone L1
    multimapper_pileups: the reads in the pile-up regions (the simulation's own count) are a size of the defect."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.grade import grade
    from graders.l1 import grade_l1
    from graders.l2 import invented_claims

    suite = load_suite()
    ref = suite.worlds["calorimetry.L1.integrity.clean"]
    gold = read_golden(ref).values
    overlap = _l1_report("run_overlap_double_counting", "The temperature intervals of the heat pulses overlap at three "
                         "run joins (1.37, 0.53 and 2.66 K): summing energy_J over all rows counts 8.94 J twice.", 8.94,
                         None)
    assert grade_l1(ref.world, ref.family, gold, overlap).state == "CLEAN-CORRECT"
    dup = _l1_report("duplicate points", "Pulses S5-017 and S5-018 are the same pulse written twice.", 2, None)
    assert grade_l1(ref.world, ref.family, gold, dup).state == "FABRICATED"

    w = suite.worlds["nuclear.L2.decay.summing_mid"]
    g = read_golden(w).values
    background = {"issue": "Room background was subtracted by scaling the 86400 s background spectrum to each live time. "
                           "It is 0.385 cps in the window.", "changes_result": True, "value": 0.385}
    assert invented_claims(w.world, w.family, [background], g) == []
    dead = {"issue": "Dead time of 25% distorts every rate; rates were put per live second.", "changes_result": True,
            "value": 0.25}
    assert invented_claims(w.world, w.family, [dead], g) == [("dead_time", True)]

    ref = suite.worlds["histone.L1.integrity.multimapper_pileups"]
    gold = read_golden(ref).values
    n = gold["truth"]["pileup_fragments_chip"]
    rep = _l1_report("repeat pile-ups of ambiguously mapped reads", f"36 pile-ups of MAPQ-0 reads hold {n} ChIP reads.",
                     n, None)
    assert grade(ref, gold, rep).reason.count("measured value in tolerance") == 1
    off = _l1_report("repeat pile-ups of ambiguously mapped reads", "36 pile-ups of MAPQ-0 reads.", 2 * n, None)
    assert "no measured value in tolerance" in grade(ref, gold, off).reason


@pytest.mark.parametrize("wid, code, key, words", [
    ("histone.L1.integrity.build_mismatch", "genome_build_mismatch", "n_genes",
     "genes.csv coordinates are offset from the BAMs' by a constant per contig (another genome build)"),
    ("protein.L1.integrity.numbering_offset", "numbering_offset", "n_rows",
     "residue numbering is offset by one position from the construct sequence"),
    ("scrna.L1.integrity.feature_misalignment", "feature_misalignment", "n_genes",
     "the feature list is shifted against the matrix rows (gene names misaligned)"),
])
def test_l1_a_whole_file_offset_is_measured_by_how_many_rows_it_moves(wid, code, key, words):
    """Blind study 18 (histone build_mismatch): per-contig offsets measured within 100 bp, a corrected annotation
    written, and value = 155, "the number of genes affected", graded DIAGNOSE-AND-ACT-PARTIAL (83.3): only an offset
    was read as the size. The prompt's value is "how many records/reads/genes are affected, or the affected fraction, or
    the shift/offset": an offset of a whole file moves every row, so that count is its size too. Half the count is
    not."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.grade import grade

    ref = load_suite().worlds[wid]
    gold = read_golden(ref).values
    assert ref.world.defect == code

    def state(value):
        return grade(ref, gold, json.dumps({"assessment": "usable_with_caveats", "summary": words, "issues": [
            {"category": code.replace("_", " "), "severity": "blocking", "where": "all rows", "description": words,
             "value": value, "action": "reported", "output": None}]})).status

    assert state(gold[key]) == state(gold.get("offset", gold.get("feature_row_offset", gold.get("gene_offset_chr19"))))
    assert state(gold[key] // 2) != state(gold[key])


def test_l2_an_unsolvable_world_declared_unusable_is_not_zeroed_for_the_list_it_gives():
    """Blind study 18 (bulkrna prefiltered_on_outcome): the analyst declared the outcome-filtered matrix unusable, named
    the circular filter, and still gave a provisional list of 11 genes (8 true), a subset of the trap's 19: zeroed as
    "trap followed without qualification". The report's own claim, the world's answer, qualifies the list: it scores its
    recognition and its verdict, and the list's checks still give nothing for calls the world says cannot be made. The
    same list called usable is the trap; a solvable world declared unusable keeps its zero_if."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.grade import grade

    suite = load_suite()
    ref = suite.worlds["bulkrna.L2.condition_de.prefiltered_on_outcome"]
    gold = read_golden(ref).values
    assert ref.world.rubric.solvable is False
    trap = sorted(gold["trap_de_genes"])

    def report(usable, genes):
        return json.dumps({"test_condition": "treated", "reference_condition": "control", "de_genes": genes,
                           "n_de_genes": len(genes), "up_genes": [], "down_genes": [], "de_table": "de.csv",
                           "median_log2fc": 0.5, "method": {"design": "~condition", "normalization": "median of ratios",
                                                            "samples_used": "all"},
                           "issues_found": ["The genes were filtered on the treated/control fold change of these same "
                                            "libraries: circular, the FDR is not controlled."],
                           "analysis_usable": usable, "summary": "provisional"})

    qualified = grade(ref, gold, report(False, trap[:12]))
    assert qualified.score == pytest.approx(50.0), qualified.reason
    assert grade(ref, gold, report(False, [])).score == pytest.approx(100.0)
    assert grade(ref, gold, report(True, trap[:12])).score == 0.0
    solvable = next(r for wid, r in sorted(suite.worlds.items()) if r.world.level == "L2" and r.world.rubric.solvable
                    and r.world.rubric.zero_if and r.family.id == "bulkrna.L2.condition_de" and r.world.defect)
    sg = read_golden(solvable).values
    naive = {"test_condition": "treated", "reference_condition": "control", "de_genes": sg.get("trap_de_genes", []),
             "n_de_genes": len(sg.get("trap_de_genes", [])), "up_genes": [], "down_genes": [], "de_table": "de.csv",
             "median_log2fc": 0.0, "method": {"design": "~condition", "normalization": "x", "samples_used": "all"},
             "issues_found": [], "analysis_usable": False, "summary": "x"}
    g = grade(solvable, sg, json.dumps(naive))
    assert "zero_if not applied: the report declares" not in " ".join(g.caps), (solvable.id, g.caps)


def test_l1_a_defect_whose_code_has_no_subject_word_is_recognised_by_the_familys_subject_words():
    """Blind study 19 (gwas complemented_eaf): "allele_coding / effect-allele mislabel (AF1 and BETA refer to A2 = panel
    REF)", AF1 = 1 - EUR_AF measured for all 2,573 SNPs, graded NOTICE-WRONG (16.7): the code's words ("complemented",
    "eaf") are a state word and an acronym the alarm does not use, so no alarm in its own words could be about its
    subject. The family names it (defect_subjects: AF1, the allele frequency): that alarm with its measured count is the
    diagnosis; the same words with a wrong count, or the right count on another column, are not. A family that names a
    subject for a code it does not catalogue is refused."""
    import pydantic

    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.grade import grade
    from graders.manifest import FamilyManifest

    ref = load_suite().worlds["gwas.L1.integrity.complemented_eaf"]
    gold = read_golden(ref).values
    n = gold["n_af_other_allele"]

    def status(category, value):
        return grade(ref, gold, json.dumps({"assessment": "usable_with_caveats", "summary": "see issues", "issues": [
            {"category": category, "severity": "blocking", "where": "sumstats.tsv",
             "description": "Checked against the panel; see the category.", "value": value, "action": "reported",
             "output": None}]})).status

    own = "allele_coding / effect-allele mislabel (AF1 and BETA refer to A2 = panel REF)"
    assert status(own, n).startswith("DIAGNOSE"), status(own, n)
    assert status(own, n // 2) == "NOTICE-WRONG"
    assert status("SE column inconsistent with N", n) == "NOTICE-WRONG"
    data = ref.family.model_dump()
    data["defect_subjects"] = {"no_such_defect": ["AF1"]}
    with pytest.raises(pydantic.ValidationError, match="defect_subjects"):
        FamilyManifest.model_validate(data)


def test_l2_a_nuisance_that_names_the_items_showing_it_is_a_truth_and_one_naming_none_is_the_trap():
    """Blind study 20 (scrna markers, clean NK world): "one-vs-rest ranking is misleading here: GZMM (one-vs-rest AUC
    0.84, min pairwise AUC 0.54), CALM1, GZMH, IFITM2 and HCST look like NK markers against the pooled rest ..." was
    charged as the one-vs-rest trap (capped at 20), although one-vs-rest calls exactly those genes in that world without
    their being markers against every population. The family declares the shared-programme feature with the golden
    lists of the genes that show it (`Nuisance.items`): an entry naming them is a truth; the same words naming true
    markers, or naming no gene (the alarmist's bare claim with a made-up size), claim the trap; in the trap world
    itself the feature does not apply."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.l2 import invented_claims

    suite = load_suite()
    clean = suite.worlds["scrna.L2.markers.clean"]
    golden = read_golden(clean).values
    # what separates at the strict bar (min pairwise AUROC 0.75) is a marker by every rule (blind study 24)
    shown = sorted(set(golden["naive_significant_markers"]) - set(golden["strict_marker_genes"]))
    markers = sorted(golden["strict_marker_genes"])

    def entry(genes):
        return {"issue": f"One-vs-rest ranking is misleading here: genes such as {', '.join(genes)} (one-vs-rest AUC "
                         "0.84, min pairwise AUC 0.54) look like markers against the pooled rest but do not separate "
                         "the target from its closest population. I used the worst-case pairwise score instead.",
                "changes_result": True, "value": 0.54}

    assert invented_claims(clean.world, clean.family, [entry(shown[:5])], golden) == []
    assert invented_claims(clean.world, clean.family, [entry(markers[:5])], golden) == [("nonspecific_vs_rest", True)]
    assert invented_claims(clean.world, clean.family, [entry(shown[:3] + markers[:4])], golden) == [
        ("nonspecific_vs_rest", True)]
    bare = {"issue": "nonspecific vs rest: present, and it changes the result (measured effect 17%)",
            "changes_result": True, "value": 17}
    assert invented_claims(clean.world, clean.family, [bare], golden) == [("nonspecific_vs_rest", True)]
    assert invented_claims(clean.world, clean.family, [entry(shown[:5])]) == [], "no golden: nothing contradicts it"
    n = next(n for n in clean.family.nuisance if n.resembles == "nonspecific_vs_rest")
    assert not n.applies_to("scrna.L2.markers.nonspecific_vs_rest")


def test_l1_a_fraction_stated_as_a_fold_is_measured_as_its_inverse():
    """Blind study 21 (crispr low_depth_sample): "HL60.final ... is 21.7x shallower than the median of the others"
    with value 21.7 graded "no measured value" against the depth ratio 0.053. A value the issue's words state as a
    fold is read as the inverse fraction; the same number without fold words, or a wrong fold, measures nothing."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.grade import grade

    ref = load_suite().worlds["crispr.L1.integrity.low_depth_sample"]
    # the mean reads per sgRNA (21.9, a third accepted size since blind study 26) sits inside the fold reading's band,
    # so it is set out of reach here: only the ratio, read through the fold words, is under test
    golden = {**read_golden(ref).values, "low_depth_mean": 1e9}
    sample = golden["low_depth_samples"][0]
    # 15% off the ratio (the analyst's "median of the others"), and more than 20% from the median-reads measure (18),
    # so only the fold reading can pass it
    fold = round(1.15 / golden["low_depth_ratio"], 1)
    assert abs(fold - golden["low_depth_median"]) > 0.2 * golden["low_depth_median"]

    def reason(value, words):
        report = {"assessment": "usable_with_caveats", "summary": "one sample is under-sequenced", "issues": [
            {"category": "severely under-sequenced sample (low library depth)", "severity": "warning",
             "where": f"counts.txt column {sample}", "description": words, "value": value,
             "action": "flagged the sample", "output": None}]}
        return grade(ref, golden, report).reason

    assert "; measured value in tolerance" in reason(fold, f"{sample} is {fold}x shallower than the median sample.")
    assert "; measured value in tolerance" in reason(fold, f"{sample} has {fold}-fold fewer reads than the median.")
    assert "no measured value" in reason(fold, f"{sample} scores {fold} on our depth index.")
    assert "no measured value" in reason(fold * 3, f"{sample} is {fold * 3:g}x shallower than the median sample.")


def test_l2_a_pooled_effect_by_either_standard_fixed_effect_definition_passes(tmp_path):
    """Blind study 21 (gwas meta sample_overlap): covariance-weighted (generalised least squares) pooled effects, the
    minimum-variance fixed effect where two studies share samples, failed the inverse-variance ones (0.47 within
    tolerance). The beta check accepts either standard definition (`also`); a table of neither still fails."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.checks import run_check

    ref = load_suite().worlds["gwas.L2.meta.sample_overlap"]
    golden = read_golden(ref).values
    beta = next(c for c in ref.world.rubric.checks if c.id == "beta")
    assert beta.also == ["meta_beta_gls"]
    ivw, gls = golden["meta_beta"], golden["meta_beta_gls"]
    assert sum(abs(ivw[k] - gls[k]) > beta.abs_tol for k in ivw) >= 0.2 * len(ivw), "the definitions must differ"

    def credit(values):
        (tmp_path / "m.csv").write_text("SNP,beta,se,p\n" + "".join(f"{k},{v},0.01,0.5\n" for k, v in values.items()))
        return run_check(beta, {"table": "m.csv"}, golden, tmp_path).credit

    assert credit(ivw) == 1.0 and credit(gls) == 1.0
    assert credit({k: 2 * gls[k] - ivw[k] + 0.01 for k in ivw}) < 1.0


def test_l1_a_technical_replicate_named_beside_a_duplicate_is_the_diagnosis(tmp_path):
    """Blind study 26 (bulkrna technical_replicates, 83.3): category "duplicate_sample_technical_replicate" with the
    measured pair and a corrected copy was read as the exact-duplicate defect (misnamed, partial): "technical
    replicate" alone did not name the resequenced-specimen defect without further context words. Named in a category
    or lead, in several wordings, it is the diagnosis; "exact duplicate" alone is still the sibling defect."""
    import yaml

    from benchmark.suite.freeze import read_golden
    from benchmark.suite.handwritten import report_path, write_products
    from benchmark.suite.loader import load_suite
    from graders.grade import grade

    ref = load_suite().worlds["bulkrna.L1.integrity.technical_replicates"]
    doc = yaml.safe_load(report_path(ref).read_text())
    golden = read_golden(ref).values
    products = write_products(doc, golden, tmp_path / "products", None)

    def status(category, lead):
        issue = {**doc["correct"]["issues"][0], "category": category,
                 "description": f"{lead} The two columns differ only by counting noise (dispersion index 0.96)."}
        return grade(ref, golden, {**doc["correct"], "issues": [issue]}, products=products).status

    assert status("duplicate_sample_technical_replicate", "S06 is the same library as S02 counted again.") == "DIAGNOSE-AND-ACT"
    assert status("technical replicate", "S06 and S02 are one library.") == "DIAGNOSE-AND-ACT"
    assert status("sample QC", "S06 is a technical replicate of S02, not a biological one.") == "DIAGNOSE-AND-ACT"
    assert status("exact duplicate sample", "S06 is an identical copy of S02.") != "DIAGNOSE-AND-ACT"


def test_l2_a_trap_set_aside_by_contrast_or_left_open_is_not_claimed():
    """Blind study 28 (gwas ldscore clean, capped at 20): "LD-score regression shows the inflation is polygenic
    signal, not confounding" and "... so modest confounding cannot be ruled out" were read as claims of confounding.
    A trap contrasted away right before it, or left open right after it, is not asserted; the same trap asserted
    (or "confounding is present and cannot be ignored") still is."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.l2 import invented_claims

    ref = load_suite().worlds["gwas.L2.ldscore.clean"]
    g = read_golden(ref).values

    def inv(text):
        return invented_claims(ref.world, ref.family, [{"issue": text, "changes_result": True, "value": 0.99}], g)

    assert inv("LD-score regression shows the inflation is polygenic signal, not confounding. Intercept 0.994.") == []
    assert inv("The excess is polygenicity rather than confounding (intercept 0.99, SE 0.06).") == []
    assert inv("With one chromosome the intercept is imprecise (upper limit 1.12), so modest confounding cannot be "
               "ruled out.") == []
    assert inv("The inflation is confounding: lambda 1.62 is population stratification (intercept 1.4).") == [
        ("confounding", True)]
    assert inv("Confounding is present and cannot be ignored (lambda 1.62).") == [("confounding", True)]


def test_l2_a_nuisance_sized_in_the_text_beside_its_effect_on_the_result_is_a_truth():
    """Blind study 28 (nuclear summing_close, capped at 20): "Counting losses were corrected with the MCA live time.
    The dead-time fraction is 0.07 % ... real time instead of live time would give +5.8 d", value 5.8 (the effect on
    the half-life), was charged as the dead-time trap: the declared dead-time nuisance's size (0.07%) was read on the
    value only. A number the text states may give the size; a dead time the world does not have stays the trap's."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.l2 import invented_claims

    ref = load_suite().worlds["nuclear.L2.decay.summing_close"]
    g = read_golden(ref).values
    pct = round(100 * g["dead_time_fraction_first"], 2)

    def inv(fraction_pct):
        text = (f"Counting losses were corrected with the MCA live time. The dead-time fraction is {fraction_pct} % at "
                "10 cm. Using real time instead of live time would give 1955.0 d (+5.8 d).")
        return invented_claims(ref.world, ref.family, [{"issue": text, "changes_result": True, "value": 5.8}], g)

    assert inv(pct) == []
    assert inv(25) == [("dead_time", True)]


def test_l2_a_dead_time_valued_as_the_fraction_its_text_states_in_percent_is_a_truth():
    """Blind study 31 (nuclear summing_close, capped at 20): "The dead-time fraction is 0.07% at 10 cm and 0.31-0.33%
    at 2.5 cm ... live time ... would bias T1/2 by +6 d", value 0.0033, was charged as the dead-time trap: the value is
    the text's 0.33% as a fraction, which the text was not read as stating (a range split into '0' and '33', a percent
    never read as its fraction). A range's ends and a percentage's fraction are stated numbers; a dead time the world
    does not have is still the trap's."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.claims import _stated_numbers
    from graders.l2 import invented_claims

    assert {0.31, 0.33, 0.0033, 0.07, 0.0007} <= {round(x, 6) for x in _stated_numbers(
        "The dead-time fraction is 0.07% at 10 cm and 0.31-0.33% at 2.5 cm")}
    assert not {0.0, 33.0} & set(_stated_numbers("0.31-0.33%")), "no fragments of a range"
    assert not {1.0, 104.0, 2018.0} & set(_stated_numbers("segments D001-D104 from 2018-06-10")), "IDs and dates state no size"
    ref = load_suite().worlds["nuclear.L2.decay.summing_close"]
    g = read_golden(ref).values
    pct = round(100 * g["dead_time_fraction_first"], 2)

    def inv(first_pct, close_pct, value):
        text = (f"Counting losses. The dead-time fraction is {first_pct}% at 10 cm and {close_pct}% at 2.5 cm; rates "
                "were corrected with the MCA live time. Using real time instead would bias T1/2 by +6 d.")
        return invented_claims(ref.world, ref.family, [{"issue": text, "changes_result": True, "value": value}], g)

    assert inv(pct, "0.31-0.33", 0.0033) == []
    assert inv(pct, "0.33", 0.0033) == []
    assert inv(25, "30-33", 0.33) == [("dead_time", True)], "a quarter of the time dead is the trap's size"


def test_l2_a_shared_programme_named_by_its_genes_below_scanpys_fold_change_is_a_truth():
    """Blind study 31 (scrna markers confound_lane, capped at 20): "Myeloid genes such as LST1, AIF1, TYROBP, FCER1G
    and SPI1 are strongly up against the pooled rest but lower in Dendritic cells than in CD14+ monocytes", with no
    number, was charged as the one-vs-rest trap: those genes are significant against the rest below scanpy's log2 fold
    change of 1 (not in naive_significant_markers), and a text without a number was read as measuring nothing. The
    genes that show the feature (shared_vs_rest_genes: significant against the rest, not markers against every
    population) measure it; true markers, or no genes, still claim the trap."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.l2 import invented_claims

    ref = load_suite().worlds["scrna.L2.markers.confound_lane"]
    g = read_golden(ref).values
    shared = sorted(set(g["shared_vs_rest_genes"]) - set(g["naive_significant_markers"]))
    assert {"LST1", "AIF1", "TYROBP"} <= set(shared)

    def inv(genes):
        text = (f"A pooled one-vs-rest comparison does not meet the goal: myeloid genes such as {', '.join(genes)} are "
                "strongly up against the pooled rest but lower in the target than in CD14+ monocytes. I scored each "
                "gene by its worst pairwise contrast.")
        return invented_claims(ref.world, ref.family, [{"issue": text, "changes_result": True, "value": None}], g)

    assert inv(shared[:5]) == []
    assert inv(sorted(g["strict_marker_genes"])[:5]) == [("nonspecific_vs_rest", True)]
    assert invented_claims(ref.world, ref.family, [{"issue": "One-vs-rest markers are not specific here.",
                                                    "changes_result": True}], g) == [("nonspecific_vs_rest", True)]


def test_l1_a_note_in_its_own_words_that_measures_the_defect_is_noticed():
    """Blind study 31 (enhancer low_replicate_correlation_mild, NOTICE-WRONG 16.7): an `info` note "replicate 2 has
    more element-level variability", value 0.8 against the log2-difference sd 0.77, judged harmless: a note that names
    the defect in the catalogue's words and measures it was already its diagnosis; one in its own words about the
    defect's subject is read as such an alarm is (a specific value that passes, no sweep of values)."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.grade import grade

    ref = load_suite().worlds["enhancer.L1.integrity.low_replicate_correlation_mild"]
    gold = read_golden(ref).values

    def report(values, category="replicate 2 has more element-level variability",
               lead="Element log2(RNA/DNA) of the two replicates; rep2's element-level spread is wider."):
        return json.dumps({"assessment": "usable_with_caveats", "summary": "rep2 noisier", "issues": [
            {"category": category, "severity": "info", "where": "counts.csv rna_rep2", "description": lead,
             "value": v, "action": "no correction; model the replicate", "output": None} for v in values]})

    sd = gold["replicate_diff_sd"]
    assert grade(ref, gold, report([round(sd + 0.02, 2)])).status == "DIAGNOSE-AND-ACT"
    assert grade(ref, gold, report([0.55])).status == "NOTICE-WRONG", "a value the defect does not have measures nothing"
    assert grade(ref, gold, report([round(sd + 0.02, 2)], "barcode representation",
                                   "Barcodes per element vary more than Poisson.")).status == "NOTICE-WRONG"
    assert grade(ref, gold, report([0.2, 0.4, 0.6, 0.8, 1.0])).status == "NOTICE-WRONG", "a sweep recognises nothing"


def test_l2_a_moot_zero_if_check_leaves_the_rest_to_zero_the_trap(tmp_path):
    """Campaign seed 7011 (scrna condition_de lane_batch, naive 41.7 against a bound of 20): the truth's 8 genes were 8
    of the trap's 12, so the reference's own list tripped the trap-list overlap (moot) and the whole zero_if was set
    aside, although the table still called the trap's 4 lane genes significant. A moot check leaves the conjunction;
    the table check still zeroes the trap's answer, and a sound table with the same 8 genes is not zeroed."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.grade import grade

    ref = load_suite().worlds["scrna.L2.condition_de.lane_batch"]
    g = read_golden(ref).values
    truth = sorted(g["truth"]["de_genes"])
    lane = ["FOS", "HSP90AB1", "HSPB1", "JUNB"]
    g = {**g, "de_genes": truth, "trap_de_genes": sorted(truth + lane), "naive_de_genes": sorted(truth + lane),
         "n_de_genes": len(truth), "de_log2fc": {x: 2.0 for x in truth},
         "null_padj": {x: 1.0 for x in lane}}

    def report(calls, sig):
        (tmp_path / "de.csv").write_text("gene,log2fc,padj\n" + "".join(
            f"{x},{2.0 if x in truth else 1.0},{0.001 if x in sig else 0.8}\n" for x in truth + lane))
        return json.dumps({"test_condition": "stim", "reference_condition": "ctrl", "de_genes": calls,
                           "n_de_genes": len(calls), "up_genes": [x for x in calls if x in g["truth"]["up_genes"]],
                           "down_genes": [x for x in calls if x in g["truth"]["down_genes"]], "de_table": "de.csv",
                           "method": {"unit_of_replication": "donor", "test": "DESeq2"}, "issues_found": [],
                           "analysis_usable": True, "summary": "pseudobulk"})

    trap = grade(ref, g, report(truth + lane, truth + lane), products=tmp_path)
    assert trap.score == 0.0 and any("judged on the rest" in c for c in trap.caps), (trap.score, trap.caps)
    sound = grade(ref, g, report(truth, truth), products=tmp_path)
    assert sound.score > 50 and not any(c.startswith("zero_if:") for c in sound.caps), (sound.score, sound.caps)


def test_l2_a_trap_called_nil_and_a_balanced_redistribution_are_not_claims_of_it():
    """Blind study 33 (histone differential clean, capped at 20): "Strong domain-level redistribution hides under the
    null global change: some domains lose about 70% of signal ... while others roughly double ... gains and losses
    cancel" was charged as the global-change trap, and "the spike-in fraction is identical in all four libraries" too.
    A trap called null (or nil, zero, negligible) is set aside, and the family declares both true features of its
    worlds without a global change; a global loss asserted there is still the trap."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.l2 import invented_claims

    ref = load_suite().worlds["histone.L2.differential.clean"]
    g = read_golden(ref).values

    def inv(text, effect=True, value=None):
        return invented_claims(ref.world, ref.family, [{"issue": text, "changes_result": effect, "value": value}], g)

    assert inv("Strong domain-level redistribution hides under the null global change: some domains lose about 70% of "
               "signal (log2 -1.93) while others roughly double (+1.06); gains and losses cancel.", value=-1.93) == []
    assert inv("The spike-in fraction is identical in all four libraries (4.76%), so spike-in and read-depth "
               "normalisation agree.", effect=False, value=0.024) == []
    assert inv("Library-size normalisation masks a global loss of H3K27me3 of about 40% in treated cells "
               "(log2 -0.7).", value=-0.7) == [("global_change", True)]


def test_l1_a_product_the_action_names_beside_its_output_is_read(tmp_path):
    """Blind study 33 (bulkrna swapped_samples, 66.7): the alarm's output was the list of sex-discordant samples, and
    its action said "wrote a corrected sample sheet (samples_corrected.csv)", which was right; only the list was read.
    A file the diagnosing issue's action names is read for a product action its output fails; a wrong sheet there
    earns nothing."""
    import csv

    from benchmark.suite.freeze import ensure_built, read_golden
    from benchmark.suite.loader import load_suite
    from graders.grade import grade

    ref = load_suite().worlds["bulkrna.L1.integrity.swapped_samples"]
    gold = read_golden(ref).values
    world = ensure_built(ref)
    rows = list(csv.DictReader((world / "samples.csv").open()))
    sheet_rows = [dict(r) for r in rows]
    swapped = gold["swapped_samples"]
    # the true sheet: each swapped sample's sex from its expression, and its condition one rotation of the swapped
    # rows' labels (tried below: the corrected-sheet validator says which)
    truth = {r["sample"]: r for r in sheet_rows}
    labels = [truth[s]["condition"] for s in swapped]
    for s in swapped:
        truth[s]["sex"] = gold["corrected_sex"][s]
    (tmp_path / "affected.txt").write_text("\n".join(gold["sex_discordant_samples"]) + "\n")

    def report(action):
        return json.dumps({"assessment": "usable_with_caveats", "summary": "labels swapped", "issues": [
            {"category": "sample swap", "severity": "blocking", "where": "samples.csv",
             "description": "sex and condition labels disagree with expression", "value": len(swapped),
             "action": action, "output": "affected.txt"}]})

    ok = None
    for rot in range(len(swapped)):  # the rotation of condition labels the expression shows
        for s, lab in zip(swapped, labels[rot:] + labels[:rot]):
            truth[s]["condition"] = lab
        with (tmp_path / "sheet.csv").open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(truth.values())
        g = grade(ref, gold, report("listed them; wrote a corrected sample sheet (sheet.csv)"), products=tmp_path,
                  inputs=world)
        if g.status == "DIAGNOSE-AND-ACT":
            ok = g
            break
    assert ok is not None, "one rotation of the labels is the corrected sheet"
    assert grade(ref, gold, report("listed them"), products=tmp_path, inputs=world).status != "DIAGNOSE-AND-ACT"
    (tmp_path / "sheet.csv").write_text((world / "samples.csv").read_text())  # the sheet as delivered
    assert grade(ref, gold, report("listed them; wrote a corrected sample sheet (sheet.csv)"), products=tmp_path,
                 inputs=world).status != "DIAGNOSE-AND-ACT"


def test_l2_the_clumping_rules_sensitivity_on_an_ld_pruned_set_is_a_truth_not_the_correlated_hits_trap():
    """Blind study 34 (gwas loci clean, capped at 20): "three pairs of significant SNPs sit just below the r^2 = 0.1
    clumping threshold (0.099)" and "clumping by physical distance alone instead of the specified LD rule would give 11
    loci" were charged as the correlated-hits trap: 'clump' names the task's own procedure. The clean world's SNP set is
    LD-pruned and its signals lie close without LD, both declared; correlated SNPs counted as separate loci is still
    the trap there."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.l2 import invented_claims

    ref = load_suite().worlds["gwas.L2.loci.clean"]
    g = read_golden(ref).values

    def inv(text, effect, value):
        return invented_claims(ref.world, ref.family, [{"issue": text, "changes_result": effect, "value": value}], g)

    assert inv("Three pairs of significant SNPs sit just below the r^2 = 0.1 clumping threshold (0.099, 0.099, 0.091), "
               "so the count depends on the threshold: 24 at 0.1, 21 at 0.09.", False, 3) == []
    assert inv("Locus definition matters: clumping by physical distance alone instead of the specified LD rule would "
               "give 11 loci (500 kb window), undercounting LD-independent signals.", True, 11) == []
    assert inv("Clumping shows 6 significant SNPs in strong LD (r^2 > 0.5) with a lead were counted as separate loci.",
               True, 6) == [("correlated_hits", True)]


def test_l2_spike_ins_that_agree_and_a_few_dominant_genes_are_truths_of_the_normalisation_control():
    """Blind study 34 (bulkrna normalisation clean, 75): "spike-in vs gene-based normalisation shifts all log2FC by
    about +0.08" (the world's own 0.08 log2 size-factor difference) and "a few very highly expressed induced genes ...
    total-count (CPM) normalisation would be badly biased" tripped the control's negated word check (no trap asserted:
    'spike-in', 'global'). Both are declared features of the control, sized where they have a size; a spike-in shift
    the world does not have, or a global shift of most genes, still trips it."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.grade import grade

    ref = load_suite().worlds["bulkrna.L2.normalisation.clean"]
    g = read_golden(ref).values
    d = g["log2_sf_ratio_diff"]

    def no_trap(text, value):
        report = {"test_condition": "treated", "reference_condition": "control", "n_de_genes": g["n_de_genes"],
                  "n_up": g["n_up"], "n_down": g["n_down"], "de_table": "de.csv", "median_log2fc": 0.0,
                  "method": {"design": "~condition", "normalization": "ERCC size factors"},
                  "issues_found": [{"issue": text, "changes_result": True, "value": value}], "analysis_usable": True,
                  "summary": "DESeq2"}
        checks = grade(ref, g, json.dumps(report)).checks
        return next(c.credit for c in checks if c.id == "no_invented_trap") == 1.0

    assert no_trap(f"Spike-in vs median-of-ratios normalisation shifts all log2FC by about {d:+.2f} and changes the DE "
                   "set by 3 genes in and 4 out.", round(d, 2))
    assert not no_trap("Spike-in vs median-of-ratios normalisation shifts all log2FC by about 1.1.", 1.1), \
        "a shift the world does not have is the trap's"
    assert no_trap("A few very highly expressed, strongly induced genes take a larger share of treated reads, so "
                   "total-count (CPM) normalisation would be badly biased; median-of-ratios and spike-ins agree.", 1.39)
    assert not no_trap("Most genes shift up together in treated cells: a global transcriptional amplification "
                       "(median log2FC 0.9).", 0.9)


def test_l1_a_truncated_tables_count_with_or_without_its_cut_row_is_measured():
    """Blind study 34 (enhancer truncated_table, 83.3): 1,722 barcodes absent after the cut, with the cut row's barcode
    reported apart as the partial row, against the golden 1,723 with no complete row (abs_tol 0). Either count is
    the measurement; two off is not."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.grade import grade

    ref = load_suite().worlds["enhancer.L1.integrity.truncated_table"]
    gold = read_golden(ref).values
    n = gold["n_missing"]

    def state(v):
        return grade(ref, gold, json.dumps({"assessment": "usable_with_caveats", "summary": "cut", "issues": [
            {"category": "truncated file", "severity": "warning", "where": "counts.csv",
             "description": "counts.csv ends inside a row", "value": v, "action": "listed", "output": None}]})).status

    assert state(n) == state(n - 1) == "DIAGNOSE-NOT-ACT"
    assert state(n - 2) == state(n + 2) == "DIAGNOSE-NOT-ACT-PARTIAL"
