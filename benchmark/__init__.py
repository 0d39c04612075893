"""DISCERN-style benchmark of scientific judgment: L1 data integrity, L2 analysis traps, L3 hypothesis dossiers.

Public API is re-exported here; submodules hold one idea each, grouped by stage (as scanpy groups its verbs):

    suite/      stage 1: manifests, loader, registry, freeze, validate, private campaigns (what the suite is)
    run/        stage 2: the run verb, the agent loop, the L3 protocol, the run store and records
    score/      stage 3: aggregate, accounting, leaderboard, regrade
    oversight/  stage 4: verify, ledgers and adjudication, transcript audit, the suite's validity check, the viewer
    models/     model providers (litellm for hosted models, local/ and scripted/ in-process); beside run/, below its
                protocols: scripted agents decide behind the provider boundary from the call's context
    pivotal/, grounding/
                the two side protocols (SPEC R12, R13), each a self-contained package with its own cases or items,
                runner, scores and CLI: their stages are small and tied to their own data, so splitting them over
                suite/run/score would scatter one protocol over four folders
    export/     recorded runs written in other tools' formats (Inspect AI logs): a reader of finished runs
    cli, console, errors, jsontext
                the entry point (`python -m benchmark`, which wires every stage's verbs), terminal output, the one
                exception type, and JSON text helpers shared by protocols and providers: used by every stage, in none

graders/ sits below benchmark/ (tests/test_layering.py states the whole import contract).
"""
import os as _os

# litellm must never reach the network for its price map (SPEC R5): set before anything imports litellm.
_os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from benchmark.errors import BenchmarkError, ManifestError  # noqa: E402

__all__ = ["BenchmarkError", "ManifestError"]
__version__ = "0.1.0"
