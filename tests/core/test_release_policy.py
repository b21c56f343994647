"""The release decision (pure): capacity for everyone, idle runners and a budget for canaries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.core.release_policy import CanaryRun, Candidate, LabelView, pick_preemptions, release_decision

L = "mi355x"


@pytest.mark.parametrize(
    ("candidate", "label", "release", "why"),
    [
        # real work: capacity only
        (Candidate(1), LabelView(L, 9, 0), True, "free"),
        (Candidate(2), LabelView(L, 9, 8), False, "2 slot(s) needed, 1 free"),
        (Candidate(12), LabelView(L, 9, 0), True, "free"),  # wider than the label, alone on it
        (Candidate(12), LabelView(L, 9, 1), False, "needed"),
        (
            Candidate(1),
            LabelView(L, 9, 0, real_waiting_slots=5),
            True,
            "free",
        ),  # real work never waits on itself
        # canaries: idle runners only
        (Candidate(1, canary=True), LabelView(L, 9, 3), True, "idle runner"),
        (Candidate(1, canary=True), LabelView(L, 9, 3, real_waiting_slots=1), False, "real work queued"),
        (Candidate(1, canary=True), LabelView(L, 9, 9), False, "needed"),
        (Candidate(12, canary=True), LabelView(L, 9, 0), True, "idle runner"),
        # canaries: the weekly budget
        (
            Candidate(1, canary=True, expected_hours=0.5),
            LabelView(L, 9, 0, canary_hours_used=19.0, canary_budget_hours=20.0),
            True,
            "idle",
        ),
        (
            Candidate(1, canary=True, expected_hours=0.5),
            LabelView(L, 9, 0, canary_hours_used=19.8, canary_budget_hours=20.0),
            False,
            "19.8 of 20.0 runner-hours",
        ),
        (
            Candidate(1, canary=True, expected_hours=0.5),
            LabelView(L, 9, 0, canary_hours_used=0.0, canary_budget_hours=0.0),
            False,
            "canary budget",
        ),
        (
            Candidate(1, canary=True, expected_hours=0.5),
            LabelView(L, 9, 0, canary_hours_used=500.0, canary_budget_hours=None),
            True,
            "idle",
        ),
        # a real job ignores the canary budget
        (Candidate(1), LabelView(L, 9, 0, canary_hours_used=50.0, canary_budget_hours=1.0), True, "free"),
    ],
)
def test_release_decision(candidate: Candidate, label: LabelView, release: bool, why: str) -> None:
    got = release_decision(candidate, label)
    assert got.release is release
    assert why in got.reason


@pytest.mark.parametrize(
    ("candidate", "label", "release", "why"),
    [
        # auto: a group goes out once one of its jobs can start; the rest wait on GitHub
        (Candidate(6), LabelView(L, 9, 8, overcommit="auto"), True, "5 job(s) wait in GitHub's queue"),
        (Candidate(6), LabelView(L, 9, 9, overcommit="auto"), False, "6 slot(s) needed, none free"),
        (Candidate(1), LabelView(L, 9, 9, overcommit="auto"), False, "none free"),  # narrow: held too
        (Candidate(1), LabelView(L, 9, 12, overcommit="auto"), False, "none free"),  # already over
        (Candidate(4), LabelView(L, 9, 0, overcommit="auto"), True, "4 slot(s) free on mi355x"),
        (Candidate(12), LabelView(L, 9, 1, overcommit="auto"), True, "4 job(s) wait"),  # wider than the label
        (Candidate(3), LabelView(L, 0, 0, overcommit="auto"), True, "3 job(s) wait"),  # no runners: alone
        # an integer keeps its meaning: planned as runners + N
        (Candidate(6), LabelView(L, 9, 8, overcommit=0), False, "6 slot(s) needed, 1 free on mi355x"),
        (Candidate(6), LabelView(L, 9, 8, overcommit=4), False, "5 free on mi355x, counting 4 job(s)"),
        (Candidate(6), LabelView(L, 9, 8, overcommit=5), True, "overcommit 5: 1 slot(s) free"),
        (Candidate(1), LabelView(L, 9, 14, overcommit=5), False, "1 slot(s) needed, 0 free"),
        (Candidate(12), LabelView(L, 9, 0, overcommit=0), True, "alone on an idle label"),
        (Candidate(12), LabelView(L, 9, 1, overcommit=0), False, "needed"),
        # canaries: truly idle runners only, whatever the overcommit
        (Candidate(1, canary=True), LabelView(L, 9, 9, overcommit="auto"), False, "1 slot(s) needed, 0 free"),
        (Candidate(2, canary=True), LabelView(L, 9, 8, overcommit="auto"), False, "2 slot(s) needed, 1 free"),
        (Candidate(1, canary=True), LabelView(L, 9, 9, overcommit=5), False, "1 slot(s) needed, 0 free"),
        (Candidate(1, canary=True), LabelView(L, 9, 8, overcommit="auto"), True, "idle runner"),
        (Candidate(12, canary=True), LabelView(L, 9, 0, overcommit="auto"), True, "idle runner"),
    ],
)
def test_release_decision_by_overcommit(
    candidate: Candidate, label: LabelView, release: bool, why: str
) -> None:
    got = release_decision(candidate, label)
    assert got.release is release
    assert why in got.reason, got.reason


def test_a_held_canary_stops_the_label_for_canaries() -> None:
    got = release_decision(Candidate(1, canary=True), LabelView(L, 9, 0, real_waiting_slots=2))
    assert not got.release and got.stop_label


T0 = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("label", "runs", "picked"),
    [
        # nothing waits, or the waiting work fits: nothing preempted
        (LabelView(L, 4, 4), [CanaryRun("c1", 1, T0)], []),
        (LabelView(L, 4, 2, real_waiting_slots=2), [CanaryRun("c1", 1, T0)], []),
        # one slot short: the newest canary goes
        (
            LabelView(L, 4, 4, real_waiting_slots=1),
            [CanaryRun("old", 1, T0), CanaryRun("new", 1, T0 + timedelta(minutes=5))],
            ["new"],
        ),
        # three short: both canaries (all there are)
        (
            LabelView(L, 4, 4, real_waiting_slots=3),
            [CanaryRun("old", 1, T0), CanaryRun("new", 1, T0 + timedelta(minutes=5))],
            ["new", "old"],
        ),
        # the need is capped at the label's capacity
        (LabelView(L, 2, 2, real_waiting_slots=50), [CanaryRun("a", 2, T0)], ["a"]),
        # no canary in flight: nothing to preempt
        (LabelView(L, 4, 4, real_waiting_slots=4), [], []),
    ],
)
def test_pick_preemptions(label: LabelView, runs: list[CanaryRun], picked: list[str]) -> None:
    assert pick_preemptions(label, runs) == picked
