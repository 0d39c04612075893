"""Cross-checks beyond per-file schema validation: what makes a suite coherent (SPEC R1, R2)."""
from __future__ import annotations

import re
from pathlib import Path

from benchmark.suite.loader import Suite
from graders.manifest import L1World, L2World, Level
from benchmark.pivotal.build import pivotal_problems
from benchmark.suite.registry import RECIPES, SOLVERS, SUBSTRATES, WRITERS
from graders.registry import load_track_module


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
        problems += track_folder_problems(bundle)
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
    problems += conclusion_problems(suite.worlds.values())
    for ref in suite.worlds.values():
        w = ref.world
        for i, step in enumerate(w.recipe):
            if f"{w.track}.{step.name}" not in RECIPES:
                problems.append(f"{ref.path}: field 'recipe.{i}.name': no recipe '{step.name}' registered for track '{w.track}'")
        props = ref.family.report_schema.get("properties", {})
        if isinstance(w, L2World):
            for c in list(w.rubric.checks) + list(w.rubric.zero_if):
                for f in [c.field, *c.fields]:
                    if f and f.split(".")[0] not in props:
                        problems.append(f"{ref.path}: field 'rubric' check '{c.id}': '{f}' is not in the family's report schema")
            problems += contract_problems(ref.path, w, ref.family)
        if isinstance(w, L1World):
            issue_props = props.get("issues", {}).get("items", {}).get("properties", {})
            for part, checks in (("measure", w.rubric.measure), ("actions", w.rubric.actions)):
                for c in checks:
                    for f in [c.field, *c.fields]:
                        if f and f.split(".")[0] not in props and f.split(".")[0] not in issue_props:
                            problems.append(f"{ref.path}: field 'rubric.{part}' check '{c.id}': '{f}' is neither a report "
                                            "field nor a field of an issue in the family's report schema")
            problems += contract_problems(ref.path, w, ref.family)
        problems += pivotal_problems(ref)  # the world's pivotal: block renders against its golden
        if not ref.lock_path.exists():
            problems.append(f"{ref.path}: world is not frozen (no {ref.lock_path.name}); run `python -m benchmark worlds freeze {w.id}`")
    return problems


def track_folder_problems(bundle) -> list[str]:
    """A track is one folder: its modules live in it, its tools and packages exist, every L1/L2 family is scripted."""
    import importlib.util
    import shutil

    from benchmark.suite.registry import NAIVES, ORACLES

    tm, folder, out = bundle.manifest, bundle.path.parent.resolve(), []
    if tm.name != bundle.path.parent.name:
        out.append(f"{bundle.path}: field 'name': '{tm.name}' must equal the track's folder name '{bundle.path.parent.name}'")
    for key in ("module", "solver_module", "grounding_module"):
        mod = getattr(tm, key)
        if not mod:
            continue
        spec = importlib.util.find_spec(mod)
        origin = Path(spec.origin).resolve() if spec and spec.origin else None
        if origin is None or folder not in origin.parents:
            out.append(f"{bundle.path}: field '{key}': {mod} ({origin}) is not inside {folder}; a track keeps its code "
                       "in its own folder (worlds/README.md)")
    import sys
    from importlib import metadata

    venv_bin = str(Path(sys.executable).parent)  # the sandbox puts the venv's scripts (macs3) on PATH too
    for tool in tm.tools:
        if shutil.which(tool) is None and shutil.which(tool, path=venv_bin) is None:
            out.append(f"{bundle.path}: field 'tools': '{tool}' is not on PATH; install it (scripts/setup.sh) or remove it")
    for pkg in tm.python_packages:  # distribution names (scikit-learn, macs3), as pip spells them
        try:
            metadata.distribution(pkg)
        except metadata.PackageNotFoundError:
            out.append(f"{bundle.path}: field 'python_packages': '{pkg}' is not installed; add it to pyproject.toml")
    for fid, fam in bundle.families.items():
        if fam.level in (Level.L1, Level.L2):
            for reg in (ORACLES, NAIVES):
                if fid not in reg:
                    out.append(f"{bundle.family_paths[fid]}: no {reg.kind} is registered for family '{fid}'; add one "
                               f"in {tm.solver_module}")
    return out


def conclusion_problems(refs) -> list[str]:
    """An `equals` check outside I that accepts the same answer in every world of its family ("usable": true) is a
    conclusion a report pasted from a sibling world also gets right; it must `require` a check of this world's own
    values, or a pasted report keeps its credit (graders/README.md section 3)."""
    out: list[str] = []
    by_family: dict[str, list] = {}
    for ref in refs:  # WorldRef-like: .path, .world, .family
        if isinstance(ref.world, L2World):
            by_family.setdefault(ref.family.id, []).append(ref)
    for refs in by_family.values():
        if len(refs) < 2:
            continue
        answers: dict[str, set] = {}
        for ref in refs:
            for c in ref.world.rubric.checks:
                if c.kind == "equals" and c.component != "I":
                    answers.setdefault(c.id, set()).add(repr(sorted(map(str, c.values))))
        for ref in refs:
            for c in ref.world.rubric.checks:
                if c.id in answers and len(answers[c.id]) == 1 and not c.requires:
                    out.append(f"{ref.path}: field 'rubric.checks' check '{c.id}': accepts {c.values} in every world of "
                               f"family '{ref.family.id}', so a sibling's pasted report earns it; add `requires:` naming a "
                               "value or product check of this world")
    return out


def contract_problems(path, w: L1World | L2World, family) -> list[str]:
    """The grading contract (graders/README.md): words feed recognition only; the world's defect is catalogued.

    A, M, C and zero_if checks (L2), and L1 measures and actions, must be value or product checks, so no report
    earns correctness, response or calibration, or escapes a zero, by its wording.
    """
    out: list[str] = []
    if isinstance(w, L2World):
        for c in w.rubric.checks:
            if c.component != "I" and c.reads_words:
                out.append(f"{path}: field 'rubric.checks' check '{c.id}': a {c.kind} check credits words, which may "
                           f"only feed component I; use a value or product check for {c.component}")
        for c in w.rubric.zero_if:
            if c.reads_words:
                out.append(f"{path}: field 'rubric.zero_if' check '{c.id}': zero_if must hold on values or products "
                           "alone (a word must not lift a zero); use a value, overlap or product check")
        ids = {c.id for c in w.rubric.checks}
        for c in w.rubric.checks:
            for r in c.requires:
                if r not in ids:
                    out.append(f"{path}: field 'rubric.checks' check '{c.id}': requires unknown check '{r}'")
    else:
        for part, checks in (("measure", w.rubric.measure), ("actions", w.rubric.actions)):
            for c in checks:
                if c.reads_words:
                    out.append(f"{path}: field 'rubric.{part}' check '{c.id}': a {c.kind} check credits words; an L1 "
                               "measure or action must check a value or a product")
    for code in getattr(w, "also_present", []):
        if code not in family.defect_catalog:
            out.append(f"{path}: field 'also_present': '{code}' is not in the family's defect_catalog")
    if w.defect and family.defect_catalog and w.defect not in family.defect_catalog:
        out.append(f"{path}: field 'defect': '{w.defect}' is not in the family's defect_catalog "
                   f"({', '.join(sorted(family.defect_catalog))})")
    return out
