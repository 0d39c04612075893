"""Evidence grounding with verified counterfactuals (seed 000, SPEC R13): items on the real data of the tracks that
host them (host.py), their null / withdrawal / flip versions, the paired runs and the agent and evaluator metrics."""
