"""Hand-written reference reports (worlds/<track>/reports/<world>.yaml) and the work products they name.

Each file holds a `correct` report and `wrong` ones (trap-following, defect-missing); the products a correct report
names are declared beside it, so the file stays readable: `products` (literal text), `products_golden` (built from
a golden key) and `products_world` (derived from one of the world's own files by a track's registered `@product_maker`). Used by the world tests and by
the evaluator stress test of our graders (benchmark.grounding.metrics.grader_stress). Suite data, read with the
suite loader and the registry's product makers, so it lives here and graders/ need not import the loader.
"""
from __future__ import annotations

from pathlib import Path


def report_path(ref) -> Path:
    """Where a world's hand-written reports live: in its track's folder, beside the manifests they test."""
    from benchmark.suite.loader import WORLDS_ROOT

    return WORLDS_ROOT / ref.world.track / "reports" / f"{ref.id}.yaml"


def _load_track_of(op: str) -> None:
    """Import the gold side of the track an op is named after ('histone.sort_index' -> histone's solver_module)."""
    from benchmark.suite.loader import load_suite
    from graders.registry import load_track_module

    tracks = load_suite().tracks
    track = op.split(".", 1)[0]
    if track in tracks:
        load_track_module(tracks[track].manifest.solver_module)


def write_products(spec: dict | None, golden: dict, dest: Path, world_dir: Path | None = None) -> Path:
    """Work products a hand-written report names: `products` gives literal file contents; `products_golden` builds
    a file from a golden key (a list: one item per line; a mapping: a CSV with the given `header`; several mappings as
    the columns of one CSV: {key: NAME, columns: {column: golden key}}, a key missing from one mapping left blank);
    `products_world` derives a file from one of the world's files ({from: public file, op: a registered
    `@product_maker`, e.g. histone.sort_index}: the track's own code, loaded with its solver module)."""
    from benchmark.suite.registry import PRODUCT_MAKERS

    dest.mkdir(parents=True, exist_ok=True)
    for name, src in ((spec or {}).get("products_world") or {}).items():
        if src["op"] not in PRODUCT_MAKERS:
            _load_track_of(src["op"])
        PRODUCT_MAKERS.get(src["op"]).fn(Path(world_dir) / src["from"], dest / name)
    for name, text in ((spec or {}).get("products") or {}).items():
        (dest / name).write_text(text)
    for name, src in ((spec or {}).get("products_golden") or {}).items():
        if "columns" in src:  # one table of several golden mappings: {key: SNP, columns: {beta: meta_beta, se: meta_se}}
            cols = {c: golden[g] for c, g in src["columns"].items()}
            keys = sorted({k for m in cols.values() for k in m})
            rows = [",".join([k] + [str(m.get(k, "")) for m in cols.values()]) for k in keys]
            (dest / name).write_text(",".join([src["key"], *cols]) + "\n" + "".join(f"{r}\n" for r in rows))
            continue
        want = golden[src["golden"]]
        if isinstance(want, list):
            (dest / name).write_text("".join(f"{x}\n" for x in want))
        else:
            (dest / name).write_text(src["header"] + "\n" + "".join(f"{k},{v}\n" for k, v in want.items()))
    return dest
