"""Which head a ``/sweep approve`` comment approves (pure: observations in, a decision out).

A maintainer approves what they reviewed, and they reviewed the head that was current when they
wrote the comment, not the head at the moment the bot gets round to handling it: a push in
between must not ride on their approval. So the approval binds to the newest head the bot saw
at or before the comment's ``created_at`` and only stands if that is still the PR's head. When
the bot cannot tell (no record that old, the head moved since), it refuses and asks for
``/sweep approve <sha>``, which names the commit and must match the current head.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from app.core.inert import code

SHA_RE = re.compile(r"^[0-9a-f]{7,40}$")
# Sightings are stamped by our clock, comments by GitHub's: date each sighting this much later,
# which can only turn an approval into a request for the sha, never approve a newer head.
CLOCK_MARGIN = timedelta(seconds=2)


@dataclass(frozen=True)
class HeadSeen:
    sha: str
    at: datetime  # timezone-aware


@dataclass(frozen=True)
class Binding:
    sha: str | None  # the head to approve; None when refused
    reason: str  # why (logged), or the refusal shown to the maintainer

    @property
    def ok(self) -> bool:
        return self.sha is not None


def _ask_for_sha(current: str, command: str) -> str:
    # The full sha: a prefix could later be shared by a commit nobody reviewed.
    return f"Review it and write `{command} {current}` to approve exactly that commit."


def _explicit(
    asked: str, *, comment_at: datetime | None, history: list[HeadSeen], current: str, command: str
) -> Binding:
    """A named commit. All 40 digits name exactly one commit: it must be the current head. A
    prefix stands for the head that was current when the comment was written (the bot's record),
    never for a later head that happens to share it."""
    if not SHA_RE.match(asked):
        return Binding(
            None, f"{code(asked)} is not a commit SHA (7 to 40 hex digits). " + _ask_for_sha(current, command)
        )
    if len(asked) == 40:
        if asked == current:
            return Binding(current, f"the named commit {asked} is the current head")
        return Binding(
            None,
            f"{code(asked)} is not the PR's head, which is now `{current[:12]}`. "
            + _ask_for_sha(current, command),
        )
    before = [h for h in history if comment_at is not None and h.at <= comment_at]
    if not before:
        return Binding(
            None,
            f"I have no record of the PR's head when you wrote {code(asked)}, so I cannot tell which "
            "commit that prefix named. " + _ask_for_sha(current, command),
        )
    then = before[-1].sha.lower()
    if not then.startswith(asked):
        return Binding(
            None,
            f"{code(asked)} is not the commit that was the PR's head when you wrote it "
            f"(`{then[:12]}`). " + _ask_for_sha(current, command),
        )
    if then != current:
        return Binding(
            None,
            f"{code(asked)} named `{then[:12]}`, the head when you wrote it, which is not the PR's head: "
            f"that is now `{current[:12]}`. " + _ask_for_sha(current, command),
        )
    return Binding(current, f"the prefix {asked} names the head when the comment was written, still the head")


def bind_approval(
    *,
    comment_at: datetime | None,
    seen: Iterable[HeadSeen],
    current_head: str,
    explicit_sha: str | None = None,
    command: str = "/sweep approve",
) -> Binding:
    """The head the approval stands for, or a refusal that says what to write instead.

    ``command`` is the approval being bound (``/sweep approve``, ``/depends-on approve``): the
    refusal names it."""
    current = current_head.lower()
    history = sorted((HeadSeen(h.sha, h.at + CLOCK_MARGIN) for h in seen), key=lambda h: h.at)
    if explicit_sha is not None:
        return _explicit(
            explicit_sha.lower(), comment_at=comment_at, history=history, current=current, command=command
        )
    if comment_at is None:
        return Binding(
            None,
            "I cannot tell when this comment was written, so I cannot tell which commit you "
            "reviewed. " + _ask_for_sha(current, command),
        )
    before = [h for h in history if h.at <= comment_at]
    if not before:
        return Binding(
            None,
            "I have no record of this PR's head from before your comment, so I cannot tell which "
            "commit you reviewed. " + _ask_for_sha(current, command),
        )
    reviewed = before[-1].sha.lower()
    if reviewed != current:
        return Binding(
            None,
            f"The PR's head moved since your comment: it was `{reviewed[:12]}` when you wrote it and "
            f"is `{current[:12]}` now. " + _ask_for_sha(current, command),
        )
    if any(h.sha.lower() != reviewed for h in history if h.at > comment_at):
        return Binding(
            None,
            f"The PR's head changed after your comment and is back at `{current[:12]}`. "
            + _ask_for_sha(current, command),
        )
    return Binding(reviewed, "the head when the comment was written is still the head")


def unchanged_since(changed_at: datetime | None, comment_at: datetime | None) -> bool:
    """Whether text last changed (as the bot received it, ``changed_at``) before a comment
    written at ``comment_at``: what the commenter read is what is approved. Dated
    ``CLOCK_MARGIN`` later, like head sightings, so clock skew can only refuse."""
    if changed_at is None:
        return True
    if changed_at.tzinfo is None:  # a database without time zones (SQLite) stores UTC
        changed_at = changed_at.replace(tzinfo=UTC)
    return comment_at is not None and changed_at + CLOCK_MARGIN <= comment_at
