"""The protein track's grounding host: items (worlds/protein/grounding.yaml) on real GB1 folding stabilities.

Substrate: `package_file("mavenn", "nisthal_data.csv.gz")` (mavenn 1.1.4 sdist: ddG of 813 GB1 single mutants,
Nisthal et al. 2019; positive = destabilising), one row per substitution (variant, position, wt_aa, mut_aa, ddG),
used as it is (worlds.protein.build.gb1_nisthal).

Versions, each written through the canonical writer (ddg.tsv + meta.json):
  null        rows permuted, variant names replaced by opaque identifiers (the answers are residues or amino acids,
              which are kept)
  withdrawal  drop_position (every substitution of a residue removed: its name is then in no file) or drop_mutant_aa
              (every substitution to an amino acid removed)
  flip        swap_positions (the rows of two residues exchange their position labels: a numbering mix-up) or
              swap_mutant_aa (the mutant residue labels of two amino acids exchanged)

Statistic kinds (`STAT_SOURCE`):
  position_mean  options residues (e.g. Y45); the mean ddG of that residue's substitutions; highest wins
  mutant_mean    options amino acids (one letter); the mean ddG of the substitutions to it; highest wins
Undefined when an option has no row, or within the item's margin (graders.grounding.decide).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from benchmark.suite.registry import grounding_host
from worlds.scaffold import Table, TableHost, dropped_still_named, dropping, ids_survive, require, swapping, table_source

TABLE = "ddg.tsv"
COLS = ["variant", "position", "wt_aa", "mut_aa", "ddG"]


class Muts(Table):
    """variant, position, wt_aa, mut_aa, ddG: one row per single substitution."""


def _label(t: pd.DataFrame) -> pd.Series:
    return t["wt_aa"] + t["position"].astype(str)


def _relabel(t: pd.DataFrame) -> Muts:
    """The edited table with its variant names rebuilt from the columns an edit moved."""
    t["variant"] = t["wt_aa"] + t["position"].astype(str) + t["mut_aa"]
    return Muts(t)


def _residue(d: Muts, residue: str) -> pd.Series:
    return require(_label(d.table) == residue, f"residue {residue}")


def _aa(d: Muts, aa: str) -> pd.Series:
    return require(d.table["mut_aa"] == aa, f"substitution to {aa}")


STAT_SOURCE = table_source(TABLE, ("variant", "wt_aa", "mut_aa"), ("position", "wt_aa", "mut_aa", "ddG")) + r'''
def reference_statistic(spec, options, data):
    """{"answer": letter or None, "values": {letter: value or None}, "reason": str} for one data version."""
    kind = spec["kind"]
    if kind == "position_mean":
        label = data["wt_aa"] + data["position"].astype(str)
        return highest(spec, options, lambda opt: mean_of(data.loc[label == opt, "ddG"], f"residue {opt}"))
    if kind == "mutant_mean":
        return highest(spec, options, lambda opt: mean_of(data.loc[data["mut_aa"] == opt, "ddG"], f"substitutions to {opt}"))
    raise ValueError(f"unknown statistic kind {kind!r}")
'''


@grounding_host("protein")
class ProteinHost(TableHost):
    """Nisthal et al.'s ddG of GB1 single mutants (mavenn sdist), one row per substitution. A null version names the
    variants m0001, m0002, ... in its permuted row order, so no name tells a substitution's residue."""

    families = ("sensitivity", "substitution")
    assay = "folding stabilities (ddG) of single amino-acid substitutions in a protein domain"
    files = ("ddg.tsv (tab-separated: variant as wild-type residue, position, mutant residue, e.g. T2A; position; "
             "wt_aa; mut_aa; ddG = folding free-energy change in kcal/mol, positive = destabilising) and meta.json.")
    stat_source = STAT_SOURCE
    # swap_positions: two residues exchange their position labels (a numbering mix-up); the variant names follow
    ops = {"drop_position": dropping(_residue), "drop_mutant_aa": dropping(_aa),
           "swap_positions": swapping(_residue, ["position", "wt_aa"], then=_relabel),
           "swap_mutant_aa": swapping(_aa, ["mut_aa"], then=_relabel)}
    table_file, columns, sort_by, float_format = TABLE, COLS, ["position", "mut_aa", "variant"], "%.4f"
    null_ids = ("variant", "m{:04d}")

    def substrate(self) -> Muts:
        from worlds.protein.build import gb1_nisthal

        return Muts(gb1_nisthal()[COLS].copy())

    def meta(self, t: pd.DataFrame) -> dict:
        return {"files": {TABLE: "folding free-energy change of each single substitution (kcal/mol, positive = "
                                 "destabilising)", "meta.json": "this description"},
                "protein": "a small globular domain (numbering from its initiator methionine)"}

    def verify_extra(self, item, cls: str, root: Path, data, original: Muts) -> list[str]:
        problems = [f"{TABLE} repeats a substitution"] if data[["position", "mut_aa"]].duplicated().any() and cls != "flip" else []
        wd = item.withdrawal
        if cls == "withdrawal" and wd["op"] == "drop_position":
            problems += dropped_still_named(cls, root, "residue", wd["residue"])
        elif cls == "withdrawal" and (data["mut_aa"] == wd["aa"]).any():
            problems.append(f"{cls}: substitutions to {wd['aa']} remain")
        return problems + ids_survive(cls, original.table["variant"], data["variant"], "variant names")
