"""scrna track: margins of the empty-droplet call and of the composition worlds, read from the frozen goldens."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "worlds" / "scrna"
COMPOSITION = ["clean", "closure", "pseudoreplication", "lane_capture"]


def _golden(rel: str) -> dict:
    return json.loads((ROOT / f"{rel}.golden.json").read_text())["values"]


def test_empty_droplets_sit_far_from_the_call_threshold():
    from worlds.scrna.solvers import EMPTY_MAX_FRACTION

    g = _golden("L1/integrity/empty_droplets")
    cut = EMPTY_MAX_FRACTION * g["median_umis"]
    assert g["findings"] == ["empty_droplets"]
    assert g["empty_max_umis"] <= 0.7 * cut, "an injected empty droplet sits close to the threshold"
    assert g["cell_min_umis"] >= 2.0 * cut, "a real cell sits close to the threshold"


@pytest.mark.parametrize("name", COMPOSITION)
def test_composition_reference_recovers_the_truth_and_the_trap_does_not(name):
    g = _golden(f"L2/composition/{name}")
    assert g["changed_populations"] == g["truth"]["changed"]
    if name == "clean":
        assert g["naive_changed"] == g["truth"]["changed"], "the pooled test must agree on the control"
    else:
        assert g["trap_changed"] and g["trap_changed"] != g["truth"]["changed"]
        assert set(g["null_padj"]) - set(g["truth"]["changed"]), "the trap must call a null population"


def test_a_strict_marker_panel_of_true_markers_earns_the_calibration_credit():
    """Blind studies 20 and 23: analysts who required AUROC >= 0.75 and a two-fold change against every population
    called 7 markers (of 29) and 8 (of 66), all true, and lost the calibration credit to a floor of 10. A panel of at
    least 5 true markers identifies the population (`strict_subset: 5` in every markers world); 4, or 8 with two false
    ones, or the golden's first 5 with the trap's inflation, do not."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.checks import run_check

    strict = 0
    for name in ("clean", "confound_lane", "nonspecific_vs_rest", "unnormalised_depth"):
        ref = load_suite().worlds[f"scrna.L2.markers.{name}"]
        c = next(c for c in ref.world.rubric.checks if c.id == "calibrated")
        gold = read_golden(ref).values
        true = list(gold[c.golden])
        for n in (5, 7, 8):
            assert run_check(c, {c.field: true[:n]}, gold).credit == 1.0, (name, n)
        assert run_check(c, {c.field: true[:5] + [f"FAKE{i}" for i in range(60)]}, gold).credit == 0.0, name
        if len(true) < 25:  # a short golden set: 5-8 true markers clear the F1 bar itself
            continue
        strict += 1  # where only the stricter-call rule credits them: at most the F1 bar's partial credit otherwise
        assert run_check(c, {c.field: true[:4]}, gold).credit < 1.0, name
        assert run_check(c, {c.field: true[:6] + ["NOT_A_GENE1", "NOT_A_GENE2"]}, gold).credit < 1.0, name
    assert strict >= 2


def test_genes_between_the_two_marker_bars_named_as_one_vs_rest_only_are_a_truth():
    """Blind study 24 (scrna markers clean, capped at 20): "a one-vs-rest ranking is misleading here ... CST7
    (one-vs-rest AUROC 0.94), GZMA (0.93) and HOPX (0.90) separate NK from CD8+ Cytotoxic T with AUROC of only
    0.67-0.70" is true: they are markers at the golden's bar (min pairwise AUROC 0.6) and not at the stricter 0.75 the
    analyst used. The shared-programme nuisance counts against an entry only the genes marking at the strict bar
    (`strict_marker_genes`); naming those as one-vs-rest only is still the trap's claim."""
    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite
    from graders.l2 import invented_claims

    ref = load_suite().worlds["scrna.L2.markers.clean"]
    golden = read_golden(ref).values
    between = [g for g in ("CST7", "GZMA", "HOPX") if g in golden["marker_genes"]]
    assert len(between) == 3 and not set(between) & set(golden["strict_marker_genes"])
    entry = {"issue": "A one-vs-rest ranking is misleading here because CD8+ Cytotoxic T cells share the cytotoxic "
                      f"programme: {', '.join(between)} (one-vs-rest AUROC 0.90-0.94) separate NK from CD8+ Cytotoxic T "
                      "with AUROC of only 0.67-0.70. I scored each gene by its worst pairwise AUROC.",
             "changes_result": True, "value": 0.92}
    assert invented_claims(ref.world, ref.family, [entry], golden) == []
    strict = golden["strict_marker_genes"][:3]
    wrong = dict(entry, issue=entry["issue"].replace(", ".join(between), ", ".join(strict)))
    assert invented_claims(ref.world, ref.family, [wrong], golden) == [("nonspecific_vs_rest", True)]
