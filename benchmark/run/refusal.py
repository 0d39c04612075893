"""Refusals written in the reply text (seed 001 §3 and App. B: refusal coverage and fallback replay count tasks a
model declined, and the declines there were replies, not only provider content filters).

A reply is a refusal when it is NOT a valid report and one of REFUSAL_PATTERNS matches within its first
HEAD_CHARS characters: a first-person decline of the task ("I'm sorry, but I can't help with that", "I cannot
assist with this request", "I must decline"), or a policy reason ("this request violates my usage policies").
The verbs are those of declining a task (help, assist, comply, provide, complete, perform, fulfil, continue,
proceed, carry out, support, engage) aimed at the request itself ("...with this request", "...with that."), never
a scientific limit: "I cannot determine the depth" or "I can't complete the analysis because the BAM is
truncated" is an answer without a report (noncompliant, scored 0), not a refusal (unscored), so a model cannot
dodge a score by phrasing a failure as a decline. Detection is recorded on the result (`refusal: "reply_text: <pattern name>"`, provider filters
`"content_filter"`), and a refused world counts against coverage and is routed by fallback replay.
"""
from __future__ import annotations

import re

HEAD_CHARS = 400
_DECLINE_VERBS = (r"(?:help|assist|comply|provide|complete|perform|fulfil+|continue|proceed|carry\s+out|support|engage|"
                  r"participate|take\s+(?:on|part))")
_OBJECT = (r"\s+(?:you\s+)?(?:with\s+)?(?:(?:this|that|your)\s+(?:request|ask|task)\b|(?:this|that|it)\s*[.!]|"
           r"(?:this|that)\s*$)")
REFUSAL_PATTERNS: dict[str, re.Pattern] = {
    "apology_then_decline": re.compile(
        r"\bI(?:'m|\s+am)\s+(?:sorry|afraid)\b[^.\n]{0,80}?\b(?:can(?:no|')t|cannot|won't|will\s+not|(?:am|'m)\s+(?:un|not\s+)able\s+to)\s+"
        + _DECLINE_VERBS + _OBJECT, re.I),
    "first_person_decline": re.compile(
        r"\bI\s+(?:can(?:no|')t|cannot|won't|will\s+not|(?:am|'m)\s+(?:un|not\s+)able\s+to|(?:am|'m)\s+not\s+going\s+to)\s+"
        + _DECLINE_VERBS + _OBJECT, re.I),
    "explicit_decline": re.compile(r"\bI\s+(?:must|have\s+to|will|need\s+to)\s+(?:respectfully\s+)?(?:decline|refuse)\b", re.I),
    "policy": re.compile(r"\b(?:violates?|against|goes\s+against)\s+(?:my|our|the)\s+(?:usage\s+|content\s+|safety\s+)?"
                         r"(?:polic(?:y|ies)|guidelines)\b", re.I),
}


def detect_refusal(text: str | None) -> str | None:
    """The name of the first refusal pattern found in the head of `text`, or None."""
    head = (text or "")[:HEAD_CHARS]
    for name, pat in REFUSAL_PATTERNS.items():
        if pat.search(head):
            return name
    return None
