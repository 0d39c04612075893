"""DISCERN-style benchmark of scientific judgment: L1 data integrity, L2 analysis traps, L3 hypothesis dossiers.

Public API is re-exported here; submodules hold one idea each.
"""
import os as _os

# litellm must never reach the network for its price map (SPEC R5): set before anything imports litellm.
_os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from benchmark.errors import BenchmarkError, ManifestError  # noqa: E402

__all__ = ["BenchmarkError", "ManifestError"]
__version__ = "0.1.0"
