"""The real bubblewrap sandbox: what code inside can reach, and that each abuse is contained and recorded."""
from __future__ import annotations

from pathlib import Path

import re

import pytest

from benchmark.suite.loader import REPO_ROOT
from sandbox.bwrap import Limits, Sandbox


@pytest.fixture(autouse=True)
def _warm_pool():
    """Let the warm pool (sandbox/pool.py) catch up, so that most sandboxes here are pre-started ones handed to this
    test's world: every check must hold for warm sandboxes as for cold ones (the first and custom-limit ones)."""
    from sandbox.pool import POOL

    POOL.wait_for(timeout=60)
    yield


@pytest.fixture
def world(tmp_path) -> Path:
    d = tmp_path / "world"
    (d / "alignments").mkdir(parents=True)
    (d / "meta.json").write_text('{"mark": "H3K27me3"}\n')
    (d / "alignments" / "chip.bam").write_bytes(b"BAM\1")
    return d


def test_sees_only_its_world_and_keeps_state(world):
    with Sandbox(world) as sb:
        r = sb.run_python("import os; files = sorted(os.path.relpath(os.path.join(d, f)) for d, _, fs in os.walk('.') for f in fs); print(files)")
        assert r.stdout.strip() == "['alignments/chip.bam', 'meta.json']", r.as_text()
        assert sb.run_python("x = 41").error is None
        assert sb.run_python("print(x + 1)").stdout.strip() == "42"
        assert sb.run_python("print(os.getuid() != 0)").stdout.strip() == "True"


def test_tools_and_science_stack_available(world):
    with Sandbox(world) as sb:
        r = sb.run_python("import subprocess, shutil\nprint([bool(shutil.which(t)) for t in ('macs3', 'samtools', 'bedtools')])\n"
                          "import numpy, pandas, scipy, pysam\nprint('ok')")
        assert r.stdout.split() == ["[True,", "True,", "True]", "ok"], r.as_text()


def test_gold_side_and_host_are_unreachable(world):
    secret = [str(REPO_ROOT / "graders" / "l1.py"), str(REPO_ROOT / "worlds"), str(REPO_ROOT / ".cache"),
              str(REPO_ROOT / "tests"), "/root/.bashrc", "/home", str(world.parent), "/etc/passwd"]
    with Sandbox(world) as sb:
        r = sb.run_python(f"import os; print([os.path.exists(p) for p in {secret!r}])")
        assert r.stdout.strip() == str([False] * len(secret)), r.as_text()
        r = sb.run_python(f"print(os.path.exists({str(REPO_ROOT / 'benchmark' / 'suite' / 'freeze.py')!r}))")
        assert r.stdout.strip() == "False"
        r = sb.run_python("open('/usr/evil', 'w')")
        assert "Read-only file system" in (r.error or "")


def test_no_network(world):
    with Sandbox(world) as sb:
        r = sb.run_python("import socket\ns = socket.socket(); s.settimeout(3)\ns.connect(('93.184.216.34', 80))")
        assert "unreachable" in (r.error or "").lower(), r.as_text()
        r = sb.run_python("import urllib.request\nurllib.request.urlopen('http://pypi.org', timeout=3)")
        assert r.error is not None


def test_environment_is_scrubbed(world, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    monkeypatch.setenv("HOST_ONLY_VARIABLE", "1")
    with Sandbox(world) as sb:
        r = sb.run_python("import os; print(sorted(os.environ))")
        assert "OPENAI_API_KEY" not in r.stdout and "HOST_ONLY_VARIABLE" not in r.stdout
        assert "sk-secret" not in sb.run_python("print(open('/proc/1/environ','rb').read())").as_text()


def test_infinite_loop_is_killed_and_recorded(world):
    with Sandbox(world, Limits(cell_wall_s=3)) as sb:
        sb.run_python("x = 1")
        r = sb.run_python("while True: pass")
        assert r.violation and r.violation.kind == "timeout" and r.restarted
        assert sb.run_python("print('alive')").stdout.strip() == "alive"
        assert "NameError" in (sb.run_python("print(x)").error or ""), "state is lost after a kill, and says so"
        assert [v.kind for v in sb.violations] == ["timeout"]


def test_cpu_limit(world):
    with Sandbox(world, Limits(cpu_seconds=2, cell_wall_s=90)) as sb:
        r = sb.run_python("while True: pass")
        assert r.violation and r.violation.kind == "cpu", r.as_text()
        assert sb.run_python("print(2)").stdout.strip() == "2"


def test_memory_hog_is_contained(world):
    with Sandbox(world, Limits(address_space=4 << 30)) as sb:
        r = sb.run_python("x = bytearray(6 << 30)")
        assert r.violation and r.violation.kind == "memory", r.as_text()
        assert sb.run_python("print(3)").stdout.strip() == "3"


def test_fork_bomb_is_contained(world):
    with Sandbox(world, Limits(processes=48, cell_wall_s=20)) as sb:
        r = sb.run_python("import os\npids = []\nwhile True:\n    pids.append(os.fork())\n    if pids[-1] == 0:\n        import time; time.sleep(30)")
        assert r.violation and r.violation.kind in ("processes", "timeout"), r.as_text()
        assert sb.run_python("print(4)").stdout.strip() == "4"


def test_disk_filler_is_contained(world):
    with Sandbox(world, Limits(workspace_bytes=64 << 20, file_size=16 << 20)) as sb:
        r = sb.run_python("big = b'0' * (8 << 20)\nfor i in range(100):\n    open(f'fill{i}.bin', 'wb').write(big)")
        assert r.violation and r.violation.kind == "disk", r.as_text()
        r = sb.run_python("open('one.bin', 'wb').write(b'0' * (32 << 20))")
        assert r.violation and r.violation.kind in ("file_size", "disk"), r.as_text()
        assert sb.run_python("print(5)").stdout.strip() == "5"


def test_long_output_is_truncated_by_policy(world):
    """A cut stdout names the file that holds it whole, so an agent can read it back in pieces (issue 41 item 8:
    a report printed longer than the cap reached the grader with the marker inside it)."""
    with Sandbox(world) as sb:
        r = sb.run_python("print('a' * 50000 + 'END')")
        m = re.search(r"characters truncated; the whole stdout is in (/tmp/cell_\d+_stdout\.txt)\]", r.stdout)
        assert r.truncated and m and len(r.stdout) < 9000
        back = sb.run_python(f"t = open('{m.group(1)}').read(); print(len(t), t.endswith('END\\n'))")
        assert back.stdout.split() == ["50004", "True"], back.as_text()


def test_collect_returns_agent_outputs_only(world, tmp_path):
    with Sandbox(world) as sb:
        sb.run_python("import os; os.makedirs('out', exist_ok=True); open('out/genes.csv','w').write('g,1\\n')")
        got = sb.collect(tmp_path / "artifacts")
    assert got == ["out/genes.csv"] and (tmp_path / "artifacts/out/genes.csv").read_text() == "g,1\n"
    # the world's own subfolder (alignments/chip.bam, unchanged) leaves no empty folder among the agent's products
    assert sorted(p.name for p in (tmp_path / "artifacts").iterdir()) == ["out"]
