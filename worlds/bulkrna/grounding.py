"""The bulk RNA-seq track's grounding host: items (worlds/bulkrna/grounding.yaml) on the real Marioni et al. 2008 counts.

Substrate: `package_file("noiseq", "Marioni.RData")` (Debian r-bioc-noiseq 2.42.0-1, NOISeq/data/Marioni.RData), read
by worlds.bulkrna.build.marioni_counts (the L3 dossiers' loader, rdata): the RNA-seq read counts of Marioni JC,
Mason CE, Mane SM, Stephens M, Gilad Y (2008) Genome Res 18:1509-1517, one human kidney and one human liver RNA
sample, each sequenced as technical-replicate lanes (10 lanes: run 1 kidney R1L1, R1L3, R1L7, liver R1L2, R1L4, R1L6,
R1L8; run 2 kidney R2L2, R2L6, liver R2L3), 5,088 Ensembl genes of chromosomes 1-4 with biotype, length and GC. The
real counts are used as they are. The data carry Ensembl gene IDs only (no symbols), so items name genes by ID.

Versions, each written through the canonical writer (counts.tsv, samples.tsv, genes.tsv, meta.json):
  null        gene rows and lane columns permuted (the sample sheet rows too); gene and lane IDs kept, as the answers
              are genes or lanes
  withdrawal  delete_gene (a gene's row removed from counts.tsv and genes.tsv: its ID is then in no file) |
              drop_lanes (lane columns removed from counts.tsv and their sample-sheet rows) | drop_tissue (every
              lane of a tissue removed)
  flip        swap_genes (two genes' count rows exchanged: an annotation mix-up) | exchange_lanes (paired lane
              columns' counts exchanged, for every gene or only a gene's: a lane label mix-up; with all kidney lanes
              paired to liver lanes it is a tissue label swap)

Statistic kinds (`STAT_SOURCE`). Every kind starts from the same reference analysis: counts per million of each lane
(count / lane total over the genes in counts.tsv x 1e6), log expression E = log2(CPM + 1), lanes grouped by the
`tissue` of samples.tsv.
  specificity   options genes; mean E over the `tissue` lanes minus mean E over the `versus` lanes; highest wins
  abundance     options genes; mean E over the `tissue` lanes; highest wins
  lane_match    options lanes; Pearson correlation over all genes of the option lane's E with the `reference`
                lane's E; highest wins (the lane from the same library as the reference)
  breadth       options ranges (`bins`: letter -> [lo, hi]); n = the number of genes with mean CPM >= `threshold`
                over the `tissue` lanes, minus the same over the `versus` lanes when given; an option scores minus
                the distance of n from its range (0 inside); highest wins
Undefined when a gene, a lane or a tissue the statistic reads is absent, or within the item's margin
(graders.grounding.decide).

No anonymisation: gene and lane IDs are the answers.
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

COUNTS, SAMPLES, GENES = "counts.tsv", "samples.tsv", "genes.tsv"


@dataclass
class Lanes:
    counts: pd.DataFrame   # index gene_id, one integer column per lane
    samples: pd.DataFrame  # lane, tissue, run (one row per column of counts, same order)
    genes: pd.DataFrame    # gene_id, chrom, biotype, length, gc (one row per row of counts, same order)


@functools.lru_cache(maxsize=1)
def _substrate() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    from worlds.bulkrna.build import BulkData, marioni_counts

    d = marioni_counts(BulkData(genes=pd.DataFrame(), samples=pd.DataFrame()), None)
    C, S, G = d.counts, d.samples, d.genes
    if C.shape != (5088, 10) or list(C.columns) != list(S["lane"]) or list(C.index) != list(G["gene_id"]) \
            or C.index.duplicated().any():
        raise BenchmarkError("Marioni.RData does not have the expected layout (5,088 unique genes x 10 lanes); "
                             "re-fetch it with `python -m benchmark data fetch`")
    C = C.copy()
    C.index.name = "gene_id"
    return C, S.reset_index(drop=True), G.reset_index(drop=True)


# ---------------------------------------------------------------- operations

def _gene(d: Lanes, gene: str) -> str:
    if gene not in d.counts.index:
        raise BenchmarkError(f"gene {gene} is not a row of the data")
    return gene


def _lane(d: Lanes, lane: str) -> str:
    if lane not in d.counts.columns:
        raise BenchmarkError(f"lane {lane} is not a column of the data (columns: {', '.join(d.counts.columns)})")
    return lane


def _keep_lanes(d: Lanes, keep: list[str]) -> Lanes:
    s = d.samples.set_index("lane").loc[keep].reset_index()
    return Lanes(d.counts[keep].copy(), s, d.genes.copy())


def op_null(d: Lanes, rng: np.random.Generator) -> Lanes:
    rows = rng.permutation(len(d.counts))
    cols = list(np.asarray(d.counts.columns)[rng.permutation(d.counts.shape[1])])
    out = _keep_lanes(Lanes(d.counts.iloc[rows], d.samples, d.genes.iloc[rows].reset_index(drop=True)), cols)
    return out


def op_delete_gene(d: Lanes, rng, gene: str) -> Lanes:
    _gene(d, gene)
    return Lanes(d.counts.drop(index=gene), d.samples.copy(),
                 d.genes[d.genes["gene_id"] != gene].reset_index(drop=True))


def op_drop_lanes(d: Lanes, rng, lanes: list[str]) -> Lanes:
    gone = {_lane(d, x) for x in lanes}
    return _keep_lanes(d, [c for c in d.counts.columns if c not in gone])


def op_drop_tissue(d: Lanes, rng, tissue: str) -> Lanes:
    gone = list(d.samples.loc[d.samples["tissue"] == tissue, "lane"])
    if not gone:
        raise BenchmarkError(f"no lane of tissue {tissue} in the data")
    return op_drop_lanes(d, rng, gone)


def op_swap_genes(d: Lanes, rng, a: str, b: str) -> Lanes:
    """Genes a and b exchange their count rows (in every lane)."""
    C = d.counts.copy()
    va, vb = C.loc[_gene(d, a)].to_numpy().copy(), C.loc[_gene(d, b)].to_numpy().copy()
    C.loc[a], C.loc[b] = vb, va
    return Lanes(C, d.samples.copy(), d.genes.copy())


def op_exchange_lanes(d: Lanes, rng, pairs: list[list[str]], gene: str | None = None) -> Lanes:
    """For each [x, y] in `pairs`, the counts of lanes x and y exchanged, for every gene or only `gene`'s."""
    C = d.counts.copy()
    rows = [_gene(d, gene)] if gene is not None else list(C.index)
    for x, y in pairs:
        x, y = _lane(d, x), _lane(d, y)
        vx, vy = d.counts.loc[rows, x].to_numpy().copy(), d.counts.loc[rows, y].to_numpy().copy()
        C.loc[rows, x], C.loc[rows, y] = vy, vx
    return Lanes(C, d.samples.copy(), d.genes.copy())


# ---------------------------------------------------------------- statistics (run on the host and in the sandbox)

STAT_SOURCE = r'''
import os
import numpy as np
import pandas as pd

COUNTS, SAMPLES = "counts.tsv", "samples.tsv"


def load(root="."):
    """{"counts": DataFrame (index gene_id, one raw-count column per lane), "samples": DataFrame (lane, tissue, run)}."""
    counts = pd.read_csv(os.path.join(root, COUNTS), sep="\t", dtype={"gene_id": str}).set_index("gene_id")
    samples = pd.read_csv(os.path.join(root, SAMPLES), sep="\t", dtype={"lane": str, "tissue": str})
    if counts.shape[1] < 1 or list(samples.columns[:2]) != ["lane", "tissue"]:
        raise ValueError(f"{COUNTS} needs gene_id and lane columns; {SAMPLES} needs lane, tissue")
    return {"counts": counts, "samples": samples}


def log_cpm(counts):
    """log2(CPM + 1) of every lane; CPM = count / lane total over the genes in the table x 1e6."""
    c = counts.to_numpy(np.float64)
    return pd.DataFrame(np.log2(c / c.sum(0, keepdims=True) * 1e6 + 1), index=counts.index, columns=counts.columns)


def tissue_lanes(data, tissue, missing):
    """The lanes of counts.tsv whose samples.tsv tissue is `tissue` (missing names the tissue when none)."""
    s = data["samples"]
    lanes = [x for x in s.loc[s["tissue"] == tissue, "lane"] if x in data["counts"].columns]
    if not lanes:
        missing.append(f"no {tissue} lane in {COUNTS}")
    return lanes


def reference_statistic(spec, options, data):
    """{"answer": letter or None, "values": {letter: value or None}, "reason": str} for one data version."""
    counts = data["counts"]
    kind, margin = spec["kind"], float(spec["margin"])
    direction = spec.get("direction", "max")
    values, missing = {}, []

    def gene_options():
        for gene in options.values():
            if gene not in counts.index:
                missing.append(f"gene {gene} is not a row of {COUNTS}")

    if kind in ("specificity", "abundance"):
        gene_options()
        E = log_cpm(counts)
        a = tissue_lanes(data, spec["tissue"], missing)
        b = tissue_lanes(data, spec["versus"], missing) if kind == "specificity" else None
        for letter, gene in options.items():
            if not a or (b is not None and not b) or gene not in counts.index:
                values[letter] = None
            else:
                v = E.loc[gene, a].mean()
                values[letter] = float(v - E.loc[gene, b].mean()) if b is not None else float(v)
    elif kind == "lane_match":
        ref = spec["reference"]
        for lane in [ref, *options.values()]:
            if lane not in counts.columns:
                missing.append(f"lane {lane} is not a column of {COUNTS}")
        E = log_cpm(counts)
        for letter, lane in options.items():
            ok = ref in counts.columns and lane in counts.columns
            values[letter] = float(np.corrcoef(E[lane], E[ref])[0, 1]) if ok else None
    elif kind == "breadth":
        thr = float(spec["threshold"])
        a = tissue_lanes(data, spec["tissue"], missing)
        b = tissue_lanes(data, spec["versus"], missing) if spec.get("versus") else None
        n = None
        if a and (b is None or b):
            c = counts.to_numpy(np.float64)
            cpm = pd.DataFrame(c / c.sum(0, keepdims=True) * 1e6, index=counts.index, columns=counts.columns)
            n = int((cpm[a].mean(1) >= thr).sum()) - (int((cpm[b].mean(1) >= thr).sum()) if b else 0)
        values.update(in_bins(spec, options, n))
    else:
        raise ValueError(f"unknown statistic kind {kind!r}")
    return decide(values, missing, margin, direction)
''' + BINS_SOURCE

META = {
    "assay": ("bulk RNA-seq (Illumina Genome Analyzer, 32-bp reads): read counts per gene of one human kidney and one "
              "human liver RNA sample, each library sequenced on several lanes (technical replicates) in two runs"),
    "files": {
        COUNTS: "read-count table (tab-separated): gene_id (Ensembl gene ID), then one column of raw read counts per "
                "sequencing lane",
        SAMPLES: "sample sheet (tab-separated): lane (the column name in counts.tsv), tissue (kidney or liver), run "
                 "(sequencing run, 1 or 2)",
        GENES: "gene annotation (tab-separated): gene_id, chrom, biotype (Ensembl), length (bp), gc (GC content, %)",
        "meta.json": "this description",
    },
    "values": "raw read counts per gene and lane (non-negative integers), not normalised",
    "genes": "Ensembl genes of chromosomes 1-4 only (a subset of the genome); no gene symbols",
}


# ---------------------------------------------------------------- the host

@grounding_host("bulkrna")
class BulkRnaHost(SubstrateHost):
    """The lanes of one kidney and one liver library (Marioni et al. 2008, chromosomes 1-4); withdrawal and flip
    operations act on genes or on lanes."""

    families = ("tissue_specificity", "abundance", "lane_identity", "detection_breadth")
    assay = "bulk RNA-seq read counts of kidney and liver lanes"
    files = ("counts.tsv (tab-separated: gene_id, an Ensembl gene ID, then raw read counts per sequencing lane, "
             "columns named by lane, e.g. R1L1), samples.tsv (lane, tissue, run), genes.tsv (gene_id, chrom, biotype, "
             "length, gc) and meta.json.")
    ops = {"delete_gene": op_delete_gene, "drop_lanes": op_drop_lanes, "drop_tissue": op_drop_tissue,
           "swap_genes": op_swap_genes, "exchange_lanes": op_exchange_lanes}
    stat_source = STAT_SOURCE

    def substrate(self) -> Lanes:
        C, S, G = _substrate()
        return Lanes(C.copy(), S.copy(), G.copy())

    def null(self, d: Lanes, rng: np.random.Generator) -> Lanes:
        return op_null(d, rng)

    def write_version(self, d: Lanes, root: Path) -> list[str]:
        """counts.tsv, samples.tsv and genes.tsv in the data's row and column order, and meta.json naming the lanes."""
        w = CanonicalWriter(root)
        C = d.counts.copy()
        for c in C.columns:
            C[c] = np.rint(C[c].to_numpy(np.float64)).astype(np.int64)
        w.table(COUNTS, C.reset_index(), sep="\t")
        w.table(SAMPLES, d.samples[["lane", "tissue", "run"]].reset_index(drop=True), sep="\t")
        w.table(GENES, d.genes[["gene_id", "chrom", "biotype", "length", "gc"]].reset_index(drop=True), sep="\t")
        meta = copy.deepcopy(META)
        meta["lanes"] = list(C.columns)
        meta["n_genes"] = int(len(C))
        w.json("meta.json", meta)
        return sorted(w.written)

    def verify_extra(self, item, cls: str, root: Path, data, original: Lanes) -> list[str]:
        """counts.tsv repeats no gene and holds integer counts; its columns are exactly the sample sheet's lanes; a
        deleted gene or a dropped lane appears in no file."""
        counts, samples = data["counts"], data["samples"]
        problems = []
        if counts.index.duplicated().any():
            problems.append(f"{COUNTS} repeats a gene ID")
        if not all(pd.api.types.is_integer_dtype(counts[c]) for c in counts.columns):
            problems.append(f"{COUNTS}: a lane column is not integer counts")
        if sorted(counts.columns) != sorted(samples["lane"]):
            problems.append(f"{COUNTS} columns and {SAMPLES} lanes differ")
        if cls == "withdrawal":
            w = item.withdrawal
            names = [w["gene"]] if w["op"] == "delete_gene" else list(w.get("lanes", []))
            for name in names:
                hits = files_mentioning(root, name)
                if hits:
                    problems.append(f"{cls}: removed {name} still appears in {', '.join(hits)}")
        return problems
