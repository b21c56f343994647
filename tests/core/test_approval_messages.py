"""What ``/sweep approve`` answers, branch by branch (app.core.approval): the refusal a maintainer
reads names what was wrong, the 12-digit heads involved, and the exact command to write; and the
edges of the clock margin for named prefixes, heads that moved and came back, and body edits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.core.approval import CLOCK_MARGIN, HeadSeen, bind_approval, unchanged_since

AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
A = "abcdef0123456789" + "a" * 24
B = "bcdef01234567890" + "b" * 24
ASK_B = f"Review it and write `/sweep approve {B}` to approve exactly that commit."


def _seen(*pairs: tuple[str, timedelta]) -> list[HeadSeen]:
    return [HeadSeen(sha, AT + d) for sha, d in pairs]


EARLY = -timedelta(minutes=5)


@pytest.mark.parametrize(
    ("comment_at", "seen", "explicit", "sha", "reason"),
    [
        (AT, _seen((B, EARLY)), None, B, "the head when the comment was written is still the head"),
        (
            None,
            _seen((B, EARLY)),
            None,
            None,
            "I cannot tell when this comment was written, so I cannot tell which commit you reviewed. "
            + ASK_B,
        ),
        (
            AT,
            [],
            None,
            None,
            "I have no record of this PR's head from before your comment, so I cannot tell which "
            "commit you reviewed. " + ASK_B,
        ),
        (
            AT,
            _seen((A, EARLY), (B, timedelta(minutes=1))),
            None,
            None,
            f"The PR's head moved since your comment: it was `{A[:12]}` when you wrote it and "
            f"is `{B[:12]}` now. " + ASK_B,
        ),
        (
            AT,
            _seen((B, EARLY), (A, timedelta(minutes=1)), (B, timedelta(minutes=2))),
            None,
            None,
            f"The PR's head changed after your comment and is back at `{B[:12]}`. " + ASK_B,
        ),
        (
            AT,
            _seen((B, EARLY)),
            "xyz",
            None,
            "`xyz` is not a commit SHA (7 to 40 hex digits). " + ASK_B,
        ),
        (AT, [], B.upper(), B, f"the named commit {B} is the current head"),
        (
            AT,
            [],
            A,
            None,
            f"`{A}` is not the PR's head, which is now `{B[:12]}`. " + ASK_B,
        ),
        (
            AT,
            [],
            B[:9],
            None,
            f"I have no record of the PR's head when you wrote `{B[:9]}`, so I cannot tell which "
            "commit that prefix named. " + ASK_B,
        ),
        (
            AT,
            _seen((A, EARLY)),
            B[:9],
            None,
            f"`{B[:9]}` is not the commit that was the PR's head when you wrote it (`{A[:12]}`). " + ASK_B,
        ),
        (
            AT,
            _seen((A, EARLY)),
            A[:9],
            None,
            f"`{A[:9]}` named `{A[:12]}`, the head when you wrote it, which is not the PR's head: "
            f"that is now `{B[:12]}`. " + ASK_B,
        ),
        (
            AT,
            _seen((B, EARLY)),
            B[:9],
            B,
            f"the prefix {B[:9]} names the head when the comment was written, still the head",
        ),
    ],
)
def test_every_answer_says_why_and_what_to_write(
    comment_at: datetime | None, seen: list[HeadSeen], explicit: str | None, sha: str | None, reason: str
) -> None:
    got = bind_approval(comment_at=comment_at, seen=seen, current_head=B, explicit_sha=explicit)
    assert (got.sha, got.reason) == (sha, reason)
    assert got.ok is (sha is not None)


def test_a_later_sighting_of_the_same_head_in_capitals_is_not_a_change() -> None:
    seen = _seen((B, EARLY), (B.upper(), timedelta(minutes=3)))
    assert bind_approval(comment_at=AT, seen=seen, current_head=B).sha == B


def test_of_two_heads_seen_at_the_same_instant_before_the_comment_the_later_seen_is_reviewed() -> None:
    # both sightings dated exactly at the comment once the margin is added: both "at or before"
    seen = _seen((A, -CLOCK_MARGIN), (B, -CLOCK_MARGIN))
    assert bind_approval(comment_at=AT, seen=seen, current_head=B).sha == B


@pytest.mark.parametrize(
    ("seen_at", "bound"),
    [(-CLOCK_MARGIN, B), (-CLOCK_MARGIN + timedelta(microseconds=1), None)],
)
def test_a_prefix_names_the_head_seen_up_to_exactly_the_margin_before_the_comment(
    seen_at: timedelta, bound: str | None
) -> None:
    got = bind_approval(comment_at=AT, seen=_seen((B, seen_at)), current_head=B, explicit_sha=B[:8])
    assert got.sha == bound, got.reason


@pytest.mark.parametrize(
    ("changed_at", "ok"),
    [
        (AT - CLOCK_MARGIN, True),  # exactly the margin before the comment: read before approving
        (AT - CLOCK_MARGIN + timedelta(microseconds=1), False),
        # a database without time zones hands back naive UTC: compared as UTC, not refused or crashed
        ((AT - timedelta(minutes=1)).replace(tzinfo=None), True),
        ((AT + timedelta(minutes=1)).replace(tzinfo=None), False),
    ],
)
def test_unchanged_since_edges(changed_at: datetime, ok: bool) -> None:
    assert unchanged_since(changed_at, AT) is ok
