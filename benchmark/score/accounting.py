"""Dated rate cards and cost accounting (SPEC R10, seed 001 L.1-L.6).

Token counts are the archival record; dollars are rendered from a dated rate card under `pricing/` and can be
recomputed at any later price (L.1 (2)).

A rate card (`pricing/<date>.yaml`, schema `RateCard` below) carries its date, its source, the conversion rates
of the currencies it quotes (units per USD, with their source), and per model: input and output price per
million tokens in the entry's currency, an optional long-context rule and optional peak-band (time-of-day)
rates. Model keys are litellm model strings; an entry may list `aliases`, and a key may be a glob
(`scripted/*`); an exact key or alias wins over a glob, and among globs the longest pattern wins.

Rules:
* The card in force for an evaluation date is the latest card dated on or before that date.
* cost = tokens_in x input rate + tokens_out x output rate, divided by 10^6, converted to USD.
* Long context: seed 001 L.2 keeps usage per task, not per request, so a task whose recorded input tokens exceed
  the threshold has the multipliers applied to all of that task's usage. This is an upper bound.
* Peak bands: records do not keep the provider's billing time band, so, as in L.1 (3), the highest rate of the
  schedule (base or any band) is used for each of input and output. Passing a timestamp picks the band in force.
* A model missing from the card (or a date with no card in force) is *unpriced*: its cost is `None` and the
  model is named; it is never counted as zero. Zero-priced entries (local and scripted models) are real zeros.
"""
from __future__ import annotations

import datetime as dt
import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from benchmark.errors import BenchmarkError, ManifestError
from benchmark.suite.loader import REPO_ROOT, _line_of, read_yaml, validate

PRICING_ROOT = REPO_ROOT / "pricing"


class LongContext(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    threshold_tokens: int = Field(gt=0, description="input tokens above which the multipliers apply")
    input_multiplier: float = Field(ge=1)
    output_multiplier: float = Field(ge=1)


class PeakBand(BaseModel):
    """A time-of-day window with its own rates (e.g. a provider's peak band)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str
    start: dt.time
    end: dt.time = Field(description="exclusive; a window may wrap past midnight (end < start)")
    timezone_offset_hours: float = Field(0.0, description="offset of the band's clock from UTC")
    input: float = Field(ge=0)
    output: float = Field(ge=0)

    def covers(self, at: dt.datetime) -> bool:
        if at.tzinfo is not None:
            at = at.astimezone(dt.timezone.utc).replace(tzinfo=None)
        t = (at + dt.timedelta(hours=self.timezone_offset_hours)).time()
        if self.start <= self.end:
            return self.start <= t < self.end
        return t >= self.start or t < self.end


class ModelPrice(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    input: float = Field(ge=0, description="price per million input tokens, in `currency`")
    output: float = Field(ge=0, description="price per million output tokens, in `currency`")
    currency: str | None = Field(None, description="defaults to the card's currency")
    long_context: LongContext | None = None
    peak_bands: list[PeakBand] = Field(default_factory=list)
    aliases: list[str] = Field(default_factory=list)
    source: str = ""
    note: str = ""


class RateCard(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    date: dt.date
    source: str = Field(min_length=1)
    description: str = ""
    currency: str = "USD"
    currency_per_usd: dict[str, float] = Field(default_factory=dict, description="units of each currency per 1 USD")
    fx_source: str = ""
    models: dict[str, ModelPrice]

    @field_validator("currency_per_usd")
    @classmethod
    def _positive(cls, v: dict[str, float]) -> dict[str, float]:
        for cur, rate in v.items():
            if not rate > 0:
                raise ValueError(f"the conversion rate of {cur} must be positive")
        return v

    @field_validator("models")
    @classmethod
    def _no_catch_all(cls, v: dict[str, "ModelPrice"]) -> dict[str, "ModelPrice"]:
        """A glob may widen a model name within one provider (`scripted/*`), never across providers (`*`, `*/x`):
        a catch-all would price every unknown model, e.g. at $0, instead of reporting it unpriced."""
        for key in v:
            provider = key.split("/", 1)[0]
            if any(c in provider for c in "*?[") or "/" not in key and any(c in key for c in "*?["):
                raise ValueError(f"'{key}' is a catch-all pattern that would price unknown models; "
                                 "name the model, or glob within one provider such as 'scripted/*'")
        return v

    @model_validator(mode="after")
    def _currencies_known(self) -> "RateCard":
        for name, p in self.models.items():
            cur = p.currency or self.currency
            if cur != "USD" and cur not in self.currency_per_usd:
                raise ValueError(f"@models.{name}.currency@{cur} has no conversion rate; add it under currency_per_usd")
        return self

    def usd_per_unit(self, currency: str) -> float:
        return 1.0 if currency == "USD" else 1.0 / self.currency_per_usd[currency]

    def lookup(self, model: str) -> tuple[str, ModelPrice] | None:
        """The entry pricing `model`: exact key, then alias, then the longest matching glob key."""
        if model in self.models:
            return model, self.models[model]
        for key in sorted(self.models):
            if model in self.models[key].aliases:
                return key, self.models[key]
        globs = sorted((k for k in self.models if any(c in k for c in "*?[") and fnmatch.fnmatchcase(model, k)),
                       key=lambda k: (-len(k), k))
        return (globs[0], self.models[globs[0]]) if globs else None


@dataclass(frozen=True)
class Priced:
    """The cost of one block of usage. `usd` is None when the model is unpriced."""

    model: str
    tokens_in: float
    tokens_out: float
    usd: float | None
    card: str | None = None  # the card's date (ISO) that priced it
    entry: str | None = None  # the card key that priced it
    long_context: bool = False
    peak: bool = False
    reason: str = ""  # why unpriced

    @property
    def unpriced(self) -> bool:
        return self.usd is None


@dataclass
class CardFile:
    path: Path
    card: RateCard


_DATED = re.compile(r"^(\d{4}-\d{2}-\d{2})")


def load_card(path: Path) -> RateCard:
    """Validate one card; a file named for a date (pricing/<date>.yaml) must carry that date."""
    data, node = read_yaml(path)
    card = validate(RateCard, data, path, node)
    m = _DATED.match(Path(path).stem)
    if m:
        try:
            named = dt.date.fromisoformat(m.group(1))
        except ValueError:
            raise ManifestError(path, "<file name>", f"'{m.group(1)}' in the file name is not a real date; "
                                "name the card <date>.yaml after its date field", None) from None
        if named != card.date:
            raise ManifestError(path, "date", f"{card.date} does not match the file name's date {named}; "
                                "rename the file or correct the date", _line_of(node, ("date",)))
    return card


def load_cards(root: Path | None = None) -> list[CardFile]:
    root = Path(root) if root is not None else PRICING_ROOT
    files = sorted(root.glob("*.yaml")) + sorted(root.glob("*.yml"))
    out = [CardFile(p, load_card(p)) for p in files]
    for cf in out:  # in the pricing folder the file name says which card is in force when: it must be its date
        if not _DATED.match(cf.path.stem):
            raise ManifestError(cf.path, "<file name>", f"a rate card in {root} is named after its date; rename it "
                                f"{cf.card.date.isoformat()}.yaml")
    seen: dict[dt.date, Path] = {}
    for cf in out:
        if cf.card.date in seen:
            raise ManifestError(cf.path, "date", f"{cf.card.date} is also the date of {seen[cf.card.date].name}; one card per date")
        seen[cf.card.date] = cf.path
    return sorted(out, key=lambda c: c.card.date)


class Pricing:
    """A set of dated cards; prices usage with the card in force on an evaluation date."""

    def __init__(self, cards: list[CardFile] | list[RateCard]):
        self.cards: list[RateCard] = sorted((c.card if isinstance(c, CardFile) else c for c in cards), key=lambda c: c.date)

    @classmethod
    def from_dir(cls, root: Path | None = None) -> "Pricing":
        return cls(load_cards(root))

    def card_for(self, date: dt.date) -> RateCard | None:
        """The latest card dated on or before `date`."""
        found = None
        for c in self.cards:
            if c.date <= date:
                found = c
        return found

    def price(self, model: str, tokens_in: float, tokens_out: float, date: dt.date,
              at: dt.datetime | None = None) -> Priced:
        card = self.card_for(date)
        if card is None:
            first = self.cards[0].date.isoformat() if self.cards else "none"
            return Priced(model, tokens_in, tokens_out, None, reason=f"no rate card in force on {date.isoformat()} (earliest: {first})")
        return price_usage(card, model, tokens_in, tokens_out, at)


def price_usage(card: RateCard, model: str, tokens_in: float, tokens_out: float, at: dt.datetime | None = None) -> Priced:
    found = card.lookup(model)
    if found is None:
        return Priced(model, tokens_in, tokens_out, None, card=card.date.isoformat(),
                      reason=f"{model} is not on the {card.date.isoformat()} rate card")
    key, p = found
    rin, rout, peak = p.input, p.output, False
    if p.peak_bands:
        if at is None:  # billing band not retained: the schedule's highest rate (seed 001 L.1 (3))
            rin = max([p.input] + [b.input for b in p.peak_bands])
            rout = max([p.output] + [b.output for b in p.peak_bands])
            peak = True
        else:
            band = next((b for b in p.peak_bands if b.covers(at)), None)
            if band is not None:
                rin, rout, peak = band.input, band.output, True
    long_ctx = bool(p.long_context and tokens_in > p.long_context.threshold_tokens)
    if long_ctx:
        rin *= p.long_context.input_multiplier
        rout *= p.long_context.output_multiplier
    native = (tokens_in * rin + tokens_out * rout) / 1e6
    usd = native * card.usd_per_unit(p.currency or card.currency)
    return Priced(model, tokens_in, tokens_out, usd, card=card.date.isoformat(), entry=key, long_context=long_ctx, peak=peak)


@dataclass
class CostTotal:
    """A sum of priced usage that stays unpriced (usd None) when any part is unpriced."""

    tokens_in: float = 0.0
    tokens_out: float = 0.0
    calls: float = 0.0
    priced_usd: float = 0.0
    unpriced_models: set[str] = field(default_factory=set)
    long_context_tasks: float = 0.0
    estimated: bool = False  # some tokens were counted with the model's tokenizer (the endpoint reported no usage)

    def add(self, p: Priced, calls: float = 0.0, weight: float = 1.0, estimated: bool = False) -> None:
        self.estimated |= estimated
        self.tokens_in += p.tokens_in * weight
        self.tokens_out += p.tokens_out * weight
        self.calls += calls * weight
        if p.usd is None:
            self.unpriced_models.add(p.model)
        else:
            self.priced_usd += p.usd * weight
        self.long_context_tasks += weight * p.long_context

    def merge(self, other: "CostTotal") -> None:
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out
        self.calls += other.calls
        self.priced_usd += other.priced_usd
        self.unpriced_models |= other.unpriced_models
        self.long_context_tasks += other.long_context_tasks
        self.estimated |= other.estimated

    @property
    def usd(self) -> float | None:
        return None if self.unpriced_models else self.priced_usd

    @property
    def tokens(self) -> float:
        return self.tokens_in + self.tokens_out

    def as_dict(self) -> dict:
        return {"tokens_in": self.tokens_in, "tokens_out": self.tokens_out, "tokens_m": self.tokens / 1e6,
                "calls": self.calls, "usd": self.usd,
                "priced": not self.unpriced_models, "unpriced_models": sorted(self.unpriced_models),
                "estimated": self.estimated}


def efficiency(overall: float | None, total: CostTotal, assigned: int) -> dict:
    """Table 1's resource columns: Q/Mtok = Overall per million tokens; $/task = USD over assigned tasks;
    $/q.pt = ($/task) / Overall."""
    tok_m = total.tokens / 1e6
    per_task = None if total.usd is None or assigned == 0 else total.usd / assigned
    return {
        "tokens_m": tok_m,
        "q_per_mtok": (overall / tok_m) if overall is not None and tok_m > 0 else None,
        "usd_total": total.usd,
        "usd_per_task": per_task,
        "usd_per_qpt": (per_task / overall) if per_task is not None and overall else None,
        "unpriced_models": sorted(total.unpriced_models),
        "usd_estimated": total.estimated,
    }


def parse_date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text[:10])
    except ValueError:
        raise BenchmarkError(f"'{text}' is not a date; use YYYY-MM-DD") from None
