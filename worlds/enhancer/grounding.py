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

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from benchmark.suite.canonical import CanonicalWriter
from benchmark.errors import BenchmarkError
from benchmark.grounding.host import GroundingHost
from benchmark.suite.registry import grounding_host
from graders.grounding import files_mentioning

TABLE = "activity.tsv"
COLS = ["element_id", "sequence", "activity", "reads"]
POSITIONS = ["-3", "-2", "-1", "+1", "+2", "+3", "+4", "+5", "+6"]


@dataclass
class Sites:
    table: pd.DataFrame  # element_id, sequence, activity, reads


def _substrate() -> pd.DataFrame:
    from worlds.enhancer.build import mpsa_wong

    d = mpsa_wong()
    d = d[d["tot_ct"] >= 50].reset_index(drop=True)
    return pd.DataFrame({"element_id": [f"e{i + 1:05d}" for i in range(len(d))], "sequence": d["element"],
                         "activity": d["activity"].round(3), "reads": d["tot_ct"].astype(int)})


def _rows(m: pd.Series, what: str) -> pd.Series:
    """The mask `m`, refused when it selects nothing (an item names `what`, which the data must hold)."""
    if not m.any():
        raise BenchmarkError(f"{what} has no row in the data")
    return m


def _at(d: Sites, position: str, nt: str) -> pd.Series:
    if position not in POSITIONS:
        raise BenchmarkError(f"position {position!r} is not one of {POSITIONS}")
    return _rows(d.table["sequence"].str[POSITIONS.index(position)] == nt, f"{nt} at {position}")


def _element(d: Sites, seq: str) -> pd.Series:
    return _rows(d.table["sequence"] == seq, f"element {seq}")


def op_drop_nucleotide(d: Sites, rng, position: str, nt: str) -> Sites:
    return Sites(d.table[~_at(d, position, nt)].reset_index(drop=True))


def op_swap_nucleotides(d: Sites, rng, position: str, a: str, b: str) -> Sites:
    i = POSITIONS.index(position)
    _at(d, position, a), _at(d, position, b)
    swap = {a: b, b: a}
    t = d.table.copy()
    t["sequence"] = [s[:i] + swap.get(s[i], s[i]) + s[i + 1:] for s in t["sequence"]]
    return Sites(t)


def op_drop_element(d: Sites, rng, sequence: str) -> Sites:
    return Sites(d.table[~_element(d, sequence)].reset_index(drop=True))


def op_swap_activity(d: Sites, rng, a: str, b: str) -> Sites:
    t = d.table.copy()
    ma, mb = _element(d, a), _element(d, b)
    va, vb = float(t.loc[ma, "activity"].iloc[0]), float(t.loc[mb, "activity"].iloc[0])
    t.loc[ma, "activity"], t.loc[mb, "activity"] = vb, va
    return Sites(t)


OPS = {"drop_nucleotide": op_drop_nucleotide, "swap_nucleotides": op_swap_nucleotides,
       "drop_element": op_drop_element, "swap_activity": op_swap_activity}

STAT_SOURCE = r'''
import os
import pandas as pd

TABLE = "activity.tsv"
POSITIONS = ["-3", "-2", "-1", "+1", "+2", "+3", "+4", "+5", "+6"]


def load(root="."):
    """activity.tsv (element_id, sequence, activity, reads) as a DataFrame."""
    tab = pd.read_csv(os.path.join(root, TABLE), sep="\t", dtype={"element_id": str, "sequence": str})
    for c in ("sequence", "activity"):
        if c not in tab.columns:
            raise ValueError(f"{TABLE}: expected a column {c}")
    return tab


def reference_statistic(spec, options, data):
    """{"answer": letter or None, "values": {letter: value or None}, "reason": str} for one data version."""
    tab = data
    kind, margin = spec["kind"], float(spec["margin"])
    values, missing = {}, []
    for letter, opt in options.items():
        if kind == "nucleotide_mean":
            i = POSITIONS.index(str(spec["position"]))
            rows = tab.loc[tab["sequence"].str[i] == opt, "activity"]
            what = f"{opt} at {spec['position']}"
        elif kind == "element_activity":
            rows = tab.loc[tab["sequence"] == opt, "activity"]
            what = f"element {opt}"
        else:
            raise ValueError(f"unknown statistic kind {kind!r}")
        if len(rows) == 0:
            values[letter] = None
            missing.append(f"{what}: no row in {TABLE}")
        else:
            values[letter] = float(rows.mean())
    return decide(values, missing, margin, "max")
'''


@grounding_host("enhancer")
class EnhancerHost(GroundingHost):
    families = ("nucleotide", "element")
    assay = "reporter activities of 5' splice-site variants measured in a massively parallel reporter assay"
    files = ("activity.tsv (tab-separated: element_id; sequence = the 9-nt splice site, positions -3..-1 in the exon and "
             "+1..+6 in the intron, DNA letters; activity = log2 reporter activity relative to the median variant; "
             "reads = reporter reads behind the measurement) and meta.json.")
    stat_source = STAT_SOURCE
    ops = OPS

    def base_data(self, dataset, datasets) -> Sites:
        if dataset is not None:
            raise BenchmarkError(f"the enhancer grounding host has no datasets (item names {dataset!r})")
        return Sites(_substrate())

    def null(self, d: Sites, rng) -> Sites:
        t = d.table.iloc[rng.permutation(len(d.table))].reset_index(drop=True)
        t["element_id"] = [f"v{i + 1:05d}" for i in range(len(t))]
        return Sites(t)

    def write_version(self, d: Sites, root: Path) -> list[str]:
        w = CanonicalWriter(root)
        t = d.table.sort_values(["sequence", "element_id"], kind="stable").reset_index(drop=True)
        w.table(TABLE, t[COLS], sep="\t", float_format="%.3f")
        w.json("meta.json", {"files": {TABLE: "reporter activity of each 5' splice-site variant (log2, relative to the "
                                              "median variant; positions -3..+6)", "meta.json": "this description"},
                             "assay": "barcoded three-exon minigene reporter; activity = inclusion of the middle exon "
                                      "measured by RNA sequencing"})
        return sorted(w.written)

    def verify_extra(self, item, cls: str, root: Path, data, original: Sites) -> list[str]:
        problems = []
        if data["sequence"].duplicated().any():
            problems.append(f"{TABLE} repeats a sequence")
        if cls == "withdrawal":
            wd = item.withdrawal
            if wd["op"] == "drop_element":
                hits = files_mentioning(root, wd["sequence"])
                if hits:
                    problems.append(f"{cls}: dropped element {wd['sequence']} still appears in {', '.join(hits)}")
            else:
                i = POSITIONS.index(str(wd["position"]))
                if (data["sequence"].str[i] == wd["nt"]).any():
                    problems.append(f"{cls}: elements with {wd['nt']} at {wd['position']} remain")
        if cls == "null" and set(original.table["element_id"]) & set(data["element_id"]):
            problems.append(f"{cls}: original element identifiers survive")
        return problems
