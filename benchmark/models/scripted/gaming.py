"""Gaming agents: strategies that skip the analysis, kept as permanent checks of the suite's validity (issue 10).

Each runs through the real `run` path as a scripted model (`scripted/<name>`), so the sandbox, the artifact
collection and the grader see exactly what they would see from a model that tried the trick:

  all_clear  blind trust: L1 accepts the data as usable; L2 reports the naive numbers with no issue. Its score is
             the share of sound worlds, the bar every other gaming agent is held to.
  flag_all   every defect (L1) or trap (L2) the family catalogues, as warnings; L2 keeps the naive numbers.
  keyword    the naive report with every caveat word of the family added to its free text and method.
  constant   one report per family, the same for every world, built from all the family's goldens (median numbers,
             union lists, mean tables written as work products) and every trap it names.
  metadata   decides from file names, sizes, headers and read counts only: leave-one-out nearest neighbour over the
             family's other worlds, then flags the neighbour's defect (or accepts).
  withhold   the naive report with every work product withheld (L1 outputs null, L2 product paths empty): a missing
             product must never be worth more than a wrong one.
  alarmist   the oracle's findings written thoroughly plus every sibling defect asserted as changing the result
             (benchmark.models.scripted.expert): invented claims must cost.
  layout     decides from the files' layout only (benchmark.models.scripted.layout): names out of order, entities appended last,
             duplicated identifiers, shared index fields, orders that differ between files; it flags those
             entities as its work product and names the nearest flagged neighbour's defect (or accepts).
  prior      answers from textbook values (benchmark.models.scripted.prior): blind trust's report with every quantity
             a handbook gives (worlds/<track>/priors.yaml) set to the handbook's value.

`worlds check --agents` runs them beside oracle and naive and fails when one earns more than blind trust allows.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from benchmark.suite.loader import WorldRef
from graders.manifest import Check, L1World, L2World

GAMING = ("all_clear", "flag_all", "keyword", "constant", "metadata", "layout", "withhold", "alarmist", "prior")
NAIVE_BASED = {"all_clear", "flag_all", "keyword", "metadata", "layout", "withhold"}  # L2: start from the naive agent's own numbers


def _words(code: str) -> str:
    return code.replace("_", " ")


def _family_refs(ref: WorldRef) -> list[WorldRef]:
    from benchmark.suite.loader import load_suite

    return [r for r in load_suite().worlds.values() if r.world.family == ref.family.id]


def _golden(ref: WorldRef) -> dict[str, Any]:
    from benchmark.suite.freeze import read_golden

    try:
        return read_golden(ref).values
    except Exception:  # noqa: BLE001 - an unfrozen sibling contributes nothing
        return {}


def _set_path(obj: dict, path: str, value: Any) -> None:
    parts = path.split(".")
    cur = obj
    for p in parts[:-1]:
        if not isinstance(cur.get(p), dict):
            cur[p] = {}
        cur = cur[p]
    cur[parts[-1]] = value


def _all_checks(w: L1World | L2World) -> list[Check]:
    if isinstance(w, L1World):
        return list(w.rubric.measure) + list(w.rubric.actions)
    return list(w.rubric.checks)


# ---------------------------------------------------------------- cells each agent runs in the sandbox

def metadata_cell() -> str:
    """What a metadata-only rule may look at: names, sizes, BAM read counts, matrix header lines, row counts."""
    return r'''
import gzip, json, os, subprocess
feat = {}
for root, _, files in os.walk('.'):
    for f in sorted(files):
        p = os.path.join(root, f)
        feat[p + ':bytes'] = os.path.getsize(p)
        if f.endswith('.bam'):
            try:
                out = subprocess.run(['samtools', 'idxstats', p], capture_output=True, text=True, timeout=60).stdout
                feat[p + ':reads'] = sum(int(l.split('\t')[2]) for l in out.splitlines() if l.strip())
            except Exception:
                pass
        if f.endswith('.mtx.gz'):
            with gzip.open(p, 'rt') as fh:
                line = next(l for l in fh if not l.startswith('%'))
            feat[p + ':shape'] = line.strip()
        if f.endswith('.csv') or f.endswith('.tsv.gz'):
            op = gzip.open if f.endswith('.gz') else open
            with op(p, 'rt') as fh:
                feat[p + ':rows'] = sum(1 for _ in fh)
print(json.dumps(feat, sort_keys=True))
'''


def product_cell(files: dict[str, str]) -> str:
    """Write work products given as {relative path: text} (constant ones, or a recorded run's replayed), folders
    included (`fixed/genes.csv`)."""
    return ("import json, os\nfor name, text in json.loads(%r).items():\n"
            "    os.makedirs(os.path.dirname(name) or '.', exist_ok=True)\n    open(name, 'w').write(text)\n"
            "print('wrote', len(%r))") % (json.dumps(files, sort_keys=True), files)


REPLAY_ENV = "BENCHMARK_NAIVE_REPLAY"  # a finished scripted/naive run folder whose results gaming agents may replay
REPLAY_MAX_BYTES = 8 << 20


def naive_replay(world_id: str, env: str = REPLAY_ENV) -> tuple[dict | None, dict[str, str]] | None:
    """The naive agent's recorded report and work products for this world, when a naive run is named in
    $BENCHMARK_NAIVE_REPLAY: replaying them (one cell that rewrites the products) gives the same report and files
    as re-running the naive analysis, without paying for it once per gaming agent. `env` names another recorded
    run (the oracle's, for the expert agents)."""
    import os

    from benchmark.run.store import RunStore, result_key

    root = os.environ.get(env)
    if not root:
        return None
    store = RunStore(Path(root))
    rec = _replayable(store).get(world_id)
    if rec is None:
        return None
    traj = store.load_trajectory(rec.trajectory)
    adir = store.artifacts / result_key(world_id, 0)
    files: dict[str, str] = {}
    for rel in traj.outputs:
        p = adir / rel
        if not p.is_file() or p.is_symlink() or p.stat().st_size > REPLAY_MAX_BYTES:
            return None
        try:
            files[rel] = p.read_text()
        except UnicodeDecodeError:
            return None  # a binary product cannot be replayed as text: run the naive cells instead
    try:
        report_ = json.loads(traj.report_raw) if traj.report_raw else None
    except ValueError:
        report_ = None
    return (report_ if isinstance(report_, dict) else None), files


_REPLAY_INDEX: dict[str, tuple[tuple[int, int], dict]] = {}


def _replayable(store) -> dict:
    """world id -> the naive run's scored replicate-0 record. Read once per version of results.jsonl (its mtime and
    size), not once per call: six gaming agents x 220 worlds re-read and re-validated all 220 lines each time."""
    try:
        st = store.results_path.stat()
    except FileNotFoundError:
        return {}
    key, stamp = str(store.results_path.resolve()), (st.st_mtime_ns, st.st_size)
    hit = _REPLAY_INDEX.get(key)
    if hit is None or hit[0] != stamp:
        index = {r.world_id: r for r in store.results() if r.replicate == 0 and r.score is not None}
        hit = _REPLAY_INDEX[key] = (stamp, index)
    return hit[1]


def cells(name: str, ref: WorldRef, naive_cells: list[str]) -> list[str]:
    w = ref.world
    if name == "constant":
        _, files = constant_report(ref)
        return [product_cell(files)] if files else []
    from benchmark.models.scripted.layout import flags_cell, layout_cell

    own = {"metadata": [metadata_cell()], "layout": [layout_cell()]}.get(name, [])
    if name == "layout" and isinstance(w, L1World):
        own += [c for c in [flags_cell(ref, _family_refs(ref))] if c]
    needs_naive = isinstance(w, L2World) or name in ("keyword", "withhold")
    if not needs_naive:
        return own
    replay = naive_replay(ref.id)
    if replay is not None and name == "withhold":
        return own  # the naive report without its products: nothing to rewrite
    base = [product_cell(replay[1])] if replay is not None else naive_cells
    return own + base


# ---------------------------------------------------------------- final reports

def naive_edits(name: str, ref: WorldRef) -> list[dict] | None:
    """How agent `name` turns the naive agent's report into its own on `ref`, as plain edits
    (benchmark.models.scripted.script.apply_edits), so a scripted agent can apply them to what its own naive cells printed;
    None when the report does not depend on the naive one."""
    w, fam = ref.world, ref.family
    codes = sorted(fam.defect_catalog)
    if name == "withhold":
        if isinstance(w, L1World):
            return [{"op": "set_items", "key": "issues", "values": {"output": None}}]
        fields = sorted({c.field.split(".")[0] for c in _all_checks(w) + list(w.rubric.zero_if)
                         if c.kind in ("product_items", "product_table", "product") and c.field})
        return [{"op": "set", "values": {f: "" for f in fields}}]
    if name == "constant" or (isinstance(w, L1World) and name != "keyword"):
        return None
    if isinstance(w, L1World):  # keyword
        words = ", ".join(_words(c) for c in codes)
        return [{"op": "pick", "keys": {"assessment": "usable", "issues": [], "summary": ""}},
                {"op": "suffix", "key": "summary", "text": f" Checked for {words}.", "strip": True},
                {"op": "extend", "key": "issues", "items": [{"category": "checklist", "severity": "info",
                                                             "description": f"considered {words}", "value": None,
                                                             "output": None}]}]
    if name == "metadata":
        code = getattr(metadata_predictions(_family_refs(ref))[ref.id].world, "defect", None)
        return [{"op": "set", "values": {"issues_found": [_words(code)] if code else [], "analysis_usable": True}}]
    if name == "layout":
        from benchmark.models.scripted.layout import layout_predictions

        code = layout_predictions(_family_refs(ref))[ref.id].defect
        return [{"op": "set", "values": {"issues_found": [_words(code)] if code else [], "analysis_usable": True}}]
    if name == "all_clear":
        return [{"op": "set", "values": {"issues_found": [], "analysis_usable": True}}]
    every = [_words(c) for c in codes] + [r.world.trap for r in _family_refs(ref) if isinstance(r.world, L2World) and r.world.trap]
    found = sorted(set(every)) if name == "keyword" else [_words(c) for c in codes]
    edits: list[dict] = [{"op": "set", "values": {"issues_found": found, "analysis_usable": True}}]
    if name == "keyword":
        words = ", ".join(_words(c) for c in codes)
        edits.append({"op": "suffix_text", "text": f" (considered: {words})", "nested_text": f" ({words})",
                      "skip_ending": "_path", "nested_skip": "path"})
    return edits


def report(name: str, ref: WorldRef, naive: dict | None) -> dict:
    """The final report of gaming agent `name` on `ref`; `naive` is the naive agent's report (L2, keyword)."""
    from benchmark.models.scripted.script import apply_edits

    edits = naive_edits(name, ref)
    if edits is not None:
        return apply_edits(edits, naive if isinstance(naive, dict) else None)
    w, fam = ref.world, ref.family
    codes = sorted(fam.defect_catalog)
    if name == "constant":
        return constant_report(ref)[0]
    if name == "metadata":
        return metadata_report(ref, naive)
    if name == "layout":
        from benchmark.models.scripted.layout import layout_report

        return layout_report(ref, _family_refs(ref), naive)
    if name == "all_clear":
        return {"assessment": "usable", "issues": [], "summary": "The data look sound; no problems found."}
    assert isinstance(w, L1World) and name == "flag_all", (name, ref.id)
    return {"assessment": "usable_with_caveats",
            "issues": [{"category": _words(c), "severity": "warning", "where": "all files",
                        "description": f"possible {_words(c)}", "value": None, "action": "flagged", "output": None}
                       for c in codes],
            "summary": "Flagged every known defect class."}


def constant_report(ref: WorldRef) -> tuple[dict, dict[str, str]]:
    """One report for the whole family from every world's golden: median numbers, majority answers, union lists,
    mean tables (as product files). The same for every world of the family; the products it writes come with it."""
    fam = ref.family
    refs = _family_refs(ref)
    values: dict[str, list[Any]] = {}
    tables: dict[str, list[dict]] = {}
    lists: dict[str, list[list]] = {}
    for r in refs:
        g = _golden(r)
        for c in _all_checks(r.world):
            if not c.field or c.golden is None or c.golden not in g:
                continue
            want = g[c.golden]
            if c.kind == "product_table" and isinstance(want, dict):
                tables.setdefault(c.field, []).append(want)
            elif c.kind in ("product_items", "overlap") and isinstance(want, list):
                lists.setdefault(f"{c.kind}:{c.field}", []).append(want)
            elif c.kind in ("value", "sign", "equals"):
                values.setdefault(c.field, []).append(want)
    rep: dict[str, Any] = {}
    files: dict[str, str] = {}
    for field, vs in sorted(values.items()):
        nums = [v for v in vs if isinstance(v, (int, float)) and not isinstance(v, bool)]
        val = statistics.median(nums) if nums else max(set(map(json.dumps, vs)), key=lambda s: [json.dumps(v) for v in vs].count(s))
        val = json.loads(val) if isinstance(val, str) and not nums else val
        _set_path(rep, field, val)
    for key, ls in sorted(lists.items()):
        kind, field = key.split(":", 1)
        union = sorted({str(x) for lst in ls for x in lst})
        if kind == "overlap":
            _set_path(rep, field, union)
        else:
            fname = f"constant_{field.replace('.', '_')}.txt"
            files[fname] = "\n".join(union) + "\n"
            _set_path(rep, field, fname)
    for field, ts in sorted(tables.items()):
        keys = sorted({k for t in ts for k in t})
        fname = f"constant_{field.replace('.', '_')}.csv"
        c = next(c for r in refs for c in _all_checks(r.world) if c.field == field and c.kind == "product_table")
        rows = [f"{k},{statistics.fmean([float(t[k]) for t in ts if k in t and isinstance(t[k], (int, float))] or [0.0])}" for k in keys]
        files[fname] = f"{c.key},{c.column}\n" + "\n".join(rows) + "\n"
        _set_path(rep, field, fname)
    if isinstance(ref.world, L1World):
        issues = []
        for r in refs:
            if not isinstance(r.world, L1World) or not r.world.defect:
                continue
            g = _golden(r)
            val = next((g[c.golden] for c in r.world.rubric.measure if c.golden in g), None)
            out = next((rep.get(c.field) for c in r.world.rubric.actions if c.field in rep), None)
            issues.append({"category": _words(r.world.defect), "severity": "warning", "where": "see description",
                           "description": r.world.expected_response[:400], "value": val, "action": "as expected",
                           "output": out if isinstance(out, str) else None})
        report_ = {"assessment": "usable_with_caveats", "issues": issues, "summary": "constant report"}
        return report_, files
    from benchmark.models.scripted.script import first_option_value

    base = first_option_value(fam.report_schema)
    _merge(base, rep)
    base["issues_found"] = sorted({r.world.trap for r in refs if isinstance(r.world, L2World) and r.world.trap})
    base["analysis_usable"] = True
    return _conform(base, fam.report_schema), files


def _merge(into: dict, over: dict) -> None:
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = v


def _conform(value: Any, schema: dict) -> Any:
    """Coerce a constant value to the schema's type (an integer field gets an int median) so it is not NONCOMPLIANT."""
    t = schema.get("type")
    if isinstance(value, dict) and "properties" in schema:
        return {k: _conform(v, schema["properties"].get(k, {})) for k, v in value.items()}
    if t == "integer" and isinstance(value, float):
        return int(round(value))
    if t == "string" and not isinstance(value, str):
        return str(value)
    if "enum" in schema and value not in schema["enum"]:
        return schema["enum"][0]
    return value


# ---------------------------------------------------------------- metadata

def metadata_features(world_dir: Path) -> dict[str, float]:
    """The same features `metadata_cell` prints, computed on the built files (names normalised by position)."""
    import gzip
    import subprocess

    feats: dict[str, float] = {}
    files = sorted(p for p in Path(world_dir).rglob("*") if p.is_file())
    for i, p in enumerate(files):
        key = f"{i}{p.suffix}"
        feats[f"{key}:bytes"] = float(p.stat().st_size)
        if p.suffix == ".bam":
            try:
                out = subprocess.run(["samtools", "idxstats", str(p)], capture_output=True, text=True, timeout=60).stdout
                feats[f"{key}:reads"] = float(sum(int(ln.split("\t")[2]) for ln in out.splitlines() if ln.strip()))
            except (OSError, ValueError, subprocess.SubprocessError):
                pass
        if p.name.endswith(".mtx.gz"):
            with gzip.open(p, "rt") as fh:
                line = next(ln for ln in fh if not ln.startswith("%"))
            for j, x in enumerate(line.split()):
                feats[f"{key}:shape{j}"] = float(x)
        if p.suffix == ".csv" or p.name.endswith(".tsv.gz"):
            opener = gzip.open if p.name.endswith(".gz") else open
            with opener(p, "rt") as fh:
                feats[f"{key}:rows"] = float(sum(1 for _ in fh))
    return feats


_PREDICTIONS: dict[tuple[str, ...], dict[str, WorldRef]] = {}


def metadata_predictions(refs: list[WorldRef]) -> dict[str, WorldRef]:
    """Leave-one-out nearest neighbour in z-scored metadata space, within each family: world id -> neighbour."""
    key = tuple(sorted(r.id for r in refs))
    if key not in _PREDICTIONS:
        _PREDICTIONS[key] = _predict(refs)
    return _PREDICTIONS[key]


def _predict(refs: list[WorldRef]) -> dict[str, WorldRef]:
    import numpy as np

    from benchmark.suite.freeze import ensure_built

    by_fam: dict[str, list[WorldRef]] = {}
    for r in refs:
        by_fam.setdefault(r.family.id, []).append(r)
    out: dict[str, WorldRef] = {}
    for fam_refs in by_fam.values():
        feats = [metadata_features(ensure_built(r)) for r in fam_refs]
        keys = sorted(set().union(*feats))
        X = np.array([[f.get(k, 0.0) for k in keys] for f in feats], dtype=float)
        X = np.log1p(np.abs(X))
        sd = X.std(axis=0)
        Z = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
        for i, r in enumerate(fam_refs):
            d = np.sqrt(((Z - Z[i]) ** 2).sum(axis=1))
            d[i] = np.inf
            out[r.id] = fam_refs[int(np.argmin(d))] if len(fam_refs) > 1 else r
    return out


def metadata_report(ref: WorldRef, naive: dict | None) -> dict:
    nb = metadata_predictions(_family_refs(ref))[ref.id]
    code = getattr(nb.world, "defect", None)
    if isinstance(ref.world, L1World):
        if not code:
            return {"assessment": "usable", "issues": [], "summary": f"metadata like {nb.world.world_class} data"}
        return {"assessment": "usable_with_caveats",
                "issues": [{"category": _words(code), "severity": "warning", "where": "file metadata",
                            "description": f"file sizes and read counts suggest {_words(code)}", "value": None,
                            "action": "flagged", "output": None}],
                "summary": "decided from file metadata"}
    rep = dict(naive) if isinstance(naive, dict) else {}
    rep["issues_found"] = [_words(code)] if code else []
    rep["analysis_usable"] = True
    return rep


def sound(world_class: str) -> bool:
    return world_class in ("clean", "boundary")
