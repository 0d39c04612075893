import os

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("BENCHMARK_PROGRESS", "0")

from pathlib import Path  # noqa: E402

# Modules that run for minutes are collected first: pytest-xdist's `--dist loadscope` hands modules to workers in
# collection order, so both workers start on the long ones and the short modules fill in behind them; collected in
# file-name order, a long module could start last and run alone at the end while the other core idles.
HEAVY_FIRST = ("test_validity.py", "test_campaign.py", "test_l3.py", "test_worlds.py", "test_grounding.py",
               "test_pivotal.py", "test_offline_default.py", "test_run.py", "test_ray.py", "test_alternative_analyses.py",
               "test_faults.py", "test_evaluate_doc.py", "test_cli_usability.py")


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).name, len(rank)))  # stable within a module
