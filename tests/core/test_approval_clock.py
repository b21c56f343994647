"""The approval's clock margin (app.core.approval.CLOCK_MARGIN): a head the bot saw within the
margin after the comment — by its clock, which may run ahead of GitHub's — is never taken as the
reviewed head. The table steps in seconds around the margin (the other tests step in minutes)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.core.approval import CLOCK_MARGIN, HeadSeen, bind_approval

AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
OLD, NEW = "a" * 40, "b" * 40


@pytest.mark.parametrize(
    ("new_seen_after", "approved"),
    [
        (-CLOCK_MARGIN - timedelta(seconds=1), NEW),  # seen well before the comment: reviewed
        (-CLOCK_MARGIN, NEW),  # exactly the margin before: still at or before the comment
        (-CLOCK_MARGIN + timedelta(seconds=1), None),  # inside the margin: cannot tell, refuse
        (timedelta(0), None),
        (timedelta(seconds=1), None),  # pushed after the comment
        (CLOCK_MARGIN, None),
    ],
)
def test_a_head_seen_within_the_margin_of_the_comment_is_not_approved(
    new_seen_after: timedelta, approved: str | None
) -> None:
    seen = [HeadSeen(OLD, AT - timedelta(minutes=10)), HeadSeen(NEW, AT + new_seen_after)]
    binding = bind_approval(comment_at=AT, seen=seen, current_head=NEW)
    assert binding.sha == approved, binding.reason


def test_a_lone_sighting_just_after_the_comment_is_no_record_from_before_it() -> None:
    binding = bind_approval(comment_at=AT, seen=[HeadSeen(NEW, AT + timedelta(seconds=1))], current_head=NEW)
    assert binding.sha is None and "no record" in binding.reason
