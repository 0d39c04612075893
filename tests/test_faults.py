"""Faults, retries and bad inputs, through the real `run` path against a real (fake) OpenAI-compatible HTTP server.

Each test probes one failure a lab meets with a paid key on a shared machine (issue 11): a dead endpoint, 500/429
with Retry-After, an endpoint that always answers 429, timeouts, malformed bodies, an agent that plants symlinks,
a deeply nested report, and every kind of bad input file. None of them may become a score, stop a campaign, leak a
secret into the run folder or be accepted half way.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from email.utils import format_datetime
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from benchmark.run.agent import RetryPolicy, call_model
from benchmark.cli import main
from benchmark.suite.loader import REPO_ROOT, load_suite
from benchmark.models.scripted import first_option_value
from benchmark.run.records import ResultRecord
from benchmark.run.episodes import RunConfig, execute
from benchmark.run.store import RunStore
from tests.fake_openai import DroppingServer, FakeOpenAI, Reply, dead_url, error, malformed, rate_limited, report, slow, tool_call

W1 = "scrna.L1.integrity.clean"
W2 = "scrna.L1.integrity.doublets"
MODEL = "openai/fake-model"
SECRET = "sk-fake-SECRET-3f9c1e7a5b2d4c6e8f0a"
GOLDEN = REPO_ROOT / "worlds/scrna/L1/integrity/clean.golden.json"
GOLDEN_MARK = b'"label_marker_consistency": 0.9505'
MSG = [{"role": "user", "content": "hi"}]


def valid_report(world: str = W1) -> dict:
    return first_option_value(load_suite().worlds[world].family.report_schema)


def run_cli(out: Path, base_url: str, *extra: str, worlds=(W1,), env: dict | None = None, timeout: int = 300):
    """`python -m benchmark run` in a subprocess, as a user runs it, with the key and endpoint in its environment; one
    world at a time (a hosted model's default is 4), since the fake endpoint answers its scripted replies in order."""
    cmd = [sys.executable, "-m", "benchmark", "run", "--model", MODEL, "--out", str(out), "--levels", "L1",
           "--concurrency", "1", "--worlds", *worlds, *extra]
    e = dict(os.environ, OPENAI_API_BASE=base_url, OPENAI_API_KEY=SECRET, BENCHMARK_PROGRESS="0", **(env or {}))
    return subprocess.run(cmd, cwd=REPO_ROOT, env=e, capture_output=True, text=True, timeout=timeout)


def records(out: Path) -> dict[str, ResultRecord]:
    return {r.world_id: r for r in RunStore(out).results()}


def trajectory(out: Path, rec: ResultRecord) -> dict:
    return json.loads((out / rec.trajectory).read_text())


def one_line(stderr: str) -> str:
    lines = [x for x in stderr.strip().splitlines() if x.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


# ------------------------------------------------------------------ faults are not scores


@pytest.mark.slow
def test_dead_endpoint_is_no_score_incomplete_then_resume_scores_it(tmp_path):
    from benchmark.score.leaderboard import build, render_markdown

    out = tmp_path / "dead"
    # nothing listens: one sentence before the first world, nothing written (issue 41 item 4)
    dead = dead_url()
    p = run_cli(out, dead, env={"BENCHMARK_MODEL_ATTEMPTS": "2"})
    assert p.returncode == 2 and f"nothing answers at OPENAI_API_BASE={dead}" in one_line(p.stderr), p.stderr
    assert not out.exists()
    # the endpoint answers the connect, then drops every request (it died mid-campaign): a fault row, no score
    with DroppingServer() as srv:
        p = run_cli(out, srv.url, env={"BENCHMARK_MODEL_ATTEMPTS": "2"})
    assert p.returncode == 3, p.stdout + p.stderr
    assert "1 of 1 worlds failed (model_error 1); rerun with --resume to retry them" in p.stderr
    rec = records(out)[W1]
    assert rec.status == "model_error" and rec.score is None and rec.grade is None and rec.error
    calls = trajectory(out, rec)["calls"]
    assert [a["http_status"] for a in calls[0]["attempts"]] == [None, None], "no response: no HTTP status"
    board = build([out], ledgers=[], bootstrap=0, permutations=0)
    s = board["models"][0]
    assert not s["ranked"] and not s["coverage"]["complete"] and s["coverage"]["errors"] == 1
    assert f"*{MODEL}* (incomplete: 0/1)" in render_markdown(board)

    with FakeOpenAI([report(valid_report())]) as srv:
        p = run_cli(out, srv.url, "--resume")
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(srv.requests) == 1 and srv.requests[0]["auth"] == f"Bearer {SECRET}"
    rec = records(out)[W1]
    assert rec.status == "graded" and rec.score is not None and rec.calls == 1
    s = build([out], ledgers=[], bootstrap=0, permutations=0)["models"][0]
    assert s["ranked"] and s["coverage"]["complete"]


@pytest.mark.slow
def test_500_then_429_then_success_is_retried_by_the_harness_and_each_attempt_recorded(tmp_path):
    out = tmp_path / "retry"
    with FakeOpenAI([error(500), rate_limited("1"), report(valid_report())]) as srv:
        p = run_cli(out, srv.url)
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(srv.requests) == 3, "the provider SDK retried on its own"
    rec = records(out)[W1]
    assert rec.status == "graded" and rec.retries == 2 and rec.calls == 1 and rec.failed_calls == 0
    attempts = trajectory(out, rec)["calls"][0]["attempts"]
    assert [a["http_status"] for a in attempts] == [500, 429, 200]
    assert attempts[1]["wait_s"] == 1.0, "Retry-After: 1 is honoured"
    assert srv.requests[2]["t"] - srv.requests[1]["t"] >= 1.0


@pytest.fixture
def endpoint(monkeypatch):
    """Point litellm's openai provider at a server for in-process calls."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    return lambda srv: monkeypatch.setenv("OPENAI_API_BASE", srv.url)


def test_always_429_is_bounded_in_attempts_and_time(endpoint):
    with FakeOpenAI(default=rate_limited("1")) as srv:
        endpoint(srv)
        resp, rec = call_model(MODEL, MSG, step=0)
    assert resp is None and not rec.ok and "gave up after 4 attempts" in rec.error
    assert len(srv.requests) == RetryPolicy().attempts == 4
    assert [a.http_status for a in rec.attempts] == [429] * 4
    # bounded in time: three Retry-After waits of 1 s between the four attempts, measured at the server (the first
    # call of a process also pays litellm's import, which is no part of the retry policy)
    assert sum(a.wait_s or 0 for a in rec.attempts) == 3.0
    span = srv.requests[-1]["t"] - srv.requests[0]["t"]
    assert 3.0 <= span < 6.0, f"{span:.1f} s from the first attempt to the last"


def test_retry_after_beyond_the_cap_ends_the_call_and_http_dates_are_honoured(endpoint):
    with FakeOpenAI(default=rate_limited("3600")) as srv:
        endpoint(srv)
        resp, rec = call_model(MODEL, MSG, step=0)
    assert resp is None and len(srv.requests) == 1 and "asked to wait 3600 s" in rec.error
    when = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=2), usegmt=True)
    with FakeOpenAI([rate_limited(when), report({"a": 1})]) as srv:
        endpoint(srv)
        resp, rec = call_model(MODEL, MSG, step=0)
    assert rec.ok and 0.5 <= rec.attempts[0].wait_s <= 2.5, rec.attempts


def test_timeouts_and_malformed_bodies_are_retried_within_a_total_time_bound(endpoint):
    with FakeOpenAI([slow(3), malformed(), report({"a": 1})]) as srv:
        endpoint(srv)
        resp, rec = call_model(MODEL, MSG, step=0, policy=RetryPolicy(timeout_s=1.0, base_s=0.2))
    assert rec.ok, rec.error
    assert [a.http_status for a in rec.attempts] == [None, 200, 200]
    assert "Timeout" in rec.attempts[0].error and rec.attempts[1].error, "the malformed 200 is an attempt with an error"
    with FakeOpenAI(default=slow(5)) as srv:
        endpoint(srv)
        t0 = time.monotonic()
        resp, rec = call_model(MODEL, MSG, step=0, policy=RetryPolicy(attempts=50, timeout_s=1.0, deadline_s=4.0, base_s=0.2))
        wall = time.monotonic() - t0
    assert resp is None and wall < 6 and len(rec.attempts) < 5, (wall, len(rec.attempts))


def test_missing_bubblewrap_stops_the_run_before_the_first_world(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    out = tmp_path / "nobwrap"
    with DroppingServer() as srv:  # an endpoint that listens: the missing tool is what stops the run
        p = run_cli(out, srv.url, env={"PATH": str(empty)})
    assert p.returncode == 2, p.stdout + p.stderr
    assert "bwrap" in one_line(p.stderr) and "setup.sh" in p.stderr
    assert not out.exists(), "nothing is written when a tool is missing"
    (empty / "bwrap").symlink_to(shutil.which("bwrap"))  # bubblewrap present, the histone track's tools absent
    histone = load_suite().select(None, ["histone"], ["L1"])[0].id
    with DroppingServer() as srv:
        p = run_cli(out, srv.url, worlds=(histone,), env={"PATH": str(empty)})
    assert p.returncode == 2 and "samtools" in one_line(p.stderr) and "track histone" in p.stderr, p.stderr
    assert not out.exists()


# ------------------------------------------------------------------ no output can stop a campaign


@pytest.mark.slow
def test_deeply_nested_report_is_a_harness_error_the_next_world_runs_and_resume_passes(tmp_path):
    out = tmp_path / "nested"
    deep = "[" * 200_000 + "]" * 200_000
    from benchmark.run.agent import FORCED_CALLS

    # a reply that is neither a report nor code is answered by forcing the tool (FORCED_CALLS times) before it is final
    with FakeOpenAI([report(deep)] * (1 + FORCED_CALLS) + [report(valid_report(W2))]) as srv:
        p = run_cli(out, srv.url, worlds=(W1, W2))
    recs = records(out)
    assert recs[W2].status == "graded" and recs[W2].score is not None, "the next world still ran"
    if recs[W1].status == "noncompliant":  # the report parser bounds nesting itself: a scored, non-compliant report
        assert p.returncode == 0
        return
    assert p.returncode == 3, p.stdout + p.stderr
    assert recs[W1].status == "harness_error" and recs[W1].score is None and "RecursionError" in recs[W1].error
    assert "1 of 2 worlds failed (harness_error 1)" in p.stderr
    with FakeOpenAI([report(valid_report())]) as srv:
        p = run_cli(out, srv.url, "--resume", worlds=(W1, W2))
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(srv.requests) == 1, "only the failed world is run again"
    assert records(out)[W1].status == "graded"


# ------------------------------------------------------------------ nothing of the host reaches the run folder


@pytest.mark.slow
def test_planted_symlinks_leak_nothing_into_the_run_folder(tmp_path):
    code = "\n".join([
        "import os",
        f"for name, target in [('env', '/proc/self/environ'), ('passwd', '/etc/passwd'), ('golden.json', {str(GOLDEN)!r}),",
        "                     ('parent_env', '/proc/1/environ')]:",
        "    try:",
        "        os.symlink(target, name)",
        "    except OSError as exc:",
        "        print('symlink', name, exc)",
        "for name, target in [('hard_passwd', '/etc/passwd'), ('hard_golden', " + repr(str(GOLDEN)) + ")]:",
        "    try:",
        "        os.link(target, name)",
        "    except OSError as exc:",
        "        print('link', name, exc)",
        "os.makedirs('sub', exist_ok=True)",
        "os.symlink('/proc/self/environ', 'sub/environ')",
        "print(sorted(os.listdir('.')))",
    ])
    out = tmp_path / "leak"
    with FakeOpenAI([tool_call(code), report(valid_report())]) as srv:
        p = run_cli(out, srv.url)
    assert p.returncode == 0, p.stdout + p.stderr
    listing = trajectory(out, records(out)[W1])["cells"][0]["stdout"]
    assert all(f"'{n}'" in listing for n in ("env", "passwd", "golden.json", "sub")), listing  # the probe was planted
    host_passwd = Path("/etc/passwd").read_bytes().splitlines()[0]
    found = []
    for f in out.rglob("*"):
        if f.is_symlink():
            found.append(f"{f} is a symlink")
            continue
        if f.is_file():
            data = f.read_bytes()
            for what, needle in (("API key", SECRET.encode()), ("golden", GOLDEN_MARK), ("/etc/passwd", host_passwd)):
                if needle in data:
                    found.append(f"{what} in {f.relative_to(out)}")
    assert not found, found


# ------------------------------------------------------------------ bad inputs: one sentence, non-zero, nothing written


@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("faults") / "base"
    execute(RunConfig(model="scripted/first", out=out, worlds=[W1], levels=["L1"]))
    return out


@pytest.fixture
def run_copy(base_run, tmp_path) -> Path:
    dst = tmp_path / "base"
    shutil.copytree(base_run, dst)
    return dst


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def snapshot(root: Path) -> dict[str, bytes]:
    """Every data file of a run folder (the harness lock names its latest holder: not data)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != ".harness.lock"}


RULING = """  - id: {id}
    run: base
    model: scripted/first
    world: {world}
    replicate: 0
    component: {component}
    deterministic: CLEAN-CORRECT
    ruling: {ruling}
    adjudicator: A. Judge
    date: {date}
    rationale: read the report against the rubric
"""


def ledger(path: Path, *entries: dict) -> Path:
    body = "".join(RULING.format(**{"id": i + 1, "world": W1, "component": "state", "ruling": "MISS",
                                    "date": "2026-11-01", **e}) for i, e in enumerate(entries))
    path.write_text(f"kind: adjudication\ncampaign: {path.stem}\nentries:\n{body}")
    return path


def test_contradicting_rulings_in_two_ledger_files_fail_naming_both(tmp_path, capsys):
    a = ledger(tmp_path / "a.yaml", {"ruling": "MISS"})
    b = ledger(tmp_path / "b.yaml", {"ruling": "CLEAN-CORRECT"})
    rc, _, err = cli(capsys, "ledger", "validate", a, b)
    assert rc == 2 and f"{b}:4" in err and f"{a}:4" in err and "contradicts" in err
    from benchmark.score.aggregate import load_rulings
    from benchmark.errors import BenchmarkError

    with pytest.raises(BenchmarkError, match="contradicts"):
        load_rulings([a, b])


@pytest.mark.parametrize("entry, line, needle", [
    ({"component": "A", "ruling": "0.5", "deterministic": "1.0"}, 9, "has no component 'A'"),
    ({"component": "score", "ruling": "true"}, 11, "boolean"),
    ({"date": "2026-02-30"}, 13, "not a real date"),
])
def test_bad_rulings_name_file_line_and_field(tmp_path, capsys, entry, line, needle):
    p = ledger(tmp_path / "bad.yaml", entry)
    before = p.read_bytes()
    rc, _, err = cli(capsys, "ledger", "validate", p)
    assert rc == 2 and needle in err, err
    assert f"{p}:{line}:" in err, err
    assert p.read_bytes() == before


def test_duplicate_yaml_keys_are_refused_with_key_and_line(tmp_path, capsys):
    p = ledger(tmp_path / "dup.yaml", {})
    p.write_text(p.read_text().replace("    ruling: MISS\n", "    ruling: MISS\n    ruling: CLEAN-CORRECT\n"))
    rc, _, err = cli(capsys, "ledger", "validate", p)
    assert rc == 2 and "duplicate key 'ruling'" in err and f"{p}:12" in err


CARD = "date: {date}\nsource: test\nmodels:\n  {key}:\n    input: {price}\n    output: 1\n"


@pytest.mark.parametrize("name, fields, needle", [
    ("2026-10-01", {"key": "'*'"}, "catch-all"),
    ("2026-10-01", {"key": "'*/gpt-x'"}, "catch-all"),
    ("2026-10-01", {"price": ".inf"}, "finite"),
    ("2026-10-01", {"price": ".nan"}, "finite"),
    ("2026-10-01", {"price": "-2"}, "greater than or equal to 0"),
    ("2026-02-30", {"date": "2026-02-30"}, "not a real date"),
    ("2026-10-02", {}, "does not match the file name"),
])
def test_bad_rate_cards_stop_the_leaderboard_naming_file_and_field(tmp_path, capsys, name, fields, needle):
    from tests.aggregate_helpers import rec, write_run

    run = write_run(tmp_path / "runs", "r", [rec(W1, "scrna", "L1", 50.0, model="m/a")], "m/a")
    cards = tmp_path / "pricing"
    cards.mkdir()
    (cards / f"{name}.yaml").write_text(CARD.format(**{"date": "2026-10-01", "key": "m/a", "price": "1", **fields}))
    rc, _, err = cli(capsys, "leaderboard", "--runs", run, "--pricing", cards, "--out", tmp_path / "lb", "--ledgers")
    assert rc == 2 and needle in err and f"{name}.yaml" in err, err
    assert not (tmp_path / "lb").exists()


def _mini_suite(tmp_path: Path, edit) -> Path:
    root = tmp_path / "worlds"
    src = REPO_ROOT / "worlds/scrna"
    (root / "scrna/L1/integrity").mkdir(parents=True)
    shutil.copy(src / "track.yaml", root / "scrna/track.yaml")
    shutil.copy(src / "L1/integrity/family.yaml", root / "scrna/L1/integrity/family.yaml")
    w = root / "scrna/L1/integrity/clean.yaml"
    w.write_bytes(edit((src / "L1/integrity/clean.yaml").read_bytes()))
    return w


@pytest.mark.parametrize("edit, needle", [
    (lambda b: b.replace(b"title:", b"title: caf\xe9 \xff", 1), "not valid UTF-8"),
    (lambda b: b.replace(b"\nseed:", b"\nseed: 1\nseed:", 1), "duplicate key 'seed'"),
    (lambda b: b.replace(b"\nseed: 101", b"\nseed: true", 1), "field 'seed'"),
])
def test_bad_manifests_name_file_and_line(tmp_path, capsys, edit, needle):
    from benchmark.errors import ManifestError
    from benchmark.suite.loader import Suite

    w = _mini_suite(tmp_path, edit)
    with pytest.raises(ManifestError, match=needle) as exc:
        Suite(tmp_path / "worlds")
    assert str(w) in str(exc.value) and f"{w}:" in str(exc.value)


def test_corrupt_trajectory_and_config_name_the_file(run_copy, capsys):
    rec = RunStore(run_copy).results()[0]
    (run_copy / rec.trajectory).write_text('{"world_id": ')
    rc, _, err = cli(capsys, "grade", run_copy)
    assert rc == 2 and rec.trajectory in err and "unexpected" not in err
    (run_copy / "config.json").write_text("{not json")
    before = snapshot(run_copy)
    rc, _, err = cli(capsys, "run", "--model", "scripted/first", "--out", run_copy, "--worlds", W1, "--levels", "L1", "--resume")
    assert rc == 2 and "config.json" in err and "unexpected" not in err
    assert snapshot(run_copy) == before


def test_corrupt_middle_line_of_results_is_refused_with_its_line_number(run_copy, capsys):
    path = run_copy / "results.jsonl"
    line = path.read_text().splitlines()[0]
    assert ',"score":' in line
    path.write_text(line.replace(',"score":', ',"score"::', 1) + "\n" + line + "\n")  # a bad line, then a good one
    before = snapshot(run_copy)
    rc, _, err = cli(capsys, "run", "--model", "scripted/first", "--out", run_copy, "--worlds", W1, "--levels", "L1", "--resume")
    assert rc == 2 and f"{path}:1" in err and "delete that line" in err
    assert snapshot(run_copy) == before, "nothing re-run, nothing re-paid"
    path.write_text(line + "\n" + line[:70])  # a torn LAST line (a kill mid-write) is still tolerated
    assert len(RunStore(run_copy).results()) == 1


def test_resume_refuses_a_changed_configuration_naming_the_keys(run_copy, capsys):
    before = snapshot(run_copy)
    rc, _, err = cli(capsys, "run", "--model", "scripted/first", "--out", run_copy, "--worlds", W1, "--levels", "L1",
                     "--resume", "--seed", "7", "--judge", "local/other")
    assert rc == 2 and "field 'seed' was 0, now 7" in err and "'judge'" in err and "--force-config" in err
    assert snapshot(run_copy) == before
    rc, _, err = cli(capsys, "run", "--model", "scripted/first", "--out", run_copy, "--worlds", W1, W2, "--levels", "L1",
                     "--resume")
    assert rc == 2 and "'worlds'" in err
    rc, out, err = cli(capsys, "run", "--model", "scripted/first", "--out", run_copy, "--worlds", W1, "--levels", "L1",
                       "--resume", "--seed", "7", "--force-config")
    assert rc == 0, err
    cfg = json.loads((run_copy / "config.json").read_text())
    assert cfg["seed"] == 7 and cfg["previous_configs"] == [{"seed": 0}]


def test_worlds_grade_on_a_malformed_report_exits_non_zero(tmp_path, capsys):
    bad = tmp_path / "report.json"
    bad.write_text('{"assessment": "usable", ')
    rc, out, _ = cli(capsys, "worlds", "grade", W1, bad)
    assert rc != 0 and "NONCOMPLIANT" in out


def test_ledger_pending_escapes_agent_text(run_copy, capsys, tmp_path):
    from benchmark.oversight.verify import Discrepancy, Verification
    from benchmark.run.records import RoleUsage

    evil = "\x1b[2J\x1b[H\x1b]0;owned\x07[bold red]fake[/] \x9b31m\x07 done"
    rec = RunStore(run_copy).results()[0]
    tp = run_copy / rec.trajectory
    traj = json.loads(tp.read_text())
    traj["report_raw"] = evil
    tp.write_text(json.dumps(traj))
    v = Verification(key=f"{W1}__r0", world_id=W1, replicate=0, level="L1", verifier_model="scripted/first", parsed=True,
                     reason=evil, discrepancies=[Discrepancy(component="state", deterministic="CLEAN-CORRECT", verifier="MISS")],
                     usage=RoleUsage(model="scripted/first"))
    (run_copy / "verification.jsonl").write_text(v.model_dump_json() + "\n")
    empty = tmp_path / "none.yaml"
    empty.write_text("kind: adjudication\ncampaign: none\nentries: []\n")
    rc, out, err = cli(capsys, "ledger", "pending", run_copy, "--ledgers", empty)
    assert rc == 0 and "1 pending item" in out
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert "fake" in out and "done" in out, "the text itself is still shown"


def test_error_rows_never_enter_a_mean_and_count_as_missing_coverage():
    from benchmark.score.aggregate import Options, aggregate
    from tests.aggregate_helpers import rec, run_input, zero_pricing

    ok = rec("t.L1.f.a", "t", "L1", 80.0)
    failed = rec("t.L1.f.b", "t", "L1").model_copy(update={"status": "model_error", "score": None, "grade": None})
    other = [rec("t.L1.f.a", "t", "L1", 60.0, model="m/b"), rec("t.L1.f.b", "t", "L1", 60.0, model="m/b")]
    data = aggregate([run_input([ok, failed]), run_input(other, run_id="run-b")], {}, zero_pricing(),
                     Options(bootstrap_draws=0, permutation_draws=0))
    a = next(s for s in data["models"] if s["model"] == "m/a")
    assert a["levels"]["L1"]["mean"] == 80.0, "the failed world is not a 0"
    assert a["coverage"]["answered"] == 1 and a["coverage"]["missing"] == 1 and a["coverage"]["errors"] == 1
    assert not a["ranked"] and a["rank"] is None
    b = next(s for s in data["models"] if s["model"] == "m/b")
    assert b["ranked"] and b["rank"] == 1


# ------------------------------------------------------------------ a hostile endpoint: replies bounded before parsing


def _completion_body(message: dict, usage: dict | None = None, choices: int = 1) -> bytes:
    return json.dumps({"id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "fake-model",
                       "choices": [{"index": i, "message": message, "finish_reason": "stop"} for i in range(choices)],
                       "usage": usage or {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}).encode()


def _huge_tool_call(nbytes: int) -> bytes:
    tc = {"id": "call_1", "type": "function", "function": {"name": "run_python",
                                                          "arguments": json.dumps({"code": "#" + "x" * nbytes})}}
    return _completion_body({"role": "assistant", "content": None, "tool_calls": [tc]})


class _RawServer:
    """127.0.0.1 only: every POST is answered by `answer(handler)`, which writes status, headers and body itself."""

    def __init__(self, answer):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    answer(self)
                except (BrokenPipeError, ConnectionResetError):  # the client stopped reading: what we want
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def _chunked(handler, chunks, headers: dict | None = None, pause_s: float = 0.0):
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Transfer-Encoding", "chunked")
    for k, v in (headers or {}).items():
        handler.send_header(k, v)
    handler.end_headers()
    for c in chunks:
        if not c:
            continue
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(c), c))
        handler.wfile.flush()
        if pause_s:
            time.sleep(pause_s)
    handler.wfile.write(b"0\r\n\r\n")


def test_a_30mb_reply_is_a_model_fault_within_the_deadline(endpoint):
    """Issue 19: a 30 MB tool-call reply took 650 s of one attempt. Now it is refused at the byte cap, in time."""
    policy = RetryPolicy(attempts=2, timeout_s=3.0, deadline_s=6.0, base_s=0.2)
    with FakeOpenAI(default=Reply(body=_huge_tool_call(30_000_000))) as srv:
        endpoint(srv)
        t0 = time.monotonic()
        resp, rec = call_model(MODEL, MSG, step=0, policy=policy)
        wall = time.monotonic() - t0
    assert resp is None and not rec.ok, "a 30 MB reply was accepted"
    assert "byte cap" in rec.error and wall < policy.deadline_s, (wall, rec.error)
    assert [a.http_status for a in rec.attempts] == [200, 200], "a refused 200 is retried like a malformed body"


def test_a_chunked_30mb_reply_is_cut_as_it_streams_in(endpoint, monkeypatch):
    """No Content-Length to refuse up front: the body is counted as it arrives and reading stops at the cap."""
    body = _huge_tool_call(30_000_000)
    pieces = [body[i:i + (1 << 16)] for i in range(0, len(body), 1 << 16)]
    answer = lambda h: _chunked(h, pieces)  # noqa: E731
    monkeypatch.setenv("BENCHMARK_MODEL_MAX_REPLY_BYTES", str(1 << 20))
    with _RawServer(answer) as srv:
        endpoint(srv)
        t0 = time.monotonic()
        resp, rec = call_model(MODEL, MSG, step=0, policy=RetryPolicy(attempts=1, timeout_s=5.0, deadline_s=10.0))
        wall = time.monotonic() - t0
    assert resp is None and "larger than the 1048576 byte cap" in rec.error, rec.error
    assert wall < 5.0, wall


def test_a_gzip_bomb_reply_is_capped_on_the_inflated_bytes(endpoint):
    """A reply compressed though identity was asked: 30 MB inflated from ~30 KB is cut at the cap, not inflated whole."""
    import gzip

    packed = gzip.compress(_huge_tool_call(30_000_000))
    with _RawServer(lambda h: _chunked(h, [packed], {"Content-Encoding": "gzip"})) as srv:
        endpoint(srv)
        resp, rec = call_model(MODEL, MSG, step=0, policy=RetryPolicy(attempts=1, timeout_s=5.0, deadline_s=10.0))
    assert resp is None and "byte cap" in rec.error, rec.error
    small = gzip.compress(_completion_body({"role": "assistant", "content": "fine"}))
    with _RawServer(lambda h: _chunked(h, [small], {"Content-Encoding": "gzip"})) as srv:
        endpoint(srv)
        resp, rec = call_model(MODEL, MSG, step=0, policy=RetryPolicy(attempts=1, timeout_s=5.0, deadline_s=10.0))
    assert rec.ok and resp.choices[0].message.content == "fine", rec.error


def test_a_reply_that_drips_in_is_cut_at_the_attempts_deadline(endpoint):
    """httpx's timeout bounds each read, so a body sent a few bytes at a time never timed out; the attempt does now."""
    body = _completion_body({"role": "assistant", "content": "late"})
    step = max(1, len(body) // 40)
    pieces = [body[i:i + step] for i in range(0, len(body), step)]  # ~40 pieces, 0.25 s apart: ~10 s in all
    with _RawServer(lambda h: _chunked(h, pieces, pause_s=0.25)) as srv:
        endpoint(srv)
        t0 = time.monotonic()
        resp, rec = call_model(MODEL, MSG, step=0, policy=RetryPolicy(attempts=1, timeout_s=2.0, deadline_s=4.0))
        wall = time.monotonic() - t0
    assert resp is None and wall < 3.0, (wall, rec.error)
    assert "deadline" in rec.error or "within the attempt" in rec.error, rec.error


def test_litellms_own_processing_is_inside_the_attempts_deadline(endpoint, monkeypatch):
    """A 3 MB reply took 19.7 s against a 10 s deadline: the time litellm spends after the bytes are in counts too."""
    import litellm

    real = litellm.completion

    def slow_after_reading(**kw):  # the reply is read in time, then litellm's post-processing takes 30 s
        resp = real(**kw)
        time.sleep(30)
        return resp

    monkeypatch.setattr(litellm, "completion", slow_after_reading)
    with FakeOpenAI(default=report({"a": 1})) as srv:
        endpoint(srv)
        t0 = time.monotonic()
        resp, rec = call_model(MODEL, MSG, step=0, policy=RetryPolicy(attempts=3, timeout_s=1.5, deadline_s=4.0, base_s=0.2))
        wall = time.monotonic() - t0
    assert resp is None and wall < 5.5, (wall, rec.error)
    assert "within the attempt's" in rec.attempts[0].error, rec.attempts


@pytest.mark.parametrize("usage", [
    {"prompt_tokens": -1_000_000_000_000, "completion_tokens": 7},
    {"prompt_tokens": 11, "completion_tokens": -1},
    {"prompt_tokens": 999_000_000_000, "completion_tokens": 7},
    {"prompt_tokens": float("nan"), "completion_tokens": 7},
    {"prompt_tokens": "11", "completion_tokens": float("inf")},
])
def test_negative_or_absurd_token_counts_are_a_model_fault_not_a_figure(endpoint, usage):
    """An endpoint reported prompt_tokens = -1e12: it was recorded and summed (999000000.00 tokens on the board)."""
    with FakeOpenAI(default=Reply(body=_completion_body({"role": "assistant", "content": "hi"}, usage))) as srv:
        endpoint(srv)
        resp, rec = call_model(MODEL, MSG, step=0, policy=RetryPolicy(attempts=2, base_s=0.1))
    assert resp is None and not rec.ok, f"usage {usage} was accepted: tokens_in={rec.tokens_in} out={rec.tokens_out}"
    assert rec.tokens_in == 0 and rec.tokens_out == 0
    assert "not a token count" in rec.error and len(rec.attempts) == 2, rec.error


@pytest.mark.slow
def test_an_endpoint_reporting_negative_tokens_is_a_model_error_in_the_run_never_a_figure(tmp_path):
    """The probe of issue 19 through the real `run` path: prompt_tokens = -1e12 was recorded and summed."""
    out = tmp_path / "negative"
    body = _completion_body({"role": "assistant", "content": json.dumps(valid_report())},
                            {"prompt_tokens": -1_000_000_000_000, "completion_tokens": 7, "total_tokens": 0})
    with FakeOpenAI(default=Reply(body=body)) as srv:
        p = run_cli(out, srv.url, env={"BENCHMARK_MODEL_ATTEMPTS": "2"})
    assert p.returncode == 3, p.stdout + p.stderr
    rec = records(out)[W1]
    assert rec.status == "model_error" and rec.score is None and "not a token count" in rec.error, rec
    assert rec.tokens_in == 0 and rec.tokens_out == 0
    assert [a["http_status"] for a in trajectory(out, rec)["calls"][0]["attempts"]] == [200, 200]


def test_a_provider_without_a_seed_parameter_is_called_without_one():
    """Anthropic's API takes no sampling seed and litellm refuses a call that passes one (UnsupportedParamsError):
    every anthropic/ model failed at once. The seed is sent only where the provider accepts it."""
    from benchmark.run.agent import takes_seed

    assert not takes_seed("anthropic/claude-sonnet-4-5")
    assert takes_seed("openai/gpt-4o") and takes_seed("local/smollm2") and takes_seed("scripted/oracle")


def test_a_row_claims_the_paid_requests_of_the_fault_it_replaced(tmp_path):
    """Issue 40: the last row of a pair is the one that counts, so the tokens of a fault row that `--resume` replaced
    (and of any attempt whose record was lost) vanished from $/task. The new row names them in `lost_usage`
    (benchmark.run.journal); an offline run journals nothing and carries no attempt id."""
    out = tmp_path / "run"
    with FakeOpenAI(script=[tool_call("print(1)"), error(400, "bad request")], default=report(valid_report())) as srv:
        p = run_cli(out, srv.url, env={"BENCHMARK_MODEL_ATTEMPTS": "1"})
        first = records(out)[W1]
        assert first.status == "model_error" and first.calls == 1 and first.attempt, (p.stdout + p.stderr)[-2000:]
        assert first.lost_usage == {}
        p = run_cli(out, srv.url, "--resume")
        assert p.returncode == 0, (p.stdout + p.stderr)[-2000:]
    row = records(out)[W1]
    assert row.status == "graded" and row.attempt != first.attempt
    lost = row.lost_usage["agent"]
    assert (lost.calls, lost.tokens_in, lost.tokens_out, lost.estimated_calls) == (1, 11, 7, 0), row.lost_usage
    off = tmp_path / "off"
    assert main(["run", "--model", "scripted/oracle", "--out", str(off), "--levels", "L1", "--worlds", W1]) == 0
    assert not (off / "calls.jsonl").exists() and RunStore(off).results()[0].attempt is None
