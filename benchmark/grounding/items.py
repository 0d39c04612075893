"""Item manifests (`worlds/<track>/grounding.yaml`, for the track whose track.yaml names a `grounding_module`): question, options, key, background, the pre-registered reference
statistic (its kind and parameters; the code is in graders/grounding.py), and the withdrawal and flip operations.

Gene-name anonymisation (seed 000 App. G): every gene symbol maps to an opaque identifier by a fixed random
permutation, consistently in the data (features), in marker-style population labels ("CD4+ ..."), and in the
question, options, background and statistic parameters.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, model_validator

from benchmark.errors import BenchmarkError
from benchmark.loader import WORLDS_ROOT


def grounding_track(root: Path = WORLDS_ROOT) -> tuple[str, str]:
    """(track, grounding_module) of the one track that hosts the grounding items; errors name the fix."""
    hosts = []
    for tpath in sorted(root.glob("*/track.yaml")):
        doc = yaml.safe_load(tpath.read_text(encoding="utf-8")) or {}
        if doc.get("grounding_module"):
            hosts.append((tpath.parent.name, doc["grounding_module"]))
    if len(hosts) != 1:
        raise BenchmarkError(f"the grounding protocol reads one item set, but {len(hosts)} tracks under {root} name a "
                             f"grounding_module ({', '.join(t for t, _ in hosts) or 'none'}); keep it on one track.yaml")
    return hosts[0]


ITEMS_PATH = WORLDS_ROOT / grounding_track()[0] / "grounding.yaml"
Family = Literal["marker", "abundance", "composition", "localisation", "de"]
CONDITIONS = ("original", "null", "withdrawal", "flip", "nodata")
VERSIONS = ("original", "null", "withdrawal", "flip")
INSUFFICIENT_TEXT = "The provided data are insufficient to determine the answer"
ANON_SEED = 20260901


class Split(BaseModel):
    """A documented split of the real cells into two samples: each cell goes to `names[1]` with probability
    p_after[its population] (default p_after['default']), by a seeded draw."""

    model_config = ConfigDict(extra="forbid")
    column: str = "sample"
    names: list[str]
    seed: int
    p_after: dict[str, float]
    description: str


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    family: Family
    question: str
    options: dict[str, str]
    key: str
    background: str
    dataset: str = "pbmc"
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
        return self

    @property
    def flip_answer(self) -> str:
        return self.flip["answer"]

    @property
    def gene_named(self) -> bool:
        return self.family in ("marker", "de", "localisation")

    def supported(self, condition: str) -> str | None:
        """s*(version): the answer the data of each condition support (None: undefined / no data)."""
        return {"original": self.key, "null": self.key, "flip": self.flip_answer}.get(condition)


class ItemSet(BaseModel):
    model_config = ConfigDict(extra="forbid")
    datasets: dict[str, Split] = {}
    items: list[Item]


@functools.lru_cache(maxsize=4)
def load_items(path: Path = ITEMS_PATH) -> ItemSet:
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        s = ItemSet.model_validate(doc)
    except (OSError, yaml.YAMLError, ValueError) as exc:
        raise BenchmarkError(f"{path}: not a valid grounding item file: {str(exc).splitlines()[0]}") from exc
    ids = [i.id for i in s.items]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise BenchmarkError(f"{path}: duplicate item ids {sorted(dup)}")
    for i in s.items:
        if i.dataset != "pbmc" and i.dataset not in s.datasets:
            raise BenchmarkError(f"{path}: item {i.id} names unknown dataset {i.dataset!r}")
    return s


def select(ids: list[str] | None = None, path: Path = ITEMS_PATH) -> list[Item]:
    import fnmatch

    items = load_items(path).items
    if not ids:
        return list(items)
    out = [i for i in items if any(fnmatch.fnmatch(i.id, p) for p in ids)]
    if not out:
        raise BenchmarkError(f"no grounding item matches {' '.join(ids)}; see `python -m benchmark grounding items`")
    return out


# ---------------------------------------------------------------- anonymisation

@functools.lru_cache(maxsize=2)
def gene_map(genes: tuple[str, ...]) -> dict[str, str]:
    import numpy as np

    rng = np.random.default_rng(ANON_SEED)
    ids = rng.choice(np.arange(10000, 100000), size=len(genes), replace=False)
    return {g: f"G{int(i)}" for g, i in zip(sorted(genes), ids)}


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


def anonymised(item: Item, genes: tuple[str, ...]) -> Item:
    """The item with every gene symbol replaced by its opaque identifier (text, options, statistic, operations)."""
    m = gene_map(genes)
    d = item.model_dump()
    for k in ("question", "background", "options", "statistic", "withdrawal", "flip"):
        d[k] = anonymise_value(d[k], m)
    return Item.model_validate(d)
