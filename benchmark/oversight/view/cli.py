"""`python -m benchmark view RUN... [--ledgers DIR] [--port P] [--host H] [--token T]`: serve the workbench.
Building the parser imports nothing heavy; Flask loads when the command runs."""
from __future__ import annotations

from pathlib import Path

from benchmark.errors import BenchmarkError

DEFAULT_PORT = 8765


def cmd_view(args) -> int:
    from werkzeug.serving import make_server

    from benchmark.oversight.ledger import LEDGER_ROOT
    from benchmark.oversight.view.app import create_app
    from benchmark.oversight.view.security import is_loopback
    from benchmark.oversight.view.workbench import Workbench

    if not is_loopback(args.host) and not args.token:
        raise BenchmarkError(f"--host {args.host} is reachable from other machines; pass --token T (a long random "
                             "string) so that every request must carry it, or keep the default --host 127.0.0.1")
    if args.token is not None and len(args.token) < 16:
        raise BenchmarkError("--token must be at least 16 characters (e.g. `python -c 'import secrets; "
                             "print(secrets.token_urlsafe(24))'`)")
    wb = Workbench([Path(r) for r in args.runs], Path(args.ledgers) if args.ledgers else LEDGER_ROOT)
    wb.snapshot()  # a broken run or ledger is reported now, in one sentence, not on the first page load
    app = create_app(wb, args.token, args.host)
    try:
        server = make_server(args.host, args.port, app, threaded=True)
    except OSError as exc:
        raise BenchmarkError(f"cannot listen on {args.host}:{args.port} ({exc.strerror or exc}); choose another --port") from None
    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{host}:{server.server_port}/" + (f"?token={args.token}" if args.token else "")
    print(f"serving the workbench for {len(wb.runs)} run(s), ledgers in {wb.ledger_dir}, at {url} (Ctrl-C stops it)",
          flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


def add_view_parser(sub) -> None:
    sp = sub.add_parser("view", help="the adjudicator's web workbench: leaderboard, results, pending discrepancies, rulings")
    sp.add_argument("runs", nargs="+", metavar="RUN", help="run folders (the --out folders of `run`)")
    sp.add_argument("--ledgers", metavar="DIR", help="ledger folder read and written (default ledgers/)")
    sp.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks a free one)")
    sp.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; any other needs --token)")
    sp.add_argument("--token", help="access token every request must carry (?token=T once, then a cookie)")
    sp.set_defaults(fn=cmd_view)

