"""The test command itself (`.ci/run`, README): a test worker that dies must fail the run at once, never hang it.

pytest-xdist 3.8's loadscope scheduler can deadlock after it replaces a crashed worker (pytest-xdist#1313, #1363):
the controller waits for a worker that waits for work. A full run hung so after a worker died (most likely a Ray driver
left in that test process, which Ray ends a minute after its cluster stops: see tests/test_ray.py). The suite runs
with the addopts of pyproject.toml; this test runs a crashing module under exactly those addopts.
"""
import subprocess
import sys
import tomllib

from benchmark.suite.loader import REPO_ROOT


def test_a_worker_that_dies_ends_the_run_naming_its_test(tmp_path):
    addopts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    (tmp_path / "pytest.ini").write_text(f"[pytest]\naddopts = {addopts}\n")
    (tmp_path / "test_a_crash.py").write_text("import os\ndef test_before(): pass\ndef test_dies(): os._exit(1)\n"
                                              "def test_after(): pass\n")
    for k in range(3):
        (tmp_path / f"test_b{k}.py").write_text("import time\ndef test_slow(): time.sleep(0.5)\n")
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    assert "crashed while running 'test_a_crash.py::test_dies'" in out and "worker restarting disabled" in out, out
    assert "replacing crashed worker" not in out, out
