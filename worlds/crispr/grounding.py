"""The CRISPR track's grounding host: items (worlds/crispr/grounding.yaml) on the real MAGeCK demo count table.

Substrate: `package_file("mageck2", "count_table.txt")`, tests/data/count_table.txt of the mageck2 0.3.0 sdist (the
MAGeCK demo; Li W et al. 2014 Genome Biol 15:554): 999 sgRNAs of 100 genes (9-10 each) with raw read counts in
HL60.initial, KBM7.initial, HL60.final and KBM7.final, a slice of the genome-wide negative-selection screens of Wang T
et al. 2014 Science 343:80 in two leukaemia lines. The real counts are used as they are (no thinning, no controls).

Versions, each written through the canonical writer (counts.txt in the MAGeCK count layout + meta.json):
  null        sgRNA rows permuted and sgRNA IDs replaced by opaque ones (the real IDs name the gene and the cut site);
              gene names kept, as the answers are genes
  withdrawal  delete_gene (every sgRNA of a gene removed: its name is then in no file) | drop_sample (one sample
              column removed)
  flip        swap_genes (two genes' sgRNAs exchange their counts, in every sample or the named ones: the two genes'
              labels mixed up) | exchange_samples (the counts of paired sample columns exchanged, for every sgRNA or
              only a gene's: a cell-line label mix-up)

Statistic kinds (`STAT_SOURCE`). Every kind starts from the same reference analysis of counts.txt: MAGeCK median-ratio
size factors over all sample columns (guides with a zero in any sample left out of the estimate), normalised counts
n = count / size factor, guide log2 fold change L = log2((n_final + 1) / (n_initial + 1)) of a cell line's
`<line>.final` over `<line>.initial`, and a gene's effect = the median L of its sgRNAs.
  gene_effect        options genes; the gene effect in `line`; lowest wins (direction min: most depleted)
  selectivity        options genes; gene effect in `line` minus gene effect in `versus`; lowest wins
  guide_consistency  options genes; share of the gene's sgRNAs with L < `threshold` in `line`; highest wins
  depleted_count     options ranges (`bins`: letter -> [lo, hi]); n = the number of genes whose effect in `line` is
                     below `threshold`; an option scores minus the distance of n from its range (0 inside); highest
Undefined when a gene or a sample column the statistic reads is absent, or within the item's margin
(graders.grounding.decide).

No anonymisation: the gene names are the answers.
"""
from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.suite.canonical import CanonicalWriter
from benchmark.errors import BenchmarkError
from benchmark.suite.registry import grounding_host
from graders.grounding import files_mentioning
from worlds.scaffold import BINS_SOURCE, SubstrateHost

COUNTS = "counts.txt"
LINES = ("HL60", "KBM7")
TIMEPOINTS = ("initial", "final")


@dataclass
class Screen:
    table: pd.DataFrame  # sgRNA, Gene, then one integer count column per sample ("<line>.<timepoint>")

    @property
    def samples(self) -> list[str]:
        return [c for c in self.table.columns if c not in ("sgRNA", "Gene")]


@functools.lru_cache(maxsize=1)
def _substrate() -> pd.DataFrame:
    from benchmark.suite.package_data import package_file

    tab = pd.read_csv(package_file("mageck2", "count_table.txt"), sep="\t")
    cols = ["sgRNA", "Gene", "HL60.initial", "KBM7.initial", "HL60.final", "KBM7.final"]
    if list(tab.columns) != cols or tab["sgRNA"].duplicated().any():
        raise BenchmarkError("the mageck2 count_table.txt does not have the expected layout "
                             f"({', '.join(cols)}; unique sgRNA IDs); re-fetch it with `python -m benchmark data fetch`")
    return tab


# ---------------------------------------------------------------- operations

def _rows(d: Screen, gene: str) -> np.ndarray:
    idx = np.flatnonzero(d.table["Gene"].to_numpy() == gene)
    if not len(idx):
        raise BenchmarkError(f"gene {gene} has no sgRNAs in the data")
    return idx


def _sample(d: Screen, name: str) -> str:
    if name not in d.samples:
        raise BenchmarkError(f"sample {name} is not a column of the data (columns: {', '.join(d.samples)})")
    return name


def op_null(d: Screen, rng: np.random.Generator) -> Screen:
    tab = d.table.iloc[rng.permutation(len(d.table))].reset_index(drop=True)
    taken = set(d.table["sgRNA"])
    ids: list[str] = []
    while len(ids) < len(tab):
        sid = "sg" + "".join(rng.choice(list("0123456789ABCDEF"), 8))
        if sid not in taken:
            taken.add(sid)
            ids.append(sid)
    tab["sgRNA"] = ids
    return Screen(tab)


def op_delete_gene(d: Screen, rng, gene: str) -> Screen:
    rows = _rows(d, gene)
    return Screen(d.table.drop(index=d.table.index[rows]).reset_index(drop=True))


def op_drop_sample(d: Screen, rng, sample: str) -> Screen:
    return Screen(d.table.drop(columns=[_sample(d, sample)]))


def op_swap_genes(d: Screen, rng, a: str, b: str, samples: list[str] | None = None) -> Screen:
    """Gene a's sgRNAs take gene b's counts and vice versa (paired in sgRNA ID order), in `samples` (default all)."""
    ia, ib = _rows(d, a), _rows(d, b)
    if len(ia) != len(ib):
        raise BenchmarkError(f"genes {a} and {b} have {len(ia)} and {len(ib)} sgRNAs; swap_genes needs equal numbers")
    ia = ia[np.argsort(d.table["sgRNA"].to_numpy()[ia])]
    ib = ib[np.argsort(d.table["sgRNA"].to_numpy()[ib])]
    cols = [_sample(d, s) for s in (samples or d.samples)]
    tab = d.table.copy()
    va, vb = d.table[cols].to_numpy()[ia], d.table[cols].to_numpy()[ib]
    tab.loc[tab.index[ia], cols] = vb
    tab.loc[tab.index[ib], cols] = va
    return Screen(tab)


def op_exchange_samples(d: Screen, rng, pairs: list[list[str]], gene: str | None = None) -> Screen:
    """For each [x, y] in `pairs`, the counts of columns x and y exchanged, for every sgRNA or only `gene`'s."""
    rows = _rows(d, gene) if gene is not None else np.arange(len(d.table))
    tab = d.table.copy()
    for x, y in pairs:
        x, y = _sample(d, x), _sample(d, y)
        vx, vy = d.table[x].to_numpy()[rows], d.table[y].to_numpy()[rows]
        tab.loc[tab.index[rows], x] = vy
        tab.loc[tab.index[rows], y] = vx
    return Screen(tab)


OPS = {"delete_gene": op_delete_gene, "drop_sample": op_drop_sample, "swap_genes": op_swap_genes,
       "exchange_samples": op_exchange_samples}

# ---------------------------------------------------------------- statistics (run on the host and in the sandbox)

STAT_SOURCE = r'''
import os
import numpy as np
import pandas as pd

COUNTS = "counts.txt"


def load(root="."):
    """counts.txt (MAGeCK count layout: sgRNA, Gene, one raw-count column per sample) as a DataFrame."""
    tab = pd.read_csv(os.path.join(root, COUNTS), sep="\t", dtype={"sgRNA": str, "Gene": str})
    if list(tab.columns[:2]) != ["sgRNA", "Gene"] or tab.shape[1] < 3:
        raise ValueError(f"{COUNTS}: expected columns sgRNA, Gene and at least one sample")
    return tab


def size_factors(tab):
    """MAGeCK median-ratio size factors over every sample column (guides with a zero in any sample left out)."""
    samples = [c for c in tab.columns if c not in ("sgRNA", "Gene")]
    c = tab[samples].to_numpy(np.float64)
    ok = (c > 0).all(1)
    lg = np.log(c[ok])
    return dict(zip(samples, np.exp(np.median(lg - lg.mean(1, keepdims=True), axis=0))))


def guide_lfc(tab, line, missing):
    """Per-sgRNA log2 fold change final vs initial of `line` on median-ratio normalised counts (None if a column is
    absent, which `missing` then names)."""
    cols = [f"{line}.initial", f"{line}.final"]
    absent = [c for c in cols if c not in tab.columns]
    if absent:
        missing.extend(f"no sample column {c}" for c in absent)
        return None
    sf = size_factors(tab)
    ini = tab[cols[0]].to_numpy(np.float64) / sf[cols[0]]
    fin = tab[cols[1]].to_numpy(np.float64) / sf[cols[1]]
    return pd.Series(np.log2((fin + 1) / (ini + 1)), index=tab.index)


def gene_effects(tab, line, missing):
    """The median guide log2 fold change of every gene in `line` (None if a column is absent)."""
    lfc = guide_lfc(tab, line, missing)
    return None if lfc is None else lfc.groupby(tab["Gene"].to_numpy()).median()


def reference_statistic(spec, options, data):
    """{"answer": letter or None, "values": {letter: value or None}, "reason": str} for one data version."""
    tab = data
    kind, margin = spec["kind"], float(spec["margin"])
    direction = spec.get("direction", "max")
    genes = set(tab["Gene"])
    values, missing = {}, []

    def gene_options():
        for gene in options.values():
            if gene not in genes:
                missing.append(f"gene {gene} has no sgRNAs in {COUNTS}")

    if kind == "gene_effect":
        gene_options()
        eff = gene_effects(tab, spec["line"], missing)
        for letter, gene in options.items():
            values[letter] = float(eff[gene]) if eff is not None and gene in genes else None
    elif kind == "selectivity":
        gene_options()
        eff = gene_effects(tab, spec["line"], missing)
        ref = gene_effects(tab, spec["versus"], missing)
        for letter, gene in options.items():
            ok = eff is not None and ref is not None and gene in genes
            values[letter] = float(eff[gene] - ref[gene]) if ok else None
    elif kind == "guide_consistency":
        gene_options()
        lfc = guide_lfc(tab, spec["line"], missing)
        thr = float(spec["threshold"])
        for letter, gene in options.items():
            if lfc is None or gene not in genes:
                values[letter] = None
            else:
                values[letter] = float((lfc[(tab["Gene"] == gene).to_numpy()] < thr).mean())
    elif kind == "depleted_count":
        eff = gene_effects(tab, spec["line"], missing)
        values.update(in_bins(spec, options, None if eff is None else int((eff < float(spec["threshold"])).sum())))
    else:
        raise ValueError(f"unknown statistic kind {kind!r}")
    return decide(values, missing, margin, direction)
''' + BINS_SOURCE

META = {
    "assay": ("pooled CRISPR-Cas9 knockout screen (negative selection, proliferation): sgRNA read counts of a cell "
              "population sequenced at the start of the screen (initial) and after growth (final), in two human "
              "leukaemia cell lines"),
    "files": {
        COUNTS: "sgRNA read-count table (MAGeCK count format, tab-separated): sgRNA (identifier), Gene (the targeted "
                "gene), one column per sample named <cell line>.<timepoint>",
        "meta.json": "this description",
    },
    "values": "raw read counts per sgRNA (non-negative integers), not normalised",
    "library": "a slice of a genome-scale sgRNA library, about 10 sgRNAs per gene",
}


# ---------------------------------------------------------------- the host

@grounding_host("crispr")
class CrisprHost(SubstrateHost):
    """A slice of a genome-scale knockout screen in two leukaemia lines, initial and final samples; the null version
    gives the permuted sgRNAs random opaque IDs (genes kept)."""

    families = ("depletion", "selectivity", "guide_consistency", "screen_strength")
    assay = "pooled CRISPR-knockout screen read counts"
    files = ("counts.txt (MAGeCK count table, tab-separated: sgRNA, Gene, and raw read counts per sample, columns "
             "named <cell line>.<timepoint>, e.g. KBM7.initial, KBM7.final) and meta.json.")
    stat_source = STAT_SOURCE
    ops = OPS

    def substrate(self) -> Screen:
        return Screen(_substrate().copy())

    def null(self, d: Screen, rng: np.random.Generator) -> Screen:
        return op_null(d, rng)

    def write_version(self, d: Screen, root: Path) -> list[str]:
        """counts.txt sorted by sgRNA ID (no position encodes an edit) and meta.json naming the samples present."""
        w = CanonicalWriter(root)
        tab = d.table.sort_values("sgRNA", kind="stable").reset_index(drop=True)
        for s in d.samples:
            tab[s] = np.rint(tab[s].to_numpy(np.float64)).astype(np.int64)
        w.table(COUNTS, tab, sep="\t")
        meta = copy.deepcopy(META)
        meta["samples"] = {s: {"cell_line": s.split(".")[0], "timepoint": s.split(".")[1]} for s in d.samples}
        w.json("meta.json", meta)
        return sorted(w.written)

    def verify_extra(self, item, cls: str, root: Path, data, original: Screen) -> list[str]:
        """counts.txt repeats no sgRNA and holds integer counts; a deleted gene appears in no file (not as a Gene
        entry nor inside an sgRNA ID); a null version keeps no original sgRNA ID."""
        tab = data
        problems = []
        if tab["sgRNA"].duplicated().any():
            problems.append(f"{COUNTS} repeats an sgRNA ID")
        samples = [c for c in tab.columns if c not in ("sgRNA", "Gene")]
        if not all(pd.api.types.is_integer_dtype(tab[s]) for s in samples):
            problems.append(f"{COUNTS}: a sample column is not integer counts")
        if cls == "withdrawal" and item.withdrawal["op"] == "delete_gene":
            gene = item.withdrawal["gene"]
            hits = files_mentioning(root, gene)
            if hits or tab["sgRNA"].str.startswith(f"{gene}_").any():
                problems.append(f"{cls}: deleted gene {gene} still appears in {', '.join(hits) or COUNTS}")
        if cls == "null":
            kept = set(original.table["sgRNA"]) & set(tab["sgRNA"])
            if kept:
                problems.append(f"{cls}: {len(kept)} original sgRNA IDs survive (e.g. {sorted(kept)[0]})")
        return problems
