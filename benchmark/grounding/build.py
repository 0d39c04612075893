"""Build and verify every version of every grounding item (seed 000 Sec. 4.2, App. C, D).

Substrate: what the hosting track's grounding hook returns (track.yaml `grounding_module`, `@grounding_substrate`;
today the scRNA track: the real PBMC68k UMI counts, 700 cells x 765 genes, labels = the data set's `bulk_labels`). A dataset is either `pbmc` (all cells) or a
documented split (grounding.yaml `datasets`) adding a `sample` column.

Versions, each written through the canonical writer (10x matrix/barcodes/features + cells.csv + meta.json):
  original    the dataset as is
  null        cells and genes permuted, barcodes replaced by opaque ones (one donor: no donor ids to rename)
  withdrawal  delete_gene (from the one count matrix, the raw counts) | remove_group (cells of one sample) |
              remove_population (the contrast population) | equalise (down-sample every option population to
              the size of the smallest)
  flip        swap_genes (exchange two genes' counts in every cell) | move_expression (exchange a gene's values
              between two populations by seeded resampling) | downsample (keep a fraction of one population,
              optionally within one sample)
A version is accepted only when `graders.grounding.verify_version`, reading every file back from disk, finds
the statistic behaving as its class requires (original/null: the key; withdrawal: undefined; flip: the declared
new answer). Otherwise the build stops with BuildRefused naming the item, the version and the reason.

Built data live in `.cache/grounding/<named|anon>/<item>/<version>/` with a `build.json` (fingerprint of the item,
its dataset and this code; file hashes); `ensure_built` rebuilds whatever is missing, stale or altered.
"""
from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from benchmark.canonical import CanonicalWriter, _atomic_write
from benchmark.errors import BenchmarkError
from benchmark.grounding.items import VERSIONS, Item, Split, anonymise_text, anonymised, gene_map, load_items
from benchmark.loader import REPO_ROOT
from graders import grounding as gold

BUILD_VERSION = "1"
CACHE_ROOT = Path(os.environ.get("BENCHMARK_GROUNDING_CACHE", REPO_ROOT / ".cache" / "grounding"))
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


class BuildRefused(BenchmarkError):
    """A version whose recomputed statistic does not behave as its class requires; never shipped."""


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
    from benchmark.grounding.items import grounding_track
    from benchmark.registry import GROUNDING_SUBSTRATES, load_track_module

    track, module = grounding_track()
    load_track_module(module)
    counts, genes, barcodes, obs = GROUNDING_SUBSTRATES.get(track).fn()
    return VData(counts, list(genes), list(barcodes), obs[["cell_type"]].copy())


def substrate_genes() -> tuple[str, ...]:
    return tuple(_substrate().genes)


def base_data(dataset: str, splits: dict[str, Split]) -> VData:
    d = copy.deepcopy(_substrate())
    if dataset == "pbmc":
        return d
    s = splits[dataset]
    rng = np.random.default_rng(s.seed)
    p = np.array([s.p_after.get(ct, s.p_after["default"]) for ct in d.obs["cell_type"]])
    d.obs[s.column] = np.where(rng.random(len(p)) < p, s.names[1], s.names[0])
    return d


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


def apply(d: VData, spec: dict, rng) -> VData:
    params = {k: v for k, v in spec.items() if k not in ("op", "answer")}
    if spec["op"] not in OPS:
        raise BenchmarkError(f"unknown operation {spec['op']!r}; known: {', '.join(OPS)}")
    return OPS[spec["op"]](d, rng, **params)


def make_version(item: Item, cls: str, splits: dict[str, Split]) -> VData:
    d = base_data(item.dataset, splits)
    rng = np.random.default_rng([item.seed, VERSIONS.index(cls)])
    if cls == "null":
        return op_null(d, rng)
    if cls == "withdrawal":
        return apply(d, item.withdrawal, rng)
    if cls == "flip":
        return apply(d, item.flip, rng)
    return d


def anonymise_data(d: VData, mapping: dict[str, str]) -> VData:
    out = copy.deepcopy(d)
    out.genes = [mapping[g] for g in d.genes]
    out.obs["cell_type"] = [anonymise_text(c, mapping) for c in d.obs["cell_type"]]
    return out


# ---------------------------------------------------------------- writing

def write_version(d: VData, root: Path) -> list[str]:
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


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@functools.lru_cache(maxsize=1)
def _code_hash() -> str:
    h = hashlib.sha256(BUILD_VERSION.encode())
    h.update(gold.STAT_SOURCE.encode())
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()[:16]


def fingerprint(item: Item, splits: dict[str, Split]) -> str:
    body = {"item": item.model_dump(), "dataset": splits[item.dataset].model_dump() if item.dataset in splits else None,
            "code": _code_hash()}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def variant(anon: bool) -> str:
    return "anon" if anon else "named"


def item_dir(item_id: str, anon: bool = False, cache_root: Path | None = None) -> Path:
    return (cache_root or CACHE_ROOT) / variant(anon) / item_id


def version_dir(item_id: str, cls: str, anon: bool = False, cache_root: Path | None = None) -> Path:
    if cls == "nodata":
        return (cache_root or CACHE_ROOT) / "nodata"
    return item_dir(item_id, anon, cache_root) / cls


def agent_item(item: Item, anon: bool) -> Item:
    """The item as the agent sees it (anonymised text when asked)."""
    return anonymised(item, substrate_genes()) if anon else item


def build_item(item: Item, anon: bool = False, splits: dict[str, Split] | None = None,
               cache_root: Path | None = None) -> dict:
    """Build, verify from disk and install all four versions of one item; BuildRefused on any failure."""
    splits = load_items().datasets if splits is None else splits
    dest = item_dir(item.id, anon, cache_root)
    tmp = dest.with_name(f".{dest.name}.building")
    shutil.rmtree(tmp, ignore_errors=True)
    shown = agent_item(item, anon)
    mapping = gene_map(substrate_genes()) if anon else None
    record = {"item": item.id, "anonymised": anon, "fingerprint": fingerprint(item, splits), "versions": {}}
    original_barcodes = set(base_data(item.dataset, splits).barcodes)
    try:
        for cls in VERSIONS:
            try:
                d = make_version(item, cls, splits)
            except BenchmarkError as exc:
                raise BuildRefused(f"grounding item {item.id}, version {cls} refused: {exc}") from exc
            if mapping:
                d = anonymise_data(d, mapping)
            root = tmp / cls
            files = write_version(d, root)
            deleted = shown.withdrawal.get("gene") if cls == "withdrawal" and shown.withdrawal["op"] == "delete_gene" else None
            expect = gold.expected_answer(cls, shown.key, shown.flip_answer)
            problems = gold.verify_version(shown.statistic, shown.options, cls, root, expect, deleted_gene=deleted,
                                           original_barcodes=original_barcodes if cls == "null" else None)
            if problems:
                raise BuildRefused(f"grounding item {item.id}{' (anonymised)' if anon else ''}, version {cls} refused: "
                                   + "; ".join(problems))
            res = gold.statistic(shown.statistic, shown.options, root)
            record["versions"][cls] = {"supported": res["answer"], "reason": res["reason"],
                                       "values": {k: (None if v is None else round(v, 6)) for k, v in res["values"].items()},
                                       "files": {f: _sha(root / f) for f in files}}
        _atomic_write(tmp / "build.json", (json.dumps(record, indent=1, sort_keys=True) + "\n").encode())
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return record


def read_build(item: Item, anon: bool = False, cache_root: Path | None = None) -> dict | None:
    p = item_dir(item.id, anon, cache_root) / "build.json"
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def is_current(item: Item, anon: bool = False, splits: dict[str, Split] | None = None,
               cache_root: Path | None = None, check_files: bool = True) -> bool:
    splits = load_items().datasets if splits is None else splits
    rec = read_build(item, anon, cache_root)
    if not rec or rec.get("fingerprint") != fingerprint(item, splits):
        return False
    if check_files:
        base = item_dir(item.id, anon, cache_root)
        for cls, v in rec["versions"].items():
            for f, sha in v["files"].items():
                p = base / cls / f
                if not p.exists() or _sha(p) != sha:
                    return False
    return True


def ensure_built(items: list[Item], anon: bool = False, cache_root: Path | None = None, on_step=None) -> list[dict]:
    splits = load_items().datasets
    (cache_root or CACHE_ROOT).joinpath("nodata").mkdir(parents=True, exist_ok=True)
    out = []
    for item in items:
        if on_step:
            on_step(item.id)
        if not is_current(item, anon, splits, cache_root):
            build_item(item, anon, splits, cache_root)
        out.append(read_build(item, anon, cache_root))
    return out
