"""Accuracy against a reference (app.core.accuracy), rule by rule and as the PR reads it: the
verdict's edges, filter spellings, the per-task verdict order, and the exact table, notes and
summary lines."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from app.core.accuracy import (
    NO_REFERENCE,
    NOT_ENOUGH,
    NOT_WORSE,
    WORSE,
    AccuracyRow,
    RefAccuracy,
    accuracy_notes,
    accuracy_summary,
    accuracy_verdict,
    compare_accuracy,
    fmt_score,
    latency_summary,
    overall_verdict_line,
    render_accuracy_table,
    task_verdicts,
)


def score(task: str = "gsm8k", filt: str = "strict-match", value: float = 0.9, **kw: Any) -> SimpleNamespace:
    base: dict[str, Any] = {"metric": "exact_match", "stderr": 0.01, "n": 1319, "limit": None, "conc": 64}
    return SimpleNamespace(task=task, filter=filt, score=value, **(base | kw))


@pytest.mark.parametrize(
    ("args", "kw", "want"),
    [
        ((0.90, 0.01, 100, None), {}, (NO_REFERENCE, None)),
        ((0.90, None, 100, 0.9), {}, (NOT_ENOUGH, None)),
        ((0.90, 0.01, None, 0.9), {}, (NOT_ENOUGH, None)),
        ((0.90, 0.01, 0, 0.9), {}, (NOT_ENOUGH, None)),
        ((0.90, 0.01, 1, 0.9), {}, (NOT_WORSE, 0.01)),
        # shortfall exactly the combined stderr hypot(0.03, 0.04) = 0.05: not worse
        ((0.85, 0.03, 100, 0.90), {"reference_stderr": 0.04}, (NOT_WORSE, 0.05)),
        ((0.8499, 0.03, 100, 0.90), {"reference_stderr": 0.04}, (WORSE, 0.05)),
        # the tolerance when larger than the stderr
        ((0.87, 0.01, 100, 0.90), {"tolerance": 0.03}, (NOT_WORSE, 0.03)),
        ((0.8699, 0.01, 100, 0.90), {"tolerance": 0.03}, (WORSE, 0.03)),
        ((0.88, 0.02, 100, 0.90), {"tolerance": 0.001}, (NOT_WORSE, 0.02)),
        ((0.8799, 0.02, 100, 0.90), {}, (WORSE, 0.02)),
        ((0.99, 0.02, 100, 0.90), {}, (NOT_WORSE, 0.02)),  # above: not worse
    ],
)
def test_accuracy_verdict(args: tuple[Any, ...], kw: dict[str, Any], want: tuple[str, float | None]) -> None:
    verdict, allowed = accuracy_verdict(*args, **kw)
    assert verdict == want[0]
    assert allowed == (pytest.approx(want[1]) if want[1] is not None else None)


def test_compare_matches_task_and_filter_spellings_and_fills_every_column() -> None:
    refs = [
        RefAccuracy("GSM8K", "Flexible", 0.95, stderr=0.005),
        RefAccuracy("gsm8k", " strict ", 0.93),
        RefAccuracy("mmlu", "custom-Filter", 0.7),
    ]
    rows = compare_accuracy(
        [
            score("gsm8k", "flexible-extract", 0.94, limit=100.0),
            score("Gsm8k", "STRICT-match", 0.90, conc=None),
            score("mmlu", "Custom-filter", 0.71, stderr=None),
            score("gpqa", "none", 0.5),
        ],
        refs,
        tolerance=0.02,
    )
    assert rows[0].shortfall == pytest.approx(0.01) and rows[0].allowed == pytest.approx(0.02)
    assert replace(rows[0], shortfall=0.01, allowed=0.02) == AccuracyRow(
        "gsm8k",
        "flexible-extract",
        "exact_match",
        64,
        0.94,
        0.01,
        1319,
        100.0,
        0.95,
        0.005,
        0.01,
        0.02,
        NOT_WORSE,
    )
    assert (rows[1].task, rows[1].conc, rows[1].reference, rows[1].reference_stderr) == (
        "Gsm8k",
        None,
        0.93,
        None,
    )
    assert rows[1].shortfall == pytest.approx(0.03) and rows[1].verdict == WORSE
    assert rows[2].reference == 0.7 and rows[2].verdict == NOT_ENOUGH and rows[2].allowed is None
    assert rows[3].reference is None and rows[3].shortfall is None and rows[3].verdict == NO_REFERENCE
    assert isinstance(rows[0].score, float) and isinstance(
        compare_accuracy([score(value=1)], [])[0].score, float
    )


def _row(task: str, verdict: str, **kw: Any) -> AccuracyRow:
    base: dict[str, Any] = {
        "task": task, "filter": "strict-match", "metric": "exact_match", "conc": 64, "score": 0.9,
        "stderr": 0.01, "n": 1319, "limit": None, "reference": 0.9, "reference_stderr": None,
        "shortfall": 0.0, "allowed": 0.01, "verdict": verdict,
    }  # fmt: skip
    return AccuracyRow(**(base | kw))


def test_task_verdicts_take_the_worst_row_and_skip_missing_references() -> None:
    rows = [
        _row("a", NOT_WORSE), _row("a", NOT_ENOUGH), _row("a", NOT_WORSE),
        _row("b", NOT_ENOUGH), _row("b", WORSE), _row("b", NOT_WORSE),
        _row("c", NO_REFERENCE), _row("d", NOT_WORSE), _row("d", NO_REFERENCE),
    ]  # fmt: skip
    assert task_verdicts(rows) == {"a": NOT_ENOUGH, "b": WORSE, "d": NOT_WORSE}
    assert accuracy_summary(rows) == "worse on b, not enough data on a, not worse on d"
    assert accuracy_summary([_row("c", NO_REFERENCE)]) is None
    assert accuracy_summary([_row("x", NOT_WORSE), _row("y", NOT_WORSE)]) == "not worse on x, y"


def test_half_width_and_wide() -> None:
    assert _row("a", NOT_WORSE, stderr=0.01).half_width == pytest.approx(0.0196)
    assert not _row("a", NOT_WORSE, stderr=0.01).wide
    assert _row("a", NOT_WORSE, stderr=0.0103).wide  # 0.0202 > 0.02
    assert not _row("a", NOT_WORSE, stderr=0.02 / 1.96).wide  # exactly 0.02 is not wide
    assert _row("a", NOT_WORSE, stderr=None).half_width is None and not _row("a", NOT_WORSE, stderr=None).wide


def test_fmt_score() -> None:
    assert fmt_score(_row("a", NOT_WORSE, score=0.91234, stderr=0.00789, n=1319, limit=100.0)) == (
        "0.9123 ± 0.0079 (n=1319, limit 100)"
    )
    assert fmt_score(_row("a", NOT_WORSE, stderr=None, n=None, limit=0.5)) == "0.9000 (limit 0.5)"
    assert fmt_score(_row("a", NOT_WORSE, stderr=None, n=None)) == "0.9000"


def test_the_table_as_the_pr_shows_it() -> None:
    rows = [
        _row("gsm8k", NOT_WORSE, score=0.9123, reference=0.9, shortfall=-0.0123),
        _row("gsm8k", WORSE, filter="flexible-extract", conc=None, score=0.85, reference=0.9, shortfall=0.05),
        _row("gpqa", NO_REFERENCE, reference=None, shortfall=None, stderr=None, n=None),
        _row("mmlu", NOT_ENOUGH, shortfall=0.0, n=None),
        _row("arc", "odd verdict", shortfall=0.0000001),
    ]
    assert render_accuracy_table(rows, icons=True).splitlines() == [
        "| task | filter | conc | vLLM (± stderr, n) | ATOM ref | diff | verdict |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
        "| gsm8k | strict-match | 64 | 0.9123 ± 0.0100 (n=1319) | 0.9000 | +1.23 pts | 🟢 not worse |",
        "| gsm8k | flexible-extract | — | 0.8500 ± 0.0100 (n=1319) | 0.9000 | -5.00 pts | 🔴 worse |",
        "| gpqa | strict-match | 64 | 0.9000 | — | — | no reference |",
        "| mmlu | strict-match | 64 | 0.9000 ± 0.0100 | 0.9000 | 0.00 pts | ⚪ not enough data |",
        "| arc | strict-match | 64 | 0.9000 ± 0.0100 (n=1319) | 0.9000 | 0.00 pts | odd verdict |",
    ]
    plain = render_accuracy_table(rows[:2], recipe_label="SGLang", reference_label="B200 ref")
    assert (
        plain.splitlines()[0] == "| task | filter | conc | SGLang (± stderr, n) | B200 ref | diff | verdict |"
    )
    assert plain.splitlines()[3].endswith("| -5.00 pts | worse |")


def test_notes_name_the_widest_interval_and_the_missing_stderr_once_per_task() -> None:
    rows = [
        _row("gsm8k", NOT_WORSE, stderr=0.015, n=100, limit=100.0),
        _row("gsm8k", NOT_WORSE, stderr=0.03, n=100, limit=100.0),
        _row("gsm8k", NOT_ENOUGH, stderr=None, n=None),
        _row("gsm8k", NOT_ENOUGH, stderr=None, n=None),
        _row("mmlu", NOT_WORSE, stderr=0.011, n=50),
        _row("arc", NOT_WORSE),
    ]
    assert accuracy_notes(rows) == [
        "gsm8k at limit 100 (n=100) has a wide interval: ±5.9 points at 95%. *Not worse* here means no "
        "drop larger than the noise was seen, not that the recipe is more accurate; run the full split "
        "to tighten it.",
        "gsm8k: the result file has no standard error or sample count, so no verdict is drawn "
        "(*not enough data*).",
        "mmlu (n=50) has a wide interval: ±2.2 points at 95%. *Not worse* here means no drop larger "
        "than the noise was seen, not that the recipe is more accurate; run the full split to tighten it.",
    ]


def test_latency_summary_and_the_overall_line() -> None:
    lat = [
        SimpleNamespace(verdict="matched", conc=64),
        SimpleNamespace(verdict="behind", conc=32),
        SimpleNamespace(verdict="behind", conc=8),
        SimpleNamespace(verdict="ahead", conc=128),
        SimpleNamespace(verdict="no reference", conc=4),
    ]
    assert latency_summary(lat) == "behind at conc 8, 32, matched at conc 64, ahead at conc 128"
    assert latency_summary([SimpleNamespace(verdict="no reference", conc=4)]) is None
    acc = [_row("gsm8k", NOT_WORSE)]
    assert overall_verdict_line(lat[:1], acc) == "latency: matched at conc 64; accuracy: not worse on gsm8k"
    assert overall_verdict_line([], []) == "latency: no verdict yet; accuracy: no eval result yet"
    assert overall_verdict_line([], [_row("gpqa", NO_REFERENCE)]) == (
        "latency: no verdict yet; accuracy: no reference accuracy"
    )


def test_a_shortfall_exactly_at_the_allowance_is_not_worse() -> None:
    # stderr 0: the allowance is the 1e-12 float slack alone, and a shortfall of exactly that counts
    assert accuracy_verdict(0.0, 0.0, 10, 1e-12) == (NOT_WORSE, 0.0)
    assert accuracy_verdict(0.0, 0.0, 10, 3e-12) == (WORSE, 0.0)


def test_unknown_filters_match_only_their_own_reference() -> None:
    refs = [
        RefAccuracy("gsm8k", "mine", 0.5),
        RefAccuracy("gsm8k", "theirs", 0.6),
        RefAccuracy("gsm8k", "ss", 0.7),
    ]
    rows = compare_accuracy([score(filt="Mine"), score(filt="THEIRS"), score(filt="ß")], refs)
    assert [r.reference for r in rows] == [0.5, 0.6, None]  # "ß" is not "ss" (whatever upper() says)


def test_the_reference_stderr_widens_the_allowance() -> None:
    refs = [RefAccuracy("gsm8k", "strict-match", 0.90, stderr=0.04)]
    (row,) = compare_accuracy([score(value=0.855, stderr=0.03)], refs)
    assert row.allowed == pytest.approx(0.05) and row.verdict == NOT_WORSE


def test_a_tiny_difference_shows_as_zero_points() -> None:
    rows = [_row("gsm8k", NOT_WORSE, shortfall=-0.00004)]
    assert render_accuracy_table(rows).splitlines()[2].endswith("| 0.00 pts | not worse |")


def test_a_very_wide_interval_is_given_in_points() -> None:
    (note,) = accuracy_notes([_row("gsm8k", NOT_WORSE, stderr=0.05, n=30)])
    assert note.startswith("gsm8k (n=30) has a wide interval: ±9.8 points at 95%.")
