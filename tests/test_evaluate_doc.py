"""Every bash block of EVALUATE_MODEL.md runs, in order, as a new user would run it (scripted model, small slice)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark.loader import REPO_ROOT

DOC = REPO_ROOT / "EVALUATE_MODEL.md"
OVERRIDES = {
    "MODEL": "scripted/naive",
    "VERIFIER": "scripted/first",
    "RUN": "runs/doc-test",
    "SLICE": '"--worlds scrna.L1.integrity.clean scrna.L1.integrity.doublets scrna.L2.markers.clean"',
}


def doc_script() -> str:
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    assert len(blocks) >= 6, "the guide shows its commands in bash blocks"
    body = "\n".join(blocks[1:])  # block 0 is the set-up the test environment already did
    for var, value in OVERRIDES.items():
        body, n = re.subn(rf"^{var}=\S+", f"{var}={value}", body, flags=re.MULTILINE)
        assert n == 1, f"the guide defines {var} once"
    return "set -euo pipefail\n" + body


@pytest.mark.slow
def test_evaluate_model_guide_runs(tmp_path):
    script = tmp_path / "guide.sh"
    script.write_text(doc_script())
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", BENCHMARK_PROGRESS="0")
    proc = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tmp_path / "runs/doc-test/results.jsonl").exists()
    assert (tmp_path / "leaderboard/leaderboard.md").exists()
    assert "ledger file(s) are valid" in proc.stdout
    assert (tmp_path / "ledgers/my-campaign.yaml").exists(), "naive vs first disagree, so one ruling was recorded"
