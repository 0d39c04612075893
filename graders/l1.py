"""L1 data-integrity grader: the behavioural state machine of seed 001 J.1 on a native 0-3 scale, with precision.

The report is defect-agnostic (graders/README.md section 4): a list of issues, each with a measured `value` and
the `output` its action wrote. Findings are graded, not words (graders/claims.py): an alarm (warning or blocking
issue) claims at most one catalogued defect, the one its category names, else the lead of its description; the
rest of its text is context. On a challenge world the diagnosis is the first alarm that claims the world's defect,
or whose measured value and work product check out against the golden whatever its words; it is complete only with
its measured value in tolerance, and its action is judged by checking the work product it names. A catalogued
defect that another alarm claims is invented unless the world has it or it is one of the family's declared
nuisance features (present, harmless, measurable) that the alarm describes; inventions cost on every world class.

| state                       | score | when                                                                    |
|-----------------------------|-------|-------------------------------------------------------------------------|
| DIAGNOSE-AND-ACT            | 3     | defect named with its measured value, every action check passes        |
| DIAGNOSE-AND-ACT-PARTIAL    | 2.5   | defect named, some action checks pass (or value missing + all pass)     |
| DIAGNOSE-NOT-ACT            | 2     | defect named with its measured value, no action check passes            |
| DIAGNOSE-NOT-ACT-PARTIAL    | 1.5   | defect named without its value (or only part of it), no action          |
| NOTICE-WRONG                | 0.5   | a problem raised, but not this defect                                   |
| MISS                        | 0     | data accepted, no warning                                               |
| CLEAN-CORRECT               | 3     | sound data accepted without an unsupported alarm                        |
| OVER-CAUTIOUS               | 1.5   | sound data accepted with unneeded caveats / cannot_determine            |
| FABRICATED                  | 0.5   | one catalogued defect invented on sound data (0 for more); on a         |
|                             |       | challenge world: what the report earns less 1.5 per invented defect     |
| FALSE-UNUSABLE              | 0     | sound data declared unusable                                            |
| ABSTAIN-RECOGNIZED          | 3     | undeterminable issue: abstained and named the specific limit            |
| ABSTAIN-OK                  | 2     | undeterminable issue: abstained without naming the limit                |
| OVER-DIAGNOSE               | 1     | undeterminable issue: a defect asserted as fact                         |
| NONCOMPLIANT                | 0     | report missing, malformed or off-schema                                 |

Why these numbers: a strategy that skips the analysis (flag every defect, hedge everywhere, trust everything)
must not beat blind trust by more than 5 points (issue 10); a vague alarm on a defective world (NOTICE-WRONG) and
a hedge on a sound one (OVER-CAUTIOUS) together must not out-earn accepting everything.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graders.manifest import FamilyManifest, L1World
from graders import claims
from graders.checks import CheckResult, as_number, flatten_text, get_path, run_check, run_checks
from graders.report import parse_report

GRADER_ID = "graders.l1"
GRADER_VERSION = "15"  # 15: a product action may read a file the diagnosing issue's action names beside its output; 14: an info note in its own words about the defect's subject whose specific value passes is noticed, as such an alarm is; 13: a fraction measured as its inverse where the issue states its value as a fold ("21.7x shallower": a depth ratio of 1/21.7); 12: a family may name a defect's subject in its own words (defect_subjects: AF1 for complemented_eaf) where the code's words are state words or an acronym; 11: a corrected copy is read by the columns it changes where the golden items are the original's columns (two technical replicates summed into one; a sample dropped from, or relabelled in, a VCF), in the original's own compression (a bgzipped VCF); an alarm in its own words (no catalogued claim) about the defect's subject whose specific measured value passes a measure check is the diagnosis (replicates that "agree less well", r = 0.895); 10: a count equal to the items the golden lists passes where the issue's own list passes (1 failed sample, listed; 2 swapped files, their corrected copies side by side); 9: a count of affected items over a total the rubric measures passes the fraction it reproduces; another alarm naming the same defect may carry its measured value; 8: a corrected copy's rows are compared by value (integers exactly, other numbers to 9 significant digits: a pandas reprint changes no row); 7: an alarm that measures the world's defect exactly under another name is a partial diagnosis, not an invention; a category naming the world's defect among others is its diagnosis where its value is the world's; a corrected copy that merges rows is read as the rows it removed; 6: topic words of the prompt alone claim no defect (claims.claim_catalog); 5: a corrected copy is read by the key form the golden items name (CHR:POS rows)
INVENTED_COST = 1.5  # native points per invented catalogued defect on a challenge world

STATE_SCORES: dict[str, float] = {
    "DIAGNOSE-AND-ACT": 3.0,
    "DIAGNOSE-AND-ACT-PARTIAL": 2.5,
    "DIAGNOSE-NOT-ACT": 2.0,
    "DIAGNOSE-NOT-ACT-PARTIAL": 1.5,
    "NOTICE-WRONG": 0.5,
    "MISS": 0.0,
    "CLEAN-CORRECT": 3.0,
    "OVER-CAUTIOUS": 1.5,
    "FABRICATED": 0.5,
    "FALSE-UNUSABLE": 0.0,
    "ABSTAIN-RECOGNIZED": 3.0,
    "ABSTAIN-OK": 2.0,
    "OVER-DIAGNOSE": 1.0,
    "NONCOMPLIANT": 0.0,
}
# What each state means, in the words the LLM verifier is given beside STATE_SCORES (one source for both).
STATE_MEANINGS: dict[str, str] = {
    "DIAGNOSE-AND-ACT": "defect named with its measured value, every action check met",
    "DIAGNOSE-AND-ACT-PARTIAL": "defect named and measured, some action checks met",
    "DIAGNOSE-NOT-ACT": "defect named and measured, no action check met",
    "DIAGNOSE-NOT-ACT-PARTIAL": "defect named without its measured value",
    "NOTICE-WRONG": "a problem raised, but not this defect",
    "MISS": "the defect not raised",
    "CLEAN-CORRECT": "sound data accepted as usable",
    "OVER-CAUTIOUS": "sound data accepted with unneeded caveats, or cannot_determine",
    "FABRICATED": f"one catalogued defect invented on sound data (0 for more); on a challenge world each invented "
                  f"defect costs {INVENTED_COST:g} native points",
    "FALSE-UNUSABLE": "sound data declared unusable",
    "ABSTAIN-RECOGNIZED": "the evidence cannot settle it and the report says why",
    "ABSTAIN-OK": "the evidence cannot settle it and the report abstains",
    "OVER-DIAGNOSE": "the evidence cannot settle it but the report asserts a defect",
    "NONCOMPLIANT": "a missing or off-schema report",
}
assert set(STATE_MEANINGS) == set(STATE_SCORES)

# The states the grader can reach on a world of each kind (its rubric's `expect`): a ruling outside them contradicts
# the world (MISS on sound data, CLEAN-CORRECT on a defect), so `ledger rule`, the web form and `ledger validate`
# refuse it with this list.
STATES_BY_EXPECT: dict[str, tuple[str, ...]] = {
    "accept": ("CLEAN-CORRECT", "OVER-CAUTIOUS", "FABRICATED", "FALSE-UNUSABLE", "NONCOMPLIANT"),
    "detect": ("DIAGNOSE-AND-ACT", "DIAGNOSE-AND-ACT-PARTIAL", "DIAGNOSE-NOT-ACT", "DIAGNOSE-NOT-ACT-PARTIAL",
               "NOTICE-WRONG", "MISS", "FABRICATED", "NONCOMPLIANT"),
    "abstain": ("ABSTAIN-RECOGNIZED", "ABSTAIN-OK", "OVER-DIAGNOSE", "MISS", "NONCOMPLIANT"),
}
assert all(set(v) <= set(STATE_SCORES) for v in STATES_BY_EXPECT.values())
assert set().union(*STATES_BY_EXPECT.values()) == set(STATE_SCORES)


def state_misfit(world: L1World, state: str) -> str | None:
    """Why an L1 state cannot be this world's grade (one sentence with the states it allows), or None if it can."""
    allowed = STATES_BY_EXPECT[world.rubric.expect]
    if state in allowed:
        return None
    kind = {"accept": "sound data (a clean or boundary world)", "detect": "a world with a defect to find",
            "abstain": "a world whose evidence cannot settle it"}[world.rubric.expect]
    return f"'{state}' is not a state of {world.id}, {kind}; use one of {', '.join(allowed)}"



def state_rules() -> str:
    """The state table as the LLM verifier reads it: every state's native score and meaning, from this module."""
    return "States (native 0-3): " + "; ".join(f"{k} {v:g} ({STATE_MEANINGS[k]})" for k, v in STATE_SCORES.items()) + "."


# Seed 001 J.1 reporting dimensions.
RECOGNITION_STATES = {"DIAGNOSE-NOT-ACT", "DIAGNOSE-AND-ACT", "DIAGNOSE-AND-ACT-PARTIAL"}
RESPONSE_STATES = {"DIAGNOSE-AND-ACT", "DIAGNOSE-AND-ACT-PARTIAL"}
MISCALIBRATED_STATES = {"OVER-DIAGNOSE", "FALSE-UNUSABLE", "OVER-CAUTIOUS", "NONCOMPLIANT"}


@dataclass(frozen=True)
class L1Grade:
    state: str
    score: float  # native 0-3
    reason: str
    checks: list[CheckResult] = field(default_factory=list)
    fabrication: float | None = None  # share of evidence claims with no support in the code (heuristic)
    invented: list[str] = field(default_factory=list)  # catalogued defects asserted that the world does not have
    grader: str = GRADER_ID
    grader_version: str = GRADER_VERSION

    @property
    def score100(self) -> float:
        return self.score * 100 / 3

    def dimensions(self, world_class: str) -> dict[str, float | None]:
        challenged = world_class == "challenge"
        return {
            "assessment_correctness": self.score / 3,
            "issue_recognition": float(self.state in RECOGNITION_STATES) if challenged else None,
            "methodological_response": float(self.state in RESPONSE_STATES) if challenged else None,
            "result_calibration": float(self.state not in MISCALIBRATED_STATES),
            "fabrication": self.fabrication,
        }


def _alarms(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in report.get("issues", []) if isinstance(i, dict) and i.get("severity") in ("warning", "blocking")]


def _measured_note(family: FamilyManifest, world: L1World, report: dict[str, Any], golden: dict[str, Any],
                   products: Path | None, inputs: Path | None = None) -> dict[str, Any] | None:
    """An `info` note that names the world's defect and measures it within tolerance: an expert who found the
    defect, sized it exactly and judged it harmless to the analysis (an ID suffix stripped in the join, or named in its
    own words about the defect's subject as `_recognised_by_subject` reads an alarm) noticed it,
    whatever severity they gave it (issue 38: such a report graded MISS, 0). Words alone in a note earn nothing, so a
    report listing every defect as a note gains nothing: the measured value is what a shortcut cannot give."""
    rub = world.rubric
    if not rub.measure or not world.defect:
        return None
    notes = [i for i in report.get("issues", []) if isinstance(i, dict) and i.get("severity") == "info"]
    for note in notes[:MAX_VALUE_READS]:
        if not names_defect(family, note, world.defect) and not _matches(list(rub.diagnosis), [_issue_text(note)]):
            continue
        if any(r.credit >= 1.0 for r in _measure(rub, {**report, **note}, golden, products, inputs)):
            return note
    # a note in its own words about the defect's subject, measured, is the same finding as such an alarm ("replicate 2
    # has more element-level variability", 0.8 against the log2-difference sd 0.77: blind study 31), under the
    # alarm's guard: a sweep of values over the subject recognises nothing
    own_words = _recognised_by_subject(family, world, report, notes, golden, products, inputs)
    return notes[own_words] if own_words is not None else None


def _measure(rub, scope: dict[str, Any], golden: dict[str, Any], products: Path | None,
             inputs: Path | None = None) -> list[CheckResult]:
    """The measure checks on an issue's value, and the count form of a fraction they measure: the prompt's `value` is
    "a count, a fraction or an offset", so a count of the affected items over a total another measure check names
    (the rows) passes the fraction check it reproduces (7,654 non-integer values of 7,657 rows is the 0.9996 measured)."""
    results = run_checks(list(rub.measure), scope, golden, products)
    v = as_number(scope.get("value"))
    if any(r.credit >= 1.0 for r in results) or v is None:
        return results
    fold = _fold_form(rub, scope, golden, products, v)
    if fold is not None:
        return results + [fold]
    if v < 1 or v != int(v):
        return results
    listed = _listed_count(rub, scope, golden, products, int(v), inputs)
    if listed is not None:
        return results + [listed]
    if v < 2:
        return results
    golden_of = lambda c: as_number(get_path(golden, c.golden)) if c.kind == "value" and c.golden else None  # noqa: E731
    fractions = [c for c in rub.measure if (g := golden_of(c)) is not None and 0 < g < 1 and c.field == "value"]
    totals = sorted({n for c in rub.measure if (n := golden_of(c)) is not None and n == int(n) and n >= v})
    for f in fractions:
        for n in totals:
            r = run_check(f, {**scope, "value": v / n}, golden, products)
            if r.credit >= 1.0:
                return results + [CheckResult(f"{f.id}_as_count", 1.0, f"{v:g} of {n:g} = {v / n:.4g}: {r.detail}")]
    return results


# a number stated as a fold ("21.7x shallower", "a 19-fold drop", "20 times fewer")
_FOLD = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(?:x|\u00d7|-?fold|times)(?!\w)", re.IGNORECASE)


def _fold_form(rub, scope: dict[str, Any], golden: dict[str, Any], products: Path | None, v: float) -> CheckResult | None:
    """A fraction measured as its inverse, where the issue's own words state its value as a fold: "HL60.final is
    21.7x shallower than the others" (value 21.7) measures a depth ratio of 1/21.7 (blind study 21: graded "no measured
    value" against the measured 0.053). A bare number above 1 is never read so; the words must say it is a fold."""
    if v <= 1:
        return None
    text = _issue_text(scope)
    if not any(abs(float(m.group(1)) - v) <= 1e-9 * v for m in _FOLD.finditer(text)):
        return None
    for c in rub.measure:
        g = as_number(get_path(golden, c.golden)) if c.kind == "value" and c.golden else None
        if g is None or not 0 < g < 1 or c.field != "value":
            continue
        r = run_check(c, {**scope, "value": 1 / v}, golden, products)
        if r.credit >= 1.0:
            return CheckResult(f"{c.id}_as_fold", 1.0, f"{v:g}-fold = {1 / v:.4g}: {r.detail}")
    return None


def _listed_count(rub, scope: dict[str, Any], golden: dict[str, Any], products: Path | None,
                  v: int, inputs: Path | None = None) -> CheckResult | None:
    """The prompt's "how many records are affected" read on the items the defect touches: a count equal to the number
    of items the golden lists for a listing action, where the issue's own list passes that action (1 failed sample,
    listed; a count with no list, or with a wrong one, earns nothing: the list is the measurement)."""
    for c in rub.actions:
        items = get_path(golden, c.golden) if c.kind == "product_items" and c.golden else None
        if isinstance(items, list) and len(items) == v:
            r = run_check(c, scope, golden, products, inputs)
            if r.credit >= 1.0:
                return CheckResult(f"{c.id}_count", 1.0, f"{v} = the {len(items)} affected item(s) the golden lists, "
                                                          f"listed in the issue's own product ({r.detail})")
    return None


def _issue_text(issue: dict[str, Any]) -> str:
    """What an issue itself says (not the rest of the report): its category, place and description."""
    return " ".join(str(issue.get(k) or "") for k in ("category", "where", "description", "evidence"))


def _matches(patterns: list[str], texts: list[str]) -> bool:
    return any(re.search(p, t, flags=re.IGNORECASE) for p in patterns for t in texts)


def claimed_defect(family: FamilyManifest, issue: dict[str, Any]) -> str | None:
    """The one catalogued defect an alarm claims (graders/claims.py): its category's, else its lead's, read with the
    catalogue's topic words (patterns the family's prompt itself matches) set aside (`claims.claim_catalog`)."""
    return claims.claimed_defect(claims.claim_catalog(family.defect_catalog, family.prompt), issue)


def names_defect(family: FamilyManifest, issue: dict[str, Any], code: str) -> bool:
    """Whether an issue's category or lead names `code` among the defects it names. An issue claims only the first
    (`claimed_defect`), but "unmapped barcodes from sequencing errors" also names the sequencing-error defect it
    is: where the issue's measured value is the world's, that name is its diagnosis, not a misnomer."""
    catalog = claims.claim_catalog(family.defect_catalog, family.prompt)
    return (code in claims.category_codes(catalog, issue.get("category"))
            or code in claims.named_codes(catalog, claims.lead(str(issue.get("description") or ""))))


SPECIFIC_VALUE = 10  # the least measured count that recognises the world's defect under another defect's name
MAX_VALUE_READS = 50  # alarms whose value and product are checked for recognition (a report of 10,000 alarms is cut)


def _recognised_by_work(rub, report: dict[str, Any], alarm: dict[str, Any], golden: dict[str, Any],
                        products: Path | None, inputs: Path | None = None) -> bool:
    """An alarm recognises the world's defect whatever its words when its measured value passes a measure check and
    the work product it names passes every product action: the numbers and the file say what the words may not.
    Only for rubrics with a product action (a value alone could be a coincidence)."""
    product_acts = [c for c in rub.actions if c.kind.startswith("product")]
    if not rub.measure or not product_acts or alarm.get("value") is None or not alarm.get("output"):
        return False
    scope = {**report, **alarm}
    if not any(r.credit >= 1.0 for r in _measure(rub, scope, golden, products, inputs)):
        return False
    return all(r.credit >= 1.0 for r in run_checks(product_acts, scope, golden, products, inputs))


def _specific(v: float | None) -> bool:
    """A value specific enough to tell which defect was measured: a non-integer (a correlation, a fraction, an offset
    measured to a tolerance) or a count of at least SPECIFIC_VALUE (1 sample, 2 columns, a fraction of 1.0 recur across
    a family's siblings)."""
    return v is not None and (v != int(v) or abs(v) >= SPECIFIC_VALUE)


def _recognised_by_subject(family: FamilyManifest, world: L1World, report: dict[str, Any], alarms: list[dict[str, Any]],
                           golden: dict[str, Any], products: Path | None, inputs: Path | None = None) -> int | None:
    """The alarm in its own words that recognises the world's defect, if one does: it claims no catalogued defect, is
    about the defect's subject (`claims.about_subject`: "replicate_reproducibility" for low_replicate_correlation) and
    its specific measured value (`_specific`) passes a measure check: "the two RNA replicates agree less well than
    expected", r = 0.895 against the golden 0.894, is that diagnosis whatever adjective it uses (issue 38, study 14).
    A measurement is one number: where several such alarms give values and any of them fails, none recognises (a
    sweep of values over one subject would otherwise hit the tolerance by design). Words of the subject alone earn
    nothing, nor does a value on another subject."""
    rub = world.rubric
    if not rub.measure or not world.defect:
        return None
    about = [i for i, a in enumerate(alarms[:MAX_VALUE_READS])
             if _specific(as_number(a.get("value"))) and claimed_defect(family, a) is None
             and claims.about_subject(world.defect, a, family.defect_subjects.get(world.defect, ()))]
    passing = [i for i in about
               if any(r.credit >= 1.0 for r in _measure(rub, {**report, **alarms[i]}, golden, products, inputs))]
    return passing[0] if passing and len(passing) == len(about) else None


def _nuisance_alarm(family: FamilyManifest, world_id: str, alarm: dict[str, Any], golden: dict[str, Any]) -> bool:
    return claims.describes_nuisance(family.nuisance, world_id, _issue_text(alarm), as_number(alarm.get("value")), golden)


def _invented(family: FamilyManifest, world: L1World, alarms: list[dict[str, Any]],
              exempt: set[int], golden: dict[str, Any]) -> list[str]:
    """Catalogued defects that alarms claim (one each) and the world does not have: not the world's own defect, not a
    declared nuisance feature the alarm describes, and not the claim of an alarm its own value and product support."""
    out: set[str] = set()
    for i, a in enumerate(alarms):
        code = claimed_defect(family, a)
        if code is None or code == world.defect or i in exempt:
            continue
        if code in claims.nuisance_codes(family.nuisance, world.id, _issue_text(a), value=as_number(a.get("value")),
                                         golden=golden):
            continue
        out.add(code)
    return sorted(out)


def _state(name: str, reason: str, checks: list[CheckResult] | None = None, fab: float | None = None,
           score: float | None = None, invented: list[str] | None = None) -> L1Grade:
    return L1Grade(name, STATE_SCORES[name] if score is None else max(0.0, score), reason, checks or [], fab,
                   invented=invented or [])


def grade_l1(world: L1World, family: FamilyManifest, golden: dict[str, Any], raw_report: Any,
             code_cells: list[str] | None = None, products: Path | None = None, inputs: Path | None = None) -> L1Grade:
    parsed = parse_report(raw_report, family.report_schema)
    if not parsed.ok:
        return _state("NONCOMPLIANT", parsed.error or "no report")
    report = parsed.report
    rub = world.rubric
    alarms = _alarms(report)
    assessment = report["assessment"]
    fab = fabrication_share(report, code_cells) if code_cells is not None else None

    if rub.expect == "accept":
        invented = _invented(family, world, alarms, set(), golden)
        inv_note = f"; invented: {', '.join(invented)}" if invented else ""
        if assessment == "unusable":
            return _state("FALSE-UNUSABLE", "sound data declared unusable" + inv_note, fab=fab, invented=invented)
        if invented:
            return _state("FABRICATED", f"{len(invented)} catalogued defect(s) asserted on sound data{inv_note}", fab=fab,
                          score=STATE_SCORES["FABRICATED"] if len(invented) == 1 else 0.0, invented=invented)
        # a declared nuisance feature, measured and reported, is a truth about sound data, not a caution
        unneeded = [a for a in alarms if not _nuisance_alarm(family, world.id, a, golden)]
        hedged = assessment == "cannot_determine" or (assessment == "usable_with_caveats" and not (alarms and not unneeded))
        if unneeded or hedged:
            return _state("OVER-CAUTIOUS", f"sound data accepted with unneeded caution ({assessment}, {len(unneeded)} alarms)", fab=fab)
        if fab is not None and fab > 0.5:
            return _state("FABRICATED", f"{fab:.0%} of evidence claims have no support in the executed code", fab=fab)
        return _state("CLEAN-CORRECT", "sound data accepted" + ("; its nuisance features reported" if alarms else ""), fab=fab)

    if rub.expect == "abstain":
        invented = _invented(family, world, alarms, set(), golden)
        inv_note = f"; invented: {', '.join(invented)}" if invented else ""
        named_limit = _matches(rub.limit, [flatten_text(report)])
        if assessment == "cannot_determine" and not invented:
            if named_limit:
                return _state("ABSTAIN-RECOGNIZED", "abstained and named the specific limit", fab=fab)
            return _state("ABSTAIN-OK", "abstained without naming the limit", fab=fab)
        asserted = any(claimed_defect(family, a) == world.defect or _matches(list(rub.diagnosis), [_issue_text(a)])
                       for a in alarms) if world.defect else False
        if assessment == "unusable" or invented or asserted:
            return _state("OVER-DIAGNOSE", "asserted a defect the evidence cannot establish" + inv_note, fab=fab, invented=invented)
        if alarms and named_limit:
            return _state("ABSTAIN-OK", "flagged the limit without abstaining", fab=fab)
        return _state("MISS", "accepted without recognising the limit", fab=fab)

    # expect == "detect": the diagnosing alarm is the first that claims the world's defect (its category, else the
    # lead of its description), or names it in the world's own diagnosis patterns, or whose measured value and work
    # product check out against the golden whatever its words
    by_work: set[int] = set()
    by_subject = False
    diag = None
    for i, a in enumerate(alarms):
        if claimed_defect(family, a) == world.defect or _matches(list(rub.diagnosis), [_issue_text(a)]):
            diag = a
            break
        if i < MAX_VALUE_READS and _recognised_by_work(rub, report, a, golden, products, inputs):
            by_work.add(i)
            diag = a
            break
    if diag is None:
        own_words = _recognised_by_subject(family, world, report, alarms, golden, products, inputs)
        if own_words is not None:
            diag, by_subject = alarms[own_words], True
    if diag is None:
        diag = _measured_note(family, world, report, golden, products, inputs)
    value_only = False
    if diag is None:
        # the world's defect measured exactly under another catalogued cause's name ("A1/A2 swapped" where AF1 is the
        # other allele's frequency: the same symptom, which the data may not tell apart) is a misdiagnosis, not an
        # invention: its value is what a shortcut cannot give; the diagnosis stays partial and its action is graded
        # (a value under uncatalogued words, with no product to back it, could be a coincidence: not recognised; so
        # could a small one: one sample, two columns, a fraction of 1.0 recur across the siblings of a family, so only
        # a count of at least SPECIFIC_VALUE is specific enough to tell which defect was measured)
        for i, a in enumerate(alarms[:MAX_VALUE_READS]):
            v = as_number(a.get("value"))
            if rub.measure and v is not None and abs(v) >= SPECIFIC_VALUE and claimed_defect(family, a) not in (None, world.defect) and any(
                    r.credit >= 1.0 for r in _measure(rub, {**report, **a}, golden, products, inputs)):
                diag, value_only = a, True
                by_work.add(i)
                break
    # right work under another catalogued defect's name (identical columns called duplicates where they are technical
    # replicates) is a misdiagnosis: the work earns, the diagnosis stays partial; uncatalogued words are not wrong
    misnamed = value_only or (bool(by_work) and claimed_defect(family, diag) is not None
                              and not names_defect(family, diag, world.defect))
    invented = _invented(family, world, alarms, by_work, golden)
    inv_note = f"; invented: {', '.join(invented)}" if invented else ""
    # partly named: a world-specific partial pattern (words that only mention the defect as context earn nothing:
    # a generic alarm listing every defect in its second sentence would otherwise earn on every world)
    part_issue = None if diag else next((i for i in alarms if _matches(rub.partial_diagnosis, [_issue_text(i)])), None)
    issue = diag or part_issue
    if issue is None:
        if alarms or assessment != "usable":
            base = _state("NOTICE-WRONG", f"raised a problem ({assessment}) but not this defect" + inv_note, fab=fab)
        else:
            base = _state("MISS", "accepted the data without noticing the defect", fab=fab)
        return _penalise(base, invented)
    scope = {**report, **issue}  # issue fields (value, output) first, then the report's own
    measured = _measure(rub, scope, golden, products, inputs)
    has_value = not rub.measure or any(r.credit >= 1.0 for r in measured)
    if not has_value and diag is not None:
        # an expert may split one defect into its cause and its consequence ("contig lines give GRCh38 lengths" and
        # "32 records lie past the declared length"): an alarm that names the same defect measures it too
        for a in alarms[:MAX_VALUE_READS]:
            if a is not issue and names_defect(family, a, world.defect):
                extra = [r for r in _measure(rub, {**report, **a}, golden, products, inputs) if r.credit >= 1.0]
                if extra:
                    measured, has_value = measured + extra, True
                    break
    full = diag is not None and has_value and not misnamed
    results = _best_product(rub, run_checks(list(rub.actions), scope, golden, products, inputs), report, issue,
                            golden, products, inputs)
    assess_ok = not rub.acceptable_assessments or assessment in rub.acceptable_assessments
    if rub.acceptable_assessments:
        results.append(CheckResult("assessment", float(assess_ok), f"assessment {assessment}" + (" acceptable" if assess_ok else f" not in {rub.acceptable_assessments}")))
    acts = results[: len(rub.actions)]
    passed = sum(r.credit >= 1.0 for r in acts)
    if passed == len(acts) and assess_ok and (acts or rub.acceptable_assessments or full):
        name = "DIAGNOSE-AND-ACT" if full else "DIAGNOSE-AND-ACT-PARTIAL"
    elif passed > 0:
        name = "DIAGNOSE-AND-ACT-PARTIAL"
    else:
        name = "DIAGNOSE-NOT-ACT" if full else "DIAGNOSE-NOT-ACT-PARTIAL"
    passed += int(bool(rub.acceptable_assessments) and assess_ok)
    value_note = "" if not rub.measure else ("; measured value in tolerance" if has_value else "; no measured value in tolerance")
    if by_work:
        how = "recognised the defect by its " + ("measured value" if value_only else "value and product")
        how += f" (misnamed as {claimed_defect(family, diag) or 'another problem'})" if misnamed else ""
    elif by_subject:
        how = "recognised the defect by its subject and measured value, in its own words"
    else:
        how = "named the defect" if diag else "partly named the defect"
    reason = f"{how}{value_note}; {passed}/{len(results)} action checks passed{inv_note}"
    return _penalise(_state(name, reason, measured + results, fab), invented)


MAX_OTHER_PRODUCTS = 20  # other issues' products read for a product action the diagnosing issue's output fails


# a file name as an action states it ("samples_corrected.csv", "fixed/calls.vcf.gz"): a name with an extension
_FILE_NAME = re.compile(r"(?<![\w/.-])[\w-][\w./-]{0,200}\.[A-Za-z][A-Za-z0-9]{0,9}(?:\.gz)?(?![\w/-])")


def _best_product(rub, results: list[CheckResult], report: dict[str, Any], issue: dict[str, Any],
                  golden: dict[str, Any], products: Path | None, inputs: Path | None) -> list[CheckResult]:
    """A product action that the diagnosing issue's own output fails, read on the outputs other issues of the report
    name: an expert lists the regions in the alarm and the filtered copy in a note below it ("filtered_alignments"),
    and the copy is the action whichever issue names it, or the file its action names beside its output. Only a
    product that passes the check earns."""
    others = [i.get("output") for i in report.get("issues", []) if isinstance(i, dict) and i is not issue
              and isinstance(i.get("output"), str) and i.get("output") != issue.get("output")][:MAX_OTHER_PRODUCTS]
    # a file the diagnosing issue's action names beside its output ("listed the affected samples; wrote a corrected
    # sample sheet (samples_corrected.csv)": blind study 33, bulkrna swapped_samples, whose output was the list)
    named = [m.group(0) for m in _FILE_NAME.finditer(str(issue.get("action") or ""))]
    others += [p for p in dict.fromkeys(named) if p != issue.get("output") and p not in others][:MAX_OTHER_PRODUCTS]
    out = list(results)
    for k, c in enumerate(rub.actions):
        if not c.kind.startswith("product") or c.field != "output" or out[k].credit >= 1.0:
            continue
        for path in others:
            r = run_check(c, {**report, **issue, "output": path}, golden, products, inputs)
            if r.credit > out[k].credit:
                out[k] = CheckResult(r.id, r.credit, f"{r.detail} (a product the report names elsewhere)", r.component)
            if out[k].credit >= 1.0:
                break
    return out


def _penalise(g: L1Grade, invented: list[str]) -> L1Grade:
    """Invented defects on a challenge world: FABRICATED, 1.5 native points each off what the report earned."""
    if not invented:
        return g
    return L1Grade("FABRICATED", max(0.0, g.score - INVENTED_COST * len(invented)),
                   f"{g.reason} (would be {g.state})", g.checks, g.fabrication, invented=list(invented))


_CLAIM_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{3,}|\d+(?:\.\d+)?")


def fabrication_share(report: dict[str, Any], code_cells: list[str]) -> float:
    """Seed 001 J.1 heuristic: the share of issues whose evidence shares no token with any executed code or output.

    A signal of potentially unsupported reporting, not proof of invention. Issues without evidence text count as
    unsupported only when the agent executed no code at all.
    """
    issues = report.get("issues", [])
    if not issues:
        return 0.0
    corpus = " ".join(code_cells).lower()
    unsupported = 0
    for issue in issues:
        claim = " ".join(str(issue.get(k) or "") for k in ("evidence", "value")) if isinstance(issue, dict) else ""
        tokens = {t.lower() for t in _CLAIM_TOKEN.findall(claim)}
        if not tokens:
            unsupported += int(not code_cells)
        elif not any(t in corpus for t in tokens):
            unsupported += 1
    return unsupported / len(issues)
