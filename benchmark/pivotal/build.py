"""Build the shipped pivotal case set from our own worlds (deterministic: same worlds, same bytes).

A world's `pivotal:` block (graders.manifest.PivotalBlock; a list of them where the project holds several
decisions, the later ones each with a `stage`) yields one case per block, at every level: the block's
templates rendered against the world's golden values (benchmark/pivotal/template.py), its record prefixed with the
family's `goal`, its field from the track's `field`. Challenged worlds (confound, tool_trap, stat_trap and L1
challenges) proceed on the pivotal output in the original plan and the corrected plan is the check
`careful_scientist` orders; clean controls (clean, boundary) and real L3 dossiers, whose evidence agrees with the
expectation, reverse the roles. Every case carries `why`, built from
the world's trap (or defect), `expected_response` and `grounding`. Adding a case means editing only the world's YAML.

    python -m benchmark pivotal cases build [--out FILE] [--check]
"""
from __future__ import annotations

import json
from pathlib import Path

from benchmark.errors import BenchmarkError
from benchmark.pivotal.cases import DEFAULT_CASES, PivotalCase, render_jsonl
from benchmark.pivotal.template import TEXT_FIELDS, render_block, render_text


def _why(w, kind: str) -> str:
    if w.level == "L3":
        head = ("A real dossier whose evidence agrees with the expectation it tests: following it is right. "
                if kind == "control" else
                f"{'An' if w.route == 'injected' else 'A'} {w.route} counterfactual dossier: the evidence departs from "
                "the expectation it tests. ")
        return f"{head}Evidence: {w.evidence} Expected act: {w.expected_act} Grounding: {w.grounding.rationale}"
    problem = getattr(w, "trap", None) or f"defect '{getattr(w, 'defect', None)}'."
    head = (f"The {w.world_class} world behind this case: {problem} " if kind == "challenged"
            else f"Clean control ({w.world_class} world): proceeding is right. ")
    return f"{head}Expected response: {w.expected_response} Grounding: {w.grounding.rationale}"


def case_kind(w) -> str:
    """control (proceeding on the output is right: clean and boundary worlds, real L3 dossiers) or challenged."""
    return "control" if w.world_class in ("clean", "boundary", "real") else "challenged"


def golden_values(ref) -> dict:
    """The golden's `values` of a world with a pivotal block; a missing golden is a clear error."""
    if not ref.golden_path.exists():
        raise BenchmarkError(f"{ref.path}: field 'pivotal': the world has no golden file ({ref.golden_path.name}); "
                             f"freeze it first (`python -m benchmark worlds freeze {ref.id}`)")
    return json.loads(ref.golden_path.read_text())["values"]


def case_for(ref, g: dict | None = None, block=None) -> PivotalCase:
    """The pivotal case of one block of a world (default: its first); g: the world's golden values, read when not
    given. A block with a `stage` is a later decision of the same project: its id is pivot.<world id>.<stage>."""
    w = ref.world
    blocks = w.pivotal_blocks
    if not blocks:
        raise BenchmarkError(f"{ref.path}: world '{w.id}' has no pivotal block")
    block = blocks[0] if block is None else block
    if not ref.track.field:
        raise BenchmarkError(f"{ref.path.parents[2] / 'track.yaml'}: field 'field': world {w.id} has a pivotal case, so the "
                             "track must name its scientific field")
    if not ref.family.goal:
        raise BenchmarkError(f"{ref.path.parent / 'family.yaml'}: field 'goal': world {w.id} has a pivotal case, so its "
                             "family must state the project goal")
    d = render_block(block, golden_values(ref) if g is None else g, w, ref.path)
    kind = case_kind(w)
    return PivotalCase(
        id=f"pivot.{w.id}" + (f".{block.stage}" if block.stage else ""), project=w.family, field=ref.track.field,
        kind=kind, record=f"Project goal: {ref.family.goal}\n{d['record']}",
        why=(f"A later decision ('{block.stage}') of the same project; the world's analysis supports the corrected "
             "plan. " if block.stage else "") + _why(w, kind),
        proceeds="original" if kind == "challenged" else "corrected",
        source_world=w.id, categories=d["categories"], original_plan=d["original_plan"],
        corrected_plan=d["corrected_plan"], evidence=d["evidence"])


def build_cases(suite=None) -> list[PivotalCase]:
    """One case per `pivotal:` block of every world (every track and level); sorted by id."""
    from benchmark.suite.loader import load_suite

    suite = suite or load_suite()
    cases = []
    for ref in suite.worlds.values():
        blocks = ref.world.pivotal_blocks
        if blocks:
            g = golden_values(ref)
            cases += [case_for(ref, g, b) for b in blocks]
    return sorted(cases, key=lambda c: c.id)


def write_cases(out: Path | None = None, check: bool = False) -> tuple[Path, int, bool]:
    """Write (or with check=True compare) the canonical case file; returns (path, n, unchanged)."""
    path = Path(out) if out else DEFAULT_CASES
    data = render_jsonl(build_cases())
    same = path.exists() and path.read_bytes() == data
    if check:
        if not same:
            raise BenchmarkError(f"{path} differs from what the builder produces; run `python -m benchmark pivotal cases build`")
        return path, data.count(b"\n"), True
    from benchmark.suite.canonical import _atomic_write

    _atomic_write(path, data)
    return path, data.count(b"\n"), same


def pivotal_problems(ref) -> list[str]:
    """Suite lint (`worlds validate`): every field of the world's `pivotal:` block that does not render against its
    golden, each naming file and field; the family's goal and the track's field when missing. A world not yet
    frozen is left to the lock check."""
    blocks = ref.world.pivotal_blocks
    if not blocks:
        return []
    out = []
    if not ref.family.goal:
        out.append(f"{ref.path.parent / 'family.yaml'}: field 'goal': world {ref.id} has a pivotal case, so its family "
                   "must state the project goal")
    if not ref.track.field:
        out.append(f"{ref.path.parents[2] / 'track.yaml'}: field 'field': world {ref.id} has a pivotal case, so the "
                   "track must name its scientific field")
    if not ref.golden_path.exists():
        return out
    g = json.loads(ref.golden_path.read_text())["values"]
    for i, block in enumerate(blocks):
        at = "pivotal" if isinstance(ref.world.pivotal, type(block)) else f"pivotal.{i}"
        fields = [(f"{at}.{n}", getattr(block, n)) for n in TEXT_FIELDS]
        fields += [(f"{at}.evidence.{j}", e) for j, e in enumerate(block.evidence)]
        for name, text in fields:
            try:
                render_text(text, g, ref.world, ref.path, name)
            except BenchmarkError as exc:
                out.append(str(exc))
    return out
