"""Real data files taken from package registries by `scripts/fetch_data.sh` (never committed, never from the web).

A track's substrate asks for a file by package and name; a missing file is one sentence naming the fix.
"""
from __future__ import annotations

import os
from pathlib import Path

from benchmark.errors import BenchmarkError

REPO_ROOT = Path(__file__).resolve().parent.parent


def data_root() -> Path:
    """`.cache/data` beside the checkout, or $DISCERN_DATA where a machine keeps it elsewhere."""
    return Path(os.environ.get("DISCERN_DATA") or REPO_ROOT / ".cache" / "data")


def package_file(package: str, name: str) -> Path:
    """The path of `name` fetched from `package` (e.g. package_file("mageck2", "count_table.txt"))."""
    path = data_root() / package / name
    if not path.is_file():
        raise BenchmarkError(f"{path} is missing: it comes from the {package} package; run `bash scripts/setup.sh` "
                             "(or `bash scripts/fetch_data.sh`) to fetch it from the package registry")
    return path
