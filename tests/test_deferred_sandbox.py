"""The sandbox starts while the first model call is in flight (sandbox/deferred.py), in the real sandbox."""
from __future__ import annotations

import json
import time

from benchmark.run.agent import run_episode
from benchmark.suite.freeze import ensure_built
from benchmark.suite.loader import load_suite
from benchmark.run.episodes import RunConfig, execute
from sandbox import deferred
from sandbox.bwrap import Limits, Sandbox
from sandbox.deferred import DeferredSandbox
from tests.helpers import burn

WORLD = "scrna.L1.integrity.clean"


def _alive(sb: Sandbox) -> bool:
    return sb._proc is not None and sb._proc.poll() is None


def test_an_episode_that_runs_no_cell_does_not_wait_for_its_sandbox(tmp_path):
    ref = load_suite().worlds[WORLD]
    inner = Sandbox(ensure_built(ref), Limits(), label=ref.id, pool=False)
    meta = ref.call_context()
    run_episode(ref, "scripted/all_clear", None, budget=4, metadata=meta)  # first-call imports, outside the timing
    t0 = time.monotonic()
    with DeferredSandbox(inner) as sb:
        ep = run_episode(ref, "scripted/all_clear", sb, budget=4, metadata=meta)
        assert sb.collect(tmp_path / "out") == [] and not sb.used
        took = time.monotonic() - t0
    assert ep.status == "graded" and ep.cells == [] and len(ep.calls) == 1
    deferred.wait_all()
    assert not _alive(inner), "a sandbox handed back unused is torn down by its keeper"
    assert inner._lease is None
    # the cold start it skipped costs more than the whole report-only episode did
    t1 = time.monotonic()
    with Sandbox(ensure_built(ref), Limits(), label=ref.id, pool=False) as cold:
        cold.run_python("pass")
    assert took < time.monotonic() - t1


def test_an_in_process_models_sandbox_starts_at_the_first_cell_and_never_without_one():
    ref = load_suite().worlds[WORLD]
    unused = Sandbox(ensure_built(ref), Limits(), label=ref.id, pool=False)
    with DeferredSandbox(unused, eager=False) as sb:
        ep = run_episode(ref, "scripted/all_clear", sb, budget=4, metadata=ref.call_context())
        time.sleep(0.5)
        assert unused._proc is None and unused.uid is None, "no cell asked for it: never started"
    assert ep.status == "graded" and ep.cells == []
    used = Sandbox(ensure_built(ref), Limits(), label=ref.id, pool=False)
    with DeferredSandbox(used, eager=False) as sb:
        assert used._proc is None
        ep = run_episode(ref, "scripted/oracle", sb, budget=4, metadata=ref.call_context())
        assert ep.cells and _alive(used)
    assert ep.status == "graded" and not _alive(used)


def test_a_hosted_models_sandbox_is_not_started_ahead_on_busy_cores():
    """Issue 42: an eager start moves no work off busy cores and is wasted when the model answers without a cell
    (16 such starts made --concurrency 16 slower than 4 against a 1 s endpoint). With every core busy, an eager
    sandbox waits for the first cell; that cell still finds it started."""
    ref = load_suite().worlds[WORLD]
    burners = burn(20.0)
    try:
        time.sleep(0.5)
        unused = Sandbox(ensure_built(ref), Limits(), label=ref.id, pool=False)
        with DeferredSandbox(unused, eager=True):
            time.sleep(1.5)
            assert unused._proc is None and unused.uid is None, "started ahead on busy cores"
        used = Sandbox(ensure_built(ref), Limits(), label=ref.id, pool=False)
        with DeferredSandbox(used, eager=True) as sb:
            assert sb.run_python("print(1)").stdout.strip() == "1"
    finally:
        for b in burners:
            b.kill()
    deferred.wait_all()
    assert not _alive(used)


def test_the_first_cell_waits_for_the_start_and_finds_the_worlds_files(tmp_path):
    ref = load_suite().worlds[WORLD]
    inner = Sandbox(ensure_built(ref), Limits(), label=ref.id, pool=False)
    with DeferredSandbox(inner) as sb:
        res = sb.run_python("import os; print(sorted(os.listdir('.')))\nopen('mine.txt', 'w').write('x')")
        assert res.error is None and {f.split('/')[0] for f in ref.world.public_files} <= set(json.loads(res.stdout.replace("'", '"')))
        assert sb.collect(tmp_path / "out") == ["mine.txt"] and sb.used
    assert not _alive(inner), "a used sandbox is torn down before the episode goes on"


def test_a_sandbox_that_cannot_start_ends_the_episode_as_a_sandbox_error_keeping_its_calls(tmp_path):
    ref = load_suite().worlds[WORLD]
    inner = Sandbox(ensure_built(ref), Limits(start_wall_s=0.001), label=ref.id, pool=False)
    with DeferredSandbox(inner) as sb:
        ep = run_episode(ref, "scripted/oracle", sb, budget=4, metadata=ref.call_context())
        assert sb.collect(tmp_path / "out") == []
    assert ep.status == "sandbox_error" and "start" in (ep.error or "").lower(), ep.error
    assert len(ep.calls) == 1 and ep.calls[0].ok, "the model call made while the sandbox started is kept"
    assert not _alive(inner)


def test_a_run_of_report_only_episodes_leaves_no_sandbox_behind(tmp_path):
    worlds = ["scrna.L1.integrity.clean", "scrna.L1.integrity.doublets"]
    recs = execute(RunConfig(model="scripted/all_clear", out=tmp_path / "run", worlds=worlds, levels=["L1"], concurrency=2))
    assert sorted(r.world_id for r in recs) == worlds and all(r.status == "graded" and r.code_cells == 0 for r in recs)
    assert not [t for t in deferred._KEEPERS if t.is_alive()], "execute() returns after every keeper tore down"
