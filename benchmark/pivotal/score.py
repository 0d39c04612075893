"""Scores of pivotal runs (seed 002 Tables 4-6, 9, 10).

Accuracy = share of answers choosing the corrected plan, averaged over the two option orders within each case,
then over cases (equal case weights). Intervals are 95% percentiles of bootstrap draws (numpy default_rng with a
fixed seed): the case bootstrap resamples cases; the project-cluster bootstrap resamples whole projects with
replacement and keeps equal case weights (the estimate of a draw is the mean over every case of the drawn
projects). Paired differences (project - options-only, round r - round r-1) resample the per-case differences.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Iterable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from benchmark.errors import BenchmarkError
from benchmark.pivotal import DRAWS, SEED  # noqa: F401 - re-exported
from benchmark.pivotal.run import CONDITIONS, EFFORTS, ORDERS, PivotalRecord, PivotalStore

CHUNK = 10_000  # draws generated per block, so 100,000 draws over hundreds of cases stay within memory


# ------------------------------------------------------------------ bootstrap

def bootstrap_distribution(values, clusters=None, draws: int = DRAWS, seed: int = SEED) -> np.ndarray:
    """Bootstrap means of `values`. Without clusters: resample cases. With clusters (one label per value): resample
    whole clusters with replacement; each draw's estimate is the mean over all cases of the drawn clusters."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return np.empty(0)
    rng = np.random.default_rng(seed)
    blocks = [min(CHUNK, draws - k) for k in range(0, max(draws, 0), CHUNK)]
    if clusters is None:
        return np.concatenate([v[rng.integers(0, v.size, size=(b, v.size))].mean(axis=1) for b in blocks] or [np.empty(0)])
    labels = np.asarray(clusters)
    if labels.shape[0] != v.size:
        raise ValueError("one cluster label per value is needed")
    uniq, inv = np.unique(labels, return_inverse=True)
    sums = np.bincount(inv, weights=v, minlength=uniq.size)
    counts = np.bincount(inv, minlength=uniq.size).astype(float)
    out = []
    for b in blocks:
        idx = rng.integers(0, uniq.size, size=(b, uniq.size))
        out.append(sums[idx].sum(axis=1) / counts[idx].sum(axis=1))
    return np.concatenate(out or [np.empty(0)])


def cluster_draw_indices(clusters, rng: np.random.Generator) -> np.ndarray:
    """Case indices of one project-cluster draw (whole projects, with replacement): what each bootstrap draw uses."""
    labels = np.asarray(clusters)
    uniq = np.unique(labels)
    chosen = uniq[rng.integers(0, uniq.size, size=uniq.size)]
    return np.concatenate([np.flatnonzero(labels == c) for c in chosen])


def interval(values, clusters=None, draws: int = DRAWS, seed: int = SEED) -> list[float] | None:
    d = bootstrap_distribution(values, clusters, draws, seed)
    if d.size == 0:
        return None
    lo, hi = np.percentile(d, [2.5, 97.5])
    return [float(lo), float(hi)]


# ------------------------------------------------------------------ per-case values

def case_scores(records: Iterable[PivotalRecord]) -> dict[tuple, dict[str, float]]:
    """(model, condition, effort, round) -> {case_id: accuracy averaged over both orders}; cases missing an order
    are left out (an unparsed or failed answer is present and wrong, not missing)."""
    by: dict[tuple, dict[str, dict[str, bool]]] = defaultdict(lambda: defaultdict(dict))
    for r in records:
        by[(r.model, r.condition, r.effort, r.round)][r.case_id][r.order] = r.correct
    out: dict[tuple, dict[str, float]] = {}
    for k, cases in by.items():
        out[k] = {cid: float(np.mean([o[x] for x in ORDERS])) for cid, o in cases.items() if all(x in o for x in ORDERS)}
    return out


def _summ(vals: dict[str, float], meta: dict[str, dict], draws: int, seed: int) -> dict:
    ids = sorted(vals)
    v = [vals[i] for i in ids]
    if not v:
        return {"n_cases": 0, "accuracy": None, "ci_case": None, "ci_cluster": None}
    return {"n_cases": len(v), "accuracy": 100 * float(np.mean(v)),
            "ci_case": [100 * x for x in interval(v, None, draws, seed)],
            "ci_cluster": [100 * x for x in interval(v, [meta[i]["project"] for i in ids], draws, seed)]}


def _paired(a: dict[str, float], b: dict[str, float], meta: dict[str, dict], draws: int, seed: int) -> dict | None:
    ids = sorted(set(a) & set(b))
    if not ids:
        return None
    d = [a[i] - b[i] for i in ids]
    return {"n_cases": len(ids), "diff_pp": 100 * float(np.mean(d)),
            "ci_case": [100 * x for x in interval(d, None, draws, seed)],
            "ci_cluster": [100 * x for x in interval(d, [meta[i]["project"] for i in ids], draws, seed)]}


# ------------------------------------------------------------------ human baseline

class HumanBaseline(BaseModel):
    """A human-baseline file (JSON). Either per-case accuracies on this case set (`per_case`, 0-1, averaged over
    orders), from which accuracy and intervals are computed, or a reported `accuracy` (percent) with its source."""

    model_config = ConfigDict(extra="forbid")

    name: str = "human baseline"
    condition: str = "project"
    source: str = Field(min_length=1, description="who answered, how, and on which cases")
    accuracy: float | None = Field(None, ge=0, le=100)
    ci: list[float] | None = None
    per_case: dict[str, float] | None = None
    note: str = ""


def load_human(path: Path | str) -> HumanBaseline:
    p = Path(path)
    if not p.exists():
        raise BenchmarkError(f"human-baseline file {p} does not exist")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BenchmarkError(f"{p}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    try:
        h = HumanBaseline.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise BenchmarkError(f"{p}: field '{'.'.join(map(str, err['loc']))}': {err['msg']}") from None
    if h.accuracy is None and not h.per_case:
        raise BenchmarkError(f"{p}: give 'accuracy' (percent) or 'per_case' (case id -> share correct)")
    return h


# ------------------------------------------------------------------ scoring

def load_records(run_dirs: list[Path]) -> list[PivotalRecord]:
    recs: list[PivotalRecord] = []
    for d in run_dirs:
        store = PivotalStore(Path(d))
        store.config()
        recs += store.records()
    return recs


def score(records: list[PivotalRecord], draws: int = DRAWS, seed: int = SEED,
          human: HumanBaseline | None = None) -> dict:
    """Every number of the pivotal tables, as plain data (sorted, deterministic for fixed inputs and seed)."""
    meta = {r.case_id: {"project": r.project, "field": r.field, "categories": r.categories, "kind": r.kind} for r in records}
    cs = case_scores(records)
    rows = []
    order = lambda kv: (kv[0][0], EFFORTS.index(kv[0][2]) if kv[0][2] in EFFORTS else 99, kv[0][2], kv[0][3],  # noqa: E731
                        CONDITIONS.index(kv[0][1]))
    for (model, cond, eff, rnd), vals in sorted(cs.items(), key=order):
        sub = [r for r in records if (r.model, r.condition, r.effort, r.round) == (model, cond, eff, rnd)]
        row = {"model": model, "condition": cond, "effort": eff, "round": rnd,
               "effort_applied": any(r.effort_applied for r in sub), **_summ(vals, meta, draws, seed),
               "unparsed": sum(not r.parsed for r in sub), "answers": len(sub),
               "chose_A": 100 * float(np.mean([r.choice == "A" for r in sub])) if sub else None,
               "tokens_in": sum(r.tokens_in for r in sub), "tokens_out": sum(r.tokens_out for r in sub)}
        for kind in ("challenged", "control"):
            kv = {c: v for c, v in vals.items() if meta[c]["kind"] == kind}
            row[f"{kind}_accuracy"] = 100 * float(np.mean(list(kv.values()))) if kv else None
        row["by_field"] = {f: _summ({c: v for c, v in vals.items() if meta[c]["field"] == f}, meta, draws, seed)
                           for f in sorted({meta[c]["field"] for c in vals})}
        row["by_category"] = {k: _summ({c: v for c, v in vals.items() if k in meta[c]["categories"]}, meta, draws, seed)
                              for k in sorted({k for c in vals for k in meta[c]["categories"]})}
        row["by_project"] = {p: _summ({c: v for c, v in vals.items() if meta[c]["project"] == p}, meta, draws, seed)
                             for p in sorted({meta[c]["project"] for c in vals})}
        if cond == "project" and (model, "options-only", eff, rnd) in cs:
            row["project_minus_options"] = _paired(vals, cs[(model, "options-only", eff, rnd)], meta, draws, seed)
        if rnd > 0 and (model, cond, eff, rnd - 1) in cs:
            row["change_vs_previous_round"] = _paired(vals, cs[(model, cond, eff, rnd - 1)], meta, draws, seed)
            trans = [r.transition for r in sub]
            row["repairs"] = trans.count("repair")
            row["new_errors"] = trans.count("new_error")
        rows.append(row)
    out: dict = {"draws": draws, "seed": seed, "rows": rows, "human": None}
    if human is not None:
        h = {"name": human.name, "condition": human.condition, "source": human.source, "note": human.note,
             "accuracy": human.accuracy, "ci_case": human.ci, "ci_cluster": None, "n_cases": None}
        if human.per_case:
            known = {c: v for c, v in human.per_case.items() if c in meta} if meta else dict(human.per_case)
            hm = {c: meta.get(c, {"project": c}) for c in known}
            h.update(_summ(known, hm, draws, seed))
        out["human"] = h
    return out


def pivotal_section(run_dirs: list[Path], human: Path | str | None = None, draws: int = DRAWS,
                    seed: int = SEED) -> dict:
    """Everything the leaderboard's pivotal section shows (JSON-ready; render with `render_markdown`)."""
    return score(load_records([Path(d) for d in run_dirs]), draws, seed, load_human(human) if human else None)


def pivotal_table(run_dirs: list[Path], human: Path | str | None = None, draws: int = DRAWS,
                  seed: int = SEED) -> list[dict]:
    """The leaderboard's pivotal table: one flat row per (model, condition, effort, round), plus the human row."""
    return table_rows(pivotal_section(run_dirs, human, draws, seed))


def table_rows(data: dict) -> list[dict]:
    rows = []
    for r in data["rows"]:
        pm = r.get("project_minus_options") or {}
        rows.append({"model": r["model"], "condition": r["condition"], "effort": r["effort"], "round": r["round"],
                     "n_cases": r["n_cases"], "accuracy": r["accuracy"], "ci_case": r["ci_case"],
                     "ci_cluster": r["ci_cluster"], "challenged_accuracy": r["challenged_accuracy"],
                     "control_accuracy": r["control_accuracy"], "project_minus_options": pm.get("diff_pp"),
                     "diff_ci_case": pm.get("ci_case"), "diff_ci_cluster": pm.get("ci_cluster"),
                     "repairs": r.get("repairs"), "new_errors": r.get("new_errors"), "unparsed": r["unparsed"],
                     "chose_A": r["chose_A"], "tokens_in": r["tokens_in"], "tokens_out": r["tokens_out"],
                     "effort_applied": r["effort_applied"]})
    h = data.get("human")
    if h:
        rows.append({"model": h["name"], "condition": h["condition"], "effort": "-", "round": 0, "n_cases": h["n_cases"],
                     "accuracy": h["accuracy"], "ci_case": h["ci_case"], "ci_cluster": h["ci_cluster"],
                     "challenged_accuracy": None, "control_accuracy": None, "project_minus_options": None,
                     "diff_ci_case": None, "diff_ci_cluster": None, "repairs": None, "new_errors": None,
                     "unparsed": None, "chose_A": None, "tokens_in": None, "tokens_out": None, "effort_applied": None,
                     "source": h["source"]})
    return rows


def _ci(ci) -> str:
    return f"[{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "-"


def _f(v, nd: int = 1) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def render_markdown(data: dict, heading: str = "##") -> str:
    """Markdown tables: accuracy per model and condition; per field and category; reconsideration."""
    L = [f"{heading} Pivotal choice (SciΠvot protocol)", "",
         "Accuracy: % choosing the corrected plan, averaged over both option orders, then over cases; unparsed answers "
         f"are wrong. 95% intervals: case bootstrap and project-cluster bootstrap ({data['draws']} draws, seed "
         f"{data['seed']}). Δ: paired project − options-only difference (pp).", ""]
    hdr = ["Model", "Condition", "Effort", "Round", "Cases", "Accuracy", "Case CI", "Project CI", "Challenged",
           "Controls", "Δ proj−opt", "Δ case CI", "Δ project CI", "Unparsed", "Chose A %", "Tokens in/out"]
    L += ["| " + " | ".join(hdr) + " |", "|" + "|".join("---" for _ in hdr) + "|"]
    for r in table_rows(data):
        eff = r["effort"] + ("" if r["effort"] in ("default", "-") or r["effort_applied"] else " (not applied)")
        tok = "-" if r["tokens_in"] is None else f"{r['tokens_in']}/{r['tokens_out']}"
        L.append("| " + " | ".join([r["model"], r["condition"], eff, str(r["round"]), str(r["n_cases"] or "-"),
                                    _f(r["accuracy"]), _ci(r["ci_case"]), _ci(r["ci_cluster"]),
                                    _f(r["challenged_accuracy"]), _f(r["control_accuracy"]),
                                    _f(r["project_minus_options"]), _ci(r["diff_ci_case"]), _ci(r["diff_ci_cluster"]),
                                    str(r["unparsed"] if r["unparsed"] is not None else "-"), _f(r["chose_A"]), tok]) + " |")
    if data.get("human"):
        L += ["", f"Human baseline source: {data['human']['source']}"]
    L.append("")
    for dim, title in (("by_field", "field"), ("by_category", "judgment category")):
        L += [f"{heading}# Pivotal accuracy by {title}", ""]
        keys = sorted({k for r in data["rows"] for k in r[dim]})
        hdr = ["Model", "Condition", "Effort", "Round"] + keys
        L += ["| " + " | ".join(hdr) + " |", "|" + "|".join("---" for _ in hdr) + "|"]
        for r in data["rows"]:
            cells = [f"{_f(r[dim][k]['accuracy'])} {_ci(r[dim][k]['ci_case'])} (n={r[dim][k]['n_cases']})"
                     if k in r[dim] else "-" for k in keys]
            L.append("| " + " | ".join([r["model"], r["condition"], r["effort"], str(r["round"])] + cells) + " |")
        L.append("")
    rec = [r for r in data["rows"] if r["round"] > 0]
    if rec:
        L += [f"{heading}# Pivotal reconsideration", "",
              "| Model | Condition | Effort | Round | Repairs | New errors | Δ vs previous (pp) | Case CI | Project CI |",
              "|---|---|---|---|---|---|---|---|---|"]
        for r in rec:
            c = r.get("change_vs_previous_round") or {}
            L.append(f"| {r['model']} | {r['condition']} | {r['effort']} | {r['round']} | {r.get('repairs', '-')} | "
                     f"{r.get('new_errors', '-')} | {_f(c.get('diff_pp'))} | {_ci(c.get('ci_case'))} | {_ci(c.get('ci_cluster'))} |")
        L.append("")
    return "\n".join(L) + "\n"
