"""The L3 reviewer roles and their models (`--reviewers a,b,c`): a module of its own, so `run` checks its options
without importing the L3 protocol (an L1/L2 run never does: issue 42 item 4)."""
from __future__ import annotations

# Reviewer roles, in the order `--reviewers a,b,c` names their models.
REVIEWER_ROLES = {
    "evidence": "You check EVIDENCE FIDELITY: every number and claim in the answer against the dossier's tables; "
                "misquoted values, claims no row supports, evidence that was ignored.",
    "causal": "You check CAUSAL REASONING: mechanism claimed from association alone, alternatives not excluded, "
              "confounders, whether the proposed experiment actually discriminates the hypothesis from its alternatives.",
    "domain": "You are a DOMAIN SKEPTIC: is the interpretation plausible in the field's science, are the citations real and "
              "relevant, does the answer over- or under-state its certainty given what is known in the field?",
}
DEFAULT_REVIEWERS = ("local/smollm2", "local/smollm2", "local/smollm2")  # offline default: one model in all three roles


def parse_reviewers(values: list[str] | tuple[str, ...] | str) -> tuple[str, str, str]:
    """`--reviewers a,b,c` or `--reviewers a b c` (or a mix): one model per reviewer role, in REVIEWER_ROLES order."""
    from benchmark.errors import BenchmarkError

    items = [values] if isinstance(values, str) else list(values)
    models = [m.strip() for v in items for m in str(v).split(",") if m.strip()]
    if len(models) != len(REVIEWER_ROLES):
        raise BenchmarkError(f"the reviewer ensemble has exactly {len(REVIEWER_ROLES)} members, one per role "
                             f"({', '.join(REVIEWER_ROLES)}); got {len(models)}: pass --reviewers a,b,c")
    return tuple(models)  # type: ignore[return-value]
