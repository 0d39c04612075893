"""Sound analyses other than the reference solver's, one module per track (issue 18, deliverable 3).

Each `@alternative` is written independently of the reference solver (another tool or statistic) and runs for real
on a frozen world's public files, writing its work products under `out` and returning its report. It never reads
the golden. `tests/test_alternative_analyses.py` grades every one on every world it names and requires >= 95, and
requires every L2 family of the suite to have at least one, named in the family's `alternatives:` list.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class Alternative:
    family: str                      # the L2 family id
    name: str                        # as listed in the family's `alternatives:` (tool and statistic in words)
    worlds: tuple[str, ...]          # world ids (the clean control and every trap world where it avoids the trap)
    fn: Callable[[Path, Path], dict]  # (world_dir, out) -> report; products written under out


ALTERNATIVES: list[Alternative] = []


def alternative(family: str, name: str, worlds: list[str]):
    def deco(fn):
        key = (family, f"{fn.__module__}.{fn.__qualname__}")
        if key not in {(a.family, f"{a.fn.__module__}.{a.fn.__qualname__}") for a in ALTERNATIVES}:  # imported twice
            ALTERNATIVES.append(Alternative(family, name, tuple(worlds), fn))
        return fn
    return deco


def load_all() -> list[Alternative]:
    for m in pkgutil.iter_modules([str(Path(__file__).parent)]):
        importlib.import_module(f"{__name__}.{m.name}")
    return ALTERNATIVES
