"""Pivotal-choice accuracy (SPEC R12, seed 002 "SciΠvot"): at a pivotal moment of a project, does a model choose
the plan a careful principal investigator would pursue?

A case is the project record before the decision, the original (agent's) plan and the corrected plan. The model
sees both plans in both orders, with the record (condition `project`) or without it (`options-only`); choosing
the corrected plan is correct, an unparsed answer is wrong. See benchmark/pivotal/README.md.

    cases.py   the case format (pydantic) and the JSONL loader (errors name file, line and field)
    build.py   the deterministic builder of the shipped case set from our own worlds
    run.py     prompts, answer parsing, records, the resumable run store and the runner
    score.py   accuracy averaged over orders, paired differences, case and project-cluster bootstrap intervals
    cli.py     `python -m benchmark pivotal run|score|cases`
A self-contained side protocol, not split over the stage packages (cases.py and build.py are its suite, run.py
its protocol, score.py its scores): its stages are small and tied to its own case file. Model providers may read
its cases (the scripted agents' choices, benchmark.models.scripted.plans), never run.py.
"""
__all__ = ["DEFAULT_CASES", "PivotalCase", "load_cases"]


def __getattr__(name: str):
    """The case API on first use: every CLI process builds the `pivotal` parser, which needs only the axes below,
    and importing cases.py (its pydantic models) cost each of them ~0.1 s."""
    if name in __all__:
        from benchmark.pivotal import cases

        return getattr(cases, name)
    raise AttributeError(f"module 'benchmark.pivotal' has no attribute {name!r}")

# The protocol's fixed axes (seed 002), here so that building the CLI parser imports nothing heavy.
CONDITIONS = ("project", "options-only")
ORDERS = ("original_first", "corrected_first")
EFFORTS = ("default", "none", "minimal", "low", "medium", "high", "xhigh", "max")
DRAWS = 100_000  # seed 002 Table 10: "Intervals use 100,000 paired percentile bootstrap samples."
SEED = 20260824
