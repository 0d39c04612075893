"""`run` end to end through litellm and the real sandbox: records, resume after kill -9, regrade, verify, ledger."""
from __future__ import annotations

from benchmark.run.chain import chain_of
import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from benchmark.oversight.adjudicate import pending, rule, validate_ledgers
from benchmark.errors import BenchmarkError, ManifestError
from benchmark.score.aggregate import apply_rulings
from benchmark.oversight.ledger import effective_rulings, load_ledger
from benchmark.suite.loader import REPO_ROOT, load_suite
from benchmark.score.regrade import regrade
from benchmark.run.episodes import RunConfig, execute
from benchmark.run.store import RunStore
from benchmark.oversight.verify import verify_run

SLICE = ["scrna.L1.integrity.clean", "scrna.L1.integrity.doublets", "scrna.L2.markers.clean"]
FIELDS = {"world_id", "track", "level", "family", "class", "model", "replicate", "status", "score", "grade",
          "tokens_in", "tokens_out", "calls", "code_cells", "wall_s"}


@pytest.fixture(scope="module")
def first_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "first"
    execute(RunConfig(model="scripted/first", out=out, worlds=SLICE, levels=["L1", "L2"], concurrency=2))
    return out


def test_run_writes_results_and_trajectories(first_run):
    lines = [json.loads(x) for x in (first_run / "results.jsonl").read_text().splitlines()]
    assert sorted(x["world_id"] for x in lines) == sorted(SLICE)
    for x in lines:
        assert FIELDS <= set(x), FIELDS - set(x)
        assert x["model"] == "scripted/first" and 0 <= x["score"] <= 100
        assert (first_run / x["trajectory"]).exists()
        assert x["tokens_in"] == 0 and x["calls"] == 1, "scripted agents report zero tokens and answer in one call"
        began, ended = datetime.fromisoformat(x["started_at"]), datetime.fromisoformat(x["finished_at"])
        assert began.utcoffset() == timedelta(0) and (ended - began).total_seconds() >= x["wall_s"] - 0.01, x
    cfg = json.loads((first_run / "config.json").read_text())
    assert cfg["model"] == "scripted/first" and "tool_versions" in cfg and cfg["run_id"] == "first"


def test_run_refuses_to_overwrite_without_resume(first_run):
    from benchmark.errors import BenchmarkError

    with pytest.raises(BenchmarkError, match="--resume"):
        execute(RunConfig(model="scripted/first", out=first_run, worlds=SLICE, levels=["L1", "L2"]))


def test_regrade_reproduces_recorded_grades(first_run):
    rows = regrade(first_run)
    assert len(rows) == len(SLICE)
    for key, new, old in rows:
        assert old is not None and new.model_dump() == old.model_dump(), key


def test_verifier_disagreement_reaches_the_ledger(first_run, tmp_path):
    before = (first_run / "results.jsonl").read_bytes()
    new = verify_run(first_run, "scripted/first")
    assert len(new) == len(SLICE) and all(v.parsed for v in new)
    items = pending(first_run, ledgers=[])
    assert items, "scripted/first as verifier says DIAGNOSE-AND-ACT / all zeros: it must disagree somewhere"
    item = items[0]
    assert item.rubric and item.report and item.verifier_model == "scripted/first"
    ledger_path = tmp_path / "campaign.yaml"
    states = _states_of(item.world_id)  # an L1 state ruling names a state the world's kind allows
    value = states[1] if item.discrepancy.component == "state" else "50" if item.discrepancy.component == "score" else "0.5"
    r = rule(first_run, ledger_path, item.world_id, item.discrepancy.component, value, "Test Adjudicator",
             "the rubric's check is met by the report", replicate=item.replicate)
    assert r.id == 1 and r.run == "first"
    led = load_ledger(ledger_path)
    assert len(pending(first_run, ledgers=[led])) == len(items) - 1
    assert (first_run / "results.jsonl").read_bytes() == before, "rulings never mutate run records"
    rec = next(x for x in RunStore(first_run).results() if x.world_id == item.world_id and x.replicate == item.replicate)
    eff = apply_rulings(rec, "first", effective_rulings([led]))
    assert eff.rulings == [1] and eff.score != rec.score, "the ruling changes the score used by the aggregate"
    assert validate_ledgers([ledger_path], [first_run.parent]) == []
    # a second, contradicting ruling without 'supersedes' is refused, and the file is left intact
    text = ledger_path.read_text()
    with pytest.raises(ManifestError, match="contradicts"):
        rule(first_run, ledger_path, item.world_id, item.discrepancy.component,
             states[2] if item.discrepancy.component == "state" else "10" if item.discrepancy.component == "score" else "0.1",
             "Other", "disagree", replicate=item.replicate)
    assert ledger_path.read_text() == text


def _states_of(world_id: str) -> tuple[str, ...]:
    from graders.l1 import STATES_BY_EXPECT

    w = load_suite().worlds[world_id].world
    return STATES_BY_EXPECT[w.rubric.expect] if w.level == "L1" else ()


def test_a_state_ruling_must_fit_its_worlds_kind(first_run, tmp_path):
    """Issue 41 item 1: MISS on a clean world or CLEAN-CORRECT on a defect world contradicts the world; `ledger rule`
    refuses it naming the states the world allows, writes nothing, and `ledger validate` names such an entry."""
    ledger_path = tmp_path / "kinds.yaml"
    for world, wrong, right in (("scrna.L1.integrity.clean", "MISS", "OVER-CAUTIOUS"),
                                ("scrna.L1.integrity.doublets", "CLEAN-CORRECT", "NOTICE-WRONG")):
        before = ledger_path.read_text() if ledger_path.exists() else None
        with pytest.raises(BenchmarkError, match=f"'{wrong}' is not a state of {world}.*use one of .*{right}"):
            rule(first_run, ledger_path, world, "state", wrong, "A", "r")
        assert (ledger_path.read_text() if ledger_path.exists() else None) == before, "nothing written"
        rule(first_run, ledger_path, world, "state", right, "A", "r")
    assert validate_ledgers([ledger_path], [first_run.parent]) == []
    ledger_path.write_text(ledger_path.read_text().replace("ruling: OVER-CAUTIOUS", "ruling: MISS"))
    problems = validate_ledgers([ledger_path], [first_run.parent])
    assert len(problems) == 1 and "'MISS' is not a state of scrna.L1.integrity.clean" in problems[0], problems
    assert f"{ledger_path}:" in problems[0]


def test_ledger_validate_names_file_and_line(tmp_path, first_run):
    p = tmp_path / "broken.yaml"
    p.write_text("kind: adjudication\ncampaign: c\nentries:\n  - id: 1\n    run: first\n    model: m\n    world: nope.L1.x.y\n"
                 "    component: score\n    deterministic: 10\n    ruling: 150\n    adjudicator: a\n    date: 2026-11-29\n    rationale: r\n")
    problems = validate_ledgers([p], [first_run.parent])
    assert len(problems) == 1 and f"{p}:10" in problems[0] and "0 to 100" in problems[0]
    p.write_text(p.read_text().replace("ruling: 150", "ruling: 50"))
    problems = validate_ledgers([p], [first_run.parent])
    assert len(problems) == 1 and f"{p}:7" in problems[0] and "unknown world" in problems[0]
    p.write_text(p.read_text().replace("world: nope.L1.x.y", f"world: {SLICE[0]}").replace("run: first", "run: other"))
    problems = validate_ledgers([p], [first_run.parent])
    assert len(problems) == 1 and f"{p}:5" in problems[0] and "unknown run" in problems[0]


@pytest.mark.slow
def test_kill_minus_nine_then_resume(tmp_path):
    """A run of the real local LLM is killed mid-way; --resume finishes it without re-running finished worlds."""
    out = tmp_path / "smol"
    worlds = ["scrna.L1.integrity.clean", "scrna.L1.integrity.doublets"]  # one at a time: killed in the second
    cmd = [sys.executable, "-m", "benchmark", "run", "--model", "local/smollm2", "--levels", "L1", "--out", str(out),
           "--concurrency", "1", "--worlds", *worlds]
    env = dict(os.environ, BENCHMARK_PROGRESS="0")
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    results = out / "results.jsonl"
    deadline = time.time() + 900
    while time.time() < deadline and (not results.exists() or not results.read_text().strip()):
        time.sleep(0.5)
        assert proc.poll() is None, "the run ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = RunStore(out).results()
    assert 1 <= len(first) < len(worlds), "killed mid-way"
    finished = {r.world_id: (out / r.trajectory).stat().st_mtime_ns for r in first}
    subprocess.run(cmd + ["--resume"], cwd=REPO_ROOT, env=env, check=True, capture_output=True, timeout=1200)
    final = RunStore(out).results()
    assert sorted(r.world_id for r in final) == sorted(worlds)
    lines = [json.loads(x)["world_id"] for x in results.read_text().splitlines() if x.strip()]
    assert len(lines) == len(set(lines)) == len(worlds), "no world was recorded twice"
    for wid, mtime in finished.items():
        rec = next(r for r in final if r.world_id == wid)
        assert (out / rec.trajectory).stat().st_mtime_ns == mtime, f"{wid} was re-run"
    assert all(r.tokens_in > 0 and r.tokens_out > 0 for r in final if r.status != "model_error"), "real token counts"


def test_a_line_cut_by_a_kill_is_skipped_and_cut_off(first_run, tmp_path):
    """A torn last line is no record: it is skipped on read and cut off by the next append, so every line but the
    last is always a whole record (and a bad line anywhere else is corruption, refused with its number)."""
    store = RunStore(tmp_path / "torn")
    store.init({"model": "scripted/first", "replicates": 1, "seed": 0}, resume=False)
    rec = RunStore(first_run).results()[0]
    line = rec.model_dump_json(by_alias=True)
    store.results_path.write_text(line + "\n" + line[:40])  # a kill mid-write
    assert [r.world_id for r in store.results()] == [rec.world_id]
    store.append(rec)
    assert [r.world_id for r in store.results()] == [rec.world_id]
    assert [chain_of(x)[0] for x in store.results_path.read_bytes().splitlines()] == [chain_of(line.encode())[0]] * 2  # rows, chains aside
    store.results_path.write_text(line)  # a whole record that lost only its newline is kept and closed off
    store.append(rec)
    assert [chain_of(x)[0] for x in store.results_path.read_bytes().splitlines()] == [chain_of(line.encode())[0]] * 2  # rows, chains aside


def test_a_fresh_clones_missing_worlds_are_built_in_parallel_then_verified(tmp_path, monkeypatch):
    """`run` on a fresh clone builds the worlds its cache lacks in one spawned process per core (251 worlds are
    ~110 CPU-s of building) and then verifies every one against its lock; worlds already built are not rebuilt."""
    import benchmark.suite.freeze as F
    import benchmark.run.episodes as R
    from benchmark.suite.loader import load_suite

    monkeypatch.setenv("BENCHMARK_CACHE", str(tmp_path))  # the spawned builders' cache
    monkeypatch.setattr(F, "CACHE_ROOT", tmp_path)  # this process's
    monkeypatch.setattr(R, "default_jobs", lambda: 2)
    refs = [r for r in load_suite().worlds.values() if r.world.family == "crispr.L1.integrity"][:3]
    R.build_missing(refs)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(r.id for r in refs)
    for r in refs:
        assert F.ensure_built(r) == tmp_path / r.id  # the lock's files, byte for byte
    stamp = {r.id: (tmp_path / r.id).stat().st_mtime_ns for r in refs}
    R.build_missing(refs)
    assert {r.id: (tmp_path / r.id).stat().st_mtime_ns for r in refs} == stamp, "built worlds are not rebuilt"


def test_verify_with_the_evaluated_model_warns(first_run, tmp_path, capsys):
    """Issue 41 item 4: a verifier that is the run's own model (or judge, or reviewer) is named as no independent check."""
    import shutil

    from benchmark.cli import main
    from benchmark.oversight.verify import self_verification

    assert "is the evaluated model" in self_verification(first_run, "scripted/first")
    assert self_verification(first_run, "scripted/oracle") is None
    run = tmp_path / "copy"
    shutil.copytree(first_run, run)
    assert main(["verify", str(run), "--verifier", "scripted/first"]) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "not an independent check" in err
