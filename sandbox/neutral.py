"""No host path in the venv's bytecode: each .pyc records the neutral path the sandbox shows its source at.

The sandbox shows the venv at /opt/venv (`sandbox/bwrap.py`). Python itself reports that path (importlib rewrites a
code object's `co_filename` on load), but every `.pyc` file still holds the path it was compiled at, so agent code
that reads `__pycache__` would learn where the repository lives on the host (about 20,000 files name it).
`neutralise()` recompiles each such file with the neutral path as its recorded source path (py_compile's `dfile`). The
source's mtime and size, the optimisation level and the invalidation mode stay as they were, so the host keeps
using every file unchanged: its tracebacks still name the host path, since importlib rewrites `co_filename` there too.

`scripts/setup.sh` runs it after every install (idempotent: a second run reads the files and rewrites none).
"""
from __future__ import annotations

import os
import py_compile
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

NEUTRAL_VENV = "/opt/venv"   # sandbox.bwrap.OPT_VENV (not imported: this module runs before the harness is set up)
_MODES = {0: py_compile.PycInvalidationMode.TIMESTAMP, 1: py_compile.PycInvalidationMode.UNCHECKED_HASH,
          3: py_compile.PycInvalidationMode.CHECKED_HASH}


def venv_root() -> Path | None:
    """The running interpreter's venv, resolved; None outside a venv."""
    return Path(sys.prefix).resolve() if sys.prefix != sys.base_prefix else None


def _optimize(pyc: Path) -> int:
    parts = pyc.name.split(".")
    for p in parts:
        if p.startswith("opt-") and p[4:].isdigit():
            return int(p[4:])
    return 0


def _source(pyc: Path) -> Path:
    """The source a `__pycache__` file was compiled from (importlib's `source_from_cache` refuses module names with
    dots, e.g. PyInstaller's `hook-playwright.sync_api`)."""
    stem = pyc.name[:-len(".pyc")]
    stem = stem.rsplit(".opt-", 1)[0] if ".opt-" in stem else stem
    stem = stem[:-len("." + sys.implementation.cache_tag)]
    return pyc.parent.parent / (stem + ".py")


def naming_files(venv: Path) -> list[Path]:
    """The .pyc files under `venv` (this interpreter's cache tag) whose bytes hold the venv's host path."""
    needle = str(venv).encode()
    tag = sys.implementation.cache_tag
    out = []
    for dirpath, _dirs, files in os.walk(venv):
        if not dirpath.endswith("__pycache__"):
            continue
        for f in files:
            if f.endswith(".pyc") and f".{tag}." in f:
                p = Path(dirpath, f)
                try:
                    if needle in p.read_bytes():
                        out.append(p)
                except OSError:
                    continue
    return sorted(out)


def _recompile(job: tuple[str, str, str, int, int]) -> str | None:
    """Recompile one file; the error's text, or None."""
    src, pyc, dfile, optimize, mode = job
    try:
        py_compile.compile(src, cfile=pyc, dfile=dfile, doraise=True, optimize=optimize,
                           invalidation_mode=_MODES.get(mode, py_compile.PycInvalidationMode.TIMESTAMP), quiet=2)
        return None
    except (py_compile.PyCompileError, OSError, SyntaxError, ValueError) as e:
        Path(pyc).unlink(missing_ok=True)  # whatever compiled it once no longer does: the host compiles it again
        return f"{src}: {type(e).__name__}: {e}".splitlines()[0][:300]


def neutralise(venv: Path | None = None, neutral: str = NEUTRAL_VENV, jobs: int | None = None) -> dict:
    """Rewrite every .pyc under `venv` that names its host path so that it names `neutral` instead.

    Returns counts: `rewritten`, `sourceless` (a .pyc without its .py: removed, since nothing on the host can rebuild
    it without its path, and Python imports the source-less module only from a legacy location), `n_failed` and the first `failed` errors (their .pyc
    removed), and `left` (files still naming the path afterwards)."""
    venv = (venv or venv_root())
    if venv is None:
        return {"rewritten": 0, "sourceless": 0, "failed": [], "left": 0}
    venv = Path(venv).resolve()
    jobs_list, sourceless = [], 0
    for pyc in naming_files(venv):
        src = _source(pyc)
        if not src.is_file():
            sourceless += 1
            pyc.unlink(missing_ok=True)
            continue
        mode = int.from_bytes(pyc.read_bytes()[4:8], "little")
        dfile = neutral + str(src)[len(str(venv)):]
        jobs_list.append((str(src), str(pyc), dfile, _optimize(pyc), mode))
    failed: list[str] = []
    if jobs_list:
        n = jobs or max(1, min(len(os.sched_getaffinity(0)), 8))
        if n == 1 or len(jobs_list) < 64:
            failed = [e for e in map(_recompile, jobs_list) if e]
        else:
            with ProcessPoolExecutor(n) as pool:
                failed = [e for e in pool.map(_recompile, jobs_list, chunksize=64) if e]
    left = len(naming_files(venv)) if jobs_list else 0
    return {"rewritten": len(jobs_list) - len(failed), "sourceless": sourceless, "failed": failed[:5],
            "n_failed": len(failed), "left": left}


def main() -> int:
    venv = venv_root()
    if venv is None:
        print("[neutral] not in a venv: nothing to rewrite")
        return 0
    r = neutralise(venv)
    print(f"[neutral] {r['rewritten']} .pyc file(s) now name {NEUTRAL_VENV} instead of {venv}"
          + (f"; {r['sourceless']} source-less removed" if r["sourceless"] else "")
          + (f"; {r['n_failed']} could not be recompiled (e.g. {r['failed'][0]})" if r["n_failed"] else "")
          + (f"; {r['left']} still name it" if r["left"] else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
