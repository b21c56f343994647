"""Whole release decisions at their edges (app.core.release_policy): the reason the dashboard and
the audit log show, whether the label stops for its class, and the preemption pick's bounds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from structlog.testing import capture_logs

from app.core.release_policy import (
    AUTO,
    CanaryRun,
    Candidate,
    Decision,
    LabelView,
    pick_preemptions,
    release_decision,
)

L = "mi355x"
WAIT = "job(s) wait in GitHub's queue for a runner"


def lv(capacity: int, in_flight: int, **kw: object) -> LabelView:
    return LabelView(L, capacity, in_flight, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("candidate", "label", "decision"),
    [
        # real work, overcommit 0
        (Candidate(2), lv(4, 2), Decision(True, "2 slot(s) free on mi355x")),
        (Candidate(3), lv(4, 2), Decision(False, "3 slot(s) needed, 2 free on mi355x")),
        (Candidate(3), lv(4, 6), Decision(False, "3 slot(s) needed, 0 free on mi355x")),
        (Candidate(0), lv(4, 3), Decision(True, "1 slot(s) free on mi355x")),  # a dispatch takes at least one
        (Candidate(0), lv(4, 4), Decision(False, "1 slot(s) needed, 0 free on mi355x")),
        (
            Candidate(9),
            lv(4, 0),
            Decision(
                True,
                "alone on an idle label: 4 slot(s) free on mi355x, 9 needed; 5 " + WAIT,
            ),
        ),
        # real work, overcommit N
        (
            Candidate(4),
            lv(4, 2, overcommit=2),
            Decision(
                True,
                "overcommit 2: 2 slot(s) free on mi355x, 4 needed; 2 " + WAIT,
            ),
        ),
        (
            Candidate(5),
            lv(4, 2, overcommit=2),
            Decision(False, "5 slot(s) needed, 4 free on mi355x, counting 2 job(s) that may wait on GitHub"),
        ),
        (
            Candidate(1),
            lv(4, 7, overcommit=2),
            Decision(False, "1 slot(s) needed, 0 free on mi355x, counting 2 job(s) that may wait on GitHub"),
        ),
        # real work, auto
        (
            Candidate(3),
            lv(4, 3, overcommit=AUTO),
            Decision(
                True,
                "auto overcommit: 1 slot(s) free on mi355x, 3 needed; 2 " + WAIT,
            ),
        ),
        (
            Candidate(1),
            lv(4, 4, overcommit=AUTO),
            Decision(
                False,
                "1 slot(s) needed, none free on mi355x "
                "(auto overcommit: a group goes out once one of its jobs can start)",
            ),
        ),
        (Candidate(2), lv(4, 0, overcommit=AUTO), Decision(True, "2 slot(s) free on mi355x")),
        (
            Candidate(1),
            lv(1, 1, overcommit=AUTO),
            Decision(
                False,
                "1 slot(s) needed, none free on mi355x "
                "(auto overcommit: a group goes out once one of its jobs can start)",
            ),
        ),
        (
            Candidate(6),
            lv(4, 0, overcommit=AUTO),
            Decision(
                True,
                "auto overcommit: 4 slot(s) free on mi355x, 6 needed; 2 " + WAIT,
            ),
        ),
        # canaries
        (Candidate(2, canary=True), lv(4, 2), Decision(True, "idle runner on mi355x: canary released")),
        (
            Candidate(3, canary=True),
            lv(4, 2, overcommit=AUTO),
            Decision(False, "3 slot(s) needed, 2 free on mi355x"),
        ),
        (Candidate(1, canary=True), lv(4, 5), Decision(False, "1 slot(s) needed, 0 free on mi355x")),
        (Candidate(4, canary=True), lv(4, 1), Decision(False, "4 slot(s) needed, 3 free on mi355x")),
        (Candidate(8, canary=True), lv(4, 0), Decision(True, "idle runner on mi355x: canary released")),
        (
            Candidate(1, canary=True),
            lv(4, 0, real_waiting_slots=1),
            Decision(False, "canary waits: 1 slot(s) of real work queued on mi355x", stop_label=True),
        ),
        (
            Candidate(1, canary=True, expected_hours=2.0),
            lv(4, 0, canary_hours_used=8.0, canary_budget_hours=10.0),
            Decision(True, "idle runner on mi355x: canary released"),  # exactly the budget: fits
        ),
        (
            Candidate(1, canary=True, expected_hours=2.25),
            lv(4, 0, canary_hours_used=8.0, canary_budget_hours=10.0),
            Decision(
                False,
                "canary budget: 8.0 of 10.0 runner-hours used this week, the next canary needs about 2.2",
                stop_label=True,
            ),
        ),
        (
            Candidate(1, canary=True, expected_hours=500.0),
            lv(4, 0, canary_hours_used=8.0),
            Decision(True, "idle runner on mi355x: canary released"),  # no budget configured
        ),
    ],
)
def test_whole_decisions(candidate: Candidate, label: LabelView, decision: Decision) -> None:
    assert release_decision(candidate, label) == decision


def test_the_label_views_arithmetic() -> None:
    assert lv(4, 6).free == -2
    assert lv(4, 1, overcommit=3).planned_capacity == 7 and lv(4, 1, overcommit=3).room == 6
    assert lv(4, 1, overcommit=AUTO).planned_capacity == 4 and lv(4, 1, overcommit=AUTO).room == 3


T = datetime(2026, 12, 2, tzinfo=UTC)


def test_preemption_takes_the_newest_canaries_until_the_waiting_work_fits_and_logs_it() -> None:
    runs = [
        CanaryRun("old", 1, T),
        CanaryRun("mid", 0, T + timedelta(minutes=1)),  # counts as one slot
        CanaryRun("new-b", 1, T + timedelta(minutes=2)),
        CanaryRun("new-a", 1, T + timedelta(minutes=2)),  # same instant: by name, the later name first
    ]
    label = lv(4, 4, real_waiting_slots=3)
    with capture_logs() as logs:
        assert pick_preemptions(label, runs) == ["new-b", "new-a", "mid"]
    assert logs == [
        {
            "event": "canary_preempt",
            "log_level": "info",
            "label": L,
            "needed": 3,
            "runs": ["new-b", "new-a", "mid"],
        }
    ]
    # waiting work wider than the label needs at most the whole label; free runners count
    assert pick_preemptions(lv(2, 2, real_waiting_slots=9), runs) == ["new-b", "new-a"]
    assert pick_preemptions(lv(4, 3, real_waiting_slots=2), runs) == ["new-b"]
    assert pick_preemptions(lv(4, 5, real_waiting_slots=1), runs) == ["new-b"]  # overfull: nothing free
    with capture_logs() as quiet:  # nothing to preempt: nothing picked, nothing logged
        assert pick_preemptions(lv(4, 2, real_waiting_slots=2), runs) == []  # fits exactly
        assert pick_preemptions(lv(4, 1, real_waiting_slots=2), runs) == []  # more than fits
        assert pick_preemptions(lv(4, 4, real_waiting_slots=2), []) == []  # no canary runs
    assert quiet == []
