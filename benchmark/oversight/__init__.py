"""Human oversight of recorded runs: tools an adjudicator uses to read results and settle grader/verifier
disagreements (the web workbench lives in `benchmark.oversight.view`)."""
