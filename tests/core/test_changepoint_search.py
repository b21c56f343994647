"""The divisive search of app.core.changepoint at its edges: which segment splits next (the larger
q, the leftmost on a tie), a segment of exactly 2 x min_size still splits, the search ends when no
segment is long enough, an effect exactly at the minimum is kept, and the permutation test stops
at the first shuffle that rules significance out."""

from __future__ import annotations

import numpy as np

from app.core.changepoint import ChangePoint, DetectorSettings, _p_value, detect

# p_value 0.1: a perfect step inside an 8-value segment has p ~ 2/C(8, 4); min_size 3 throughout
LOOSE = DetectorSettings(p_value=0.1, min_size=3, min_points=6)


def test_a_segment_of_exactly_twice_min_size_is_still_split() -> None:
    # 6 values, min_size 3: one admissible split (tau 3); a shuffle reaches it 2 times in C(6, 3)
    got = detect(
        [1.0, 1.0, 1.0, 10.0, 10.0, 10.0],
        DetectorSettings(p_value=0.2, min_size=3, min_points=6, permutations=99),
    )
    assert got.change_points == [
        ChangePoint(index=3, p_value=0.1, q=27.0, before=1.0, after=10.0, relative_change=9.0)
    ]


def test_equal_q_in_two_segments_splits_the_leftmost_first_and_the_search_ends_without_a_long_segment() -> (
    None
):
    # after the big step at 8, both halves hold the same 0 -> 1 step shape: the same q (4.0) exactly
    series = [0.0] * 4 + [1.0] * 4 + [100.0] * 4 + [101.0] * 4
    got = detect(series, LOOSE)
    assert got.order_found == [8, 4, 12]
    # every split was significant: the search stopped because no segment of 6 or more was left
    assert got.status == "ok" and [c.index for c in got.change_points] == [4, 8]
    assert [c.index for c in got.rejected] == [12]  # 100 -> 101 is 1%, below 1.5%


def test_the_segment_with_the_larger_q_splits_first() -> None:
    # left half's step (0 -> 2, q 8) beats the right half's (100 -> 101.5, q 6)
    series = [0.0] * 4 + [2.0] * 4 + [100.0] * 4 + [101.5] * 4
    got = detect(series, LOOSE)
    assert got.order_found == [8, 4, 12]
    assert [c.q for c in got.change_points] == [8.0, 790.0, 6.0]


def test_an_effect_exactly_at_the_minimum_is_kept() -> None:
    got = detect([2.0] * 8 + [3.0] * 8, DetectorSettings(min_effect=0.5))
    assert [(c.index, c.relative_change) for c in got.change_points] == [(8, 0.5)] and got.rejected == []
    assert got.reason == "1 change point(s) at p <= 0.01 with effect >= 50.0%"


def _shuffles_drawn(rng: np.random.Generator, size: int, seed: int = 0) -> int:
    """How many permutations of ``size`` values ``rng`` has drawn since ``default_rng(seed)``."""
    ref = np.random.default_rng(seed)
    for drawn in range(1000):
        if ref.bit_generator.state == rng.bit_generator.state:
            return drawn
        ref.permutation(size)
    raise AssertionError("rng is not a default_rng(seed) advanced by permutations")


def test_the_permutation_test_stops_at_the_first_shuffle_past_the_limit() -> None:
    flat = np.full(10, 5.0)  # every shuffle reaches the observed q of 0
    # defaults: limit 0.01 x 300 - 1 = 2, so the 3rd reaching shuffle rules p <= 0.01 out
    rng = np.random.default_rng(0)
    assert _p_value(flat, 0.0, DetectorSettings(), rng) == 1.0
    assert _shuffles_drawn(rng, 10) == 3
    # p 0.5 over 2 shuffles: limit 0.5 x 3 - 1 = 0.5, the first reaching shuffle is enough
    rng = np.random.default_rng(0)
    assert _p_value(flat, 0.0, DetectorSettings(p_value=0.5, permutations=2), rng) == 1.0
    assert _shuffles_drawn(rng, 10) == 1
