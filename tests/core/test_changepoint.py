"""The nightly-series change-point detector on synthetic series (issue 18, "What it must show")."""

from __future__ import annotations

import random

import pytest

from app.core.changepoint import DetectorSettings, detect


def _noise(n: int, seed: int, level: float = 100.0, sigma: float = 0.01) -> list[float]:
    rng = random.Random(seed)
    return [level * (1.0 + rng.gauss(0.0, sigma)) for _ in range(n)]


def _uniform(n: int, seed: int, level: float = 100.0, spread: float = 0.01) -> list[float]:
    rng = random.Random(seed)
    return [level * (1.0 + rng.uniform(-spread, spread)) for _ in range(n)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("at", [8, 20, 33])
def test_a_3_percent_step_in_1_percent_noise_is_found_at_the_right_nightly(seed: int, at: int) -> None:
    series = _uniform(40, seed)  # every value within 1% of the level
    series = series[:at] + [v * 1.03 for v in series[at:]]
    got = detect(series)
    assert got.status == "ok"
    assert [c.index for c in got.change_points] == [at]
    cp = got.change_points[0]
    assert cp.p_value <= 0.01
    assert 0.02 < cp.relative_change < 0.04


def test_a_3_percent_step_in_gaussian_1_percent_noise_is_located_as_well_as_the_data_allows() -> None:
    # With sigma = 1% a neighbour of the step lands on the wrong side of it now and then (a value
    # 1.5 sigma off), so no estimator is always exact; least squares does no better on these series.
    exact = near = 0
    cases = [(seed, at) for seed in range(20) for at in (10, 20, 30)]
    for seed, at in cases:
        series = _noise(40, seed)
        series = series[:at] + [v * 1.03 for v in series[at:]]
        got = detect(series)
        first = got.order_found[0]
        exact += first == at
        near += abs(first - at) <= 1
    assert exact >= 0.75 * len(cases)
    assert near >= 0.9 * len(cases)


@pytest.mark.parametrize("seed", range(10))
def test_pure_noise_over_60_nightlies_raises_no_alarm(seed: int) -> None:
    got = detect(_noise(60, 1000 + seed))
    assert got.status == "ok"
    assert got.change_points == []


def test_fewer_than_the_minimum_says_not_enough_data() -> None:
    got = detect(_noise(7, 1), DetectorSettings(min_points=8))
    assert got.status == "not_enough_data"
    assert not got.enough_data
    assert "7 nightlies, at least 8" in got.reason
    assert detect(_noise(8, 1), DetectorSettings(min_points=8)).status == "ok"


def test_an_improvement_is_a_change_point_too_with_negative_change() -> None:
    series = _noise(30, 7)
    series = series[:15] + [v * 0.95 for v in series[15:]]
    got = detect(series)
    assert [c.index for c in got.change_points] == [15]
    assert got.change_points[0].relative_change < 0


def test_a_regression_and_its_fix_are_two_change_points() -> None:
    series = _noise(45, 3)
    series = series[:15] + [v * 1.04 for v in series[15:30]] + series[30:]
    got = detect(series)
    assert [c.index for c in got.change_points] == [15, 30]


def test_one_outlier_is_not_a_change() -> None:
    series = _noise(40, 11)
    series[20] *= 1.15
    assert detect(series).change_points == []


def test_a_significant_but_tiny_shift_is_rejected_by_the_minimum_effect() -> None:
    series = _noise(60, 5, sigma=0.001)
    series = series[:30] + [v * 1.006 for v in series[30:]]
    got = detect(series)
    assert got.change_points == []
    assert [c.index for c in got.rejected] == [30]
    assert detect(series, DetectorSettings(min_effect=0.004)).change_points[0].index == 30


def test_the_answer_is_deterministic_for_a_seed() -> None:
    series = _noise(30, 9)
    series = series[:12] + [v * 1.02 for v in series[12:]]
    a = detect(series, DetectorSettings(seed=4))
    b = detect(series, DetectorSettings(seed=4))
    assert a == b


def test_bad_input_and_settings_are_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="leave missing nightlies out"):
        detect([1.0] * 9 + [float("nan")])
    with pytest.raises(ValueError, match="min_points"):
        DetectorSettings(min_points=4, min_size=3)
    with pytest.raises(ValueError, match="p_value"):
        DetectorSettings(p_value=1.5)
