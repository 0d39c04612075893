"""Instances drawn from the seed, and private campaigns (issue 10 item 4): published goldens are no answer key."""
import json

import numpy as np
import pytest

from benchmark.suite.campaign import campaign_suite, load_campaign, start_campaign
from benchmark.errors import BenchmarkError
from benchmark.suite.freeze import freeze_worlds, read_golden, read_lock, resolve_params
from benchmark.suite.loader import load_suite

PARAMS = {"n": {"draw": "integer", "low": 20, "high": 60}, "rho": {"draw": "uniform", "low": 0.05, "high": 0.3, "digits": 3},
          "pair": {"draw": "sample", "from": ["A", "B", "C", "D"], "k": 2}, "lit": 7,
          "nested": {"mark": {"draw": "choice", "from": ["H3K4me3", "H3K27me3"]}}}


def test_draws_are_deterministic_in_the_seed_and_differ_across_seeds():
    a = resolve_params(PARAMS, np.random.default_rng(1), "w.yaml")
    b = resolve_params(PARAMS, np.random.default_rng(1), "w.yaml")
    assert a["nested"]["mark"] in ("H3K4me3", "H3K27me3")
    assert a == b and a["lit"] == 7 and 20 <= a["n"] <= 60 and 0.05 <= a["rho"] <= 0.3 and len(set(a["pair"])) == 2
    draws = [resolve_params(PARAMS, np.random.default_rng(s), "w.yaml") for s in range(20)]
    assert len({json.dumps(d, sort_keys=True) for d in draws}) == 20


@pytest.mark.parametrize("spec,needle", [
    ({"draw": "gauss", "low": 0, "high": 1}, "unknown draw 'gauss'"),
    ({"draw": "integer", "low": 5, "high": 1}, "low > high"),
    ({"draw": "sample", "from": ["a"], "k": 2}, "k=2"),
    ({"draw": "integer", "low": 1}, "missing 'high'"),
    ({"draw": "integer", "low": 1, "high": 2, "typo": 3}, "not typo"),
])
def test_bad_draws_name_the_field(spec, needle):
    with pytest.raises(BenchmarkError) as exc:
        resolve_params({"n": spec}, np.random.default_rng(0), "worlds/x.yaml", "recipe.0.params")
    assert "worlds/x.yaml: field 'recipe.0.params.n'" in str(exc.value) and needle in str(exc.value)


def test_campaign_needs_its_file(tmp_path):
    with pytest.raises(BenchmarkError, match="not a frozen campaign"):
        load_campaign(tmp_path)
    (tmp_path / "campaign.json").write_text('{"seed": true, "worlds": []}')
    with pytest.raises(BenchmarkError, match="campaign.json: field 'seed'"):
        load_campaign(tmp_path)


def test_campaign_refuses_another_seed_in_the_same_folder(tmp_path):
    refs = load_suite().select(["histone.L1.integrity.clean"])
    start_campaign(tmp_path, 11, refs)
    with pytest.raises(BenchmarkError, match="another seed"):
        start_campaign(tmp_path, 12, refs)


def _drawn(ref) -> bool:
    return "draw" in json.dumps([s.params for s in ref.world.recipe])


def _draws(ref) -> int:
    return json.dumps([s.params for s in ref.world.recipe]).count('"draw"')


def per_family_sample(refs) -> list:
    """Each family's clean control and its world with the most drawn quantities (ties: the first id): every family's
    builder, solver and oracle meet a re-drawn world both ways, where the trap is and where there is none."""
    best: dict[str, object] = {}
    for ref in sorted(refs, key=lambda r: r.id):
        cur = best.get(ref.family.id)
        if cur is None or _draws(ref) > _draws(cur):
            best[ref.family.id] = ref
    clean = [r for r in refs if r.world.world_class == "clean"]
    return sorted({r.id: r for r in [*best.values(), *clean]}.values(), key=lambda r: r.id)


def test_a_campaign_reseeds_every_world_and_redraws_every_drawn_value(tmp_path):
    """Every L1/L2 world bound to a campaign builds from other seeds (its recipe's and its substrate's) and, where its
    recipe draws, resolves other values: the inputs every builder reads. Cheap (no build), so it covers every world;
    the slow test below shows on a sample that the builders turn other seeds into other files and goldens."""
    refs = load_suite().select(levels=["L1", "L2"])
    bound = {r.id: r for r in start_campaign(tmp_path, 424242, refs)}
    same_seed, same_draws = [], []
    for ref in refs:
        mine = bound[ref.id]
        if mine.world_seed == ref.world_seed or mine.substrate_seed == ref.substrate_seed:
            same_seed.append(ref.id)
        if _drawn(ref) and _resolved(mine) == _resolved(ref):
            same_draws.append(ref.id)
    assert same_seed == [] and same_draws == []


def _resolved(ref) -> list:
    """Each recipe step's params drawn straight from the world's seed. The build draws the same way but lets each
    step's recipe use the generator in between, so only the first step's values are the build's own; like is still
    compared with like."""
    rng = np.random.default_rng(ref.world_seed)
    return [resolve_params(s.params, rng, str(ref.path)) for s in ref.world.recipe]


@pytest.mark.slow
def test_private_campaign_changes_every_file_and_drawn_value_and_stays_solvable(tmp_path):
    """A freeze with another seed, of every family's clean control and its world that draws the most (both levels),
    changes every data file and every golden that depends on the draw, and the oracle still scores 100 on each: every
    family's builder, solver and oracle meet a re-drawn world both where the trap is and where there is none. Every
    world's seeds and draws change (the test above); the freeze and oracle of every re-drawn world is
    `worlds freeze --seed S --out DIR` then `worlds check --agents --suite DIR`, which a maintainer runs on each private
    campaign, and the same oracle solves every published world in tests/test_validity.py."""
    from benchmark.oversight.validity import check_agents

    refs = load_suite().select(levels=["L1", "L2"])
    picks = per_family_sample(refs)
    fams = {r.family.id for r in refs}
    assert {r.family.id for r in picks if r.world.world_class == "clean"} == fams and len(picks) >= len(fams) + 2
    assert any(_drawn(r) for r in picks)
    bound = start_campaign(tmp_path / "camp", 424242, picks)
    freeze_worlds(bound, jobs=2)
    suite = campaign_suite(load_suite(), tmp_path / "camp")
    assert sorted(suite.worlds) == [r.id for r in picks]
    same_files, same_goldens = [], []
    for ref in picks:
        mine, pub = read_lock(suite.worlds[ref.id]), read_lock(ref)
        same_files += [f"{ref.id}:{f}" for f, h in mine.files.items()  # meta.json describes the layout (no data)
                       if pub.files.get(f) == h and not f.endswith("meta.json")]
        if _drawn(ref) and read_golden(suite.worlds[ref.id]).values == read_golden(ref).values:
            same_goldens.append(ref.id)
    assert same_files == [] and same_goldens == []
    problems, results = check_agents([r.id for r in picks], None, ["L1", "L2"], concurrency=2, out=tmp_path / "agents",
                                     suite=tmp_path / "camp", agents=("oracle",))
    assert problems == [], problems
    assert len(results["oracle"]) == len(picks)


def test_two_freezes_of_one_world_at_once_leave_one_whole_build(tmp_path):
    """Two processes freezing the same world into one folder (two maintainers' terminals, a campaign frozen twice)
    both finish and leave one build that matches its lock, and no half-built folder: each builds under its own name
    and the install renames (it crashed with FileNotFoundError when both built into `.<id>.building`)."""
    from benchmark.suite.freeze import compare, world_cache

    ref = load_suite().worlds["scrna.L1.integrity.clean"]
    bound = start_campaign(tmp_path / "camp", 7, [ref])
    freeze_worlds([bound[0], bound[0], bound[0]], jobs=3)
    w = campaign_suite(load_suite(), tmp_path / "camp").worlds[ref.id]
    assert compare(w, read_lock(w), world_cache(w)) == []
    assert [p.name for p in world_cache(w).parent.iterdir() if p.name.startswith(".")] == []
