"""Hand-written reference reports (worlds/<track>/reports/<world>.yaml) and the work products they name.

Each file holds a `correct` report and `wrong` ones (trap-following, defect-missing); the products a correct report
names are declared beside it, so the file stays readable: `products` (literal text), `products_golden` (built from
a golden key) and `products_world` (a BAM derived from one of the world's own files). Used by the world tests and by
the evaluator stress test of our graders (benchmark.grounding.metrics.grader_stress).
"""
from __future__ import annotations

from pathlib import Path


def report_path(ref) -> Path:
    """Where a world's hand-written reports live: in its track's folder, beside the manifests they test."""
    from benchmark.loader import WORLDS_ROOT

    return WORLDS_ROOT / ref.world.track / "reports" / f"{ref.id}.yaml"


def _bam_product(src: Path, out: Path, op: str) -> None:
    """A BAM work product made the way a careful analyst would: `sort_index` (samtools sort + index) or `dedup`
    (keep the first read of each contig, 5' position and strand)."""
    import pysam

    if op == "sort_index":
        pysam.sort("-o", str(out), str(src))
        pysam.index(str(out))
        return
    if op != "dedup":
        raise ValueError(f"unknown products_world op {op!r}; use sort_index or dedup")
    seen = set()
    with pysam.AlignmentFile(str(src), "rb") as fin, pysam.AlignmentFile(str(out), "wb", header=fin.header) as fout:
        for r in fin.fetch(until_eof=True):
            if r.is_unmapped:
                continue
            key = (r.reference_id, r.reference_end - 1 if r.is_reverse else r.reference_start, r.is_reverse)
            if key not in seen:
                seen.add(key)
                fout.write(r)


def write_products(spec: dict | None, golden: dict, dest: Path, world_dir: Path | None = None) -> Path:
    """Work products a hand-written report names: `products` gives literal file contents; `products_golden` builds
    a file from a golden key (a list: one item per line; a mapping: a CSV with the given `header`);
    `products_world` derives a BAM from one of the world's files ({from: public file, op: sort_index | dedup})."""
    dest.mkdir(parents=True, exist_ok=True)
    for name, src in ((spec or {}).get("products_world") or {}).items():
        _bam_product(Path(world_dir) / src["from"], dest / name, src["op"])
    for name, text in ((spec or {}).get("products") or {}).items():
        (dest / name).write_text(text)
    for name, src in ((spec or {}).get("products_golden") or {}).items():
        want = golden[src["golden"]]
        if isinstance(want, list):
            (dest / name).write_text("".join(f"{x}\n" for x in want))
        else:
            (dest / name).write_text(src["header"] + "\n" + "".join(f"{k},{v}\n" for k, v in want.items()))
    return dest
