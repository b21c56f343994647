"""Who may make the bot watch a PR, and which image a watch may track (pure: facts in, a verdict
with why out).

A watch spends GitHub and registry calls, and once its dependencies ship it commits an image
pin to the repository and queues a sweep on the self-hosted runners. So:

- **who**: dependency lines in a PR body count only when written by someone with write,
  maintain or admin permission (the body of ``opened``/``reopened`` is the PR author's, an
  ``edited`` body change is the event sender's), or once a maintainer approves the watch
  (``/depends-on approve``, for the head they reviewed: a push needs a new approval). Until then
  it waits for a maintainer and nothing is polled for it; a later body edit by a non-writer
  changes nothing an approval or a writer admitted.
- **which image**: the image repository (its registry host included) comes only from the
  default branch: the key's pin there, or an entry under ``images:`` in
  ``.github/sweepbot.yml``. A PR that points the key elsewhere gets no watch for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from app.core.inert import code

WRITE_ROLES = frozenset({"admin", "maintain", "write"})
AWAITING_LINE = "waits for a maintainer"


@dataclass(frozen=True)
class WatchAdmission:
    """``admit``: the body's dependencies count (``admitted_by`` wrote them); ``keep``: the watch
    stays as admitted before, this body is ignored; ``await``: nothing is polled until a maintainer
    approves."""

    verdict: Literal["admit", "keep", "await"]
    apply_body: bool
    admitted_by: str | None
    why: str


def watch_admission(*, body_author: str, author_role: str, admitted_by: str | None) -> WatchAdmission:
    """Whether the body's dependency lines count, given who wrote them and who admitted the watch."""
    if author_role in WRITE_ROLES:
        return WatchAdmission(
            "admit",
            True,
            body_author,
            f"the dependency lines were written by `{body_author}` ({author_role})",
        )
    if admitted_by is not None:
        return WatchAdmission(
            "keep",
            False,
            admitted_by,
            f"`{body_author}` ({author_role}) wrote this body; it does not change the watch "
            f"admitted by `{admitted_by}`",
        )
    return WatchAdmission(
        "await",
        True,
        None,
        f"{AWAITING_LINE}: `{body_author}` has {author_role} permission, so the dependency lines count "
        "once someone with write access comments `/depends-on approve`",
    )


def approval_holds(*, approved_sha: str | None, head_sha: str) -> bool:
    """A maintainer's approval stands for the head they reviewed (as ``/sweep approve`` does): a
    push to the PR needs a new approval. A watch a writer's own lines admitted has no such head."""
    return approved_sha is None or (bool(head_sha) and head_sha.lower() == approved_sha.lower())


def body_author_of(action: str, *, pr_author: str, sender: str | None, body_changed: bool) -> str:
    """Who wrote the body the event carries: an ``edited`` event that changed the body is the
    sender's edit; otherwise the body is taken as the PR author's (only the author and writers
    can edit it, and a writer's edit arrives as its own ``edited`` event)."""
    if action == "edited" and body_changed and sender:
        return sender
    return pr_author


@dataclass(frozen=True)
class ImageAdmission:
    """The image repository a watch tracks (None: no watch for this key) and why."""

    image_repo: str | None
    why: str

    @property
    def ok(self) -> bool:
        return self.image_repo is not None


def image_admission(
    *, key: str, head_repo: str, default_repo: str | None, configured: Iterable[str]
) -> ImageAdmission:
    """``head_repo``: the image repository the PR's head pins for ``key``; ``default_repo`` the one
    the default branch pins (None: the key is not there); ``configured``: ``images:`` names. All are
    normalised image repositories (host included unless Docker Hub)."""
    listed = set(configured)
    if default_repo is not None and head_repo == default_repo:
        return ImageAdmission(head_repo, f"{code(key)} pins {code(head_repo)} on the default branch")
    if head_repo in listed:
        return ImageAdmission(
            head_repo, f"{code(head_repo)} is listed under `images:` in .github/sweepbot.yml"
        )
    if default_repo is None:
        return ImageAdmission(
            None,
            f"no watch for {code(key)}: it is not pinned on the default branch and its image repository "
            f"{code(head_repo)} is not listed under `images:` in .github/sweepbot.yml (a PR cannot choose "
            "the image a bump pins; a maintainer can add it there)",
        )
    return ImageAdmission(
        None,
        f"no watch for {code(key)}: this PR changes its image repository from {code(default_repo)} to "
        f"{code(head_repo)}; the image a bump pins comes only from the default branch (a maintainer can "
        "list the new repository under `images:` in .github/sweepbot.yml)",
    )


def bump_image_allowed(image_repo: str, *, default_repo: str | None, configured: Iterable[str]) -> str | None:
    """At the bump write, again: why ``image_repo`` may not be written (None when it may)."""
    if image_repo == default_repo or image_repo in set(configured):
        return None
    return (
        f"refused to pin {code(image_repo)}: it is neither the key's image repository on the default "
        f"branch ({code(default_repo or 'none')}) nor listed under `images:` in .github/sweepbot.yml"
    )


__all__ = [
    "AWAITING_LINE",
    "approval_holds",
    "WRITE_ROLES",
    "ImageAdmission",
    "WatchAdmission",
    "body_author_of",
    "bump_image_allowed",
    "image_admission",
    "watch_admission",
]
