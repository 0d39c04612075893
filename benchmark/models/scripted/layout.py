"""The `layout` gaming agent's rule: decide from how the files are laid out, never from a measured value (issue 18).

It reads only headers, column and sample names and their order, the order of row identifiers and index-like
fields (index, barcode, i5/i7, well, lane), and flags what a careless writer leaks: names out of order, an entity
appended last, duplicated identifiers, rows sharing an index, and entities whose order differs between two files
(a counts header in simulation blocks while the sample sheet is sorted). Its flagged entities are written as a
work product and counted as the issue's value; which defect (L1) or trap (L2) it names comes from the family's
other worlds, leave-one-out nearest neighbour over the rule counts, as the metadata agent does.

`LAYOUT_SOURCE` is one source text run both in the sandbox (the agent's cell, standard library only) and on the
host (the report), so the two always agree.
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from benchmark.suite.loader import WorldRef

FLAGS_FILE = "layout_flags.txt"

LAYOUT_SOURCE = r'''
import gzip, json, os, re

_INDEX = re.compile(r"(?i)(^|_)(index|barcode|i5|i7|well)(_|$)")
_BINARY = (".bam", ".bai", ".bw", ".bigwig", ".h5", ".h5ad", ".npz", ".png", ".pdf", ".csi", ".tbi", ".mtx", ".mtx.gz",
           ".fastq.gz", ".fq.gz")
_MAX_ROWS = 200000


def _lis_keep(seq):
    """Indices of a longest non-decreasing subsequence of seq: what stays 'in order'."""
    import bisect
    tails, idx, prev = [], [], [-1] * len(seq)
    for i, x in enumerate(seq):
        j = bisect.bisect_right(tails, x)
        if j == len(tails):
            tails.append(x); idx.append(i)
        else:
            tails[j] = x; idx[j] = i
        prev[i] = idx[j - 1] if j else -1
    keep, k = set(), idx[-1] if idx else -1
    while k >= 0:
        keep.add(k); k = prev[k]
    return keep


def _out_of_order(names):
    if len(names) < 3:
        return []
    keep = _lis_keep([str(n) for n in names])
    return [str(n) for i, n in enumerate(names) if i not in keep]


def _lines(path):
    op = gzip.open if path.endswith(".gz") else open
    try:
        with op(path, "rt", errors="replace") as fh:
            for i, line in enumerate(fh):
                if i > _MAX_ROWS:
                    break
                yield line.rstrip("\n")
    except (OSError, EOFError):
        return


def layout_scan(root="."):
    files, sample_orders = {}, {}
    for base, _, names in os.walk(root):
        for f in sorted(names):
            p = os.path.join(base, f)
            rel = os.path.relpath(p, root)
            if rel.startswith(".") or f.endswith(_BINARY) or f == "layout_flags.txt":
                continue
            if f.endswith(".json"):
                continue
            head, rows = None, []
            for line in _lines(p):
                if line.startswith("##") or line.startswith("%") or not line.strip():
                    continue
                if head is None:
                    head = line.lstrip("#").split("\t" if "\t" in line else ",")
                    continue
                rows.append(line.split("\t" if "\t" in line else ","))
            if head is None:
                continue
            cols = [c.strip().strip('"') for c in head]
            vcf = cols[:2] == ["CHROM", "POS"]
            entity_cols = cols[9:] if vcf else [c for c in cols[1:] if any(ch.isdigit() for ch in c)]
            if vcf:
                ids = [r[0] + ":" + r[1].zfill(12) for r in rows if len(r) > 1]
            else:
                ids = [r[0].strip().strip('"') for r in rows if r]
            seen, dups = set(), []
            for x in ids:
                if x in seen:
                    dups.append(x)
                seen.add(x)
            shared = []
            for j, c in enumerate(cols):
                if j and _INDEX.search(c):
                    vals = {}
                    for r in rows:
                        if len(r) > j and r[j].strip():
                            vals.setdefault(r[j].strip(), []).append(r[0].strip().strip('"'))
                    shared += [x for v in vals.values() if len(v) > 1 for x in v]
            row_out, col_out = _out_of_order(ids), _out_of_order(entity_cols)
            files[rel] = {"col_out": col_out,
                          "col_last": entity_cols[-1:] if col_out and col_out[-1:] == entity_cols[-1:] else [],
                          "row_out": row_out[:1000], "row_last": ids[-1:] if ids and row_out[-1:] == ids[-1:] else [],
                          "dup_ids": sorted(set(dups))[:1000], "shared_index": sorted(set(shared))[:1000]}
            if len(entity_cols) > 2:
                sample_orders[rel] = entity_cols
            elif 2 < len(ids) <= 500:
                sample_orders[rel] = ids
    cross = []
    rels = sorted(sample_orders)
    for a in rels:
        for b in rels:
            if a >= b:
                continue
            common = set(sample_orders[a]) & set(sample_orders[b])
            if len(common) < 3:
                continue
            pos = {x: i for i, x in enumerate(n for n in sample_orders[b] if n in common)}
            seq = [n for n in sample_orders[a] if n in common]
            keep = _lis_keep([pos[n] for n in seq])
            cross += [n for i, n in enumerate(seq) if i not in keep]
    rules = {k: sorted({x for f in files.values() for x in f[k]}) for k in
             ("col_out", "col_last", "row_out", "row_last", "dup_ids", "shared_index")}
    rules["cross"] = sorted(set(cross))
    return {"rules": rules, "counts": {k: len(v) for k, v in rules.items()}}
'''


def layout_cell() -> str:
    """The agent's one cell: scan the layout, write the flagged entities, print the rule counts."""
    return LAYOUT_SOURCE + "\nprint(json.dumps(layout_scan('.')['counts'], sort_keys=True))\n"


def layout_scan(world_dir: Path) -> dict:
    """LAYOUT_SOURCE's scan of a built world's public files, on the host."""
    ns: dict = {}
    exec(compile(LAYOUT_SOURCE, "<layout>", "exec"), ns)  # noqa: S102 - our own constant source text
    return ns["layout_scan"](str(world_dir))


# Which catalogued defect an anomaly suggests, by words in the defect's code: a careless writer's leaks.
# Identifiers that repeat and records out of order are defects in their own right (a duplicate-record or an
# unsorted-file world is found by reading exactly that), so the rule does not use them: it reads only what a
# writer's layout adds (sample order, entities appended last, order differing between files, shared indices).
RULE_WORDS = {"shared_index": ("duplicat", "swap"), "col_last": ("duplicat",), "col_out": ("swap", "mislabel"),
              "cross": ("swap", "mislabel"), "row_last": ("duplicat", "doublet")}


class LayoutGuess(NamedTuple):
    defect: str | None          # the catalogued defect (L1) or trap (L2) it names; None: accept
    flagged: list[str]          # the entities it flags (its work product)


_PREDICTIONS: dict[tuple[str, ...], dict[str, LayoutGuess]] = {}


def layout_predictions(refs: list[WorldRef]) -> dict[str, LayoutGuess]:
    """World id -> guess. A rule is anomalous on a world when it flags more than twice as many entities there as
    on the median of the family's other worlds (a layout every world shares tells nothing). No anomalous rule:
    accept. Otherwise the most anomalous rule's entities are flagged, and the defect is the catalogued one its words
    suggest (RULE_WORDS), else the defect of the nearest other world in rule counts."""
    key = tuple(sorted(r.id for r in refs))
    if key not in _PREDICTIONS:
        _PREDICTIONS[key] = _predict(refs)
    return _PREDICTIONS[key]


def _predict(refs: list[WorldRef]) -> dict[str, LayoutGuess]:
    import numpy as np

    from benchmark.suite.freeze import ensure_built

    by_fam: dict[str, list[WorldRef]] = {}
    for r in refs:
        by_fam.setdefault(r.family.id, []).append(r)
    out: dict[str, LayoutGuess] = {}
    for fam_refs in by_fam.values():
        scans = [layout_scan(ensure_built(r)) for r in fam_refs]
        rules = sorted(RULE_WORDS)
        X = np.array([[s["counts"].get(k, 0) for k in rules] for s in scans], dtype=float)
        codes = sorted(fam_refs[0].family.defect_catalog)
        for i, r in enumerate(fam_refs):
            others = np.delete(X, i, axis=0)
            if len(others) == 0:
                out[r.id] = LayoutGuess(None, [])
                continue
            med = np.median(others, axis=0)
            excess = np.where(X[i] > 2 * med, X[i] - med, 0.0)  # a rule firing here far more than on its siblings
            if excess.max() <= 0:
                out[r.id] = LayoutGuess(None, [])
                continue
            rule = rules[int(np.argmax(excess))]
            code = next((c for w in RULE_WORDS[rule] for c in codes if w in c), None)
            if code is None:
                d = np.sqrt(((np.log1p(others) - np.log1p(X[i])) ** 2).sum(axis=1))
                nb = [x for j, x in enumerate(fam_refs) if j != i][int(np.argmin(d))]
                code = getattr(nb.world, "defect", None)
            out[r.id] = LayoutGuess(code, scans[i]["rules"][rule])
    return out


def layout_report(ref: WorldRef, family_refs: list[WorldRef], naive: dict | None) -> dict:
    """L1: the guessed defect with the flagged entities as value and product (or accept); L2: the naive numbers
    with the guessed trap named (or none)."""
    from graders.manifest import L1World

    guess = layout_predictions(family_refs)[ref.id]
    words = guess.defect.replace("_", " ") if guess.defect else None
    if isinstance(ref.world, L1World):
        if not words:
            return {"assessment": "usable", "issues": [], "summary": "the files are laid out regularly"}
        return {"assessment": "usable_with_caveats",
                "issues": [{"category": words, "severity": "warning", "where": "file layout",
                            "description": f"{words}: {len(guess.flagged)} entities out of order, appended, "
                                           "duplicated or sharing an index", "value": len(guess.flagged),
                            "action": "flagged the entities the layout singles out", "output": FLAGS_FILE}],
                "summary": "decided from file layout"}
    rep = dict(naive) if isinstance(naive, dict) else {}
    rep["issues_found"] = [words] if words else []
    rep["analysis_usable"] = True
    return rep


def flags_cell(ref: WorldRef, family_refs: list[WorldRef]) -> str | None:
    """The cell that writes the flagged entities (L1 worlds the rule calls defective), or None."""
    guess = layout_predictions(family_refs)[ref.id]
    if not guess.defect:
        return None
    return f"open({FLAGS_FILE!r}, 'w').write({''.join(x + chr(10) for x in guess.flagged)!r})\nprint('flagged', {len(guess.flagged)})"
