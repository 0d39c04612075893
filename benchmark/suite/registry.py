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

These are the engine's registries. The class they are built from, `load_track_module` that fills them, and the
grader's own registry (`@product_validator`, PRODUCT_VALIDATORS) live on the gold side, in graders.registry.
"""
from __future__ import annotations

from graders.registry import Registry

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


# Scripted agents' per-family code (gold side, under graders/): (world_ref) -> list of code cells whose last
# cell prints the final JSON report as its last line of output.
ORACLES = Registry("oracle solution")
NAIVES = Registry("naive solution")


def oracle(family_id: str, version: str = "1"):
    return ORACLES.register(family_id, version)


def naive(family_id: str, version: str = "1"):
    return NAIVES.register(family_id, version)


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
