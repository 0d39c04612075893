"""The generic gold side: the L1 state machine, L2 components and caps, rubric check kinds, report parsing.

graders/ sits below benchmark/ (tests/test_layering.py): it imports nothing from benchmark. It holds the shared
types both sides read (manifest.py: the track, family and world manifests, Check, goldens and locks) and the name
registries' machinery with the grader's own registry (registry.py: Registry, load_track_module, the product
validators a product check calls); the engine's registries are built from it in benchmark.suite.registry.
Pinned numerics (numerics.py) live here, used by the capped worker and by the suite's reference solvers; the
hand-written reports that test the grader read the suite, so they live in benchmark.suite.handwritten.
"""
