"""Pivotal-choice accuracy (SPEC R12, seed 002): case format, shipped case set, runner, scores and intervals."""
from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from benchmark.errors import BenchmarkError
from benchmark.pivotal.build import build_cases, write_cases
from benchmark.pivotal.cases import DEFAULT_CASES, load_cases, parse_cases, render_jsonl
from benchmark.pivotal.run import PivotalConfig, PivotalRecord, effort_kwargs, execute, parse_choice
from benchmark.pivotal.score import (bootstrap_distribution, cluster_draw_indices, interval, load_human, score,
                                     table_rows)


def _run(tmp_path, model, name=None, **kw):
    cfg = PivotalConfig(model=model, out=tmp_path / (name or model.replace("/", "_")), **kw)
    return execute(cfg)


def _rows(records, **kw):
    return score(records, draws=500, seed=1, **kw)["rows"]


# ------------------------------------------------------------------ scripted reference agents

def test_scripted_first_scores_exactly_half_averaged_over_orders(tmp_path):
    rows = _rows(_run(tmp_path, "scripted/first"))
    assert {r["condition"] for r in rows} == {"project", "options-only"}
    for r in rows:
        assert r["n_cases"] == len(load_cases())
        assert r["accuracy"] == 50.0 and r["chose_A"] == 100.0
        assert r["challenged_accuracy"] == 50.0 and r["control_accuracy"] == 50.0


def test_scripted_oracle_scores_100(tmp_path):
    rows = _rows(_run(tmp_path, "scripted/oracle"))
    assert rows and all(r["accuracy"] == 100.0 and r["unparsed"] == 0 for r in rows)


def test_scripted_naive_fails_challenged_cases_and_passes_controls(tmp_path):
    for r in _rows(_run(tmp_path, "scripted/naive")):
        assert r["challenged_accuracy"] < 50.0
        assert r["control_accuracy"] >= 90.0
        assert r["accuracy"] < 50.0


def test_always_cautious_cannot_score_100():
    """Controls exist in every field: choosing the plan that does not proceed is wrong there."""
    cases = load_cases()
    cautious = [c.proceeds == "original" for c in cases]  # the cautious plan is the corrected one only when A proceeds
    assert 0 < np.mean(cautious) < 1
    for f in {c.field for c in cases}:
        assert {c.kind for c in cases if c.field == f} == {"challenged", "control"}
    assert all(c.why.strip() for c in cases)


# ------------------------------------------------------------------ bootstrap

def test_bootstrap_intervals_reproduce_for_a_fixed_seed_and_contain_the_estimate():
    rng = np.random.default_rng(3)
    vals = rng.choice([0.0, 0.5, 1.0], size=40)
    projects = [f"p{i % 7}" for i in range(40)]
    point = float(np.mean(vals))
    for clusters in (None, projects):
        a, b = interval(vals, clusters, draws=2000, seed=11), interval(vals, clusters, draws=2000, seed=11)
        assert a == b
        assert a[0] <= point <= a[1] and a[0] < a[1]
        assert interval(vals, clusters, draws=2000, seed=12) != a


def test_cluster_bootstrap_resamples_whole_projects():
    # 9 cases of project P score 1, 1 case of project Q scores 0: whole-project draws can only give 1, 0.9 or 0.
    vals = [1.0] * 9 + [0.0]
    projects = ["P"] * 9 + ["Q"]
    est = bootstrap_distribution(vals, projects, draws=3000, seed=5)
    assert set(np.round(est, 9)) <= {1.0, 0.9, 0.0}
    assert set(np.round(bootstrap_distribution(vals, None, draws=3000, seed=5), 9)) - {1.0, 0.9, 0.0}  # cases differ
    labels = np.array(["a", "a", "b", "c", "c", "c"])
    rng = np.random.default_rng(0)
    for _ in range(50):
        idx = cluster_draw_indices(labels, rng)
        counts = np.bincount(idx, minlength=labels.size)
        for c in set(labels):  # every case of a drawn project comes with it, as often as the project was drawn
            assert len(set(counts[labels == c])) == 1
        assert sum(counts[labels == c][0] for c in set(labels)) == 3  # three projects drawn per draw


def test_paired_difference_and_reconsideration_transitions():
    def rec(cid, proj, cond, order, rnd, correct, trans=None):
        return PivotalRecord(case_id=cid, project=proj, field="f", categories=["k"], kind="challenged", model="m",
                             condition=cond, order=order, effort="default", effort_applied=False, round=rnd, seed=0,
                             correct_label="B", choice="B" if correct else None, parsed=correct, correct=correct,
                             transition=trans, status="answered")
    recs = []
    for i in range(4):
        for order in ("original_first", "corrected_first"):
            recs.append(rec(f"c{i}", f"p{i % 2}", "project", order, 0, i == 0))
            recs.append(rec(f"c{i}", f"p{i % 2}", "options-only", order, 0, True))
            recs.append(rec(f"c{i}", f"p{i % 2}", "project", order, 1, i < 2, "repair" if i == 1 else None))
    rows = {(r["condition"], r["round"]): r for r in _rows(recs)}
    assert rows[("project", 0)]["accuracy"] == 25.0  # unparsed answers are wrong
    assert rows[("project", 0)]["project_minus_options"]["diff_pp"] == -75.0
    assert rows[("project", 1)]["repairs"] == 2 and rows[("project", 1)]["new_errors"] == 0
    assert rows[("project", 1)]["change_vs_previous_round"]["diff_pp"] == 25.0


# ------------------------------------------------------------------ case format

def test_malformed_case_line_is_reported_with_its_line_number(tmp_path):
    good = DEFAULT_CASES.read_text().splitlines()[0]
    bad = json.loads(good)
    del bad["corrected_plan"]
    bad["id"] = "other"
    p = tmp_path / "cases.jsonl"
    p.write_text(good + "\n\n" + json.dumps(bad) + "\n")
    with pytest.raises(BenchmarkError, match=r"cases\.jsonl:3: field 'corrected_plan' is required"):
        load_cases(p)
    p.write_text(good + "\n{not json\n")
    with pytest.raises(BenchmarkError, match=r"cases\.jsonl:2: not valid JSON"):
        load_cases(p)
    with pytest.raises(BenchmarkError, match=r":2: case id .* also used on line 1"):
        parse_cases(good + "\n" + good + "\n", "x.jsonl")


def test_shipped_case_set_is_the_builders_deterministic_output():
    assert render_jsonl(build_cases()) == render_jsonl(build_cases())
    write_cases(check=True)  # raises when the committed file differs from the builder's output


# ------------------------------------------------------------------ pivotal: blocks in world manifests

def test_template_operations_render_as_the_docstring_says():
    from graders.manifest import PivotalBlock
    from benchmark.pivotal.template import render_block

    g = {"lfc": -0.004, "up": -0.456, "frac": 0.253, "bp": 1000, "region": {"start": 500000, "end": 1100000},
         "n": 7, "genes": ["A", "B", "C", "D"], "ref": ["B", "D"], "none": [],
         "lanes": {"S1": 0.3577, "S2": 0.6423}, "reads": 1234567}
    block = PivotalBlock(
        categories=["x"],
        record="{g[lfc]:fc} {g[up]:fc} {g[frac]:pct} {g[bp]:kb} {g[region]:span|kb(0)} {g[n]:div(2)} {g[reads]:,}",
        original_plan="{g[genes]:head(2)|join} / {g[genes]:minus(ref)|join} / {g[genes]:only(C, A)|join(+)} / "
                      "{g[none]:join|or(nothing)}",
        corrected_plan="{g[lanes]:argmax} {g[lanes]:max|pct} ({g[lanes]:pairs(pct)|join}) {g[up]:+.1f} {w[id]}",
        evidence=["{g[genes][0]}", "plain"])
    d = render_block(block, g, {"id": "t.L1.f.w"}, "w.yaml")
    assert d["record"] == "+0.00 -0.46 25% 1.0 600 3 1,234,567"
    assert d["original_plan"] == "A, B / A, C / A+C / nothing"
    assert d["corrected_plan"] == "S2 64% (S1 36%, S2 64%) -0.5 t.L1.f.w"
    assert d["evidence"] == ["A", "plain"] and d["categories"] == ["x"]


def test_a_missing_golden_key_names_file_field_and_key():
    from graders.manifest import PivotalBlock
    from benchmark.pivotal.template import render_block

    block = PivotalBlock(categories=["x"], record="n={g[n]}", original_plan="{g[nested][nope]:pct}", corrected_plan="ok",
                         evidence=["{g[lst][3]}"])
    with pytest.raises(BenchmarkError, match=r"worlds/a\.yaml: field 'pivotal\.record': .*golden key 'n'"):
        render_block(block, {"nested": {}, "lst": []}, None, "worlds/a.yaml")
    with pytest.raises(BenchmarkError, match=r"field 'pivotal\.original_plan': .*golden key 'nope'"):
        render_block(block, {"n": 1, "nested": {}, "lst": []}, None, "worlds/a.yaml")
    with pytest.raises(BenchmarkError, match=r"field 'pivotal\.evidence\.0': .*shorter"):
        render_block(block, {"n": 1, "nested": {"nope": 0.5}, "lst": []}, None, "worlds/a.yaml")


WID = "scrna.L1.integrity.clean"


def _temp_suite(tmp_path, edit=lambda t: t, golden=True):
    """worlds/scrna with one family and its clean world (pivotal block edited by `edit`), golden copied."""
    import shutil

    from benchmark.suite.loader import Suite, load_suite

    src = load_suite().worlds[WID]
    root = tmp_path / "worlds"
    fam = root / "scrna/L1/integrity"
    fam.mkdir(parents=True)
    shutil.copy(src.path.parents[2] / "track.yaml", root / "scrna/track.yaml")
    shutil.copy(src.path.parent / "family.yaml", fam / "family.yaml")
    (fam / "clean.yaml").write_text(edit(src.path.read_text()))
    if golden:
        shutil.copy(src.golden_path, fam / "clean.golden.json")
    return Suite(root), fam / "clean.yaml"


def test_builder_picks_up_any_world_with_a_pivotal_block(tmp_path):
    from benchmark.pivotal.build import pivotal_problems

    shipped = {c.id: c for c in load_cases(DEFAULT_CASES)}
    suite, _ = _temp_suite(tmp_path, lambda t: t.replace("Accept the matrix as usable", "Accept the {g[n_cells_kept]}-cell matrix as usable"))
    [case] = build_cases(suite)
    assert case.id == f"pivot.{WID}" and case.kind == "control" and case.record == shipped[case.id].record
    n = json.loads(suite.worlds[WID].golden_path.read_text())["values"]["n_cells_kept"]
    assert case.corrected_plan == f"Accept the {n}-cell matrix as usable and proceed to analysis with all {n} cells."
    assert pivotal_problems(suite.worlds[WID]) == []
    suite, _ = _temp_suite(tmp_path / "none", lambda t: t[: t.index("\npivotal:")] + "\n")
    assert build_cases(suite) == []


def _as_two_decisions(text: str, second_stage: str | None = "report") -> str:
    """The world's pivotal block turned into a list of two: the shipped one, then a later decision."""
    import yaml

    w = yaml.safe_load(text)
    later = {"categories": ["reporting"], "record": "{g[n_cells_kept]} cells kept; the markers are ready",
             "original_plan": "Re-run QC from the raw reads", "corrected_plan": "Report the markers"}
    w["pivotal"] = [w["pivotal"], {**later, **({"stage": second_stage} if second_stage else {})}]
    return yaml.safe_dump(w, sort_keys=False)


def test_a_world_with_two_decisions_yields_two_cases_and_a_later_one_needs_a_stage(tmp_path):
    suite, _ = _temp_suite(tmp_path, _as_two_decisions)
    first, later = build_cases(suite)
    shipped = {c.id: c for c in load_cases(DEFAULT_CASES)}
    assert first == shipped[f"pivot.{WID}"]
    n = json.loads(suite.worlds[WID].golden_path.read_text())["values"]["n_cells_kept"]
    assert later.id == f"pivot.{WID}.report" and later.project == first.project and later.kind == "control"
    assert later.record.endswith(f"{n} cells kept; the markers are ready")
    with pytest.raises(BenchmarkError, match=r"clean\.yaml.*pivotal.*distinct"):
        _temp_suite(tmp_path / "nostage", lambda t: _as_two_decisions(t, None))[0].worlds


def test_world_without_golden_or_with_a_bad_key_is_a_clear_error(tmp_path):
    from benchmark.pivotal.build import pivotal_problems
    from benchmark.suite.validate import validate_suite

    suite, path = _temp_suite(tmp_path, golden=False)
    with pytest.raises(BenchmarkError, match=r"clean\.yaml: field 'pivotal': the world has no golden file .*freeze"):
        build_cases(suite)
    suite, path = _temp_suite(tmp_path / "bad", lambda t: t.replace("{g[n_cells_kept]}", "{g[n_cells_kpt]}"))
    with pytest.raises(BenchmarkError, match=r"field 'pivotal\.corrected_plan': .*golden key 'n_cells_kpt'"):
        build_cases(suite)
    want = f"{path}: field 'pivotal.corrected_plan': the template needs golden key 'n_cells_kpt', which the golden lacks"
    assert pivotal_problems(suite.worlds[WID]) == [want]
    assert want in validate_suite(suite)


def test_parse_choice_accepts_json_and_rejects_prose():
    assert parse_choice('{"choice": "B", "reason": "x"}') == "B"
    assert parse_choice('```json\n{"choice": "A", "reason": "x"}\n```') == "A"
    assert parse_choice('{"choice": "Plan B", "reason": "trunc') == "B"
    assert parse_choice("B") == "B"
    assert parse_choice("I would choose plan A or perhaps plan B") is None
    assert parse_choice("") is None and parse_choice(None) is None


# ------------------------------------------------------------------ runner: resume, effort, human row, CLI

def test_resume_skips_finished_answers_and_rejects_other_settings(tmp_path):
    ids = [c.id for c in load_cases()[:2]]
    _run(tmp_path, "scripted/oracle", "r", case_ids=ids, reconsider=1)
    path = tmp_path / "r" / "pivotal.jsonl"
    n = len(path.read_text().splitlines())
    assert n == 2 * 2 * 2 * 2  # cases x conditions x orders x rounds
    recs = _run(tmp_path, "scripted/oracle", "r", case_ids=ids, reconsider=1, resume=True)
    assert len(path.read_text().splitlines()) == n and len(recs) == n
    assert {r.transition for r in recs if r.round == 1} == {"kept_correct"}
    with pytest.raises(BenchmarkError, match="already holds a run"):
        _run(tmp_path, "scripted/oracle", "r", case_ids=ids, reconsider=1)
    with pytest.raises(BenchmarkError, match="field 'reconsider'"):
        _run(tmp_path, "scripted/oracle", "r", case_ids=ids, reconsider=2, resume=True)


def test_effort_is_recorded_and_only_passed_where_supported(tmp_path):
    assert effort_kwargs("scripted/oracle", "high")[:2] == ({}, False)
    assert effort_kwargs("anything/x", "default")[:2] == ({}, False)
    assert effort_kwargs("openai/o3-mini", "high")[:2] == ({"reasoning_effort": "high"}, True)
    recs = _run(tmp_path, "scripted/oracle", limit=1, efforts=["default", "high"], conditions=["project"])
    assert sorted(r.effort for r in recs) == ["default", "default", "high", "high"]
    assert not any(r.effort_applied for r in recs)


def test_human_baseline_row_is_read_from_a_file(tmp_path):
    recs = _run(tmp_path, "scripted/first", limit=3)
    ids = sorted({r.case_id for r in recs})
    h = tmp_path / "human.json"
    h.write_text(json.dumps({"source": "two fresh researchers, project condition", "per_case": {ids[0]: 1.0, ids[1]: 0.5, ids[2]: 1.0}}))
    rows = table_rows(score(recs, draws=300, seed=1, human=load_human(h)))
    human = [r for r in rows if r["model"] == "human baseline"]
    assert len(human) == 1 and human[0]["accuracy"] == pytest.approx(250 / 3) and human[0]["n_cases"] == 3
    h.write_text(json.dumps({"source": "x"}))
    with pytest.raises(BenchmarkError, match="accuracy"):
        load_human(h)


def test_cli_parser_runs_and_scores(tmp_path, capsys):
    from benchmark.pivotal.cli import add_pivotal_parser

    p = argparse.ArgumentParser()
    add_pivotal_parser(p.add_subparsers(dest="verb", required=True))

    def cli(argv):
        args = p.parse_args(argv)
        return args.fn(args)

    out = tmp_path / "run"
    assert cli(["pivotal", "run", "--model", "scripted/oracle", "--limit", "2", "--out", str(out), "--bootstrap", "200"]) == 0
    assert cli(["pivotal", "score", str(out), "--bootstrap", "200"]) == 0
    assert "| scripted/oracle | project | default | 0 | 2 | 100.0" in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    with pytest.raises(BenchmarkError, match=r"bad\.jsonl:1: field"):
        cli(["pivotal", "cases", "validate", str(bad)])


def test_leaderboard_includes_the_pivotal_table(tmp_path):
    from tests.test_leaderboard import _run_board, _runs

    piv = tmp_path / "piv"
    execute(PivotalConfig(model="scripted/oracle", out=piv, limit=2))
    runs, pricing = _runs(tmp_path)
    out = _run_board(tmp_path, tmp_path / "board", runs, pricing, "--pivotal-runs", str(piv))
    md = (out / "leaderboard.md").read_text()
    assert "Pivotal choice (SciΠvot protocol)" in md and "| scripted/oracle | project |" in md
    assert json.loads((out / "leaderboard.json").read_text())["pivotal"]["rows"][0]["accuracy"] == 100.0


# ------------------------------------------------------------------ a real small model

@pytest.mark.slow
def test_local_smollm2_runs_two_cases_with_real_tokens(tmp_path):
    recs = _run(tmp_path, "local/smollm2", limit=2, conditions=["project"])
    assert len(recs) == 4
    assert all(r.status == "answered" and r.tokens_in > 0 and r.tokens_out > 0 for r in recs)
    rows = _rows(recs)
    assert rows[0]["n_cases"] == 2 and rows[0]["tokens_in"] > 0
