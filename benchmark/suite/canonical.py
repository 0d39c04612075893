"""The one canonical writer every public world file goes through (seed 000 App. D).

Why: agents read metadata. A gzip header carrying the source file name or a timestamp, an h5ad carrying
precomputed statistics, or a BAM header carrying the command that edited it would leak the edit. This writer
produces byte-identical files from identical content: gzip with the file's own name and mtime 0, CSV with
fixed float formatting and line endings, JSON with sorted keys, BAM without @PG lines, sorted and indexed.
"""
from __future__ import annotations

import gzip
import io
import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

if TYPE_CHECKING:
    import pandas as pd  # imported where a table is written: a `run` that only verifies locks never needs it

GZIP_LEVEL = 6


def canonical_gzip(data: bytes, name: str) -> bytes:
    """gzip bytes whose header holds only the file's own (uncompressed) name and a zero timestamp."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename=name, mode="wb", fileobj=buf, mtime=0, compresslevel=GZIP_LEVEL) as gz:
        gz.write(data)
    return buf.getvalue()


def _atomic_write(path: Path, data: bytes) -> None:
    """Write `path` whole or not at all. The temporary name is this process's and thread's own: two freezes of one
    world at once (two terminals, `freeze_worlds` given a world twice) each rename a file of their own, and the last
    rename wins with bytes that are identical anyway (a shared `.name.tmp` let one rename the other's file away)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


class CanonicalWriter:
    """Writes a world's public files under `root`, remembering each relative path it wrote."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.written: list[str] = []
        self.truth_values: dict[str, Any] = {}

    def truth(self, **values: Any) -> None:
        """Record the world's generative truth (gold side, never a public file): the freeze puts it in the golden
        under `truth`, so a rubric can score per-entity products against what was simulated or injected."""
        self.truth_values.update(values)

    def path(self, rel: str) -> Path:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def _record(self, rel: str) -> None:
        if rel not in self.written:
            self.written.append(rel)

    # -- bytes and text
    def bytes(self, rel: str, data: bytes) -> Path:
        if rel.endswith(".gz"):
            data = canonical_gzip(data, Path(rel).name[:-3])
        _atomic_write(self.root / rel, data)
        self._record(rel)
        return self.root / rel

    def text(self, rel: str, text: str) -> Path:
        if not text.endswith("\n"):
            text += "\n"
        return self.bytes(rel, text.encode("utf-8"))

    def json(self, rel: str, obj: Any) -> Path:
        return self.text(rel, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, default=_json_default))

    def files(self, mapping: dict[str, "pd.DataFrame | str"]) -> None:
        """A set of named files in name order (an L3 dossier): tables through `table`, text through `text`."""
        for rel, obj in sorted(mapping.items()):
            if not isinstance(obj, str):
                self.table(rel, obj)
            else:
                self.text(rel, obj)

    def table(self, rel: str, df: pd.DataFrame, sep: str | None = None, header: bool = True, float_format: str = "%.6g") -> Path:
        """CSV/TSV (optionally .gz): no index, '\\n' line ends, fixed float format."""
        if sep is None:
            sep = "\t" if rel.removesuffix(".gz").endswith((".tsv", ".txt", ".bed")) else ","
        out = df.to_csv(sep=sep, index=False, header=header, lineterminator="\n", float_format=float_format)
        return self.bytes(rel, out.encode("utf-8"))

    def lines(self, rel: str, rows: Iterable[str]) -> Path:
        return self.text(rel, "\n".join(rows))

    # -- sparse matrices (10x Matrix Market layout)
    def mtx(self, rel: str, matrix, integer: bool = True) -> Path:
        """Matrix Market coordinate file, features x barcodes as 10x writes it; values as integers when counts."""
        import scipy.sparse as sp

        m = sp.coo_matrix(matrix)
        order = np.lexsort((m.row, m.col))
        rows, cols, vals = m.row[order] + 1, m.col[order] + 1, m.data[order]
        kind = "integer" if integer else "real"
        head = f"%%MatrixMarket matrix coordinate {kind} general\n{m.shape[0]} {m.shape[1]} {m.nnz}\n"
        fmt = (lambda v: str(int(v))) if integer else (lambda v: f"{v:.6g}")
        body = "".join(f"{r} {c} {fmt(v)}\n" for r, c, v in zip(rows, cols, vals))
        return self.bytes(rel, (head + body).encode("ascii"))

    # -- alignments
    def bam(self, rel: str, header: dict, reads: Iterable[tuple], index: bool = True) -> Path:
        """Coordinate-sorted BAM (and .bai) from (qname, ref_id, pos, is_reverse, mapq, flag_extra, read_len) tuples.

        The header gets no @PG line, so neither tool nor command line leaks. Reads must already be sorted.
        """
        import pysam

        p = self.path(rel)
        tmp = p.with_name(f".{p.name}.tmp")
        hdr = {k: v for k, v in header.items() if k != "PG"}
        hdr.setdefault("HD", {"VN": "1.6", "SO": "coordinate"})
        with pysam.AlignmentFile(str(tmp), "wb", header=hdr) as out:
            for qname, ref_id, pos, is_reverse, mapq, flag_extra, rlen in reads:
                a = pysam.AlignedSegment(out.header)
                a.query_name = qname
                a.reference_id = ref_id
                a.reference_start = int(pos)
                a.flag = (16 if is_reverse else 0) | int(flag_extra)
                a.mapping_quality = int(mapq)
                a.cigarstring = f"{rlen}M"
                a.query_sequence = "N" * rlen
                a.query_qualities = pysam.qualitystring_to_array("I" * rlen)
                out.write(a)
        os.replace(tmp, p)
        self._record(rel)
        if index:
            pysam.index(str(p))
            self._record(rel + ".bai")
        return p


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"cannot serialise {type(o).__name__} canonically")
