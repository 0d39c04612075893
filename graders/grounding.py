"""Evidence grounding, gold side (seed 000 Sec. 4, SPEC R13): the pre-registered reference statistics, the answer
they support on a data version, the verification of every built version from the files on disk, and the oracle's
code cells.

The statistic code is ONE source text (`STAT_SOURCE`). The verifier exec's it here, and the scripted oracle sends the
very same text into the sandbox, so the oracle answers exactly what the reference statistic says on the files it
can see, and "insufficient data" where the statistic is undefined.

Statistic kinds (options are the item's option texts; x = log1p(CP10k) computed from the UMI counts in the file):
  marker        options genes; mean x in `population` minus mean x in all other cells; highest wins
  de            options genes; mean x in `group1` minus mean x in `group2`; highest wins
  localisation  options populations; mean x of `gene` in each population; highest wins
  abundance     options populations; number of cells; highest (direction max) or lowest (min) wins
  composition   options populations; share of all cells in `column`==`after` minus share in `column`==`before`
The answer is undefined (None) when a gene or group the statistic reads is absent, or when the best option leads
the runner-up by less than the item's `margin`.
"""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

STAT_SOURCE = r'''
import gzip, json, os
import numpy as np
import pandas as pd
import scipy.io, scipy.sparse

MTX_DIR = "filtered_feature_bc_matrix"


def load_10x(root="."):
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


def reference_statistic(spec, options, counts, genes, cells):
    """{"answer": letter or None, "values": {letter: value or None}, "reason": str} for one data version."""
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
    if missing:
        return {"answer": None, "values": values, "reason": "; ".join(missing)}
    order = sorted(values, key=lambda k: values[k], reverse=(direction == "max"))
    gap = abs(values[order[0]] - values[order[1]])
    if gap < margin:
        return {"answer": None, "values": values,
                "reason": f"options {order[0]} and {order[1]} differ by {gap:.4g} < margin {margin:g}"}
    return {"answer": order[0], "values": values, "reason": f"{order[0]} leads {order[1]} by {gap:.4g}"}


def oracle_report(res, options, insufficient_letter=None):
    """The report of an agent that answers exactly what the reference statistic supports."""
    vals = ", ".join(f"{k} ({options[k]}) = {'NA' if v is None else round(v, 4)}" for k, v in sorted(res["values"].items()))
    if res["answer"] is not None:
        return {"answer": res["answer"], "confidence": 90, "data_support": "supports",
                "evidence": f"computed from the data: {vals}; {res['reason']}"}
    known = {k: v for k, v in res["values"].items() if v is not None}
    forced = insufficient_letter or (max(known, key=known.get) if known else sorted(options)[0])
    return {"answer": forced, "confidence": 5, "data_support": "cannot determine",
            "evidence": f"the data cannot decide: {res['reason']}" + (f"; computed: {vals}" if vals else "")}
'''

_NS: dict[str, Any] = {}


def _ns() -> dict[str, Any]:
    if not _NS:
        exec(compile(STAT_SOURCE, "graders/grounding.py:STAT_SOURCE", "exec"), _NS)  # noqa: S102 - our own code
    return _NS


def load_version(root: Path):
    """(counts, genes, cells) read back from a version's files on disk."""
    return _ns()["load_10x"](str(root))


def statistic(spec: dict, options: dict[str, str], root: Path | None = None, data=None) -> dict:
    """The reference statistic on a version folder (or on already-loaded (counts, genes, cells))."""
    counts, genes, cells = data if data is not None else load_version(Path(root))
    return _ns()["reference_statistic"](spec, options, counts, genes, cells)


def oracle_cells(spec: dict, options: dict[str, str], insufficient_letter: str | None) -> list[str]:
    """One code cell: the reference statistic on the workspace's files; prints the report as its last line.
    Without data (the no-data condition) it reports that the data cannot decide."""
    code = (STAT_SOURCE
            + f"\nspec = json.loads({json.dumps(json.dumps(spec, sort_keys=True))})"
            + f"\noptions = json.loads({json.dumps(json.dumps(options, sort_keys=True))})"
            + "\ntry:\n    res = reference_statistic(spec, options, *load_10x('.'))"
            + "\nexcept Exception as exc:\n    res = {'answer': None, 'values': {}, 'reason': f'no readable data ({type(exc).__name__})'}"
            + f"\nprint(json.dumps(oracle_report(res, options, {insufficient_letter!r})))\n")
    return [code]


# ---------------------------------------------------------------- verification from disk

def expected_answer(cls: str, key: str, flip_answer: str) -> str | None:
    return {"original": key, "null": key, "withdrawal": None, "flip": flip_answer}[cls]


def _file_texts(root: Path) -> dict[str, str]:
    """Every file's text (gzip decompressed)."""
    out = {}
    for p in sorted(Path(root).rglob("*")):
        if p.is_file():
            raw = p.read_bytes()
            out[str(p.relative_to(root))] = (gzip.decompress(raw) if p.name.endswith(".gz") else raw).decode("utf-8", "replace")
    return out


def _gzip_header_problems(root: Path) -> list[str]:
    """Canonical gzip headers: FNAME = the file's own uncompressed name, MTIME = 0 (seed 000 App. D)."""
    probs = []
    for p in sorted(Path(root).rglob("*.gz")):
        raw = p.read_bytes()
        mtime = int.from_bytes(raw[4:8], "little")
        flags = raw[3]
        name = raw[10:raw.index(b"\0", 10)].decode() if flags & 0x08 else None
        if mtime != 0 or name != p.name[:-3]:
            probs.append(f"{p.relative_to(root)}: gzip header is not canonical (name {name!r}, mtime {mtime})")
    return probs


def verify_version(spec: dict, options: dict[str, str], cls: str, root: Path, expect: str | None,
                   deleted_gene: str | None = None, original_barcodes: set[str] | None = None) -> list[str]:
    """Problems with one built version (empty list: verified). Reads every file back from disk:
    the statistic recomputed on the raw UMI counts must give `expect` (None: undefined); the matrix, features,
    barcodes and cells.csv must agree; a deleted gene may appear in no file at all; a null version may keep no
    original barcode; gzip headers must be canonical."""
    root = Path(root)
    problems = _gzip_header_problems(root)
    try:
        counts, genes, cells = load_version(root)
    except Exception as exc:  # noqa: BLE001
        return problems + [f"files do not load together: {type(exc).__name__}: {exc}"]
    res = statistic(spec, options, data=(counts, genes, cells))
    if res["answer"] != expect:
        want = "undefined" if expect is None else expect
        got = "undefined" if res["answer"] is None else res["answer"]
        problems.append(f"{cls}: the reference statistic supports {got} ({res['reason']}), the class requires {want}")
    if len(set(cells["barcode"])) != len(cells):
        problems.append("cells.csv repeats a barcode")
    if deleted_gene is not None:
        texts = _file_texts(root)
        pat = re.compile(rf"(?<![\w.-]){re.escape(deleted_gene)}(?![\w.-])")
        hits = [f for f, t in texts.items() if pat.search(t)]
        if hits:
            problems.append(f"{cls}: deleted gene {deleted_gene} still appears in {', '.join(hits)}")
    if original_barcodes is not None:
        kept = original_barcodes & set(cells["barcode"])
        if kept:
            problems.append(f"{cls}: {len(kept)} original barcodes survive (e.g. {sorted(kept)[0]})")
    return problems


def key_match(answer: str | None, key: str) -> float:
    """The official score: exact match with the original key (1/0)."""
    return 1.0 if answer == key else 0.0
