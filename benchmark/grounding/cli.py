"""`python -m benchmark grounding ...`: items, build, run, judge, metrics, stress-graders.

Wired into benchmark/cli.py by `add_grounding_parser(sub)`; every verb returns 0 or raises BenchmarkError (one
clear sentence).
"""
from __future__ import annotations

import json
from pathlib import Path

from benchmark.errors import BenchmarkError
from graders.registry import RegistryError


def cmd_items(args) -> int:
    from benchmark.grounding.build import ensure_built, read_build, version_dir
    from benchmark.grounding.items import CONDITIONS, select

    items = select(args.items, args.tracks)
    if args.anonymise:
        items = [i for i in items if i.anonymisable]
    if args.build:
        from benchmark.run.progress import progress

        with progress("building and verifying versions", len(items)) as step:
            ensure_built(items, args.anonymise, on_step=step)
    rows = []
    for i in items:
        rec = read_build(i, args.anonymise)
        versions = {}
        for c in CONDITIONS:
            d = version_dir(i.id, c, args.anonymise)
            files = sorted(str(p) for p in d.rglob("*") if p.is_file()) if c != "nodata" and d.exists() else []
            versions[c] = {"dir": str(d), "files": files, "supported": i.supported(c),
                           "verified": bool(rec and c in rec.get("versions", {}))}
        rows.append({"id": i.id, "track": i.track, "family": i.family, "question": i.question, "options": i.options, "key": i.key,
                     "flip_answer": i.flip_answer, "statistic": i.statistic, "withdrawal": i.withdrawal,
                     "flip": i.flip, "dataset": i.dataset, "anonymised": args.anonymise, "built": rec is not None,
                     "versions": versions})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{len(rows)} grounding items")
    for col in ("id", "track", "family", "key", "flip", "withdrawal", "flip op", "built"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["id"], r["track"], r["family"], r["key"], r["flip_answer"], r["withdrawal"]["op"], r["flip"]["op"],
                  "yes" if r["built"] else "no")
    Console().print(t)
    return 0


def cmd_build(args) -> int:
    from benchmark.grounding.build import build_item, ensure_built
    from benchmark.grounding.items import select
    from benchmark.run.progress import progress

    items = select(args.items, args.tracks)
    if args.anonymise:
        items = [i for i in items if i.anonymisable]
    with progress("building and verifying versions", len(items)) as step:
        if args.force:
            for i in items:
                step(i.id)
                build_item(i, args.anonymise)
        else:
            ensure_built(items, args.anonymise, on_step=step)
    print(f"{len(items)} items x 4 versions built and verified from disk{' (anonymised)' if args.anonymise else ''}")
    return 0


def cmd_run(args) -> int:
    from benchmark.grounding.items import CONDITIONS
    from benchmark.grounding.metrics import agent_metrics, render_markdown
    from benchmark.grounding.run import GroundingConfig, execute

    out = Path(args.out) if args.out else Path("runs") / ("grounding_" + args.model.replace("/", "_"))
    cfg = GroundingConfig(model=args.model, out=out, items=args.items, tracks=args.tracks, conditions=args.conditions or list(CONDITIONS),
                          replicates=args.replicates, concurrency=args.concurrency, resume=args.resume, seed=args.seed,
                          anonymise=args.anonymise, insufficient_option=args.insufficient_option, budget=args.budget)
    records = execute(cfg)
    from benchmark.grounding.metrics import label

    s = {"runs": [{"label": label(cfg.describe()), **agent_metrics(records, args.bootstrap)}], "evaluators": {}}
    print(render_markdown(s).split("Evaluator stress test")[0].rstrip())
    print(f"results: {out / 'grounding.jsonl'}")
    return 0


def cmd_judge(args) -> int:
    from benchmark.grounding.judge import judge_run
    from benchmark.run.progress import progress

    n = 0
    for d in args.run_dirs:
        with progress(f"judging {d} with {args.judge}", 0) as step:
            n += len(judge_run(Path(d), args.judge, tuple(args.prompts), args.conditions, on_step=step, items=args.items,
                                   tracks=args.tracks))
    print(f"{n} new judgements by {args.judge}; see `python -m benchmark grounding metrics {' '.join(args.run_dirs)}`")
    return 0


def cmd_metrics(args) -> int:
    from benchmark.grounding.metrics import render_markdown, summarise, to_json

    s = summarise([Path(d) for d in args.run_dirs], args.bootstrap, args.seed, graders=args.graders)
    print(to_json(s) if args.json else render_markdown(s))
    return 0


def cmd_stress_graders(args) -> int:
    from benchmark.grounding.metrics import grader_stress, render_graders_md, to_json

    g = grader_stress()
    print(to_json(g) if args.json else "\n".join(render_graders_md(g)))
    return 0


def add_grounding_parser(sub) -> None:
    g = sub.add_parser("grounding", help="evidence grounding: verified counterfactual items, paired runs, EGA")
    gs = g.add_subparsers(dest="gverb", required=True)

    sp = gs.add_parser("items", help="list items with their versions' file paths, key and the flip's supported answer")
    sp.add_argument("--items", nargs="+", help="item ids or glob patterns")
    sp.add_argument("--tracks", nargs="+", help="only the items of these hosting tracks")
    sp.add_argument("--anonymise", action="store_true", help="the anonymised variants (items of the hosts' anon_families)")
    sp.add_argument("--build", action="store_true", help="build and verify missing versions first")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(fn=cmd_items)

    sp = gs.add_parser("build", help="build every version and verify it from disk (refuses failing versions)")
    sp.add_argument("--items", nargs="+", help="item ids or glob patterns")
    sp.add_argument("--tracks", nargs="+", help="only the items of these hosting tracks")
    sp.add_argument("--anonymise", action="store_true")
    sp.add_argument("--force", action="store_true", help="rebuild even when the cache is current")
    sp.set_defaults(fn=cmd_build)

    sp = gs.add_parser("run", help="run a model on every version of every item in the sandbox and record")
    sp.add_argument("--model", default="local/smollm2",
                    help="litellm model string; offline: local/smollm2, scripted/oracle|recall|first")
    sp.add_argument("--items", nargs="+", help="item ids or glob patterns")
    sp.add_argument("--tracks", nargs="+", help="only the items of these hosting tracks")
    sp.add_argument("--conditions", nargs="+", choices=["original", "null", "withdrawal", "flip", "nodata"])
    sp.add_argument("--replicates", type=int, default=1)
    sp.add_argument("--concurrency", type=int, default=1)
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--budget", type=int, default=12, help="agent steps per run (default 12)")
    sp.add_argument("--anonymise", action="store_true", help="replace names (e.g. gene symbols) by opaque ids (seed 000 App. G)")
    sp.add_argument("--insufficient-option", action="store_true",
                    help="add the option 'The provided data are insufficient to determine the answer' (App. H)")
    sp.add_argument("--bootstrap", type=int, default=1000)
    sp.add_argument("--out", help="run directory (default runs/grounding_<model>)")
    sp.add_argument("--resume", action="store_true", help="continue a killed run without redoing finished runs")
    sp.set_defaults(fn=cmd_run)

    sp = gs.add_parser("judge", help="grade recorded runs with an LLM judge (standard and grounding prompts)")
    sp.add_argument("run_dirs", nargs="+")
    sp.add_argument("--judge", default="local/smollm2", help="litellm model string of the judge")
    sp.add_argument("--prompts", nargs="+", default=["standard", "grounding"], choices=["standard", "grounding"])
    sp.add_argument("--conditions", nargs="+", choices=["original", "null", "withdrawal", "flip"])
    sp.add_argument("--items", nargs="+", help="only these item ids or glob patterns")
    sp.add_argument("--tracks", nargs="+", help="only the items of these hosting tracks")
    sp.set_defaults(fn=cmd_judge)

    sp = gs.add_parser("metrics", help="agent metrics and the evaluator stress test over run folders")
    sp.add_argument("run_dirs", nargs="+")
    sp.add_argument("--bootstrap", type=int, default=1000)
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--graders", action="store_true", help="also stress-test our L1/L2 graders on paired reports")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(fn=cmd_metrics)

    sp = gs.add_parser("stress-graders", help="flip AUC, blind spot and null sensitivity of our L1/L2 graders")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(fn=cmd_stress_graders)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (`python -m benchmark.grounding.cli ...`) until benchmark/cli.py wires the verb."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="python -m benchmark")
    add_grounding_parser(p.add_subparsers(dest="verb", required=True))
    args = p.parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except (BenchmarkError, RegistryError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
