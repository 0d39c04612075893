"""`python -m benchmark pivotal ...`: run cases against a model, score runs, build or validate case files."""
from __future__ import annotations

import json
from pathlib import Path


def cmd_pivotal_run(args) -> int:
    from benchmark.pivotal.cases import load_cases
    from benchmark.pivotal.run import ORDERS, PivotalConfig, execute
    from benchmark.pivotal.score import render_markdown, score
    from benchmark.run.progress import progress

    cases_path = Path(args.cases) if args.cases else None
    out = Path(args.out) if args.out else Path("runs") / f"pivotal_{args.model.replace('/', '_')}"
    cfg = PivotalConfig(model=args.model, out=out, conditions=args.conditions, efforts=args.effort,
                        reconsider=args.reconsider, seed=args.seed, resume=args.resume, concurrency=args.concurrency,
                        max_tokens=args.max_tokens, case_ids=args.case_ids, limit=args.limit)
    if cases_path:
        cfg.cases = cases_path
    n = len(load_cases(cfg.cases))
    n = min(n, args.limit) if args.limit is not None else n
    n = len(args.case_ids) if args.case_ids else n
    with progress(f"pivotal {args.model}", n * len(ORDERS) * len(cfg.conditions) * len(cfg.efforts)) as step:
        records = execute(cfg, on_step=step)
    print(render_markdown(score(records, args.bootstrap, args.bootstrap_seed)).split("### ")[0].rstrip())
    print(f"records: {out / 'pivotal.jsonl'}")
    return 0


def cmd_pivotal_score(args) -> int:
    from benchmark.pivotal.score import load_human, load_records, render_markdown, score

    data = score(load_records([Path(p) for p in args.run_dirs]), args.bootstrap, args.bootstrap_seed,
                 load_human(args.human) if args.human else None)
    if args.json:
        from benchmark.score.aggregate import clean_floats

        print(json.dumps(clean_floats(data), indent=1, sort_keys=True, ensure_ascii=False))
    else:
        print(render_markdown(data))
    return 0


def cmd_pivotal_cases_build(args) -> int:
    from benchmark.pivotal.build import write_cases

    path, n, same = write_cases(Path(args.out) if args.out else None, check=args.check)
    if args.check:
        print(f"{path}: {n} cases, identical to what the builder produces")
    else:
        print(f"wrote {n} cases to {path}" + (" (unchanged)" if same else ""))
    return 0


def cmd_pivotal_cases_validate(args) -> int:
    from collections import Counter

    from benchmark.pivotal.cases import load_cases

    cases = load_cases(args.path)
    kinds = Counter(c.kind for c in cases)
    print(f"{args.path or 'shipped case set'}: {len(cases)} valid cases ({kinds['challenged']} challenged, "
          f"{kinds['control']} control) in {len({c.project for c in cases})} projects")
    return 0


def add_pivotal_parser(sub) -> None:
    from benchmark.pivotal import CONDITIONS, EFFORTS
    from benchmark.pivotal import DRAWS, SEED

    piv = sub.add_parser("pivotal", help="pivotal-choice accuracy (SciΠvot protocol): run, score, build cases")
    psub = piv.add_subparsers(dest="pverb", required=True)

    sp = psub.add_parser("run", help="ask a model every case in both option orders and record its choices")
    sp.add_argument("--model", default="local/smollm2", help="litellm model string; offline: local/smollm2, scripted/oracle|naive|first")
    sp.add_argument("--cases", help="case file (JSONL; default: the shipped set benchmark/pivotal/cases/discern_pivotal_v1.jsonl)")
    sp.add_argument("--conditions", nargs="+", choices=CONDITIONS, default=list(CONDITIONS))
    sp.add_argument("--effort", nargs="+", choices=EFFORTS, default=["default"],
                    help="reasoning-effort settings, passed through litellm where the provider supports them (recorded either way)")
    sp.add_argument("--reconsider", type=int, default=0, help="neutral reconsideration rounds after the initial answer")
    sp.add_argument("--case-ids", nargs="+", help="only these case ids")
    sp.add_argument("--limit", type=int, help="only the first N cases (by id)")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--concurrency", type=int, default=1)
    sp.add_argument("--max-tokens", type=int, default=8192, help="answer budget per call (reasoning tokens included)")
    sp.add_argument("--out", help="run directory (default runs/pivotal_<model>)")
    sp.add_argument("--resume", action="store_true", help="continue a killed run without redoing finished answers")
    sp.add_argument("--bootstrap", type=int, default=DRAWS, help=f"bootstrap draws (default {DRAWS})")
    sp.add_argument("--bootstrap-seed", type=int, default=SEED)
    sp.set_defaults(fn=cmd_pivotal_run)

    sp = psub.add_parser("score", help="accuracy, paired differences and bootstrap intervals of pivotal runs")
    sp.add_argument("run_dirs", nargs="+")
    sp.add_argument("--human", help="human-baseline JSON file (see benchmark/pivotal/README.md)")
    sp.add_argument("--bootstrap", type=int, default=DRAWS)
    sp.add_argument("--bootstrap-seed", type=int, default=SEED)
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(fn=cmd_pivotal_score)

    cases = psub.add_parser("cases", help="build or validate case files")
    csub = cases.add_subparsers(dest="cverb", required=True)
    sp = csub.add_parser("build", help="rebuild the shipped case set from the worlds (deterministic)")
    sp.add_argument("--out", help="output file (default: the shipped case file)")
    sp.add_argument("--check", action="store_true", help="only check that the file matches the builder's output")
    sp.set_defaults(fn=cmd_pivotal_cases_build)
    sp = csub.add_parser("validate", help="validate a case file (errors name the line)")
    sp.add_argument("path", nargs="?")
    sp.set_defaults(fn=cmd_pivotal_cases_validate)
