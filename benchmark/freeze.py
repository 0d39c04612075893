"""Freeze: substrate + recipe + seed -> canonical public files -> reference solver -> golden -> lock.

Built data is bulky, so it lives in a cache folder (`.cache/worlds/<id>/`, rebuilt on demand); goldens and
locks are small and committed beside each manifest. `check` rebuilds into a temporary folder and compares
every hash with the lock, naming the world and file on any difference.
"""
from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import shutil
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.canonical import CanonicalWriter, _atomic_write
from benchmark.errors import BenchmarkError, LockMismatch
from benchmark.loader import REPO_ROOT, WorldRef
from benchmark.manifest import Golden, Lock
from benchmark.registry import RECIPES, SOLVERS, SUBSTRATES, WRITERS, load_track_module

CACHE_ROOT = Path(os.environ.get("BENCHMARK_CACHE", REPO_ROOT / ".cache" / "worlds"))
VERSIONED_TOOLS = ("numpy", "pandas", "scipy", "pysam", "macs3", "scanpy", "anndata", "pydeseq2")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tool_versions() -> dict[str, str]:
    out = {}
    for name in VERSIONED_TOOLS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


@functools.lru_cache(maxsize=8)
def _substrate_cached(name: str, seed: int, params_json: str) -> Any:
    return SUBSTRATES.get(name).fn(seed=seed, **json.loads(params_json))


def build_substrate(ref: WorldRef) -> Any:
    """The track's substrate (cached per process), deep-copied so recipes never touch the shared copy."""
    load_track_module(ref.track.module)
    s = ref.track.substrate
    return copy.deepcopy(_substrate_cached(s.name, s.seed, json.dumps(s.params, sort_keys=True)))


def build_files(ref: WorldRef, out_dir: Path) -> list[str]:
    """Apply the recipe to the substrate and write the public files; return the relative paths written."""
    w = ref.world
    data = build_substrate(ref)
    rng = np.random.default_rng(w.seed)
    for step in w.recipe:
        try:
            data = RECIPES.get(f"{w.track}.{step.name}").fn(data, rng, **step.params)
        except TypeError as exc:
            raise BenchmarkError(f"{ref.path}: recipe '{step.name}' rejected its params ({exc}); fix recipe.params") from exc
    if out_dir.exists():
        shutil.rmtree(out_dir)
    cw = CanonicalWriter(out_dir)
    WRITERS.get(w.track).fn(data, cw)
    written = sorted(str(p.relative_to(out_dir)) for p in out_dir.rglob("*") if p.is_file())
    declared = sorted(w.public_files)
    if written != declared:
        extra, missing = sorted(set(written) - set(declared)), sorted(set(declared) - set(written))
        raise BenchmarkError(
            f"{ref.path}: field 'public_files' does not match what the recipe wrote "
            f"(not declared: {extra or 'none'}; declared but not written: {missing or 'none'}); update public_files"
        )
    return written


def solve(ref: WorldRef, world_dir: Path) -> Golden:
    load_track_module(ref.track.solver_module)
    entry = SOLVERS.get(ref.family.solver)
    values = entry.fn(world_dir, ref.world)
    values = json.loads(json.dumps(values, sort_keys=True, default=_jsonable))
    return Golden(world_id=ref.id, solver=entry.name, solver_version=entry.version, values=values)


def _jsonable(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return round(float(o), 10)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.bool_):
        return bool(o)
    raise TypeError(f"solver returned a {type(o).__name__}, which is not JSON-serialisable")


def golden_bytes(g: Golden) -> bytes:
    return (json.dumps(g.model_dump(), indent=2, sort_keys=True) + "\n").encode()


def make_lock(ref: WorldRef, world_dir: Path, files: list[str], g: Golden) -> Lock:
    return Lock(
        world_id=ref.id,
        manifest_sha256=sha256_file(ref.path),
        files={f: sha256_file(world_dir / f) for f in files},
        golden_sha256=sha256_bytes(golden_bytes(g)),
        solver=g.solver,
        solver_version=g.solver_version,
        tool_versions=tool_versions(),
    )


def lock_bytes(lock: Lock) -> bytes:
    return (json.dumps(lock.model_dump(), indent=2, sort_keys=True) + "\n").encode()


def freeze_world(ref: WorldRef, cache_root: Path = CACHE_ROOT) -> Lock:
    """Build into the cache, solve, and write golden + lock beside the manifest (atomically)."""
    out = cache_root / ref.id
    tmp = cache_root / f".{ref.id}.building"
    files = build_files(ref, tmp)
    g = solve(ref, tmp)
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    lock = make_lock(ref, out, files, g)
    _atomic_write(ref.golden_path, golden_bytes(g))
    _atomic_write(ref.lock_path, lock_bytes(lock))
    return lock


def read_lock(ref: WorldRef) -> Lock:
    if not ref.lock_path.exists():
        raise LockMismatch(f"world '{ref.id}' has no lock ({ref.lock_path.name}); run `python -m benchmark worlds freeze {ref.id}`")
    return Lock.model_validate_json(ref.lock_path.read_text())


def read_golden(ref: WorldRef) -> Golden:
    if not ref.golden_path.exists():
        raise LockMismatch(f"world '{ref.id}' has no golden ({ref.golden_path.name}); run `python -m benchmark worlds freeze {ref.id}`")
    return Golden.model_validate_json(ref.golden_path.read_text())


def compare(ref: WorldRef, lock: Lock, world_dir: Path, golden: Golden | None = None) -> list[str]:
    """Every difference between a built world and its lock, each naming world and file."""
    problems = []
    if sha256_file(ref.path) != lock.manifest_sha256:
        problems.append(f"{ref.id}: manifest {ref.path.name} changed since it was frozen; re-freeze it")
    present = sorted(str(p.relative_to(world_dir)) for p in world_dir.rglob("*") if p.is_file()) if world_dir.exists() else []
    for f in sorted(set(lock.files) | set(present)):
        if f not in lock.files:
            problems.append(f"{ref.id}: file {f} is not in the lock")
        elif f not in present:
            problems.append(f"{ref.id}: file {f} is missing")
        elif sha256_file(world_dir / f) != lock.files[f]:
            problems.append(f"{ref.id}: file {f} differs from its lock (sha256)")
    if golden is not None and sha256_bytes(golden_bytes(golden)) != lock.golden_sha256:
        problems.append(f"{ref.id}: golden differs from its lock (the solver's answer changed)")
    stored = read_golden(ref) if ref.golden_path.exists() else None
    if stored is not None and sha256_bytes(golden_bytes(stored)) != lock.golden_sha256:
        problems.append(f"{ref.id}: committed golden {ref.golden_path.name} does not match its lock")
    return problems


def check_world(ref: WorldRef, scratch: Path) -> list[str]:
    """Rebuild from scratch in `scratch` and compare with the committed lock."""
    lock = read_lock(ref)
    d = scratch / ref.id
    build_files(ref, d)
    g = solve(ref, d)
    problems = compare(ref, lock, d, g)
    if problems and lock.tool_versions != tool_versions():
        diff = {k: (lock.tool_versions.get(k), v) for k, v in tool_versions().items() if lock.tool_versions.get(k) != v}
        problems.append(f"{ref.id}: note: tool versions differ from the lock's: {diff}")
    return problems


def ensure_built(ref: WorldRef, cache_root: Path = CACHE_ROOT) -> Path:
    """The world's verified public files: rebuilt into the cache when absent, refused when they differ from the lock."""
    lock = read_lock(ref)
    d = cache_root / ref.id
    if not d.exists():
        tmp = cache_root / f".{ref.id}.building"
        build_files(ref, tmp)
        if d.exists():
            shutil.rmtree(d)
        os.replace(tmp, d)
    problems = compare(ref, lock, d)
    if problems:
        raise LockMismatch("; ".join(problems[:3]) + ("" if len(problems) <= 3 else f" (+{len(problems) - 3} more)"))
    return d


def scratch_dir() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="benchmark-check-")

