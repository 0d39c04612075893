"""The nuclear track's grounding host: items (worlds/nuclear/grounding.yaml) on a counting series of check sources.

Substrate: twelve gamma check sources (Co-60, Mn-54, Cs-137, Na-22, Co-57, Ba-133, Zn-65, Y-88, Cd-109, Am-241,
Eu-152, Sr-85) counted weekly for 274 days (40 measurements of 3600 s live time each) on one NaI(Tl) detector; the
net full-energy-peak counts are Poisson draws around an exponential decay with the DDEP/LNHB half-lives and fixed
initial rates (simulated, like every count in this track; build.py docstring). Data: rates.tsv (measurement, source,
day, live_time_s, net_counts), meta.json.

Versions, each written through the canonical writer:
  null        rows permuted, measurement identifiers replaced by opaque ones (the answers are source names, kept)
  withdrawal  drop_source (every measurement of a source removed: its name is then in no file)
  flip        swap_sources (the source labels of two sources exchanged: a labelling mix-up)

Statistic kinds (`STAT_SOURCE`):
  decay_constant  options source names; the decay constant (per 1000 days) fitted by weighted least squares on
                  ln(net_counts / live_time) against day; highest wins (the shortest half-life)
  initial_rate    options source names; the mean net count rate (cps) of the source's first three measurements;
                  highest wins
Undefined when an option has no row, or within the item's margin (graders.grounding.decide).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.suite.canonical import CanonicalWriter
from benchmark.errors import BenchmarkError
from benchmark.grounding.host import GroundingHost
from benchmark.suite.registry import grounding_host
from graders.grounding import files_mentioning

TABLE = "rates.tsv"
COLS = ["measurement", "source", "day", "live_time_s", "net_counts"]
# DDEP/LNHB half-lives (days) and the initial net full-energy-peak rates (cps) of the simulated check sources
SOURCES = {"Co-60": (1925.28, 400.0), "Mn-54": (312.19, 90.0), "Cs-137": (10976.0, 150.0), "Na-22": (950.6, 60.0),
           "Co-57": (271.8, 80.0), "Ba-133": (3848.7, 120.0), "Zn-65": (243.93, 110.0), "Y-88": (106.63, 260.0),
           "Cd-109": (461.9, 40.0), "Am-241": (157861.0, 320.0), "Eu-152": (4939.0, 200.0), "Sr-85": (64.85, 70.0)}


@dataclass
class Series:
    table: pd.DataFrame  # measurement, source, day, live_time_s, net_counts


def _substrate() -> pd.DataFrame:
    rng = np.random.default_rng(6001)
    days = np.arange(40) * 7.0
    rows = []
    for src in sorted(SOURCES):
        t_half, r0 = SOURCES[src]
        mu = r0 * np.exp(-math.log(2) * days / t_half) * 3600.0
        for d, n in zip(days, rng.poisson(mu)):
            rows.append({"source": src, "day": float(d), "live_time_s": 3600.0, "net_counts": int(n)})
    t = pd.DataFrame(rows).sort_values(["day", "source"], kind="stable").reset_index(drop=True)
    t.insert(0, "measurement", [f"M{i + 1:04d}" for i in range(len(t))])
    return t[COLS]


def _src(d: Series, name: str) -> pd.Series:
    m = d.table["source"] == name
    if not m.any():
        raise BenchmarkError(f"source {name} has no row in the data")
    return m


def op_drop_source(d: Series, rng, source: str) -> Series:
    return Series(d.table[~_src(d, source)].reset_index(drop=True))


def op_swap_sources(d: Series, rng, a: str, b: str) -> Series:
    t = d.table.copy()
    ma, mb = _src(d, a), _src(d, b)
    t.loc[ma, "source"], t.loc[mb, "source"] = b, a
    return Series(t)


OPS = {"drop_source": op_drop_source, "swap_sources": op_swap_sources}

STAT_SOURCE = r'''
import math
import os
import pandas as pd

TABLE = "rates.tsv"


def load(root="."):
    """rates.tsv (measurement, source, day, live_time_s, net_counts) as a DataFrame."""
    tab = pd.read_csv(os.path.join(root, TABLE), sep="\t", dtype={"measurement": str, "source": str})
    for c in ("source", "day", "live_time_s", "net_counts"):
        if c not in tab.columns:
            raise ValueError(f"{TABLE}: expected a column {c}")
    return tab


def _lam(rows):
    """Decay constant per 1000 days: weighted least squares of ln(counts / live) on day, weights = counts."""
    t = [float(x) for x in rows["day"]]
    n = [float(x) for x in rows["net_counts"]]
    y = [math.log(c / float(l)) for c, l in zip(n, rows["live_time_s"])]
    sw = sum(n)
    tm = sum(w * x for w, x in zip(n, t)) / sw
    ym = sum(w * v for w, v in zip(n, y)) / sw
    stt = sum(w * (x - tm) ** 2 for w, x in zip(n, t))
    return -1000.0 * sum(w * (x - tm) * (v - ym) for w, x, v in zip(n, t, y)) / stt


def reference_statistic(spec, options, data):
    """{"answer": letter or None, "values": {letter: value or None}, "reason": str} for one data version."""
    tab = data
    kind, margin = spec["kind"], float(spec["margin"])
    values, missing = {}, []
    for letter, opt in options.items():
        rows = tab[tab["source"] == opt].sort_values("day", kind="stable")
        if len(rows) < 3:
            values[letter] = None
            missing.append(f"source {opt}: fewer than 3 measurements in {TABLE}")
            continue
        if kind == "decay_constant":
            values[letter] = _lam(rows)
        elif kind == "initial_rate":
            first = rows.head(3)
            values[letter] = float((first["net_counts"] / first["live_time_s"]).mean())
        else:
            raise ValueError(f"unknown statistic kind {kind!r}")
    return decide(values, missing, margin, "max")
'''


@grounding_host("nuclear")
class NuclearHost(GroundingHost):
    families = ("decay", "activity")
    assay = "weekly gamma-ray counting of a set of radioactive check sources on one NaI(Tl) detector"
    files = ("rates.tsv (tab-separated: measurement, an identifier; source, the nuclide of the check source, e.g. "
             "Co-60; day, days since the first measurement; live_time_s; net_counts, the net full-energy-peak counts of "
             "the source's main gamma line in that measurement) and meta.json.")
    stat_source = STAT_SOURCE
    ops = OPS

    def base_data(self, dataset, datasets) -> Series:
        if dataset is not None:
            raise BenchmarkError(f"the nuclear grounding host has no datasets (item names {dataset!r})")
        return Series(_substrate())

    def null(self, d: Series, rng) -> Series:
        t = d.table.iloc[rng.permutation(len(d.table))].reset_index(drop=True)
        t["measurement"] = [f"x{i + 1:04d}" for i in range(len(t))]
        return Series(t)

    def write_version(self, d: Series, root: Path) -> list[str]:
        w = CanonicalWriter(root)
        t = d.table.sort_values(["day", "source", "measurement"], kind="stable").reset_index(drop=True)
        w.table(TABLE, t[COLS], sep="\t", float_format="%.4f")
        w.json("meta.json", {"files": {TABLE: "net full-energy-peak counts of each check source, weekly",
                                       "meta.json": "this description"},
                             "detector": "NaI(Tl) 3x3 in., lead shield; live-time corrected counting"})
        return sorted(w.written)

    def verify_extra(self, item, cls: str, root: Path, data, original: Series) -> list[str]:
        problems = []
        if cls != "flip" and data[["source", "day"]].duplicated().any():
            problems.append(f"{TABLE} repeats a measurement")
        if cls == "withdrawal":
            s = item.withdrawal["source"]
            hits = files_mentioning(root, s)
            if hits:
                problems.append(f"{cls}: dropped source {s} still appears in {', '.join(hits)}")
        if cls == "null" and set(original.table["measurement"]) & set(data["measurement"]):
            problems.append(f"{cls}: original measurement identifiers survive")
        return problems
