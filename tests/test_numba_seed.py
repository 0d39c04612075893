"""The numba seed (sandbox/numba_seed.py): every sandbox starts with its own copy of the compiled cache, scanpy's
kernels load from it instead of compiling, and nothing a world does to its copy reaches the seed or another world."""
from __future__ import annotations

import hashlib
import json

import pytest

from benchmark.suite.freeze import ensure_built
from benchmark.suite.loader import load_suite
from sandbox.bwrap import Sandbox
from sandbox.numba_seed import SANDBOX_DIR, build, seed_dir, seed_files

WORLD = "scrna.L2.markers.clean"  # a 10x matrix: rank_genes_groups ranks F-ordered float32 chunks of it

LIST = f"""
import hashlib, json, os
files = {{}}
for root, _, names in os.walk({SANDBOX_DIR!r}):
    for n in names:
        p = os.path.join(root, n)
        files[os.path.relpath(p, {SANDBOX_DIR!r})] = hashlib.sha256(open(p, 'rb').read()).hexdigest()
st = os.stat({SANDBOX_DIR!r}) if os.path.isdir({SANDBOX_DIR!r}) else os.stat('/tmp')
digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
print(json.dumps({{'files': len(files), 'digest': digest, 'uid': st.st_uid, 'me': os.getuid()}}))
"""

RANK = """
import glob, json
import pandas as pd, scanpy as sc
before = sorted(glob.glob('/tmp/numba/**/*.nbc', recursive=True))
meta = json.load(open('meta.json'))
a = sc.read_10x_mtx('filtered_feature_bc_matrix')
a.obs = a.obs.join(pd.read_csv('cells.csv').set_index('barcode'))
sc.tl.rank_genes_groups(a, 'cell_type', groups=[meta['task']['target_population']], method='wilcoxon')
after = sorted(glob.glob('/tmp/numba/**/*.nbc', recursive=True))
print(json.dumps({'compiled': sorted(set(after) - set(before))}))
"""


@pytest.fixture(scope="module")
def world():
    build(say=lambda m: None)  # scripts/setup.sh built it already; seconds then
    return ensure_built(load_suite().worlds[WORLD])


def _last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def _digest(files: dict[str, bytes]) -> dict:
    """What LIST prints of a seed: its file count and one digest of every path and content."""
    shas = {rel: hashlib.sha256(b).hexdigest() for rel, b in files.items()}
    return {"files": len(shas), "digest": hashlib.sha256(json.dumps(shas, sort_keys=True).encode()).hexdigest()}


def _seed_bytes() -> dict[str, bytes]:
    return {rel: p.read_bytes() for rel, p in seed_files()}


def test_every_sandbox_gets_its_own_copy_of_the_seed(world):
    host = _seed_bytes()
    assert host, f"no numba seed under {seed_dir()}"
    with Sandbox(world, label=WORLD, pool=False) as sb:
        res = sb.run_python(LIST)
    assert res.error is None, res.error
    got = _last_json(res.stdout)
    assert {k: got[k] for k in ("files", "digest")} == _digest(host), "the sandbox's /tmp/numba is the seed, byte for byte"
    assert got["uid"] == got["me"], "the copy belongs to the sandbox (numba needs to write beside it)"


def test_scanpy_kernels_load_from_the_seed_instead_of_compiling(world):
    with Sandbox(world, label=WORLD) as sb:
        res = sb.run_python(RANK)
    assert res.error is None, res.error
    assert _last_json(res.stdout)["compiled"] == [], "rank_genes_groups compiled a kernel the seed should hold"


def test_a_world_that_poisons_its_copy_changes_neither_the_seed_nor_the_next_world(world):
    host = _seed_bytes()
    poison = f"""
import glob, os
for p in glob.glob({SANDBOX_DIR!r} + '/**/*.nb*', recursive=True):
    open(p, 'wb').write(b'poisoned')
open({SANDBOX_DIR!r} + '/extra.nbi', 'wb').write(b'planted')
print(len(glob.glob({SANDBOX_DIR!r} + '/**/*', recursive=True)))
"""
    with Sandbox(world, label=WORLD, pool=False) as sb:
        res = sb.run_python(poison)
    assert res.error is None and int(res.stdout.strip()) > 0, res
    assert _seed_bytes() == host, "the seed on the host changed"
    with Sandbox(world, label=WORLD, pool=False) as sb:
        res = sb.run_python(LIST)
    got = _last_json(res.stdout)
    assert {k: got[k] for k in ("files", "digest")} == _digest(host), "the next world saw the poison"


def test_without_a_seed_a_sandbox_starts_with_an_empty_cache(world, tmp_path, monkeypatch):
    monkeypatch.setenv("DISCERN_SANDBOX_CACHE", str(tmp_path / "no-seed"))
    assert seed_files() == []
    with Sandbox(world, label=WORLD, pool=False) as sb:
        res = sb.run_python(LIST)
    assert res.error is None and _last_json(res.stdout)["files"] == 0


def test_a_new_seed_removes_the_seeds_of_earlier_environments(tmp_path):
    """Seeds are keyed by the environment; an upgrade leaves the old key's folder behind, which the next build
    removes (and nothing else beside it: the lock file, a build in progress, another folder)."""
    from sandbox.numba_seed import prune_stale

    keep = tmp_path / "numba-4e5aee4487eae059"
    for d in (keep, tmp_path / "numba-0123456789abcdef", tmp_path / "numba-build-x1y2", tmp_path / "other"):
        (d / "sub").mkdir(parents=True)
    (tmp_path / "numba-seed.lock").write_text("")
    assert prune_stale(keep) == [tmp_path / "numba-0123456789abcdef"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["numba-4e5aee4487eae059", "numba-build-x1y2",
                                                          "numba-seed.lock", "other"]


def test_the_seed_key_follows_installed_distributions_not_other_files(tmp_path, monkeypatch):
    """A file added beside the packages (a tool in /usr/local/bin, a .pyc) keeps the key, so the seed is not lost;
    a distribution installed or upgraded (a new `*.dist-info`) makes a new one."""
    from sandbox import numba_seed, seal

    site = tmp_path / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg-1.0.dist-info").mkdir()
    monkeypatch.setattr(seal, "_site_dirs", lambda: [site])
    numba_seed._seed_key.cache_clear()
    first = numba_seed.seed_key()
    (site / "pkg" / "__pycache__").mkdir()
    (site / "tool.py").write_text("")
    numba_seed._seed_key.cache_clear()
    assert numba_seed.seed_key() == first
    (site / "pkg-1.0.dist-info").rename(site / "pkg-1.1.dist-info")
    numba_seed._seed_key.cache_clear()
    assert numba_seed.seed_key() != first
    numba_seed._seed_key.cache_clear()


def test_a_run_builds_the_seed_only_for_tracks_that_use_scanpy(tmp_path, monkeypatch):
    from sandbox import numba_seed

    monkeypatch.setenv("DISCERN_SANDBOX_CACHE", str(tmp_path / "no-seed"))
    built = []
    monkeypatch.setattr(numba_seed, "build", lambda say=print: built.append(1) or tmp_path)
    said = []
    assert numba_seed.ensure_for({"clinvar", "bulkrna"}, say=said.append) is None and built == []
    assert numba_seed.ensure_for({"clinvar", "scrna"}, say=said.append) == tmp_path and built == [1]
    assert said and "numba" in said[0]
