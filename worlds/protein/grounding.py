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

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from benchmark.suite.canonical import CanonicalWriter
from benchmark.errors import BenchmarkError
from benchmark.grounding.host import GroundingHost
from benchmark.suite.registry import grounding_host
from graders.grounding import files_mentioning

TABLE = "ddg.tsv"
COLS = ["variant", "position", "wt_aa", "mut_aa", "ddG"]


@dataclass
class Muts:
    table: pd.DataFrame  # variant, position, wt_aa, mut_aa, ddG


def _substrate() -> pd.DataFrame:
    from worlds.protein.build import gb1_nisthal

    return gb1_nisthal()[COLS].copy()


def _label(t: pd.DataFrame) -> pd.Series:
    return t["wt_aa"] + t["position"].astype(str)


def _rows(m: pd.Series, what: str) -> pd.Series:
    """The mask `m`, refused when it selects nothing (an item names `what`, which the data must hold)."""
    if not m.any():
        raise BenchmarkError(f"{what} has no row in the data")
    return m


def _relabel(t: pd.DataFrame) -> Muts:
    """The edited table with its variant names rebuilt from the columns an edit moved."""
    t["variant"] = t["wt_aa"] + t["position"].astype(str) + t["mut_aa"]
    return Muts(t)


def _residue(d: Muts, res: str) -> pd.Series:
    return _rows(_label(d.table) == res, f"residue {res}")


def op_drop_position(d: Muts, rng, residue: str) -> Muts:
    return Muts(d.table[~_residue(d, residue)].reset_index(drop=True))


def op_swap_positions(d: Muts, rng, a: str, b: str) -> Muts:
    t = d.table.copy()
    ma, mb = _residue(d, a), _residue(d, b)
    (pa, wa), (pb, wb) = [(int(d.table.loc[m, "position"].iloc[0]), d.table.loc[m, "wt_aa"].iloc[0]) for m in (ma, mb)]
    t.loc[ma, "position"], t.loc[ma, "wt_aa"] = pb, wb
    t.loc[mb, "position"], t.loc[mb, "wt_aa"] = pa, wa
    return _relabel(t)


def _aa(d: Muts, aa: str) -> pd.Series:
    return _rows(d.table["mut_aa"] == aa, f"substitution to {aa}")


def op_drop_mutant_aa(d: Muts, rng, aa: str) -> Muts:
    return Muts(d.table[~_aa(d, aa)].reset_index(drop=True))


def op_swap_mutant_aa(d: Muts, rng, a: str, b: str) -> Muts:
    t = d.table.copy()
    ma, mb = _aa(d, a), _aa(d, b)
    t.loc[ma, "mut_aa"], t.loc[mb, "mut_aa"] = b, a
    return _relabel(t)


OPS = {"drop_position": op_drop_position, "swap_positions": op_swap_positions,
       "drop_mutant_aa": op_drop_mutant_aa, "swap_mutant_aa": op_swap_mutant_aa}

STAT_SOURCE = r'''
import os
import pandas as pd

TABLE = "ddg.tsv"


def load(root="."):
    """ddg.tsv (variant, position, wt_aa, mut_aa, ddG) as a DataFrame."""
    tab = pd.read_csv(os.path.join(root, TABLE), sep="\t", dtype={"variant": str, "wt_aa": str, "mut_aa": str})
    for c in ("position", "wt_aa", "mut_aa", "ddG"):
        if c not in tab.columns:
            raise ValueError(f"{TABLE}: expected a column {c}")
    return tab


def reference_statistic(spec, options, data):
    """{"answer": letter or None, "values": {letter: value or None}, "reason": str} for one data version."""
    tab = data
    kind, margin = spec["kind"], float(spec["margin"])
    label = tab["wt_aa"] + tab["position"].astype(str)
    values, missing = {}, []
    for letter, opt in options.items():
        if kind == "position_mean":
            rows = tab.loc[label == opt, "ddG"]
            what = f"residue {opt}"
        elif kind == "mutant_mean":
            rows = tab.loc[tab["mut_aa"] == opt, "ddG"]
            what = f"substitutions to {opt}"
        else:
            raise ValueError(f"unknown statistic kind {kind!r}")
        if len(rows) == 0:
            values[letter] = None
            missing.append(f"{what}: no row in {TABLE}")
        else:
            values[letter] = float(rows.mean())
    return decide(values, missing, margin, "max")
'''


@grounding_host("protein")
class ProteinHost(GroundingHost):
    families = ("sensitivity", "substitution")
    assay = "folding stabilities (ddG) of single amino-acid substitutions in a protein domain"
    files = ("ddg.tsv (tab-separated: variant as wild-type residue, position, mutant residue, e.g. T2A; position; "
             "wt_aa; mut_aa; ddG = folding free-energy change in kcal/mol, positive = destabilising) and meta.json.")
    stat_source = STAT_SOURCE
    ops = OPS

    def base_data(self, dataset, datasets) -> Muts:
        if dataset is not None:
            raise BenchmarkError(f"the protein grounding host has no datasets (item names {dataset!r})")
        return Muts(_substrate())

    def null(self, d: Muts, rng) -> Muts:
        t = d.table.iloc[rng.permutation(len(d.table))].reset_index(drop=True)
        t["variant"] = [f"m{i + 1:04d}" for i in range(len(t))]
        return Muts(t)

    def write_version(self, d: Muts, root: Path) -> list[str]:
        w = CanonicalWriter(root)
        t = d.table.sort_values(["position", "mut_aa", "variant"], kind="stable").reset_index(drop=True)
        w.table(TABLE, t[COLS], sep="\t", float_format="%.4f")
        w.json("meta.json", {"files": {TABLE: "folding free-energy change of each single substitution (kcal/mol, "
                                              "positive = destabilising)", "meta.json": "this description"},
                             "protein": "a small globular domain (numbering from its initiator methionine)"})
        return sorted(w.written)

    def verify_extra(self, item, cls: str, root: Path, data, original: Muts) -> list[str]:
        problems = []
        if data[["position", "mut_aa"]].duplicated().any() and cls != "flip":
            problems.append(f"{TABLE} repeats a substitution")
        if cls == "withdrawal":
            if item.withdrawal["op"] == "drop_position":
                r = item.withdrawal["residue"]
                hits = files_mentioning(root, r)
                if hits:
                    problems.append(f"{cls}: dropped residue {r} still appears in {', '.join(hits)}")
            else:
                if (data["mut_aa"] == item.withdrawal["aa"]).any():
                    problems.append(f"{cls}: substitutions to {item.withdrawal['aa']} remain")
        if cls == "null" and set(original.table["variant"]) & set(data["variant"]):
            problems.append(f"{cls}: original variant names survive")
        return problems
