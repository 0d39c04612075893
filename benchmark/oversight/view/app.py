"""Routes of the workbench: runs (leaderboard and figures) -> track -> family -> world, the pending queue, the
ruling form, and the agent's work products. Pages are server-rendered; agent text is always escaped."""
from __future__ import annotations

import datetime as dt
from collections import defaultdict
from pathlib import Path

from flask import Flask, Response, abort, redirect, render_template, request, send_file

from benchmark.errors import BenchmarkError
from benchmark.oversight.view import security
from benchmark.oversight.view.files import resolve_artifact
from benchmark.oversight.view.workbench import FIGURES, Row, Workbench
from benchmark.oversight.view.world import artifact_url, world_page

TEMPLATES = Path(__file__).resolve().parent / "templates"  # beside this module: works in an editable install
DECISIONS = ("", "grader", "verifier", "value")


def world_url(run_id: str, world_id: str, replicate: int, focus: str | None = None) -> str:
    from urllib.parse import quote

    url = f"/run/{quote(run_id, safe='')}/world/{quote(world_id, safe='')}/r/{int(replicate)}"
    return url + (f"?focus={quote(focus, safe='')}#components" if focus else "")


def _mean(xs):
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def _fmt(v, nd: int = 1) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def create_app(wb: Workbench, token: str | None = None, bind_host: str = "127.0.0.1") -> Flask:
    app = Flask(__name__, template_folder=str(TEMPLATES), static_folder=None)
    app.jinja_env.autoescape = True  # every template, whatever its name: agent text is never markup
    app.jinja_env.filters["fmt"] = _fmt
    csrf = security.install(app, token, bind_host)
    app.jinja_env.globals.update(world_url=world_url, csrf=csrf, artifact_url=artifact_url)
    app.config["WORKBENCH"] = wb

    @app.errorhandler(BenchmarkError)
    def _bench_error(exc: BenchmarkError):
        return render_template("error.html", message=str(exc)), 500

    @app.get("/")
    def runs_page():
        from benchmark.score.leaderboard import table1_rows

        snap = wb.snapshot()
        data = snap.leaderboard
        pending = sum(len(r.pending) for r in snap.rows)
        progress = {run.run_id: (sum(r.verified for r in snap.rows if r.run is run),
                                 sum(1 for r in snap.rows if r.run is run)) for run in wb.runs.values()}
        return render_template("runs.html", data=data, table1=table1_rows(data), figures=FIGURES, runs=wb.runs,
                               pending=pending, progress=progress, ledger_files=wb.ledger_files(), ledger_dir=wb.ledger_dir)

    @app.get("/figure/<name>.png")
    def figure(name: str):
        try:
            png = wb.figure(name)
        except KeyError:
            abort(404)
        return Response(png, mimetype="image/png")

    @app.get("/track/<track>")
    def track_page(track: str):
        snap = wb.snapshot()
        rows = [r for r in snap.rows if r.rec.track == track]
        if not rows:
            abort(404)
        fams: dict[str, dict[str, list[Row]]] = defaultdict(lambda: defaultdict(list))
        for r in rows:
            fams[r.rec.family][r.run.run_id].append(r)
        families = [{"family": f, "level": f.split(".")[1] if "." in f else "",
                     "runs": {rid: {"n": len(rs), "mean": _mean(x.effective for x in rs),
                                    "pending": sum(len(x.pending) for x in rs)} for rid, rs in by_run.items()}}
                    for f, by_run in sorted(fams.items())]
        models = [(s["model"], s["tracks"].get(track)) for s in snap.leaderboard["models"]]
        return render_template("track.html", track=track, families=families, runs=wb.runs, models=models)

    @app.get("/track/<track>/family/<family>")
    def family_page(track: str, family: str):
        snap = wb.snapshot()
        rows = [r for r in snap.rows if r.rec.track == track and r.rec.family == family]
        if not rows:
            abort(404)
        worlds: dict[str, list[Row]] = defaultdict(list)
        for r in rows:
            worlds[r.rec.world_id].append(r)
        table = []
        for wid in sorted(worlds):
            ref = wb.world_ref(wid)
            table.append({"world": wid, "class": worlds[wid][0].rec.world_class, "title": ref.world.title if ref else "",
                          "rows": sorted(worlds[wid], key=lambda r: (r.run.run_id, r.rec.replicate))})
        return render_template("family.html", track=track, family=family, table=table)

    @app.get("/run/<run_id>/world/<world_id>/r/<int:replicate>")
    def world(run_id: str, world_id: str, replicate: int):
        return _world(run_id, world_id, replicate)

    def _world(run_id: str, world_id: str, replicate: int, status: int = 200, error: str | None = None,
               form: dict | None = None, recorded: list | None = None):
        try:
            run = wb.run(run_id)
        except KeyError:
            abort(404)
        page = world_page(wb, run, world_id, replicate)
        if page is None:
            abort(404)
        focus = request.args.get("focus")
        return render_template("world.html", **page, focus=focus, error=error, form=form or {},
                               recorded=recorded or [], decisions=DECISIONS), status

    @app.post("/run/<run_id>/world/<world_id>/r/<int:replicate>/rule")
    def rule(run_id: str, world_id: str, replicate: int):
        from benchmark.oversight.adjudicate import LedgerConflict, record_rulings

        try:
            run = wb.run(run_id)
        except KeyError:
            abort(404)
        f = request.form
        form = f.to_dict()
        page = world_page(wb, run, world_id, replicate)
        if page is None:
            abort(404)
        try:
            drafts = _drafts(f, {c["component"]: c for c in page["components"]})
            ledger_path = wb.ledger_dir / _ledger_name(f.get("ledger", ""))
            ack = {int(x) for v in f.getlist("acknowledge") for x in v.split(",") if x.strip().isdigit()}
            date = dt.date.fromisoformat(f["date"]) if f.get("date") else None
            recorded = record_rulings(run.root, ledger_path, world_id, replicate, drafts, f.get("adjudicator", "").strip(),
                                      f.get("reason", "").strip(), f.get("version", ""), ack, date)
        except LedgerConflict as exc:
            return _world(run_id, world_id, replicate, 409, str(exc), form)
        except (BenchmarkError, ValueError) as exc:
            return _world(run_id, world_id, replicate, 400, str(exc), form)
        ids = ",".join(str(r.id) for r in recorded)
        return redirect(world_url(run_id, world_id, replicate) + f"?recorded={ids}&file={ledger_path.name}#rulings", 303)

    def _drafts(f, components: dict[str, dict]) -> list:
        """The form's decisions as drafts: 'grader' and 'verifier' take the recorded values (read here, never from
        the form), 'value' takes the typed value; the shared validation (prepare_ruling) checks each."""
        from benchmark.oversight.adjudicate import Draft

        drafts = []
        for comp, c in components.items():
            decision = f.get(f"decision.{comp}", "")
            if decision not in DECISIONS:
                raise BenchmarkError(f"field 'decision.{comp}': unknown decision {decision!r}; choose grader, verifier or value")
            if not decision:
                continue
            value = {"grader": c["deterministic"], "verifier": c["verifier"]}.get(decision, f.get(f"value.{comp}", ""))
            if value is None or str(value).strip() == "":
                whose = {"grader": "the grader has", "verifier": "the verifier has"}.get(decision, "you typed")
                raise BenchmarkError(f"field 'value.{comp}': {whose} no value for {comp}; choose another decision or "
                                     "type the value to record")
            drafts.append(Draft(comp, str(value).strip()))
        return drafts

    def _ledger_name(name: str) -> str:
        import re

        name = name.strip() or "adjudication.yaml"
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,100}\.yaml", name):
            raise BenchmarkError(f"field 'ledger': '{name}' is not a ledger file name; use letters, digits, '-', '_' "
                                 "and end in .yaml (it is created in the ledger folder)")
        return name

    @app.get("/pending")
    def pending_page():
        snap = wb.snapshot()
        return render_template("pending.html", groups=wb.pending(), version=snap.version)

    @app.get("/run/<run_id>/input/<world_id>/<path:rel>")
    def input_download(run_id: str, world_id: str, rel: str):
        """A world file the agent was given (only those its lock lists), as a download."""
        from benchmark.oversight.view.world import input_file

        try:
            wb.run(run_id)
        except KeyError:
            abort(404)
        p = input_file(wb.world_ref(world_id), rel)
        if p is None:
            abort(404)
        resp = send_file(p, mimetype="application/octet-stream", as_attachment=True, download_name=Path(rel).name,
                         conditional=False, max_age=0)
        resp.headers["Content-Security-Policy"] = security.FILE_CSP
        return resp

    @app.get("/search")
    def search():
        """Results whose world id contains the query (every run), newest run order kept."""
        q = (request.args.get("q") or "").strip()
        rows = [r for r in wb.snapshot().rows if q and q.lower() in r.rec.world_id.lower()][:500]
        return render_template("search.html", q=q, rows=rows)

    @app.get("/run/<run_id>/artifact/<key>/<path:rel>")
    def artifact(run_id: str, key: str, rel: str):
        try:
            run = wb.run(run_id)
        except KeyError:
            abort(404)
        art = resolve_artifact(run.root, key, rel)
        if art is None:
            abort(404)
        resp = send_file(art.path, mimetype=art.content_type, as_attachment=not art.inline,
                         download_name=Path(rel).name, conditional=False, max_age=0)
        resp.headers["Content-Security-Policy"] = security.FILE_CSP
        return resp

    @app.template_filter("pct")
    def _pct(v):
        return "-" if v is None else f"{100 * v:.1f}%"

    return app
