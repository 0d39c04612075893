"""The generic gold side: the L1 state machine, L2 components and caps, rubric check kinds, report parsing.

graders/ sits below benchmark/ (tests/test_layering.py): from benchmark it imports only the shared manifest types
(benchmark.suite.manifest: Check, the world and family manifests) and one remaining edge, the name registry the
track modules fill (benchmark.suite.registry: the product validators a product check calls, load_track_module to
register them). Pinned numerics (numerics.py) live here, used by the capped worker and by the suite's reference
solvers; the hand-written reports that test the grader read the suite, so they live in benchmark.suite.handwritten.
"""
