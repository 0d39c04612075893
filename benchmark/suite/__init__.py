"""Stage 1, the suite: what the benchmark is made of, before any model runs.

    (the manifest schema, the shared types, is graders.manifest: graders/ import nothing from benchmark)
    loader        reads and cross-checks worlds/ into a Suite of WorldRefs; the call context protocols attach
    registry      name -> implementation registries the track modules fill (substrates, recipes, writers,
                  solvers, oracle/naive cells, product makers, grounding hosts); the class, load_track_module
                  and the product validators are gold side, in graders.registry
    freeze        builds worlds, runs reference solvers with pinned numerics, writes and verifies goldens and locks
    validate      static checks of the whole suite (`worlds validate`)
    campaign      private campaigns: the suite frozen again with a secret seed
    canonical     byte-stable writers every world file goes through
    package_data  the real data sets packages ship, fetched and checked
    handwritten   hand-written reports that test the grader (worlds/<track>/reports), with their work products

The suite imports nothing from run/, score/ or oversight/ (tests/test_layering.py). The gaming-agent validity check
(`worlds check --agents`) runs agents through the run verb, so it lives above run, in oversight/validity.py.
Kept light: importing a submodule must not import the others.
"""
