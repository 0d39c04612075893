"""A report of exactly the answer a world's scored overlap check grades against never trips the world's zero_if.

Why: a zero_if zeroes a report that follows the trap. When the trap's list is the truth plus a few wrong items, the
truth itself overlaps it well (F1 2T/(2T+S)): scrna condition_de.lane_batch zeroed a report of exactly the truth at
37 of seeds 1-60, the committed seed included, until its zero_if also required the trap's wrong calls."""
from benchmark.suite.freeze import read_golden
from benchmark.suite.loader import load_suite
from graders.checks import get_path, run_checks


def sound_reports():
    """(world id, world, golden, report) for every L2 world with an overlap zero_if: the report puts, in each such
    field, the list the world's scored overlap check on that field grades against."""
    for wid, ref in sorted(load_suite().worlds.items()):
        if ref.world.level != "L2" or not ref.world.rubric.zero_if:
            continue
        golden = read_golden(ref).values
        report = {}
        for z in ref.world.rubric.zero_if:
            if z.kind != "overlap" or not z.field:
                continue
            for c in ref.world.rubric.checks:
                want = get_path(golden, c.golden) if c.kind == "overlap" and c.field == z.field and c.golden else None
                if isinstance(want, list):
                    report[z.field] = want
                    break
        if report:
            yield wid, ref.world, golden, report


def test_a_report_of_exactly_the_graded_answer_never_trips_zero_if():
    worlds = list(sound_reports())
    tripped = [wid for wid, world, golden, report in worlds
               if all(r.credit >= 1.0 for r in run_checks(list(world.rubric.zero_if), report, golden, None))]
    assert len(worlds) >= 20, f"only {len(worlds)} worlds with an overlap zero_if: is the selection still right?"
    assert tripped == [], f"a report of exactly the graded answer is zeroed as following the trap on {tripped}"
