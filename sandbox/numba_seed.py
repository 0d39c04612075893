"""A seed for numba's on-disk cache: no sandbox pays scanpy's JIT compilation again.

scanpy compiles its numba kernels on first call (rank_genes_groups' `rankdata`, sparse means and variances, QC
metrics, pynndescent's neighbour search, umap ...): about 13 CPU-s for one wilcoxon `rank_genes_groups` in every
fresh sandbox, since NUMBA_CACHE_DIR is each sandbox's own /tmp/numba. Those kernels are declared `cache=True`, so
numba reuses compiled code that its cache folder already holds.

The seed is that folder, compiled once per environment by OUR warm-up code (`WARMUP`) in a fresh sealed sandbox in
which no agent code runs, and kept under `.cache/sandbox/numba-<key>/` (atomically: built aside, then renamed). Its
key is the interpreter, the installed distributions with their versions, the uid mode and this module's code
(`seed_key`), so a `pip install` makes a new seed rather than a stale one; a run builds it when it is missing
(`ensure_for`).

Every sandbox gets its OWN copy: bwrap writes the seed's files into the sandbox's private /tmp/numba as it starts
(`--file FD`, like a world's files), owned by the sandbox's uid. A world may change its copy; it can change neither
the seed nor another world's copy. numba checks every entry against its source file's stamp and the CPU it was
compiled for, and compiles again (into the world's copy) when they differ, so a seed can make a sandbox faster,
never different.

Built by `scripts/setup.sh` (`python -m benchmark sandbox seed`); a sandbox started without one compiles as before.
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

SEED_VERSION = 1
SANDBOX_DIR = "/tmp/numba"  # NUMBA_CACHE_DIR inside every sandbox (sandbox/bwrap.py sets it from here)
MAX_SEED_BYTES = 256 << 20  # the copy lands on the sandbox's /tmp tmpfs (Limits.tmp_bytes, 1 GiB)

# The scanpy steps an analysis of single-cell counts reaches for, so that their numba kernels are compiled for the
# signatures worlds meet: every test of rank_genes_groups on each storage of X, the preprocessing chain on sparse
# float32 (a 10x matrix as read) and dense float64.
WARMUP = r"""
import os, shutil, time, warnings
warnings.simplefilter('ignore')
import numpy as np, pandas as pd, scipy.sparse as sp
import anndata as ad, scanpy as sc
rng = np.random.default_rng(0)
n, g = 400, 300
counts = rng.negative_binomial(2, 0.3, size=(n, g)).astype(np.float32)
groups = pd.Categorical(rng.choice(['a', 'b', 'c'], n))
def make(X):
    a = ad.AnnData(X)
    a.obs_names = [f'c{i}' for i in range(n)]
    a.var_names = [('MT-' if j < 5 else '') + f'g{j}' for j in range(g)]
    a.obs['group'] = groups
    a.var['mt'] = a.var_names.str.startswith('MT-')
    return a
done, failed = [], []
def step(name, fn):
    t = time.time()
    try:
        fn()
        done.append(f'{name} {time.time() - t:.1f}s')
    except Exception as e:
        failed.append(f'{name}: {type(e).__name__}: {str(e)[:120]}')
# rank_genes_groups ranks dense chunks of X: C- or F-ordered, float32 or float64, depending on how X is stored
# (a 10x matrix reads as float32 CSC-backed chunks); numba compiles each layout once
kinds = {'csr32': sp.csr_matrix(counts), 'csc32': sp.csc_matrix(counts), 'dense32': counts,
         'dense32F': np.asfortranarray(counts), 'csr64': sp.csr_matrix(counts.astype(np.float64)),
         'dense64': counts.astype(np.float64), 'dense64F': np.asfortranarray(counts.astype(np.float64))}
for kind, X in kinds.items():
    raw = make(X)
    step(f'{kind} wilcoxon', lambda: sc.tl.rank_genes_groups(raw, 'group', method='wilcoxon', tie_correct=True))
    step(f'{kind} wilcoxon one group', lambda: sc.tl.rank_genes_groups(raw, 'group', groups=['a'], method='wilcoxon'))
    step(f'{kind} t-test', lambda: sc.tl.rank_genes_groups(raw, 'group', method='t-test'))
    if kind not in ('csr32', 'dense64'):
        continue
    a = make(X)
    step(f'{kind} qc', lambda: sc.pp.calculate_qc_metrics(a, qc_vars=['mt'], percent_top=(10, 50), inplace=True))
    step(f'{kind} filter', lambda: (sc.pp.filter_cells(a, min_genes=1), sc.pp.filter_genes(a, min_cells=1)))
    step(f'{kind} normalize', lambda: sc.pp.normalize_total(a, target_sum=1e4))
    step(f'{kind} log1p', lambda: sc.pp.log1p(a))
    step(f'{kind} hvg', lambda: sc.pp.highly_variable_genes(a, n_top_genes=100))
    step(f'{kind} wilcoxon log', lambda: sc.tl.rank_genes_groups(a, 'group', method='wilcoxon'))
    step(f'{kind} t-test log', lambda: sc.tl.rank_genes_groups(a, 'group', method='t-test_overestim_var'))
    step(f'{kind} scale', lambda: sc.pp.scale(a, max_value=10))
    step(f'{kind} pca', lambda: sc.tl.pca(a, n_comps=20))
    if kind == 'csr32':
        step('neighbors', lambda: sc.pp.neighbors(a, n_neighbors=10))
        step('umap', lambda: sc.tl.umap(a))
        step('leiden', lambda: sc.tl.leiden(a, flavor='igraph', n_iterations=2))
        step('scrublet', lambda: sc.pp.scrublet(make(sp.csr_matrix(counts))))
if os.path.isdir(os.environ['NUMBA_CACHE_DIR']):
    shutil.copytree(os.environ['NUMBA_CACHE_DIR'], 'numba')
print('compiled:', '; '.join(done))
print('not available:', '; '.join(failed) or 'none')
"""


def seed_key() -> str:
    """The environment's key: the interpreter, the installed distributions and their versions (the `*.dist-info`
    names of every site-packages folder), the uid mode and this module's code. Nothing else: a tool installed into
    /usr/local/bin, an apt upgrade or a .pyc written beside a package changed the old key (a stat walk) and left
    every sandbox compiling scanpy's kernels again (13 CPU-s a world) until someone re-ran `sandbox seed`, while
    numba checks each cached entry against its own source and CPU anyway."""
    from sandbox.seal import _site_dirs

    return _seed_key(tuple(_site_dirs()), os.geteuid() == 0)


@functools.lru_cache(maxsize=8)
def _seed_key(roots: tuple[Path, ...], as_root: bool) -> str:
    import sys

    dists = sorted(f"{r}/{e.name}" for r in roots for e in os.scandir(r)
                   if e.name.endswith((".dist-info", ".egg-info")))
    h = hashlib.sha256()
    h.update(f"{SEED_VERSION}\0{as_root}\0{sys.version}\0{sys.executable}\0".encode())
    h.update("\n".join(dists).encode(errors="surrogateescape"))
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()[:16]


def seed_dir() -> Path:
    from sandbox.seal import cache_dir

    return cache_dir() / f"numba-{seed_key()}"


def seed_files() -> list[tuple[str, Path]]:
    """(path under /tmp/numba, host file) of this environment's seed; [] when it has not been built."""
    root = seed_dir()
    if not root.is_dir():
        return []
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out.append((p.relative_to(root).as_posix(), p))
    return out


def bwrap_args(fds: list[int]) -> list[str]:
    """`--dir`/`--file FD` pairs that write the seed into the sandbox's /tmp/numba (appended to `fds`)."""
    files = seed_files()
    if not files:
        return []
    args = ["--dir", SANDBOX_DIR]
    made = set()
    for rel, host in files:
        parent = rel.rpartition("/")[0]
        if parent and parent not in made:
            args += ["--dir", f"{SANDBOX_DIR}/{parent}"]
            made.add(parent)
        try:
            fd = os.open(host, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        fds.append(fd)
        args += ["--perms", "0644", "--file", str(fd), f"{SANDBOX_DIR}/{rel}"]
    return args


def build(say=print) -> Path:
    """Compile the seed for this environment unless it exists (under a lock: concurrent callers build it once)."""
    from benchmark.errors import BenchmarkError
    from sandbox.bwrap import Limits, Sandbox
    from sandbox.seal import cache_dir

    root = seed_dir()
    if root.is_dir():
        return root
    cache_dir().mkdir(parents=True, exist_ok=True)
    fd = os.open(cache_dir() / "numba-seed.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if root.is_dir():
            return root
        work = Path(tempfile.mkdtemp(prefix="numba-build-", dir=cache_dir()))
        try:
            (work / "world").mkdir()
            limits = Limits(cell_wall_s=900.0)  # compiling every kernel takes a few minutes on a loaded machine
            with Sandbox(work / "world", limits, label="numba seed", pool=False, preload=()) as sb:
                cell = sb.run_python(WARMUP)
                if cell.error:
                    raise BenchmarkError(f"compiling the numba seed failed in the sandbox: {cell.error.strip()[-300:]}")
                sb.collect(work / "out", max_bytes=MAX_SEED_BYTES, max_files=5000)
            say(cell.stdout.strip())
            got = work / "out" / "numba"
            if not got.is_dir():
                got.mkdir(parents=True)  # nothing cacheable was compiled: an empty seed still records that
            os.replace(got, root)
            prune_stale(root)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    finally:
        os.close(fd)
    return root


NEEDS_SEED = ("scanpy",)  # packages whose numba kernels the seed holds


def ensure_for(tracks: set[str], say=print) -> Path | None:
    """Build the seed before a run whose worlds' tracks preload scanpy, when this environment has none (a fresh
    clone that skipped setup.sh, or a `pip install` since): about a minute once, against ~13 CPU-s in every scanpy
    world without it. A build that fails is said and the run goes on unseeded (slower, never different)."""
    from benchmark.errors import BenchmarkError
    from sandbox.pool import track_packages

    if seed_dir().is_dir() or not any(p in track_packages(t) for t in tracks for p in NEEDS_SEED):
        return None
    say("compiling numba's kernels once for every sandbox of this environment (about a minute, the first time only)")
    try:
        return build(say=lambda m: None)
    except BenchmarkError as exc:
        say(f"warning: no numba seed ({exc}); scanpy's kernels compile in each sandbox instead")
        return None


def prune_stale(keep: Path) -> list[Path]:
    """Remove the seeds of earlier environments beside `keep` (an upgrade or an edit of this module changes the key,
    and nothing reads an old seed again); called under the build lock, once the new seed is in place."""
    gone = []
    for d in keep.parent.glob("numba-*"):
        if d != keep and d.is_dir() and not d.is_symlink() and d.name[len("numba-"):].isalnum():
            shutil.rmtree(d, ignore_errors=True)
            gone.append(d)
    return gone
