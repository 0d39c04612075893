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
