"""The change-point statistic itself (app.core.changepoint): the q a detection reports is the
documented E-divisive q(tau) of the series (computed here by brute force from the module's
formula), its index maximises q over the admissible splits, and no split leaves fewer than
``min_size`` nightlies on a side."""

from __future__ import annotations

import itertools

import pytest
from structlog.testing import capture_logs

from app.core.changepoint import Detection, DetectorSettings, detect


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


def test_a_strong_step_reaches_no_shuffle_so_its_p_is_one_over_r_plus_one() -> None:
    cp = detect(STEP, DetectorSettings(min_points=8, min_size=3)).change_points[0]
    assert cp.p_value == 1 / (299 + 1)


def test_a_flat_series_is_no_change_and_its_search_logs_p_one() -> None:
    # every shuffle of a flat series reaches its q (0): the early stop after the limit's
    # shuffles still gives p = reached / done = 1
    with capture_logs() as logs:
        got = detect([5.0] * 10, DetectorSettings(p_value=0.5, permutations=3))
    assert got == Detection("ok", [], "0 change point(s) at p <= 0.5 with effect >= 1.5%", [], [])
    assert logs == [
        {"event": "changepoint_search_done", "log_level": "info", "candidate": 3, "p": 1.0, "level": 0.5},
        {"event": "changepoint_detected", "log_level": "info", "points": 10, "found": [], "rejected": 0},
    ]


def test_the_search_log_rounds_p_to_four_digits() -> None:
    # noise: the permutation test stops early at p = 4/7 = 0.571428..., logged as 0.5714
    with capture_logs() as logs:
        detect([10.1, 9.8, 9.9, 9.3, 10.5, 10.3, 9.9, 10.2, 10.1, 9.8, 10.3, 9.9])
    (done,) = [e for e in logs if e["event"] == "changepoint_search_done"]
    assert done == {
        "event": "changepoint_search_done",
        "log_level": "info",
        "candidate": done["candidate"],
        "p": 0.5714,
        "level": 0.01,
    }
    assert 3 <= done["candidate"] <= 9


def test_not_enough_data_is_said_and_logged() -> None:
    with capture_logs() as logs:
        got = detect([1.0] * 7)
    assert got == Detection("not_enough_data", reason="not enough data: 7 nightlies, at least 8 needed")
    assert not got.enough_data
    assert logs == [{"event": "changepoint_not_enough_data", "log_level": "info", "points": 7, "needed": 8}]


def test_a_change_from_zero_is_an_infinite_relative_change() -> None:
    got = detect([0.0] * 6 + [1.0, 1.1, 0.9, 1.0, 1.2, 1.0])
    (cp,) = got.change_points
    assert cp.index == 6 and cp.before == 0.0 and cp.relative_change == float("inf")


def test_two_changes_each_measured_between_its_neighbours() -> None:
    series = [
        10.0,
        10.2,
        9.8,
        10.1,
        9.9,
        10.0,
        12.0,
        12.2,
        11.8,
        12.1,
        11.9,
        12.0,
        9.0,
        9.2,
        8.8,
        9.1,
        8.9,
        9.0,
    ]
    got = detect(series)
    assert [(c.index, c.before, c.after) for c in got.change_points] == [(6, 10.0, 12.0), (12, 12.0, 9.0)]
    assert got.reason == "2 change point(s) at p <= 0.01 with effect >= 1.5%"


def test_a_tiny_significant_shift_is_kept_aside_and_said() -> None:
    series = [
        100.0,
        100.01,
        99.99,
        100.0,
        100.01,
        99.99,
        100.0,
        101.0,
        101.01,
        100.99,
        101.0,
        101.01,
        100.99,
        101.0,
    ]
    got = detect(series, DetectorSettings(min_effect=0.02))
    assert got.change_points == [] and [c.index for c in got.rejected] == [7]
    assert got.reason == (
        "0 change point(s) at p <= 0.01 with effect >= 2.0%; "
        "1 significant but smaller than the minimum effect"
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"p_value": 1e-9},
        {"p_value": 0.999},
        {"permutations": 1},
        {"min_size": 2, "min_points": 4},
        {"min_size": 3, "min_points": 6},
        {"min_effect": 0.0},
    ],
)
def test_settings_at_their_limits_are_accepted(kwargs: dict[str, float]) -> None:
    DetectorSettings(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"p_value": 0.0}, "p_value must be between 0 and 1, got 0.0"),
        ({"p_value": 1.0}, "p_value must be between 0 and 1, got 1.0"),
        ({"permutations": 0}, "permutations must be at least 1, got 0"),
        ({"min_size": 1}, "min_size must be at least 2 (a within-pair distance needs two), got 1"),
        (
            {"min_size": 4, "min_points": 7},
            "min_points (7) must be at least 2 x min_size (8): "
            "a change point needs min_size values on each side",
        ),
        ({"min_effect": -0.01}, "min_effect must be >= 0, got -0.01"),
    ],
)
def test_settings_out_of_range_are_refused_with_why(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError) as err:
        DetectorSettings(**kwargs)  # type: ignore[arg-type]
    assert str(err.value) == message


def test_a_non_finite_value_is_refused_with_the_fix() -> None:
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError) as err:
            detect([1.0] * 9 + [bad])
        assert str(err.value) == "the series has a NaN or infinite value: leave missing nightlies out instead"
