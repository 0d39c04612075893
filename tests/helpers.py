"""Small builders for hand-made families and worlds used by grader unit tests."""
from __future__ import annotations

from typing import Any

from graders.manifest import FamilyManifest, L1World, L2World

L1_SCHEMA: dict[str, Any] = {  # the defect-agnostic L1 report of graders/README.md section 4
    "type": "object",
    "required": ["assessment", "issues", "summary"],
    "additionalProperties": False,
    "properties": {
        "assessment": {"enum": ["usable", "usable_with_caveats", "unusable", "cannot_determine"]},
        "issues": {"type": "array", "items": {"type": "object", "required": ["category", "severity", "description"],
                   "properties": {"category": {"type": "string"}, "severity": {"enum": ["info", "warning", "blocking"]},
                                  "where": {"type": "string"}, "description": {"type": "string"},
                                  "value": {"type": ["number", "null"]}, "action": {"type": "string"},
                                  "output": {"type": ["string", "null"]}, "evidence": {"type": "string"}}}},
        "summary": {"type": "string"},
    },
}


def l1_family(**kw) -> FamilyManifest:
    base = dict(id="scrna.L1.integrity", track="scrna", level="L1", title="t", prompt="p", report_schema=L1_SCHEMA,
                solver="scrna.L1.integrity",
                defect_catalog={"duplicated_barcodes": [r"duplicat\w* barcode"], "ambient_rna": [r"ambient", r"soup"]})
    base.update(kw)
    return FamilyManifest.model_validate(base)


def l1_world(cls: str = "challenge", expect: str = "detect", defect: str | None = "duplicated_barcodes", **rubric) -> L1World:
    return L1World.model_validate(dict(
        id="scrna.L1.integrity.w", track="scrna", level="L1", family="scrna.L1.integrity", **{"class": cls},
        title="t", seed=1, public_files=["a.csv"], expected_response="e", careful_scientist="c",
        grounding={"citation": "x", "rationale": "y"}, defect=defect if cls == "challenge" else None,
        rubric={"expect": expect, **rubric}))


def l1_report(assessment="usable", issues=()) -> dict:
    return {"assessment": assessment, "issues": list(issues), "summary": "s"}


def issue(text: str, severity: str = "blocking", evidence: str = "", value: float | None = None,
          output: str | None = None) -> dict:
    return {"category": text, "severity": severity, "description": text, "evidence": evidence, "value": value,
            "output": output}


L2_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["total_mb", "peak_mode", "issues_found", "analysis_usable"],
    "properties": {"total_mb": {"type": "number"}, "peak_mode": {"type": "string"}, "n_domains": {"type": "integer"},
                   "output_path": {"type": "string"},
                   "issues_found": {"type": "array", "items": {"type": "string"}},
                   "analysis_usable": {"type": "boolean"}, "caveats": {"type": "string"}},
}


def l2_family(**kw) -> FamilyManifest:
    return FamilyManifest.model_validate({**dict(id="histone.L2.quantify", track="histone", level="L2", title="t",
                                                prompt="p", report_schema=L2_SCHEMA, solver="histone.L2.quantify"), **kw})


def l2_world(**rubric_over) -> L2World:
    rubric = {
        "checks": [
            {"id": "total", "kind": "value", "component": "A", "field": "total_mb", "golden": "total_mb", "rel_tol": 0.35},
            {"id": "pitfall", "kind": "mentions", "component": "I", "fields": ["issues_found"], "patterns": ["narrow", "fragment"]},
            {"id": "broad", "kind": "equals", "component": "M", "field": "peak_mode", "values": ["broad"]},
            {"id": "domains", "kind": "value", "component": "C", "field": "n_domains", "golden": "n_domains", "rel_tol": 0.3},
        ],
        "zero_if": [
            {"id": "narrow_total", "kind": "value", "field": "total_mb", "golden": "narrow_total_mb", "rel_tol": 0.15},
        ],
    }
    rubric.update(rubric_over)
    return L2World.model_validate(dict(
        id="histone.L2.quantify.broad_mark_narrow_default", track="histone", level="L2", family="histone.L2.quantify",
        **{"class": "tool_trap"}, title="t", seed=1, public_files=["a"], expected_response="e", careful_scientist="c",
        grounding={"citation": "x", "rationale": "y"}, trap="narrow default on a broad mark", defect="narrow_default",
        rubric=rubric))


def burn(seconds: float) -> list:
    """A busy loop on every core for `seconds` (another user's job on a shared machine); the caller kills them."""
    import os
    import subprocess
    import sys

    code = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(os.cpu_count() or 1)]
