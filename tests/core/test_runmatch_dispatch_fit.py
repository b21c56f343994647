"""``run_fits_dispatch``: a run found by its title is this dispatch's only when no earlier dispatch
is bound to it and it was created no earlier than the claim less ``CLOCK_SLACK``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.core.runmatch import CLOCK_SLACK, run_fits_dispatch

CLAIM = datetime(2026, 5, 6, 7, 8, 9, tzinfo=UTC)


def _run(created: datetime | None, run_id: int = 7) -> dict[str, object]:
    return {"id": run_id, "created_at": None if created is None else created.isoformat()}


@pytest.mark.parametrize(
    ("created", "fits"),
    [
        (CLAIM - CLOCK_SLACK - timedelta(seconds=1), False),  # an earlier dispatch's run
        (CLAIM - CLOCK_SLACK, True),  # exactly the slack: GitHub's clock may lag ours
        (CLAIM, True),
        (None, True),  # no created_at: judged by bound alone
    ],
)
def test_a_run_created_before_the_claim_less_the_slack_is_not_this_dispatchs(
    created: datetime | None, fits: bool
) -> None:
    why = run_fits_dispatch(_run(created), claimed_at=CLAIM)
    assert (why is None) == fits
    if not fits:
        assert why == "run 7 was created at 07:07:38, before the dispatch (07:08:09)"


def test_a_naive_claim_is_read_as_utc() -> None:
    naive = CLAIM.replace(tzinfo=None)
    early = _run(CLAIM - CLOCK_SLACK - timedelta(seconds=1))
    assert run_fits_dispatch(early, claimed_at=naive) == run_fits_dispatch(early, claimed_at=CLAIM)
    assert run_fits_dispatch(_run(CLAIM), claimed_at=naive) is None


def test_no_claim_time_judges_by_bound_alone() -> None:
    old = _run(CLAIM - timedelta(days=1))
    assert run_fits_dispatch(old, claimed_at=None) is None
    assert run_fits_dispatch(old, claimed_at=None, bound={7}) == "run 7 is bound to an earlier dispatch"
    assert run_fits_dispatch(old, claimed_at=None, bound={8}) is None
    assert run_fits_dispatch({"created_at": None}, claimed_at=CLAIM, bound={0}) == (
        "run 0 is bound to an earlier dispatch"
    )


def test_an_aware_claim_keeps_its_zone() -> None:
    """A claim in another zone is the same instant: it is not re-read as UTC."""
    berlin = CLAIM.astimezone(timezone(timedelta(hours=2)))
    assert run_fits_dispatch(_run(CLAIM), claimed_at=berlin) is None
    early = _run(CLAIM - CLOCK_SLACK - timedelta(seconds=1))
    assert run_fits_dispatch(early, claimed_at=berlin) == (
        "run 7 was created at 07:07:38, before the dispatch (09:08:09)"
    )
