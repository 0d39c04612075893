"""Freeze: substrate + recipe + seed -> canonical public files -> reference solver -> golden -> lock.

Built data is bulky, so it lives in a cache folder (`.cache/worlds/<id>/`, rebuilt on demand); goldens and
locks are small and committed beside each manifest. `check` rebuilds into a temporary folder and compares
every hash with the lock, naming the world and file on any difference.

Goldens must be the same on any x86-64 machine, so reference solvers run with pinned numerics (`graders.numerics.PINNED_ENV`): one
thread, OpenBLAS's generic Prescott kernel and numpy's baseline SIMD, in a spawned process whose environment is
set before numpy loads (a kernel cannot be changed once loaded). A re-solved golden is compared with the committed
one exactly for every discrete value (strings, booleans, integers, lists, keys) and within `GOLDEN_REL_TOL` /
`GOLDEN_ABS_TOL` for floats, a tenth of the tightest tolerance a rubric applies, so a libm that rounds the last
bit differently cannot fail a world while a changed answer always does.
"""
from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import secrets
import shutil
import tempfile
import threading
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.suite.canonical import CanonicalWriter, _atomic_write
from benchmark.errors import BenchmarkError, LockMismatch
from benchmark.suite.loader import REPO_ROOT, WorldRef
from graders.manifest import Golden, Lock, rubric_checks
from benchmark.suite.registry import RECIPES, SOLVERS, SUBSTRATES, WRITERS
from graders.registry import RegistryError, load_track_module
from graders.numerics import numerics_pinned, pinned_environment

CACHE_ROOT = Path(os.environ.get("BENCHMARK_CACHE", REPO_ROOT / ".cache" / "worlds"))
VERSIONED_TOOLS = ("numpy", "pandas", "scipy", "pysam", "macs3", "scanpy", "anndata", "pydeseq2")

GOLDEN_REL_TOL = 1e-3
GOLDEN_ABS_TOL = 1e-3


def sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


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
    return copy.deepcopy(_substrate_cached(s.name, ref.substrate_seed, json.dumps(s.params, sort_keys=True)))


DRAW_KINDS = ("integer", "uniform", "choice", "sample")


def _draw(spec: dict, rng: np.random.Generator, where: str) -> Any:
    """One drawn recipe parameter (graders/README.md section 1); errors name the manifest field and the fix."""
    kind = spec.get("draw")
    if kind not in DRAW_KINDS:
        raise BenchmarkError(f"{where}: unknown draw {kind!r}; use draw: {' | '.join(DRAW_KINDS)}")
    extra = sorted(set(spec) - {"draw", "low", "high", "digits", "from", "k"})
    if extra:
        raise BenchmarkError(f"{where}: a draw takes only low/high/digits/from/k, not {', '.join(extra)}; remove them")
    try:
        if kind == "integer":
            lo, hi = int(spec["low"]), int(spec["high"])
            if lo > hi:
                raise ValueError("low > high")
            return int(rng.integers(lo, hi + 1))
        if kind == "uniform":
            lo, hi = float(spec["low"]), float(spec["high"])
            if lo > hi:
                raise ValueError("low > high")
            x = float(rng.uniform(lo, hi))
            return round(x, int(spec["digits"])) if "digits" in spec else x
        pool = list(spec["from"])
        if not pool:
            raise ValueError("'from' is empty")
        if kind == "choice":
            return pool[int(rng.integers(len(pool)))]
        k = int(spec["k"])
        if not 0 < k <= len(pool):
            raise ValueError(f"k={k} is not between 1 and {len(pool)}")
        return [pool[int(i)] for i in rng.choice(len(pool), size=k, replace=False)]
    except (KeyError, TypeError, ValueError) as exc:
        missing = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise BenchmarkError(f"{where}: bad {kind} draw ({missing}); give low and high (integer, uniform) "
                             "or from (and k for sample)") from None


def resolve_params(params: dict[str, Any], rng: np.random.Generator, path: str, field: str = "params") -> dict[str, Any]:
    """Replace every `{draw: ...}` value (at any depth) by a value drawn from the world's RNG, in key order."""
    def walk(v: Any, at: str) -> Any:
        if isinstance(v, dict) and "draw" in v:
            return _draw(v, rng, f"{path}: field '{at}'")
        if isinstance(v, dict):
            return {k: walk(v[k], f"{at}.{k}") for k in sorted(v)}
        if isinstance(v, list):
            return [walk(x, f"{at}.{i}") for i, x in enumerate(v)]
        return v

    return {k: walk(params[k], f"{field}.{k}") for k in sorted(params)}


def build_files(ref: WorldRef, out_dir: Path, truth: dict[str, Any] | None = None) -> list[str]:
    """Apply the recipe to the substrate and write the public files; return the relative paths written. The
    generative truth the writer records (`CanonicalWriter.truth`) goes into `truth` when given, never to a file."""
    w = ref.world
    data = build_substrate(ref)
    rng = np.random.default_rng(ref.world_seed)
    for i, step in enumerate(w.recipe):
        params = resolve_params(step.params, rng, str(ref.path), f"recipe.{i}.params")
        try:
            data = RECIPES.get(f"{w.track}.{step.name}").fn(data, rng, **params)
        except TypeError as exc:
            raise BenchmarkError(f"{ref.path}: recipe '{step.name}' rejected its params ({exc}); fix recipe.params") from exc
        except (ValueError, IndexError, KeyError, ZeroDivisionError) as exc:  # a draw the recipe cannot honour
            raise BenchmarkError(f"{ref.path}: recipe '{step.name}' failed for world seed {ref.world_seed} "
                                 f"({type(exc).__name__}: {exc}); make the recipe hold for every draw of its ranges "
                                 "(a private campaign draws others)") from exc
    if out_dir.exists():
        shutil.rmtree(out_dir)
    cw = CanonicalWriter(out_dir)
    WRITERS.get(w.track).fn(data, cw)
    if truth is not None:
        truth.update(json.loads(json.dumps(cw.truth_values, sort_keys=True, default=_jsonable)))
    written = sorted(str(p.relative_to(out_dir)) for p in out_dir.rglob("*") if p.is_file())
    declared = sorted(w.public_files)
    if written != declared:
        extra, missing = sorted(set(written) - set(declared)), sorted(set(declared) - set(written))
        raise BenchmarkError(
            f"{ref.path}: field 'public_files' does not match what the recipe wrote "
            f"(not declared: {extra or 'none'}; declared but not written: {missing or 'none'}); update public_files"
        )
    return written


def pinned_pool(jobs: int):
    """A pool of `jobs` spawned processes with pinned numerics (started at once, inside the pinned environment)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with pinned_environment():
        ex = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))
        for f in [ex.submit(os.getpid) for _ in range(jobs)]:
            f.result()
    return ex


_SOLVER_POOL = None
_SOLVER_POOL_LOCK = threading.Lock()  # harness threads that solve at once share one pool, not one each


def solve(ref: WorldRef, world_dir: Path, truth: dict[str, Any] | None = None) -> Golden:
    """The reference solver's golden, computed with pinned numerics (in a helper process when this one is not
    pinned); the writer's generative truth, when there is one, is kept under the golden's `truth` key."""
    global _SOLVER_POOL
    if not numerics_pinned():
        with _SOLVER_POOL_LOCK:
            if _SOLVER_POOL is None:
                _SOLVER_POOL = pinned_pool(1)
        return _SOLVER_POOL.submit(solve, ref, Path(world_dir), truth).result()
    load_track_module(ref.track.solver_module)
    entry = SOLVERS.get(ref.family.solver)
    values = entry.fn(world_dir, ref.world)
    values = json.loads(json.dumps(values, sort_keys=True, default=_jsonable))
    if truth:
        if "truth" in values:
            raise BenchmarkError(f"solver {entry.name} returns a 'truth' key; that key holds the writer's generative "
                                 "truth (CanonicalWriter.truth): rename the solver's key")
        values["truth"] = truth
    return Golden(world_id=ref.id, solver=entry.name, solver_version=entry.version, values=values)


SPEARMAN_VALUE_TOL = 0.01  # a key only ranked (Spearman >= 0.9) may move this much: far inside the rank margin


def golden_tolerances(ref: WorldRef) -> dict[str, tuple[float, float]]:
    """Golden key (dotted) -> (rel, abs) float tolerance for the check against the committed golden: a tenth of
    the tolerance of the tightest rubric check that reads the key (SPEARMAN_VALUE_TOL for a key only ranked);
    keys no check reads keep GOLDEN_REL_TOL / GOLDEN_ABS_TOL."""
    out: dict[str, tuple[float, float]] = {}
    for c in rubric_checks(ref.world):
        if not c.golden:
            continue
        if c.rel_tol is not None or c.abs_tol is not None:
            tol = ((c.rel_tol or 0.0) / 10, (c.abs_tol or 0.0) / 10)
        elif c.kind == "product_table" and c.min_spearman is not None:
            tol = (0.0, SPEARMAN_VALUE_TOL)
        else:
            continue
        have = out.get(c.golden)
        out[c.golden] = tol if have is None else (min(have[0], tol[0]), min(have[1], tol[1]))
    return out


def golden_differences(stored: Any, fresh: Any, at: str = "",
                       tolerances: dict[str, tuple[float, float]] | None = None) -> list[str]:
    """Where a re-solved golden's values depart from the committed ones: any discrete difference (a string, an
    integer, a boolean, a list's length, a key), or a float outside its tolerance (`golden_tolerances`; by default
    GOLDEN_REL_TOL / GOLDEN_ABS_TOL): the last bits another libm or kernel may round otherwise."""
    tolerances = tolerances or {}
    if isinstance(stored, dict) and isinstance(fresh, dict):
        out = []
        for k in sorted(set(stored) | set(fresh), key=str):
            where = f"{at}.{k}" if at else str(k)
            if k not in stored or k not in fresh:
                out.append(f"{where} {'added' if k in fresh else 'missing'}")
            else:
                out += golden_differences(stored[k], fresh[k], where, tolerances)
        return out
    if isinstance(stored, list) and isinstance(fresh, list):
        if len(stored) != len(fresh):
            return [f"{at}: {len(fresh)} items, committed {len(stored)}"]
        return [d for i, (a, b) in enumerate(zip(stored, fresh))
                for d in golden_differences(a, b, f"{at}.{i}", tolerances)]
    numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (stored, fresh))
    if numeric and (isinstance(stored, float) or isinstance(fresh, float)):
        rel, abs_ = GOLDEN_REL_TOL, GOLDEN_ABS_TOL
        for key, tol in tolerances.items():  # the longest rubric key that contains this location
            if at == key or at.startswith(key + "."):
                rel, abs_ = tol
        if abs(fresh - stored) <= max(abs_, rel * abs(stored)):
            return []
    elif stored == fresh and type(stored) is type(fresh):
        return []
    return [f"{at}: {fresh!r}, committed {stored!r}"]


def golden_problems(ref: WorldRef, stored: Golden, fresh: Golden) -> list[str]:
    """A re-solved golden against the committed one: solver and version exactly, values by golden_differences."""
    out = [f"{k}: {getattr(fresh, k)!r}, committed {getattr(stored, k)!r}"
           for k in ("world_id", "solver", "solver_version") if getattr(fresh, k) != getattr(stored, k)]
    return out + golden_differences(stored.values, fresh.values, "", golden_tolerances(ref))


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


def manifest_sha256(path: Path) -> str:
    """The hash a lock keeps of a world manifest: its bytes without the top-level `pivotal:` block.

    The pivotal case neither builds nor solves the world, so editing it must not force a re-freeze; every other
    byte (recipe, rubric, expected response, comments) still does.
    """
    out, skipping = [], False
    for line in Path(path).read_bytes().splitlines(keepends=True):
        if line.startswith(b"pivotal:"):
            skipping = True
            continue
        # the block ends at the next top-level key; its lines are indented, comments, or the items of a list of
        # blocks (a world with several decisions), which YAML lets start at column 0 with "- "
        if skipping and line.strip() and not line[:1].isspace() and not line.startswith((b"#", b"- ")):
            skipping = False
        if not skipping:
            out.append(line)
    return sha256_bytes(b"".join(out))


def make_lock(ref: WorldRef, world_dir: Path, files: list[str], g: Golden) -> Lock:
    return Lock(
        world_id=ref.id,
        manifest_sha256=manifest_sha256(ref.path),
        files={f: sha256_file(world_dir / f) for f in files},
        golden_sha256=sha256_bytes(golden_bytes(g)),
        solver=g.solver,
        solver_version=g.solver_version,
        tool_versions=tool_versions(),
    )


def lock_bytes(lock: Lock) -> bytes:
    return (json.dumps(lock.model_dump(), indent=2, sort_keys=True) + "\n").encode()


def world_cache(ref: WorldRef, cache_root: Path | None = None) -> Path:
    """Where a world's built files live: the shared cache, or a private campaign's own data folder."""
    if cache_root is None:
        cache_root = ref.campaign.data_root if ref.campaign is not None else CACHE_ROOT
    return Path(cache_root) / ref.id


def _building_dir(out: Path) -> Path:
    """Where this process builds `out` before renaming it in place: a name of its own, so builds that race (two
    `run`s of a fresh clone, two freezes of one world) never write into each other's folder."""
    return out.with_name(f".{out.name}.{os.getpid()}.{secrets.token_hex(4)}.building")


def _stamp_path(d: Path) -> Path:
    """Outside the cache folder (whose entries are worlds): the hash of the lock a cached build was made for (a later
    checkout's lock makes it stale)."""
    return d.parent.with_name(f"{d.parent.name}-stamps") / f"{d.name}.lock-sha256"


def _lock_stamp(lock: Lock) -> str:
    return sha256_bytes(lock_bytes(lock))


def _write_stamp(d: Path, lock: Lock) -> None:
    stamp = _stamp_path(d)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    # a tmp name of this process's own: freezes of one world at once each write their stamp, then rename
    tmp = stamp.with_name(f".{stamp.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(_lock_stamp(lock).encode())
    os.replace(tmp, stamp)


def freeze_world(ref: WorldRef, cache_root: Path | None = None) -> Lock:
    """Build into the cache, solve, and write golden + lock beside the manifest (or in the campaign), atomically."""
    out = world_cache(ref, cache_root)
    tmp = _building_dir(out)  # two freezes may race here
    tmp.parent.mkdir(parents=True, exist_ok=True)
    truth: dict[str, Any] = {}
    try:
        files = build_files(ref, tmp, truth)
        g = solve(ref, tmp, truth)
        lock = make_lock(ref, tmp, files, g)  # hashed before it is installed: another freeze may replace `out`
        _write_stamp(out, lock)
        _install(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ref.golden_path.parent.mkdir(parents=True, exist_ok=True)
    ref.lock_path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(ref.golden_path, golden_bytes(g))
    _atomic_write(ref.lock_path, lock_bytes(lock))
    return lock


def _install(tmp: Path, out: Path, attempts: int = 5) -> None:
    """Put a finished build in place of `out`. A directory cannot replace a non-empty one in one rename, so an old
    build is first renamed aside under a name of this process, then removed; when another freeze installs its own
    build in between (the same bytes: builds are deterministic), ours replaces it on the next attempt."""
    for _ in range(attempts):
        try:
            os.rename(tmp, out)
            return
        except OSError:
            if not out.exists():
                raise
        aside = out.with_name(f".{out.name}.{os.getpid()}.{secrets.token_hex(4)}.old")
        try:
            os.rename(out, aside)
        except FileNotFoundError:
            continue
        shutil.rmtree(aside, ignore_errors=True)
    raise BenchmarkError(f"could not put the new build of {out.name} in place of {out} after {attempts} attempts "
                         "(other freezes of the same world kept replacing it); run the freeze again")


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
    if manifest_sha256(ref.path) != lock.manifest_sha256:
        problems.append(f"{ref.id}: manifest {ref.path.name} changed since it was frozen; re-freeze it")
    present = sorted(str(p.relative_to(world_dir)) for p in world_dir.rglob("*") if p.is_file()) if world_dir.exists() else []
    for f in sorted(set(lock.files) | set(present)):
        if f not in lock.files:
            problems.append(f"{ref.id}: file {f} is not in the lock")
        elif f not in present:
            problems.append(f"{ref.id}: file {f} is missing")
        elif sha256_file(world_dir / f) != lock.files[f]:
            problems.append(f"{ref.id}: file {f} differs from its lock (sha256)")
    stored = read_golden(ref) if ref.golden_path.exists() else None
    stored_ok = stored is not None and sha256_bytes(golden_bytes(stored)) == lock.golden_sha256
    if stored is not None and not stored_ok:
        problems.append(f"{ref.id}: committed golden {ref.golden_path.name} does not match its lock")
    if golden is not None and sha256_bytes(golden_bytes(golden)) != lock.golden_sha256:
        diffs = golden_problems(ref, stored, golden) if stored_ok else ["(no committed golden)"]
        if diffs:
            more = f" (+{len(diffs) - 3} more)" if len(diffs) > 3 else ""
            problems.append(f"{ref.id}: golden differs from its lock (the solver's answer changed: {'; '.join(diffs[:3])}{more})")
    return problems


def check_world(ref: WorldRef, scratch: Path) -> list[str]:
    """Rebuild from scratch in `scratch` and compare with the committed lock."""
    lock = read_lock(ref)
    d = scratch / ref.id
    truth: dict[str, Any] = {}
    build_files(ref, d, truth)
    g = solve(ref, d, truth)
    problems = compare(ref, lock, d, g)
    if problems and lock.tool_versions != tool_versions():
        diff = {k: (lock.tool_versions.get(k), v) for k, v in tool_versions().items() if lock.tool_versions.get(k) != v}
        problems.append(f"{ref.id}: note: tool versions differ from the lock's: {diff}")
    return problems


def ensure_built(ref: WorldRef, cache_root: Path | None = None) -> Path:
    """The world's verified public files: rebuilt into the cache when absent or stale (built for another lock: an
    earlier checkout's version of the world), refused when they differ from the lock they were built for (edited)."""
    lock = read_lock(ref)
    d = world_cache(ref, cache_root)
    stamp, want = _stamp_path(d), _lock_stamp(lock)
    if d.exists() and (not stamp.exists() or stamp.read_text() != want):  # built for another lock: stale, set aside
        stale = _building_dir(d).with_suffix(".stale")
        try:
            os.rename(d, stale)
        except OSError:  # another process moved it first
            pass
        shutil.rmtree(stale, ignore_errors=True)
    if not d.exists():  # built aside under a name of this process, then renamed: two processes may race here
        tmp = _building_dir(d)
        tmp.parent.mkdir(parents=True, exist_ok=True)
        try:
            build_files(ref, tmp)
            _write_stamp(d, lock)
            os.rename(tmp, d)
        except OSError:
            if not d.exists():
                raise
        finally:  # another process renamed its build first (ours is not needed), or the build failed
            shutil.rmtree(tmp, ignore_errors=True)
    problems = compare(ref, lock, d)
    if problems:
        raise LockMismatch("; ".join(problems[:3]) + ("" if len(problems) <= 3 else f" (+{len(problems) - 3} more)"))
    return d


def scratch_dir() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="benchmark-check-")



def default_jobs() -> int:
    """Worker processes for building worlds: one per core, at most 4 (a world's build holds up to ~1 GiB)."""
    return max(1, min(4, os.cpu_count() or 1))


def _freeze_one(ref: WorldRef) -> tuple[str, list[str]]:
    freeze_world(ref)
    return ref.id, []


def _check_one(args: tuple[WorldRef, str]) -> tuple[str, list[str]]:
    ref, scratch = args
    try:
        return ref.id, check_world(ref, Path(scratch))
    except (BenchmarkError, RegistryError) as exc:
        return ref.id, [f"{ref.id}: {exc}"]
    finally:
        shutil.rmtree(Path(scratch) / ref.id, ignore_errors=True)


def _map_worlds(fn, items: list, ids: list[str], jobs: int, on_step) -> list[list[str]]:
    """fn over items in `jobs` spawned processes (building is CPU-bound, one world per process at a time); results
    in input order, so what is printed does not depend on scheduling. on_step(world id) as each one finishes."""
    if jobs <= 1 or len(items) <= 1:
        out = []
        for item, wid in zip(items, ids):
            if on_step:
                on_step(wid)
            out.append(fn(item)[1])
        return out
    from concurrent.futures import as_completed

    results: dict[str, list[str]] = {}
    with pinned_pool(jobs) as ex:
        futures = [ex.submit(fn, item) for item in items]
        for fut in as_completed(futures):
            wid, problems = fut.result()
            results[wid] = problems
            if on_step:
                on_step(wid)
    return [results[wid] for wid in ids]


def freeze_worlds(refs: list[WorldRef], jobs: int = 1, on_step=None) -> None:
    """Freeze every world (build, solve, write golden and lock), `jobs` at a time; each world's files are written
    atomically by its own process, so a failure leaves the other worlds' locks whole."""
    _map_worlds(_freeze_one, list(refs), [r.id for r in refs], jobs, on_step)


def check_worlds(refs: list[WorldRef], scratch: Path, jobs: int = 1, on_step=None) -> list[str]:
    """Rebuild every world in `scratch` and compare with its lock, `jobs` at a time; the problems, in world order."""
    per = _map_worlds(_check_one, [(r, str(scratch)) for r in refs], [r.id for r in refs], jobs, on_step)
    return [p for ps in per for p in ps]
