"""DISCERN-style benchmark of scientific judgment: L1 data integrity, L2 analysis traps, L3 hypothesis dossiers.

Public API is re-exported here; submodules hold one idea each.
"""
from benchmark.errors import BenchmarkError, ManifestError

__all__ = ["BenchmarkError", "ManifestError"]
__version__ = "0.1.0"
