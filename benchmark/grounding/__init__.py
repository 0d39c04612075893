"""Evidence grounding with verified counterfactuals (seed 000, SPEC R13): items on the real data of the tracks that
host them (host.py), their null / withdrawal / flip versions, the paired runs and the agent and evaluator metrics.

A self-contained side protocol, not split over the stage packages: its items (items.py, host.py, build.py) are
its suite, run.py and judge.py its protocol, metrics.py its scores, cli.py its verbs. Model providers may read
its items (the scripted oracle, benchmark.models.scripted.plans), never its protocol modules.
"""
