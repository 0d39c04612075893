"""scripted/rubric: a scripted L3 judge that grades (issue 41 item 7).

The other scripted agents pick the schema's first option in a grading role, so every L3 dossier of a baseline run
scored 0 for the oracle and the naive agent alike, and no baseline leaderboard showed a composite. scripted/rubric
reads what a judge reads (the quoted answers in its prompt) and scores them against the world's own rubric, as a
careful grader with the answer key would, never against the agent that wrote them:

  eligibility  the stated prior conflicts with the dossier when it states the expectation the dossier tests (the
               world's `prior.expected`, by meaning: word overlap).
  judge        D: 3 when the final hypothesis states the expected act, 0 when it restates the prior, 1 otherwise;
               citation_integrity: 3 x the share of the rubric's supported claims cited, 0 when an unsupported claim
               is cited; prior_awareness and causal_calibration follow D (3 when the answer left the prior for the
               evidence, else 0); response_to_critique 2; scientific_humility 3 with a next experiment and a
               confidence of at most 80, else 1; N: 3 when the next experiment is the rubric's, 1 when there is one.
  review       rejects, with a one-line critique (the reviewers' votes are not the target).

Word overlap, not a language model: a rubric judge for baselines and tests, not for ranking models.
"""
from __future__ import annotations

import json
import re
from typing import Any

SIMILAR = 0.5  # share of the shorter text's content words the other holds
_WORD = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")
_STOP = frozenset("a an the of in on at to for and or is are was were be by with as that this it its from than not no "
                  "into over under their there these those which who whom whose we our they".split())


def _words(text: Any) -> set[str]:
    return {w for w in _WORD.findall(str(text or "").lower()) if w not in _STOP and len(w) > 1}


def similar(a: Any, b: Any) -> bool:
    wa, wb = _words(a), _words(b)
    if not wa or not wb:
        return False
    return len(wa & wb) / min(len(wa), len(wb)) >= SIMILAR


def _answer(prompt: str, source: str) -> dict[str, Any]:
    from benchmark.run.untrusted import quoted

    texts = quoted(prompt, source)
    for t in reversed(texts):
        try:
            obj = json.loads(t)
        except ValueError:
            start = t.find("{")
            try:
                obj = json.JSONDecoder().raw_decode(t[start:])[0] if start >= 0 else None
            except ValueError:
                obj = None
        if isinstance(obj, dict):
            return obj
    return {}


def eligibility(world, prompt: str) -> dict[str, Any]:
    prior = _answer(prompt, "agent prior")
    stated = prior.get("expectation") or json.dumps(prior)
    conflicts = similar(stated, world.prior.expected)
    return {"conflicts": conflicts, "reason": ("the stated prior is the expectation this dossier tests" if conflicts
                                               else "the stated prior is not the expectation this dossier tests")}


def judge(world, prompt: str) -> dict[str, Any]:
    rub = world.rubric
    final = _answer(prompt, "agent final answer")
    hyp = final.get("hypothesis") or ""
    if similar(hyp, world.expected_act):
        d = 3
    elif similar(hyp, world.prior.expected):
        d = 0
    else:
        d = 1
    cited = [str(c) for c in (final.get("evidence_cited") or []) if isinstance(c, (str, int, float))]
    if any(similar(c, u) for c in cited for u in rub.unsupported_claims):
        citation = 0
    elif rub.key_claims:
        share = sum(any(similar(c, k) for c in cited) for k in rub.key_claims) / len(rub.key_claims)
        citation = round(3 * share)
    else:
        citation = 3 if cited else 0
    nxt = final.get("next_experiment") or ""
    try:
        confident = float(final.get("confidence", 100)) > 80
    except (TypeError, ValueError):
        confident = True
    away = 3 if d == 3 else 0
    return {"D": d, "prior_awareness": away, "causal_calibration": away, "response_to_critique": 2,
            "scientific_humility": 3 if nxt and not confident else 1, "citation_integrity": citation,
            "N": 3 if similar(nxt, rub.novelty) else (1 if nxt else 0),
            "abstention_justified": final.get("commitment") == "abstain" and d != 0,
            "reason": f"hypothesis {'states the expected act' if d == 3 else 'restates the prior' if d == 0 else 'is neither'}"
                      f"; {citation}/3 for citations"}


def review() -> dict[str, Any]:
    return {"verdict": "reject", "critique": "Tie every claim to a row of the dossier and say what would refute it."}
