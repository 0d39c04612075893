"""The name registries' machinery and the gold side's own registry: what graders/ needs, with nothing of the engine.

A registry maps a name a manifest gives to the implementation a track module registered under it, when imported
(`load_track_module`). The engine's registries (substrates, recipes, writers, solvers, scripted cells, grounding
hosts, product makers) are built from the same class in benchmark.suite.registry; the one the grader reads lives
here: the track-specific judges of work products no generic check kind fits (a sorted BAM, a renamed header).

    @product_validator("histone.sorted_bam", compressed=("bgzf",))
    def sorted_bam(path: Path, golden: dict, check: Check) -> tuple[float, str]: ...   # credit in [0, 1], detail
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable


class RegistryError(Exception):
    """A name registered twice, a name nobody registered, or a track module that cannot be imported: an expected
    failure the CLI prints as one sentence, as it does a benchmark.errors.BenchmarkError (graders/ import nothing
    from benchmark/, so this is not one; the engine's handlers name both)."""


@dataclass(frozen=True)
class Entry:
    name: str
    fn: Callable[..., Any]
    version: str = "1"


class Registry:
    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, Entry] = {}

    def register(self, name: str, version: str = "1") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            if name in self._items and self._items[name].fn.__qualname__ != fn.__qualname__:
                raise RegistryError(f"{self.kind} '{name}' is registered twice ({fn.__module__}); rename one")
            self._items[name] = Entry(name, fn, version)
            return fn

        return deco

    def get(self, name: str) -> Entry:
        if name not in self._items:
            known = ", ".join(sorted(self._items)) or "none"
            raise RegistryError(f"no {self.kind} named '{name}' is registered (known: {known})")
        return self._items[name]

    def __contains__(self, name: str) -> bool:
        return name in self._items

    def names(self) -> list[str]:
        return sorted(self._items)


def load_track_module(module: str) -> None:
    """Import a track's module so its decorators run; errors name the module."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise RegistryError(f"track module '{module}' cannot be imported ({exc}); check 'module' in its track.yaml") from exc


# Track-specific judges of work products no generic check kind fits: gold side, read by graders.checks and the
# capped worker (graders.capped), filled by each track's solver module.
PRODUCT_VALIDATORS = Registry("product validator")


def product_validator(name: str, version: str = "1", compressed: tuple[str, ...] = ()):
    """A track's judge of one kind of work product. `compressed`: the formats it reads ("bgzf" for a BAM, "gzip");
    any other compressed product is refused before it runs (graders.product_io), and it runs in the capped worker."""
    reg = PRODUCT_VALIDATORS.register(name, version)

    def deco(fn):
        fn.accepts_compression = tuple(compressed)
        return reg(fn)

    return deco
