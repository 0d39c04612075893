"""Cross-checks beyond per-file schema validation: what makes a suite coherent (SPEC R1, R2)."""
from __future__ import annotations

import re

from benchmark.loader import Suite
from benchmark.manifest import L1World, L2World, Level
from benchmark.registry import RECIPES, SOLVERS, SUBSTRATES, WRITERS, load_track_module


def validate_suite(suite: Suite) -> list[str]:
    """Every problem found, each naming the file and field; empty when the suite is sound."""
    problems: list[str] = []
    for name, bundle in suite.tracks.items():
        tm = bundle.manifest
        try:
            load_track_module(tm.module)
            load_track_module(tm.solver_module)
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            problems.append(f"{bundle.path}: field 'module': {exc}")
            continue
        if tm.substrate.name not in SUBSTRATES:
            problems.append(f"{bundle.path}: field 'substrate.name': no substrate '{tm.substrate.name}' is registered")
        if name not in WRITERS:
            problems.append(f"{bundle.path}: field 'module': {tm.module} registers no writer for track '{name}'")
        for fid, fam in bundle.families.items():
            fpath = bundle.family_paths[fid]
            if fam.solver not in SOLVERS:
                problems.append(f"{fpath}: field 'solver': no solver '{fam.solver}' is registered")
            props = fam.report_schema.get("properties", {})
            if fam.level == Level.L2:
                for need in ("issues_found", "analysis_usable"):
                    if need not in props:
                        problems.append(f"{fpath}: field 'report_schema': L2 reports need '{need}'")
            for code, pats in fam.defect_catalog.items():
                for pat in pats:
                    try:
                        re.compile(pat)
                    except re.error as exc:
                        problems.append(f"{fpath}: field 'defect_catalog.{code}': bad regex {pat!r} ({exc})")
            worlds = [r for r in suite.worlds.values() if r.world.family == fid]
            if fam.level == Level.L2 and worlds and not any(r.world.world_class == "clean" for r in worlds):
                problems.append(f"{fpath}: family '{fid}' has no clean control; add a world with class: clean")
    for ref in suite.worlds.values():
        w = ref.world
        for i, step in enumerate(w.recipe):
            if f"{w.track}.{step.name}" not in RECIPES:
                problems.append(f"{ref.path}: field 'recipe.{i}.name': no recipe '{step.name}' registered for track '{w.track}'")
        if isinstance(w, L2World):
            for c in list(w.rubric.checks) + list(w.rubric.zero_if):
                for f in [c.field, *c.fields]:
                    if f and f.split(".")[0] not in ref.family.report_schema.get("properties", {}):
                        problems.append(f"{ref.path}: field 'rubric' check '{c.id}': '{f}' is not in the family's report schema")
        if isinstance(w, L1World):
            for c in w.rubric.actions:
                for f in [c.field, *c.fields]:
                    if f and f.split(".")[0] not in ref.family.report_schema.get("properties", {}):
                        problems.append(f"{ref.path}: field 'rubric.actions' check '{c.id}': '{f}' is not in the family's report schema")
        if not ref.lock_path.exists():
            problems.append(f"{ref.path}: world is not frozen (no {ref.lock_path.name}); run `python -m benchmark worlds freeze {w.id}`")
    return problems
