"""Issue 20: the on-disk cache of the seal's walk, and warm (pre-started) sandboxes handed out one per world."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sandbox import seal


# ---------------------------------------------------------------- the masked-paths cache

@pytest.fixture
def fake_env(tmp_path, monkeypatch):
    """A walk over a fake site-packages (and no /usr) with the cache in tmp_path."""
    site = tmp_path / "site-packages"
    (site / "pkg" / "tests" / "data").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("")
    (site / "pkg" / "ref.h5ad").write_bytes(b"x")
    monkeypatch.setenv("DISCERN_SANDBOX_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(seal, "_walk_roots", lambda: [site])
    walks: list[Path] = []
    real_walk = seal._walk

    def counting_walk(top, masked):
        walks.append(top)
        real_walk(top, masked)

    monkeypatch.setattr(seal, "_walk", counting_walk)
    return site, walks


def test_walk_is_cached_on_disk_and_reused(fake_env):
    site, walks = fake_env
    first = seal.walked_paths()
    assert set(first) == {site / "pkg" / "tests" / "data", site / "pkg" / "ref.h5ad"}
    assert walks == [site]
    files = list(seal.cache_dir().iterdir())
    assert len(files) == 1 and files[0].name.startswith("masked-") and files[0].suffix == ".json", files  # no temp left
    assert seal.walked_paths() == first
    assert walks == [site], "a matching cache is used without walking"


def test_installing_a_package_invalidates_the_cache(fake_env):
    site, walks = fake_env
    seal.walked_paths()
    new = site / "newpkg-1.0.dist-info"  # what pip adds next to the package
    new.mkdir()
    (site / "newpkg").mkdir()
    (site / "newpkg" / "genome.fa").write_text(">x\nACGT\n")
    got = seal.walked_paths()
    assert site / "newpkg" / "genome.fa" in got and len(walks) == 2
    assert seal.walked_paths() == got and len(walks) == 2, "the rewritten cache is used again"


@pytest.mark.parametrize("corrupt", [
    lambda t: "{ not json",
    lambda t: "",
    lambda t: json.dumps([1, 2]),
    lambda t: json.dumps({**json.loads(t), "version": 999}),
    lambda t: json.dumps({**json.loads(t), "key": "0" * 64}),
    lambda t: json.dumps({**json.loads(t), "paths": []}),  # digest no longer matches: a truncated list is not trusted
    lambda t: json.dumps({**json.loads(t), "paths": ["relative/path"]}),
    lambda t: t[: len(t) // 2],
])
def test_corrupt_or_stale_cache_is_recomputed_not_trusted(fake_env, corrupt):
    site, walks = fake_env
    want = seal.walked_paths()
    cache = next(seal.cache_dir().iterdir())
    cache.write_text(corrupt(cache.read_text()))
    assert seal.walked_paths() == want
    assert len(walks) == 2, "the bad cache was walked over again"
    assert seal.walked_paths() == want and len(walks) == 2, "and rewritten"


def test_unwritable_cache_still_masks(fake_env, monkeypatch, tmp_path):
    site, walks = fake_env
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("DISCERN_SANDBOX_CACHE", str(blocker / "cache"))
    assert site / "pkg" / "ref.h5ad" in seal.walked_paths()


def test_fingerprint_tracks_the_real_environment():
    a = seal.walk_fingerprint()
    assert a == seal.walk_fingerprint() and len(a) == 64
    roots = seal._walk_roots()
    assert Path("/usr") in roots and all(r.is_dir() for r in roots)
    assert os.path.realpath(roots[0]) == str(roots[0]), "site folders are walked once, resolved"
