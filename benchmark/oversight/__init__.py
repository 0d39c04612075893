"""Stage 4, oversight: checking the runs, the graders and the suite itself.

    verify      an LLM verifier re-reads each recorded answer and flags grader disagreements
    ledger      the adjudication ledgers (rulings on disagreements); adjudicate: the `adjudicate` verb
    audit       transcript audit (sandbox escape attempts flagged in the cells)
    validity    `worlds check --agents`: oracle, naive and the gaming agents through the run verb; no gaming agent
                may beat blind trust. It runs agents, so it sits above run/ (not in suite/, which imports no run)
    view        the web workbench (benchmark.oversight.view)
"""
