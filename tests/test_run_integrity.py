"""A run folder holds against a second harness and a forged results file (issue 19, deliverables 3 and 4)."""
import json
import subprocess
import sys
import time

import pytest

from benchmark.errors import BenchmarkError
from benchmark.run.store import HarnessLock, RunStore


def test_a_second_harness_on_the_same_folder_stops_at_once_naming_the_holder(tmp_path):
    first = RunStore(tmp_path)
    first.init({"model": "scripted/oracle"}, resume=False)
    with pytest.raises(BenchmarkError, match=r"in use by another harness \(pid \d+ on .*\); wait"):
        RunStore(tmp_path).init({"model": "scripted/oracle"}, resume=True)
    first.close()
    again = RunStore(tmp_path)
    again.init({"model": "scripted/oracle"}, resume=True)
    again.close()


def test_a_killed_harness_lock_is_taken_over(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", f"from benchmark.run.store import HarnessLock; import time; "
                               f"HarnessLock({str(tmp_path)!r}); print('held', flush=True); time.sleep(120)"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(BenchmarkError, match="in use"):
        HarnessLock(tmp_path)
    holder.kill()
    holder.wait()
    deadline = time.time() + 10
    while True:
        try:
            HarnessLock(tmp_path).close()
            break
        except BenchmarkError:
            assert time.time() < deadline
            time.sleep(0.1)


def _record(**over):
    rec = {"world_id": "histone.L1.integrity.clean", "track": "histone", "level": "L1", "family": "histone.L1.integrity",
           "class": "clean", "model": "m", "replicate": 0, "seed": 0, "status": "graded", "score": 100.0,
           "grade": {"world_id": "histone.L1.integrity.clean", "level": "L1", "status": "CLEAN-CORRECT", "native": 3.0,
                     "score": 100.0, "reason": "sound data accepted", "grader": "graders.l1", "grader_version": "4"},
           "tokens_in": 10, "tokens_out": 5, "calls": 1, "failed_calls": 0, "retries": 0, "code_cells": 1,
           "wall_s": 1.0, "violations": [], "audit_flags": [], "trajectory": "trajectories/x.json",
           "harness_version": "1"}
    rec.update(over)
    return rec


@pytest.mark.parametrize("over,needle", [
    ({"score": float("nan")}, "outside"),
    ({"score": 1e9}, "outside"),
    ({"score": -50.0}, "outside"),
    ({"status": "model_error", "score": 100.0}, "carries no score"),
    ({"trajectory": "../../../../etc/hostname"}, "leaves the run folder"),
    ({"trajectory": "/etc/hostname"}, "leaves the run folder"),
    ({"tokens_in": -1}, "greater than or equal"),
    ({"tokens_out": 10**15}, "plausible"),
    ({"wall_s": float("inf")}, "finite"),
    ({"started_at": "yesterday"}, "ISO 8601"),
    ({"finished_at": "2026-12-01T22:00:00"}, "time zone"),
    ({"world_id": "../../etc"}, "not a world id"),
])
def test_an_absurd_result_line_is_refused_with_file_and_line(tmp_path, over, needle):
    good = json.dumps(_record())
    (tmp_path / "results.jsonl").write_text(good + "\n" + json.dumps(_record(**over), allow_nan=True) + "\n" + good + "\n")
    with pytest.raises(BenchmarkError) as exc:
        RunStore(tmp_path).results()
    assert f"results.jsonl:2:" in str(exc.value) and needle in str(exc.value), str(exc.value)


def test_an_unknown_world_is_refused_by_the_leaderboard_reader(tmp_path):
    from benchmark.score.aggregate import load_run

    (tmp_path / "config.json").write_text(json.dumps({"model": "m", "levels": ["L1"]}))
    (tmp_path / "results.jsonl").write_text(json.dumps(_record()) + "\n"
                                            + json.dumps(_record(world_id="histone.L1.integrity.forged")) + "\n")
    with pytest.raises(BenchmarkError, match=r"results.jsonl:2: world 'histone.L1.integrity.forged' is not in this suite"):
        load_run(tmp_path)


def test_a_ledger_nested_5000_deep_is_refused_with_file_and_line(tmp_path):
    """It used to exit 1 with 'unexpected RecursionError ... bug'."""
    from benchmark.errors import ManifestError
    from benchmark.oversight.ledger import load_ledger

    p = tmp_path / "deep.yaml"
    p.write_text("kind: adjudication\nrulings:\n- note: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ManifestError, match=r"deep.yaml:3: .*(nests deeper than 64 levels|maximum nesting depth)"):
        load_ledger(p)


def test_an_edited_score_is_refused_on_read_and_a_regrade_repairs_it(tmp_path):
    """Issue 40: a row's `score` raised to 100 while its own grade says otherwise ranked 100.0 on the leaderboard with
    no warning. Every reader (leaderboard, view, export, ledger) now refuses the row, naming file:line, and `grade RUN`
    (the one reader that may see it) rewrites the row from its trajectory."""
    from tests.test_cli_usability import cli

    run = tmp_path / "run"
    world = "histone.L1.integrity.pcr_duplicates"
    proc = cli("run", "--model", "scripted/naive", "--worlds", world, "--out", str(run))
    assert proc.returncode == 0, proc.stderr[-2000:]
    path = run / "results.jsonl"
    row = json.loads(path.read_text().splitlines()[0])
    assert row["score"] < 100 and row["grade"]["score"] == row["score"]
    path.write_text(json.dumps({**row, "score": 100.0}) + "\n")
    board = ("leaderboard", "--runs", str(run), "--out", str(tmp_path / "board"))  # never the repository's leaderboard/
    for verb in (board, ("export", "inspect", str(run), "--out", str(tmp_path / "x.eval"))):
        proc = cli(*verb)
        assert proc.returncode != 0 and f"results.jsonl:1: score 100.0 does not follow from its own grade" in proc.stderr, \
            (verb, proc.stderr[-1500:])
    proc = cli("grade", str(run))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(path.read_text().splitlines()[0])["score"] == row["score"]
    assert cli(*board).returncode == 0


def test_a_giant_line_is_refused_without_reading_it_whole(tmp_path):
    """Issue 40: one 1 GB line of results.jsonl was read whole (3.27 GB peak). A line over the cap is refused,
    naming it, after reading no more than the cap (the probe's line here is 40 MB; the reader's peak stays small)."""
    import resource

    from benchmark.run.store import MAX_RESULT_LINE_BYTES

    good = json.dumps(_record())
    with open(tmp_path / "results.jsonl", "w") as fh:
        fh.write(good + "\n")
        fh.write('{"world_id": "' + "x" * (40 << 20) + '"}\n')
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(BenchmarkError, match=rf"results.jsonl:2: line 2 is longer than {MAX_RESULT_LINE_BYTES} bytes"):
        RunStore(tmp_path).results()
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 30, f"the reader's peak grew by {grown_mb:.0f} MB on a 40 MB line"


def test_a_second_record_of_a_scored_world_is_named_not_silently_dropped(tmp_path):
    """Issue 40: 711k duplicate result lines were de-duplicated silently. A key re-recorded after a scored outcome
    (the harness never re-runs one) is refused, naming both lines; a fault followed by its re-run still reads."""
    good = json.dumps(_record())
    fault = json.dumps(_record(status="model_error", score=None, grade=None, error="HTTP 500"))
    (tmp_path / "results.jsonl").write_text(fault + "\n" + good + "\n")
    assert [r.status for r in RunStore(tmp_path).results()] == ["graded"]
    changed = json.dumps(_record(tokens_in=99))
    (tmp_path / "results.jsonl").write_text(fault + "\n" + good + "\n" + changed + "\n")
    with pytest.raises(BenchmarkError, match=r"results.jsonl:3: a second record of .*\(line 2 already holds"):
        RunStore(tmp_path).results()


def test_a_ruling_with_a_huge_reason_or_a_multi_line_name_is_refused(tmp_path):
    """Issue 40: a 10 MB ruling reason and multi-line adjudicator names were accepted from the web form and `ledger
    rule`; the Ruling model (which both go through) now bounds them."""
    import datetime as dt

    from pydantic import ValidationError

    from benchmark.oversight.ledger import MAX_REASON_CHARS, Ruling

    base = dict(id=1, run="r", model="m", world="scrna.L1.integrity.clean", component="state", deterministic="MISS",
                ruling="CLEAN-CORRECT", adjudicator="ana", date=dt.date(2026, 12, 1), rationale="read the counts")
    Ruling(**base)
    for over, needle in (({"rationale": "x" * (MAX_REASON_CHARS + 1)}, "rationale"),
                         ({"adjudicator": "ana\nrulings:\n- id: 99"}, "one line"),
                         ({"adjudicator": "a" * 500}, "adjudicator")):
        with pytest.raises(ValidationError, match=needle):
            Ruling(**{**base, **over})


def test_the_digest_chain_names_an_edited_or_reordered_row(tmp_path):
    """Issue 40: each row's chain covers the previous one, so `leaderboard --verify` names an edited, removed or
    reordered row, whatever field was changed (here tokens, which no grade check sees); a re-grade re-chains."""
    from tests.test_cli_usability import cli

    run = tmp_path / "run"
    worlds = ["histone.L1.integrity.clean", "histone.L1.integrity.pcr_duplicates", "histone.L1.integrity.clean"]
    proc = cli("run", "--model", "scripted/naive", "--worlds", *worlds[:2], "--out", str(run))
    assert proc.returncode == 0, proc.stderr[-2000:]
    path = run / "results.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    assert len(lines) == 2 and all('"chain":"' in x for x in lines)
    verify = ("leaderboard", "--verify", "--runs", str(run), "--out", str(tmp_path / "lb"))
    assert cli(*verify).returncode == 0
    row = json.loads(lines[1])
    edited = json.dumps({**row, "tokens_in": row["tokens_in"] + 1000}, separators=(",", ":")) + "\n"
    for bad, line in (([lines[0], edited], 2), ([lines[1], lines[0]], 1)):
        path.write_text("".join(bad))
        proc = cli(*verify)
        assert proc.returncode != 0 and f"results.jsonl:{line}: the row's digest does not follow" in proc.stderr, \
            proc.stderr[-1500:]
    path.write_text("".join(lines))
    assert cli("grade", str(run)).returncode == 0 and cli(*verify).returncode == 0
