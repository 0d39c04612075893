"""Item manifests: `worlds/<track>/grounding.yaml` of every track whose track.yaml names a `grounding_module`.

An item: question, options, key, background, the pre-registered reference statistic (its kind and parameters; the
code is the host's `stat_source`), the withdrawal and flip operations (the host's `ops`) and optionally a dataset
(the file's `datasets`, in the host's `dataset_model`). An item knows its track (the folder it was loaded from);
ids are unique across tracks.

Anonymisation (seed 000 App. G): every name the host lists (`anon_names`, e.g. gene symbols) maps to an opaque
identifier by a fixed random permutation, consistently in the data (the host's `anonymise_data`) and in the
question, options, background and statistic and operation parameters.
"""
from __future__ import annotations

import fnmatch
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from benchmark.errors import BenchmarkError
from benchmark.grounding.host import GroundingHost, hosting_tracks, load_host
from benchmark.suite.loader import WORLDS_ROOT

CONDITIONS = ("original", "null", "withdrawal", "flip", "nodata")
VERSIONS = ("original", "null", "withdrawal", "flip")
INSUFFICIENT_TEXT = "The provided data are insufficient to determine the answer"
ANON_SEED = 20260901
ITEMS_FILE = "grounding.yaml"


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    track: str = ""  # set by the loader from the folder the file lies in
    family: str
    question: str
    options: dict[str, str]
    key: str
    background: str
    dataset: str | None = None  # None: the host's whole substrate
    statistic: dict[str, Any]
    withdrawal: dict[str, Any]
    flip: dict[str, Any]
    seed: int = 0

    @model_validator(mode="after")
    def _check(self) -> "Item":
        if sorted(self.options) != ["A", "B", "C", "D"][: len(self.options)] or len(self.options) < 3:
            raise ValueError(f"{self.id}: options must be lettered A, B, C(, D)")
        if self.key not in self.options:
            raise ValueError(f"{self.id}: key {self.key} is not an option")
        fa = self.flip.get("answer")
        if fa not in self.options or fa == self.key:
            raise ValueError(f"{self.id}: flip.answer must be an option other than the key")
        if "kind" not in self.statistic or "margin" not in self.statistic:
            raise ValueError(f"{self.id}: statistic needs kind and margin")
        for name in ("withdrawal", "flip"):
            if "op" not in getattr(self, name):
                raise ValueError(f"{self.id}: {name} needs an op")
        return self

    @property
    def flip_answer(self) -> str:
        return self.flip["answer"]

    @property
    def host(self) -> GroundingHost:
        return load_host(self.track)

    @property
    def anonymisable(self) -> bool:
        """Whether the item names entities its host anonymises (seed 000 App. G: the gene-named families)."""
        return self.family in self.host.anon_families

    def supported(self, condition: str) -> str | None:
        """s*(version): the answer the data of each condition support (None: undefined / no data)."""
        return {"original": self.key, "null": self.key, "flip": self.flip_answer}.get(condition)


class ItemFile(BaseModel):
    """One track's grounding.yaml."""

    model_config = ConfigDict(extra="forbid")
    datasets: dict[str, dict[str, Any]] = {}
    items: list[Item]


@dataclass(frozen=True)
class Catalogue:
    """Every hosting track's items, in track order then file order."""

    items: list[Item]
    datasets: dict[str, dict[str, BaseModel]]  # track -> dataset name -> the host's dataset model
    paths: dict[str, Path]                     # track -> its grounding.yaml


def _first_line(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        e = exc.errors()[0]
        return f"field '{'.'.join(map(str, e['loc']))}': {e['msg']}"
    return str(exc).splitlines()[0]


def load_file(path: Path, track: str, host: GroundingHost) -> tuple[list[Item], dict[str, BaseModel]]:
    """One track's items and datasets, checked against its host; errors name the file, the field and the fix."""
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        for raw in doc.get("items") or []:
            if isinstance(raw, dict):
                if raw.get("track", track) != track:
                    raise ValueError(f"item {raw.get('id')}: field 'track' is {raw['track']!r} but the file lies in "
                                     f"worlds/{track}/; drop the field (the folder names the track)")
                raw["track"] = track
        f = ItemFile.model_validate(doc)
    except (OSError, yaml.YAMLError, ValueError) as exc:
        raise BenchmarkError(f"{path}: not a valid grounding item file: {_first_line(exc)}") from exc
    datasets: dict[str, BaseModel] = {}
    if f.datasets and host.dataset_model is None:
        raise BenchmarkError(f"{path}: field 'datasets': the {track} grounding host declares no dataset_model; "
                             "remove the field or give the host one")
    for name, raw in f.datasets.items():
        try:
            datasets[name] = host.dataset_model.model_validate(raw)
        except ValidationError as exc:
            raise BenchmarkError(f"{path}: dataset {name}: {_first_line(exc)}") from exc
    ids = [i.id for i in f.items]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise BenchmarkError(f"{path}: duplicate item ids {dup}; rename them")
    for i in f.items:
        if i.family not in host.families:
            raise BenchmarkError(f"{path}: item {i.id}: field 'family': {i.family!r} is not a family of the {track} "
                                 f"host (known: {', '.join(host.families)}); use one of them")
        if i.dataset is not None and i.dataset not in datasets:
            raise BenchmarkError(f"{path}: item {i.id}: field 'dataset': unknown dataset {i.dataset!r}; declare it "
                                 "under `datasets` or drop the field")
        for name in ("withdrawal", "flip"):
            op = getattr(i, name)["op"]
            if op not in host.ops:
                raise BenchmarkError(f"{path}: item {i.id}: field '{name}.op': unknown operation {op!r} "
                                     f"(the {track} host knows {', '.join(sorted(host.ops))})")
    return f.items, datasets


_DATASETS: dict[str, dict[str, BaseModel]] = {}  # track -> its datasets, as last loaded


def datasets_of(track: str) -> dict[str, BaseModel]:
    """A hosting track's datasets (its grounding.yaml `datasets`, in the host's dataset_model)."""
    if track not in _DATASETS:
        load_items()
    return _DATASETS.get(track, {})


@functools.lru_cache(maxsize=4)
def load_items(root: Path | None = None) -> Catalogue:
    """The items of every hosting track under `root` (default: WORLDS_ROOT)."""
    root = Path(root or WORLDS_ROOT)
    items: list[Item] = []
    datasets: dict[str, dict[str, BaseModel]] = {}
    paths: dict[str, Path] = {}
    seen: dict[str, Path] = {}
    for track, module in hosting_tracks(root).items():
        path = root / track / ITEMS_FILE
        if not path.exists():
            raise BenchmarkError(f"{root / track / 'track.yaml'}: field 'grounding_module' is set but {path} does not "
                                 "exist; add the items or drop the field")
        its, datasets[track] = load_file(path, track, load_host(track, module))
        for i in its:
            if i.id in seen:
                raise BenchmarkError(f"grounding item id {i.id!r} is used in {seen[i.id]} and in {path}; ids must be "
                                     "unique across tracks, rename one")
            seen[i.id] = path
        items += its
        paths[track] = path
    _DATASETS.update(datasets)
    return Catalogue(items, datasets, paths)


def select(ids: list[str] | None = None, tracks: list[str] | None = None, root: Path | None = None) -> list[Item]:
    """Items whose id matches any of `ids` (glob patterns) on any of `tracks` (default: all)."""
    cat = load_items(root)
    if tracks:
        unknown = sorted(set(tracks) - set(cat.paths))
        if unknown:
            raise BenchmarkError(f"track(s) {', '.join(unknown)} host no grounding items (hosting tracks: "
                                 f"{', '.join(cat.paths) or 'none'})")
    out = [i for i in cat.items if (not tracks or i.track in tracks)
           and (not ids or any(fnmatch.fnmatch(i.id, p) for p in ids))]
    if (ids or tracks) and not out:
        where = f" on {', '.join(tracks)}" if tracks else ""
        raise BenchmarkError(f"no grounding item matches {' '.join(ids or [])}{where}; see `python -m benchmark grounding items`")
    return out


# ---------------------------------------------------------------- anonymisation

@functools.lru_cache(maxsize=8)
def name_map(names: tuple[str, ...], prefix: str = "G") -> dict[str, str]:
    """A fixed random permutation of the names onto opaque identifiers (prefix + 5 digits)."""
    import numpy as np

    rng = np.random.default_rng(ANON_SEED)
    ids = rng.choice(np.arange(10000, 100000), size=len(names), replace=False)
    return {g: f"{prefix}{int(i)}" for g, i in zip(sorted(names), ids)}


def anon_map(host: GroundingHost) -> dict[str, str]:
    return name_map(tuple(host.anon_names()), host.anon_prefix)


def _pattern(mapping: dict[str, str]) -> re.Pattern:
    alts = "|".join(re.escape(g) for g in sorted(mapping, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9.\-])({alts})(?![A-Za-z0-9.\-])")


def anonymise_text(text: str, mapping: dict[str, str]) -> str:
    return _pattern(mapping).sub(lambda m: mapping[m.group(1)], text)


def anonymise_value(v: Any, mapping: dict[str, str]) -> Any:
    if isinstance(v, str):
        return anonymise_text(v, mapping)
    if isinstance(v, dict):
        return {anonymise_value(k, mapping): anonymise_value(x, mapping) for k, x in v.items()}
    if isinstance(v, list):
        return [anonymise_value(x, mapping) for x in v]
    return v


def anonymised(item: Item) -> Item:
    """The item with every name its host anonymises replaced by the opaque identifier (text, options, statistic,
    operations)."""
    m = anon_map(item.host)
    d = item.model_dump()
    for k in ("question", "background", "options", "statistic", "withdrawal", "flip"):
        d[k] = anonymise_value(d[k], m)
    return Item.model_validate(d)
