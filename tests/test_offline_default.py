"""The offline default exercises the whole path (issue 12, item 4): local/smollm2 ignores `tool_choice="auto"`,
so before the fix the README's main command ran 0 code cells in 38 worlds. Now a fenced ```python block is run as
a run_python call (recorded `via="fenced_code"`) and a reply with neither a report nor code forces the tool."""
from __future__ import annotations

import json

import pytest

from benchmark.run.agent import fenced_code
from benchmark.run.episodes import RunConfig, execute
from benchmark.run.store import RunStore

# One L1 and one L2 world: the 135M model takes 20-150 s per reply on two shared cores, so the test runs the fewest
# worlds that cover both loops' graders (the agent loop is the same for every family).
WORLDS = ["scrna.L1.integrity.clean", "scrna.L2.markers.clean"]


def test_fenced_code_takes_the_python_block_even_when_cut_by_the_token_cap():
    assert fenced_code("Let me look.\n```python\nimport os\nprint(os.listdir())\n```\nthen") == "import os\nprint(os.listdir())"
    assert fenced_code("```python\nx = 1\nprint(x") == "x = 1\nprint(x"
    assert fenced_code('{"verdict": "usable"}') is None and fenced_code("```json\n{}\n```") is None


@pytest.mark.slow
def test_offline_default_runs_code_in_every_l1_l2_world(tmp_path):
    out = tmp_path / "offline"
    # max_steps=2: two working steps (room for one forced call after a prose reply), then the report step; the
    # real budget is 20, this keeps the test in minutes
    recs = execute(RunConfig(model="local/smollm2", out=out, worlds=WORLDS, levels=["L1", "L2"], max_steps=2))
    assert len(recs) == len(WORLDS)
    store = RunStore(out)
    for r in recs:
        traj = store.load_trajectory(r.trajectory)
        assert r.code_cells >= 1 and len(traj.cells) >= 1, (r.world_id, r.status, r.error, traj.messages[-1])
        for c in traj.cells:  # a cell is either a native tool call or a recorded fenced block
            assert c.via in (None, "fenced_code")
    assert json.loads((out / "config.json").read_text())["max_steps"] == 2
