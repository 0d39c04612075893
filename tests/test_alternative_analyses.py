"""A sound analysis other than the reference solver's must not be failed by the rubric (issue 13 audit, issue 18).

Every alternative in tests/alternatives/<track>.py runs for real on a frozen world's public files and its report
and work products are graded; each must score >= 95 on every world it names (the clean control and the trap worlds
where it avoids the trap). Every L2 family needs at least one, named in its family.yaml `alternatives:` list.
"""
import json

import pytest

from benchmark.suite.freeze import ensure_built, read_golden
from benchmark.suite.loader import load_suite
from graders.grade import grade
from tests.alternatives import load_all

ALTS = load_all()
CASES = [(a, w) for a in ALTS for w in a.worlds]
MIN_SCORE = 95.0


@pytest.mark.parametrize("alt,world", CASES, ids=[f"{w}-{a.fn.__name__}" for a, w in CASES])
def test_alternative_analysis_earns_full_marks(alt, world, tmp_path):
    suite = load_suite()
    ref = suite.worlds[world]
    assert ref.family.id == alt.family, f"{alt.fn.__name__} names {world}, which is not in {alt.family}"
    report = alt.fn(ensure_built(ref), tmp_path)
    g = grade(ref, read_golden(ref).values, json.dumps(report), products=tmp_path)
    assert g.score >= MIN_SCORE, [(c.id, c.credit, c.detail) for c in g.checks]


def test_every_l2_family_names_and_tests_an_alternative():
    suite = load_suite()
    fams = {f.id: f for f in suite.families().values() if str(f.level) in ("L2", "Level.L2")}
    tested = {a.family: set() for a in ALTS}
    for a in ALTS:
        tested[a.family].add(a.name)
    problems = []
    for fid, fam in sorted(fams.items()):
        if not tested.get(fid):
            problems.append(f"{fid}: no alternative analysis in tests/alternatives/")
        missing = sorted(tested.get(fid, set()) - set(fam.alternatives))
        if missing:
            problems.append(f"{fid}: family.yaml `alternatives:` does not name {missing}")
    assert not problems, problems
