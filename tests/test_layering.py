"""The import contract of the stage layout, kept by import-linter ([tool.importlinter] in pyproject.toml) and a
source check of the protocols.

The contract:
1. Model providers (benchmark.models) import no protocol: not the run verb (benchmark.run.episodes), the agent
   loop (benchmark.run.agent), L3 (benchmark.run.l3), the Ray executor, the pivotal or grounding protocols (their
   run, judge, score, metrics and cli modules), verify or anything else in score/ or oversight/, nor the CLI;
   not directly and not through another module. They may read the suite (worlds, registry, goldens, pivotal
   cases, grounding items), stored runs (benchmark.run.store, records) and the text helpers (benchmark.jsontext,
   benchmark.run.untrusted): the scripted agents decide from the call's context behind the provider boundary.
2. No protocol asks what a scripted agent does: the protocol modules (benchmark.run.episodes, agent, l3,
   ray_executor, benchmark.oversight.verify, benchmark.pivotal.run, benchmark.grounding.run and judge) import
   nothing from benchmark.models.scripted and never mention scripted plans (scripted_plans, plans.plan, a
   `metadata["script"]`); they attach the same neutral call context for every model.
3. graders/ sits below benchmark/: graders import nothing from benchmark, not directly and not through another
   module. The shared types (graders.manifest) and the registries' machinery with the product validators
   (graders.registry) live on the gold side; benchmark imports them from there.
4. The suite (benchmark.suite) imports nothing from run/, score/, oversight/, the model providers or the CLI.

import-linter checks every import statement of every module, function-level ones included, and with
`allow_indirect_imports` left false (contracts 1, 3, 4) every chain of imports too.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROTOCOLS = ("benchmark/run/episodes.py", "benchmark/run/agent.py", "benchmark/run/l3.py",
             "benchmark/run/ray_executor.py", "benchmark/oversight/verify.py", "benchmark/pivotal/run.py",
             "benchmark/grounding/run.py", "benchmark/grounding/judge.py")
PLAN_WORDS = ("scripted_plans", "scripted.plans", "models.scripted", 'metadata["script"]', "metadata['script']",
              '"script":', "'script':")


def _lint(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}  # this tree's packages, not an editable install's
    return subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
                           "sys.exit(lint_imports_command())", "--config", str(root / "pyproject.toml"), "--no-cache",
                           *args], cwd=root, env=env, capture_output=True, text=True, timeout=600)


def test_the_import_contracts_hold():
    proc = _lint(ROOT)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


def test_the_contracts_name_every_stage_package():
    text = (ROOT / "pyproject.toml").read_text()
    for name in ("benchmark.models", "benchmark.suite", "benchmark.run.agent", "benchmark.run.l3",
                 "benchmark.run.episodes", "benchmark.oversight", "benchmark.score", "graders"):
        assert name in text, name


def test_no_protocol_mentions_scripted_plans():
    """Source text, not only imports: a protocol that built a script by any name would hand a plan to a model."""
    for rel in PROTOCOLS:
        src = (ROOT / rel).read_text()
        found = [w for w in PLAN_WORDS if w in src]
        assert not found, f"{rel} mentions {found}: protocols attach neutral call context only"
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("benchmark.models.scripted"), (rel, node.module)
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("benchmark.models.scripted") for a in node.names), rel


def test_no_module_is_left_flat_in_benchmark():
    """The stage layout: only the entry point and the cross-stage helpers stay at benchmark/'s top level."""
    flat = sorted(p.name for p in (ROOT / "benchmark").glob("*.py"))
    assert flat == ["__init__.py", "__main__.py", "cli.py", "console.py", "errors.py", "jsontext.py"], flat


def test_an_l1_run_never_imports_the_l3_protocol(tmp_path):
    """Issue 42 item 4: a process imports what its verb and levels use; `run --levels L1` checks its reviewer option
    through benchmark.run.roles, not the L3 protocol (about 0.3 s of imports)."""
    import os
    import subprocess
    import sys

    from benchmark.suite.loader import REPO_ROOT

    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "benchmark", "run", "--model", "scripted/oracle",
                        "--worlds", "scrna.L1.integrity.clean", "--levels", "L1", "--out", str(tmp_path / "r")],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, BENCHMARK_PROGRESS="0"))
    assert p.returncode == 0, p.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")}
    assert "benchmark.run.roles" in imported and "benchmark.run.l3" not in imported
