"""The enhancer track's grounding host: items (worlds/enhancer/grounding.yaml) on real reporter activities.

Substrate: `package_file("mavenn", "mpsa_data.csv.gz")` (mavenn 1.1.4 sdist: the massively parallel splicing assay of
Wong et al. 2018, 5' splice-site variants in a barcoded minigene reporter), through worlds.enhancer.build.mpsa_wong:
the variants with at least 50 reporter reads, one row per variant (element_id, sequence = the 9-nt site, positions
-3..+6, DNA letters; activity = log2 activity relative to the median variant; reads), used as they are.

Versions, each written through the canonical writer (activity.tsv + meta.json):
  null        rows permuted, element identifiers replaced by fresh opaque ones (the answers are nucleotides or
              sequences, which are kept)
  withdrawal  drop_nucleotide (every element carrying a nucleotide at a position removed) or drop_element (one
              element removed: its sequence is then in no file)
  flip        swap_nucleotides (two nucleotides exchanged at one position in every sequence: a base-calling or
              strand mix-up confined to that position) or swap_activity (two elements exchange their activities)

Statistic kinds (`STAT_SOURCE`):
  nucleotide_mean  spec position (-3..+6); options nucleotides; the mean activity of the elements carrying that
                   nucleotide at that position; highest wins
  element_activity options sequences; the activity of that element; highest wins
Undefined when an option has no row, or within the item's margin (graders.grounding.decide).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from benchmark.errors import BenchmarkError
from benchmark.suite.registry import grounding_host
from worlds.scaffold import Table, TableHost, dropped_still_named, dropping, ids_survive, require, swapping, table_source

TABLE = "activity.tsv"
COLS = ["element_id", "sequence", "activity", "reads"]
POSITIONS = ["-3", "-2", "-1", "+1", "+2", "+3", "+4", "+5", "+6"]


class Sites(Table):
    """element_id, sequence, activity, reads: one row per splice-site variant."""


def _at(d: Sites, position: str, nt: str) -> pd.Series:
    if position not in POSITIONS:
        raise BenchmarkError(f"position {position!r} is not one of {POSITIONS}")
    return require(d.table["sequence"].str[POSITIONS.index(position)] == nt, f"{nt} at {position}")


def _element(d: Sites, sequence: str) -> pd.Series:
    return require(d.table["sequence"] == sequence, f"element {sequence}")


def op_swap_nucleotides(d: Sites, rng, position: str, a: str, b: str) -> Sites:
    i = POSITIONS.index(position)
    _at(d, position, a), _at(d, position, b)
    swap = {a: b, b: a}
    t = d.table.copy()
    t["sequence"] = [s[:i] + swap.get(s[i], s[i]) + s[i + 1:] for s in t["sequence"]]
    return Sites(t)


STAT_SOURCE = table_source(TABLE, ("element_id", "sequence"), ("sequence", "activity")) + r'''
POSITIONS = ["-3", "-2", "-1", "+1", "+2", "+3", "+4", "+5", "+6"]


def reference_statistic(spec, options, data):
    """{"answer": letter or None, "values": {letter: value or None}, "reason": str} for one data version."""
    kind = spec["kind"]
    if kind == "nucleotide_mean":
        i = POSITIONS.index(str(spec["position"]))
        return highest(spec, options, lambda opt: mean_of(data.loc[data["sequence"].str[i] == opt, "activity"],
                                                          f"{opt} at {spec['position']}"))
    if kind == "element_activity":
        return highest(spec, options, lambda opt: mean_of(data.loc[data["sequence"] == opt, "activity"], f"element {opt}"))
    raise ValueError(f"unknown statistic kind {kind!r}")
'''


@grounding_host("enhancer")
class EnhancerHost(TableHost):
    """Wong et al.'s 5' splice-site variants with at least 50 reporter reads, one element each; its null version
    numbers the permuted elements v00001 on."""

    families = ("nucleotide", "element")
    assay = "reporter activities of 5' splice-site variants measured in a massively parallel reporter assay"
    files = ("activity.tsv (tab-separated: element_id; sequence = the 9-nt splice site, positions -3..-1 in the exon and "
             "+1..+6 in the intron, DNA letters; activity = log2 reporter activity relative to the median variant; "
             "reads = reporter reads behind the measurement) and meta.json.")
    stat_source = STAT_SOURCE
    ops = {"drop_nucleotide": dropping(_at), "swap_nucleotides": op_swap_nucleotides,
           "drop_element": dropping(_element), "swap_activity": swapping(_element, ["activity"])}
    table_file, columns, sort_by, float_format = TABLE, COLS, ["sequence", "element_id"], "%.3f"
    null_ids = ("element_id", "v{:05d}")

    def substrate(self) -> Sites:
        from worlds.enhancer.build import mpsa_wong

        d = mpsa_wong()
        d = d[d["tot_ct"] >= 50].reset_index(drop=True)
        return Sites(pd.DataFrame({"element_id": [f"e{i + 1:05d}" for i in range(len(d))], "sequence": d["element"],
                                   "activity": d["activity"].round(3), "reads": d["tot_ct"].astype(int)}))

    def meta(self, t: pd.DataFrame) -> dict:
        return {"files": {TABLE: "reporter activity of each 5' splice-site variant (log2, relative to the median "
                                 "variant; positions -3..+6)", "meta.json": "this description"},
                "assay": "barcoded three-exon minigene reporter; activity = inclusion of the middle exon measured by RNA "
                         "sequencing"}

    def verify_extra(self, item, cls: str, root: Path, data, original: Sites) -> list[str]:
        problems = [f"{TABLE} repeats a sequence"] if data["sequence"].duplicated().any() else []
        wd = item.withdrawal
        if cls == "withdrawal" and wd["op"] == "drop_element":
            problems += dropped_still_named(cls, root, "element", wd["sequence"])
        elif cls == "withdrawal" and (data["sequence"].str[POSITIONS.index(str(wd["position"]))] == wd["nt"]).any():
            problems.append(f"{cls}: elements with {wd['nt']} at {wd['position']} remain")
        return problems + ids_survive(cls, original.table["element_id"], data["element_id"], "element identifiers")
