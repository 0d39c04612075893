"""The calorimetry track's grounding host: items (worlds/calorimetry/grounding.yaml) on the real CRC Handbook molar
heat capacities of solids (chemicals 1.5.2 sdist, Heat Capacity/CRCHeatCapacitySolids.tsv: 42 solids, Cp in
J/(mol K) at 200, 250, 300, 350, 400, 500 and 600 K; blank where the Handbook gives none).

Substrate: one row per (substance, temperature) with a value: cas, substance, T_K, Cp_J_per_mol_K.

Versions, each written through the canonical writer (cp_solids.tsv + meta.json):
  null        rows permuted, CAS numbers replaced by opaque identifiers (the answers are substance names, kept)
  withdrawal  drop_substance: every row of a substance removed (its name is then in no file)
  flip        swap_substances: the rows of two substances exchange their names and CAS numbers

Statistic kinds (`STAT_SOURCE`):
  rise_200_300  options substances; Cp(300 K) / Cp(200 K) - 1, the relative rise of the heat capacity between 200
                and 300 K (large for a solid whose Debye temperature is far above 200 K); highest wins
  cp_300        options substances; Cp at 300 K; highest wins
Undefined when an option has no row at a needed temperature, or within the item's margin (graders.grounding.decide).
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

TABLE = "cp_solids.tsv"
COLS = ["cas", "substance", "T_K", "Cp_J_per_mol_K"]


@dataclass
class Solids:
    table: pd.DataFrame  # cas, substance, T_K, Cp_J_per_mol_K


def _substrate() -> pd.DataFrame:
    from benchmark.suite.package_data import package_file

    t = pd.read_csv(package_file("chemicals", "CRCHeatCapacitySolids.tsv"), sep="\t", dtype=str)
    temps = list(t.columns[2:])
    rows = []
    for _, r in t.iterrows():
        for c in temps:
            v = str(r[c]).strip()
            if v and v.lower() != "nan":
                rows.append({"cas": str(r.iloc[0]).strip(), "substance": str(r.iloc[1]).strip(), "T_K": int(c),
                             "Cp_J_per_mol_K": float(v)})
    return pd.DataFrame(rows, columns=COLS)


def _rows(d: Solids, name: str) -> pd.Series:
    m = d.table["substance"] == name
    if not m.any():
        raise BenchmarkError(f"substance {name} has no row in the data")
    return m


def op_drop_substance(d: Solids, rng, substance: str) -> Solids:
    return Solids(d.table[~_rows(d, substance)].reset_index(drop=True))


def op_swap_substances(d: Solids, rng, a: str, b: str) -> Solids:
    t = d.table.copy()
    ma, mb = _rows(d, a), _rows(d, b)
    ca, cb = t.loc[ma, "cas"].iloc[0], t.loc[mb, "cas"].iloc[0]
    t.loc[ma, ["substance", "cas"]] = [b, cb]
    t.loc[mb, ["substance", "cas"]] = [a, ca]
    return Solids(t)


OPS = {"drop_substance": op_drop_substance, "swap_substances": op_swap_substances}

STAT_SOURCE = r'''
import os
import pandas as pd

TABLE = "cp_solids.tsv"


def load(root="."):
    """cp_solids.tsv (cas, substance, T_K, Cp_J_per_mol_K) as a DataFrame."""
    tab = pd.read_csv(os.path.join(root, TABLE), sep="\t", dtype={"cas": str, "substance": str})
    for c in ("substance", "T_K", "Cp_J_per_mol_K"):
        if c not in tab.columns:
            raise ValueError(f"{TABLE}: expected a column {c}")
    return tab


def reference_statistic(spec, options, data):
    """{"answer": letter or None, "values": {letter: value or None}, "reason": str} for one data version."""
    tab = data
    kind, margin = spec["kind"], float(spec["margin"])
    values, missing = {}, []
    for letter, opt in options.items():
        rows = tab[tab["substance"] == opt]
        cp = {int(t): float(c) for t, c in zip(rows["T_K"], rows["Cp_J_per_mol_K"])}
        if kind == "rise_200_300":
            need = (200, 300)
        elif kind == "cp_300":
            need = (300,)
        else:
            raise ValueError(f"unknown statistic kind {kind!r}")
        if any(t not in cp for t in need):
            values[letter] = None
            missing.append(f"{opt}: no Cp at {', '.join(str(t) for t in need if t not in cp)} K in {TABLE}")
        elif kind == "rise_200_300":
            values[letter] = cp[300] / cp[200] - 1.0
        else:
            values[letter] = cp[300]
    return decide(values, missing, margin, "max")
'''


@grounding_host("calorimetry")
class CalorimetryHost(GroundingHost):
    families = ("debye_rise", "molar_cp")
    assay = "molar heat capacities of solids between 200 and 600 K (evaluated handbook values)"
    files = ("cp_solids.tsv (tab-separated: cas = CAS registry number or an identifier; substance; T_K; Cp_J_per_mol_K "
             "= molar heat capacity at constant pressure in J/(mol K)), one row per substance and temperature, and "
             "meta.json.")
    stat_source = STAT_SOURCE
    ops = OPS

    def base_data(self, dataset, datasets) -> Solids:
        if dataset is not None:
            raise BenchmarkError(f"the calorimetry grounding host has no datasets (item names {dataset!r})")
        return Solids(_substrate())

    def null(self, d: Solids, rng) -> Solids:
        t = d.table.iloc[rng.permutation(len(d.table))].reset_index(drop=True)
        cs = sorted(set(t["cas"]))
        perm = rng.permutation(len(cs))
        ids = {c: f"x{int(perm[i]) + 1:03d}" for i, c in enumerate(cs)}
        t["cas"] = t["cas"].map(ids)
        return Solids(t)

    def write_version(self, d: Solids, root: Path) -> list[str]:
        w = CanonicalWriter(root)
        t = d.table.sort_values(["substance", "T_K", "cas"], kind="stable").reset_index(drop=True)
        w.table(TABLE, t[COLS], sep="\t", float_format="%.2f")
        w.json("meta.json", {"files": {TABLE: "molar heat capacity at constant pressure of each solid at each tabulated "
                                              "temperature, J/(mol K)", "meta.json": "this description"},
                             "source": "evaluated handbook values (one value per substance and temperature)"})
        return sorted(w.written)

    def verify_extra(self, item, cls: str, root: Path, data, original: Solids) -> list[str]:
        problems = []
        if data[["substance", "T_K"]].duplicated().any():
            problems.append(f"{TABLE} repeats a (substance, temperature) row")
        if cls == "withdrawal":
            s = item.withdrawal["substance"]
            hits = files_mentioning(root, s)
            if hits:
                problems.append(f"{cls}: dropped substance {s} still appears in {', '.join(hits)}")
        if cls == "null" and set(original.table["cas"]) & set(data["cas"].astype(str)):
            problems.append(f"{cls}: original CAS numbers survive")
        return problems
