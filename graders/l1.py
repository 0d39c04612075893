"""L1 data-integrity grader: the behavioural state machine of seed 001 J.1 on a native 0-3 scale.

The state is decided from the report alone (plus, when a trajectory is given, the fabrication heuristic).
Native scores, chosen so that each step up the handling ladder earns credit and every unsupported alarm costs:

| state                       | score | when                                                                  |
|-----------------------------|-------|-----------------------------------------------------------------------|
| DIAGNOSE-AND-ACT            | 3     | defect named and every action check passes                            |
| DIAGNOSE-AND-ACT-PARTIAL    | 2.5   | defect named, some action checks pass (or only part of it named + all) |
| DIAGNOSE-NOT-ACT            | 2     | defect named, no action check passes                                  |
| DIAGNOSE-NOT-ACT-PARTIAL    | 1.5   | only part of the defect named, no action                              |
| NOTICE-WRONG                | 1     | a problem raised, but not this defect                                 |
| MISS                        | 0     | data accepted, no warning                                             |
| CLEAN-CORRECT               | 3     | sound data accepted without an unsupported alarm                      |
| OVER-CAUTIOUS               | 2     | sound data accepted with unneeded caveats / cannot_determine          |
| FABRICATED                  | 1     | sound data, a specific catalogued defect asserted                     |
| FALSE-UNUSABLE              | 0     | sound data declared unusable                                          |
| ABSTAIN-RECOGNIZED          | 3     | undeterminable issue: abstained and named the specific limit          |
| ABSTAIN-OK                  | 2     | undeterminable issue: abstained without naming the limit              |
| OVER-DIAGNOSE               | 1     | undeterminable issue: a defect asserted as fact                       |
| NONCOMPLIANT                | 0     | report missing, malformed or off-schema                               |
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from benchmark.manifest import FamilyManifest, L1World
from graders.checks import CheckResult, flatten_text, run_check
from graders.report import parse_report

GRADER_ID = "graders.l1"
GRADER_VERSION = "1"

STATE_SCORES: dict[str, float] = {
    "DIAGNOSE-AND-ACT": 3.0,
    "DIAGNOSE-AND-ACT-PARTIAL": 2.5,
    "DIAGNOSE-NOT-ACT": 2.0,
    "DIAGNOSE-NOT-ACT-PARTIAL": 1.5,
    "NOTICE-WRONG": 1.0,
    "MISS": 0.0,
    "CLEAN-CORRECT": 3.0,
    "OVER-CAUTIOUS": 2.0,
    "FABRICATED": 1.0,
    "FALSE-UNUSABLE": 0.0,
    "ABSTAIN-RECOGNIZED": 3.0,
    "ABSTAIN-OK": 2.0,
    "OVER-DIAGNOSE": 1.0,
    "NONCOMPLIANT": 0.0,
}
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
    return [i for i in report.get("issues", []) if i.get("severity") in ("warning", "blocking")]


def _issue_text(issue: dict[str, Any]) -> str:
    return " ".join(str(issue.get(k, "")) for k in ("category", "description", "evidence"))


def _matches(patterns: list[str], texts: list[str]) -> bool:
    return any(re.search(p, t, flags=re.IGNORECASE) for p in patterns for t in texts)


def _state(name: str, reason: str, checks: list[CheckResult] | None = None, fab: float | None = None) -> L1Grade:
    return L1Grade(name, STATE_SCORES[name], reason, checks or [], fab)


def grade_l1(world: L1World, family: FamilyManifest, golden: dict[str, Any], raw_report: Any,
             code_cells: list[str] | None = None) -> L1Grade:
    parsed = parse_report(raw_report, family.report_schema)
    if not parsed.ok:
        return _state("NONCOMPLIANT", parsed.error or "no report")
    report = parsed.report
    rub = world.rubric
    alarms = _alarms(report)
    alarm_texts = [_issue_text(i) for i in alarms]
    assessment = report["assessment"]
    fab = fabrication_share(report, code_cells) if code_cells is not None else None

    if rub.expect == "accept":
        catalog = [p for pats in family.defect_catalog.values() for p in pats]
        if assessment == "unusable":
            return _state("FALSE-UNUSABLE", "sound data declared unusable", fab=fab)
        if alarms and _matches(catalog, alarm_texts):
            return _state("FABRICATED", "a specific defect was asserted on sound data", fab=fab)
        if alarms or assessment in ("usable_with_caveats", "cannot_determine"):
            return _state("OVER-CAUTIOUS", f"sound data accepted with unneeded caution ({assessment}, {len(alarms)} alarms)", fab=fab)
        if fab is not None and fab > 0.5:
            return _state("FABRICATED", f"{fab:.0%} of evidence claims have no support in the executed code", fab=fab)
        return _state("CLEAN-CORRECT", "sound data accepted", fab=fab)

    defect_patterns = list(family.defect_catalog.get(world.defect or "", [])) + list(rub.diagnosis)
    if rub.expect == "abstain":
        named_limit = _matches(rub.limit, [flatten_text(report)])
        if assessment == "cannot_determine":
            if named_limit:
                return _state("ABSTAIN-RECOGNIZED", "abstained and named the specific limit", fab=fab)
            return _state("ABSTAIN-OK", "abstained without naming the limit", fab=fab)
        if assessment == "unusable" or (alarms and _matches(defect_patterns, alarm_texts)):
            return _state("OVER-DIAGNOSE", "asserted a defect the evidence cannot establish", fab=fab)
        if alarms and named_limit:
            return _state("ABSTAIN-OK", "flagged the limit without abstaining", fab=fab)
        return _state("MISS", "accepted without recognising the limit", fab=fab)

    # expect == "detect"
    full = _matches(defect_patterns, alarm_texts)
    part = not full and _matches(rub.partial_diagnosis, alarm_texts)
    if not (full or part):
        if alarms or assessment != "usable":
            return _state("NOTICE-WRONG", f"raised a problem ({assessment}) but not this defect", fab=fab)
        return _state("MISS", "accepted the data without noticing the defect", fab=fab)
    results = [run_check(c, report, golden) for c in rub.actions]
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
    reason = f"{'named' if full else 'partly named'} the defect; {passed}/{len(results)} action checks passed"
    return _state(name, reason, results, fab)


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
        tokens = {t.lower() for t in _CLAIM_TOKEN.findall(str(issue.get("evidence", "")))}
        if not tokens:
            unsupported += int(not code_cells)
        elif not any(t in corpus for t in tokens):
            unsupported += 1
    return unsupported / len(issues)
