"""The adjudicator's web workbench (`python -m benchmark view`): Flask test-client checks of escaping, file serving,
access control and ruling conflicts on a run written through RunStore, and a real headless Chromium driving the
real server over a scripted run whose grader and verifier disagree."""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
import yaml

from benchmark.suite.loader import REPO_ROOT
from benchmark.run.records import CellRecord, ResultRecord, Trajectory
from benchmark.run.store import RunStore, result_key
from graders.grade import CheckRecord, Grade

CHROMIUM = "/usr/bin/chromium"
PAYLOAD = '<script>window.__pwned=1;document.title="pwned"</script><img src=x onerror="window.__pwned=2">'
SHOTS = REPO_ROOT / "test-output" / "view"
CLEAN, DOUBLETS, DOSSIER = "scrna.L1.integrity.clean", "scrna.L1.integrity.doublets", "scrna.L3.dossier.mhc2_myeloid"
LANE = "scrna.L2.composition.lane_capture"


def png_bytes(w: int = 60, h: int = 30) -> bytes:
    """A real PNG (a colour gradient), written without any imaging library."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + b"".join(bytes((4 * x % 256, 8 * y % 256, 160)) for x in range(w)) for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def _l1(world: str, state: str, score: float, run_id: str) -> ResultRecord:
    grade = Grade(world_id=world, level="L1", status=state, native=score * 3 / 100, score=score, reason=f"grader: {PAYLOAD}",
                  checks=[CheckRecord(id="flagged", credit=score / 100, detail=f"evidence {PAYLOAD}")],
                  grader="graders.l1", grader_version="2")
    return ResultRecord(world_id=world, track="scrna", level="L1", family="scrna.L1.integrity", world_class="clean"
                        if world == CLEAN else "challenge", model="scripted/naive", replicate=0, seed=0, status="graded",
                        score=score, grade=grade, tokens_in=0, tokens_out=0, calls=2, failed_calls=0, retries=0,
                        code_cells=1, wall_s=1.0, violations=[], audit_flags=[],
                        trajectory=f"trajectories/{result_key(world, 0)}.json", harness_version="2", run_id=run_id)


def _traj(world: str, l3: dict | None = None, outputs: list[str] | None = None) -> Trajectory:
    cell = CellRecord(step=0, code="import matplotlib\nplt.savefig('plot.png')\nprint(report)", stdout=f"out {PAYLOAD}",
                      stderr=f"warn {PAYLOAD}", error=None)
    msgs = [{"role": "system", "content": "You are a careful scientist."},
            {"role": "user", "content": "GOAL: check the data."},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
                "name": "run_python", "arguments": json.dumps({"code": f"print('{PAYLOAD}')"})}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": f"tool said {PAYLOAD}"},
            {"role": "assistant", "content": f"my report {PAYLOAD}"}]
    return Trajectory(world_id=world, model="scripted/naive", replicate=0, seed=0, harness_version="2", messages=msgs,
                      cells=[cell], report_raw=f'{{"summary": "{PAYLOAD}"}}', outputs=outputs or [], status="graded",
                      step_budget=20, l3=l3)


def make_run(root: Path, run_id: str = "crafted") -> Path:
    """A run folder written through RunStore: two L1 results (one the verifier disputes), one L3 dossier, agent text
    carrying a script payload everywhere, and work products that try every way out of the artifacts folder."""
    store = RunStore(root / run_id)
    store.init({"model": "scripted/naive", "run_id": run_id, "replicates": 1, "seed": 0, "worlds": [CLEAN, DOUBLETS, DOSSIER],
                "levels": ["L1", "L3"], "started": "2026-11-30T00:00:00+00:00"}, resume=False)
    key = result_key(DOUBLETS, 0)
    art = store.artifacts / key
    (art / "sub").mkdir(parents=True)
    (art / "plot.png").write_bytes(png_bytes())
    (art / "evil.svg").write_text(f'<svg xmlns="http://www.w3.org/2000/svg">{PAYLOAD}</svg>')
    (art / "page.html").write_text(PAYLOAD)
    (art / "fake.png").write_text(PAYLOAD)  # named like an image, is HTML
    (art / "sub" / "notes.txt").write_text("notes")
    (art / "leak.png").symlink_to(store.root / "config.json")
    (art / "up").symlink_to(store.root)
    (art / "alias.png").symlink_to(art / "plot.png")  # even a link that stays inside is not followed
    outputs = ["plot.png", "evil.svg", "page.html", "fake.png", "sub/notes.txt", "leak.png"]
    store.save_trajectory(_traj(CLEAN))
    store.save_trajectory(_traj(DOUBLETS, outputs=outputs))
    l3 = {"prior": {"expectation": f"prior {PAYLOAD}", "confidence": 70, "reasoning": "r"}, "eligible": True,
          "eligibility_reason": f"gate {PAYLOAD}", "commitment": "commit", "first_answer": {"hypothesis": "first"},
          "final_answer": {"hypothesis": f"final {PAYLOAD}"}, "reviewers": [{"role": "evidence", "model": "m"}],
          "rounds": [{"round": 1, "critiques": [{"reviewer": "evidence", "model": "m", "verdict": "reject",
                                                 "critique": f"critique {PAYLOAD}"}], "rejection_fraction": 1.0,
                      "rebuttal": {"response": f"rebuttal {PAYLOAD}", "concessions": []}, "concessions": 0,
                      "hypothesis_after": "h"}],
          "judge_draws": [{"D": 2, "N": 1, "reason": f"judge reason {PAYLOAD}"}],
          "axes": {"D": 2.0, "Q": 2.0, "N": 1.0}}
    store.save_trajectory(_traj(DOSSIER, l3=l3))
    store.append(_l1(CLEAN, "CLEAN-CORRECT", 100.0, run_id))
    store.append(_l1(DOUBLETS, "MISS", 0.0, run_id))
    store.append(ResultRecord(world_id=DOSSIER, track="scrna", level="L3", family="scrna.L3.dossier", world_class="real",
                              model="scripted/naive", replicate=0, seed=0, status="graded", score=55.555556, grade=None,
                              tokens_in=0, tokens_out=0, calls=5, failed_calls=0, retries=0, code_cells=1, wall_s=1.0,
                              violations=[], audit_flags=[], trajectory=f"trajectories/{result_key(DOSSIER, 0)}.json",
                              harness_version="2", run_id=run_id, eligible=True, commitment="commit",
                              l3_axes={"D": 2.0, "Q": 2.0, "N": 1.0}))
    verdict = {"key": key, "world_id": DOUBLETS, "replicate": 0, "level": "L1", "verifier_model": "scripted/first",
               "parsed": True, "verdict": {"state": "DIAGNOSE-AND-ACT", "reason": f"verifier {PAYLOAD}"},
               "reason": f"verifier {PAYLOAD}", "discrepancies": [{"component": "state", "deterministic": "MISS",
                                                                   "verifier": "DIAGNOSE-AND-ACT"}],
               "usage": {"tokens_in": 0, "tokens_out": 0, "calls": 1, "model": "scripted/first"}}
    (store.root / "verification.jsonl").write_text(json.dumps(verdict) + "\n")  # the clean world is not verified yet
    store.close()
    return store.root


@pytest.fixture()
def crafted(tmp_path):
    from benchmark.oversight.view.app import create_app
    from benchmark.oversight.view.workbench import Workbench

    run = make_run(tmp_path / "runs")
    ledgers = tmp_path / "ledgers"
    wb = Workbench([run], ledgers, bootstrap=50, permutations=50)
    return run, ledgers, wb, create_app(wb)


def _world_url(world: str = DOUBLETS, run_id: str = "crafted") -> str:
    return f"/run/{run_id}/world/{world}/r/0"


def _form(client, url: str) -> dict:
    html = client.get(url).get_data(as_text=True)
    return {"csrf": re.search(r'name="csrf" value="([^"]+)"', html).group(1),
            "version": re.search(r'name="version" value="([^"]*)"', html).group(1)}


def test_the_world_page_shows_what_an_adjudicator_weighs(crafted):
    """Issue 41 item 2: the files the agent saw (a bounded preview and a download of each, nothing else served), the
    golden value of each check, each verifier by name, the place in the pending queue, tokens, search by world id, and
    the code once."""
    from benchmark.suite.freeze import ensure_built, read_golden
    from benchmark.suite.loader import load_suite

    run, _, wb, app = crafted
    ref = load_suite().worlds[DOUBLETS]
    ensure_built(ref)
    c = app.test_client()
    html = c.get(_world_url()).get_data(as_text=True)
    assert 'class="input-preview"' in html and all(f in html for f in ref.world.public_files)
    # the golden value the action check ("flagged") compares against, from the world's golden
    want = read_golden(ref).values[next(x for x in ref.world.rubric.actions if x.id == "flagged").golden]
    assert 'class="golden"' in html and str(want[0]) in html
    assert "(scripted/first)" in html, "the verifier is named beside its value"
    assert 'id="queue"' in html and "item 1 of 1" in html
    assert 'id="tokens"' in html
    assert html.count("plt.savefig(&#39;plot.png&#39;)") == 1, "the code is shown once, in its cell"
    # downloads: a listed file, never an unlisted path
    rel = sorted(ref.world.public_files)[0]
    got = c.get(f"/run/crafted/input/{DOUBLETS}/{rel}")
    assert got.status_code == 200 and got.data == (ensure_built(ref) / rel).read_bytes()
    assert "attachment" in got.headers["Content-Disposition"]
    for bad in ("../../config.json", "%2e%2e/%2e%2e/etc/passwd", "world.yaml", "nope.csv"):
        assert c.get(f"/run/crafted/input/{DOUBLETS}/{bad}").status_code == 404, bad
    found = c.get("/search?q=doublets").get_data(as_text=True)
    assert DOUBLETS in found and CLEAN not in found.split('id="search-results"')[1]


# ---------------------------------------------------------------- escaping

def test_agent_text_is_escaped_on_every_page(crafted):
    run, _, _, app = crafted
    c = app.test_client()
    for url in ("/", "/track/scrna", "/track/scrna/family/scrna.L1.integrity", _world_url(), _world_url(DOSSIER), "/pending"):
        r = c.get(url)
        assert r.status_code == 200, url
        html = r.get_data(as_text=True)
        assert "<script" not in html.lower() and "<img src=x" not in html, url
        csp = r.headers["Content-Security-Policy"]
        assert "default-src 'none'" in csp and "script-src" not in csp, "no script may run, whatever a page holds"
        assert r.headers["X-Content-Type-Options"] == "nosniff"
    html = c.get(_world_url()).get_data(as_text=True)
    escaped = "&lt;script&gt;window.__pwned=1;document.title=&#34;pwned&#34;&lt;/script&gt;&lt;img src=x onerror="
    for where in ("my report ", "tool said ", "out ", "warn ", "evidence ", "grader: ", "verifier "):
        assert f"{where}{escaped}" in html, where
    l3 = c.get(_world_url(DOSSIER)).get_data(as_text=True)
    for where in ("prior ", "gate ", "critique ", "rebuttal ", "judge reason ", "final "):
        assert where + "&lt;script&gt;window.__pwned=1" in l3, where
    assert "Review round 1" in l3 and "Judge draws" in l3 and "Prior (stated before the evidence)" in l3


def test_pending_page_lists_what_ledger_pending_lists_and_warns_on_partial_verification(crafted):
    from benchmark.oversight.adjudicate import pending

    run, _, _, app = crafted
    html = app.test_client().get("/pending").get_data(as_text=True)
    items = pending(run, ledgers=[])
    assert [i.world_id for i in items] == [DOUBLETS]
    assert f'href="{_world_url()}?focus=state#components"' in html
    assert "1 of 3 results verified" in html  # the clean world and the dossier were not verified
    world = app.test_client().get(_world_url() + "?focus=state").get_data(as_text=True)
    assert re.search(r'<tr id="comp-state" class="pending focus">', world), "the disagreement is highlighted"


# ---------------------------------------------------------------- files

def test_work_products_never_leave_the_artifacts_folder_nor_render_as_documents(crafted):
    _, _, _, app = crafted
    c = app.test_client()
    base = f"/run/crafted/artifact/{result_key(DOUBLETS, 0)}"
    r = c.get(f"{base}/plot.png")
    assert r.status_code == 200 and r.mimetype == "image/png" and r.data == png_bytes()
    assert "sandbox" in r.headers["Content-Security-Policy"]
    for name in ("evil.svg", "page.html", "fake.png", "sub/notes.txt"):
        r = c.get(f"{base}/{name}")
        assert r.status_code == 200 and r.mimetype == "application/octet-stream", name
        assert r.headers["Content-Disposition"].startswith("attachment"), name
    refused = ["leak.png", "alias.png", "up/config.json", "../../config.json", "%2e%2e/%2e%2e/config.json", "..%2f..%2fconfig.json",
               "sub/../../../config.json", "/etc/passwd", "%2fetc%2fpasswd", "sub", "missing.png"]
    for rel in refused:
        assert c.get(f"{base}/{rel}", follow_redirects=True).status_code == 404, rel
    assert c.get("/run/crafted/artifact/..%2f..%2f/config.json", follow_redirects=True).status_code == 404
    assert c.get("/run/crafted/artifact/.../config.json").status_code == 404
    assert c.get("/run/nope/artifact/x/plot.png").status_code == 404
    html = c.get(_world_url()).get_data(as_text=True)
    assert f'<img class="product" src="{base}/plot.png"' in html, "the figure is shown with its cell"
    assert f'src="{base}/evil.svg"' not in html and f'src="{base}/fake.png"' not in html


def test_figures_are_rendered_server_side(crafted):
    _, _, _, app = crafted
    c = app.test_client()
    for name in ("stage_profile", "quality_vs_cost", "threshold_curve"):
        r = c.get(f"/figure/{name}.png")
        assert r.status_code == 200 and r.data.startswith(b"\x89PNG"), name
    assert c.get("/figure/../../x.png").status_code == 404


def test_a_broken_ledger_is_named_on_the_page_not_a_traceback(crafted):
    _, ledgers, _, app = crafted
    ledgers.mkdir()
    (ledgers / "broken.yaml").write_text("kind: adjudication\ncampaign: c\nentries:\n  - id: 1\n    ruling: true\n")
    r = app.test_client().get("/")
    html = r.get_data(as_text=True)
    assert r.status_code == 500 and f"{ledgers / 'broken.yaml'}" in html and "field" in html and "Traceback" not in html


# ---------------------------------------------------------------- access

def test_token_is_required_off_localhost(crafted, tmp_path):
    from benchmark.cli import main
    from benchmark.oversight.view.app import create_app

    run, ledgers, wb, app = crafted
    assert main(["view", str(run), "--ledgers", str(ledgers), "--host", "0.0.0.0", "--port", "0"]) == 2
    token = "t0ken-" + "x" * 20
    c = create_app(wb, token=token, bind_host="0.0.0.0").test_client()
    assert c.get("/", base_url="http://10.1.2.3:8765").status_code == 403
    assert c.get("/?token=wrong", base_url="http://10.1.2.3:8765").status_code == 403
    r = c.get(f"/pending?token={token}", base_url="http://10.1.2.3:8765")
    assert r.status_code == 303 and r.headers["Location"].endswith("/pending") and "HttpOnly" in r.headers["Set-Cookie"]
    assert c.get("/pending", base_url="http://10.1.2.3:8765").status_code == 200, "the cookie now carries the token"
    assert c.get(f"/run/crafted/artifact/{result_key(DOUBLETS, 0)}/plot.png", base_url="http://10.1.2.3:8765").status_code == 200
    fresh = create_app(wb, token=token, bind_host="0.0.0.0").test_client()
    assert fresh.get(f"/run/crafted/artifact/{result_key(DOUBLETS, 0)}/plot.png", base_url="http://10.1.2.3").status_code == 403
    # without a token, a page reached under another name (DNS rebinding to 127.0.0.1) is refused
    local = app.test_client()
    assert local.get("/", base_url="http://evil.example:8765").status_code == 421
    assert local.get("/", base_url="http://127.0.0.1:8765").status_code == 200


def test_forms_need_the_csrf_token_and_the_same_origin(crafted):
    run, ledgers, _, app = crafted
    c = app.test_client()
    form = _form(c, _world_url())
    data = {"version": form["version"], "decision.state": "verifier", "reason": "r", "adjudicator": "A"}
    assert c.post(_world_url() + "/rule", data=data).status_code == 403
    assert c.post(_world_url() + "/rule", data=data | {"csrf": form["csrf"]},
                  headers={"Origin": "http://evil.example"}).status_code == 403
    assert not ledgers.exists() or not list(ledgers.glob("*.yaml"))


# ---------------------------------------------------------------- rulings

def test_a_ruling_goes_through_ledger_rule_validation_and_changes_the_leaderboard(crafted):
    from benchmark.oversight.adjudicate import validate_ledgers

    run, ledgers, _, app = crafted
    c = app.test_client()
    before = c.get("/").get_data(as_text=True)
    assert re.search(r'class="num level-L1">50\.0<', before)
    form = _form(c, _world_url())
    bad = c.post(_world_url() + "/rule", data=form | {"decision.state": "value", "value.state": "SORT-OF",
                                                      "reason": "r", "adjudicator": "A"})
    assert bad.status_code == 400 and "is not an L1 state" in bad.get_data(as_text=True)
    nobody = c.post(_world_url() + "/rule", data=form | {"decision.state": "verifier", "reason": "r", "adjudicator": ""})
    assert nobody.status_code == 400 and "adjudicator" in nobody.get_data(as_text=True)
    assert not list(ledgers.glob("*.yaml")), "a refused ruling writes nothing"
    ok = c.post(_world_url() + "/rule", data=form | {"decision.state": "verifier", "reason": "the doublets were never checked",
                                                     "adjudicator": "A. Person", "ledger": "campaign.yaml"})
    assert ok.status_code == 303, ok.get_data(as_text=True)[:500]
    entry = yaml.safe_load((ledgers / "campaign.yaml").read_text())["entries"][0]
    assert entry | {"date": None} == {"id": 1, "run": "crafted", "model": "scripted/naive", "world": DOUBLETS, "replicate": 0,
                                      "component": "state", "deterministic": "MISS", "verifier": "DIAGNOSE-AND-ACT",
                                      "verifier_reason": f"verifier {PAYLOAD}", "ruling": "DIAGNOSE-AND-ACT",
                                      "adjudicator": "A. Person", "date": None, "rationale": "the doublets were never checked"}
    assert validate_ledgers([ledgers / "campaign.yaml"], [run]) == []
    after = c.get("/").get_data(as_text=True)
    assert re.search(r'class="num level-L1">100\.0<', after), "the leaderboard applies the ruling"
    assert "No open discrepancy" in after
    page = c.get(ok.headers["Location"]).get_data(as_text=True)
    assert 'id="recorded"' in page and "DIAGNOSE-AND-ACT" in page


def test_a_stale_page_or_an_unacknowledged_ruling_is_refused(crafted):
    from benchmark.oversight.adjudicate import rule

    run, ledgers, _, app = crafted
    c = app.test_client()
    stale = _form(c, _world_url())
    rule(run, ledgers / "campaign.yaml", DOUBLETS, "state", "NOTICE-WRONG", "CLI person", "recorded meanwhile")
    text = (ledgers / "campaign.yaml").read_text()
    r = c.post(_world_url() + "/rule", data=stale | {"decision.state": "verifier", "reason": "r", "adjudicator": "A",
                                                     "ledger": "campaign.yaml"})
    assert r.status_code == 409 and "changed since this page was rendered" in r.get_data(as_text=True)
    assert (ledgers / "campaign.yaml").read_text() == text
    fresh = _form(c, _world_url())  # the page now shows ruling 1; a new ruling must acknowledge it
    r = c.post(_world_url() + "/rule", data=fresh | {"decision.state": "verifier", "reason": "r", "adjudicator": "A",
                                                     "ledger": "campaign.yaml"})
    body = r.get_data(as_text=True)
    assert r.status_code == 409 and "ruling 1 already rules state" in body and "does not acknowledge" in body
    assert (ledgers / "campaign.yaml").read_text() == text
    r = c.post(_world_url() + "/rule", data=fresh | {"decision.state": "verifier", "reason": "second look", "adjudicator": "A",
                                                     "ledger": "campaign.yaml", "acknowledge": "1"})
    assert r.status_code == 303
    entries = yaml.safe_load((ledgers / "campaign.yaml").read_text())["entries"]
    assert [(e["id"], e["ruling"], e.get("supersedes")) for e in entries] == [(1, "NOTICE-WRONG", None), (2, "DIAGNOSE-AND-ACT", 1)]
    r = c.post(_world_url() + "/rule", data=fresh | {"decision.state": "grader", "reason": "resubmitted", "adjudicator": "A",
                                                     "ledger": "campaign.yaml", "acknowledge": "1"})
    assert r.status_code == 409, "a resubmitted form (browser back, reload) is stale once a ruling was recorded"


def test_ledger_file_name_cannot_leave_the_ledger_folder(crafted):
    _, ledgers, _, app = crafted
    c = app.test_client()
    form = _form(c, _world_url())
    for name in ("../x.yaml", "/tmp/x.yaml", "sub/x.yaml", "x.yml", ".hidden.yaml"):
        r = c.post(_world_url() + "/rule", data=form | {"decision.state": "verifier", "reason": "r", "adjudicator": "A",
                                                        "ledger": name})
        assert r.status_code == 400 and "not a ledger file name" in r.get_data(as_text=True), name
    assert not ledgers.exists() or not any(ledgers.iterdir())


# ---------------------------------------------------------------- ledger commands fixed in passing

def test_ledger_validate_with_no_ledger_yet_says_so(tmp_path, monkeypatch, capsys):
    from benchmark.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "ledgers").mkdir()
    assert main(["ledger", "validate", "ledgers/*.yaml", "--runs", "runs"]) == 0  # the shell left the glob literal
    assert "nothing to validate" in capsys.readouterr().out
    assert main(["ledger", "validate", "ledgers/campaign.yaml"]) == 2
    assert "ledgers/campaign.yaml does not exist" in capsys.readouterr().err.replace("\n", "")


def test_ledger_pending_prints_the_rubric_once_and_warns_when_partly_verified(crafted, capsys):
    from benchmark.cli import main

    run, ledgers, _, _ = crafted
    ledgers.mkdir()
    line = json.loads((run / "verification.jsonl").read_text())  # the clean control (no rubric checks) disputed too
    line |= {"key": result_key(CLEAN, 0), "world_id": CLEAN, "discrepancies": [
        {"component": "state", "deterministic": "CLEAN-CORRECT", "verifier": "OVER-CAUTIOUS"}]}
    with open(run / "verification.jsonl", "a") as fh:
        fh.write(json.dumps(line) + "\n")
    assert main(["ledger", "pending", str(run), "--ledgers", str(ledgers)]) == 0
    out, err = capsys.readouterr()
    rubrics = [x.removeprefix("rubric: expected: ") for x in out.splitlines() if x.startswith("rubric: expected: ")]
    assert len(rubrics) == 2
    for sentence in rubrics:
        assert out.count(sentence[:80]) == 1, "the expected sentence is printed once"
    assert "2 of 3 results verified" in (out + err).replace("\n", " ")
    # issue 41: each item's command names its replicate and the ledger the list was read against, so the ruling
    # lands where `ledger pending` looks (it used to land in the repo's ledgers/, leaving the item pending)
    rule = [x for x in out.splitlines() if x.startswith("rule it: ")]
    assert len(rule) == 2 and all("--replicate 0" in x and f"--ledger {ledgers / 'adjudication.yaml'}" in x for x in rule), rule
    assert main(["ledger", "pending", str(run), "--ledgers", str(ledgers), "--json"]) == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)) == 2 and "2 of 3 results verified" in err.replace("\n", " ")
    # a folder holding one ledger (the campaign's draft): the command rules into it, not into a second file
    assert main(["ledger", "rule", str(run), "--world", CLEAN, "--replicate", "0", "--component", "state", "--ruling",
                 "CLEAN-CORRECT", "--adjudicator", "T", "--rationale", "no defect", "--ledger",
                 str(ledgers / "my-campaign.yaml")]) == 0
    capsys.readouterr()
    assert main(["ledger", "pending", str(run), "--ledgers", str(ledgers)]) == 0
    rule = [x for x in capsys.readouterr().out.splitlines() if x.startswith("rule it: ")]
    assert len(rule) == 1 and rule[0].endswith(f"--ledger {ledgers / 'my-campaign.yaml'}"), rule


# ---------------------------------------------------------------- a real browser on the real server

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/setup.sh (it installs Debian's chromium for the browser tests)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: run scripts/setup.sh (the 'browser' extra)")
    return sync_playwright


@pytest.fixture(scope="module")
def disputed_run(tmp_path_factory) -> Path:
    """scripted/naive evaluated, scripted/first as verifier: they disagree on the doublets world (MISS vs
    DIAGNOSE-AND-ACT); then the agent's report and a cell's output are given a script payload, and a figure."""
    from benchmark.run.episodes import RunConfig, execute
    from benchmark.oversight.verify import verify_run

    out = tmp_path_factory.mktemp("view") / "naive"
    execute(RunConfig(model="scripted/naive", out=out, worlds=[CLEAN, DOUBLETS], levels=["L1"], concurrency=2))
    assert verify_run(out, "scripted/first")
    store = RunStore(out)
    rec = next(r for r in store.results() if r.world_id == DOUBLETS)
    traj = store.load_trajectory(rec.trajectory)
    traj.report_raw = (traj.report_raw or "") + PAYLOAD
    traj.cells[0].stdout += f"\n{PAYLOAD}\n"
    traj.cells[0].code += "\nplt.savefig('qc.png')"
    (store.artifacts / result_key(DOUBLETS, 0) / "qc.png").write_bytes(png_bytes())
    traj.outputs.append("qc.png")
    store.save_trajectory(traj)
    return out


def _follow(page, selector: str) -> None:
    """Click a link and wait until the page it leads to has loaded: a click returns once navigation starts, so a count
    read straight after it can see the old page or a half-parsed new one (CI failed on that race under load)."""
    with page.expect_navigation(wait_until="load"):
        page.click(selector)


def _submit_ruling(page, component: str, choice: str, reason: str, ledger: str, value: str | None = None) -> str:
    """Fill the world page's ruling form for one component (uphold the grader, side with the verifier, or type a
    value), sign it and submit; the page's confirmation."""
    page.select_option(f"select[name='decision.{component}']", choice)
    if value is not None:
        page.fill(f"input[name='value.{component}']", value)
    page.fill("#reason", reason)
    page.fill("#adjudicator", "Browser Test")
    page.fill("#ledger", ledger)
    with page.expect_navigation(wait_until="load"):
        page.click("button[type=submit]")
    return page.locator("#recorded").inner_text()


@contextlib.contextmanager
def _served(run: Path, ledgers: Path, shots: Path):
    """`python -m benchmark view RUN --ledgers LEDGERS` on a free port; yields its address, stops it after, and keeps
    the screenshots taken into SHOTS (test-output/view) even when the test fails."""
    port = _free_port()
    shots.mkdir()
    server = subprocess.Popen([sys.executable, "-m", "benchmark", "view", str(run), "--ledgers", str(ledgers),
                               "--port", str(port)], cwd=REPO_ROOT, env=dict(os.environ, BENCHMARK_PROGRESS="0"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                pytest.fail(f"the server stopped: {server.stderr.read()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not listen within 120 s"
                time.sleep(0.3)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        SHOTS.mkdir(parents=True, exist_ok=True)
        for f in shots.glob("*.png"):
            shutil.copy(f, SHOTS / f.name)


@pytest.mark.slow
def test_browser_walks_runs_world_ruling_and_sees_the_leaderboard_change(disputed_run, tmp_path):
    sync_playwright = _browser()
    ledgers = tmp_path / "ledgers"
    shots = tmp_path / "screenshots"
    with _served(disputed_run, ledgers, shots) as base:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(base + "/")
            l1 = page.locator('#table1 tr[data-model="scripted/naive"] td.level-L1')
            assert l1.inner_text() == "50.0", "CLEAN-CORRECT (100) and MISS (0)"
            assert page.locator("#pending-count").inner_text().startswith("2 open discrepancies"), "both L1 states disputed"
            page.screenshot(path=str(shots / "runs.png"), full_page=True)

            _follow(page, "#tracks >> text=scrna")
            assert page.locator("h1").inner_text() == "Track scrna"
            page.screenshot(path=str(shots / "track.png"), full_page=True)
            _follow(page, "#families >> text=scrna.L1.integrity")
            _follow(page, f"#worlds >> text=naive r0 >> nth=1")  # the doublets world (rows are sorted by world)
            assert DOUBLETS in page.locator("h1").inner_text()

            page.goto(base + "/pending")
            page.screenshot(path=str(shots / "pending.png"), full_page=True)
            _follow(page, f"text={DOUBLETS} r0")
            assert page.locator("tr#comp-state.focus.pending").count() == 1, "the disagreement is highlighted"
            report = page.locator("#report-text").inner_text()
            assert PAYLOAD in report, "the agent's script is shown as text"
            assert page.locator(f"pre.stdout:has-text('{PAYLOAD[:40]}')").count() == 1
            assert page.evaluate("() => window.__pwned === undefined") and "pwned" not in page.title()
            img = page.locator("#cell-0 img.product")
            assert img.count() == 1 and page.evaluate("(i) => i.naturalWidth", img.element_handle()) == 60
            page.screenshot(path=str(shots / "world.png"), full_page=True)

            recorded = _submit_ruling(page, "state", "verifier", "the report never looks for doublets; the verifier is right",
                                      "campaign.yaml")
            assert "Recorded ruling(s) 1" in recorded
            page.screenshot(path=str(shots / "after-ruling-world.png"), full_page=True)
            page.goto(base + "/")
            assert l1.inner_text() == "100.0", "the leaderboard applies the ruling"
            assert page.locator("#pending-count").inner_text().startswith("1 open discrepancy")
            page.screenshot(path=str(shots / "after-ruling.png"), full_page=True)
            assert page.evaluate("() => window.__pwned === undefined") and not dialogs
            browser.close()
    entries = yaml.safe_load((ledgers / "campaign.yaml").read_text())["entries"]
    assert [(e["world"], e["component"], e["ruling"], e["adjudicator"]) for e in entries] == [
        (DOUBLETS, "state", "DIAGNOSE-AND-ACT", "Browser Test")]
    for name in ("runs", "track", "pending", "world", "after-ruling"):
        assert (SHOTS / f"{name}.png").stat().st_size > 10_000, name


@pytest.fixture(scope="module")
def disputed_levels(tmp_path_factory) -> Path:
    """scripted/naive on an L2 trap and an L3 dossier (scripted reviewers, the scripted rubric judge), verified by
    scripted/first: they disagree on the L2 method component (M) and on the L3 prior gate (eligible)."""
    from benchmark.run.episodes import RunConfig, execute
    from benchmark.oversight.verify import verify_run

    out = tmp_path_factory.mktemp("view-levels") / "naive"
    execute(RunConfig(model="scripted/naive", out=out, worlds=[LANE, DOSSIER], levels=["L2", "L3"], concurrency=2,
                      reviewers=("scripted/first",) * 3, judge="scripted/rubric"))
    assert verify_run(out, "scripted/first")
    return out


@pytest.mark.slow
def test_browser_rules_on_an_l2_and_an_l3_item_through_the_world_page(disputed_levels, tmp_path):
    """The ruling form is the same on every level: the pending queue leads to each disputed component, the states the
    component allows are offered, and the ruling reaches the ledger and the leaderboard (an ineligible dossier leaves
    the L3 mean)."""
    sync_playwright = _browser()
    ledgers = tmp_path / "ledgers"
    with _served(disputed_levels, ledgers, tmp_path / "screenshots") as base:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(base + "/")
            row = '#table1 tr[data-model="scripted/naive"]'
            l2, l3 = page.locator(f"{row} td.level-L2"), page.locator(f"{row} td.level-L3")
            before_l3 = l3.inner_text()
            assert l2.inner_text() == "0.0" and float(before_l3) > 0, "the rubric judge scores the eligible dossier"
            assert page.locator("#pending-count").inner_text().startswith("2 open discrepancies")

            page.goto(base + "/pending")
            _follow(page, f"text={LANE} r0")
            assert LANE in page.locator("h1").inner_text()
            assert page.locator("tr#comp-M.focus.pending").count() == 1, "the L2 disagreement is highlighted"
            recorded = _submit_ruling(page, "M", "verifier",
                                      "the pooled cell-level test ignores the lane; the method earns nothing", "levels.yaml")
            assert "Recorded ruling(s) 1" in recorded
            page.screenshot(path=str(tmp_path / "screenshots" / "ruling-L2.png"), full_page=True)

            page.goto(base + "/pending")
            assert page.locator(f"text={LANE} r0").count() == 0, "the ruled L2 item left the queue"
            _follow(page, f"text={DOSSIER} r0")
            assert page.locator("tr#comp-eligible.focus.pending").count() == 1, "the L3 gate disagreement is highlighted"
            assert "allows: eligible, ineligible" in page.locator("#ruling-form").inner_text(), "the gate's states are offered"
            recorded = _submit_ruling(page, "eligible", "value",
                                      "the prior already states the hypothesis; the gate should have closed", "levels.yaml",
                                      value="ineligible")
            assert "Recorded ruling(s) 2" in recorded
            page.screenshot(path=str(tmp_path / "screenshots" / "ruling-L3.png"), full_page=True)

            page.goto(base + "/")
            assert page.locator("#pending-count").inner_text() == "No open discrepancy."
            assert l3.inner_text() == "-", "an ineligible dossier leaves the L3 mean"
            browser.close()
    entries = yaml.safe_load((ledgers / "levels.yaml").read_text())["entries"]
    assert [(e["world"], e["component"], e["ruling"]) for e in entries] == [
        (LANE, "M", 0.0), (DOSSIER, "eligible", "ineligible")]


def test_an_unparseable_verifier_answer_leaves_its_result_unverified_and_is_asked_again(crafted):
    """A verifier that cannot answer in the format checked nothing: the result counts as unverified everywhere and
    the next `verify` asks again (it used to count as verified and was never asked again)."""
    from benchmark.oversight.adjudicate import verification_progress
    from benchmark.oversight.verify import to_verify

    run, *_ = crafted
    line = json.loads((run / "verification.jsonl").read_text())
    line |= {"key": result_key(CLEAN, 0), "world_id": CLEAN, "parsed": False, "verdict": {}, "discrepancies": [],
             "reason": "unparseable answer"}
    with open(run / "verification.jsonl", "a") as fh:
        fh.write(json.dumps(line) + "\n")
    assert verification_progress(run) == (1, 3), "the doublets world only"
    assert [r.world_id for r in to_verify(run, "scripted/first")] == [CLEAN, DOSSIER], "asked again; never asked yet"


def test_a_verdict_cut_inside_its_reason_is_read_and_one_cut_before_its_scores_is_not():
    """The offline verifier repeats itself until its token cap and is cut inside `reason`, after every score: that
    verdict is the model's and is read (4 of 8 L1/L2 answers were unparseable, 2 of them cut this way). A verdict cut
    before a score, or with a score out of range, stays unparseable."""
    from benchmark.oversight.verify import parse_verdict

    cut = '{\n "A": 1,\n "I": 1,\n "M": 0.5,\n "C": 1,\n "reason": "The value of the A gene is 1. The value of the'
    assert parse_verdict(cut, "L2") == {"A": 1, "I": 1, "M": 0.5, "C": 1,
                                        "reason": "The value of the A gene is 1. The value of the"}
    assert parse_verdict('{"state": "MISS", "reason": "SHOW-SHOW-SHOW-', "L1")["state"] == "MISS"
    assert parse_verdict('{\n "A": 1,\n "I": 1,\n "M": 0.', "L2") is None, "cut inside a score"
    assert parse_verdict('{"A": 9, "I": 9, "M": 9, "C": 9, "reason": "..."}', "L2") is None, "out of range"
    assert parse_verdict('{"A": 1, "I": 1, "reason": "cut', "L2") is None, "M and C missing"
