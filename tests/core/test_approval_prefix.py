"""``/sweep approve <sha>`` (and ``/depends-on approve <sha>``) with a prefix binds to the head that
was current when the maintainer commented, never to a later head sharing the prefix (issue 25).

Seven hex digits collide after ~2^14 tries on average (a birthday search over commits the fork
author makes up), so "the current head starts with the prefix" is no proof the maintainer saw it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.core.approval import CLOCK_MARGIN, HeadSeen, bind_approval, unchanged_since

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
REVIEWED = "abcdef1" + "0" * 33  # the head the maintainer reviewed
COLLIDER = "abcdef1" + "f" * 33  # pushed after the comment, sharing the 7-digit prefix
OTHER = "1234567" + "0" * 33


def _at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


@pytest.mark.parametrize(
    ("seen", "comment_min", "current", "asked", "bound", "says"),
    [
        # the prefix names the head recorded before the comment, still the head: approved
        ([(REVIEWED, 0)], 5, REVIEWED, "abcdef1", REVIEWED, "names the head"),
        # the attack: a colliding head pushed after the comment is the current head
        ([(REVIEWED, 0), (COLLIDER, 10)], 5, COLLIDER, "abcdef1", None, "which is not the PR's head"),
        # ... also when the bot has not even seen the push yet
        ([(REVIEWED, 0)], 5, COLLIDER, "abcdef1", None, "which is not the PR's head"),
        # no record of the head at comment time: a prefix proves nothing
        ([], 5, COLLIDER, "abcdef1", None, "no record"),
        ([(COLLIDER, 10)], 5, COLLIDER, "abcdef1", None, "no record"),
        # the bot's sighting within the clock margin after the comment does not count as before
        ([(COLLIDER, 5 - CLOCK_MARGIN.total_seconds() / 120)], 5, COLLIDER, "abcdef1", None, "no record"),
        # the comment time is unknown
        ([(REVIEWED, 0)], None, REVIEWED, "abcdef1", None, "no record"),
        # the prefix is not what was the head when the comment was written
        ([(OTHER, 0)], 5, OTHER, "abcdef1", None, "is not the commit that was the PR's head"),
        # the full sha names exactly one commit: it must be the current head
        ([], 5, COLLIDER, COLLIDER, COLLIDER, "is the current head"),
        ([(REVIEWED, 0)], 5, COLLIDER, REVIEWED, None, "is not the PR's head"),
    ],
)
def test_a_prefix_binds_to_the_head_at_comment_time(
    seen: list[tuple[str, float]],
    comment_min: float | None,
    current: str,
    asked: str,
    bound: str | None,
    says: str,
) -> None:
    out = bind_approval(
        comment_at=_at(comment_min) if comment_min is not None else None,
        seen=[HeadSeen(sha, _at(m)) for sha, m in seen],
        current_head=current,
        explicit_sha=asked,
        command="/depends-on approve",
    )
    assert out.sha == bound, out.reason
    assert says in out.reason
    if bound is None:  # the refusal asks for the full sha, under the command that was written
        assert f"`/depends-on approve {current}`" in out.reason


@pytest.mark.parametrize(
    ("changed_min", "comment_min", "ok"),
    [
        (None, 5, True),  # never changed by someone without write access
        (0, 5, True),  # changed, then the maintainer read it and commented
        (5, 5, False),  # changed within the clock margin: cannot tell which came first
        (6, 5, False),  # changed after the comment: what was read is not what would be approved
        (0, None, False),  # the comment time is unknown
    ],
)
def test_an_approval_stands_for_the_body_as_it_was_read(
    changed_min: float | None, comment_min: float | None, ok: bool
) -> None:
    assert (
        unchanged_since(
            _at(changed_min) if changed_min is not None else None,
            _at(comment_min) if comment_min is not None else None,
        )
        is ok
    )
