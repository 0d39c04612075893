"""SPEC R15 in the real sandbox: scripted/oracle solves every L1/L2 world; scripted/naive falls into every trap
and passes every clean control. This is `python -m benchmark worlds check --agents` as a test."""
import pytest

from benchmark.validity import check_agents


@pytest.mark.slow
def test_oracle_solves_and_naive_falls_in(tmp_path):
    problems, results = check_agents(None, None, ["L1", "L2"], concurrency=2, out=tmp_path)
    assert problems == []
    assert len(results["oracle"]) == len(results["naive"]) >= 34
    assert all(r.status == "graded" for r in results["oracle"]), [r.world_id for r in results["oracle"] if r.status != "graded"]
