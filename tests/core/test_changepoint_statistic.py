"""The change-point statistic itself (app.core.changepoint): the q a detection reports is the
documented E-divisive q(tau) of the series (computed here by brute force from the module's
formula), its index maximises q over the admissible splits, and no split leaves fewer than
``min_size`` nightlies on a side."""

from __future__ import annotations

import itertools

import pytest

from app.core.changepoint import DetectorSettings, detect


def _q(series: list[float], tau: int) -> float:
    x, y = series[:tau], series[tau:]
    m, k = len(x), len(y)
    cross = sum(abs(a - b) for a in x for b in y)
    within_x = sum(abs(a - b) for a, b in itertools.combinations(x, 2))
    within_y = sum(abs(a - b) for a, b in itertools.combinations(y, 2))
    energy = 2 * cross / (m * k) - within_x / (m * (m - 1) / 2) - within_y / (k * (k - 1) / 2)
    return m * k / (m + k) * energy


# uneven sides (7 | 5), values with distinct gaps so every term of q counts
STEP = [10.0, 10.4, 9.7, 10.9, 10.2, 9.9, 10.6, 13.1, 12.6, 13.8, 12.9, 13.3]


def test_the_reported_q_is_the_documented_statistic_at_its_maximum() -> None:
    got = detect(STEP, DetectorSettings(min_points=8, min_size=3))
    assert [c.index for c in got.change_points] == [7]
    cp = got.change_points[0]
    assert cp.q == pytest.approx(_q(STEP, 7), rel=1e-12)
    admissible = range(3, len(STEP) - 3 + 1)
    assert max(admissible, key=lambda t: _q(STEP, t)) == 7
    assert cp.before == pytest.approx(10.2) and cp.after == pytest.approx(13.1)
    assert cp.relative_change == pytest.approx((13.1 - 10.2) / 10.2)


@pytest.mark.parametrize("min_size", [2, 3, 4])
def test_a_step_too_close_to_the_end_is_not_split_off_with_fewer_than_min_size_values(min_size: int) -> None:
    # the real change leaves min_size - 1 values after it: the detector may not put a split there
    series = [10.0, 10.3, 9.8, 10.1, 10.2, 9.9, 10.0, 10.4, 9.7, 10.1] + [
        30.0 + i for i in range(min_size - 1)
    ]
    got = detect(series, DetectorSettings(min_points=2 * min_size, min_size=min_size))
    for cp in [*got.change_points, *got.rejected]:
        assert min_size <= cp.index <= len(series) - min_size, cp
