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
from datetime import datetime, timedelta

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


def _ask_for_sha(current: str) -> str:
    return f"Review it and write `/sweep approve {current[:12]}` to approve exactly that commit."


def bind_approval(
    *,
    comment_at: datetime | None,
    seen: Iterable[HeadSeen],
    current_head: str,
    explicit_sha: str | None = None,
) -> Binding:
    """The head the approval stands for, or a refusal that says what to write instead."""
    current = current_head.lower()
    if explicit_sha is not None:
        asked = explicit_sha.lower()
        if SHA_RE.match(asked) and current.startswith(asked):
            return Binding(current, f"the named commit {asked} is the current head")
        return Binding(
            None,
            f"{code(explicit_sha)} is not the PR's head, which is now `{current[:12]}`. "
            + _ask_for_sha(current),
        )
    if comment_at is None:
        return Binding(
            None,
            "I cannot tell when this comment was written, so I cannot tell which commit you "
            "reviewed. " + _ask_for_sha(current),
        )
    history = sorted((HeadSeen(h.sha, h.at + CLOCK_MARGIN) for h in seen), key=lambda h: h.at)
    before = [h for h in history if h.at <= comment_at]
    if not before:
        return Binding(
            None,
            "I have no record of this PR's head from before your comment, so I cannot tell which "
            "commit you reviewed. " + _ask_for_sha(current),
        )
    reviewed = before[-1].sha.lower()
    if reviewed != current:
        return Binding(
            None,
            f"The PR's head moved since your comment: it was `{reviewed[:12]}` when you wrote it and "
            f"is `{current[:12]}` now. " + _ask_for_sha(current),
        )
    if any(h.sha.lower() != reviewed for h in history if h.at > comment_at):
        return Binding(
            None,
            f"The PR's head changed after your comment and is back at `{current[:12]}`. "
            + _ask_for_sha(current),
        )
    return Binding(reviewed, "the head when the comment was written is still the head")
