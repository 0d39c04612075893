import os

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("BENCHMARK_PROGRESS", "0")
# every core already runs a test (pytest-xdist -n auto): a local model server gets one thread, as a Ray task's does;
# two threads that wait on each other on an oversubscribed core cost several times the CPU of one
os.environ.setdefault("BENCHMARK_LOCAL_THREADS", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from graders.numerics import restore_environment, saved_environment  # noqa: E402

# Modules that run for minutes are collected first: with `--dist loadscope --no-loadscope-reorder` (pyproject.toml)
# pytest-xdist hands modules to workers in collection order, so both workers start on the long ones and the short
# modules fill in behind them. Otherwise a long module could start last and run alone while the other core idles.
HEAVY_FIRST = ("test_validity.py", "test_campaign.py", "test_l3.py", "test_worlds.py", "test_grounding.py",
               "test_pivotal.py", "test_offline_default.py", "test_run.py", "test_ray.py", "test_alternative_analyses.py",
               "test_faults.py", "test_evaluate_doc.py", "test_cli_usability.py")


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).name, len(rank)))  # stable within a module


@pytest.fixture(autouse=True)
def _numerics_environment_left_as_found(request):
    """A test that leaves this process's numerics environment changed (graders.numerics.pinned_environment not
    undone, as two harness threads once did) fails under its own name. Otherwise a later test in this worker takes
    this process for a pinned one (`solve` then runs here, on whatever BLAS kernel it loaded) and fails far from
    the cause."""
    before = saved_environment()
    yield
    after = saved_environment()
    if after != before:
        restore_environment(before)
        changed = sorted(k for k in before if after[k] != before[k])
        pytest.fail(f"{request.node.nodeid} left the numerics environment changed ({', '.join(changed)})")
