"""The grounding host contract: what a track provides so the grounding protocol can build, verify and run its items.

A track that hosts evidence-grounding items names a `grounding_module` in its track.yaml; that module registers one
host class with `@grounding_host("<track>")` (benchmark.suite.registry); its items live in `worlds/<track>/grounding.yaml`.
The protocol (items, build, run, metrics) is generic: everything about the data's shape, its files and its
statistics comes from the host.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Callable, ClassVar

import yaml
from pydantic import BaseModel

from benchmark.errors import BenchmarkError
from benchmark.suite.loader import WORLDS_ROOT


class GroundingHost(ABC):
    """One track's substrate for grounding items. `d` below is one version of the data, any Python object."""

    families: ClassVar[tuple[str, ...]]
    """The evidence families its items may use (an item's `family` must be one of them)."""
    assay: ClassVar[str]
    """The assay in one line, as the prompt names it: "...a multiple-choice question about the {assay} in your
    working directory"."""
    files: ClassVar[str]
    """The files the agent finds in a version's folder, in one paragraph (the prompt's `Files:` line)."""
    stat_source: ClassVar[str]
    """ONE Python source text defining `load(root)` (a version's files read back from disk) and
    `reference_statistic(spec, options, data)` -> {"answer": letter or None, "values": {letter: float or None},
    "reason": str}. It is run after graders.grounding.COMMON_SOURCE (imports `json`; `decide(values, missing, margin,
    direction)`, the generic margin/tie rule), on the host by the verifier and in the sandbox by the scripted oracle,
    so it may import only the standard library and the track's `python_packages`."""
    ops: ClassVar[dict[str, Callable[..., Any]]]
    """Named withdrawal and flip operations, each `fn(d, rng, **params) -> d` (params: the item's `withdrawal` or
    `flip` mapping less `op` and `answer`); raise BenchmarkError when a parameter names nothing in the data."""
    dataset_model: ClassVar[type[BaseModel] | None] = None
    """The pydantic model of a grounding.yaml `datasets` entry (None: the track declares no datasets)."""
    anon_families: ClassVar[tuple[str, ...]] = ()
    """Families whose items name entities that anonymisation hides (empty: anonymisation not supported)."""
    anon_prefix: ClassVar[str] = "G"
    """Prefix of the opaque identifiers (G12345)."""

    @abstractmethod
    def base_data(self, dataset: str | None, datasets: dict[str, BaseModel]) -> Any:
        """The original data of an item: the whole substrate (dataset None) or the named dataset, a fresh copy."""

    @abstractmethod
    def null(self, d: Any, rng) -> Any:
        """The null version: entities permuted, identifiers replaced by opaque ones, the supported answer kept."""

    @abstractmethod
    def write_version(self, d: Any, root: Path) -> list[str]:
        """Write every file of one version through benchmark.suite.canonical.CanonicalWriter(root) (same data, same
        bytes); return the relative paths written."""

    def verify_extra(self, item, cls: str, root: Path, data: Any, original: Any) -> list[str]:
        """Substrate checks beyond the statistic (empty list: none failed), e.g. a deleted entity appears in no file,
        a null version keeps no original identifier. `item` is as the agent sees it (anonymised when built so),
        `data` what `load(root)` read back from disk, `original` the item's original version in memory."""
        return []

    def anon_names(self) -> tuple[str, ...]:
        """The names that map to opaque identifiers (in the data, the item text and the statistic parameters)."""
        raise BenchmarkError(f"{type(self).__name__} does not support anonymisation")

    def anonymise_data(self, d: Any, mapping: dict[str, str]) -> Any:
        """A copy of `d` with every name in `mapping` replaced by its opaque identifier."""
        raise BenchmarkError(f"{type(self).__name__} does not support anonymisation")


def hosting_tracks(root: Path = WORLDS_ROOT) -> dict[str, str]:
    """{track: grounding_module} of every track under `root` whose track.yaml names a grounding_module."""
    out = {}
    for tpath in sorted(Path(root).glob("*/track.yaml")):
        try:
            doc = yaml.safe_load(tpath.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise BenchmarkError(f"{tpath}: not readable YAML ({exc})") from exc
        if doc.get("grounding_module"):
            out[tpath.parent.name] = doc["grounding_module"]
    return out


_HOSTS: dict[str, GroundingHost] = {}


def load_host(track: str, module: str | None = None) -> GroundingHost:
    """The host instance of `track` (its grounding_module imported once; found under WORLDS_ROOT if not given)."""
    if track in _HOSTS:
        return _HOSTS[track]
    from benchmark.suite.registry import GROUNDING_HOSTS
    from graders.registry import load_track_module

    if module is None:
        module = hosting_tracks().get(track)
        if module is None:
            raise BenchmarkError(f"track '{track}' hosts no grounding items: its track.yaml under {WORLDS_ROOT} names "
                                 "no grounding_module")
    load_track_module(module)
    if track not in GROUNDING_HOSTS:
        raise BenchmarkError(f"{module} registers no grounding host for track '{track}'; decorate its host class with "
                             f"@grounding_host({track!r})")
    cls = GROUNDING_HOSTS.get(track).fn
    if not (isinstance(cls, type) and issubclass(cls, GroundingHost)):
        raise BenchmarkError(f"{module}: @grounding_host({track!r}) must decorate a subclass of "
                             "benchmark.grounding.host.GroundingHost")
    _HOSTS[track] = cls()
    return _HOSTS[track]

