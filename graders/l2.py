"""L2 analysis grader: components A, I, M, C on 0-1 from the world's rubric checks, then the caps (seed 001 I.3).

A  analytical correctness  (values against the solver golden)
I  issue recognition       (the trap, or, on a clean control, not inventing one)
M  methodological response (an appropriate method)
C  result calibration      (conclusions qualified to the analysis' reliability)

A, M and C come from values and work products only; words feed I alone, and a recognised trap without its measured
value earns half (`requires`). `issues_found` is read by claims (graders/claims.py): an entry that is negated, below
threshold or stated as harmless is context, neither recognition nor invention; an entry claims at most one trap (its
category, heading or lead: claims.claimed_trap). Every catalogued trap a claim names
that the world does not have (nor carries as `also_present` or as a declared nuisance feature) halves I (precision:
on a clean control, naming any trap does).

World score = mean(A, I, M, C), then in order:
  invented effect  a claim that a trap the world does not have changes the result  -> min(score, 0.2)
  zero_if       every zero_if value/product check passes (the trap's own result) -> 0, and so does a report whose
                zero_if products are missing where its other zero_if checks pass (a missing product is worth no
                more than the trap's); a zero_if check is left out (moot) when a zero_if
                overlap check is tripped by the reference's own answer (the `reference` of a scored overlap check
                on the same field), or a zero_if value check by the true value of a scored value check on the same
                field: the trap's result is then not distinguishable from the sound answer (e.g. an empty trap list
                where the reference calls nothing too: nothing to match is not a match; a trap that moved a
                statistic by less than the zero_if's tolerance at this draw), and the zero is not applied when every
                zero_if check is moot; nor where the world is not solvable
                and the report declares its analysis unusable (its own claim qualifies the list it gives, which its
                checks still score)
  unusable cap  a solvable world declared unusable                                -> min(score, unusable_cap)
  accuracy cap  A == 0: recognising the trap cannot pay for a wrong result        -> min(score, accuracy_cap)
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graders.manifest import FamilyManifest, L2World
from graders import claims
from graders.checks import PRODUCT_KINDS, CheckResult, get_path, product_path, run_check, run_checks
from graders.report import parse_report

GRADER_ID = "graders.l2"
GRADER_VERSION = "17"  # 17: a moot zero_if check leaves the conjunction and the rest still zero the trap's result (it disabled the whole zero_if); 16: a range's ends and a percentage's fraction are numbers a text states; an entry naming the items that show a nuisance feature measures it; 15: an issues_found entry that sets a trap aside ("polygenic signal, not confounding"; "confounding cannot be ruled out") does not claim it; a declared nuisance's size may be a number the entry's text states (its value may measure the effect on the result); 14: overlap strict_golden: where the stricter standard rule calls fewer items than strict_subset, a true set that large (at least one) is the stricter call; 13: a nuisance feature may declare the golden lists of the items that show it (Nuisance.items less not_items): a description of it must name at least two of them and no more items that do not show it (the genes one-vs-rest calls without their being markers against every population); 12: the zero_if is not applied where an unsolvable world is declared unusable (the list given anyway is qualified by that claim; its checks score it); 11: a value check may name the generative truth's answer (truth_end, a list read as its length): any value from the reference solver's to the truth's is right (8 true genes and one more, against a reference calling 5 of them; H3K27me3 domains merged to the simulated total); 10: a structured entry reporting a declared nuisance must give a size the feature has in the world (Nuisance.size, as in L1); 9: an entry whose claiming part describes a declared nuisance is no invented trap; overlap strict_subset (a stricter call of true items earns full credit); a zero_if value check the truth itself passes is moot; 8: a trap handled in every value and named in the summary by its own patterns is recognised; an entry naming the world's trap beside one other is no invention; 7: a measured uncatalogued claim with the trap handled in the values is recognition
ISSUES_FIELD = "issues_found"
COMPONENTS = ("A", "I", "M", "C")
# a trap the world does not have, asserted as changing the result: the report's conclusion rests on a fabrication,
# whatever its numbers (an alarmist must not out-earn blind trust; issue 38)
INVENTED_EFFECT_CAP = 0.2
RECOGNISED_BY_VALUES = 0.5  # I credit of a trap handled in the values but not named


@dataclass(frozen=True)
class L2Grade:
    components: dict[str, float]
    score: float  # 0-1
    status: str  # "graded" | "NONCOMPLIANT"
    reason: str
    caps: list[str] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)
    invented: list[str] = field(default_factory=list)
    grader: str = GRADER_ID
    grader_version: str = GRADER_VERSION

    @property
    def score100(self) -> float:
        return self.score * 100


def claimed_items(report: dict[str, Any]) -> list[Any]:
    """The `issues_found` entries that claim a problem (graders/claims.py `is_claim`): an observation that is
    negated, below threshold, or stated as not affecting the result is context, neither recognition nor invention."""
    items = get_path(report, ISSUES_FIELD)
    items = items if isinstance(items, list) else ([] if items is None else [items])
    return [it for it in items if claims.is_claim(it)]


def claim_catalog(family: FamilyManifest) -> dict[str, list[str]]:
    """The family's catalogue as a claim is read (graders/claims.py `claim_catalog`): topic words of its prompt
    alone do not make an entry a claim."""
    return claims.claim_catalog(family.defect_catalog, family.prompt)


def invented_claims(world: L2World, family: FamilyManifest, claimed: list[Any],
                    golden: dict[str, Any] | None = None) -> list[tuple[str, bool]]:
    """(trap, asserts an effect) for every catalogued trap that a claimed `issues_found` entry (`claimed_items`)
    claims (one per entry: `claims.claimed_trap`) and the world does not have: not its own trap (nor an entry whose
    claim names the world's own trap beside one other: `claims.claimed_traps`), not one
    `also_present`, and not a declared nuisance feature the entry describes and measures (a true observation; a
    structured entry's `value` at a size the feature has in this world's `golden`, where the feature declares one), unless
    the entry says it changes the result of a feature that cannot (`Nuisance.can_move_result` false): that is the
    trap's claim. A bare assertion ("copy-number amplified genes confound the screen") measures nothing: charged."""
    out: dict[str, bool] = {}
    catalog = claim_catalog(family)
    for it in claimed:
        codes = claims.claimed_traps(catalog, it)
        code = codes[0] if codes else None
        if code is None or code == world.defect or code in world.also_present:
            continue
        if world.defect in codes and len(codes) <= 2:  # the trap named with its neighbour, not a list of every trap
            continue
        effect, text, value = claims.asserts_effect(it), claims.item_text(it), claims.entry_value(it)
        if claims.measures_nuisance(family.nuisance, world.id, text, golden) and (
                code in claims.nuisance_codes(family.nuisance, world.id, text, effect, value, golden, text_sizes=True)
                or claims.claim_is_nuisance(family.nuisance, world.id, it, effect, golden, text_sizes=True)):
            continue
        out[code] = out.get(code, False) or effect
    return sorted(out.items())


def _claims_only(report: dict[str, Any], world: L2World, family: FamilyManifest, claimed: list[Any],
                 leads: bool = False, golden: dict[str, Any] | None = None) -> dict[str, Any]:
    """The report as recognition reads it: `issues_found` holds its claims (`claimed`), plus an entry whose lead
    claims this world's own trap (`claims.claimed_trap`) while only its later words hedge ("... no other site is
    affected"), each as text, less the entries that describe one of the world's declared nuisance features (a truth
    about the data, not a trap). With `leads`, each entry is cut to its lead: what a negated check (no trap asserted)
    reads, since an entry claims at most one thing and the rest of it is context."""
    if ISSUES_FIELD not in report:
        return report
    items = get_path(report, ISSUES_FIELD)
    items = items if isinstance(items, list) else ([] if items is None else [items])
    ids = {id(it) for it in claimed}
    keep = [it for it in items if id(it) in ids or (
        world.defect and not (isinstance(it, dict) and it.get("changes_result") is False)
        and claims.claimed_trap(family.defect_catalog, it) == world.defect
        and claims.lead_claims(claims.item_text(it)))]
    texts = [claims.item_text(it) for it in keep
             if not claims.excused_by_nuisance(family.nuisance, world.id, it, golden, text_sizes=True)]
    return {**report, ISSUES_FIELD: [claims.lead(t) if leads else t for t in texts]}


def _negated_by_leads(world: L2World, family: FamilyManifest, report: dict[str, Any], claimed: list[Any],
                      results: list[CheckResult], golden: dict[str, Any], products: Path | None) -> list[CheckResult]:
    """A negated recognition check ("no trap asserted" on a clean control) read on the leads of the claims only:
    an expert's entry on one finding names the files, references and checks around it, and those words are not
    claims of other traps (issue 38)."""
    checks = list(world.rubric.checks)
    if not any(c.kind == "mentions" and c.negate and ISSUES_FIELD in (c.fields or [c.field]) for c in checks):
        return results
    leads = _claims_only(report, world, family, claimed, leads=True, golden=golden)
    return [run_check(c, leads, golden, products)
            if c.kind == "mentions" and c.negate and ISSUES_FIELD in (c.fields or [c.field]) else r
            for c, r in zip(checks, results)]


def _trap_is_the_reference(world: L2World, golden: dict[str, Any]) -> list[str]:
    """The zero_if overlap checks that the reference analysis' own answer trips: a scored overlap check on the same
    field names the golden key of the reference's answer (`reference`), and that answer matches the trap's list at
    the zero_if's bar. There the trap's result cannot be told from the sound one, so matching it follows no trap
    (an empty trap list where the reference also calls nothing: nothing to match is not a match; or a reference
    false positive that the trap also calls). A trap whose list differs from the reference's (a power-loss trap
    calling nothing where the reference calls genes) still zeroes."""
    out = []
    for z in world.rubric.zero_if:
        if z.kind not in ("overlap", "value") or not z.field:
            continue
        for c in world.rubric.checks:
            if c.kind != z.kind or c.field != z.field:
                continue
            if c.kind == "overlap" and c.reference is not None:
                ref = get_path(golden, c.reference)
                if isinstance(ref, list) and run_check(z, {z.field: ref}, golden).credit >= 1.0:
                    out.append(z.id)
                    break
            if c.kind == "value" and c.golden:
                # the true value itself is within the zero_if's tolerance of the trap's: at this draw the trap did
                # not move the result, so a report of the truth must not be zeroed as the trap's (campaign seed 7003:
                # a Spearman of -0.447 against the trap's -0.410, tolerance 0.04, zeroed the oracle)
                truth = get_path(golden, c.golden)
                if isinstance(truth, (int, float)) and run_check(z, {z.field: truth}, golden).credit >= 1.0:
                    out.append(z.id)
                    break
    return out


def _unread(c, report: dict[str, Any], products: Path | None) -> bool:
    """A zero_if product check whose product the report does not name or did not write: nothing in the report
    tells its result from the trap's, so it cannot escape the zero by withholding the product (issue 38 item 6)."""
    return c.kind in PRODUCT_KINDS and product_path(products, get_path(report, c.field) if c.field else None)[0] is None


def _recognised_by_work(world: L2World, family: FamilyManifest, results: list[CheckResult], zero_if: list[CheckResult],
                        claimed: list[Any], summary: Any = None) -> list[CheckResult]:
    """On a trap world, an analysis whose values and products are all right (every A and M check full) while none of
    the trap's own results is reproduced (no zero_if check holds) has handled the trap in its numbers, whatever its
    words. Its recognition checks (I, affirmative `mentions`) earn full credit when `issues_found` flags the problem
    in the analyst's own words: a claimed entry that names no other catalogued trap and measures what it reports ("83
    variants have an input count of only 1-3 reads"); the values say which trap it is. A report that handles the trap
    silently (no such entry) earns half, as a named trap without its value does (`requires`): it does not flag the
    trap to its reader (the hand-written "right numbers, trap unnamed" reports stay below 100). A step that handles
    the trap as routine practice (libraries of different depth referenced to the negative controls) is told where an
    expert tells the method, in the summary: a recognition check whose own patterns the summary matches earns full
    credit there too, and only with every value right."""
    if not world.defect or not zero_if or any(r.credit >= 1.0 for r in zero_if):
        return results
    checks = list(world.rubric.checks)
    if not all(r.credit >= 1.0 for c, r in zip(checks, results) if c.component in ("A", "M")):
        return results
    catalog = claim_catalog(family)
    said = any(claims.claimed_trap(catalog, it) in (None, world.defect) and claims.measured(claims.item_text(it))
               for it in claimed)
    text = summary if isinstance(summary, str) else ""
    out = []
    for c, r in zip(checks, results):
        if c.component != "I" or c.kind != "mentions" or c.negate:
            out.append(r)
            continue
        told = bool(text) and any(re.search(p, text, flags=re.IGNORECASE) for p in c.patterns)
        credit, how = ((1.0, "flagged in its own words with a measurement") if said else
                       (1.0, "its method named in the summary") if told else (RECOGNISED_BY_VALUES, "not named"))
        out.append(CheckResult(r.id, credit, f"{r.detail}; {'full' if credit >= 1.0 else 'half'} credit: handled in its "
                               f"values (every A and M check holds and the trap's result is not reproduced), {how}",
                               r.component) if r.credit < credit else r)
    return out


def grade_l2(world: L2World, family: FamilyManifest, golden: dict[str, Any], raw_report: Any,
             products: Path | None = None) -> L2Grade:
    parsed = parse_report(raw_report, family.report_schema)
    if not parsed.ok:
        return L2Grade({c: 0.0 for c in COMPONENTS}, 0.0, "NONCOMPLIANT", parsed.error or "no report")
    report = parsed.report
    rub = world.rubric
    claimed = claimed_items(report)
    results = run_checks(list(rub.checks), _claims_only(report, world, family, claimed, golden=golden), golden, products)
    results = _negated_by_leads(world, family, report, claimed, results, golden, products)
    zr = run_checks(list(rub.zero_if), report, golden, products) if rub.zero_if else []
    results = _recognised_by_work(world, family, results, zr, claimed, report.get("summary"))
    comps: dict[str, float] = {}
    for comp in COMPONENTS:
        mine = [(c, r) for c, r in zip(rub.checks, results) if c.component == comp]
        total = sum(c.weight for c, _ in mine)
        comps[comp] = round(sum(c.weight * r.credit for c, r in mine) / total, 6) if total else 0.0
    caps: list[str] = []
    inv_claims = invented_claims(world, family, claimed, golden) if family.defect_catalog else []
    invented = [code for code, _ in inv_claims]
    if invented:
        comps["I"] = round(comps["I"] * 0.5 ** len(invented), 6)
        caps.append(f"precision: issues_found names {len(invented)} trap(s) this world does not have ({', '.join(invented)}); I halved for each")
    score = sum(comps.values()) / 4
    effect = [code for code, eff in inv_claims if eff]
    if effect and score > INVENTED_EFFECT_CAP:
        caps.append(f"invented effect: issues_found says {', '.join(effect)} changes the result, and this world has no "
                    f"such trap (score capped at {INVENTED_EFFECT_CAP:g})")
        score = INVENTED_EFFECT_CAP
    if rub.zero_if:
        moot = _trap_is_the_reference(world, golden)
        # a moot check leaves the conjunction; the others still tell the trap's result from the sound one (campaign
        # seed 7011, scrna lane_batch: the truth's 8 genes were 8 of the trap's 12, so the list overlap was moot,
        # while the table still called the trap's 4 lane genes significant; the naive agent scored 41.7)
        live = [(c, r) for c, r in zip(rub.zero_if, zr) if c.id not in moot]
        if moot:
            caps.append(f"zero_if {'not applied' if not live else 'judged on the rest'}: the sound answer itself "
                        f"matches the trap's result ({', '.join(moot)})")
        if not live:
            pass  # every zero_if check is moot: nothing tells the trap's result from the sound answer at this draw
        elif not rub.solvable and get_path(report, rub.usable_field) is False and all(
                r.credit >= 1.0 or _unread(c, report, products) for c, r in live):
            # the report says what this world's rubric holds, that no sound result can come from these data: a
            # list it gives anyway is qualified by its own claim, not the trap's result reported as the result. Its
            # value and overlap checks still score the list (no credit for calls the world says cannot be made)
            caps.append("zero_if not applied: the report declares the analysis unusable, as this world is; the list it "
                        "gives is qualified, and its checks score it")
        elif all(r.credit >= 1.0 for _, r in live):
            caps.append("zero_if: trap followed without qualification")
            score = 0.0
        elif all(r.credit >= 1.0 or _unread(c, report, products) for c, r in live):
            caps.append("zero_if: the product that tells the trap's result from the sound one was not written; a missing "
                        "product is worth no more than the trap's own")
            score = 0.0
        results += zr
    usable = get_path(report, rub.usable_field)
    if rub.solvable and usable is False and score > rub.unusable_cap:
        caps.append(f"unusable cap: a solvable world declared unusable (score capped at {rub.unusable_cap:.3f})")
        score = rub.unusable_cap
    if comps["A"] == 0 and score > rub.accuracy_cap:
        caps.append(f"accuracy cap: A = 0 (score capped at {rub.accuracy_cap:.3f})")
        score = rub.accuracy_cap
    reason = "; ".join(f"{r.id}: {r.detail}" for r in results)
    return L2Grade(comps, round(score, 6), "graded", reason, caps, results, invented)
