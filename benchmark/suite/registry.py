"""Name -> implementation registries. Manifests refer to substrates, recipes and solvers by name only.

A track module (named in its track.yaml) registers its parts with the decorators below when imported:

    @substrate("histone_panel")
    def panel(seed: int, **params) -> HistoneData: ...          # in-memory, deterministic in (seed, params)

    @recipe("histone", "swap_chip_input")
    def swap(data: HistoneData, rng: np.random.Generator, **params) -> HistoneData: ...

    @writer("histone")
    def write(data: HistoneData, w: CanonicalWriter) -> None: ... # every public file through w

    @solver("histone.L2.quantify", version="1")
    def quantify(world_dir: Path, world: World) -> dict: ...      # golden values, JSON-serialisable
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from benchmark.errors import BenchmarkError


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
                raise BenchmarkError(f"{self.kind} '{name}' is registered twice ({fn.__module__}); rename one")
            self._items[name] = Entry(name, fn, version)
            return fn

        return deco

    def get(self, name: str) -> Entry:
        if name not in self._items:
            known = ", ".join(sorted(self._items)) or "none"
            raise BenchmarkError(f"no {self.kind} named '{name}' is registered (known: {known})")
        return self._items[name]

    def __contains__(self, name: str) -> bool:
        return name in self._items

    def names(self) -> list[str]:
        return sorted(self._items)


SUBSTRATES = Registry("substrate")
RECIPES = Registry("recipe")
WRITERS = Registry("writer")
SOLVERS = Registry("solver")


def substrate(name: str, version: str = "1"):
    return SUBSTRATES.register(name, version)


def recipe(track: str, name: str, version: str = "1"):
    return RECIPES.register(f"{track}.{name}", version)


def writer(track: str, version: str = "1"):
    return WRITERS.register(track, version)


def solver(name: str, version: str = "1"):
    return SOLVERS.register(name, version)


def load_track_module(module: str) -> None:
    """Import a track's module so its decorators run; errors name the module."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise BenchmarkError(f"track module '{module}' cannot be imported ({exc}); check 'module' in its track.yaml") from exc


# Scripted agents' per-family code (gold side, under graders/): (world_ref) -> list of code cells whose last
# cell prints the final JSON report as its last line of output.
ORACLES = Registry("oracle solution")
NAIVES = Registry("naive solution")


def oracle(family_id: str, version: str = "1"):
    return ORACLES.register(family_id, version)


def naive(family_id: str, version: str = "1"):
    return NAIVES.register(family_id, version)


# Track-specific judges of work products no generic check kind fits (a sorted BAM, a renamed header): gold side.
#   @product_validator("histone.sorted_bam")
#   def sorted_bam(path: Path, golden: dict, check: Check) -> tuple[float, str]: ...   # credit in [0, 1], detail
PRODUCT_VALIDATORS = Registry("product validator")


def product_validator(name: str, version: str = "1", compressed: tuple[str, ...] = ()):
    """A track's judge of one kind of work product. `compressed`: the formats it reads ("bgzf" for a BAM, "gzip");
    any other compressed product is refused before it runs (graders.product_io), and it runs in the capped worker."""
    reg = PRODUCT_VALIDATORS.register(name, version)

    def deco(fn):
        fn.accepts_compression = tuple(compressed)
        return reg(fn)

    return deco


# A track's host of evidence-grounding items (track.yaml `grounding_module`, items in worlds/<track>/grounding.yaml):
# a subclass of benchmark.grounding.host.GroundingHost, instantiated once by the protocol.
#   @grounding_host("histone")
#   class HistoneHost(GroundingHost): ...
GROUNDING_HOSTS = Registry("grounding host")


def grounding_host(track: str, version: str = "1"):
    return GROUNDING_HOSTS.register(track, version)


# Test support, gold side: how a hand-written report's work product is derived from one of the world's own files
# (worlds/<track>/reports/*.yaml `products_world: {NAME: {from: public file, op: maker name}}`).
#   @product_maker("histone.sort_index")
#   def sort_index(src: Path, out: Path) -> None: ...
PRODUCT_MAKERS = Registry("product maker")


def product_maker(name: str, version: str = "1"):
    return PRODUCT_MAKERS.register(name, version)
