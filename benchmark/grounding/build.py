"""Build and verify every version of every grounding item (seed 000 Sec. 4.2, App. C, D).

The item's track's host (benchmark/grounding/host.py) supplies the data and the edits:
  original    host.base_data(item.dataset, the track's datasets)
  null        host.null(d, rng): entities permuted, identifiers replaced by opaque ones
  withdrawal  host.ops[item.withdrawal.op](d, rng, **params): the evidence for any answer removed
  flip        host.ops[item.flip.op](d, rng, **params): the evidence moved to `flip.answer`
with rng = default_rng([item.seed, the version's index]); each version is written by host.write_version (the
canonical writer). A version is accepted only when `graders.grounding.verify_version`, reading every file back from
disk with the host's `load`, finds the statistic behaving as its class requires (original/null: the key; withdrawal:
undefined; flip: the declared new answer) and the host's `verify_extra` finds nothing. Otherwise the build stops
with BuildRefused naming the item, the version and the reason.

Built data live in `.cache/grounding/<named|anon>/<item>/<version>/` with a `build.json` (fingerprint of the item,
its dataset and the code; file hashes); `ensure_built` rebuilds whatever is missing, stale or altered.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import shutil
from pathlib import Path

import numpy as np

from benchmark.suite.canonical import _atomic_write
from benchmark.errors import BenchmarkError
from benchmark.grounding.host import load_host
from benchmark.grounding.items import VERSIONS, Item, anon_map, anonymised, datasets_of
from benchmark.suite.loader import REPO_ROOT
from graders import grounding as gold

BUILD_VERSION = "1"
CACHE_ROOT = Path(os.environ.get("BENCHMARK_GROUNDING_CACHE", REPO_ROOT / ".cache" / "grounding"))


class BuildRefused(BenchmarkError):
    """A version whose recomputed statistic does not behave as its class requires; never shipped."""


def _datasets(item: Item) -> dict:
    return datasets_of(item.track)


def base_data(item: Item):
    """The item's original data, in its host's data model."""
    return item.host.base_data(item.dataset, _datasets(item))


def apply(item: Item, d, spec: dict, rng):
    params = {k: v for k, v in spec.items() if k not in ("op", "answer")}
    ops = item.host.ops
    if spec["op"] not in ops:
        raise BenchmarkError(f"unknown operation {spec['op']!r}; known: {', '.join(ops)}")
    return ops[spec["op"]](d, rng, **params)


def make_version(item: Item, cls: str):
    d = base_data(item)
    rng = np.random.default_rng([item.seed, VERSIONS.index(cls)])
    if cls == "null":
        return item.host.null(d, rng)
    if cls == "withdrawal":
        return apply(item, d, item.withdrawal, rng)
    if cls == "flip":
        return apply(item, d, item.flip, rng)
    return d


def verify(shown: Item, cls: str, root: Path, original) -> list[str]:
    """Problems with one built version read back from disk (empty: verified); `shown` is the item as the agent sees
    it, `original` the item's original version in memory."""
    host = shown.host
    expect = gold.expected_answer(cls, shown.key, shown.flip_answer)
    return gold.verify_version(host.stat_source, shown.statistic, shown.options, cls, root, expect,
                               extra=lambda data: host.verify_extra(shown, cls, root, data, original))


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@functools.lru_cache(maxsize=None)
def _code_hash(track: str) -> str:
    h = hashlib.sha256(BUILD_VERSION.encode())
    h.update(gold.COMMON_SOURCE.encode())
    h.update(Path(__file__).read_bytes())
    for cls in type(load_host(track)).__mro__:  # the host's module and the modules of the classes it builds on
        if cls.__module__ not in ("builtins", "abc"):
            h.update(Path(inspect.getfile(cls)).read_bytes())
    return h.hexdigest()[:16]


def fingerprint(item: Item) -> str:
    ds = _datasets(item)
    body = {"item": item.model_dump(), "dataset": ds[item.dataset].model_dump() if item.dataset in ds else None,
            "code": _code_hash(item.track)}
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
    return anonymised(item) if anon else item


def build_item(item: Item, anon: bool = False, cache_root: Path | None = None) -> dict:
    """Build, verify from disk and install all four versions of one item; BuildRefused on any failure."""
    host = item.host
    dest = item_dir(item.id, anon, cache_root)
    tmp = dest.with_name(f".{dest.name}.building")
    shutil.rmtree(tmp, ignore_errors=True)
    shown = agent_item(item, anon)
    mapping = anon_map(host) if anon else None
    record = {"item": item.id, "anonymised": anon, "fingerprint": fingerprint(item), "versions": {}}
    original = None
    try:
        for cls in VERSIONS:
            try:
                d = make_version(item, cls)
            except BenchmarkError as exc:
                raise BuildRefused(f"grounding item {item.id}, version {cls} refused: {exc}") from exc
            if mapping:
                d = host.anonymise_data(d, mapping)
            original = d if cls == "original" else original
            root = tmp / cls
            files = host.write_version(d, root)
            problems = verify(shown, cls, root, original)
            if problems:
                raise BuildRefused(f"grounding item {item.id}{' (anonymised)' if anon else ''}, version {cls} refused: "
                                   + "; ".join(problems))
            res = gold.statistic(host.stat_source, shown.statistic, shown.options, root)
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


def is_current(item: Item, anon: bool = False, cache_root: Path | None = None, check_files: bool = True) -> bool:
    rec = read_build(item, anon, cache_root)
    if not rec or rec.get("fingerprint") != fingerprint(item):
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
    (cache_root or CACHE_ROOT).joinpath("nodata").mkdir(parents=True, exist_ok=True)
    out = []
    for item in items:
        if on_step:
            on_step(item.id)
        if not is_current(item, anon, cache_root):
            build_item(item, anon, cache_root)
        out.append(read_build(item, anon, cache_root))
    return out
