"""The scRNA track's grounding host: items (worlds/scrna/grounding.yaml) on the real PBMC68k cells.

Substrate: the real PBMC68k UMI counts recovered by this track's loader (`worlds.scrna.build.pbmc68k`), 700 cells x
765 genes, the data set's `bulk_labels` as cell types. An item reads all cells (no `dataset`) or a documented split
(grounding.yaml `datasets`, `Split`) adding a `sample` column.

Versions, each written through the canonical writer (10x matrix/barcodes/features + cells.csv + meta.json):
  null        cells and genes permuted, barcodes replaced by opaque ones (one donor: no donor ids to rename)
  withdrawal  delete_gene (from the one count matrix, the raw counts) | remove_group (cells of one sample) |
              remove_population (the contrast population) | equalise (down-sample every option population to
              the size of the smallest)
  flip        swap_genes (exchange two genes' counts in every cell) | move_expression (exchange a gene's values
              between two populations by seeded resampling) | downsample (keep a fraction of one population,
              optionally within one sample)

Statistic kinds (`STAT_SOURCE`; options are the item's option texts; x = log1p(CP10k) from the UMI counts in the file):
  marker        options genes; mean x in `population` minus mean x in all other cells; highest wins
  de            options genes; mean x in `group1` minus mean x in `group2`; highest wins
  localisation  options populations; mean x of `gene` in each population; highest wins
  abundance     options populations; number of cells; highest (direction max) or lowest (min) wins
  composition   options populations; share of all cells in `column`==`after` minus share in `column`==`before`
Undefined when a gene or group the statistic reads is absent, or within the item's margin (graders.grounding.decide).

Anonymisation: gene symbols, in the features, in marker-style population labels ("CD4+ ...") and in the item text;
items of the gene-named families (marker, de, localisation).
"""
from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from benchmark.suite.canonical import CanonicalWriter
from benchmark.errors import BenchmarkError
from benchmark.grounding.host import GroundingHost
from benchmark.grounding.items import anonymise_text
from benchmark.suite.registry import grounding_host
from graders.grounding import files_mentioning

MTX_DIR = "filtered_feature_bc_matrix"
META = {
    "assay": "droplet single-cell RNA-seq (10x Genomics); peripheral blood mononuclear cells of one donor",
    "files": {
        f"{MTX_DIR}/matrix.mtx.gz": "Matrix Market coordinate matrix of UMI counts, genes (rows) x cells (columns)",
        f"{MTX_DIR}/features.tsv.gz": "gene_id, gene_symbol, feature_type per matrix row (10x layout, no header)",
        f"{MTX_DIR}/barcodes.tsv.gz": "one cell barcode per matrix column",
        "cells.csv": "per-cell annotation: barcode, cell_type (annotated population) and, where present, sample",
    },
    "values": "UMI counts (non-negative integers), unnormalised; per-cell totals cover the genes in the file only",
}


class Split(BaseModel):
    """A documented split of the real cells into two samples: each cell goes to `names[1]` with probability
    p_after[its population] (default p_after['default']), by a seeded draw."""

    model_config = ConfigDict(extra="forbid")
    column: str = "sample"
    names: list[str]
    seed: int
    p_after: dict[str, float]
    description: str


@dataclass
class VData:
    counts: np.ndarray      # cells x genes, float64 integer-valued
    genes: list[str]
    barcodes: list[str]
    obs: pd.DataFrame       # cell_type (+ sample), row-aligned with counts

    def cells(self, idx) -> "VData":
        idx = np.asarray(idx)
        return VData(self.counts[idx], list(self.genes), [self.barcodes[i] for i in idx],
                     self.obs.iloc[idx].reset_index(drop=True))


@functools.lru_cache(maxsize=1)
def _substrate() -> VData:
    from worlds.scrna.build import pbmc68k

    d = pbmc68k()
    return VData(d.counts, list(d.genes), list(d.barcodes), d.obs[["cell_type"]].copy())


# ---------------------------------------------------------------- operations

def _gene(d: VData, g: str) -> int:
    if g not in d.genes:
        raise BenchmarkError(f"gene {g} is not in the data")
    return d.genes.index(g)


def op_null(d: VData, rng: np.random.Generator) -> VData:
    cells = rng.permutation(len(d.barcodes))
    out = d.cells(cells)
    g = rng.permutation(len(d.genes))
    out.counts = out.counts[:, g]
    out.genes = [d.genes[i] for i in g]
    taken: set[str] = set(d.barcodes)
    bcs: list[str] = []
    while len(bcs) < len(out.barcodes):
        bc = "".join(rng.choice(list("ACGT"), 16)) + "-1"
        if bc not in taken:
            taken.add(bc)
            bcs.append(bc)
    out.barcodes = bcs
    return out


def op_delete_gene(d: VData, rng, gene: str) -> VData:
    j = _gene(d, gene)
    keep = [i for i in range(len(d.genes)) if i != j]
    return VData(d.counts[:, keep], [d.genes[i] for i in keep], d.barcodes, d.obs)


def op_remove_group(d: VData, rng, column: str, value: str) -> VData:
    return d.cells(np.flatnonzero(d.obs[column].to_numpy() != value))


def op_remove_population(d: VData, rng, population: str) -> VData:
    return d.cells(np.flatnonzero(d.obs["cell_type"].to_numpy() != population))


def op_equalise(d: VData, rng, populations: list[str]) -> VData:
    ct = d.obs["cell_type"].to_numpy()
    n = min(int((ct == p).sum()) for p in populations)
    drop = []
    for p in populations:
        idx = np.flatnonzero(ct == p)
        drop += list(rng.choice(idx, len(idx) - n, replace=False))
    return d.cells(np.setdiff1d(np.arange(len(ct)), np.array(drop, dtype=int)))


def op_swap_genes(d: VData, rng, a: str, b: str) -> VData:
    out = copy.deepcopy(d)
    i, j = _gene(d, a), _gene(d, b)
    out.counts[:, [i, j]] = d.counts[:, [j, i]]
    return out


def op_move_expression(d: VData, rng, gene: str, source: str, target: str) -> VData:
    """Exchange `gene`'s counts between two populations: target cells get values resampled from the source's
    cells and source cells from the target's (seeded, with replacement)."""
    out = copy.deepcopy(d)
    j = _gene(d, gene)
    ct = d.obs["cell_type"].to_numpy()
    s, t = np.flatnonzero(ct == source), np.flatnonzero(ct == target)
    out.counts[t, j] = rng.choice(d.counts[s, j], len(t), replace=True)
    out.counts[s, j] = rng.choice(d.counts[t, j], len(s), replace=True)
    return out


def op_downsample(d: VData, rng, population: str, fraction: float, column: str | None = None,
                  value: str | None = None) -> VData:
    ct = d.obs["cell_type"].to_numpy()
    m = ct == population
    if column is not None:
        m &= d.obs[column].to_numpy() == value
    idx = np.flatnonzero(m)
    drop = rng.choice(idx, len(idx) - int(round(fraction * len(idx))), replace=False)
    return d.cells(np.setdiff1d(np.arange(len(ct)), drop))


OPS = {"delete_gene": op_delete_gene, "remove_group": op_remove_group, "remove_population": op_remove_population,
       "equalise": op_equalise, "swap_genes": op_swap_genes, "move_expression": op_move_expression,
       "downsample": op_downsample}

# ---------------------------------------------------------------- statistics (run on the host and in the sandbox)

STAT_SOURCE = r'''
import gzip, os
import numpy as np
import pandas as pd
import scipy.io, scipy.sparse

MTX_DIR = "filtered_feature_bc_matrix"


def load(root="."):
    """cells x genes UMI counts (CSR float64), gene symbols, and cells.csv rows aligned with the matrix columns."""
    mdir = os.path.join(root, MTX_DIR)
    m = scipy.io.mmread(os.path.join(mdir, "matrix.mtx.gz"))
    counts = scipy.sparse.csr_matrix(scipy.sparse.coo_matrix(m).T).astype(np.float64)
    with gzip.open(os.path.join(mdir, "features.tsv.gz"), "rt") as fh:
        genes = [ln.rstrip("\n").split("\t")[1] for ln in fh if ln.strip()]
    with gzip.open(os.path.join(mdir, "barcodes.tsv.gz"), "rt") as fh:
        barcodes = [ln.strip() for ln in fh if ln.strip()]
    cells = pd.read_csv(os.path.join(root, "cells.csv"), dtype=str, keep_default_na=False)
    cells = cells.set_index("barcode").loc[barcodes].reset_index()
    if counts.shape != (len(barcodes), len(genes)):
        raise ValueError(f"matrix {counts.shape} does not match {len(barcodes)} barcodes x {len(genes)} features")
    return counts, genes, cells


def lognorm(counts):
    tot = np.asarray(counts.sum(1)).ravel()
    x = scipy.sparse.csr_matrix(counts.multiply((1e4 / np.maximum(tot, 1))[:, None]))
    x.data = np.log1p(x.data)
    return x


def _col_mean(x, rows, j):
    return float(x[np.flatnonzero(rows)][:, j].mean())


def reference_statistic(spec, options, data):
    """{"answer": letter or None, "values": {letter: value or None}, "reason": str} for one data version."""
    counts, genes, cells = data
    kind, margin = spec["kind"], float(spec["margin"])
    direction = spec.get("direction", "max")
    pos = {g: i for i, g in enumerate(genes)}
    ct = cells["cell_type"].to_numpy() if "cell_type" in cells else np.array([], dtype=object)
    values, missing = {}, []
    if kind in ("marker", "de", "localisation"):
        x = lognorm(counts)
    if kind == "marker" or kind == "de":
        if kind == "marker":
            a = ct == spec["population"]
            b = ~a
            names = (spec["population"], "all other cells")
        else:
            a, b = ct == spec["group1"], ct == spec["group2"]
            names = (spec["group1"], spec["group2"])
        for name, m in zip(names, (a, b)):
            if not m.any():
                missing.append(f"no cells of {name}")
        for letter, gene in options.items():
            if gene not in pos:
                missing.append(f"gene {gene} is absent")
                values[letter] = None
            elif a.any() and b.any():
                values[letter] = _col_mean(x, a, pos[gene]) - _col_mean(x, b, pos[gene])
    elif kind == "localisation":
        gene = spec["gene"]
        if gene not in pos:
            missing.append(f"gene {gene} is absent")
        for letter, pop in options.items():
            m = ct == pop
            if not m.any():
                missing.append(f"no cells of {pop}")
                values[letter] = None
            elif gene in pos:
                values[letter] = _col_mean(x, m, pos[gene])
            else:
                values[letter] = None
    elif kind == "abundance":
        for letter, pop in options.items():
            values[letter] = float((ct == pop).sum())
    elif kind == "composition":
        grp = cells[spec["column"]].to_numpy() if spec["column"] in cells else np.array([], dtype=object)
        before, after = grp == spec["before"], grp == spec["after"]
        for name, m in ((spec["before"], before), (spec["after"], after)):
            if not m.any():
                missing.append(f"no cells in {spec['column']} {name}")
        for letter, pop in options.items():
            if before.any() and after.any():
                values[letter] = float((ct[after] == pop).mean() - (ct[before] == pop).mean())
            else:
                values[letter] = None
    else:
        raise ValueError(f"unknown statistic kind {kind!r}")
    return decide(values, missing, margin, direction)
'''


# ---------------------------------------------------------------- the host

@grounding_host("scrna")
class ScrnaHost(GroundingHost):
    families = ("marker", "abundance", "composition", "localisation", "de")
    assay = "single-cell RNA-seq data"
    files = ("filtered_feature_bc_matrix/ (matrix.mtx.gz: UMI counts, genes x cells, Matrix Market; features.tsv.gz: "
             "gene_id, gene_symbol, feature_type; barcodes.tsv.gz), cells.csv (barcode, cell_type and, where present, "
             "sample) and meta.json.")
    stat_source = STAT_SOURCE
    ops = OPS
    dataset_model = Split
    anon_families = ("marker", "de", "localisation")
    anon_prefix = "G"

    def base_data(self, dataset: str | None, datasets: dict[str, Split]) -> VData:
        d = copy.deepcopy(_substrate())
        if dataset is None:
            return d
        s = datasets[dataset]
        rng = np.random.default_rng(s.seed)
        p = np.array([s.p_after.get(ct, s.p_after["default"]) for ct in d.obs["cell_type"]])
        d.obs[s.column] = np.where(rng.random(len(p)) < p, s.names[1], s.names[0])
        return d

    def null(self, d: VData, rng: np.random.Generator) -> VData:
        return op_null(d, rng)

    def write_version(self, d: VData, root: Path) -> list[str]:
        """Every file through the canonical writer; cells sorted by barcode so no position encodes an edit."""
        w = CanonicalWriter(root)
        order = sorted(range(len(d.barcodes)), key=lambda i: d.barcodes[i])
        counts = d.counts[order]
        barcodes = [d.barcodes[i] for i in order]
        obs = d.obs.iloc[order].reset_index(drop=True)
        w.mtx(f"{MTX_DIR}/matrix.mtx.gz", counts.T, integer=True)
        w.lines(f"{MTX_DIR}/barcodes.tsv.gz", barcodes)
        w.lines(f"{MTX_DIR}/features.tsv.gz", [f"{g}\t{g}\tGene Expression" for g in d.genes])
        cells = pd.DataFrame({"barcode": barcodes, **{c: obs[c].to_numpy() for c in obs.columns}})
        w.table("cells.csv", cells)
        w.json("meta.json", META)
        return sorted(w.written)

    def verify_extra(self, item, cls: str, root: Path, data, original: VData) -> list[str]:
        """cells.csv repeats no barcode; a deleted gene appears in no file at all; a null version keeps no original
        barcode."""
        _, _, cells = data
        problems = []
        if len(set(cells["barcode"])) != len(cells):
            problems.append("cells.csv repeats a barcode")
        if cls == "withdrawal" and item.withdrawal["op"] == "delete_gene":
            hits = files_mentioning(root, item.withdrawal["gene"])
            if hits:
                problems.append(f"{cls}: deleted gene {item.withdrawal['gene']} still appears in {', '.join(hits)}")
        if cls == "null":
            kept = set(original.barcodes) & set(cells["barcode"])
            if kept:
                problems.append(f"{cls}: {len(kept)} original barcodes survive (e.g. {sorted(kept)[0]})")
        return problems

    def anon_names(self) -> tuple[str, ...]:
        return tuple(_substrate().genes)

    def anonymise_data(self, d: VData, mapping: dict[str, str]) -> VData:
        out = copy.deepcopy(d)
        out.genes = [mapping[g] for g in d.genes]
        out.obs["cell_type"] = [anonymise_text(c, mapping) for c in d.obs["cell_type"]]
        return out
