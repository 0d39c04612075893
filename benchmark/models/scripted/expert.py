"""Agents that write the oracle's findings as people write them (issue 38): the suite must reward thoroughness.

  thorough  the oracle's analysis and work products, reported as a careful expert writes: every alarm's description
            goes on with context that names every sibling defect (checked and absent), every sibling is reported
            absent in its own info entry (L1), or in a negated `issues_found` entry and a structured one flagged
            `changes_result: false` (L2), and each of the family's declared nuisance features is reported as
            measured (a warning in L1). Must score >= THOROUGH_MIN on every world: context, null checks and true
            observations are not claims.
  alarmist  the thorough report plus every sibling defect asserted as changing the result, with an invented value
            (warnings in L1; `issues_found` claims in L2, as strings and flagged `changes_result: true`). Held
            to the gaming bar: invented claims must cost.

Both replay the oracle's recorded run when $BENCHMARK_ORACLE_REPLAY names one (`worlds check --agents` runs the
oracle first), else run the oracle's cells; their reports are plain edits (benchmark.models.scripted.script) of
what the oracle printed.
"""
from __future__ import annotations

from typing import Any

from benchmark.suite.loader import WorldRef
from graders.manifest import L1World, L2World

EXPERTS = ("thorough", "alarmist")
ORACLE_REPLAY_ENV = "BENCHMARK_ORACLE_REPLAY"
INVENTED_VALUE = 17  # the alarmist's made-up measurement


def _words(code: str) -> str:
    return code.replace("_", " ")


def siblings(ref: WorldRef) -> list[str]:
    """The family's catalogued defects (traps) this world does not have."""
    w = ref.world
    have = {getattr(w, "defect", None), *getattr(w, "also_present", [])}
    return [c for c in sorted(ref.family.defect_catalog) if c not in have]


def context(ref: WorldRef) -> str:
    """A paragraph of context an expert adds after a finding: every sibling named, as checked and absent."""
    sib = [_words(c) for c in siblings(ref)]
    if not sib:
        return " I re-ran the measurement on the raw files and it agrees."
    return (" Before concluding I also looked for " + ", ".join(sib) + "; the data show none of these, so this is "
            "the only problem of its kind here. I re-ran the measurement on the raw files and it agrees.")


def _measured(n: Any, ref: WorldRef) -> str:
    """The feature's words, and where it declares the items that show it (`Nuisance.items`), the first five of them in
    this world, named as an analyst who measured it names them."""
    if not getattr(n, "items", None):
        return n.feature
    from benchmark.suite.freeze import read_golden

    shown = n.shown_items(read_golden(ref).values)
    return f"{n.feature}; here {', '.join(sorted(shown)[:5])} among {len(shown)}" if shown else n.feature


def edits(name: str, ref: WorldRef) -> list[dict[str, Any]]:
    """The edits that turn the oracle's printed report into agent `name`'s."""
    w = ref.world
    sib = [_words(c) for c in siblings(ref)]
    nuis = [n for n in ref.family.nuisance if n.applies_to(ref.id)]
    long_summary = (" Every file was read in full, each candidate problem was checked with its own test, and every "
                    "measured value above was computed from the data; the checks that found nothing are listed too.")
    out: list[dict[str, Any]] = []
    if isinstance(w, L1World):
        out.append({"op": "suffix_items", "key": "issues", "field": "description", "text": context(ref)})
        out.append({"op": "extend", "key": "issues", "items": [
            {"category": f"{s} (checked)", "severity": "info", "where": "all files",
             "description": f"Checked for {s} with a dedicated test: not present in these files; no action needed.",
             "value": 0, "action": "none needed", "output": None} for s in sib]})
        out.append({"op": "extend", "key": "issues", "items": [
            {"category": n.feature, "severity": "warning", "where": "all files",
             "description": f"{_measured(n, ref)}. Measured, and harmless here: {n.why_harmless}", "value": None,
             "action": "measured; no correction needed", "output": None} for n in nuis]})
        if name == "alarmist":
            out.append({"op": "extend", "key": "issues", "items": [
                {"category": s, "severity": "warning", "where": "all files",
                 "description": f"{s} found in these files; it changes the result.", "value": INVENTED_VALUE,
                 "action": "flagged", "output": None} for s in sib]})
        out.append({"op": "suffix", "key": "summary", "text": long_summary})
        return out
    assert isinstance(w, L2World), ref.id
    out.append({"op": "extend", "key": "issues_found", "items": [
        f"No {s} in these data: checked with its own test and not present; it does not affect the result" for s in sib]})
    out.append({"op": "extend", "key": "issues_found", "items": [
        f"{_measured(n, ref)} (measured; harmless here: {n.why_harmless})" for n in nuis]})
    # the structured form the prompt offers (graders.manifest ISSUE_ENTRY_NOTE): each sibling's check again, stated
    # affirmatively and flagged as not changing the result
    out.append({"op": "extend", "key": "issues_found", "items": [
        {"issue": f"{s}: tested for it directly", "changes_result": False, "value": 0} for s in sib]})
    if name == "alarmist":
        out.append({"op": "extend", "key": "issues_found", "items": [
            f"{s}: present, and it changes the result (measured effect {INVENTED_VALUE}%)" for s in sib]})
        out.append({"op": "extend", "key": "issues_found", "items": [
            {"issue": f"{s}", "changes_result": True, "value": INVENTED_VALUE} for s in sib]})
    out.append({"op": "suffix", "key": "summary", "text": long_summary})
    return out
