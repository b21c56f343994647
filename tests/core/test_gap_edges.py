"""The gap's edges: noise bands, verdict boundaries, whole rows and whole tables, interpolation's
ends, and what a result file's fields and name say it measured (issue 30: mutation testing)."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest

from app.core.gap import (
    MIN_INPUT_SHARE,
    NO_REFERENCE,
    NO_RESULT,
    NOT_ENOUGH,
    TOKEN_SLACK,
    GapRow,
    RunIdentity,
    TputGapRow,
    compute_gap,
    fmt_pct,
    gap_table,
    identity_mismatch,
    interpolate,
    noise_tolerance,
    reference_applies,
    render_gap_table,
    render_tput_table,
    run_identity,
    same_model,
    tput_gap_at_equal_interactivity,
    verdict,
)
from app.core.references import Reference


def _ref(
    *, metric: str = "mean_tpot_ms", points: dict[int, dict[str, float]] | None = None, **kw: Any
) -> Reference:
    return Reference(name="r", engine="atom", metric=metric, points=points or {}, **kw)


# ------------------------------------------------------------------------------ noise and verdict


def test_two_runs_give_a_band_of_two_standard_deviations() -> None:
    assert noise_tolerance([1.0, 3.0]) == pytest.approx(math.sqrt(2))  # 2 * sqrt(2) / 2
    assert noise_tolerance([0.5, 1.5]) == pytest.approx(math.sqrt(2) / 1.0)  # mean exactly 1
    assert noise_tolerance([5.0]) == 0.01
    assert noise_tolerance([]) == 0.01
    assert noise_tolerance([-1.0, 1.0]) == 0.01  # mean 0: no relative band


def test_a_gap_on_the_band_is_matched_and_just_past_it_is_not() -> None:
    assert verdict(0.05, 0.05, lower_better=True) == "matched"
    assert verdict(-0.05, 0.05, lower_better=True) == "matched"
    assert verdict(1e-12, 0.0, lower_better=True) == "matched"  # the float slack is inclusive
    assert verdict(0.051, 0.05, lower_better=True) == "behind"
    assert verdict(-0.051, 0.05, lower_better=True) == "ahead"
    assert verdict(0.051, 0.05, lower_better=False) == "ahead"
    assert verdict(-0.051, 0.05, lower_better=False) == "behind"


# ------------------------------------------------------------------------------------ whole rows


def test_every_kind_of_row_is_whole_and_later_concs_still_come() -> None:
    # a stored run may lack the value (None) or hold a non-finite one: neither is averaged
    recipe: dict[int, Any] = {1: [], 2: [12.0], 4: [float("inf"), None, 9.0, 11.0], 8: [5.0], 16: [3.0]}
    reference = {1: 7.0, 4: 10.0, 8: 1.0, 16: 0.0, 32: 2.0}
    rows = compute_gap(recipe, reference)
    tol4 = noise_tolerance([9.0, 11.0])
    assert rows == [
        GapRow(1, None, 0, 7.0, None, None, NO_RESULT),
        GapRow(2, 12.0, 1, None, None, None, NO_REFERENCE),
        GapRow(4, 10.0, 2, 10.0, 0.0, tol4, "matched"),
        GapRow(8, 5.0, 1, 1.0, 4.0, 0.01, "behind"),
        GapRow(16, 3.0, 1, None, None, None, NO_REFERENCE),
        GapRow(32, None, 0, 2.0, None, None, NO_RESULT),
    ]


def test_a_throughput_metric_counts_higher_as_ahead() -> None:
    rows = compute_gap({1: [120.0]}, {1: 100.0}, metric="tput_per_gpu")
    assert rows == [GapRow(1, 120.0, 1, 100.0, 0.2, 0.01, "ahead")]


def test_a_reference_with_only_one_sequence_length_is_not_checked_on_it() -> None:
    assert reference_applies(_ref(isl=8192), tp=None, seq="1k1k")
    assert reference_applies(_ref(osl=1024), tp=None, seq="1k1k")
    assert reference_applies(_ref(isl=8192, osl=1024), tp=None, seq="8k1k")
    assert not reference_applies(_ref(isl=8192, osl=1024), tp=None, seq="1k1k")


def test_gap_table_uses_the_references_metric_and_skips_half_curve_points() -> None:
    ref = _ref(metric="tput_per_gpu", points={1: {"tput_per_gpu": 100.0}})
    runs = [
        (1, SimpleNamespace(interactivity=None, tput_per_gpu=120.0)),
        (1, SimpleNamespace(interactivity=50.0, tput_per_gpu=None)),
        (2, SimpleNamespace(interactivity=40.0, tput_per_gpu=90.0)),
    ]
    table = gap_table(runs, ref, tp=None)
    assert table.metric == "tput_per_gpu"
    assert table.curve == [(40.0, 90.0)]
    assert table.recipe == {1: [120.0], 2: [90.0]}
    assert table.rows == [
        GapRow(1, 120.0, 1, 100.0, 0.2, 0.01, "ahead"),
        GapRow(2, 90.0, 1, None, None, None, NO_REFERENCE),
    ]


def test_gap_table_without_a_reference_reads_mean_tpot() -> None:
    runs = [
        (1, SimpleNamespace(interactivity=None, tput_per_gpu=None, mean_tpot_ms=20.0)),
        (2, SimpleNamespace(interactivity=None, tput_per_gpu=None)),  # a result without the metric
    ]
    table = gap_table(runs, None, tp=None)
    assert table.metric == "mean_tpot_ms"
    assert table.recipe == {1: [20.0]}
    assert table.rows == [GapRow(1, 20.0, 1, None, None, None, NO_REFERENCE)]


# --------------------------------------------------------------------------------- interpolation


def test_interpolation_inside_at_the_ends_and_outside() -> None:
    curve = [(10.0, 1.0), (20.0, 2.0), (30.0, 6.0)]
    assert interpolate(curve, 15.0) == pytest.approx(1.5)  # first segment, y below x
    assert interpolate(curve, 25.0) == pytest.approx(4.0)
    assert interpolate(curve, 10.0) == 1.0  # the left end
    assert interpolate(curve, 30.0) == 6.0  # the right end
    assert interpolate(curve, 20.0) == 2.0
    assert interpolate(curve, 9.99) is None
    assert interpolate(curve, 30.01) is None
    assert interpolate(curve, float("nan")) is None
    assert interpolate([(10.0, 1.0), (20.0, 2.0)], 12.0) == pytest.approx(1.2)  # two points


def test_interpolation_on_a_single_point_or_none() -> None:
    assert interpolate([], 5.0) is None
    assert interpolate([(5.0, 7.0)], 5.0) == 7.0
    assert interpolate([(5.0, 7.0), (5.0, 9.0)], 5.0) == 8.0  # runs at one x: their mean
    assert interpolate([(5.0, 7.0)], 6.0) is None
    assert interpolate([(5.0, 7.0)], 4.0) is None


def test_tput_rows_are_whole() -> None:
    curve = [(10.0, 100.0), (30.0, 300.0)]
    rows = tput_gap_at_equal_interactivity(curve, {8: (20.0, 1.0), 4: (20.0, 0.0), 2: (50.0, 10.0)})
    assert rows == [
        TputGapRow(50.0, 2, 10.0, None, None, NOT_ENOUGH),
        TputGapRow(20.0, 4, 0.0, None, None, NOT_ENOUGH),
        TputGapRow(20.0, 8, 1.0, 200.0, 199.0, ""),
    ]


# ------------------------------------------------------------------------------------ formatting


def test_percentages_round_to_a_tenth_and_zero_has_no_sign() -> None:
    assert fmt_pct(None) == "—"
    assert fmt_pct(0.0) == "0.0%"
    assert fmt_pct(0.0004) == "0.0%"
    assert fmt_pct(-0.0004) == "0.0%"
    assert fmt_pct(0.01) == "+1.0%"
    assert fmt_pct(0.5) == "+50.0%"
    assert fmt_pct(-0.1234) == "-12.3%"


def test_the_gap_table_as_a_user_reads_it() -> None:
    rows = [
        GapRow(1, 10.0, 1, 10.0, 0.0, 0.01, "matched"),
        GapRow(2, 12.0, 2, 10.0, 0.2, 0.01, "behind"),
        GapRow(4, 8.0, 3, 10.0, -0.2, 0.01, "ahead"),
        GapRow(8, None, 0, 10.0, None, None, NO_RESULT),
    ]
    assert render_gap_table(rows, metric="mean_tpot_ms", icons=True) == "\n".join(
        [
            "| conc | vLLM | ATOM ref | gap | verdict |",
            "| ---: | ---: | ---: | ---: | --- |",
            "| 1 | 10.00 ms | 10.00 ms | 0.0% | 🟢 matched |",
            "| 2 | 12.00 ms (n=2) | 10.00 ms | +20.0% | 🔴 behind |",
            "| 4 | 8.00 ms (n=3) | 10.00 ms | -20.0% | 🔵 ahead |",
            "| 8 | — | 10.00 ms | — | no result |",
        ]
    )
    assert render_gap_table(rows[1:2], metric="tput_per_gpu") == "\n".join(
        [
            "| conc | vLLM | ATOM ref | gap | verdict |",
            "| ---: | ---: | ---: | ---: | --- |",
            "| 2 | 12.0 (n=2) | 10.0 | +20.0% | behind |",
        ]
    )


def test_the_throughput_table_as_a_user_reads_it() -> None:
    rows = [
        TputGapRow(20.0, 8, 1000.0, 1250.0, 0.25, ""),
        TputGapRow(50.0, 2, 10.0, None, None, NOT_ENOUGH),
    ]
    assert render_tput_table(rows) == "\n".join(
        [
            "| interactivity (tok/s/user) | vLLM tok/s/GPU | ATOM ref tok/s/GPU | gap |",
            "| ---: | ---: | ---: | ---: |",
            "| 20.0 (ref conc 8) | 1,250.0 | 1,000.0 | +25.0% |",
            "| 50.0 (ref conc 2) | not enough data | 10.0 | — |",
        ]
    )


# ---------------------------------------------------------------------------- what a file measured


@pytest.mark.parametrize("key", ["isl", "random_input_len", "input_len"])
def test_each_input_length_field_is_read(key: str) -> None:
    assert run_identity({key: 1024}, "f.json") == RunIdentity(file="f.json", isl=1024)


@pytest.mark.parametrize("key", ["osl", "random_output_len", "output_len"])
def test_each_output_length_field_is_read(key: str) -> None:
    assert run_identity({key: 128}, "f.json") == RunIdentity(file="f.json", osl=128)


@pytest.mark.parametrize(
    ("value", "read"), [(1, 1), (1.0, 1), (1.5, None), (0, None), (True, None), ("8", None), (2, 2)]
)
def test_lengths_are_whole_positive_numbers(value: object, read: int | None) -> None:
    assert run_identity({"tp": value}, "f.json").tp == read


def test_model_is_the_first_non_empty_name() -> None:
    assert run_identity({"model": "", "model_id": "m"}, "f").model == "m"
    assert run_identity({"model": 5, "model_id": "m"}, "f").model == "m"
    assert run_identity({"model": "a", "model_id": "m"}, "f").model == "a"


@pytest.mark.parametrize(
    ("file_name", "isl"),
    [
        ("isl1024_osl128.json", 1024),
        ("runs/isl1024_osl128.json", 1024),
        ("isl1_osl2.zip:result.json", None),  # the member, not the archive, names the file
        ("a:isl1_osl2.x:b.json", None),
        ("dir isl1_osl2.json/b.json", None),  # the base name, not what precedes a blank
        ("a/isl1_osl2.x/b.json", None),
        ("isl1_osl2.d/b.json", None),
        ("a/b.zip:isl3_osl4.json", 3),
    ],
)
def test_only_the_base_name_of_a_file_names_its_lengths(file_name: str, isl: int | None) -> None:
    assert run_identity({}, file_name).isl == isl


def test_token_means_divide_by_the_requests() -> None:
    doc: dict[str, float] = {"num_prompts": 10, "total_input_tokens": 1000, "total_output_tokens": 0}
    assert run_identity(doc, "f") == RunIdentity(file="f", mean_input=100.0, mean_output=0.0)
    doc = {"completed": 4, "num_prompts": 10, "total_input_tokens": 1000, "total_output_tokens": 0.5}
    assert run_identity(doc, "f") == RunIdentity(file="f", mean_input=250.0, mean_output=0.125)
    no_requests = run_identity({"total_input_tokens": 1000}, "f")
    assert no_requests == RunIdentity(file="f")
    odd = {"completed": 10, "total_input_tokens": float("inf"), "total_output_tokens": -1}
    assert run_identity(odd, "f") == RunIdentity(file="f")


def test_model_names_compare_word_by_word_after_the_org() -> None:
    assert not same_model("org/abc-1", "org/xyz-1")
    assert same_model("MiniMax-M3", "amd/MiniMax-M3-MXFP4")
    assert same_model("amd/MiniMax-M3-MXFP4", "MiniMax-M3")
    assert same_model("hub/amd/MiniMax-M3", "MiniMax-M3")
    assert not same_model("MiniMax-M2.5", "MiniMax-M3")


def test_token_means_on_the_workloads_bounds() -> None:
    ref = _ref(isl=1000, osl=1000)
    for sent in (1000 * MIN_INPUT_SHARE, 1000.0, 1000 * TOKEN_SLACK):
        assert identity_mismatch(ref, RunIdentity(file="f", mean_input=sent)) is None
    for got in (1000.0, 1000 * TOKEN_SLACK):
        assert identity_mismatch(ref, RunIdentity(file="f", mean_output=got)) is None
    assert identity_mismatch(ref, RunIdentity(file="f", mean_input=1000 * MIN_INPUT_SHARE - 1)) == (
        "f sent 499 input tokens per request, not the reference's ISL 1000 / OSL 1000"
    )
    assert identity_mismatch(ref, RunIdentity(file="f", mean_output=1051.0)) == (
        "f generated 1051 output tokens per request, more than the reference's ISL 1000 / OSL 1000"
    )
