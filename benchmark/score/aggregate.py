"""Aggregation: from run records + ledger rulings + a dated rate card to the leaderboard numbers (SPEC R9-R10,
seed 001 §3, §4.1, A.3-A.4, H.1, L.1-L.6).

Pipeline (every step deterministic; every collection is sorted before it is reduced):

1. **Rulings** (`apply_rulings`) are applied here, at aggregation time, to copies of the record values; run
   records are never changed. A `score` ruling replaces the world score (0-100). A `state` ruling replaces the
   L1 state, and the score becomes STATE_SCORES[state] x 100/3. An L2 component ruling (`A`/`I`/`M`/`C`, 0-1)
   replaces that component; the world score is recomputed as mean(A, I, M, C) x 100 and every cap the grader
   recorded is kept: `zero_if` keeps the score at 0, the unusable cap keeps min(score, cap), and the accuracy cap
   keeps min(score, cap) while A is still 0 (a ruling that raises A above 0 lifts it, since the cap's premise no
   longer holds; a ruling that lowers A to 0 cannot add a cap the record does not carry: rule on `score` then).
   When a record has both component and `score` rulings, the `score` ruling is applied last and wins.
   An L3 axis ruling (`D`/`Q`/`N`, 0-3) replaces that judged axis and the score is recomputed with the ruled axes
   as l3_score(axes, commitment) x 100/3 (benchmark.run.l3: committed mean(D, Q, N); abstained min(mean(D, Q), cap)).
   An `eligible` ruling overrides the prior gate: "eligible" puts the dossier into L3 means (its score from its
   axes when the record, being gated out, stored none), "ineligible" takes it out.
2. **Pricing**: each record's agent usage is priced with the card in force on its run's evaluation date
   (`benchmark.score.accounting`). Reviewer/judge usage (record `role_usage`) and verifier usage (`DIR/verification.jsonl`)
   are priced the same way and reported separately, never in the headline. A record's `lost_usage` (paid requests no
   row counts: a lost Ray attempt, a replaced fault, an unanswered request; benchmark.run.journal) is priced into
   its role's total, the agent's into $/task.
3. **Fallback replay** (`--fallback X=Y`, seed 001 §3 and L.5): a new row "X -> Y" in which every refused
   (world, replicate) of X, and every assigned world X has no record for (refusal-stop), takes Y's recorded
   result for the same world (same replicate if Y has it, else Y's lowest replicate). Only Y's scoreable outputs
   are routed: a Y record that is refused or a fault is not (the world stays unrouted), and an L3 record excluded by
   Y's own prior gate is not routed either (seed 001 L.5 routes 19 L3 outputs, not the 20 that include the
   gate-excluded one): the row covers that world as gate-excluded (out of L3 means, like Y's own row), adds none
   of Y's usage, and counts it under `gate_excluded`, not `routed_*`. Both costs are kept: X's
   recorded attempt usage and Y's usage are summed (and priced each at its own model's rate).
4. **Replicates** of a (model, world) are averaged before anything else: the world score is the mean over its
   answered (non-refused) replicates; usage and cost are the mean over all its replicates, so totals are those
   of one pass over the suite.
5. **Per track**: L1 = mean of answered L1 worlds; L2 = mean over families of the family mean (a large family
   does not outweigh a small one); L3 = mean of eligible dossiers (`eligible is not False` and status not
   "ineligible", i.e. stopped by the prior gate; the world score is
   the mean over its eligible replicates). Track composite = geometric mean of L1, L2, L3 (0 if any is 0). If
   the selection lacks a level for a track, the composite is the geometric mean of the levels present and the
   track is flagged (`levels_missing`); such a composite is not comparable with a full one.
6. **Per model**: Overall = mean of track composites; L1/L2/L3 = mean +- SD (sample SD, ddof=1) across the tracks
   that have the level; the arithmetic-mean-of-stages and within-track-minimum-stage views; the
   all-stages-above-threshold curve (share of tracks whose every present stage mean EXCEEDS t, i.e. > t,
   t = 0..100; seed 001 A.4);
   perfect-score rates per level (share of answered worlds, L3 eligible, scoring 100); bottleneck-stage shares
   (over tracks with all three levels; a tie splits the track equally between the tied stages); L1 reporting
   dimensions (graders/l1.py: issue recognition and methodological response over challenge worlds, result
   calibration and assessment correctness over all, fabrication where measured), L2 dimension means (same
   world -> family -> track -> model hierarchy as L2), L3 commitment (share of eligible replicates that commit)
   and conditional novelty (N x 100/3 among committed eligible replicates); 95% percentile bootstrap intervals
   for Overall and L1-L3, resampling worlds with replacement within each (track, level) (numpy default_rng,
   fixed seed).
7. **Coverage**: assigned tasks = the suite's worlds each run was assigned (its config.json selection resolved
   against the frozen suite, so a world never invoked still counts), united with every world any loaded run
   recorded; a run without a recorded selection contributes its records only. A refused or missing world does not
   enter the score means (it cannot be scored) but keeps the model's coverage below 1; a model without complete
   coverage is reported but not ranked. A fault (status model_error / sandbox_error / harness_error: no score) is
   not an answer: it never enters a mean, and a world whose every replicate failed counts as missing (`errors`
   says how many of the missing failed; `run --resume` retries them). $/task divides by the assigned tasks.
8. **Stability** (A.3) over the observed models with complete coverage (replay rows excluded): for each measure
   a model x track matrix; models ranked within each track with ties kept (scipy.stats.rankdata); tie-corrected
   Kendall's W; a tie-preserving null that permutes model labels within each track independently; p-values
   (1 + #null >= observed)/(1 + draws), Benjamini-Hochberg adjusted over the measures
   (scipy.stats.false_discovery_control). Split-half: every partition of the tracks into two halves
   (complementary partitions counted once), Spearman correlation across models of the half means; undefined
   correlations (a constant half) are omitted and counted. Measures (seed 001 A.3): composite, L1-L3, L1
   recognition/response/calibration, L1 clean specificity (share of clean L1 worlds graded CLEAN-CORRECT),
   L1 no-fabrication (share of L1 evaluations not FABRICATED), L2 A/I/M/C, L3 commitment, L3 evidence fidelity
   (mean judged D x 100/3 over eligible outcomes), L3 prior return (share of eligible counterfactual outcomes whose
   final hypothesis moved back toward the agent's stated prior: its similarity to the prior's expectation rose
   from the first to the final hypothesis; the seed names this measure without defining it, so this operational
   definition is ours), tokens, calls, code cells.
9. **L3 oversight** (per model, over answered L3 replicates, gated-out ones included: their behaviour is data):
   mean hypothesis drift, concessions per review round and reviewer rejection fraction per round, from the
   records (`l3_rounds`) or, for older records, the trajectory's L3 record.
10. **Physics** (seed 001 Appendix F): worlds of a track whose track.yaml says `domain: physics` are taken out of
   everything above (Overall, L1-L3, coverage, cost) and summarised apart under `physics` (`physics_summary`):
   per-track L1-L3 and composite, stage means over the physics tracks, coverage, and the agent's tokens and cost.
"""
from __future__ import annotations

import datetime as dt
import functools
import itertools
import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
from scipy import stats

from benchmark.score.accounting import CostTotal, Priced, Pricing, efficiency, parse_date
from benchmark.errors import BenchmarkError
from benchmark.oversight.ledger import Ledger, Ruling, effective_rulings, load_ledger
from benchmark.run.records import ERROR_STATUSES, ResultRecord, RoleUsage
from benchmark.run.store import RunStore, result_key
from graders.l1 import MISCALIBRATED_STATES, RECOGNITION_STATES, RESPONSE_STATES, STATE_SCORES

LEVELS = ("L1", "L2", "L3")
L2_COMPONENTS = ("A", "I", "M", "C")
L1_DIMENSIONS = ("assessment_correctness", "issue_recognition", "methodological_response", "result_calibration", "fabrication",
                 "clean_specificity", "no_fabrication")
THRESHOLDS = tuple(range(0, 101))
PERFECT = 100.0 - 1e-6
REPLAY_ARROW = " -> "


# ------------------------------------------------------------------ inputs

@dataclass
class RunInput:
    """One run directory's content: its id, model, evaluation date, records and verifier usage by result key."""

    run_id: str
    model: str
    eval_date: dt.date | None
    records: list[ResultRecord]
    verifier_usage: dict[str, list[RoleUsage]] = field(default_factory=dict)
    assigned: dict[str, tuple[str, str]] | None = None  # world -> (track, level) the suite assigned this run
    l3_rounds: dict[str, dict] = field(default_factory=dict)  # result key -> L3 oversight (drift, rounds, prior return)


def load_run(path: Path, date: dt.date | None = None) -> RunInput:
    store = RunStore.existing(path)
    try:
        cfg = store.config()
    except FileNotFoundError:
        cfg = {}
    recs = sorted(store.results(known_worlds(cfg)), key=lambda r: (r.world_id, r.replicate))
    model = str(cfg.get("model") or (recs[0].model if recs else ""))
    started = cfg.get("started")
    eval_date = date or (parse_date(str(started)) if started else None)
    return RunInput(store.run_id(), model, eval_date, recs, load_verifier_usage(Path(path)), suite_assignment(cfg),
                    {result_key(r.world_id, r.replicate): o for r in recs if r.level == "L3"
                     for o in [l3_oversight(r, store)] if o is not None})


def known_worlds(cfg: dict) -> set[str] | None:
    """Every world id of the suite (or the private campaign) a run's config names; None when its selection does not
    resolve here (a run from another checkout, or records made up for a test), so its records are taken as they are."""
    if suite_assignment(cfg) is None:
        return None
    try:
        from benchmark.suite.campaign import campaign_suite
        from benchmark.suite.loader import load_suite

        return set(campaign_suite(load_suite(), Path(cfg["suite"]) if cfg.get("suite") else None).worlds)
    except Exception:  # noqa: BLE001 - see the docstring
        return None


def suite_assignment(cfg: dict) -> dict[str, tuple[str, str]] | None:
    """The worlds the frozen suite assigned a run (its recorded --worlds/--tracks/--levels/--suite selection), or
    None when the config records no selection or the suite cannot resolve it (then the run's records stand in)."""
    if "levels" not in cfg:
        return None
    try:
        from benchmark.suite.campaign import campaign_suite
        from benchmark.suite.loader import load_suite

        suite = campaign_suite(load_suite(), Path(cfg["suite"]) if cfg.get("suite") else None)
        refs = suite.select(cfg.get("worlds"), cfg.get("tracks"), cfg.get("levels"))
    except Exception:  # noqa: BLE001 - a run from another checkout or campaign: fall back to its records
        return None
    return {r.id: (r.world.track, str(r.world.level)) for r in refs}


def prior_return_of(expectation, first, final) -> float | None:
    """1.0 when the final hypothesis is more similar to the stated prior expectation than the first one was (the
    agent moved back toward its prior under review), 0.0 otherwise; None without a prior or a first hypothesis."""
    from difflib import SequenceMatcher

    exp, first, final = str(expectation or ""), str(first or ""), str(final or "")
    if not exp or not first:
        return None
    return float(SequenceMatcher(None, final, exp).ratio() > SequenceMatcher(None, first, exp).ratio() + 1e-9)


def l3_oversight(rec: ResultRecord, store: RunStore | None = None) -> dict | None:
    """Drift, concessions and rejection fraction per round, and prior return, of one L3 result: from the record's
    `l3_rounds` when it has them, else from its trajectory's L3 record."""
    l3 = None
    if store is not None and rec.trajectory:
        try:
            l3 = store.load_trajectory(rec.trajectory).l3
        except Exception:  # noqa: BLE001 - a missing trajectory: what the record holds is all there is
            l3 = None
    rounds = rec.l3_rounds
    if rounds is None and isinstance(l3, dict):
        rounds = [{"concessions": int(r.get("concessions") or 0), "rejection_fraction": float(r.get("rejection_fraction") or 0)}
                  for r in l3.get("rounds") or []]
    prior_return = rec.prior_return
    if prior_return is None and isinstance(l3, dict) and rec.world_class != "real":
        prior_return = prior_return_of((l3.get("prior") or {}).get("expectation"), l3.get("first_hypothesis"),
                                       l3.get("final_hypothesis"))
    if rounds is None and rec.hyp_drift is None and prior_return is None:
        return None
    return {"drift": rec.hyp_drift, "rounds": rounds or [], "prior_return": prior_return}


def load_verifier_usage(run_dir: Path) -> dict[str, list[RoleUsage]]:
    """DIR/verification.jsonl lines {"key", "usage": {tokens_in, tokens_out, calls, model}}; absent file -> none.
    Every line is usage that was spent, so repeated keys add up; a torn line is skipped."""
    path = Path(run_dir) / "verification.jsonl"
    out: dict[str, list[RoleUsage]] = defaultdict(list)
    if not path.exists():
        return {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            obj = json.loads(line)
            usage = RoleUsage.model_validate(obj.get("usage") or {})
            key = str(obj["key"])
        except (ValueError, KeyError, TypeError):
            continue
        if not usage.model:
            usage = usage.model_copy(update={"model": str(obj.get("verifier_model", ""))})
        out[key].append(usage)
    return dict(out)


def load_rulings(paths: Iterable[Path]) -> tuple[dict[tuple[str, str, int, str], Ruling], list[str]]:
    """Effective adjudication rulings from ledger files or folders (reconstruction ledgers are not applied)."""
    files: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            files += sorted(p.glob("*.yaml"))
        elif p.exists():
            files.append(p)
        else:
            raise BenchmarkError(f"ledger {p} does not exist")
    ledgers = [led for led in (load_ledger(f) for f in files) if isinstance(led, Ledger)]
    names = [f"{led.campaign}" for led in ledgers]
    return effective_rulings(ledgers), names


# ------------------------------------------------------------------ rulings

_CAP_VALUE = re.compile(r"capped at ([0-9.]+)")


@dataclass
class Effective:
    score: float
    state: str | None
    components: dict[str, float] | None
    caps: list[str]
    rulings: list[int]
    axes: dict[str, float] | None = None  # L3: the judged axes after rulings
    eligible: bool | None = None  # L3: the prior gate after rulings (None: not an L3 record)


def apply_rulings(rec: ResultRecord, run_id: str, rulings: dict[tuple[str, str, int, str], Ruling]) -> Effective:
    """The record's score, L1 state and L2 components after the rulings in force (see the module docstring)."""
    g = rec.grade
    score = float(rec.score) if rec.score is not None else 0.0
    state = g.status if (g is not None and rec.level == "L1") else None
    comps = dict(g.components) if (g is not None and g.components) else None
    caps = list(g.caps) if g is not None else []
    applied: list[int] = []
    mine = {k[3]: r for k, r in rulings.items() if k[0] == run_id and k[1] == rec.world_id and k[2] == rec.replicate}
    if "state" in mine:
        state = str(mine["state"].ruling)
        score = STATE_SCORES[state] * 100 / 3
        applied.append(mine["state"].id)
    comp_rulings = [c for c in L2_COMPONENTS if c in mine]
    if comp_rulings:
        comps = dict(comps or {c: 0.0 for c in L2_COMPONENTS})
        for c in comp_rulings:
            comps[c] = float(mine[c].ruling)
            applied.append(mine[c].id)
        s = sum(comps.get(c, 0.0) for c in L2_COMPONENTS) / 4
        kept: list[str] = []
        for cap in caps:
            m = _CAP_VALUE.search(cap)
            if cap.startswith("zero_if"):
                s = 0.0
            elif cap.startswith("accuracy cap"):
                if comps.get("A", 0.0) > 0:
                    continue  # the cap's premise (A = 0) was overruled
                s = min(s, float(m.group(1))) if m else s
            elif m:
                s = min(s, float(m.group(1)))
            kept.append(cap)
        caps = kept
        score = s * 100
    axes = dict(rec.l3_axes) if rec.l3_axes else None
    eligible = (rec.eligible is not False and rec.status != "ineligible") if rec.level == "L3" else None
    if rec.level == "L3":
        from benchmark.run.l3 import l3_score

        axis_rulings = [c for c in ("D", "Q", "N") if c in mine]
        for c in axis_rulings:
            axes = {**(axes or {}), c: float(mine[c].ruling)}
            applied.append(mine[c].id)
        if "eligible" in mine:
            eligible = mine["eligible"].ruling == "eligible"
            applied.append(mine["eligible"].id)
        recompute = axis_rulings or ("eligible" in mine and rec.score is None)
        if recompute and axes and all(k in axes for k in ("D", "Q")):
            native = l3_score(axes, rec.commitment) if (rec.commitment == "abstain" or "N" in axes) else None
            if native is not None:
                score = native * 100 / 3
    if "score" in mine:
        score = float(mine["score"].ruling)
        applied.append(mine["score"].id)
    return Effective(score, state, comps, caps, sorted(applied), axes, eligible)


# ------------------------------------------------------------------ record-level attempts

@dataclass
class Part:
    """Usage by one model in one role, priced."""

    role: str
    priced: Priced
    calls: float
    code_cells: float = 0.0
    estimated: bool = False  # some of its tokens were counted with the tokenizer: the endpoint reported no usage


@dataclass
class Attempt:
    """One (world, replicate) outcome of a row after rulings and pricing."""

    world_id: str
    track: str
    level: str
    family: str
    world_class: str
    replicate: int
    refused: bool
    score: float
    state: str | None
    components: dict[str, float] | None
    fabrication: float | None
    eligible: bool
    commitment: str | None
    novelty: float | None  # N on 0-100
    parts: list[Part]
    rulings: list[int]
    routed: str = ""  # "refused" / "missing" when taken from the fallback model
    failed: bool = False  # a fault (ERROR_STATUSES): no score, never averaged, counted as missing coverage
    fidelity: float | None = None  # L3: D on 0-100 (after rulings)
    oversight: dict | None = None  # L3: drift, per-round concessions and rejections, prior return


def l1_dimensions(state: str | None, world_class: str, score: float, fabrication: float | None) -> dict[str, float | None]:
    """graders/l1.py L1Grade.dimensions on a (possibly ruled) state."""
    challenged = world_class == "challenge"
    return {
        "assessment_correctness": score / 100,
        "issue_recognition": float(state in RECOGNITION_STATES) if challenged else None,
        "methodological_response": float(state in RESPONSE_STATES) if challenged else None,
        "result_calibration": float(state not in MISCALIBRATED_STATES),
        "fabrication": fabrication,
        "clean_specificity": float(state == "CLEAN-CORRECT") if world_class == "clean" else None,
        "no_fabrication": float(state != "FABRICATED") if state is not None else None,
    }


def build_attempts(run: RunInput, rulings: dict, pricing: Pricing, date_override: dt.date | None = None) -> list[Attempt]:
    date = date_override or run.eval_date
    if date is None:
        raise BenchmarkError(f"run {run.run_id} records no start date; pass --date YYYY-MM-DD to choose the rate card")
    out: list[Attempt] = []
    for rec in sorted(run.records, key=lambda r: (r.world_id, r.replicate)):
        eff = apply_rulings(rec, rec.run_id or run.run_id, rulings)
        parts = [Part("agent", pricing.price(rec.model, rec.tokens_in, rec.tokens_out, date), rec.calls, rec.code_cells,
                      rec.usage_estimated_calls > 0)]
        for role in sorted(rec.role_usage):
            u = rec.role_usage[role]
            parts.append(Part(role, pricing.price(u.model or "?", u.tokens_in, u.tokens_out, date), u.calls,
                              estimated=u.estimated_calls > 0))
        for name in sorted(rec.lost_usage):  # paid requests no row counts (benchmark.run.journal): $/task has them
            u = rec.lost_usage[name]
            parts.append(Part(name.split(":", 1)[0], pricing.price(u.model or rec.model, u.tokens_in, u.tokens_out, date),
                              u.calls, estimated=u.estimated_calls > 0))
        for u in run.verifier_usage.get(result_key(rec.world_id, rec.replicate), []):
            parts.append(Part("verifier", pricing.price(u.model or "?", u.tokens_in, u.tokens_out, date), u.calls))
        axes = eff.axes or {}
        out.append(Attempt(
            world_id=rec.world_id, track=rec.track, level=rec.level, family=rec.family, world_class=rec.world_class,
            replicate=rec.replicate, refused=rec.status == "refused", score=eff.score, state=eff.state,
            components=eff.components, fabrication=rec.grade.fabrication if rec.grade is not None else None,
            eligible=eff.eligible if eff.eligible is not None else True, commitment=rec.commitment,
            novelty=(float(axes["N"]) * 100 / 3) if "N" in axes and axes["N"] is not None else None,
            parts=parts, rulings=eff.rulings, failed=rec.status in ERROR_STATUSES,
            fidelity=(float(axes["D"]) * 100 / 3) if axes.get("D") is not None else None,
            oversight=run.l3_rounds.get(result_key(rec.world_id, rec.replicate))
            or ({"drift": rec.hyp_drift, "rounds": rec.l3_rounds or [], "prior_return": rec.prior_return}
                if rec.level == "L3" and (rec.hyp_drift is not None or rec.l3_rounds or rec.prior_return is not None)
                else None)))
    return out


def unattached_verifier_parts(run: RunInput, pricing: Pricing, date_override: dt.date | None = None) -> list[Part]:
    """Verifier usage whose key matches no record of the run (still spent; reported with the run's model)."""
    keys = {result_key(r.world_id, r.replicate) for r in run.records}
    date = date_override or run.eval_date
    parts = []
    for key in sorted(run.verifier_usage):
        if key in keys or date is None:
            continue
        for u in run.verifier_usage[key]:
            parts.append(Part("verifier", pricing.price(u.model or "?", u.tokens_in, u.tokens_out, date), u.calls))
    return parts


def _routable(a: Attempt) -> bool:
    """A fallback output the replay may route: answered, not a fault, and (L3) not excluded by its own prior gate."""
    return not a.refused and not a.failed and (a.level != "L3" or a.eligible)


def _gated(a: Attempt) -> bool:
    """Y's L3 output excluded by Y's own prior gate: never routed (seed 001 L.5 routes 19 L3 outputs, not 20)."""
    return a.level == "L3" and not a.refused and not a.failed and not a.eligible


def replay(x: list[Attempt], y: list[Attempt], assigned: dict[str, tuple]) -> tuple[list[Attempt], dict]:
    """Fallback replay: X's refused (world, replicate)s and X's missing assigned worlds take Y's recorded results;
    X's attempt usage is kept and Y's is added."""
    y_by = {(a.world_id, a.replicate): a for a in y}
    y_world: dict[str, list[Attempt]] = defaultdict(list)
    for a in sorted(y, key=lambda a: (a.world_id, a.replicate)):
        y_world[a.world_id].append(a)
    out: list[Attempt] = []
    info = {"routed_refused": 0, "routed_missing": 0, "unrouted": 0, "gate_excluded": 0,
            "routed_by_level": {lv: 0 for lv in LEVELS}}
    for a in x:
        if not a.refused:
            out.append(a)
            continue
        sub = y_by.get((a.world_id, a.replicate)) or (y_world[a.world_id][0] if y_world.get(a.world_id) else None)
        if sub is not None and _gated(sub):  # Y's own gate excludes it: covered, out of L3 means, not routed
            out.append(Attempt(**{**sub.__dict__, "replicate": a.replicate, "parts": a.parts, "routed": "gate_excluded"}))
            info["gate_excluded"] += 1
            continue
        if sub is None or not _routable(sub):
            out.append(a)
            info["unrouted"] += 1
            continue
        out.append(Attempt(**{**sub.__dict__, "replicate": a.replicate, "parts": a.parts + sub.parts,
                              "rulings": sorted(a.rulings + sub.rulings), "routed": "refused"}))
        info["routed_refused"] += 1
        info["routed_by_level"][sub.level] = info["routed_by_level"].get(sub.level, 0) + 1
    have = {a.world_id for a in x if not a.failed}  # a world X only failed on is missing, and routed like one
    for wid in sorted(set(assigned) - have):
        subs = [s for s in y_world.get(wid, []) if _routable(s)]
        gated = [s for s in y_world.get(wid, []) if _gated(s)]
        if not subs and gated:  # see above: the world is covered as gate-excluded, at no routed cost
            out += [Attempt(**{**s.__dict__, "parts": [], "routed": "gate_excluded"}) for s in gated]
            info["gate_excluded"] += 1
            continue
        if not subs:
            info["unrouted"] += 1
            continue
        for s in subs:
            out.append(Attempt(**{**s.__dict__, "routed": "missing"}))
        info["routed_missing"] += 1
        info["routed_by_level"][subs[0].level] = info["routed_by_level"].get(subs[0].level, 0) + 1
    return out, info


# ------------------------------------------------------------------ world level (replicates averaged)

@dataclass
class WorldOutcome:
    world_id: str
    track: str
    level: str
    family: str
    world_class: str
    n_reps: int
    n_refused: int
    answered: bool
    score: float | None  # mean over answered (L3: eligible answered) replicates
    eligible: bool
    l1_dims: dict[str, float | None]
    components: dict[str, float] | None
    commit_share: float | None
    novelty_values: list[float]
    committed: float
    eligible_reps: int
    agent: CostTotal
    code_cells: float
    roles: dict[str, CostTotal]
    long_context: float
    rulings: list[int]
    n_failed: int = 0  # replicates that ended in a fault (no score)
    fidelity: float | None = None  # L3: mean D (0-100) over eligible answered replicates
    prior_return: float | None = None  # L3: share of eligible counterfactual replicates returning toward the prior
    oversight: list[dict] = field(default_factory=list)  # L3: per answered replicate


def _mean(xs: Iterable[float | None]) -> float | None:
    vals = [float(x) for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def world_outcomes(attempts: list[Attempt]) -> dict[str, WorldOutcome]:
    groups: dict[str, list[Attempt]] = defaultdict(list)
    for a in attempts:
        groups[a.world_id].append(a)
    out: dict[str, WorldOutcome] = {}
    for wid in sorted(groups):
        reps = sorted(groups[wid], key=lambda a: a.replicate)
        a0 = reps[0]
        n = len(reps)
        ans = [a for a in reps if not a.refused and not a.failed]
        elig = [a for a in ans if a.eligible] if a0.level == "L3" else ans
        agent, roles, cells = CostTotal(), defaultdict(CostTotal), 0.0
        for a in reps:
            for p in a.parts:
                if p.role == "agent":
                    agent.add(p.priced, p.calls, 1 / n, p.estimated)
                    cells += p.code_cells / n
                else:
                    roles[p.role].add(p.priced, p.calls, 1 / n, p.estimated)
        dims: dict[str, float | None] = {}
        if a0.level == "L1":
            per = [l1_dimensions(a.state, a.world_class, a.score, a.fabrication) for a in ans]
            dims = {d: _mean(p[d] for p in per) for d in L1_DIMENSIONS}
        comps = None
        if a0.level == "L2":
            cs = [a.components for a in ans if a.components]
            comps = {c: sum(x.get(c, 0.0) for x in cs) / len(cs) for c in L2_COMPONENTS} if cs else None
        committed = [a for a in elig if a.commitment == "commit"] if a0.level == "L3" else []
        out[wid] = WorldOutcome(
            world_id=wid, track=a0.track, level=a0.level, family=a0.family, world_class=a0.world_class, n_reps=n,
            n_refused=sum(a.refused for a in reps), answered=bool(ans), score=_mean(a.score for a in elig),
            eligible=bool(elig) if a0.level == "L3" else True, l1_dims=dims, components=comps,
            commit_share=(len(committed) / len(elig)) if (a0.level == "L3" and elig) else None,
            novelty_values=[a.novelty for a in committed if a.novelty is not None], committed=len(committed),
            eligible_reps=len(elig) if a0.level == "L3" else 0,
            agent=agent, code_cells=cells, roles=dict(roles), long_context=agent.long_context_tasks,
            rulings=sorted({r for a in reps for r in a.rulings}), n_failed=sum(a.failed for a in reps),
            fidelity=_mean(a.fidelity for a in elig) if a0.level == "L3" else None,
            prior_return=_mean((a.oversight or {}).get("prior_return") for a in elig) if a0.level == "L3" else None,
            oversight=[a.oversight for a in ans if a.oversight] if a0.level == "L3" else [])
    return out


# ------------------------------------------------------------------ track and model level

def geometric_mean(values: list[float]) -> float | None:
    if not values:
        return None
    if any(v <= 0 for v in values):
        return 0.0
    return float(stats.gmean(values))


def level_score(worlds: list[WorldOutcome], level: str) -> float | None:
    """L1: mean of worlds; L2: mean of family means; L3: mean of eligible dossiers. Worlds must be answered."""
    ws = [w for w in worlds if w.level == level and w.answered and w.score is not None and (level != "L3" or w.eligible)]
    if not ws:
        return None
    if level == "L2":
        fam: dict[str, list[float]] = defaultdict(list)
        for w in ws:
            fam[w.family].append(w.score)
        return sum(sum(v) / len(v) for _, v in sorted(fam.items())) / len(fam)
    return sum(w.score for w in ws) / len(ws)


def _sd(xs: list[float]) -> float | None:
    return float(np.std(xs, ddof=1)) if len(xs) >= 2 else None


def track_summary(worlds: list[WorldOutcome], levels_expected: Iterable[str] = LEVELS) -> dict:
    lv = {level: level_score(worlds, level) for level in LEVELS}
    present = [lv[level] for level in LEVELS if lv[level] is not None]
    missing = [level for level in LEVELS if lv[level] is None]
    expected = set(levels_expected)
    return {
        "L1": lv["L1"], "L2": lv["L2"], "L3": lv["L3"],
        "composite": geometric_mean(present),
        "arithmetic": (sum(present) / len(present)) if present else None,
        "min_stage": min(present) if present else None,
        "levels_missing": missing,
        "levels_not_in_selection": [level for level in missing if level not in expected],
        "flagged": bool(missing),
        "worlds": len(worlds),
        "answered": sum(w.answered for w in worlds),
    }


def _balanced(values_by_track: dict[str, float | None]) -> float | None:
    return _mean(values_by_track[t] for t in sorted(values_by_track))


def l2_dimension_means(worlds: list[WorldOutcome]) -> dict[str, dict]:
    per_track: dict[str, dict[str, float | None]] = {}
    for track in sorted({w.track for w in worlds}):
        fam: dict[str, list[dict[str, float]]] = defaultdict(list)
        for w in worlds:
            if w.track == track and w.level == "L2" and w.answered and w.components:
                fam[w.family].append(w.components)
        if not fam:
            continue
        per_track[track] = {c: sum(sum(x[c] for x in v) / len(v) for _, v in sorted(fam.items())) / len(fam) * 100
                            for c in L2_COMPONENTS}
    return {"by_track": per_track,
            "mean": {c: _mean(per_track[t][c] for t in sorted(per_track)) for c in L2_COMPONENTS}}


def l1_dimension_means(worlds: list[WorldOutcome]) -> dict[str, dict]:
    per_track: dict[str, dict[str, float | None]] = {}
    for track in sorted({w.track for w in worlds}):
        ws = [w for w in worlds if w.track == track and w.level == "L1" and w.answered]
        if ws:
            per_track[track] = {d: _mean(w.l1_dims.get(d) for w in ws) for d in L1_DIMENSIONS}
    return {"by_track": per_track,
            "mean": {d: _mean(per_track[t][d] for t in sorted(per_track)) for d in L1_DIMENSIONS}}


def l3_summary(worlds: list[WorldOutcome]) -> dict:
    elig = [w for w in worlds if w.level == "L3" and w.answered and w.eligible]
    l3 = [w for w in worlds if w.level == "L3"]
    shares = [w.commit_share for w in elig if w.commit_share is not None]
    nov = [v for w in elig for v in w.novelty_values]
    fid = [w.fidelity for w in elig if w.fidelity is not None]
    ret = [w.prior_return for w in elig if w.prior_return is not None]
    return {
        "evidence_fidelity": (sum(fid) / len(fid)) if fid else None,
        "prior_return": (sum(ret) / len(ret)) if ret else None,
        "dossiers": len(l3),
        "eligible": len(elig),
        "ineligible": sum(1 for w in l3 if w.answered and not w.eligible),
        "commitment": (sum(shares) / len(shares)) if shares else None,
        "committed": sum(w.committed for w in elig),
        "eligible_replicates": sum(w.eligible_reps for w in elig),
        "conditional_novelty": (sum(nov) / len(nov)) if nov else None,
        "novelty_n": len(nov),
    }


def l3_oversight_summary(worlds: list[WorldOutcome]) -> dict:
    """Drift, concessions and reviewer rejections per review round, over answered L3 replicates (module doc, 9)."""
    obs = [o for w in sorted(worlds, key=lambda w: w.world_id) if w.level == "L3" for o in w.oversight]
    n_rounds = max((len(o.get("rounds") or []) for o in obs), default=0)
    per_round = []
    for k in range(n_rounds):
        rs = [o["rounds"][k] for o in obs if len(o.get("rounds") or []) > k]
        per_round.append({"round": k + 1, "replicates": len(rs),
                          "concessions": _mean(float(r.get("concessions") or 0) for r in rs),
                          "rejection_fraction": _mean(float(r.get("rejection_fraction") or 0) for r in rs)})
    return {"replicates": len(obs), "drift": _mean(o.get("drift") for o in obs), "rounds": per_round,
            "concessions_total": _mean(sum(float(r.get("concessions") or 0) for r in o.get("rounds") or []) for o in obs),
            "prior_return": _mean(o.get("prior_return") for o in obs)}


def bootstrap(worlds: list[WorldOutcome], draws: int, seed: int) -> dict[str, list[float] | None]:
    """95% percentile intervals for Overall and L1-L3, resampling worlds with replacement within (track, level)."""
    if draws <= 0:
        return {k: None for k in ("overall", *LEVELS)}
    rng = np.random.default_rng(seed)
    tracks = sorted({w.track for w in worlds})
    comp = np.full((draws, len(tracks)), np.nan)
    lvl = {lv: np.full((draws, len(tracks)), np.nan) for lv in LEVELS}
    for ti, track in enumerate(tracks):
        for lv in LEVELS:
            ws = sorted((w for w in worlds if w.track == track and w.level == lv and w.answered and w.score is not None
                         and (lv != "L3" or w.eligible)), key=lambda w: w.world_id)
            if not ws:
                continue
            scores = np.array([w.score for w in ws], dtype=float)
            idx = rng.integers(0, len(ws), size=(draws, len(ws)))
            if lv == "L2":
                fams = sorted({w.family for w in ws})
                fidx = np.array([fams.index(w.family) for w in ws])
                onehot = np.zeros((len(ws), len(fams)))
                onehot[np.arange(len(ws)), fidx] = 1.0
                counts = np.zeros((draws, len(ws)))
                np.add.at(counts, (np.repeat(np.arange(draws), len(ws)), idx.ravel()), 1.0)
                fsum = (counts * scores) @ onehot
                fcnt = counts @ onehot
                with np.errstate(invalid="ignore", divide="ignore"):
                    fmean = np.where(fcnt > 0, fsum / np.where(fcnt > 0, fcnt, 1), np.nan)
                lvl[lv][:, ti] = np.nanmean(fmean, axis=1)
            else:
                lvl[lv][:, ti] = scores[idx].mean(axis=1)
        stack = np.stack([lvl[lv][:, ti] for lv in LEVELS], axis=1)
        present = ~np.isnan(stack)
        if not present.any():
            continue
        with np.errstate(divide="ignore"):
            logs = np.where(present, np.log(np.where(present & (stack > 0), stack, 1.0)), 0.0)
        zero = (present & (stack <= 0)).any(axis=1)
        g = np.exp(logs.sum(axis=1) / present.sum(axis=1))
        comp[:, ti] = np.where(zero, 0.0, g)

    def interval(mat: np.ndarray) -> list[float] | None:
        cols = ~np.isnan(mat).all(axis=0)
        if not cols.any():
            return None
        m = np.nanmean(mat[:, cols], axis=1)
        lo, hi = np.percentile(m, [2.5, 97.5])
        return [float(lo), float(hi)]

    return {"overall": interval(comp), **{lv: interval(lvl[lv]) for lv in LEVELS}}


@functools.lru_cache(maxsize=1)
def physics_tracks() -> frozenset[str]:
    """The suite's tracks whose track.yaml says `domain: physics` (seed 001 Appendix F): scored in their own table,
    never in the Overall, which averages the life-science track composites. Records of a track the suite does not
    know (another checkout, synthetic tests) count as life science."""
    try:
        from benchmark.suite.loader import load_suite

        return frozenset(t for t, b in load_suite().tracks.items() if b.manifest.domain == "physics")
    except Exception:  # noqa: BLE001 - no suite to read: every track is life science
        return frozenset()


def physics_summary(worlds: dict[str, WorldOutcome], assigned: dict[str, tuple]) -> dict:
    """Seed 001 Tables 11-12's shape: per physics track L1-L3 and composite; stage means over the physics tracks;
    coverage; the agent's tokens, calls and cost on them (priced as everywhere else)."""
    ws = [worlds[k] for k in sorted(worlds)]
    expected: dict[str, set[str]] = defaultdict(set)
    for track, level in assigned.values():
        expected[track].add(level)
    tracks = {t: track_summary([w for w in ws if w.track == t], sorted(expected[t]))
              for t in sorted({w.track for w in ws})}
    agent = CostTotal()
    for w in ws:
        agent.merge(w.agent)
    answered = sum(1 for wid in assigned if wid in worlds and worlds[wid].answered)
    return {
        "tracks": tracks,
        "levels": {lv: {"mean": _mean(tracks[t][lv] for t in sorted(tracks)),
                        "tracks": sum(tracks[t][lv] is not None for t in tracks)} for lv in LEVELS},
        "coverage": {"assigned": len(assigned), "answered": answered,
                     "coverage": answered / len(assigned) if assigned else None},
        "accounting": {"agent": {**agent.as_dict(), "code_cells": sum(w.code_cells for w in ws)},
                       "usd_per_task": (agent.usd / len(assigned)) if agent.usd is not None and assigned else None},
    }


def model_summary(label: str, worlds: dict[str, WorldOutcome], assigned: dict[str, tuple], extra_roles: list[Part],
                  draws: int, seed: int, replay_info: dict | None = None) -> dict:
    phys = physics_tracks()
    p_worlds = {k: w for k, w in worlds.items() if w.track in phys}
    p_assigned = {k: m for k, m in assigned.items() if m[0] in phys}
    if p_worlds or p_assigned:  # scored apart (physics_summary); everything below is the life-science Overall
        worlds = {k: w for k, w in worlds.items() if w.track not in phys}
        assigned = {k: m for k, m in assigned.items() if m[0] not in phys}
    out = _life_science_summary(label, worlds, assigned, extra_roles, draws, seed, replay_info)
    if p_worlds or p_assigned:
        out["physics"] = physics_summary(p_worlds, p_assigned)
    return out


def _life_science_summary(label: str, worlds: dict[str, WorldOutcome], assigned: dict[str, tuple],
                          extra_roles: list[Part], draws: int, seed: int, replay_info: dict | None = None) -> dict:
    ws = [worlds[k] for k in sorted(worlds)]
    tracks_all = sorted({meta[0] for meta in assigned.values()})
    expected_levels: dict[str, set[str]] = defaultdict(set)
    for wid, (track, level) in assigned.items():
        expected_levels[track].add(level)
    tracks: dict[str, dict] = {}
    for track in tracks_all:
        tw = [w for w in ws if w.track == track]
        if tw:
            tracks[track] = track_summary(tw, sorted(expected_levels[track]))
    comps = {t: s["composite"] for t, s in tracks.items() if s["composite"] is not None}
    overall = _mean(comps[t] for t in sorted(comps))
    per_level = {}
    for lv in LEVELS:
        vals = [tracks[t][lv] for t in sorted(tracks) if tracks[t][lv] is not None]
        per_level[lv] = {"mean": (sum(vals) / len(vals)) if vals else None, "sd": _sd(vals), "tracks": len(vals)}
    arith = _mean(tracks[t]["arithmetic"] for t in sorted(tracks))
    min_stage = _mean(tracks[t]["min_stage"] for t in sorted(tracks))
    curve = []
    scored_tracks = [t for t in sorted(tracks) if tracks[t]["composite"] is not None]
    for thr in THRESHOLDS:
        ok = sum(all(tracks[t][lv] > thr for lv in LEVELS if tracks[t][lv] is not None) for t in scored_tracks)
        curve.append(ok / len(scored_tracks) if scored_tracks else None)
    perfect = {}
    for lv in LEVELS:
        pool = [w for w in ws if w.level == lv and w.answered and w.score is not None and (lv != "L3" or w.eligible)]
        perfect[lv] = {"rate": (sum(w.score >= PERFECT for w in pool) / len(pool)) if pool else None,
                       "perfect": sum(w.score >= PERFECT for w in pool), "worlds": len(pool)}
    bott = {lv: 0.0 for lv in LEVELS}
    full = [t for t in sorted(tracks) if all(tracks[t][lv] is not None for lv in LEVELS)]
    for t in full:
        low = min(tracks[t][lv] for lv in LEVELS)
        tied = [lv for lv in LEVELS if abs(tracks[t][lv] - low) < 1e-9]
        for lv in tied:
            bott[lv] += 1 / len(tied)
    bottleneck = {"counts": bott, "tracks": len(full),
                  "shares": {lv: (bott[lv] / len(full)) if full else None for lv in LEVELS}}
    # coverage
    answered = sum(1 for wid in assigned if wid in worlds and worlds[wid].answered)
    refused_worlds = sum(1 for wid in assigned if wid in worlds and not worlds[wid].answered and worlds[wid].n_refused)
    errors = sum(1 for wid in assigned if wid in worlds and not worlds[wid].answered and not worlds[wid].n_refused)
    missing = sum(1 for wid in assigned if wid not in worlds) + errors
    coverage = {"assigned": len(assigned), "answered": answered, "refused": refused_worlds,
                "refused_replicates": sum(w.n_refused for w in ws), "missing": missing, "errors": errors,
                "failed_replicates": sum(w.n_failed for w in ws),
                "coverage": answered / len(assigned) if assigned else None,
                "complete": answered == len(assigned),
                "by_level": {lv: {"assigned": sum(1 for m in assigned.values() if m[1] == lv),
                                  "answered": sum(1 for wid, m in assigned.items() if m[1] == lv and wid in worlds and worlds[wid].answered)}
                             for lv in LEVELS}}
    # accounting
    agent = CostTotal()
    cells = 0.0
    roles: dict[str, CostTotal] = defaultdict(CostTotal)
    for w in ws:
        agent.merge(w.agent)
        cells += w.code_cells
        for r in sorted(w.roles):
            roles[r].merge(w.roles[r])
    for p in extra_roles:
        roles[p.role].add(p.priced, p.calls)
    eff = efficiency(overall, agent, len(assigned))
    acc = {"agent": {**agent.as_dict(), "code_cells": cells, "long_context_tasks": agent.long_context_tasks},
           **eff, "roles": {r: roles[r].as_dict() for r in sorted(roles)}}
    # per-track usage (for stability measures)
    track_usage = {t: {"tokens": sum(w.agent.tokens for w in ws if w.track == t),
                       "calls": sum(w.agent.calls for w in ws if w.track == t),
                       "code_cells": sum(w.code_cells for w in ws if w.track == t)} for t in sorted(tracks)}
    l3 = l3_summary(ws)
    l3_tracks = {t: l3_summary([w for w in ws if w.track == t]) for t in sorted(tracks)}
    l3_by_track = {t: l3_tracks[t]["commitment"] for t in sorted(tracks)}
    return {
        "model": label,
        "replay": replay_info,
        "overall": overall,
        "overall_sd": _sd([comps[t] for t in sorted(comps)]),
        "levels": per_level,
        "ci95": bootstrap(ws, draws, seed),
        "tracks": tracks,
        "flagged_tracks": [t for t in sorted(tracks) if tracks[t]["flagged"]],
        "views": {"geometric": overall, "arithmetic": arith, "min_stage": min_stage},
        "threshold_curve": curve,
        "perfect": perfect,
        "bottleneck": bottleneck,
        "l1_dimensions": l1_dimension_means(ws),
        "l2_dimensions": l2_dimension_means(ws),
        "l3": {**l3, "commitment_by_track": l3_by_track,
               "evidence_fidelity_by_track": {t: l3_tracks[t]["evidence_fidelity"] for t in sorted(tracks)},
               "prior_return_by_track": {t: l3_tracks[t]["prior_return"] for t in sorted(tracks)},
               "oversight": l3_oversight_summary(ws)},
        "coverage": coverage,
        "accounting": acc,
        "track_usage": track_usage,
        "rulings_applied": sorted({r for w in ws for r in w.rulings}),
        "ranked": coverage["complete"] and overall is not None,
    }


# ------------------------------------------------------------------ stability (A.3)

def kendall_w(matrix: np.ndarray) -> tuple[float | None, np.ndarray]:
    """Tie-corrected Kendall's W for a models x tracks matrix; rankings within each track (column)."""
    n, m = matrix.shape
    ranks = np.column_stack([stats.rankdata(matrix[:, j]) for j in range(m)])
    return _w_from_ranks(ranks), ranks


def _ties(col: np.ndarray) -> float:
    _, counts = np.unique(col, return_counts=True)
    return float(((counts ** 3) - counts).sum())


def _w_from_ranks(ranks: np.ndarray) -> float | None:
    n, m = ranks.shape
    r = ranks.sum(axis=1)
    s = float(((r - r.mean()) ** 2).sum())
    denom = m ** 2 * (n ** 3 - n) - m * sum(_ties(ranks[:, j]) for j in range(m))
    return 12 * s / denom if denom > 0 else None


def w_permutation_test(matrix: np.ndarray, draws: int, seed: int) -> dict:
    """W and its tie-preserving null: model labels permuted within each track independently."""
    w, ranks = kendall_w(matrix)
    n, m = ranks.shape
    out = {"W": w, "models": n, "tracks": m, "null_mean": None, "p": None, "draws": draws}
    if w is None or draws <= 0:
        return out
    rng = np.random.default_rng(seed)
    sums = np.zeros((draws, n))
    for j in range(m):
        sums += rng.permuted(np.tile(ranks[:, j], (draws, 1)), axis=1)
    s = ((sums - sums.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
    denom = m ** 2 * (n ** 3 - n) - m * sum(_ties(ranks[:, j]) for j in range(m))
    null = 12 * s / denom
    out["null_mean"] = float(null.mean())
    out["p"] = float((1 + np.sum(null >= w - 1e-12)) / (1 + draws))
    return out


def split_half(matrix: np.ndarray) -> dict:
    """Spearman correlation across models between the half means of every track partition (each counted once)."""
    n, m = matrix.shape
    if m < 2 or n < 3:
        return {"mean": None, "partitions": 0, "retained": 0}
    k = m // 2
    combos = [c for c in itertools.combinations(range(m), k) if (m % 2 == 1 or 0 in c)]
    rs = []
    for c in combos:
        rest = [j for j in range(m) if j not in c]
        a, b = matrix[:, list(c)].mean(axis=1), matrix[:, rest].mean(axis=1)
        if np.ptp(a) == 0 or np.ptp(b) == 0:
            continue
        rs.append(float(stats.spearmanr(a, b).statistic))
    return {"mean": (sum(rs) / len(rs)) if rs else None, "partitions": len(combos), "retained": len(rs)}


def _measure_value(summary: dict, track: str, measure: str) -> float | None:
    t = summary["tracks"].get(track)
    if t is None:
        return None
    if measure in ("composite", *LEVELS):
        return t[measure]
    if measure.startswith("L2."):
        return summary["l2_dimensions"]["by_track"].get(track, {}).get(measure[3:])
    if measure.startswith("L1."):
        return summary["l1_dimensions"]["by_track"].get(track, {}).get(measure[3:])
    if measure == "L3.commitment":
        return summary["l3"]["commitment_by_track"].get(track)
    if measure == "L3.evidence_fidelity":
        return summary["l3"]["evidence_fidelity_by_track"].get(track)
    if measure == "L3.prior_return":
        return summary["l3"]["prior_return_by_track"].get(track)
    return summary["track_usage"][track][measure]


# New measures are appended, so each earlier measure keeps its permutation seed (seed + index).
STABILITY_MEASURES = ("composite", "L1", "L2", "L3", "L1.issue_recognition", "L1.methodological_response",
                      "L1.result_calibration", "L2.A", "L2.I", "L2.M", "L2.C", "L3.commitment",
                      "tokens", "calls", "code_cells",
                      "L3.evidence_fidelity", "L3.prior_return", "L1.clean_specificity", "L1.no_fabrication")
PERMUTATION_DRAWS = 50_000  # seed 001 A.3: "A within-track permutation of model labels (50,000 draws)"


def stability(summaries: list[dict], draws: int, seed: int) -> dict:
    models = [s for s in summaries if s["replay"] is None and s["ranked"]]
    out: dict[str, Any] = {"models": [s["model"] for s in models], "measures": {}}
    if len(models) < 2:
        return out
    for i, measure in enumerate(STABILITY_MEASURES):
        tracks = sorted(set.intersection(*[set(s["tracks"]) for s in models]))
        cols = []
        used = []
        for t in tracks:
            col = [_measure_value(s, t, measure) for s in models]
            if all(v is not None for v in col):
                cols.append(col)
                used.append(t)
        if len(used) < 2:
            continue
        mat = np.array(cols, dtype=float).T
        res = w_permutation_test(mat, draws, seed + i)
        res["tracks_used"] = used
        res["split_half"] = split_half(mat)
        out["measures"][measure] = res
    tested = [k for k in sorted(out["measures"]) if out["measures"][k]["p"] is not None]
    if tested:
        adj = stats.false_discovery_control([out["measures"][k]["p"] for k in tested], method="bh")
        for k, q in zip(tested, adj):
            out["measures"][k]["p_bh"] = float(q)
    return out


def pooled(summaries: list[dict]) -> dict:
    """Perfect-score rates and bottleneck shares pooled over the observed models (seed 001 §4.1)."""
    rows = [s for s in summaries if s["replay"] is None]
    perf = {}
    for lv in LEVELS:
        n = sum(s["perfect"][lv]["worlds"] for s in rows)
        k = sum(s["perfect"][lv]["perfect"] for s in rows)
        perf[lv] = {"rate": k / n if n else None, "perfect": k, "worlds": n}
    tot = sum(s["bottleneck"]["tracks"] for s in rows)
    bott = {lv: (sum(s["bottleneck"]["counts"][lv] for s in rows) / tot) if tot else None for lv in LEVELS}
    return {"perfect": perf, "bottleneck_shares": bott, "model_tracks": tot}


# ------------------------------------------------------------------ the whole thing

@dataclass
class Options:
    date: dt.date | None = None
    fallbacks: list[tuple[str, str]] = field(default_factory=list)
    bootstrap_draws: int = 2000
    permutation_draws: int = PERMUTATION_DRAWS
    seed: int = 20260824


def aggregate(runs: list[RunInput], rulings: dict, pricing: Pricing, opts: Options | None = None,
              ledger_names: list[str] | None = None) -> dict:
    opts = opts or Options()
    by_model: dict[str, list[RunInput]] = defaultdict(list)
    for run in sorted(runs, key=lambda r: (r.model, r.run_id)):
        by_model[run.model].append(run)
    assigned: dict[str, tuple] = {}
    for run in runs:
        for wid, meta in sorted((run.assigned or {}).items()):
            assigned[wid] = meta
        for r in run.records:
            assigned[r.world_id] = (r.track, r.level)
    attempts: dict[str, list[Attempt]] = {}
    extra: dict[str, list[Part]] = {}
    for model, rs in sorted(by_model.items()):
        seen: dict[tuple[str, int], str] = {}
        atts: list[Attempt] = []
        for run in rs:
            for a in build_attempts(run, rulings, pricing, opts.date):
                k = (a.world_id, a.replicate)
                if k in seen:
                    raise BenchmarkError(f"{model}: world {a.world_id} replicate {a.replicate} is recorded in both runs "
                                         f"{seen[k]} and {run.run_id}; pass only one of them")
                seen[k] = run.run_id
                atts.append(a)
        attempts[model] = sorted(atts, key=lambda a: (a.world_id, a.replicate))
        extra[model] = [p for run in rs for p in unattached_verifier_parts(run, pricing, opts.date)]
    summaries = []
    for model in sorted(attempts):
        summaries.append(model_summary(model, world_outcomes(attempts[model]), assigned, extra[model],
                                       opts.bootstrap_draws, opts.seed))
    for x, y in opts.fallbacks:
        for name in (x, y):
            if name not in attempts:
                raise BenchmarkError(f"--fallback {x}={y}: no run of model '{name}' was loaded (models: {', '.join(sorted(attempts))})")
        atts, info = replay(attempts[x], attempts[y], assigned)
        info.update({"from": x, "to": y})
        summaries.append(model_summary(f"{x}{REPLAY_ARROW}{y}", world_outcomes(atts), assigned, extra[x],
                                       opts.bootstrap_draws, opts.seed, info))
    summaries.sort(key=lambda s: s["model"])
    ranked = sorted((s for s in summaries if s["ranked"]), key=lambda s: (-s["overall"], s["model"]))
    for i, s in enumerate(ranked, 1):
        s["rank"] = i
    for s in summaries:
        s.setdefault("rank", None)
    cards = sorted({p.priced.card for atts in attempts.values() for a in atts for p in a.parts if p.priced.card})
    return {
        "schema": "discern-leaderboard/1",
        "inputs": {
            "runs": [{"run_id": r.run_id, "model": r.model, "records": len(r.records),
                      "eval_date": (opts.date or r.eval_date).isoformat() if (opts.date or r.eval_date) else None}
                     for r in sorted(runs, key=lambda r: (r.model, r.run_id))],
            "ledgers": sorted(ledger_names or []),
            "rulings_in_force": len(rulings),
            "rate_cards": cards,
            "fallbacks": [f"{x}={y}" for x, y in opts.fallbacks],
            "bootstrap": {"draws": opts.bootstrap_draws, "seed": opts.seed},
            "permutations": {"draws": opts.permutation_draws, "seed": opts.seed},
            "assigned_tasks": len(assigned),
            "tracks": sorted({m[0] for m in assigned.values()}),
        },
        "models": summaries,
        "pooled": pooled(summaries),
        "stability": stability(summaries, opts.permutation_draws, opts.seed),
    }


def clean_floats(obj: Any, ndigits: int = 6) -> Any:
    """Round floats for stable, byte-identical output; NaN/inf become None."""
    if isinstance(obj, float):
        if math.isnan(obj) or math.isinf(obj):
            return None
        v = round(obj, ndigits)
        return 0.0 if v == 0 else v
    if isinstance(obj, dict):
        return {str(k): clean_floats(v, ndigits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_floats(v, ndigits) for v in obj]
    if isinstance(obj, np.generic):
        return clean_floats(obj.item(), ndigits)
    return obj
