"""Finding our run among a repo's runs (app.core.runmatch): by id, by title, by head commit in label
mode, and the run names the bot dispatches under. Exact answers and reason texts (issue 30: every
branch and default of these functions pinned, so a changed rule turns a test red)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from app.core.runmatch import (
    CLOCK_SLACK,
    RunMatch,
    _created,
    attempt_run_name,
    has_benchmark_jobs,
    match_label_run,
    match_run,
    run_name_in_title,
    title_is_ours,
)

TITLE = "e2e Test - sweepbot-12-34"
SHA = "0123456789abcdef0123456789abcdef01234567"
OTHER_SHA = "f" * 40
CLAIM = datetime(2026, 5, 6, 7, 8, 9, tzinfo=UTC)


def run(run_id: int | None, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {} if run_id is None else {"id": run_id}
    return out | fields


# ------------------------------------------------------------------------ match_run: by id


def test_an_id_match_wins_over_a_title_match() -> None:
    runs = [run(5, display_title=TITLE), run(7, display_title="other")]
    assert match_run(runs, run_id=7, display_title=TITLE) == RunMatch(runs[1], "id", "run 7")


def test_a_missing_id_falls_back_to_the_title() -> None:
    runs = [run(5, display_title=TITLE)]
    assert match_run(runs, run_id=6, display_title=TITLE) == RunMatch(
        runs[0], "display_title", f"run 5 titled {TITLE!r}"
    )


def test_a_run_without_an_id_is_never_run_1() -> None:
    runs = [run(None, display_title="t")]
    assert match_run(runs, run_id=1) == RunMatch(None, "none", "no run with id 1 among 1")


def test_a_string_id_is_read_as_a_number() -> None:
    runs = [run(None, id="8")]
    assert match_run(runs, run_id=8).how == "id"


# --------------------------------------------------------------------- match_run: by title


def test_the_newest_of_several_runs_with_the_title_wins() -> None:
    runs = [run(3, display_title=TITLE), run(9, display_title=TITLE), run(4, display_title=TITLE)]
    assert match_run(runs, display_title=TITLE) == RunMatch(
        runs[1], "display_title", f"run 9 titled {TITLE!r}"
    )


def test_a_run_without_an_id_counts_as_id_0_among_title_hits() -> None:
    nameless, first = run(None, display_title=TITLE), run(1, display_title=TITLE)
    assert match_run([nameless, first], display_title=TITLE).run is first
    assert match_run([nameless], display_title=TITLE) == RunMatch(
        nameless, "display_title", f"run None titled {TITLE!r}"
    )


def test_only_the_exact_title_matches() -> None:
    runs = [run(1, display_title=TITLE + "-a2"), run(2, display_title="E2E TEST - SWEEPBOT-12-34"), run(3)]
    assert match_run(runs, display_title=TITLE) == RunMatch(
        None, "none", f"no run with title {TITLE!r} among 3"
    )


def test_head_sha_narrows_a_title_match() -> None:
    runs = [run(1, display_title=TITLE, head_sha=SHA), run(2, display_title=TITLE, head_sha=OTHER_SHA)]
    assert match_run(runs, display_title=TITLE, head_sha=SHA).run is runs[0]
    assert match_run(runs, display_title=TITLE, head_sha=OTHER_SHA).run is runs[1]
    assert match_run(runs, display_title=TITLE).run is runs[1]  # no sha: the newest
    assert match_run([run(3, display_title=TITLE)], display_title=TITLE, head_sha=SHA).run is None


def test_a_run_without_a_sha_matches_only_an_empty_sha() -> None:
    runs = [run(1, display_title=TITLE)]
    assert match_run(runs, display_title=TITLE, head_sha="").run is runs[0]
    assert match_run(runs, display_title=TITLE, head_sha=SHA).run is None


def test_an_earlier_dispatchs_run_under_the_title_is_left_with_the_reasons() -> None:
    early = (CLAIM - CLOCK_SLACK - timedelta(seconds=1)).isoformat()
    runs = [run(3, display_title=TITLE), run(4, display_title=TITLE, created_at=early), run(5)]
    got = match_run(runs, display_title=TITLE, claimed_at=CLAIM, bound={3})
    assert got == RunMatch(
        None,
        "none",
        f"no run with title {TITLE!r} among 3 (run 3 is bound to an earlier dispatch; "
        "run 4 was created at 07:07:38, before the dispatch (07:08:09))",
    )
    # a fitting run beside them is taken, even though it is older than run 4 by id
    fresh = run(2, display_title=TITLE, created_at=CLAIM.isoformat())
    assert match_run([*runs, fresh], display_title=TITLE, claimed_at=CLAIM, bound={3}).run is fresh
    # without a claim time or bound, the newest is taken
    assert match_run(runs, display_title=TITLE).run is runs[1]


@pytest.mark.parametrize(
    ("run_id", "title", "reason"),
    [
        (5, None, "no run with id 5 among 2"),
        (5, TITLE, f"no run with id 5 or title {TITLE!r} among 2"),
        (None, TITLE, f"no run with title {TITLE!r} among 2"),
        (None, None, "no run with nothing to match among 2"),
        (None, "", "no run with nothing to match among 2"),
    ],
)
def test_no_match_says_what_was_looked_for(run_id: int | None, title: str | None, reason: str) -> None:
    runs = [run(1, display_title="a"), run(2, display_title="b")]
    assert match_run(runs, run_id=run_id, display_title=title) == RunMatch(None, "none", reason)


@pytest.mark.parametrize("title", ["", TITLE, "XXXX"])  # XXXX: mutmut's filler for a default ""
def test_an_untitled_run_matches_no_title(title: str) -> None:
    assert match_run([run(1)], display_title=title).run is None
    assert match_run([run(1, display_title=None)], display_title=title).run is None


# ---------------------------------------------------------------------- match_label_run


def test_label_mode_takes_the_newest_pull_request_run_of_the_head() -> None:
    runs = [
        run(10, head_sha=SHA, event="pull_request", display_title="Sweep A"),
        run(12, head_sha=SHA, display_title="Sweep B"),  # no event: a pull_request run
        run(11, head_sha=SHA, event="pull_request", display_title="Sweep C"),
        run(13, head_sha=SHA, event="push", display_title="push run"),
        run(14, head_sha=OTHER_SHA, event="pull_request", display_title="other head"),
    ]
    assert match_label_run(runs, head_sha=SHA) == RunMatch(
        runs[1], "head_sha", "run 12 ('Sweep B') for 0123456789ab"
    )


def test_label_mode_ignores_the_runs_named_and_those_older_than_the_label() -> None:
    label = CLAIM
    runs = [
        run(20, head_sha=SHA, created_at=(label - timedelta(seconds=1)).isoformat()),
        run(21, head_sha=SHA, created_at=label.isoformat()),  # at the label: kept
        run(22, head_sha=SHA, created_at=(label + timedelta(minutes=1)).isoformat()),
    ]
    assert match_label_run(runs, head_sha=SHA, not_before=label).run is runs[2]
    assert match_label_run(runs, head_sha=SHA, not_before=label, ignore={22}).run is runs[1]
    assert match_label_run(runs, head_sha=SHA, not_before=label, ignore={21, 22}) == RunMatch(
        None, "none", "no pull_request run for 0123456789ab among 3; 1 older than the label"
    )
    # without not_before nothing is too old
    assert match_label_run(runs, head_sha=SHA, ignore={21, 22}).run is runs[0]


def test_label_mode_keeps_a_run_without_created_at_and_reads_a_missing_id_as_0() -> None:
    undated = run(None, head_sha=SHA, display_title="t")
    assert match_label_run([undated], head_sha=SHA, not_before=CLAIM).run is undated
    assert match_label_run([undated], head_sha=SHA, ignore={0}) == RunMatch(
        None, "none", "no pull_request run for 0123456789ab among 1"
    )
    first = run(1, head_sha=SHA)
    assert match_label_run([undated, first], head_sha=SHA).run is first


def test_label_mode_without_a_sha_on_the_run() -> None:
    shaless = run(3)
    assert match_label_run([shaless], head_sha="").run is shaless
    assert match_label_run([shaless], head_sha=SHA).run is None


# ------------------------------------------------------------------------------ _created


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-05-06T07:08:09Z", datetime(2026, 5, 6, 7, 8, 9, tzinfo=UTC)),
        ("2026-05-06T07:08:09", datetime(2026, 5, 6, 7, 8, 9, tzinfo=UTC)),  # naive: UTC
        ("2026-05-06T09:08:09+02:00", datetime(2026, 5, 6, 9, 8, 9, tzinfo=timezone(timedelta(hours=2)))),
    ],
)
def test_created_reads_githubs_timestamps(text: str, expected: datetime) -> None:
    got = _created({"created_at": text})
    assert got == expected and got.utcoffset() == expected.utcoffset()


@pytest.mark.parametrize("value", [None, "", "not a time"])
def test_a_run_without_a_readable_created_at_counts_as_newest(value: str | None) -> None:
    got = _created({} if value is None else {"created_at": value})
    assert got == datetime.max.replace(tzinfo=UTC) and got.tzinfo is UTC


# ------------------------------------------------------------------------ jobs and names


def test_has_benchmark_jobs_by_the_template_name() -> None:
    bench = {"name": "single-node / p50 | dsr1 fp8 mi355x sgl TP8 c64"}
    assert has_benchmark_jobs([{"name": "get-jobs"}, bench]) is True
    assert has_benchmark_jobs([bench, {"name": "collect-results"}]) is True
    assert has_benchmark_jobs([{"name": "get-jobs"}, {"name": None}, {}]) is False
    assert has_benchmark_jobs([]) is False


@pytest.mark.parametrize(
    ("title", "ours"),
    [
        ("sweepbot-12-34", True),
        ("e2e Test - sweepbot-12-34", True),
        ("Run Sweep - sweepbot-5-6", True),
        ("e2e Test - sweepbot-12-345", False),
        ("e2e Test -sweepbot-12-34", False),
        ("xsweepbot-12-34", False),
        ("sweepbot-12-34 - e2e Test", False),
        ("", False),
    ],
)
def test_title_is_ours(title: str, ours: bool) -> None:
    assert title_is_ours(title, ["sweepbot-1-1", "sweepbot-12-34", "sweepbot-5-6"]) is ours


def test_no_run_names_own_no_title() -> None:
    assert title_is_ours("sweepbot-12-34", []) is False


@pytest.mark.parametrize(
    ("attempt", "name"),
    [(0, "sweepbot-12-34"), (1, "sweepbot-12-34"), (2, "sweepbot-12-34-a2"), (3, "sweepbot-12-34-a3")],
)
def test_attempt_run_name(attempt: int, name: str) -> None:
    assert attempt_run_name("sweepbot-12-34", attempt) == name


@pytest.mark.parametrize(
    ("title", "name"),
    [
        ("e2e Test - sweepbot-12-34", "sweepbot-12-34"),
        ("e2e Test - sweepbot-12-34-a2", "sweepbot-12-34-a2"),
        ("sweepbot-7-8", "sweepbot-7-8"),
        ("  e2e Test - sweepbot-12-34  \n", "sweepbot-12-34"),
        ("e2e Test - xsweepbot-12-34", None),
        ("e2e Test - sweepbot-12-34 (retry)", None),
        ("e2e Test - sweepbot-12", None),
        ("End-to-End Tests", None),
    ],
)
def test_run_name_in_title(title: str, name: str | None) -> None:
    assert run_name_in_title(title) == name
