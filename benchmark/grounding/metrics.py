"""Agent and evaluator metrics over paired grounding runs (seed 000 Eq. 2-5), with task-clustered bootstrap intervals.

Agent (per run folder = one model and option set). A unit is (item, replicate); a(.) its answers by condition,
flag(.) its explicit "the data do not support an answer" (data_support does not support / cannot determine, or the
insufficient-data option), c* the key and c' the flip's supported answer.
  accuracy          a(E) = c*                          accuracy_nodata   a(no data) = c*
  evidence_gain     accuracy - accuracy_nodata
  I_rep             two replicates on E agree (pairs of replicates; needs --replicates >= 2)
  I_null            a(T0 E) = a(E)
  R_flip            a(TC E) = c'
  R_rm              a(TB E) != a(E) or flag(TB E)      R_rm_flag          flag(TB E)
  EGA               a(E) = c* and (a(TB E) != a(E) or flag(TB E)) and a(TC E) = c'
  EGA_strict        a(E) = c* and flag(TB E) and a(TC E) = c'
  routes (Eq. 4)    correct units split by reacts (R_rm condition) x flip outcome: derived (reacts, follows c'),
                    elimination (persists, follows), rm_only (reacts, keeps c*), recalled (persists, keeps c*),
                    other (flip to a third option or no answer); they sum to accuracy, derived = EGA.
Only complete replicates count: a (item, replicate) unit enters the metrics when every condition of the run has an
answer (an option or an explicit flag); a withdrawal run that errored or went unparsed is not "reacting", so such
units are left out and counted as `incomplete_units`.
Intervals: 95% percentile bootstrap resampling items (each item's replicates and conditions stay together).
Transform consistency (seed 000) applies to synthetic problems with exactly transforming ground truth; these items
have none, so it is not reported.

Evaluator stress test (Eq. 5), for any score M of a run against the ORIGINAL key: S_null = E|M(E) - M(T0 E)|
(beside S_rep, the same between two replicates on E), blind spots B_rm = E[M(TB E)] and B_flip = E[M(TC E)],
and AUC_flip = P[M(r+) > M(r-)] + P[=]/2 over flip runs r+ answering c' and r- not. Evaluators: the key-match
score, each judge x prompt in judge.jsonl, and (`grader_stress`) our L1/L2 graders on paired hand-written reports.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import numpy as np

from benchmark.errors import BenchmarkError

AGENT_METRICS = ("accuracy", "accuracy_nodata", "evidence_gain", "I_rep", "I_null", "R_flip", "R_rm", "R_rm_flag",
                 "EGA", "EGA_strict", "derived", "elimination", "rm_only", "recalled", "other",
                 "key_credit_rm", "key_credit_flip")
ROUTES = ("derived", "elimination", "rm_only", "recalled", "other")


def load_run(run_dir: Path) -> tuple[dict, list, list]:
    from benchmark.grounding.judge import load_judgements
    from benchmark.grounding.run import GroundingStore

    run_dir = Path(run_dir)
    if not (run_dir / "grounding.jsonl").exists():
        raise BenchmarkError(f"{run_dir} holds no grounding run (no grounding.jsonl); run `python -m benchmark grounding run` first")
    store = GroundingStore(run_dir)
    return store.config(), store.results(), load_judgements(run_dir)


def label(cfg: dict) -> str:
    extra = [x for x, on in (("anonymised", cfg.get("anonymise")), ("+insufficient option", cfg.get("insufficient_option"))) if on]
    return cfg["model"] + (f" ({', '.join(extra)})" if extra else "")


def _units(records) -> dict[str, dict[int, dict[str, Any]]]:
    out: dict[str, dict[int, dict[str, Any]]] = defaultdict(lambda: defaultdict(dict))
    for r in records:
        out[r.item][r.replicate][r.condition] = r
    return out


def answered(r) -> bool:
    """A run that gave an answer: an option, or an explicit "the data do not support one". An error, a refusal or
    an unparsed reply is no answer, and must not count as reacting to a withdrawal or ignoring a flip."""
    return r.status == "graded" and (r.answer is not None or bool(r.flag))


def complete_units(records) -> tuple[dict[str, dict[int, dict[str, Any]]], int]:
    """Only replicates answered under every condition the run asked (seed 000's metrics pair conditions within a
    replicate); returns those units and how many incomplete ones were left out."""
    units = _units(records)
    conditions = {r.condition for r in records}
    kept: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    dropped = 0
    for item, reps in units.items():
        for rep, u in reps.items():
            if set(u) == conditions and all(answered(r) for r in u.values()):
                kept[item][rep] = u
            else:
                dropped += 1
    return kept, dropped


def _unit_values(u: dict[str, Any]) -> dict[str, float | None]:
    """Per-unit indicators of every agent metric (None where the unit lacks the conditions it needs)."""
    E, N0, B, C, ND = (u.get(c) for c in ("original", "null", "withdrawal", "flip", "nodata"))
    v: dict[str, float | None] = {k: None for k in AGENT_METRICS}
    if E is not None:
        v["accuracy"] = float(E.answer == E.key_answer)
    if ND is not None:
        v["accuracy_nodata"] = float(ND.answer == ND.key_answer)
    if E is not None and N0 is not None:
        v["I_null"] = float(N0.answer == E.answer)
    if C is not None:
        v["R_flip"] = float(C.answer == C.flip_answer)
        v["key_credit_flip"] = C.key_match
    if B is not None:
        v["R_rm_flag"] = float(B.flag)
        v["key_credit_rm"] = B.key_match
    if E is not None and B is not None:
        v["R_rm"] = float(B.answer != E.answer or B.flag)
    if E is not None and B is not None and C is not None:
        correct = E.answer == E.key_answer
        reacts = B.answer != E.answer or B.flag
        follows, keeps = C.answer == C.flip_answer, C.answer == C.key_answer
        v["EGA"] = float(correct and reacts and follows)
        v["EGA_strict"] = float(correct and B.flag and follows)
        route = ("derived" if reacts and follows else "elimination" if follows else
                 "rm_only" if reacts and keeps else "recalled" if keeps else "other")
        for r in ROUTES:
            v[r] = float(correct and route == r)
    return v


def _item_sums(records) -> tuple[list[str], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per item and metric: numerator and denominator (units, or replicate pairs for I_rep)."""
    units, _ = complete_units(records)
    items = sorted(units)
    num = {k: np.zeros(len(items)) for k in AGENT_METRICS}
    den = {k: np.zeros(len(items)) for k in AGENT_METRICS}
    for i, it in enumerate(items):
        reps = units[it]
        for u in reps.values():
            for k, x in _unit_values(u).items():
                if x is not None:
                    num[k][i] += x
                    den[k][i] += 1
        ans = [reps[r]["original"].answer for r in sorted(reps) if "original" in reps[r]]
        for a in range(len(ans)):
            for b in range(a + 1, len(ans)):
                num["I_rep"][i] += float(ans[a] == ans[b])
                den["I_rep"][i] += 1
    return items, num, den


def agent_metrics(records, bootstrap: int = 1000, seed: int = 0) -> dict[str, Any]:
    items, num, den = _item_sums(records)
    n = len(items)
    rng = np.random.default_rng(seed)
    w = rng.multinomial(n, np.full(n, 1.0 / n), size=bootstrap).astype(float) if n and bootstrap else np.zeros((0, n))
    kept, dropped = complete_units(records)
    out: dict[str, Any] = {"items": n, "units": int(sum(len(v) for v in kept.values())), "incomplete_units": dropped,
                           "metrics": {}}
    draws: dict[str, np.ndarray] = {}
    for k in AGENT_METRICS:
        if k == "evidence_gain":
            continue
        d = den[k].sum()
        point = float(num[k].sum() / d) if d else None
        with np.errstate(invalid="ignore", divide="ignore"):
            draws[k] = (w @ num[k]) / (w @ den[k]) if len(w) else np.array([])
        out["metrics"][k] = {"value": point, "n": int(d), "ci95": _ci(draws[k]) if point is not None else None}
    a, nd = out["metrics"]["accuracy"]["value"], out["metrics"]["accuracy_nodata"]["value"]
    gain = None if a is None or nd is None else a - nd
    out["metrics"]["evidence_gain"] = {"value": gain, "n": out["metrics"]["accuracy"]["n"],
                                       "ci95": _ci(draws["accuracy"] - draws["accuracy_nodata"]) if gain is not None else None}
    out["self_report"] = self_reports(records)
    return out


def _ci(x: np.ndarray) -> list[float] | None:
    x = x[np.isfinite(x)]
    if not len(x):
        return None
    return [float(np.percentile(x, 2.5)), float(np.percentile(x, 97.5))]


def self_reports(records) -> dict[str, Any]:
    by: dict[str, list] = defaultdict(list)
    for r in records:
        by[r.condition].append(r)
    out = {}
    for c, rs in sorted(by.items()):
        conf = [r.confidence for r in rs if r.confidence is not None]
        out[c] = {"runs": len(rs), "mean_confidence": float(np.mean(conf)) if conf else None,
                  "claims_support": float(np.mean([r.data_support == "supports" for r in rs])),
                  "flagged": float(np.mean([r.flag for r in rs])),
                  "unparsed": float(np.mean([r.answer is None for r in rs]))}
    return out


# ---------------------------------------------------------------- evaluator stress test

def auc(pos: list[float], neg: list[float]) -> float | None:
    if not pos or not neg:
        return None
    p, q = np.asarray(pos)[:, None], np.asarray(neg)[None, :]
    return float(((p > q) + 0.5 * (p == q)).mean())


def stress(records, score: Callable[[Any], float | None]) -> dict[str, Any]:
    """S_null, S_rep, S_rm, S_flip, B_rm, B_flip, AUC_flip of one evaluator over (possibly pooled) records."""
    by: dict[tuple, dict[str, Any]] = defaultdict(dict)
    for r in records:
        by[(r.run_id, r.model, r.anonymised, r.insufficient_option, r.item, r.replicate)][r.condition] = r
    s_null, s_rm, s_flip, b_rm, b_flip, pos, neg = [], [], [], [], [], [], []
    orig_by_item: dict[tuple, list[float]] = defaultdict(list)
    for k, u in by.items():
        m = {c: score(r) for c, r in u.items()}
        if m.get("original") is not None:
            orig_by_item[k[:5]].append(m["original"])
            for c, acc in (("null", s_null), ("withdrawal", s_rm), ("flip", s_flip)):
                if m.get(c) is not None:
                    acc.append(abs(m["original"] - m[c]))
        if m.get("withdrawal") is not None:
            b_rm.append(m["withdrawal"])
        if m.get("flip") is not None:
            b_flip.append(m["flip"])
            (pos if u["flip"].answer == u["flip"].flip_answer else neg).append(m["flip"])
    s_rep = [abs(a - b) for xs in orig_by_item.values() for i, a in enumerate(xs) for b in xs[i + 1:]]
    mean = lambda xs: float(np.mean(xs)) if xs else None  # noqa: E731
    return {"S_null": mean(s_null), "S_rep": mean(s_rep), "S_rm": mean(s_rm), "S_flip": mean(s_flip),
            "B_rm": mean(b_rm), "B_flip": mean(b_flip), "AUC_flip": auc(pos, neg),
            "n": {"null_pairs": len(s_null), "rep_pairs": len(s_rep), "withdrawal": len(b_rm), "flip": len(b_flip),
                  "flip_followers": len(pos), "flip_non_followers": len(neg)}}


def evaluator_stress(runs: list[tuple[dict, list, list]]) -> dict[str, Any]:
    records = [r for _, recs, _ in runs for r in recs]
    out = {"key_match": stress(records, lambda r: r.key_match)}
    scores: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for _, recs, judgements in runs:
        run_ids = {r.run_id for r in recs}
        for j in judgements:
            if j.parsed and j.overall is not None:
                scores[(j.judge, j.prompt)][(next(iter(run_ids), ""), j.key)] = j.overall / 10.0
    for (judge, prompt), sc in sorted(scores.items()):
        out[f"judge {judge} [{prompt}]"] = stress(records, lambda r, sc=sc: sc.get((r.run_id, r.key)))
    return out


def grader_stress(reports_root: Path | None = None) -> dict[str, Any]:
    """Our L1/L2 graders on paired hand-written reports (worlds/<track>/reports/<world>.yaml): r+ = the correct
    report, r- = each trap-following or defect-missing one. AUC_flip = P[grade(r+) > grade(r-)] (+ ties / 2);
    B_trap = mean credit (0-1) given to the trap-following reports (the blind spot); S_null = mean |change| of
    the correct report's grade when its lists are reversed and its keys reordered (an edit that changes nothing)."""
    import yaml

    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import REPO_ROOT, Suite
    from graders.manifest import L3World
    from graders.grade import grade

    import tempfile

    from benchmark.suite.freeze import ensure_built
    from benchmark.suite.handwritten import write_products

    from benchmark.suite.handwritten import report_path
    suite = Suite()
    scratch = tempfile.TemporaryDirectory(prefix="benchmark-products-")
    per: dict[str, dict[str, list]] = defaultdict(lambda: {"pos": [], "neg": [], "null": []})
    worlds = 0
    for ref in sorted(suite.worlds.values(), key=lambda r: r.id):
        if isinstance(ref.world, L3World):
            continue
        path = reports_root / ref.world.track / f"{ref.id}.yaml" if reports_root else report_path(ref)
        if not path.exists():
            continue
        doc = yaml.safe_load(path.read_text())
        golden = read_golden(ref).values
        products = write_products(doc, golden, Path(scratch.name) / ref.id,
                                  ensure_built(ref) if doc.get("products_world") else None)
        good = grade(ref, golden, doc["correct"], products=products).score / 100
        perm = grade(ref, golden, _null_edit(doc["correct"]), products=products).score / 100
        key = f"{ref.world.track} {ref.world.level}"
        per[key]["pos"].append(good)
        per[key]["null"].append(abs(good - perm))
        for bad in doc.get("wrong") or []:
            per[key]["neg"].append(grade(ref, golden, bad, products=products).score / 100)
        worlds += 1
    scratch.cleanup()
    out: dict[str, Any] = {"worlds": worlds, "groups": {}}
    allp, alln, alls = [], [], []
    for key, d in sorted(per.items()):
        out["groups"][key] = _grader_row(d["pos"], d["neg"], d["null"])
        allp += d["pos"]
        alln += d["neg"]
        alls += d["null"]
    out["all"] = _grader_row(allp, alln, alls)
    return out


def _grader_row(pos, neg, null) -> dict[str, Any]:
    return {"AUC_flip": auc(pos, neg), "B_trap": float(np.mean(neg)) if neg else None,
            "S_null": float(np.mean(null)) if null else None, "correct_mean": float(np.mean(pos)) if pos else None,
            "n_correct": len(pos), "n_trap": len(neg)}


def _null_edit(obj):
    if isinstance(obj, dict):
        return {k: _null_edit(obj[k]) for k in reversed(list(obj))}
    if isinstance(obj, list):
        return [_null_edit(x) for x in reversed(obj)]
    return obj


# ---------------------------------------------------------------- rendering

def _p(v) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def _pci(m: dict) -> str:
    if m["value"] is None:
        return "-"
    ci = m.get("ci95")
    return f"{100 * m['value']:.1f}" + (f" [{100 * ci[0]:.0f}, {100 * ci[1]:.0f}]" if ci else "")


def _f(v, nd=2) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def _table(header, rows) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"] + \
        ["| " + " | ".join(r) + " |" for r in rows]


def summarise(run_dirs: list[Path], bootstrap: int = 1000, seed: int = 0, graders: bool = False) -> dict[str, Any]:
    runs = [load_run(Path(d)) for d in run_dirs]
    out: dict[str, Any] = {"runs": []}
    for (cfg, recs, _), d in zip(runs, run_dirs):
        out["runs"].append({"run": str(d), "label": label(cfg), "model": cfg["model"], **agent_metrics(recs, bootstrap, seed)})
    out["evaluators"] = evaluator_stress(runs)
    if graders:
        out["graders"] = grader_stress()
    return out


def render_markdown(s: dict[str, Any]) -> str:
    L = ["# Evidence grounding", "", "Agents (%, 95% task-clustered bootstrap interval):", ""]
    rows = []
    for r in s["runs"]:
        m = r["metrics"]
        rows.append([r["label"], str(r["items"]), _pci(m["accuracy"]), _pci(m["EGA"]), _pci(m["EGA_strict"]),
                     _pci(m["accuracy_nodata"]), _pci(m["evidence_gain"]), _p(m["I_rep"]["value"]), _p(m["I_null"]["value"]),
                     _p(m["R_flip"]["value"]), _p(m["R_rm"]["value"]), _p(m["R_rm_flag"]["value"]),
                     _p(m["key_credit_rm"]["value"]), _p(m["key_credit_flip"]["value"])])
    L += _table(["Agent", "Items", "Accuracy", "EGA", "EGA strict", "No-data acc.", "Evidence gain", "I_rep", "I_null",
                 "R_flip", "R_rm", "R_rm flag", "Key credit rm", "Key credit flip"], rows)
    L += ["", "Routes to accuracy (Eq. 4, % of units; sum = accuracy):", ""]
    L += _table(["Agent", *ROUTES], [[r["label"], *(_p(r["metrics"][k]["value"]) for k in ROUTES)] for r in s["runs"]])
    L += ["", "Evaluator stress test (pooled over the runs above; M against the original key):", ""]
    rows = []
    for name, e in s["evaluators"].items():
        rows.append([name, _f(e["S_null"]), _f(e["S_rep"]), _f(e["S_rm"]), _f(e["S_flip"]), _f(e["B_rm"]), _f(e["B_flip"]),
                     _f(e["AUC_flip"]), f"{e['n']['flip_followers']}/{e['n']['flip_non_followers']}"])
    L += _table(["Evaluator", "S_null", "S_rep", "S_rm", "S_flip", "B_rm", "B_flip", "AUC_flip", "flip +/-"], rows)
    if s.get("graders"):
        L += [""] + render_graders_md(s["graders"])
    return "\n".join(L) + "\n"


def render_graders_md(g: dict[str, Any]) -> list[str]:
    L = [f"Our L1/L2 graders on paired hand-written reports ({g['worlds']} worlds; r+ correct, r- trap-following):", ""]
    rows = [[k, _f(v["AUC_flip"]), _f(v["B_trap"]), _f(v["S_null"]), f"{v['n_correct']}/{v['n_trap']}"]
            for k, v in [*g["groups"].items(), ("all", g["all"])]]
    return L + _table(["Graders", "AUC_flip", "B_trap", "S_null", "reports +/-"], rows)


def leaderboard_rows(run_dirs: list[Path], bootstrap: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """One row per grounding run for the leaderboard: accuracy beside EGA (benchmark.score.leaderboard --grounding)."""
    rows = []
    for d in run_dirs:
        cfg, recs, _ = load_run(Path(d))
        m = agent_metrics(recs, bootstrap, seed)["metrics"]
        rows.append({"model": label(cfg), **{k: m[k] for k in ("accuracy", "EGA", "EGA_strict", "accuracy_nodata",
                                                                 "R_flip", "R_rm_flag")}})
    return sorted(rows, key=lambda r: r["model"])


def render_leaderboard_md(rows: list[dict[str, Any]]) -> list[str]:
    L = ["## Evidence grounding", "",
         "Accuracy on the original data beside evidence-grounded accuracy (EGA: correct, reacts to withdrawal and "
         "follows the flip; seed 000 Eq. 3), %, 95% task-clustered bootstrap intervals.", ""]
    L += _table(["Model", "Accuracy", "EGA", "EGA strict", "No-data acc.", "R_flip", "R_rm flag"],
                [[r["model"], _pci(r["accuracy"]), _pci(r["EGA"]), _pci(r["EGA_strict"]), _pci(r["accuracy_nodata"]),
                  _p(r["R_flip"]["value"]), _p(r["R_rm_flag"]["value"])] for r in rows])
    return L + [""]


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=1, sort_keys=True, default=float)
