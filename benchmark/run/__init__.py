"""Stage 2, run: models meet worlds, and every call, cell and grade is recorded.

    episodes      the `run` verb: select worlds, run and grade each (world, replicate), resume, summarise
    agent         the agent loop (run_python tool calls in the sandbox) and call_model with bounded retries
    l3            the L3 protocol: prior, dossier episode, eligibility, review rounds, rebuttals, judge
    ray_executor  the same episodes on a Ray cluster
    store         the run folder: results.jsonl, trajectories, artifacts, the harness lock
    records       what is recorded (result, trajectory, call, cell and role-usage records)
    estimate      time and cost estimates before a run; progress: the live progress line
    untrusted     quoting agent text into prompts of other roles (nonce frames); refusal: refusal detection

Model providers (benchmark.models) sit beside this stage, below its protocols: no provider imports a protocol,
and the protocols attach only neutral call context (tests/test_layering.py). Kept light: importing a submodule
(the store, the records) must not import the protocols.
"""
