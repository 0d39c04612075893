"""The histone copy-number trap moves the statistic it corrupts (issue 38, campaign seed 7003).

At that seed the amplified block of `histone.L2.quantify.amplified_region` sat over few expressed promoters and moved
the promoter-signal-vs-expression Spearman by 0.037, inside the grader's tolerance: the trap's answer was the true one
and the world tested nothing. `copy_number_gain(min_shift=...)` keeps a drawn block that moves it enough and otherwise
slides the block to the nearest one that does (or, where none does, to the one that moves it most)."""
from __future__ import annotations

import numpy as np

from worlds.histone.build import _gain_shift, _place_by_shift, copy_number_gain, histone_panel

K27 = ["H3K27me3_chip"]
LENGTH = 900_000


def _inside(d, chrom: str, start: int, end: int) -> int:
    lib = d.libs["H3K27me3_chip"]
    centre = lib.start + lib.flen / 2
    ci = {c: i for i, (c, _) in enumerate(d.chroms)}[chrom]
    return int(((lib.chrom == ci) & (centre >= start) & (centre < end)).sum())


def test_a_block_that_barely_moves_the_statistic_slides_to_one_that_does():
    d = histone_panel(seed=1)
    shift = _gain_shift(d, 4.0, K27)
    starts = [(c, s) for c, n in d.chroms for s in range(0, n - LENGTH, 50_000)]
    weak = min(starts, key=lambda cs: shift(cs[0], cs[1], cs[1] + LENGTH))
    assert shift(weak[0], weak[1], weak[1] + LENGTH) < 0.05, "the panel has a block the trap barely moves"
    chrom, start, end = _place_by_shift(d, weak[0], weak[1], weak[1] + LENGTH, 4.0, K27, 0.15)
    assert end - start == LENGTH and shift(chrom, start, end) >= 0.15
    before = _inside(d, chrom, start, end)
    copy_number_gain(d, np.random.default_rng(0), chrom=weak[0], start=weak[1], length=LENGTH, gain=4.0, samples=K27,
                     min_shift=0.15)
    assert _inside(d, chrom, start, end) > 3 * before, "the gain landed in the block that moves the statistic"


def test_a_block_that_moves_it_enough_is_kept_and_an_unreachable_bar_takes_the_strongest_block():
    d = histone_panel(seed=1)
    shift = _gain_shift(d, 4.0, K27)
    starts = [(c, s) for c, n in d.chroms for s in range(0, n - LENGTH, 50_000)]
    strong = max(starts, key=lambda cs: shift(cs[0], cs[1], cs[1] + LENGTH))
    best = shift(strong[0], strong[1], strong[1] + LENGTH)
    good = next(cs for cs in starts if 0.15 <= shift(cs[0], cs[1], cs[1] + LENGTH))
    assert _place_by_shift(d, good[0], good[1], good[1] + LENGTH, 4.0, K27, 0.15) == (good[0], good[1], good[1] + LENGTH)
    chrom, start, end = _place_by_shift(d, starts[0][0], starts[0][1], starts[0][1] + LENGTH, 4.0, K27, best + 1.0)
    assert shift(chrom, start, end) == best, "no block reaches the bar: the recipe still builds, as strong as it can"


def test_quantify_rubrics_grade_promoter_signal_against_the_simulated_occupancy():
    """Issue 39 item 4: the promoter-quantification worlds grade the per-gene table against the generative truth (each
    gene's simulated mark at its promoter: a peak's fragments, or the domains' fold-enriched bp) and the mark-expression
    Spearman from the reference's value to the truth's. The reference recovers the occupancy's ranking (Spearman >= 0.7
    on the broad mark, 0.95 on H3K4me3) and the sign of its relation to expression."""
    from scipy.stats import spearmanr

    from benchmark.suite.freeze import read_golden
    from benchmark.suite.loader import load_suite

    suite = load_suite()
    for name, floor in (("clean_h3k4me3", 0.95), ("pcr_jackpots", 0.95), ("amplified_region", 0.7),
                        ("broad_mark_narrow_default", 0.7)):
        ref = suite.worlds[f"histone.L2.quantify.{name}"]
        table = next(c for c in ref.world.rubric.checks if c.id == "table")
        assert (table.golden, table.reference) == ("truth.promoter_occupancy", "promoter_signal")
        g = read_golden(ref).values
        occ, sig = g["truth"]["promoter_occupancy"], g["promoter_signal"]
        keys = sorted(set(occ) & set(sig))
        assert len(keys) == len(sig) and spearmanr([occ[k] for k in keys], [sig[k] for k in keys]).statistic >= floor
        assert np.sign(g["truth"]["occupancy_expression_spearman"]) == np.sign(g["signal_expression_spearman"])
