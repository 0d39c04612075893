"""Issue 10 / SPEC R15 in the real sandbox: only real analysis earns marks.

This is `python -m benchmark worlds check --agents` as a test: scripted/oracle solves every L1/L2 world, the naive
agent falls into every trap and passes every clean control, scripted/thorough (the oracle written as an expert writes)
scores >= 98 on every world, and no gaming agent (all_clear, flag_all, keyword, constant, metadata, layout, withhold,
alarmist) beats blind trust on a per-family sample (`family_sample`: every family, about half of the worlds, to keep
CI under 30 minutes; the command runs them on every world). On the same runs: the oracle's report of one world, pasted onto all its
family's worlds, averages <= 35; adding one invented defect to an oracle report lowers its score.
"""
import json
import math
import statistics

import pytest

from benchmark.suite.freeze import ensure_built, read_golden
from benchmark.suite.loader import load_suite
from benchmark.run.store import RunStore, result_key
from benchmark.oversight.validity import AGENTS, agent_table, check_agents, render_table
from graders.grade import grade


EVERY_WORLD = ("oracle", "naive", "thorough")  # the analyses every world is held to, on every world
PER_FAMILY = 3  # the gaming bars: each family's clean control(s) and its first trap worlds, up to this many


def family_sample(per_family: int = PER_FAMILY) -> list[str]:
    """Each L1/L2 family's first clean control, then its trap worlds in id order: every family, every track and both
    levels keep their blind-trust bar while the test runs the eight replaying agents on about half of the worlds (the
    CI budget); `worlds check --agents` runs them all on every world. A gaming agent earns a clean control's full
    marks, so an L1 sample takes traps until its clean share is no larger than the family's (three clean controls of
    ten: one of four), else the sample's blind trust alone would clear the 35 ceiling; an L2 family (one clean control
    of four) keeps `per_family` worlds."""
    fams: dict[str, list] = {}
    for ref in load_suite().select(levels=["L1", "L2"]):
        fams.setdefault(ref.family.id, []).append(ref)
    out = []
    for refs in fams.values():
        clean = sorted(r.id for r in refs if getattr(r.world, "defect", None) is None)
        traps = sorted(r.id for r in refs if getattr(r.world, "defect", None) is not None)
        k = per_family
        if refs[0].family.level == "L1" and clean:
            k = max(per_family, math.ceil(len(refs) / len(clean)))
        out += clean[:1] + traps[:k - min(1, len(clean))]
    return sorted(out)


@pytest.fixture(scope="module")
def agents(tmp_path_factory):
    out = tmp_path_factory.mktemp("agents")
    every, _ = check_agents(None, None, ["L1", "L2"], concurrency=2, out=out, agents=EVERY_WORLD)
    problems, results = check_agents(family_sample(), None, ["L1", "L2"], concurrency=2, out=out, reuse=True)
    return out, every + problems, results


@pytest.mark.slow
def test_oracle_naive_and_gaming_agents(agents):
    out, problems, results = agents
    assert problems == [], "\n".join(problems)
    assert set(results) == set(AGENTS)
    assert len(results["oracle"]) == len(results["naive"]) >= 34
    assert {r.world_id.rsplit(".", 1)[0] for r in results["keyword"]} == {
        ref.family.id for ref in load_suite().select(levels=["L1", "L2"])}, "every family keeps its gaming bar"
    assert all(r.status == "graded" for r in results["oracle"]), [r.world_id for r in results["oracle"] if r.status != "graded"]
    table = agent_table(results)
    assert {lv for _, lv in table} == {"L1", "L2"}
    from rich.console import Console

    Console(width=200).print(render_table(results))  # the table `worlds check --agents` prints


def _oracle(out, world_id):
    store = RunStore(out / "oracle")
    rec = next(r for r in store.results() if r.world_id == world_id)
    traj = store.load_trajectory(rec.trajectory)
    return traj.report_raw, store.artifacts / result_key(world_id, 0), [c.code + "\n" + c.stdout for c in traj.cells]


@pytest.mark.slow
def test_one_worlds_report_pasted_onto_its_family_scores_at_most_35(agents):
    out, _, _ = agents
    suite = load_suite()
    fams: dict[str, list] = {}
    for ref in suite.select(levels=["L1", "L2"]):
        fams.setdefault(ref.family.id, []).append(ref)
    worst = {}
    for fid, refs in fams.items():
        for src in refs:
            report, products, _ = _oracle(out, src.id)
            pasted = [grade(dst, read_golden(dst).values, report, products=products).score for dst in refs]
            worst[(fid, src.id)] = statistics.fmean(pasted)
    over = {k: round(v, 1) for k, v in worst.items() if v > 35}
    assert over == {}, over


@pytest.mark.slow
def test_an_invented_defect_lowers_the_oracles_score(agents):
    out, _, _ = agents
    suite = load_suite()
    for ref in suite.select(levels=["L1"]):
        report, products, cells = _oracle(out, ref.id)
        doc = json.loads(report)
        # a defect of the catalog that this world neither has nor carries as a declared nuisance (a nuisance reported
        # is a true observation, never an invention)
        present = {n.resembles for n in ref.family.nuisance if n.applies_to(ref.id)}
        other = next(c for c in sorted(ref.family.defect_catalog) if c != ref.world.defect and c not in present)
        doc["issues"].append({"category": other.replace("_", " "), "severity": "warning", "where": "all files",
                              "description": f"{other.replace('_', ' ')} found", "value": None, "action": "none", "output": None})
        inputs = ensure_built(ref)  # as a run grades: a corrected copy is read against the world's own file
        base = grade(ref, read_golden(ref).values, report, cells, products, inputs=inputs).score
        worse = grade(ref, read_golden(ref).values, json.dumps(doc), cells, products, inputs=inputs).score
        assert base == pytest.approx(100.0) and worse < base, (ref.id, base, worse)


def test_gaming_agents_through_the_run_path_and_the_leaderboard_baselines(tmp_path):
    """Blind trust and flag-everything on one clean and one defective world, through the real sandbox; the
    leaderboard shows them as baselines beside the models."""
    from benchmark.score.leaderboard import build, render_markdown
    from benchmark.oversight.validity import baselines_section

    worlds = ["histone.L1.integrity.clean", "histone.L1.integrity.pcr_duplicates"]
    problems, results = check_agents(worlds, None, ["L1"], out=tmp_path, agents=("all_clear", "flag_all"))
    by = {(a, r.world_id): r.score for a, rs in results.items() for r in rs}
    assert by[("all_clear", worlds[0])] == 100.0 and by[("all_clear", worlds[1])] == 0.0
    assert by[("flag_all", worlds[0])] == 0.0 and by[("flag_all", worlds[1])] == 0.0
    assert problems == []
    data = build([tmp_path / "all_clear"], ledgers=[])
    data["baselines"] = baselines_section(tmp_path)
    md = render_markdown(data)
    assert "## Baselines" in md and "| flag_all | 0.0 |" in md and "| all_clear | 50.0 |" in md
