"""The `prior` gaming agent (issue 39): answers from textbook values, not from this world's data.

A world whose answer a handbook already gives measures recall, not analysis. The prior agent is the naive report
(the analysis tools' defaults, no issue raised, as blind trust) with every quantity a textbook gives set to the
textbook's value. It reads the question in meta.json (which population, which sample), never the measurements, except
where a track's prior is a computation on tabulated reference data the world ships (a handbook table standing in for
a measurement). `worlds check --agents` holds it to the gaming bar: no more than blind trust + 5.

What a textbook says is declared per track in worlds/<track>/priors.yaml (`Priors`), family by family:

  nuclear.L2.decay:
    source: DDEP/LNHB recommended Co-60 half-life
    values: {half_life_days: 1925.28}                  # report fields set to the textbook value
  scrna.L2.markers:
    source: canonical PBMC markers (Seurat pbmc3k tutorial; Zheng et al. 2017)
    by: task.target_population                          # the meta.json field naming the question
    answers: {CD56+ NK: {top_markers: [NKG7, GNLY]}}    # each question's textbook answer
  calorimetry.L2.equilibrium:
    source: the block taken as pure copper (JANAF), the heptane from its table
    cell: |                                             # statements after the track's helpers cell: set `prior`
      prior.update(...)

A family with no entry gets blind trust's report. On L1 the agent accepts the data, as blind trust does: a textbook
says nothing of a file's defects. So `worlds check --agents` runs it only where a prior is declared and counts blind
trust's records elsewhere (benchmark.oversight.validity).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from benchmark.models.scripted.script import Script, reply_json, run_cells
from benchmark.suite.loader import WorldRef, read_yaml, validate
from graders.manifest import L1World

PRIORS_FILE = "priors.yaml"
CAPTURE = "_naive_out"  # the kernel variable that holds what the naive analysis printed (when it runs live)


class Prior(BaseModel):
    """One family's textbook answer."""

    model_config = ConfigDict(extra="forbid")
    source: str = Field(description="where the textbook answer comes from (a table, a constant, a review)")
    values: dict[str, Any] = Field(default_factory=dict, description="report fields set to the textbook value")
    by: str | None = Field(None, description="a dotted meta.json path whose value names the question asked")
    answers: dict[str, dict[str, Any]] = Field(default_factory=dict,
                                               description="per value of `by`: report fields set to its textbook answer")
    cell: str | None = Field(None, description="Python statements run after the track's helpers cell; they update "
                                               "`prior` (a dict of report fields) from meta.json and reference tables")


class Priors(BaseModel):
    """A track's priors.yaml: family id -> its textbook answer."""

    model_config = ConfigDict(extra="forbid")
    families: dict[str, Prior]


def read_priors(path: Path) -> dict[str, Prior]:
    """A track's priors.yaml, validated (errors name the file and the field); none when the file is absent."""
    if not path.is_file():
        return {}
    data, node = read_yaml(path)
    return validate(Priors, data, path, node).families


def track_priors(ref: WorldRef) -> dict[str, Prior]:
    """The priors declared beside the world's track (worlds/<track>/priors.yaml)."""
    return read_priors(ref.path.parents[2] / PRIORS_FILE)


def prior_cell(p: Prior | None, naive: dict | None) -> str:
    """The cell that prints the prior agent's report: the naive report (given, or what the live naive analysis
    printed, held in `_naive_out`), its issues cleared, with the textbook's fields set."""
    head = (f"_rep = json.loads({json.dumps(json.dumps(naive))})\n" if naive is not None else
            f"_line = [l for l in {CAPTURE}.getvalue().splitlines() if l.strip().startswith('{{')]\n"
            "_rep = json.loads(_line[-1]) if _line else {}\n")
    out = ["import json\n", head, f"prior = {{}}\n"]
    if p is not None:
        out.append(f"prior.update(json.loads({json.dumps(json.dumps(p.values))}))\n")
        if p.by:
            keys = p.by.split(".")
            out.append("_q = json.load(open('meta.json'))\n"
                       f"for _k in {keys!r}:\n    _q = _q.get(_k) if isinstance(_q, dict) else None\n"
                       f"prior.update(json.loads({json.dumps(json.dumps(p.answers))}).get(str(_q), {{}}))\n")
        if p.cell:
            out.append(p.cell.rstrip("\n") + "\n")
    out.append("_rep.update(prior)\n_rep['issues_found'] = []\n_rep['analysis_usable'] = True\n"
               "print(json.dumps(_rep))\n")
    return "".join(out)


def captured(cell: str) -> str:
    """A cell run with its output captured in `_naive_out` (and still shown), so a later cell can read its report."""
    return (f"import contextlib as _cl, io as _io\n{CAPTURE} = _io.StringIO()\nwith _cl.redirect_stdout({CAPTURE}):\n"
            f"    exec(compile({cell!r}, '<naive>', 'exec'), globals())\nprint({CAPTURE}.getvalue())\n")


def script(ref: WorldRef, naive_cells: list[str], replay: tuple[dict | None, dict[str, str]] | None) -> Script:
    """The prior agent's episode: on L1 blind trust's acceptance; on L2 the naive analysis (replayed when a naive run
    is named, else run), then the prior cell."""
    from benchmark.models.scripted.gaming import product_cell, report

    if isinstance(ref.world, L1World):
        return reply_json(report("all_clear", ref, None))
    p = track_priors(ref).get(ref.family.id)
    if replay is not None and isinstance(replay[0], dict):
        helpers = list(naive_cells[:-1]) if p is not None and p.cell else []
        return run_cells([product_cell(replay[1]), *helpers, prior_cell(p, replay[0])])
    if not naive_cells:
        return run_cells([prior_cell(p, {})])
    return run_cells([*naive_cells[:-1], captured(naive_cells[-1]), prior_cell(p, None)])


def declared_families(root: Path) -> dict[str, str]:
    """family id -> its prior's source, over every track under `root` (for docs and tests)."""
    return {f: p.source for path in sorted(Path(root).glob(f"*/{PRIORS_FILE}")) for f, p in read_priors(path).items()}
