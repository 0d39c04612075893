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
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.suite.registry import grounding_host
from worlds.scaffold import Table, TableHost, dropped_still_named, dropping, ids_survive, require, swapping, table_source

TABLE = "rates.tsv"
COLS = ["measurement", "source", "day", "live_time_s", "net_counts"]
# DDEP/LNHB half-lives (days) and the initial net full-energy-peak rates (cps) of the simulated check sources
SOURCES = {"Co-60": (1925.28, 400.0), "Mn-54": (312.19, 90.0), "Cs-137": (10976.0, 150.0), "Na-22": (950.6, 60.0),
           "Co-57": (271.8, 80.0), "Ba-133": (3848.7, 120.0), "Zn-65": (243.93, 110.0), "Y-88": (106.63, 260.0),
           "Cd-109": (461.9, 40.0), "Am-241": (157861.0, 320.0), "Eu-152": (4939.0, 200.0), "Sr-85": (64.85, 70.0)}


class Series(Table):
    """measurement, source, day, live_time_s, net_counts: one row per measurement of a source."""


def _src(d: Series, source: str) -> pd.Series:
    return require(d.table["source"] == source, f"source {source}")


STAT_SOURCE = table_source(TABLE, ("measurement", "source"), ("source", "day", "live_time_s", "net_counts"),
                           imports="import math\n") + r'''
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


def _initial(rows):
    """The mean net count rate (cps) of the first three measurements."""
    first = rows.head(3)
    return float((first["net_counts"] / first["live_time_s"]).mean())


def reference_statistic(spec, options, data):
    """{"answer": letter or None, "values": {letter: value or None}, "reason": str} for one data version."""
    stat = {"decay_constant": _lam, "initial_rate": _initial}.get(spec["kind"])
    if stat is None:
        raise ValueError(f"unknown statistic kind {spec['kind']!r}")

    def value_of(opt):
        rows = data[data["source"] == opt].sort_values("day", kind="stable")
        return f"source {opt}: fewer than 3 measurements in {TABLE}" if len(rows) < 3 else stat(rows)

    return highest(spec, options, value_of)
'''


@grounding_host("nuclear")
class NuclearHost(TableHost):
    """A simulated weekly counting series of twelve check sources (seeded: the same counts in every build).
    Null: measurements x0001... in permuted order."""

    families = ("decay", "activity")
    assay = "weekly gamma-ray counting of a set of radioactive check sources on one NaI(Tl) detector"
    files = ("rates.tsv (tab-separated: measurement, an identifier; source, the nuclide of the check source, e.g. "
             "Co-60; day, days since the first measurement; live_time_s; net_counts, the net full-energy-peak counts of "
             "the source's main gamma line in that measurement) and meta.json.")
    stat_source = STAT_SOURCE
    ops = {"drop_source": dropping(_src), "swap_sources": swapping(_src, ["source"])}
    table_file, columns, sort_by, float_format = TABLE, COLS, ["day", "source", "measurement"], "%.4f"
    null_ids = ("measurement", "x{:04d}")

    def substrate(self) -> Series:
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
        return Series(t[COLS])

    def meta(self, t: pd.DataFrame) -> dict:
        return {"files": {TABLE: "net full-energy-peak counts of each check source, weekly", "meta.json": "this description"},
                "detector": "NaI(Tl) 3x3 in., lead shield; live-time corrected counting"}

    def verify_extra(self, item, cls: str, root: Path, data, original: Series) -> list[str]:
        problems = [f"{TABLE} repeats a measurement"] if cls != "flip" and data[["source", "day"]].duplicated().any() else []
        if cls == "withdrawal":
            problems += dropped_still_named(cls, root, "source", item.withdrawal["source"])
        return problems + ids_survive(cls, original.table["measurement"], data["measurement"], "measurement identifiers")
