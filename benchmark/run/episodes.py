"""`run`: verify locks, run the agent on each selected world in a fresh sandbox, grade, record; resumable.

Work is (world, replicate) pairs. Each finished pair is recorded (trajectory file, then one results.jsonl line)
before the next is counted done, so a killed run re-started with `--resume` skips exactly the finished pairs.

Faults are not scores: a dead endpoint, a sandbox that cannot start or a harness exception is recorded with status
`model_error` / `sandbox_error` / `harness_error`, no score and the error, and `--resume` runs that pair again.
Each pair runs inside an error boundary (`run_guarded`), so no agent output can stop the campaign. Missing tools are
found before the first world (`preflight`).
"""
from __future__ import annotations

import os
import platform
import queue
import shutil
import sys
import traceback
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from benchmark.run.agent import HARNESS_VERSION, RetryPolicy, run_episode
from benchmark.oversight.audit import audit_cells
from benchmark.errors import BenchmarkError, LockMismatch
from benchmark.suite.freeze import default_jobs, ensure_built, pinned_pool, read_golden, tool_versions, world_cache
from benchmark.suite.loader import WorldRef, load_suite
from graders.manifest import STEP_BUDGET, Level
from benchmark.models import is_offline
from benchmark.run.records import ERROR_STATUSES, ResultRecord, RoleUsage, Trajectory
from benchmark.run.refusal import detect_refusal
from benchmark.run.store import RunStore, result_key
from graders.grade import grade
from graders.registry import RegistryError
from sandbox.bwrap import Limits, Sandbox
from sandbox.deferred import DeferredSandbox, wait_all

DEFAULT_LEVELS = ["L1", "L2", "L3"]


@dataclass
class RunConfig:
    model: str
    out: Path
    worlds: list[str] | None = None
    tracks: list[str] | None = None
    levels: list[str] = field(default_factory=lambda: list(DEFAULT_LEVELS))
    replicates: int = 1
    concurrency: int = 1
    resume: bool = False
    seed: int = 0
    limits: Limits = field(default_factory=Limits)
    reviewers: tuple[str, ...] = ("local/smollm2", "local/smollm2", "local/smollm2")
    judge: str = "local/smollm2"
    force_config: bool = False
    suite: Path | None = None  # a private campaign frozen with `worlds freeze --seed S --out DIR`
    max_steps: int | None = None  # smoke tests only: caps each level's step budget (recorded in config.json)
    executor: str = "local"  # "local": a thread pool on this machine; "ray": a Ray cluster (benchmark.run.ray_executor)
    address: str | None = None  # with executor "ray": the cluster's address (default RAY_ADDRESS, else "auto")

    @property
    def paid(self) -> bool:
        """Whether any model of the run is hosted (offline models, local/scripted/human, are free and need no
        litellm): its requests are journaled (benchmark.run.journal) and litellm is imported."""
        return any(not is_offline(m) for m in (self.model, *self.reviewers, self.judge))

    def describe(self) -> dict:
        d = asdict(self)
        d.pop("force_config")
        d["out"] = str(self.out)
        d["suite"] = str(self.suite) if self.suite else None
        d["limits"] = asdict(self.limits)
        d["retry"] = asdict(RetryPolicy.from_env())
        return d


def select_worlds(cfg: RunConfig) -> list[WorldRef]:
    from benchmark.run.roles import parse_reviewers

    cfg.reviewers = parse_reviewers(cfg.reviewers)  # one model per role; names the roles when the count is wrong
    from benchmark.suite.campaign import campaign_suite

    # a pattern that matches nothing (a typo) is named, with the nearest ids; an empty selection says why
    return campaign_suite(load_suite(), cfg.suite).select_checked(cfg.worlds, cfg.tracks, cfg.levels)


def preflight(refs: list[WorldRef]) -> None:
    """Stop before the first world when a tool the selection needs is missing: without it every world would fail
    (or, worse, score), so one sentence now beats a campaign of errors."""
    path = os.pathsep.join([os.environ.get("PATH", ""), str(Path(sys.executable).parent)])
    needed: dict[str, list[str]] = {"bwrap": ["the sandbox"]}
    for ref in refs:
        for tool in ref.track.tools:
            needed.setdefault(tool, []).append(f"track {ref.world.track}")
    missing = [t for t in needed if not shutil.which(t, path=path)]
    if missing:
        what = ", ".join(f"{t} (needed by {sorted(set(needed[t]))[0]})" for t in missing)
        raise BenchmarkError(f"{what} {'is' if len(missing) == 1 else 'are'} not installed or not on PATH; "
                             "run `bash scripts/setup.sh` (it installs bubblewrap, samtools, bedtools and macs3) and retry")


def run_one(ref: WorldRef, replicate: int, cfg: RunConfig, store: RunStore, slot: int) -> ResultRecord:
    """Run, grade and record one (world, replicate). Never raises for what the model or sandbox does: a fault is
    recorded as an error row without a score (ERROR_STATUSES)."""
    if ref.world.level == Level.L3:
        return run_one_l3(ref, replicate, cfg, store, slot)
    from graders import capped

    validators = capped.validator_modules(ref)
    if validators:  # this thread's grading worker starts (and imports them) beside the episode, not after it; a
        capped.prestart(validators)  # world with no product check never needs one
    seed = cfg.seed + replicate
    budget = _budget(Level(ref.world.level), cfg)
    key = result_key(ref.id, replicate)
    t0, started_at = time.monotonic(), utc_now()
    messages: list = []
    calls, cells, violations, outputs = [], [], [], []
    collect_log: list[str] = []
    collect_summary: dict = {}
    report_raw, status, error, refusal = None, "sandbox_error", None, None
    world_dir = None
    try:
        world_dir = ensure_built(ref)
        with DeferredSandbox(Sandbox(world_dir, cfg.limits, slot=slot, label=ref.id), eager=not is_offline(cfg.model)) as sb:
            ep = run_episode(ref, cfg.model, sb, budget, seed=seed, metadata=ref.call_context())
            messages, calls, cells = ep.messages, ep.calls, ep.cells
            report_raw, status, error, refusal = ep.report_raw, ep.status, ep.error, ep.refusal
            outputs = sb.collect(store.artifacts / key)
            violations = list(sb.violations)
            collect_log, collect_summary = list(sb.collect_log), dict(sb.collect_summary)
    except LockMismatch as exc:  # the world's files changed under the run: not the sandbox's fault
        status, error = "harness_error", str(exc)
    except (BenchmarkError, RegistryError) as exc:
        status, error = "sandbox_error", str(exc)
    except Exception as exc:  # noqa: BLE001 - the harness failed on this world; record it, keep the campaign going
        status, error = "harness_error", _describe(exc)
    traj = Trajectory(world_id=ref.id, model=cfg.model, replicate=replicate, seed=seed, harness_version=HARNESS_VERSION,
                      messages=messages, calls=calls, cells=cells, violations=violations, report_raw=report_raw,
                      outputs=outputs, status=status, error=error, wall_s=round(time.monotonic() - t0, 3),
                      step_budget=budget, collect_log=collect_log, collect_summary=collect_summary)
    traj.audit = audit_cells(cells)
    g = None
    if status not in ERROR_STATUSES:
        try:
            g = grade(ref, read_golden(ref).values, report_raw, [c.code + "\n" + c.stdout for c in cells],
                      products=store.artifacts / key, inputs=world_dir)
        except Exception as exc:  # noqa: BLE001 - e.g. RecursionError on a deeply nested report: a fault, not a score
            status, error, g = "harness_error", f"grading failed: {_describe(exc)}", None
    if status == "graded" and g is not None and g.status == "NONCOMPLIANT":
        status = "noncompliant"
    traj.status, traj.error = status, error
    rel = store.save_trajectory(traj)
    agent = _usage(calls, cfg.model)
    rec = ResultRecord(
        world_id=ref.id, track=ref.world.track, level=str(ref.world.level), family=ref.world.family,
        world_class=ref.world.world_class, model=cfg.model, replicate=replicate, seed=seed, status=status,
        score=g.score if g is not None else None, grade=g, error=error, tokens_in=agent.tokens_in, tokens_out=agent.tokens_out,
        calls=agent.calls, usage_estimated_calls=agent.estimated_calls, failed_calls=len(calls) - agent.calls, retries=sum(len(c.retries) for c in calls),
        code_cells=len(cells), wall_s=traj.wall_s, violations=[v.kind for v in violations],
        audit_flags=sorted({f.kind for f in traj.audit}), trajectory=rel, harness_version=HARNESS_VERSION,
        run_id=store.run_id(), refusal=refusal, started_at=started_at, finished_at=utc_now(),
    )
    store.append(rec)
    return rec


def utc_now(offset_s: float = 0.0) -> str:
    """The UTC time (plus `offset_s`), ISO 8601 to the millisecond: when a row's episode started and ended."""
    from datetime import timedelta

    return (datetime.now(timezone.utc) + timedelta(seconds=offset_s)).isoformat(timespec="milliseconds")


def _budget(level: Level, cfg: RunConfig) -> int:
    return STEP_BUDGET[level] if cfg.max_steps is None else max(1, min(STEP_BUDGET[level], cfg.max_steps))


def _describe(exc: BaseException) -> str:
    """Exception type, message and the innermost frame of harness code, in one line (the trajectory keeps it)."""
    msg = str(exc).splitlines()[0][:300] if str(exc) else ""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "site-packages" not in f.filename]
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {msg}{where}"


def fault_record(ref: WorldRef, replicate: int, cfg: RunConfig, store: RunStore, exc: BaseException,
                 wall_s: float = 0.0) -> ResultRecord:
    """The row the error boundary writes when run_one itself raised: status harness_error, no score."""
    seed = cfg.seed + replicate
    level = Level(ref.world.level)
    error = _describe(exc)
    traj = Trajectory(world_id=ref.id, model=cfg.model, replicate=replicate, seed=seed, harness_version=HARNESS_VERSION,
                      messages=[], status="harness_error", error=error, wall_s=round(wall_s, 3), step_budget=STEP_BUDGET[level])
    rel = store.save_trajectory(traj)
    rec = ResultRecord(
        world_id=ref.id, track=ref.world.track, level=str(ref.world.level), family=ref.world.family,
        world_class=ref.world.world_class, model=cfg.model, replicate=replicate, seed=seed, status="harness_error",
        score=None, grade=None, error=error, tokens_in=0, tokens_out=0, calls=0, failed_calls=0, retries=0, code_cells=0,
        wall_s=traj.wall_s, violations=[], audit_flags=[], trajectory=rel, harness_version=HARNESS_VERSION,
        run_id=store.run_id(), started_at=utc_now(-wall_s), finished_at=utc_now())
    store.append(rec)
    return rec


def run_guarded(ref: WorldRef, replicate: int, cfg: RunConfig, store: RunStore, slot: int) -> ResultRecord:
    """The per-world error boundary: whatever run_one raises (a RecursionError from a deeply nested report, a bad
    trajectory, a grader crash) becomes a harness_error row and the campaign moves on; --resume retries it."""
    from benchmark.run.journal import episode_attempt

    t0 = time.monotonic()
    # every paid request of this attempt is journaled as it is sent and returns (benchmark.run.journal)
    with episode_attempt(result_key(ref.id, replicate), store.journal.write if cfg.paid else None):
        try:
            return run_one(ref, replicate, cfg, store, slot)
        except Exception as exc:  # noqa: BLE001 - see docstring
            return fault_record(ref, replicate, cfg, store, exc, time.monotonic() - t0)


def failure_line(records: list[ResultRecord], replicates: int = 1) -> str | None:
    """'3 of 38 worlds failed (model_error 3); rerun with --resume to retry them', or None when nothing failed."""
    from collections import Counter

    bad = Counter(r.status for r in records if r.status in ERROR_STATUSES)
    if not bad:
        return None
    unit = "worlds" if replicates == 1 else "world replicates"
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(bad.items()))
    return f"{sum(bad.values())} of {len(records)} {unit} failed ({kinds}); rerun with --resume to retry them"


def execute(cfg: RunConfig, on_progress=None) -> list[ResultRecord]:
    from benchmark.run.progress import progress

    if cfg.replicates < 1 or cfg.concurrency < 1:
        raise BenchmarkError("--replicates and --concurrency must be at least 1")
    if cfg.executor not in ("local", "ray"):
        raise BenchmarkError(f"--executor must be local or ray, not {cfg.executor!r}")
    if cfg.address and cfg.executor != "ray":
        raise BenchmarkError("--address names a Ray cluster: pass it with --executor ray")
    if not is_offline(cfg.model) and "/" not in cfg.model:
        raise BenchmarkError(f"model '{cfg.model}' is not a litellm model string (provider/name), e.g. local/smollm2 or anthropic/claude-...")
    refs = select_worlds(cfg)
    preflight(refs)
    importing = None
    if cfg.paid:
        import threading  # litellm's import (~5 s) overlaps the lock checks; episodes start once it is done, so
        # their wall_s (and started_at) is the episode's, not the process's one-off import

        importing = threading.Thread(target=_import_litellm, name="import-litellm", daemon=True)
        importing.start()
    if cfg.executor == "local":  # a Ray worker seeds its own node (ray_executor.run_remote_episode)
        seed_numba(refs)
    build_missing(refs)
    with progress("verifying locks", len(refs)) as step:
        for ref in refs:
            step(ref.id)
            ensure_built(ref)
    remote = None
    if cfg.executor == "ray":  # joined before the run folder is touched: a wrong address writes nothing
        from benchmark.run.ray_executor import RayExecutor

        remote = RayExecutor.connect(cfg)
    store = RunStore(cfg.out)
    try:
        store.init({**cfg.describe(), "run_id": cfg.out.resolve().name, "harness_version": HARNESS_VERSION, "tool_versions": tool_versions(),
                    "python": sys.version.split()[0], "platform": platform.platform(),
                    "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}, cfg.resume, force=cfg.force_config)
        done = store.done_keys()
        todo = [(r, k) for r in refs for k in range(cfg.replicates) if result_key(r.id, k) not in done]
        if cfg.concurrency > 1:
            todo = longest_first(todo)
        todo = with_probes(todo, cfg.concurrency, lambda rk: str(rk[0].world.level))
        from benchmark.models import set_workers

        set_workers(min(cfg.concurrency, max(1, len(todo))))  # one world left: its model calls get every core
        if todo and remote is None:
            from sandbox.pool import POOL

            POOL.expect(len(todo))  # no blank is built beyond the last world's sandbox
            if len(todo) > 1:  # the first world's sandbox starts while the run says what to expect. Not for a
                # one-world run: its blank imports the whole track's package list (scanpy, sklearn, ... for scrna),
                # a cold start only what the world's cells use (scrna.L1.integrity.clean: 3.2 -> 2.3 CPU-s, no
                # slower), and there is no next world for a blank to pay off on
                POOL.prewarm(cfg.limits, world_cache(todo[0][0]), todo[0][0].id)
        finished = _finished_walls(cfg, store)  # results.jsonl read once for the expected line and the pace
        print(expected(cfg, todo, finished), file=sys.stderr, flush=True)
        pace = run_pace(cfg, todo, finished)
        if importing is not None:
            importing.join()
        slots: queue.Queue[int] = queue.Queue()
        for s in range(cfg.concurrency):
            slots.put(s)

        in_flight: dict[str, None] = {}  # the episodes running now, in start order (the heartbeat names them)

        def work(ref: WorldRef, rep: int) -> ResultRecord:
            slot = slots.get()
            name = f"{ref.id} r{rep}"
            in_flight[name] = None
            try:
                return run_guarded(ref, rep, cfg, store, slot)
            finally:
                in_flight.pop(name, None)
                slots.put(slot)

        if remote is not None:  # each episode on a Ray worker; recorded here, in completion order
            with progress(f"running {cfg.model} on Ray", len(todo), finished=True, pace=pace) as step:
                remote.run(todo, cfg, store, step)
        else:
            with progress(f"running {cfg.model}", len(todo), finished=True, pace=pace,
                          running=lambda: list(in_flight.copy())) as step, \
                    ThreadPoolExecutor(cfg.concurrency) as pool:
                futures = {pool.submit(work, r, k): (r, k) for r, k in todo}
                for fut in as_completed(futures):
                    r, k = futures[fut]
                    step(f"{r.id} r{k}", fut.result().wall_s)
        wanted = {result_key(r.id, k) for r in refs for k in range(cfg.replicates)}
        return [rec for rec in store.results() if result_key(rec.world_id, rec.replicate) in wanted]
    finally:
        if remote is None:
            from sandbox.pool import POOL

            POOL.expect(None)  # the pool's next user (a test, a second run in this process) sets its own
        wait_all()  # sandboxes of episodes that ran no cell are torn down behind them: none outlives the run
        store.close()
        if remote is not None:
            remote.close()


def seed_numba(refs: list[WorldRef], say=lambda m: print(m, file=sys.stderr, flush=True)) -> None:
    """Build this machine's numba seed first when it has none and an L1/L2 world's track uses scanpy (L3 dossiers
    run no track package): sandbox.numba_seed.ensure_for."""
    from sandbox.numba_seed import ensure_for

    ensure_for({r.world.track for r in refs if r.world.level != Level.L3}, say=say)


def build_missing(refs: list[WorldRef]) -> None:
    """Build the worlds a fresh clone's cache lacks, one spawned process per core (default_jobs): 251 worlds take
    ~110 CPU-s to build, which one process spent serially before the first world ran. Each build is verified against
    its lock afterwards (ensure_built in the caller), and a failure raises here as it would there."""
    from concurrent.futures import as_completed

    from benchmark.run.progress import progress

    missing = [r for r in refs if not world_cache(r).exists()]
    jobs = min(default_jobs(), len(missing))
    if jobs < 2:
        return
    with progress("building worlds", len(missing), finished=True) as step, pinned_pool(jobs) as pool:
        futures = {pool.submit(ensure_built, r): r for r in missing}
        for f in as_completed(futures):
            step(futures[f].id)
            f.result()


def _import_litellm() -> None:
    from benchmark.models import warm_hosted

    try:
        warm_hosted()
    except Exception:  # noqa: BLE001 - only warmed here; a failure shows where the first call imports it
        pass


def longest_first(todo: list[tuple[WorldRef, int]]) -> list[tuple[WorldRef, int]]:
    """Worlds in the order that ends a parallel run soonest: the longest first (L3 dossiers, the largest first; then
    L2, then L1), so the run does not end with one long dossier on one core while the others idle."""
    rank = {"L3": 0, "L2": 1, "L1": 2}

    def size(ref: WorldRef) -> int:  # the files were built and verified against the lock before the run
        d = world_cache(ref)
        return -sum(p.stat().st_size for p in d.rglob("*") if p.is_file()) if ref.world.level == Level.L3 else 0

    return sorted(todo, key=lambda rk: (rank.get(str(rk[0].world.level), 3), size(rk[0]), rk[0].id, rk[1]))


def with_probes(todo: list, slots: int, level: Callable[[Any], str]) -> list:
    """`todo` with the first item of each level not among the first `slots` moved right after them: every level's
    wall is then measured early, so the time left is right from early in the run (benchmark.run.progress.Pace),
    at the cost of one short world started before the last long ones."""
    head, rest = list(todo[:slots]), list(todo[slots:])
    seen = {level(x) for x in head}
    probes = []
    for x in rest:
        if level(x) not in seen:
            seen.add(level(x))
            probes.append(x)
    return head + probes + [x for x in rest if not any(x is p for p in probes)]


def _finished_walls(cfg: RunConfig, store: RunStore) -> dict[str, list[float]]:
    """Wall seconds of this run's finished worlds, by level (a resumed run's own pace)."""
    finished: dict[str, list[float]] = {}
    for rec in store.results():
        if rec.model == cfg.model and rec.status not in ERROR_STATUSES:
            finished.setdefault(rec.level, []).append(rec.wall_s)
    return finished


def expected(cfg: RunConfig, todo: list[tuple[WorldRef, int]], finished: dict[str, list[float]]) -> str:
    """The line a run prints before its first world: how long the rest should take (benchmark.run.estimate)."""
    from benchmark.run.estimate import expected_line

    return expected_line(cfg.model, [str(r.world.level) for r, _ in todo], max(1, min(cfg.concurrency, len(todo))),
                         finished)


def run_pace(cfg: RunConfig, todo: list[tuple[WorldRef, int]], finished: dict[str, list[float]]):
    """The progress line's weights and expected duration, so its time left is right from the first world."""
    from benchmark.run.estimate import run_pace as pace

    return pace(cfg.model, {f"{r.id} r{k}": str(r.world.level) for r, k in todo},
                max(1, min(cfg.concurrency, len(todo))), finished)


def summary_table(records: list[ResultRecord]):
    from collections import defaultdict

    from rich.table import Table

    from benchmark.errors import safe_markup

    groups: dict[tuple[str, str], list[ResultRecord]] = defaultdict(list)
    for r in records:
        groups[(r.track, r.level)].append(r)
    rows = []
    for (track, level), rs in sorted(groups.items()):
        scores = [r.score for r in rs if r.score is not None]
        mean = f"{sum(scores) / len(scores):.1f}" if scores else "-"
        rows.append([safe_markup(track), level, str(len(rs)), mean,
                     str(sum(r.status == "noncompliant" for r in rs)),
                     str(sum(r.status in ERROR_STATUSES for r in rs)),
                     f"{sum(r.tokens_in for r in rs)}/{sum(r.tokens_out for r in rs)}",
                     str(sum(r.calls for r in rs)), str(sum(r.code_cells for r in rs))])
    # fits 80 columns with no track name or number cut (at 80 'calorimetry' was 'calor…'): light rules, short
    # headers, each column as wide as its widest value (the caption spells the short headers out)
    t = Table(title=f"{safe_markup(records[0].model) if records else ''}: {len(records)} results",
              box=None, pad_edge=False, padding=(0, 1),
              caption="mean: mean score · noncompl.: noncompliant · tok: tokens")
    cols = ("track", "level", "worlds", "mean", "noncompl.", "errors", "tok in/out", "calls", "cells")
    for i, col in enumerate(cols):
        widest = max([len(col), *(len(row[i]) for row in rows)])
        t.add_column(col, justify="left" if col in ("track", "level") else "right", min_width=widest, no_wrap=True)
    for row in rows:
        t.add_row(*row)
    return t


def _usage(calls, model: str) -> RoleUsage:
    ok = [c for c in calls if c.ok]
    return RoleUsage(tokens_in=sum(c.tokens_in for c in ok), tokens_out=sum(c.tokens_out for c in ok), calls=len(ok),
                     model=model, estimated_calls=sum(c.usage_estimated for c in ok))


def run_one_l3(ref: WorldRef, replicate: int, cfg: RunConfig, store: RunStore, slot: int) -> ResultRecord:
    """The hypothesis protocol for one dossier (benchmark.run.l3); reviewer and judge usage kept apart from the agent's."""
    from benchmark.score.aggregate import prior_return_of
    from benchmark.run.l3 import L3Record, L3Roles, dossier_text, recorded_score, run_protocol

    seed = cfg.seed + replicate
    budget = STEP_BUDGET[Level.L3]
    key = result_key(ref.id, replicate)
    t0, started_at = time.monotonic(), utc_now()
    violations, outputs = [], []
    collect_log: list[str] = []
    collect_summary: dict = {}
    try:
        world_dir = ensure_built(ref)
        dossier = dossier_text(world_dir, ref.world.public_files)  # whole files: reviewers and judge read every row
        with DeferredSandbox(Sandbox(world_dir, cfg.limits, slot=slot, label=ref.id), eager=not is_offline(cfg.model)) as sb:
            out = run_protocol(ref, cfg.model, sb, dossier, L3Roles(tuple(cfg.reviewers), cfg.judge), budget, seed)
            outputs = sb.collect(store.artifacts / key)
            violations = list(sb.violations)
            collect_log, collect_summary = list(sb.collect_log), dict(sb.collect_summary)
    except (BenchmarkError, RegistryError) as exc:
        from benchmark.run.l3 import L3Outcome

        out = L3Outcome(L3Record(eligible=False, eligibility_reason=f"not run: {exc}"), status="sandbox_error", error=str(exc))
    refusal = None
    if out.status == "refused":
        refusal = "content_filter"
    elif out.status in ("noncompliant", "budget_exhausted") and out.report_raw:
        pattern = detect_refusal(out.report_raw)
        if pattern is not None:  # the dossier answer declines the task: a refusal, not a zero (seed 001 App. B)
            out.status, out.error, refusal = "refused", f"the reply declines the task ({pattern})", f"reply_text: {pattern}"
    fault = out.status in ERROR_STATUSES
    rec3 = out.record
    traj = Trajectory(world_id=ref.id, model=cfg.model, replicate=replicate, seed=seed, harness_version=HARNESS_VERSION,
                      messages=out.messages, calls=out.agent_calls, cells=out.cells, violations=violations,
                      report_raw=out.report_raw, outputs=outputs, status=out.status, error=out.error,
                      wall_s=round(time.monotonic() - t0, 3), step_budget=budget, l3=rec3.model_dump(),
                      collect_log=collect_log, collect_summary=collect_summary)
    traj.audit = audit_cells(out.cells)
    rel = store.save_trajectory(traj)
    role_usage = {}
    # one model in every reviewer role (the default) is recorded by its name, so a rate card can price it
    reviewers = cfg.reviewers[0] if len(set(cfg.reviewers)) == 1 else ",".join(cfg.reviewers)
    for role, model in (("reviewer", reviewers), ("judge", cfg.judge)):
        calls = [c for c in rec3.role_calls if c.role == role]
        if calls:
            role_usage[role] = _usage(calls, model)
    agent = _usage(out.agent_calls, cfg.model)
    rec = ResultRecord(
        world_id=ref.id, track=ref.world.track, level="L3", family=ref.world.family, world_class=ref.world.world_class,
        model=cfg.model, replicate=replicate, seed=seed, status=out.status,
        score=recorded_score(out.status, rec3.score_native, rec3.eligible),
        grade=None,
        error=out.error if fault else None,
        tokens_in=agent.tokens_in, tokens_out=agent.tokens_out, calls=agent.calls,
        usage_estimated_calls=agent.estimated_calls, failed_calls=sum(not c.ok for c in out.agent_calls), retries=sum(len(c.retries) for c in out.agent_calls),
        code_cells=len(out.cells), wall_s=traj.wall_s, violations=[v.kind for v in violations],
        audit_flags=sorted({f.kind for f in traj.audit}), trajectory=rel, harness_version=HARNESS_VERSION,
        run_id=store.run_id(), refusal=refusal, role_usage=role_usage, started_at=started_at, finished_at=utc_now(), eligible=rec3.eligible, eligibility_reason=rec3.eligibility_reason,
        commitment=rec3.commitment if rec3.commitment in ("commit", "abstain") else None,
        l3_axes={k: v for k, v in (rec3.axes or {}).items()} or None, hyp_drift=rec3.hyp_drift,
        l3_rounds=[{"concessions": r.concessions, "rejection_fraction": r.rejection_fraction} for r in rec3.rounds] or None,
        prior_return=None if ref.world.world_class == "real" else prior_return_of(
            (rec3.prior or {}).get("expectation"), rec3.first_hypothesis, rec3.final_hypothesis),
    )
    store.append(rec)
    return rec
