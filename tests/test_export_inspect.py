"""`export inspect`: recorded runs become Inspect AI eval logs that Inspect's own reader reads back, sample for
sample, with the records' scores, tokens, code cells and L3 protocol."""
from __future__ import annotations

import json
import math

import inspect_ai  # noqa: F401 - installed by setup (pyproject extra `inspect`); the exporter needs it
import pytest
from inspect_ai.log import list_eval_logs, read_eval_log

from benchmark.cli import main
from benchmark.errors import BenchmarkError
from benchmark.run.episodes import RunConfig, execute
from benchmark.run.store import RunStore
from tests.fake_openai import FakeOpenAI, report, tool_call
from tests.test_faults import SECRET, valid_report

L1, L2, L3 = "scrna.L1.integrity.clean", "scrna.L2.markers.clean", "scrna.L3.dossier.b_cell_markers"
HOSTED = "openai/fake-model"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A scripted run over one world of each level, verified by a scripted verifier, and a hosted (fake endpoint) run
    whose agent calls a tool, then writes a fenced ```python block, then reports: real token counts, both cell kinds."""
    from benchmark.oversight.verify import verify_run

    root = tmp_path_factory.mktemp("export")
    scripted = root / "scripted"
    execute(RunConfig(model="scripted/oracle", out=scripted, worlds=[L1, L2, L3], levels=["L1", "L2", "L3"],
                      reviewers=("scripted/first",) * 3, judge="scripted/first"))
    verify_run(scripted, "scripted/first")
    hosted = root / "hosted"
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_BASE", "")
    mp.setenv("OPENAI_API_KEY", SECRET)
    try:
        with FakeOpenAI([tool_call("print(6 * 7)"), report("Checking once more:\n```python\nprint('fenced', 2 + 3)\n```"),
                         report(valid_report(L1))]) as srv:
            mp.setenv("OPENAI_API_BASE", srv.url)
            execute(RunConfig(model=HOSTED, out=hosted, worlds=[L1], levels=["L1"]))
    finally:
        mp.undo()
    return root, scripted, hosted


def _export(root, name, *run_dirs):
    out = root / name
    assert main(["export", "inspect", *map(str, run_dirs), "--out", str(out)]) == 0
    return out


def test_exported_logs_read_back_with_the_records(runs):
    root, scripted, hosted = runs
    out = _export(root, "all", scripted, hosted)
    infos = list_eval_logs(str(out))
    assert len(infos) == 4, [i.name for i in infos]  # (scripted/oracle: L1, L2, L3) + (openai/fake-model: L1)
    assert sorted(i.task for i in infos) == ["discern-L1", "discern-L1", "discern-L2", "discern-L3"]
    assert not list(out.glob(".*")), "no temp file is left behind"

    records = {(r.model, r.world_id, r.replicate): r for d in (scripted, hosted) for r in RunStore(d).results()}
    seen = set()
    for info in infos:
        log = read_eval_log(info.name)
        assert log.status == "success" and log.samples is not None
        level = log.eval.task.removeprefix("discern-")
        mine = {k: r for k, r in records.items() if k[0] == log.eval.model and r.level == level}
        assert len(log.samples) == len(mine) == log.results.total_samples
        assert sorted(s.id for s in log.samples) == sorted(k[1] for k in mine)
        for s in log.samples:
            rec = mine[(log.eval.model, s.id, s.epoch - 1)]
            seen.add((rec.model, rec.world_id))
            score = s.scores["discern"]
            assert score.value == pytest.approx(rec.score)
            assert s.model_usage[rec.model].input_tokens == rec.tokens_in
            assert s.model_usage[rec.model].output_tokens == rec.tokens_out
            assert s.metadata["world_id"] == rec.world_id and s.metadata["track"] == rec.track
            assert s.metadata["level"] == rec.level and s.metadata["world_class"] == rec.world_class
            assert s.metadata["status"] == rec.status and s.metadata["trajectory"] == rec.trajectory
            assert s.metadata["harness_version"] == rec.harness_version
            traj = json.loads(((scripted if rec.model == "scripted/oracle" else hosted) / rec.trajectory).read_text())
            codes = [c["code"] for c in traj["cells"]]
            called = [tc.arguments.get("code") for m in s.messages if m.role == "assistant" for tc in m.tool_calls or []]
            assert called == codes, "every code cell is a run_python tool call, in order"
            tools = [m for m in s.messages if m.role == "tool"]
            assert len(tools) == len(codes) and all(m.function == "run_python" for m in tools)
            if rec.grade is not None:
                assert score.explanation == rec.grade.reason
                assert score.metadata["checks"] == [c.model_dump() for c in rec.grade.checks]
            if rec.level == "L2":
                assert score.metadata["components"] == rec.grade.components
        assert log.results.scores[0].metrics["mean"].value == pytest.approx(
            sum(r.score for r in mine.values()) / len(mine))
        assert log.stats.model_usage[log.eval.model].input_tokens == sum(r.tokens_in for r in mine.values())
    assert seen == {(m, w) for m, w, _ in records}


def test_hosted_run_has_tokens_and_both_kinds_of_code_cell(runs):
    root, scripted, hosted = runs
    out = _export(root, "hosted", hosted)
    (info,) = list_eval_logs(str(out))
    (s,) = read_eval_log(info.name).samples
    rec = RunStore(hosted).results()[0]
    assert rec.tokens_in == 33 and rec.tokens_out == 21, "three calls at 11 in / 7 out (the fake endpoint's usage)"
    assert s.model_usage[HOSTED].input_tokens == 33 and s.model_usage[HOSTED].output_tokens == 21
    tools = [m for m in s.messages if m.role == "tool"]
    assert "42" in tools[0].text and tools[0].metadata["step"] == 0
    assert "fenced 5" in tools[1].text and tools[1].metadata["via"] == "fenced_code"
    fenced_call = next(m for m in s.messages if m.role == "assistant" and (m.metadata or {}).get("via") == "fenced_code")
    assert fenced_call.tool_calls[0].id == tools[1].tool_call_id and "```python" in fenced_call.text
    report_raw = json.loads((hosted / rec.trajectory).read_text())["report_raw"]
    assert s.output.completion == report_raw and json.loads(report_raw) == valid_report(L1)


def test_l3_protocol_and_verifier_verdict_are_in_the_sample(runs):
    root, scripted, _ = runs
    out = _export(root, "scripted", scripted)
    logs = {i.task: read_eval_log(i.name) for i in list_eval_logs(str(out))}
    (s3,) = logs["discern-L3"].samples
    l3 = s3.metadata["l3"]
    assert l3["prior"]["expectation"] and len(l3["rounds"]) == 3 and len(l3["judge_draws"]) == 3
    assert all(len(r["critiques"]) == 3 and "rebuttal" in r for r in l3["rounds"])
    assert "judge_prompt" not in l3 and l3["judge_prompt_chars"] > 0
    assert set(s3.role_usage) >= {"reviewer", "judge"}
    assert logs["discern-L3"].plan.steps[-1].params["judge"] == "scripted/first"
    (s1,) = logs["discern-L1"].samples
    sc = s1.scores["discern"].metadata
    assert sc["verified"] and sc["verifier"][0]["verifier_model"] == "scripted/first"
    assert sc["state"] == RunStore(scripted).results()[0].grade.status


def test_unscored_records_and_errors(runs, tmp_path, capsys):
    root, scripted, _ = runs
    from benchmark.export.inspect_log import sample_score
    from benchmark.run.records import ResultRecord

    rec = next(r for r in RunStore(scripted).results() if r.level == "L1")
    fault = ResultRecord.model_validate({**rec.model_dump(by_alias=True), "status": "model_error", "score": None,
                                         "grade": None, "error": "HTTP 500"})
    s = sample_score(fault, [])
    assert math.isnan(s.value) and s.reason == "model_error" and s.explanation == "HTTP 500"
    assert main(["export", "inspect", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) != 0
    assert "holds no results.jsonl" in capsys.readouterr().err
    from benchmark.export.inspect_log import export_runs

    with pytest.raises(BenchmarkError, match="recorded in both"):
        export_runs([scripted, scripted], tmp_path / "dup")


def test_rulings_target_answer_and_transcript_events(runs, tmp_path):
    """Issue 41 item 6: `--ledgers` applies the rulings in force (the leaderboard's score), `target` is the world's
    expected response, the score's `answer` the report, and events fill Inspect's transcript tab."""
    from benchmark.oversight.adjudicate import rule
    from benchmark.suite.loader import load_suite

    root, scripted, hosted = runs
    ledgers = tmp_path / "ledgers"
    ledgers.mkdir()
    r = rule(scripted, ledgers / "c.yaml", L2, "score", "12.5", "Test Adjudicator", "the table misses a marker")
    out = root / "ruled"
    assert main(["export", "inspect", str(scripted), "--out", str(out), "--ledgers", str(ledgers)]) == 0
    logs = {read_eval_log(i.name).eval.task: read_eval_log(i.name) for i in list_eval_logs(str(out))}
    l2 = logs["discern-L2"]
    assert l2.eval.metadata["rulings_applied"] is True and l2.eval.metadata["rulings_in_samples"] == [r.id]
    s = l2.samples[0]
    score = s.scores["discern"]
    assert score.value == pytest.approx(12.5) and score.metadata["rulings"] == [r.id]
    assert score.metadata["record_score"] == pytest.approx(100.0)
    assert l2.results.scores[0].metrics["mean"].value == pytest.approx(12.5)
    assert s.target == load_suite().worlds[L2].world.expected_response and s.target
    assert score.answer and score.answer == s.output.completion[:4000]
    kinds = [e.event for e in s.events]
    assert kinds.count("tool") == len([m for m in s.messages if m.role == "tool"]) >= 1
    assert kinds.count("model") == len([m for m in s.messages if m.role == "assistant"]) and kinds[-1] == "score"
    # without --ledgers the records' own scores, said so
    plain = read_eval_log(next(i.name for i in list_eval_logs(str(_export(root, "plain2", scripted)))
                               if "L2" in i.name))
    assert plain.eval.metadata["rulings_applied"] is False and plain.samples[0].scores["discern"].value == 100.0
