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

from pathlib import Path

import pandas as pd

from benchmark.suite.registry import grounding_host
from worlds.scaffold import Table, TableHost, dropped_still_named, dropping, ids_survive, require, swapping, table_source

TABLE = "cp_solids.tsv"
COLS = ["cas", "substance", "T_K", "Cp_J_per_mol_K"]


class Solids(Table):
    """cas, substance, T_K, Cp_J_per_mol_K: one row per substance and tabulated temperature."""


def _rows(d: Solids, substance: str) -> pd.Series:
    return require(d.table["substance"] == substance, f"substance {substance}")


STAT_SOURCE = table_source(TABLE, ("cas", "substance"), ("substance", "T_K", "Cp_J_per_mol_K")) + r'''
NEED = {"rise_200_300": (200, 300), "cp_300": (300,)}


def reference_statistic(spec, options, data):
    """{"answer": letter or None, "values": {letter: value or None}, "reason": str} for one data version."""
    kind = spec["kind"]
    if kind not in NEED:
        raise ValueError(f"unknown statistic kind {kind!r}")

    def value_of(opt):
        rows = data[data["substance"] == opt]
        cp = {int(t): float(c) for t, c in zip(rows["T_K"], rows["Cp_J_per_mol_K"])}
        gaps = [t for t in NEED[kind] if t not in cp]
        if gaps:
            return f"{opt}: no Cp at {', '.join(str(t) for t in gaps)} K in {TABLE}"
        return cp[300] / cp[200] - 1.0 if kind == "rise_200_300" else cp[300]

    return highest(spec, options, value_of)
'''


@grounding_host("calorimetry")
class CalorimetryHost(TableHost):
    """The CRC Handbook's heat capacities of solids (chemicals sdist). Its null version keeps each substance's rows
    together under one opaque identifier, x001 to x042 by a permutation of the sorted CAS numbers."""

    families = ("debye_rise", "molar_cp")
    assay = "molar heat capacities of solids between 200 and 600 K (evaluated handbook values)"
    files = ("cp_solids.tsv (tab-separated: cas = CAS registry number or an identifier; substance; T_K; Cp_J_per_mol_K "
             "= molar heat capacity at constant pressure in J/(mol K)), one row per substance and temperature, and "
             "meta.json.")
    stat_source = STAT_SOURCE
    # drop_substance: every row of a substance removed; swap_substances: two substances exchange names and CAS numbers
    ops = {"drop_substance": dropping(_rows), "swap_substances": swapping(_rows, ["substance", "cas"])}
    table_file, columns, sort_by, float_format = TABLE, COLS, ["substance", "T_K", "cas"], "%.2f"

    def substrate(self) -> Solids:
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
        return Solids(pd.DataFrame(rows, columns=COLS))

    def null(self, d: Solids, rng) -> Solids:
        t = self.permuted(d, rng)
        cs = sorted(set(t["cas"]))
        perm = rng.permutation(len(cs))
        ids = {c: f"x{int(perm[i]) + 1:03d}" for i, c in enumerate(cs)}
        t["cas"] = t["cas"].map(ids)
        return Solids(t)

    def meta(self, t: pd.DataFrame) -> dict:
        return {"files": {TABLE: "molar heat capacity at constant pressure of each solid at each tabulated temperature, "
                                 "J/(mol K)", "meta.json": "this description"},
                "source": "evaluated handbook values (one value per substance and temperature)"}

    def verify_extra(self, item, cls: str, root: Path, data, original: Solids) -> list[str]:
        problems = [f"{TABLE} repeats a (substance, temperature) row"] if data[["substance", "T_K"]].duplicated().any() else []
        if cls == "withdrawal":
            problems += dropped_still_named(cls, root, "substance", item.withdrawal["substance"])
        return problems + ids_survive(cls, original.table["cas"], data["cas"].astype(str), "CAS numbers")
