"""The L1 state machine and the L2 components/caps on hand-made worlds and reports (seed 001 J.1, I.3)."""
import json

import pytest

from graders.l1 import STATE_SCORES, fabrication_share, grade_l1
from graders.l2 import grade_l2
from tests.helpers import issue, l1_family, l1_report, l1_world, l2_family, l2_world

ACT = [{"id": "kept", "kind": "value", "field": "values.n_cells_kept", "golden": "n_kept", "rel_tol": 0.02},
       {"id": "dups", "kind": "value", "field": "values.n_duplicates", "golden": "n_dup", "abs_tol": 0}]
GOLD = {"n_kept": 650, "n_dup": 50}


@pytest.mark.parametrize("report,state", [
    (l1_report("usable"), "MISS"),
    (l1_report("unusable", [issue("ambient RNA contamination")]), "NOTICE-WRONG"),
    (l1_report("usable_with_caveats", [issue("duplicated barcodes found")]), "DIAGNOSE-NOT-ACT"),
    (l1_report("usable_with_caveats", [issue("duplicated barcodes found")], {"n_cells_kept": 650}), "DIAGNOSE-AND-ACT-PARTIAL"),
    (l1_report("usable_with_caveats", [issue("duplicated barcodes found")], {"n_cells_kept": 651, "n_duplicates": 50}), "DIAGNOSE-AND-ACT"),
    (l1_report("usable_with_caveats", [issue("barcode collision", "info")]), "NOTICE-WRONG"),
    ("not json at all", "NONCOMPLIANT"),
    ({"assessment": "usable"}, "NONCOMPLIANT"),
    (None, "NONCOMPLIANT"),
])
def test_l1_detect_states(report, state):
    g = grade_l1(l1_world(actions=ACT), l1_family(), GOLD, report)
    assert g.state == state, g.reason
    assert g.score == STATE_SCORES[state]


def test_l1_partial_diagnosis_and_assessment_gate():
    w = l1_world(actions=ACT, partial_diagnosis=[r"barcode"], acceptable_assessments=["usable_with_caveats"])
    part = grade_l1(w, l1_family(), GOLD, l1_report("usable_with_caveats", [issue("odd barcode counts")]))
    assert part.state == "DIAGNOSE-NOT-ACT-PARTIAL"
    # the right numbers but declaring the recoverable data unusable is not the appropriate action
    g = grade_l1(w, l1_family(), GOLD, l1_report("unusable", [issue("duplicated barcodes")], {"n_cells_kept": 650, "n_duplicates": 50}))
    assert g.state == "DIAGNOSE-AND-ACT-PARTIAL"


@pytest.mark.parametrize("report,state", [
    (l1_report("usable"), "CLEAN-CORRECT"),
    (l1_report("usable", [issue("low depth", "info")]), "CLEAN-CORRECT"),
    (l1_report("usable_with_caveats", [issue("some cells have high counts", "warning")]), "OVER-CAUTIOUS"),
    (l1_report("cannot_determine"), "OVER-CAUTIOUS"),
    (l1_report("usable_with_caveats", [issue("ambient RNA contamination in T cells", "warning")]), "FABRICATED"),
    (l1_report("unusable", [issue("something off")]), "FALSE-UNUSABLE"),
])
def test_l1_accept_states(report, state):
    g = grade_l1(l1_world("clean", "accept", None), l1_family(), {}, report)
    assert g.state == state, g.reason


@pytest.mark.parametrize("report,state", [
    (l1_report("cannot_determine", [issue("no donor ids, so sample swap cannot be tested", "warning")]), "ABSTAIN-RECOGNIZED"),
    (l1_report("cannot_determine"), "ABSTAIN-OK"),
    (l1_report("unusable", [issue("duplicated barcodes")]), "OVER-DIAGNOSE"),
    (l1_report("usable"), "MISS"),
])
def test_l1_abstain_states(report, state):
    w = l1_world(expect="abstain", limit=[r"no donor"])
    assert grade_l1(w, l1_family(), {}, report).state == state


def test_fabrication_heuristic_reads_code():
    rep = l1_report("usable_with_caveats", [issue("dups", evidence="n_dup = 50 barcodes")])
    assert fabrication_share(rep, ["df.barcode.duplicated().sum()  # n_dup"]) == 0.0
    assert fabrication_share(rep, ["print('hello')"]) == 1.0


def _l2(total, mode, issues, usable=True, caveats=""):
    return {"total_mb": total, "peak_mode": mode, "issues_found": issues, "analysis_usable": usable, "caveats": caveats}


def test_l2_full_marks_and_components():
    g = grade_l2(l2_world(), l2_family(), {"total_mb": 6.4}, _l2(6.43, "broad", ["narrow default fragments domains"], caveats="domain calls"))
    assert g.components == {"A": 1.0, "I": 1.0, "M": 1.0, "C": 1.0} and g.score == 1.0


def test_l2_narrow_unqualified_scores_zero():
    g = grade_l2(l2_world(), l2_family(), {"total_mb": 6.4}, _l2(3.4, "narrow", []))
    assert g.score == 0.0 and any("zero_if" in c for c in g.caps)


def test_l2_accuracy_cap_like_seed_opus_case():
    # broad mode + pitfall named but 28.21 Mb against 6.4: A = 0 -> world score 0.5 at most (seed 001 I.3)
    g = grade_l2(l2_world(), l2_family(), {"total_mb": 6.4}, _l2(28.21, "broad", ["narrow mode fragments"], caveats="domain"))
    assert g.components["A"] == 0.0 and g.score == 0.5


def test_l2_unusable_cap():
    g = grade_l2(l2_world(), l2_family(), {"total_mb": 6.4}, _l2(6.4, "broad", ["narrow fragments"], usable=False, caveats="domain"))
    assert g.score == pytest.approx(1 / 3)


def test_l2_malformed_is_noncompliant_not_an_exception():
    for bad in ("{", json.dumps({"total_mb": "x"}), json.dumps([1, 2]), None):
        g = grade_l2(l2_world(), l2_family(), {"total_mb": 6.4}, bad)
        assert g.status == "NONCOMPLIANT" and g.score == 0.0


def test_l2_rubric_needs_every_component():
    with pytest.raises(Exception, match="no[n]e for C"):
        l2_world(checks=[{"id": "a", "kind": "present", "component": "A", "field": "total_mb"},
                         {"id": "i", "kind": "present", "component": "I", "field": "total_mb"},
                         {"id": "m", "kind": "present", "component": "M", "field": "total_mb"}])
