"""`leaderboard`: regenerate seed 001 Table 1, the per-track tables and the figures from recorded runs, the
adjudication ledgers and the dated rate cards (SPEC R11). Identical inputs give identical bytes: every row and
key is sorted, floats are printed with fixed formats, and PNGs are written by the Agg canvas at a fixed DPI with
no timestamp or software metadata.

    python -m benchmark leaderboard --runs runs/a runs/b [--format md csv json] [--out DIR]
        [--ledgers FILE_OR_DIR ...] [--date YYYY-MM-DD] [--fallback X=Y ...]

Writes into DIR (default `leaderboard/`): leaderboard.md | leaderboard.csv + leaderboard_tracks.csv |
leaderboard.json, and stage_profile.png, quality_vs_cost.png, threshold_curve.png (drawn by
benchmark/score/leaderboard_figures.py). The JSON carries every number the tables show (unrounded to 6 decimals) and more.

The markdown uses one scale, 0-100, for scores, shares and rates alike (SCALE_NOTE, its first line). Table 1 says
per model how many results the LLM verifier has not checked and how many verifier discrepancies await a ruling
(`verification_status`): such numbers are shown, but are not final. Progress goes to stderr: a bar on a terminal,
a periodic line in a log (benchmark.run.progress).
"""
from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

from benchmark.errors import BenchmarkError
from benchmark.models.human import is_human

# Kept light at import time (the CLI builds its parser from here): numpy, scipy and matplotlib load on use.
LEVELS = ("L1", "L2", "L3")
THRESHOLDS = tuple(range(0, 101))

FORMATS = ("md", "csv", "json")
SCALE_NOTE = ("Scale: every score, share and rate in this file is on 0-100 (a share is the per cent of its stated base, "
              "printed without a % sign); tokens are in millions and costs in USD.")
PRICING_HOWTO = ("to price it, add its per-million-token rates to a new dated rate card, pricing/<date>.yaml (a worked "
                 "example is in pricing/README.md), and regenerate the leaderboard")


# ------------------------------------------------------------------ formatting

def _f(v, nd: int = 1, none: str = "-") -> str:
    return none if v is None else f"{v:.{nd}f}"


def _pct(v, none: str = "-") -> str:
    """A share (0-1) on the file's one scale, 0-100, without a % sign (SCALE_NOTE says so once)."""
    return none if v is None else f"{100 * v:.1f}"


def verification_text(v: dict | None) -> str:
    """'3 of 110 unverified; 2 rulings pending', 'verified', or '-' (a replay row, or nothing to verify)."""
    if not v or not v.get("verifiable"):
        return "-"
    parts = []
    if v["unverified"]:
        parts.append(f"{v['unverified']} of {v['verifiable']} unverified")
    if v["pending"]:
        parts.append(f"{v['pending']} ruling{'s' if v['pending'] != 1 else ''} pending")
    return "; ".join(parts) or "verified"


def _usd(v, nd: int, unpriced: bool, estimated: bool = False) -> str:
    """A cost cell: "unpriced" without a rate; "~" before a cost whose tokens were partly estimated with the model's
    tokenizer (an endpoint that reported no usage), so an estimate never reads as a measured figure."""
    if unpriced:
        return "unpriced"
    text = _f(v, nd)
    return f"~{text}" if estimated and v is not None else text


def _agent_usd(model: str, v, nd: int, unpriced: bool, estimated: bool = False) -> str:
    """The agent's cost cell: "-" for a person (human/NAME), whose time is not on a rate card (no cost, and not
    "unpriced" either: nothing is missing from the card); else `_usd`."""
    return "-" if is_human(model) else _usd(v, nd, unpriced, estimated)


def _pm(mean, sd) -> str:
    if mean is None:
        return "-"
    return f"{mean:.1f} ± {sd:.1f}" if sd is not None else f"{mean:.1f}"


def table1_rows(data: dict) -> list[dict]:
    """Table 1, one row per model: ranked rows by rank, then unranked rows by name."""
    rows = []
    for s in data["models"]:
        acc = s["accounting"]
        ci = s["ci95"]["overall"]
        rows.append({
            "rank": s["rank"], "model": s["model"], "overall": s["overall"], "overall_sd": s["overall_sd"],
            "overall_ci": ci, "L1": s["levels"]["L1"]["mean"], "L1_sd": s["levels"]["L1"]["sd"],
            "L2": s["levels"]["L2"]["mean"], "L2_sd": s["levels"]["L2"]["sd"],
            "L3": s["levels"]["L3"]["mean"], "L3_sd": s["levels"]["L3"]["sd"],
            "tokens_m": acc["tokens_m"], "q_per_mtok": acc["q_per_mtok"], "usd_per_task": acc["usd_per_task"],
            "usd_per_qpt": acc["usd_per_qpt"], "unpriced_models": acc["unpriced_models"], "calls": acc["agent"]["calls"],
            "usd_estimated": bool(acc.get("usd_estimated")),
            "coverage": s["coverage"]["coverage"], "ranked": s["ranked"], "flagged_tracks": s["flagged_tracks"],
            "complete": s["coverage"]["complete"], "answered": s["coverage"]["answered"],
            "assigned": s["coverage"]["assigned"], "verification": s.get("verification"),
        })
    return sorted(rows, key=lambda r: (r["rank"] is None, r["rank"] or 0, r["model"]))


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def physics_section(data: dict) -> list[str]:
    """Seed 001 Tables 11-12: the physics tracks' stage means (over the physics tracks) and per-track scores, with
    the agent's tokens and cost on them; kept out of Table 1's Overall. Empty when no run covers a physics track."""
    models = [s for s in data["models"] if s.get("physics")]
    if not models:
        return []
    L = ["## Physics (scored apart)", "",
         "Seed 001 Appendix F: the physics tracks are reported separately and never enter the Overall above. L1-L3: "
         "mean over the physics tracks of each track's stage score (L2 family-balanced); Tokens in millions and $/task "
         "for the agent on the physics tasks only.", ""]
    rows = []
    for s in models:
        p = s["physics"]
        a = p["accounting"]
        unpriced = bool(a["agent"]["unpriced_models"])
        rows.append([s["model"]] + [_f(p["levels"][lv]["mean"]) for lv in LEVELS]
                    + [_f(a["agent"]["tokens_m"], 2),
                       _agent_usd(s["model"], a["usd_per_task"], 3, unpriced),
                       _f(a["agent"]["calls"], 0),
                       _pct(p["coverage"]["coverage"])])
    L += _md_table(["Model", "L1", "L2", "L3", "Tokens (M)", "$/task", "Calls", "Coverage"], rows)
    L.append("")
    for t in sorted({t for s in models for t in s["physics"]["tracks"]}):
        L += [f"### {t} (physics)", ""]
        rows = [[s["model"], *(_f(s["physics"]["tracks"][t][k]) for k in ("L1", "L2", "L3", "composite")),
                 "/".join(s["physics"]["tracks"][t]["levels_missing"]) or "-"]
                for s in models if t in s["physics"]["tracks"]]
        L += _md_table(["Model", "L1", "L2", "L3", "Composite", "Levels missing"], rows)
        L.append("")
    return L


def baseline_kind(model: str) -> str | None:
    """'human baseline' for a person's run (human/NAME), 'scripted baseline' for a scripted agent; None for a model."""
    if is_human(model):
        return "human baseline"
    if model.startswith("scripted/"):
        return "scripted baseline"
    return None


def render_markdown(data: dict) -> str:
    L: list[str] = ["# Leaderboard", "", SCALE_NOTE, ""]
    inp = data["inputs"]
    L.append(f"Assigned tasks: {inp['assigned_tasks']} over {len(inp['tracks'])} tracks ({', '.join(inp['tracks'])}). "
             f"Rate cards: {', '.join(inp['rate_cards']) or 'none'}. Ledgers: {', '.join(inp['ledgers']) or 'none'} "
             f"({inp['rulings_in_force']} rulings in force). Bootstrap: {inp['bootstrap']['draws']} draws, seed {inp['bootstrap']['seed']}.")
    L.append("")
    L.append("## Table 1")
    L.append("")
    L.append("Scores 0-100; L1-L3 mean ± SD across tracks; Overall = mean of track composites (geometric mean of L1-L3) "
             "with its 95% bootstrap interval. Tokens in millions; Q/Mtok: Overall per million tokens; $/task: USD per "
             "assigned task; $/q.pt: $/task per Overall point; Calls: recorded agent API calls (one pass, replicates "
             "averaged); Coverage: share of assigned tasks answered; Verification: results the LLM verifier has not checked "
             "yet and verifier discrepancies no ruling has settled yet (both shown as not final). Agent usage only: "
             "verifier, reviewer and judge usage are listed below.")
    L.append("")
    rows = []
    for r in table1_rows(data):
        ci = r["overall_ci"]
        overall = _f(r["overall"]) + (f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "")
        unpriced = bool(r["unpriced_models"])
        if not r["complete"]:  # faults or missing worlds: shown, never ranked as if complete
            name = f"*{r['model']}* (incomplete: {r['answered']}/{r['assigned']})"
        else:
            name = r["model"] if r["ranked"] else f"*{r['model']}* (unranked)"
        if baseline_kind(r["model"]):
            name += f" ({baseline_kind(r['model'])})"
        if r["flagged_tracks"]:
            name += " †"
        rows.append([str(r["rank"]) if r["rank"] else "-", name, overall, _pm(r["L1"], r["L1_sd"]), _pm(r["L2"], r["L2_sd"]),
                     _pm(r["L3"], r["L3_sd"]), _f(r["tokens_m"], 2), _f(r["q_per_mtok"], 2),
                     _agent_usd(r["model"], r["usd_per_task"], 3, unpriced, r["usd_estimated"]),
                     _agent_usd(r["model"], r["usd_per_qpt"], 4, unpriced, r["usd_estimated"]),
                     _f(r["calls"], 0), _pct(r["coverage"]), verification_text(r["verification"])])
    L += _md_table(["Rank", "Model", "Overall [95% CI]", "L1", "L2", "L3", "Tokens (M)", "Q/Mtok", "$/task", "$/q.pt",
                    "Calls", "Coverage", "Verification"], rows)
    L.append("")
    notes = []
    for s in data["models"]:
        if is_human(s["model"]):
            notes.append(f"{s['model']}: a person who worked the same worlds under the same rules (the agent's prompt, "
                         "the same sandbox kernel, step budget and limits: `run --model human/NAME`): a baseline, not a "
                         "model; no tokens or cost.")
        if s["accounting"].get("usd_estimated"):
            notes.append(f"{s['model']}: ~ cost estimated: its endpoint reported no token usage for some calls, so those "
                         "calls were counted with the model's tokenizer (litellm token_counter).")
        unpriced = [m for m in s["accounting"]["unpriced_models"] if not is_human(m)]
        if unpriced:  # a person is not on a rate card by design; a reviewer or judge model missing from it is named
            notes.append(f"{s['model']}: unpriced ({', '.join(unpriced)} not on the rate card in force); {PRICING_HOWTO}.")
        if s["flagged_tracks"]:
            notes.append(f"{s['model']} †: composite over the levels present in {', '.join(s['flagged_tracks'])} "
                         f"(missing: {'; '.join(t + ' ' + '/'.join(s['tracks'][t]['levels_missing']) for t in s['flagged_tracks'])}).")
        if not s["coverage"]["complete"]:
            c = s["coverage"]
            failed = c.get("errors", 0)
            notes.append(f"{s['model']}: unranked, incomplete coverage ({c['answered']}/{c['assigned']} answered, "
                         f"{c['refused']} refused, {c['missing']} missing"
                         + (f", of which {failed} failed with model, sandbox or harness errors: rerun them with "
                            "`run --resume`" if failed else "") + ").")
        v = s.get("verification")
        if v and (v["unverified"] or v["pending"]):
            todo = ([f"`python -m benchmark verify RUN` checks the unverified"] if v["unverified"] else []) + \
                   ([f"`python -m benchmark ledger pending RUN` lists the discrepancies to rule on"] if v["pending"] else [])
            notes.append(f"{s['model']}: {verification_text(v)}: these results are not final; "
                         f"{' and '.join(todo)} (RUN: {', '.join(v['runs'])}).")
    L += [f"- {n}" for n in notes] + ([""] if notes else [])
    L += physics_section(data)

    L.append("## Per-track scores")
    L.append("")
    tracks = [t for t in data["inputs"]["tracks"] if any(t in s["tracks"] for s in data["models"])]
    for t in tracks:
        L.append(f"### {t}")
        L.append("")
        rows = []
        for s in data["models"]:
            ts = s["tracks"].get(t)
            if ts is None:
                continue
            rows.append([s["model"], _f(ts["L1"]), _f(ts["L2"]), _f(ts["L3"]), _f(ts["composite"]), _f(ts["arithmetic"]),
                         _f(ts["min_stage"]), "/".join(ts["levels_missing"]) or "-"])
        L += _md_table(["Model", "L1", "L2", "L3", "Composite", "Arithmetic", "Min stage", "Levels missing"], rows)
        L.append("")

    L.append("## Alternative aggregation views")
    L.append("")
    rows = [[s["model"], _f(s["views"]["geometric"]), _f(s["views"]["arithmetic"]), _f(s["views"]["min_stage"]),
             _f(s["overall_sd"])] for s in data["models"]]
    L += _md_table(["Model", "Geometric (Overall)", "Arithmetic mean of stages", "Mean within-track min stage", "SD across tracks"], rows)
    L.append("")
    L.append("Share of tracks where all stage means exceed the requirement (> t; seed 001 A.4):")
    L.append("")
    marks = [t for t in THRESHOLDS if t % 10 == 0]
    rows = [[s["model"]] + [_pct(s["threshold_curve"][t]) for t in marks] for s in data["models"]]
    L += _md_table(["Model"] + [f">{t}" for t in marks], rows)
    L.append("")

    L.append("## Perfect scores and bottlenecks")
    L.append("")
    rows = [[s["model"]] + [_pct(s["perfect"][lv]["rate"]) for lv in LEVELS]
            + [_pct(s["bottleneck"]["shares"][lv]) for lv in LEVELS] for s in data["models"]]
    pl = data["pooled"]
    rows.append(["all observed models"] + [_pct(pl["perfect"][lv]["rate"]) for lv in LEVELS]
                + [_pct(pl["bottleneck_shares"][lv]) for lv in LEVELS])
    L += _md_table(["Model", "Perfect L1", "Perfect L2", "Perfect L3", "Bottleneck L1", "Bottleneck L2", "Bottleneck L3"], rows)
    L.append("")

    L.append("## L1 reporting dimensions, L2 dimensions, L3 commitment")
    L.append("")
    rows = []
    for s in data["models"]:
        d1, d2, l3 = s["l1_dimensions"]["mean"], s["l2_dimensions"]["mean"], s["l3"]
        rows.append([s["model"], _pct(d1.get("assessment_correctness")), _pct(d1.get("issue_recognition")),
                     _pct(d1.get("methodological_response")), _pct(d1.get("result_calibration")), _pct(d1.get("fabrication")),
                     _f(d2.get("A")), _f(d2.get("I")), _f(d2.get("M")), _f(d2.get("C")),
                     f"{l3['eligible']}/{l3['dossiers']}", _pct(l3["commitment"]),
                     _f(l3["conditional_novelty"]) + (f" (n={l3['novelty_n']})" if l3["novelty_n"] else "")])
    L += _md_table(["Model", "L1 correct", "L1 recognition", "L1 response", "L1 calibration", "L1 fabrication",
                    "L2 A", "L2 I", "L2 M", "L2 C", "L3 eligible", "L3 commitment", "L3 cond. novelty"], rows)
    L.append("")

    L += l3_oversight_markdown(data)

    L.append("## Coverage and fallback replay")
    L.append("")
    rows = []
    for s in data["models"]:
        c, rp = s["coverage"], s["replay"]
        rows.append([s["model"], str(c["assigned"]), str(c["answered"]), str(c["refused"]), str(c["missing"]), _pct(c["coverage"]),
                     (f"{rp['routed_refused']} refused + {rp['routed_missing']} missing routed to {rp['to']}, {rp['unrouted']} unrouted" if rp else "-")])
    L += _md_table(["Model", "Assigned", "Answered", "Refused", "Missing", "Coverage", "Replay"], rows)
    L.append("")

    L.append("## Usage and cost")
    L.append("")
    rows = []
    for s in data["models"]:
        acc = s["accounting"]
        a = acc["agent"]
        rows.append([s["model"], "agent", _f(a["tokens_in"] / 1e6, 3), _f(a["tokens_out"] / 1e6, 3), _f(a["calls"], 0),
                     _f(a["code_cells"], 0), _agent_usd(s["model"], a["usd"], 2, not a["priced"], a.get("estimated", False)),
                     _f(a["long_context_tasks"], 1)])
        for role, u in acc["roles"].items():
            rows.append([s["model"], role, _f(u["tokens_in"] / 1e6, 3), _f(u["tokens_out"] / 1e6, 3), _f(u["calls"], 0), "-",
                         _usd(u["usd"], 2, not u["priced"], u.get("estimated", False)), "-"])
    L += _md_table(["Model", "Role", "Input (M)", "Output (M)", "Calls", "Code cells", "USD", "Long-context tasks"], rows)
    L.append("")

    st = data["stability"]
    if st["measures"]:
        L.append("## Stability across tracks")
        L.append("")
        L.append(f"Models: {', '.join(st['models'])}. Kendall's W (tie-corrected) with a within-track permutation null "
                 f"({data['inputs']['permutations']['draws']} draws); p adjusted by Benjamini-Hochberg; split-half: mean "
                 "Spearman correlation over track partitions (retained/partitions).")
        L.append("")
        rows = []
        for k in sorted(st["measures"]):
            m = st["measures"][k]
            sh = m["split_half"]
            rows.append([k, _f(m["W"], 3), _f(m["null_mean"], 3), _f(m["p"], 4), _f(m.get("p_bh"), 4),
                         _f(sh["mean"], 3), f"{sh['retained']}/{sh['partitions']}", str(len(m["tracks_used"]))])
        L += _md_table(["Measure", "W", "Null mean", "p", "p (BH)", "Split-half r", "Retained", "Tracks"], rows)
        L.append("")
    if data.get("baselines"):  # optional section: scripted baselines (--baselines), absent otherwise
        b = data["baselines"]
        L += ["## Baselines: strategies that skip the analysis", "",
              "Scripted agents run through the same sandbox and graders (`worlds check --agents`): oracle solves, naive "
              f"runs tool defaults, all_clear trusts everything; the rest game the grader ({b['rule']}).", ""]
        L += _md_table(["Agent", *b["columns"]], [[r["agent"], *[_f(x) for x in r["scores"]]] for r in b["rows"]])
        L.append("")
    if data.get("grounding"):  # optional section: evidence grounding runs (--grounding), absent otherwise
        from benchmark.grounding.metrics import render_leaderboard_md

        L += render_leaderboard_md(data["grounding"])
    if data.get("pivotal"):  # optional section: pivotal-choice runs (--pivotal-runs), absent otherwise
        from benchmark.pivotal.score import render_markdown as pivotal_markdown

        L += [pivotal_markdown(data["pivotal"]).rstrip(), ""]
    return "\n".join(L) + "\n"


def l3_oversight_markdown(data: dict) -> list[str]:
    """The L3 oversight table: hypothesis drift, concessions and reviewer rejections per review round, per model."""
    rows, n_rounds = [], 0
    for s in data["models"]:
        o = (s.get("l3") or {}).get("oversight") or {}
        n_rounds = max(n_rounds, len(o.get("rounds") or []))
    if not n_rounds:
        return []
    for s in data["models"]:
        o = (s.get("l3") or {}).get("oversight") or {}
        if not o.get("replicates"):
            continue
        rounds = {r["round"]: r for r in o.get("rounds") or []}
        cells = []
        for k in range(1, n_rounds + 1):
            r = rounds.get(k)
            cells.append(f"{_f(r['concessions'], 2)} / {_pct(r['rejection_fraction'])}" if r else "-")
        rows.append([s["model"], str(o["replicates"]), _f(o.get("drift"), 3), _f(o.get("concessions_total"), 2), *cells,
                     _pct(o.get("prior_return"))])
    if not rows:
        return []
    out = ["## L3 oversight: drift, concessions, reviewer rejections", "",
           "Over answered L3 replicates (gated-out dossiers included: their behaviour is data). Drift: 1 - similarity "
           "of the first and final hypothesis. Per round: mean concessions / mean share of reviewers rejecting. Prior "
           "return: share of counterfactual outcomes whose final hypothesis moved back toward the stated prior.", ""]
    out += _md_table(["Model", "Replicates", "Drift", "Concessions (all rounds)",
                      *[f"Round {k}: concessions / rejected" for k in range(1, n_rounds + 1)], "Prior return"], rows)
    return out + [""]


def _csv_text(header: list[str], rows: list[list]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def render_csv(data: dict) -> tuple[str, str]:
    rows = []
    for r in table1_rows(data):
        unpriced = bool(r["unpriced_models"])
        ci = r["overall_ci"] or [None, None]
        rows.append([r["rank"] or "", r["model"], _f(r["overall"], 4, ""), _f(ci[0], 4, ""), _f(ci[1], 4, ""),
                     _f(r["overall_sd"], 4, ""), _f(r["L1"], 4, ""), _f(r["L1_sd"], 4, ""), _f(r["L2"], 4, ""),
                     _f(r["L2_sd"], 4, ""), _f(r["L3"], 4, ""), _f(r["L3_sd"], 4, ""), _f(r["tokens_m"], 6, ""),
                     _f(r["q_per_mtok"], 4, ""), *(("", "") if is_human(r["model"])
                       else (_usd(r["usd_per_task"], 6, unpriced), _usd(r["usd_per_qpt"], 6, unpriced))),
                     _f(r["calls"], 2, ""), _f(r["coverage"], 4, ""), int(r["ranked"]), ";".join(r["flagged_tracks"]),
                     *((v["verifiable"], v["unverified"], v["pending"]) if (v := r["verification"]) else ("", "", ""))])
    t1 = _csv_text(["rank", "model", "overall", "overall_ci_lo", "overall_ci_hi", "overall_sd", "L1", "L1_sd", "L2", "L2_sd",
                    "L3", "L3_sd", "tokens_m", "q_per_mtok", "usd_per_task", "usd_per_qpt", "calls", "coverage", "ranked",
                    "flagged_tracks", "verifiable", "unverified", "pending_rulings"], rows)
    trows = []
    for s in data["models"]:
        for t in sorted(s["tracks"]):
            ts = s["tracks"][t]
            trows.append([s["model"], t, _f(ts["L1"], 4, ""), _f(ts["L2"], 4, ""), _f(ts["L3"], 4, ""), _f(ts["composite"], 4, ""),
                          _f(ts["arithmetic"], 4, ""), _f(ts["min_stage"], 4, ""), ";".join(ts["levels_missing"])])
    tt = _csv_text(["model", "track", "L1", "L2", "L3", "composite", "arithmetic", "min_stage", "levels_missing"], trows)
    return t1, tt


def render_json(data: dict) -> str:
    from benchmark.score.aggregate import clean_floats

    return json.dumps(clean_floats(data), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


# ------------------------------------------------------------------ figures (benchmark/score/leaderboard_figures.py)

def stage_profile_figure(data: dict, target) -> None:
    from benchmark.score.leaderboard_figures import stage_profile_figure as fig

    fig(data, target)


def quality_cost_figure(data: dict, target) -> None:
    from benchmark.score.leaderboard_figures import quality_cost_figure as fig

    fig(data, target)


def threshold_figure(data: dict, target) -> None:
    from benchmark.score.leaderboard_figures import threshold_figure as fig

    fig(data, target)


# ------------------------------------------------------------------ entry points

def _noop(item: str) -> None:
    pass


def verification_status(runs: list, run_dirs: list[Path], rulings: dict) -> dict[str, dict]:
    """Per model: results the LLM verifier has not checked yet and verifier discrepancies without a ruling in force.

    Verifiable results are those `verify` checks (benchmark.oversight.adjudicate.verification_progress): every L1/L2 result and
    every L3 dossier the judge scored. A pending ruling is one (result, component) a verifier disagreed on with no
    ruling in force, counted once however many verifiers raised it."""
    from benchmark.run.store import result_key
    from benchmark.oversight.verify import load_verifications

    out: dict[str, dict] = {}
    for run, path in zip(runs, run_dirs):
        v = out.setdefault(run.model, {"verifiable": 0, "verified": 0, "unverified": 0, "pending": 0, "runs": []})
        recs = {result_key(r.world_id, r.replicate): r for r in run.records}
        verifiable = {k for k, r in recs.items() if r.level in ("L1", "L2") or (r.level == "L3" and r.l3_axes)}
        verifs = load_verifications(Path(path))
        done = {x.key for x in verifs if x.parsed} & verifiable  # an unparseable verifier answer checked nothing
        pending = {(x.key, d.component) for x in verifs if x.key in recs for d in x.discrepancies
                   if (run.run_id, x.world_id, x.replicate, d.component) not in rulings}
        v["verifiable"] += len(verifiable)
        v["verified"] += len(done)
        v["unverified"] += len(verifiable - done)
        v["pending"] += len(pending)
        v["runs"].append(str(path))
    return out


def build(run_dirs: list[Path], ledgers: list[Path] | None = None, date: str | None = None,
          fallbacks: list[str] | None = None, pricing_root: Path | None = None, bootstrap: int = 2000,
          permutations: int = 50_000, seed: int = 20260824, on_step=None) -> dict:
    """The leaderboard's numbers. `on_step(item)` is told each phase as it starts (benchmark.run.progress)."""
    from benchmark.score.accounting import PRICING_ROOT, Pricing, parse_date
    from benchmark.score.aggregate import Options, aggregate, load_rulings, load_run

    step = on_step or _noop
    if not run_dirs:
        raise BenchmarkError("name at least one run directory with --runs")
    d = parse_date(date) if date else None
    runs = []
    for p in run_dirs:
        step(f"loading {p}")
        runs.append(load_run(Path(p), d))
    if ledgers is None:
        from benchmark.oversight.ledger import LEDGER_ROOT
        ledgers = [LEDGER_ROOT] if LEDGER_ROOT.exists() else []
    rulings, names = load_rulings(ledgers)
    pairs = []
    for fb in fallbacks or []:
        if "=" not in fb:
            raise BenchmarkError(f"--fallback '{fb}' must be MODEL_X=MODEL_Y (X's refused tasks take Y's results)")
        x, y = fb.split("=", 1)
        pairs.append((x, y))
    pricing = Pricing.from_dir(pricing_root or PRICING_ROOT)
    opts = Options(date=d, fallbacks=pairs, bootstrap_draws=bootstrap, permutation_draws=permutations, seed=seed)
    step(f"aggregating ({bootstrap} bootstrap, {permutations} permutation draws)")
    data = aggregate(runs, rulings, pricing, opts, names)
    step("verification status")
    status = verification_status(runs, [Path(p) for p in run_dirs], rulings)
    for s in data["models"]:
        s["verification"] = None if s.get("replay") else status.get(s["model"])
    return data


def outputs(formats: list[str]) -> list[str]:
    """The files `write` produces for `formats`, in order (the progress total counts them)."""
    names = {"md": ["leaderboard.md"], "csv": ["leaderboard.csv", "leaderboard_tracks.csv"], "json": ["leaderboard.json"]}
    for fmt in formats:
        if fmt not in names:
            raise BenchmarkError(f"unknown format '{fmt}'; use md, csv or json")
    from benchmark.score.leaderboard_figures import FIGURES

    return [n for fmt in formats for n in names[fmt]] + [n for n, _ in FIGURES]


def write(data: dict, out: Path, formats: list[str], on_step=None) -> list[Path]:
    """Every table format asked for and the figures, each file written atomically (a temp file, then a rename)."""
    from benchmark.suite.canonical import _atomic_write
    from benchmark.score.leaderboard_figures import FIGURES

    step = on_step or _noop
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    outputs(formats)  # an unknown format fails before anything is written
    written: list[Path] = []
    for fmt in formats:
        if fmt == "md":
            step("leaderboard.md")
            _atomic_write(out / "leaderboard.md", render_markdown(data).encode("utf-8"))
            written.append(out / "leaderboard.md")
        elif fmt == "csv":
            t1, tt = render_csv(data)
            step("leaderboard.csv")
            _atomic_write(out / "leaderboard.csv", t1.encode("utf-8"))
            step("leaderboard_tracks.csv")
            _atomic_write(out / "leaderboard_tracks.csv", tt.encode("utf-8"))
            written += [out / "leaderboard.csv", out / "leaderboard_tracks.csv"]
        elif fmt == "json":
            step("leaderboard.json")
            _atomic_write(out / "leaderboard.json", render_json(data).encode("utf-8"))
            written.append(out / "leaderboard.json")
    for name, fn in FIGURES:
        step(name)
        buf = io.BytesIO()
        fn(data, buf)
        _atomic_write(out / name, buf.getvalue())
        written.append(out / name)
    return written


def verify_runs(run_dirs: list[Path]) -> list[str]:
    """`leaderboard --verify`: every run's results.jsonl digest chain (benchmark.run.chain), problems named by file:line."""
    from benchmark.run.chain import verify
    from benchmark.run.store import RunStore

    return [problem for d in run_dirs for problem in verify(RunStore.existing(d).results_path)]


def cmd_leaderboard(args) -> int:
    from benchmark.run.progress import progress

    if getattr(args, "verify", False):
        problems = verify_runs([Path(p) for p in args.runs])
        broken = [p for p in problems if "nothing to verify" not in p]
        for p in problems:
            print(p, file=sys.stderr)
        if broken:
            raise BenchmarkError(f"{len(broken)} row(s) break their run's digest chain (listed above); restore the "
                                 "run from a backup, or re-grade it with `python -m benchmark grade RUN` to re-chain a "
                                 "file you edited on purpose")
        print(f"digest chains verified: {len(args.runs)} run(s)", file=sys.stderr)

    optional = sum(bool(getattr(args, k, None)) for k in ("grounding", "baselines", "pivotal_runs"))
    total = len(args.runs) + 2 + optional + len(outputs(args.format))
    with progress("leaderboard", total) as step:
        data = build([Path(p) for p in args.runs], [Path(p) for p in args.ledgers] if args.ledgers is not None else None,
                     args.date, args.fallback, Path(args.pricing) if args.pricing else None, args.bootstrap,
                     args.permutations, args.seed, on_step=step)
        if args.grounding:  # optional: evidence grounding runs, reported as their own table (accuracy beside EGA)
            from benchmark.grounding.metrics import leaderboard_rows

            step("evidence grounding runs")
            data["grounding"] = leaderboard_rows([Path(p) for p in args.grounding], args.bootstrap, args.seed)
        if getattr(args, "baselines", None):  # optional: the scripted agents of `worlds check --agents --agents-out DIR`
            from benchmark.oversight.validity import baselines_section

            step("baselines")
            data["baselines"] = baselines_section(Path(args.baselines))
        if getattr(args, "pivotal_runs", None):  # optional: pivotal-choice runs (benchmark.pivotal), their own table
            from benchmark.pivotal.score import pivotal_section

            step("pivotal-choice runs")
            data["pivotal"] = pivotal_section([Path(p) for p in args.pivotal_runs], args.pivotal_human,
                                              draws=args.pivotal_bootstrap, seed=args.seed)
        written = write(data, Path(args.out), args.format, on_step=step)
    if "md" in args.format:
        md = render_markdown(data)
        print(md.split("## Per-track scores")[0].rstrip())
    for p in written:
        print(f"wrote {p}")
    return 0


def add_leaderboard_parser(sub) -> None:
    sp = sub.add_parser("leaderboard", help="regenerate Table 1, per-track tables and figures from recorded runs")
    sp.add_argument("--runs", nargs="+", required=True, help="run directories (the --out folders of `run`)")
    sp.add_argument("--format", nargs="+", choices=FORMATS, default=["md"], help="table formats to write (default md)")
    sp.add_argument("--out", default="leaderboard", help="output folder (default leaderboard/)")
    sp.add_argument("--ledgers", nargs="*", help="adjudication ledger files or folders (default ledgers/; none: --ledgers)")
    sp.add_argument("--date", help="evaluation date YYYY-MM-DD choosing the rate card (default: each run's start date)")
    sp.add_argument("--fallback", action="append", default=[], metavar="X=Y",
                    help="add a replay row where model X's refused tasks take model Y's recorded results")
    sp.add_argument("--bootstrap", type=int, default=2000, help="bootstrap draws for 95%% intervals (default 2000)")
    sp.add_argument("--permutations", type=int, default=50_000,
                    help="permutation draws for Kendall's W (default 50000, seed 001 A.3)")
    sp.add_argument("--seed", type=int, default=20260824, help="seed of the bootstrap and permutation draws")
    sp.add_argument("--pricing", help="rate card folder (default pricing/)")
    sp.add_argument("--grounding", nargs="+", metavar="DIR",
                    help="evidence grounding run folders (`grounding run --out`): adds the accuracy-beside-EGA table")
    sp.add_argument("--pivotal-runs", nargs="+", metavar="DIR",
                    help="pivotal-choice run folders (`pivotal run --out`): adds the pivotal accuracy tables")
    sp.add_argument("--pivotal-human", metavar="FILE", help="human-baseline JSON file for the pivotal table")
    sp.add_argument("--pivotal-bootstrap", type=int, default=100_000,
                    help="bootstrap draws for the pivotal intervals (default 100000, seed 002)")
    sp.add_argument("--baselines", metavar="DIR",
                    help="scripted-agent runs from `worlds check --agents --agents-out DIR`: adds the baselines table")
    sp.add_argument("--verify", action="store_true",
                    help="check each run's digest chain first (an edited, removed or reordered row is named)")
    sp.set_defaults(fn=cmd_leaderboard)
