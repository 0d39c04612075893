"""Sealed substrates (issue 10 item 5): no dataset is readable in the sandbox outside /workspace.

Package-shipped data files are masked inside every sandbox: scanpy's datasets (PBMC68k is the scRNA track's
substrate: an agent that can read it recovers every recipe by diffing), pybedtools' and anndata's test data, and
anything else under the visible Python roots that looks like a data set. Masking is by bubblewrap mounts over the
paths (`--ro-bind /dev/null FILE`, a read-only empty tmpfs over a folder), so the packages still import.

What is masked (`masked_paths`):
  * every file under the Python roots and /usr whose name ends in a data extension (`DATA_SUFFIXES`);
  * every test-data folder (`data`/`testdata`/`test_data` below a `test`/`tests` folder, or named `testdata`/
    `test_data`) as a whole;
  * gold-side packages that a non-editable install would put in site-packages (`graders`, `worlds`, `benchmark`,
    `sandbox`, `ledgers`, `pricing`) and the editable-install hooks (`__editable__*`, `.pth` files naming the repo);
  * every substrate source a track names (`substrate.source` in `worlds/*/track.yaml`, a path such as
    `scanpy/datasets/10x_pbmc68k_reduced.h5ad` inside a package) and whatever `register_sealed` added.

`seal_problems(limits)` proves it on the real sandbox (called by `worlds check`).

On-disk cache (issue 20): walking the Python roots and /usr costs about a second, so the walk's result is kept in
`.cache/sandbox/masked-<env>.json` (or `$DISCERN_SANDBOX_CACHE`), written atomically (temporary file + rename).
It is keyed by a fingerprint of what the walk depends on: the interpreter (version, prefixes, executable), the
walked roots, this file's own bytes, and the inode, size and mtime of every entry one level inside each
site-packages folder and two levels inside /usr, plus dpkg's status file. Installing, upgrading or removing a
package with pip (its dist-info folder is replaced) or apt (dpkg's status is rewritten) changes the fingerprint,
so the walk runs again. A cache file that does not parse, has another version or key, or whose digest does not
match its contents is ignored and rewritten. What the fingerprint does not see (a data file copied by hand deep
inside an existing package folder) is caught by `seal_problems`, which recomputes the walk and probes again before
it reports anything. Substrate sources, gold packages, editable hooks and `register_sealed` items are not cached.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterable

DATA_SUFFIXES = (".h5ad", ".h5", ".hdf5", ".loom", ".zarr", ".bam", ".cram", ".sam", ".bai", ".bed", ".bed.gz",
                 ".bedgraph", ".bedgraph.gz", ".narrowpeak", ".broadpeak", ".mtx", ".mtx.gz", ".vcf", ".vcf.gz",
                 ".bcf", ".fa", ".fa.gz", ".fasta", ".fasta.gz", ".fq", ".fq.gz", ".fastq", ".fastq.gz", ".bw",
                 ".bigwig", ".bb", ".bigbed", ".gtf", ".gtf.gz", ".gff", ".gff.gz", ".gff3", ".csv.gz", ".tsv.gz",
                 ".rds", ".rda", ".rdata", ".bam.bai", ".tbi", ".csi")
TEST_DATA_DIRS = {"data", "testdata", "test_data", "test-data", "_data", "example_data"}
TEST_DIRS = {"test", "tests", "testing"}
GOLD_PACKAGES = ("graders", "worlds", "benchmark", "sandbox", "ledgers", "pricing")
REPO_ROOT = Path(__file__).resolve().parent.parent
CACHE_VERSION = 1

_registry: list[Callable[[], Iterable[Path]] | Path] = []


def register_sealed(item: Path | str | Callable[[], Iterable[Path]]) -> None:
    """Registry hook: a track (or a test) adds a file or folder, or a function returning some, to mask."""
    _registry.append(item if callable(item) else Path(item))
    masked_paths.cache_clear()


def python_roots() -> list[Path]:
    """The venv and its base interpreter, resolved: the trees the sandbox shows (read-only) besides /usr."""
    return sorted({Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()})


def _site_dirs() -> list[Path]:
    out = []
    for root in python_roots():
        out += [p for p in root.glob("lib*/python3*/site-packages") if p.is_dir()]
        out += [p for p in root.glob("lib*/python3*/dist-packages") if p.is_dir()]
    return sorted({p.resolve() for p in out})  # lib64 -> lib: walk each folder once


def _is_data(name: str) -> bool:
    low = name.lower()
    return low.endswith(DATA_SUFFIXES)


def substrate_sources() -> list[Path]:
    """Files named as substrate sources in `worlds/*/track.yaml` (`substrate.source`: `pkg/...` inside a package)."""
    import yaml

    found: list[Path] = []
    for track in sorted((REPO_ROOT / "worlds").glob("*/track.yaml")):
        try:
            doc = yaml.safe_load(track.read_text(encoding="utf-8")) or {}
        except Exception:  # noqa: BLE001 - a broken track.yaml is the loader's error to report, not the seal's
            continue
        text = str((doc.get("substrate") or {}).get("source") or "")
        for token in re.findall(r"[A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]+)+", text):
            for site in _site_dirs():
                p = site / token
                if p.is_file():
                    found.append(p)
    return sorted(set(found))


def fetched_sources() -> list[Path]:
    """Every file `python -m benchmark data fetch` took from a package registry (.cache/data). They live beside the
    checkout, which no sandbox binds, so they are not masked (a mask would create their host path inside the
    sandbox); the seal probe only checks that no copy of them is readable there."""
    from benchmark.suite.package_data import data_root

    root = data_root()
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []


def _walk(top: Path, masked: set[Path]) -> None:
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        d = Path(dirpath)
        keep = []
        for name in dirnames:
            sub = d / name
            low = name.lower()
            if (low in TEST_DATA_DIRS and d.name.lower() in TEST_DIRS) or low in ("testdata", "test_data", "test-data"):
                masked.add(sub)
            elif not sub.is_symlink():
                keep.append(name)
        dirnames[:] = keep
        for name in filenames:
            if _is_data(name):
                masked.add(d / name)


def _walk_roots() -> list[Path]:
    """What `masked_paths` walks: every site-packages folder of the Python roots, and /usr."""
    return _site_dirs() + [Path("/usr")]


def cache_dir() -> Path:
    return Path(os.environ.get("DISCERN_SANDBOX_CACHE") or REPO_ROOT / ".cache" / "sandbox")


def _stat_line(h, p: str) -> None:
    try:
        st = os.stat(p, follow_symlinks=False)
    except OSError:
        h.update(f"{p}\0-\n".encode(errors="surrogateescape"))
        return
    h.update(f"{p}\0{st.st_mode}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\n".encode(errors="surrogateescape"))


def _children(p: Path) -> list[str]:
    try:
        return sorted(e.path for e in os.scandir(p))
    except OSError:
        return []


def walk_fingerprint(roots: list[Path] | None = None) -> str:
    """sha256 of what the cached walk depends on (see module doc). About 10 ms: stats only, no walk."""
    roots = _walk_roots() if roots is None else roots
    h = hashlib.sha256()
    h.update(json.dumps({"version": CACHE_VERSION, "python": sys.version, "prefix": sys.prefix,
                         "base_prefix": sys.base_prefix, "executable": sys.executable, "roots": [str(r) for r in roots],
                         "code": hashlib.sha256(Path(__file__).read_bytes()).hexdigest()}, sort_keys=True).encode())
    for root in roots:
        _stat_line(h, str(root))
        for child in _children(root):  # a pip install replaces dist-info folders here
            _stat_line(h, child)
            if root == Path("/usr") and os.path.isdir(child) and not os.path.islink(child):
                for grand in _children(Path(child)):
                    _stat_line(h, grand)
    for extra in ("/var/lib/dpkg/status", "/var/lib/rpm", "/lib/apk/db/installed"):
        _stat_line(h, extra)
    return h.hexdigest()


def _cache_file() -> Path:
    env = hashlib.sha256(f"{sys.prefix}\0{sys.base_prefix}\0{sys.executable}".encode()).hexdigest()[:16]
    return cache_dir() / f"masked-{env}.json"


def _paths_digest(paths: list[str]) -> str:
    return hashlib.sha256(json.dumps(paths).encode()).hexdigest()


def _load_walk_cache(key: str) -> list[Path] | None:
    """The cached walk for `key`, or None when the file is missing, unreadable, corrupt or stale."""
    try:
        doc = json.loads(_cache_file().read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("version") != CACHE_VERSION or doc.get("key") != key:
        return None
    paths = doc.get("paths")
    if not isinstance(paths, list) or not all(isinstance(p, str) and p.startswith("/") and "\0" not in p for p in paths):
        return None
    if doc.get("digest") != _paths_digest(paths):
        return None
    return [Path(p) for p in paths]


def _store_walk_cache(key: str, paths: list[Path]) -> None:
    """Atomically (temporary file in the same folder, fsync, rename); a failure to write is not an error."""
    items = sorted(str(p) for p in paths)
    body = json.dumps({"version": CACHE_VERSION, "key": key, "paths": items, "digest": _paths_digest(items)}, indent=0)
    target = _cache_file()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(body)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError:
        pass


def walked_paths(use_cache: bool = True) -> list[Path]:
    """Data files and test-data folders under the Python roots and /usr: from the on-disk cache when its key still
    matches, else walked (and the cache rewritten)."""
    roots = _walk_roots()
    key = walk_fingerprint(roots)
    if use_cache:
        cached = _load_walk_cache(key)
        if cached is not None:
            return cached
    masked: set[Path] = set()
    for root in roots:
        _walk(root, masked)  # /usr: e.g. samtools' example reads under /usr/share/doc
    out = sorted(masked)
    _store_walk_cache(key, out)
    return out


def clear_cache() -> None:
    """Forget the walk, on disk and in this process (the next `masked_paths` walks again)."""
    try:
        _cache_file().unlink()
    except OSError:
        pass
    masked_paths.cache_clear()


def _names_clone(p: Path) -> bool:
    """Whether a small text file (a .pth, an install's direct_url.json) names the clone's folder."""
    try:
        return p.is_file() and str(REPO_ROOT) in p.read_text(errors="replace")
    except OSError:
        return False


@functools.lru_cache(maxsize=1)
def masked_paths() -> tuple[Path, ...]:
    """Every host path to mask in the sandbox (files and folders, resolved, none inside another). Cached per process,
    and the expensive walk on disk (`walked_paths`)."""
    masked: set[Path] = set(walked_paths())
    for site in _site_dirs():
        for name in GOLD_PACKAGES:
            if (site / name).is_dir():
                masked.add(site / name)
        for p in [*site.iterdir(), *(site / "__pycache__").glob("__editable__*")]:
            if p.name.startswith("__editable__"):  # an editable install's finder names the clone's folders
                masked.add(p)
            elif p.suffix == ".dist-info" and _names_clone(p / "direct_url.json"):
                masked.add(p / "direct_url.json")  # an install from the clone records the clone's path
            elif p.suffix == ".pth" and _names_clone(p):
                masked.add(p)
    masked.update(substrate_sources())
    for item in _registry:
        masked.update(Path(p) for p in (item() if callable(item) else [item]))
    resolved = sorted({p.resolve() for p in masked if p.exists() and not p.is_symlink()})
    out: list[Path] = []
    for p in resolved:  # drop paths inside an already masked folder
        if not any(p != q and q in p.parents for q in out):
            out.append(p)
    return tuple(out)


def _sha256(p: Path) -> str:
    with open(p, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


_PROBE = r'''
import hashlib, importlib, json, os, sys
want = json.loads(WANT)
suffixes = tuple(want["suffixes"])
sizes = {int(k): v for k, v in want["sources"].items()}
problems = []
for top in want["tops"]:
    for dirpath, dirnames, filenames in os.walk(top):
        if dirpath.startswith(("/proc", "/sys", "/dev", "/workspace", "/tmp")):
            dirnames[:] = []
            continue
        for name in filenames:
            p = os.path.join(dirpath, name)
            try:
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                size = os.path.getsize(p)
                if size == 0:
                    continue
                if name.lower().endswith(suffixes):
                    with open(p, "rb") as fh:
                        if fh.read(1):
                            problems.append(f"readable data file {p} ({size} bytes)")
                            continue
                if size in sizes:
                    h = hashlib.sha256(open(p, "rb").read()).hexdigest()
                    if h in sizes[size]:
                        problems.append(f"substrate source readable as {p}")
            except OSError:
                pass
for mod in want["gold"]:
    try:
        importlib.import_module(mod)
        problems.append(f"gold-side module {mod!r} is importable")
    except Exception:
        pass
for mod in ("scanpy", "pybedtools", "anndata"):
    try:
        importlib.import_module(mod)
    except Exception as exc:
        problems.append(f"{mod} no longer imports with the masks: {type(exc).__name__}: {exc}")
print("SEAL" + json.dumps(problems))
'''


def seal_problems(limits=None) -> list[str]:
    """Start a real sandbox and list what breaks the seal; [] means sealed.

    Reports every non-empty readable file outside /workspace with a data extension (under the Python roots, /usr
    and /etc), every file whose sha256 equals a substrate source's, every importable gold-side module (`graders`,
    `worlds`, `benchmark`), and a masked package (scanpy, pybedtools, anndata) that no longer imports.
    `limits` is a `sandbox.bwrap.Limits` (defaults if None). Raises BenchmarkError only if no sandbox starts.
    """
    import tempfile

    from sandbox.bwrap import Limits, Sandbox

    sources: dict[int, list[str]] = {}
    for p in substrate_sources() + fetched_sources():
        sources.setdefault(p.stat().st_size, []).append(_sha256(p))
    want = {"suffixes": list(DATA_SUFFIXES), "sources": sources, "gold": ["graders", "worlds", "benchmark"],
            "tops": ["/"]}
    code = "WANT = " + repr(json.dumps(want)) + "\n" + _PROBE

    def probe() -> list[str]:
        with tempfile.TemporaryDirectory(prefix="seal-probe-") as tmp:
            world = Path(tmp) / "world"
            world.mkdir()
            with Sandbox(world, limits or Limits(), label="seal probe", pool=False) as sb:  # one-off: no warm pool
                res = sb.run_python(code)
        out = [ln for ln in res.stdout.splitlines() if ln.startswith("SEAL")]
        if not out:
            return [f"the seal probe did not finish in the sandbox: {res.as_text()[:2000]}"]
        return json.loads(out[-1][4:])

    problems = probe()
    if problems:  # never blame a cached walk: walk afresh and probe again before reporting
        clear_cache()
        problems = probe()
    return problems
