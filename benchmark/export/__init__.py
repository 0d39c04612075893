"""`export`: write recorded runs in other tools' formats.

    python -m benchmark export inspect RUN [RUN ...] --out DIR [--ledgers LEDGER ...]

`inspect` writes Inspect AI eval logs (`.eval`), one per (model, level); see benchmark/export/inspect_log.py. The
parser is built here without importing inspect_ai (slow to import): the converter loads only when the command runs.
A reader of finished runs (run/ store and records, oversight/ verifications) in another tool's format: its own
package beside score/ and oversight/, as it neither scores nor oversees.
"""
from __future__ import annotations

from pathlib import Path


def cmd_export_inspect(args) -> int:
    from benchmark.export.inspect_log import export_runs

    ledgers = None
    if args.ledgers is not None:
        from benchmark.oversight.adjudicate import load_ledgers, resolve_ledger_args

        ledgers = load_ledgers(resolve_ledger_args(args.ledgers))
    written = export_runs([Path(p) for p in args.runs], Path(args.out), ledgers)
    for w in written:
        print(f"wrote {w.path} ({w.samples} samples, {w.model} {w.level}, mean {w.mean_text})")
    return 0


def add_export_parser(sub) -> None:
    sp = sub.add_parser("export", help="write recorded runs in another tool's format (Inspect AI eval logs)")
    esub = sp.add_subparsers(dest="export_format", required=True)
    ip = esub.add_parser("inspect", help="Inspect AI .eval logs, one per (model, level), one sample per world x replicate")
    ip.add_argument("runs", nargs="+", metavar="RUN", help="run directories (the --out folders of `run`)")
    ip.add_argument("--out", required=True, help="folder for the .eval logs (created; `inspect view --log-dir DIR`)")
    ip.add_argument("--ledgers", nargs="+", help="ledger files or folders whose rulings apply to the exported scores, "
                                                 "as on the leaderboard (default: none; the records' own scores)")
    ip.set_defaults(fn=cmd_export_inspect)
