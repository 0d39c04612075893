"""Stage 3, score: from recorded runs to numbers.

    aggregate            per-model scores, confidence intervals, rulings applied, costs
    accounting           pricing tables and token/cost accounting
    leaderboard          the leaderboard (markdown, JSON) and leaderboard_figures, its figures
    regrade              re-grade a recorded run against current goldens and graders
"""
