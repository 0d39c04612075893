"""Validity of the suite itself (SPEC R15, issue 10): only real analysis earns marks.

`worlds check --agents` runs, through the real `run` path, the oracle (must score 100 on every world), the naive
agent (must fall into every trap, <= 20 on every challenged world, and pass every clean control, >= 95) and the
gaming agents of benchmark.models.scripted.gaming. Per track and level, no gaming agent may beat blind trust (`all_clear`, whose
score is the share of sound worlds) by more than 5 points or exceed 35, and the metadata rule may not classify
sound vs defective worlds better than always answering the majority class. Failures name the world or the agent.
"""
from __future__ import annotations

import os
import statistics
import tempfile
from pathlib import Path

from benchmark.models.scripted.expert import ORACLE_REPLAY_ENV
from graders.numerics import restore_environment
from benchmark.models.scripted.gaming import GAMING, REPLAY_ENV, metadata_predictions, sound
from benchmark.suite.loader import WorldRef
from benchmark.run.records import ResultRecord
from benchmark.run.episodes import RunConfig, execute, select_worlds

ORACLE_MIN = 100.0 - 1e-6
NAIVE_TRAP_MAX = 20.0
NAIVE_CLEAN_MIN = 95.0
GAMING_MARGIN = 5.0
GAMING_CEILING = 35.0
CLEAN_CLASSES = ("clean", "boundary")
THOROUGH_MIN = 98.0
METADATA_ALPHA = 0.05  # the metadata rule fails the suite only when it beats the majority class significantly
AGENTS = ("oracle", "naive", *GAMING, "thorough")


def _score(r: ResultRecord) -> float:
    return float(r.score or 0.0)


def oracle_problems(records: list[ResultRecord]) -> list[str]:
    return [f"{r.world_id}: scripted/oracle scored {_score(r):.1f} < 100 ({r.status}; {r.grade.reason if r.grade else r.error if hasattr(r, 'error') else ''})"
            for r in records if _score(r) < ORACLE_MIN]


def naive_problems(records: list[ResultRecord]) -> list[str]:
    out = []
    for r in records:
        score = _score(r)
        if r.world_class in CLEAN_CLASSES and score < NAIVE_CLEAN_MIN:
            out.append(f"{r.world_id}: scripted/naive should pass this {r.world_class} control but scored {score:.1f} ({r.grade.status if r.grade else r.status})")
        elif r.world_class not in CLEAN_CLASSES and score > NAIVE_TRAP_MAX:
            out.append(f"{r.world_id}: scripted/naive should fall into this {r.world_class} world but scored {score:.1f} > {NAIVE_TRAP_MAX:g}")
    return out


def thorough_problems(records: list[ResultRecord]) -> list[str]:
    """The thorough expert (the oracle's findings written with context, null checks and nuisance features) must
    score >= THOROUGH_MIN on every world: thoroughness is never penalised."""
    return [f"{r.world_id}: scripted/thorough scored {_score(r):.1f} < {THOROUGH_MIN:g} "
            f"({r.grade.reason if r.grade else r.status})" for r in records if _score(r) < THOROUGH_MIN - 1e-9]


def level_score(records: list[ResultRecord]) -> float:
    """A level's score as aggregation computes it: L1 the mean of worlds, L2 the mean of family means."""
    if not records:
        return 0.0
    if records[0].level == "L2":
        fams: dict[str, list[float]] = {}
        for r in records:
            fams.setdefault(r.family, []).append(_score(r))
        return statistics.fmean(statistics.fmean(v) for v in fams.values())
    return statistics.fmean(_score(r) for r in records)


def agent_table(results: dict[str, list[ResultRecord]]) -> dict[tuple[str, str], dict[str, float]]:
    """(track, level) -> agent -> level score."""
    table: dict[tuple[str, str], dict[str, float]] = {}
    for agent, recs in results.items():
        groups: dict[tuple[str, str], list[ResultRecord]] = {}
        for r in recs:
            groups.setdefault((r.track, r.level), []).append(r)
        for key, rs in groups.items():
            table.setdefault(key, {})[agent] = round(level_score(rs), 2)
    return table


def gaming_problems(table: dict[tuple[str, str], dict[str, float]]) -> list[str]:
    out = []
    for (track, level), row in sorted(table.items()):
        bar = row.get("all_clear")
        if bar is None:
            continue
        for agent in GAMING:
            s = row.get(agent)
            if s is None or agent == "all_clear":  # the bar itself: the share of sound worlds in the selection
                continue
            if s > bar + GAMING_MARGIN:
                out.append(f"{track} {level}: scripted/{agent} scores {s:.1f}, more than blind trust ({bar:.1f}) + {GAMING_MARGIN:g}")
            if s > GAMING_CEILING:
                out.append(f"{track} {level}: scripted/{agent} scores {s:.1f} > {GAMING_CEILING:g}")
    return out


FAMILY_CHECKED = ("layout",)  # agents also held to the bar family by family, not only per track and level


def family_gaming_problems(results: dict[str, list[ResultRecord]]) -> list[str]:
    """Per family, the FAMILY_CHECKED agents against blind trust on the same family (+ margin) and the ceiling."""
    def means(recs: list[ResultRecord]) -> dict[str, float]:
        fams: dict[str, list[float]] = {}
        for r in recs:
            fams.setdefault(r.family, []).append(_score(r))
        return {f: statistics.fmean(v) for f, v in fams.items()}

    bar = means(results.get("all_clear", []))
    out = []
    for agent in FAMILY_CHECKED:
        for fam, s in sorted(means(results.get(agent, [])).items()):
            if fam in bar and s > bar[fam] + GAMING_MARGIN:
                out.append(f"{fam}: scripted/{agent} scores {s:.1f}, more than blind trust ({bar[fam]:.1f}) + {GAMING_MARGIN:g}")
            if s > GAMING_CEILING:
                out.append(f"{fam}: scripted/{agent} scores {s:.1f} > {GAMING_CEILING:g}")
    return out


def metadata_accuracy(refs: list[WorldRef]) -> dict[tuple[str, str], tuple[float, float, int]]:
    """(track, level) -> (accuracy of the metadata rule at telling sound from defective worlds, majority-class rate,
    number of worlds)."""
    nb = metadata_predictions(refs)
    groups: dict[tuple[str, str], list[tuple[bool, bool]]] = {}
    for r in refs:
        truth = sound(r.world.world_class)
        guess = sound(nb[r.id].world.world_class)
        groups.setdefault((r.world.track, str(r.world.level)), []).append((truth, guess))
    out = {}
    for key, pairs in groups.items():
        acc = sum(t == g for t, g in pairs) / len(pairs)
        n_sound = sum(t for t, _ in pairs)
        out[key] = (acc, max(n_sound, len(pairs) - n_sound) / len(pairs), len(pairs))
    return out


def metadata_pvalue(acc: float, majority: float, n: int) -> float:
    """One-sided binomial test: how likely the rule's hits are if it were no better than the majority class. Two
    sound worlds of 574 and 580 rows that are each other's nearest neighbours are a chance, not a leak."""
    from scipy.stats import binomtest

    if majority >= 1.0:
        return 1.0
    return float(binomtest(round(acc * n), n, majority, alternative="greater").pvalue)


def metadata_problems(refs: list[WorldRef]) -> list[str]:
    out = []
    for (t, lv), (acc, maj, n) in sorted(metadata_accuracy(refs).items()):
        p = metadata_pvalue(acc, maj, n)
        if acc > maj + 1e-9 and p < METADATA_ALPHA:
            out.append(f"{t} {lv}: file metadata alone tells sound from defective worlds in {acc:.0%} of {n} cases, "
                       f"significantly better than always answering the majority class ({maj:.0%}; one-sided binomial "
                       f"p = {p:.3f} < {METADATA_ALPHA:g}); draw sizes and depths from each world's seed")
    return out


def _with_priors(refs: list[WorldRef]) -> list[str]:
    """The L2 worlds whose family declares a textbook answer (worlds/<track>/priors.yaml)."""
    from benchmark.models.scripted.prior import track_priors

    return [r.id for r in refs if r.world.level == "L2" and r.family.id in track_priors(r)]


def check_agents(worlds: list[str] | None, tracks: list[str] | None, levels: list[str] | None,
                 concurrency: int = 1, out: Path | None = None, suite: Path | None = None,
                 agents: tuple[str, ...] = AGENTS, reuse: bool = False) -> tuple[list[str], dict[str, list[ResultRecord]]]:
    """Run every agent on the selection; return the problems (empty when the suite is valid) and the records.
    `reuse`: `out` already holds agents' runs over a wider selection; their records of these worlds are reused (each
    run folder's configuration follows the new selection) and only what is missing runs."""
    base = Path(out) if out else Path(tempfile.mkdtemp(prefix="benchmark-agents-"))
    results: dict[str, list[ResultRecord]] = {}
    problems: list[str] = []
    lv = levels or ["L1", "L2"]
    saved = {k: os.environ.get(k) for k in (REPLAY_ENV, ORACLE_REPLAY_ENV)}
    refs = select_worlds(RunConfig(model="scripted/oracle", out=base, worlds=worlds, tracks=tracks, levels=lv, suite=suite))
    try:
        for agent in agents:
            # where no textbook answer is declared the prior agent's report is blind trust's, by construction
            # (benchmark.models.scripted.prior): it runs only where a prior is declared and takes all_clear's
            # records elsewhere
            priors_only = agent == "prior" and "all_clear" in results
            sel = _with_priors(refs) if priors_only else worlds
            cfg = RunConfig(model=f"scripted/{agent}", out=base / agent, worlds=sel, tracks=tracks, levels=lv,
                            concurrency=concurrency, resume=True, suite=suite, force_config=reuse or priors_only)
            ran = [] if priors_only and not sel else execute(cfg)
            done = {r.world_id for r in ran}
            results[agent] = ran + ([r for r in results["all_clear"] if r.world_id not in done] if priors_only else [])
            if agent == "naive":
                os.environ[REPLAY_ENV] = str(base / "naive")  # gaming agents replay the naive analysis, not redo it
            if agent == "oracle":
                os.environ[ORACLE_REPLAY_ENV] = str(base / "oracle")  # the expert agents replay the oracle's
    finally:
        restore_environment(saved)
    if "alarmist" in results:  # held to the bar where it has a sibling defect to invent (not on a one-trap family's traps)
        from benchmark.models.scripted.expert import siblings

        by_id = {r.id: r for r in refs}
        results["alarmist"] = [r for r in results["alarmist"] if r.world_id in by_id and siblings(by_id[r.world_id])]
    if "oracle" in results:
        problems += oracle_problems(results["oracle"])
    if "naive" in results:
        problems += naive_problems(results["naive"])
    if "thorough" in results:
        problems += thorough_problems(results["thorough"])
    problems += gaming_problems(agent_table(results))
    problems += family_gaming_problems(results)
    if "metadata" in agents:
        problems += metadata_problems(refs)
    return problems, results


def render_table(results: dict[str, list[ResultRecord]]):
    """A rich table: one row per agent, one column per track and level, plus the metadata rule's accuracy."""
    from rich.table import Table

    table = agent_table(results)
    cols = sorted(table)
    t = Table(title="scripted agents (level score, 0-100; L2 family-balanced)")
    t.add_column("agent")
    for track, level in cols:
        t.add_column(f"{track} {level}", justify="right")
    for agent in results:
        t.add_row(agent, *[f"{table[c].get(agent, float('nan')):.1f}" for c in cols])
    return t


def baselines_section(root: Path) -> dict:
    """The scripted agents' level scores from a `worlds check --agents --agents-out DIR` folder, for the leaderboard:
    what blind trust, flagging everything, keyword stuffing, a constant report and metadata earn beside the models."""
    from benchmark.errors import BenchmarkError
    from benchmark.run.store import RunStore

    root = Path(root)
    results: dict[str, list[ResultRecord]] = {}
    for agent in AGENTS:
        d = root / agent
        if (d / "results.jsonl").exists():
            results[agent] = [r for r in RunStore(d).results() if r.score is not None]
    if not results:
        raise BenchmarkError(f"{root} holds no scripted-agent runs; create it with "
                             "`python -m benchmark worlds check --agents --agents-out DIR`")
    table = agent_table(results)
    cols = sorted(table)
    return {"columns": [f"{t} {lv}" for t, lv in cols],
            "rows": [{"agent": a, "scores": [table[c].get(a) for c in cols]} for a in results],
            "rule": f"no gaming agent may beat all_clear by more than {GAMING_MARGIN:g} points or exceed {GAMING_CEILING:g}"}
