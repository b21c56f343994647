"""Facts read from GitHub pull-request and webhook objects that GitHub does not always fill in
(pure: no I/O).

- ``pull_request.mergeable`` is ``null`` while GitHub computes it in the background (always at
  first, after every push): unknown, never ``False``.
- ``head.repo`` is ``null`` when the fork the PR came from was deleted: the PR is still a fork PR,
  but there is no repository to read its code from.
- ``organization`` is present only when the repository belongs to an organisation, and
  ``installation`` only when the delivery is for a GitHub App.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DELETED_FORK = "the pull request's head repository (a fork) was deleted, so its code cannot be read"


@dataclass(frozen=True)
class Head:
    sha: str
    ref: str
    repo: str | None  # None: the fork was deleted
    is_fork: bool
    readable: bool  # False: no repository to read the head's files from


def head_of(pull: Any, base_repo: str) -> Head:
    head = pull.get("head") if isinstance(pull, dict) else None
    head = head if isinstance(head, dict) else {}
    repo_obj = head.get("repo")
    full = repo_obj.get("full_name") if isinstance(repo_obj, dict) else None
    repo = full if isinstance(full, str) and full else None
    # A deleted fork has no head repo: a fork all the same (the conservative side).
    is_fork = repo is None or repo.lower() != base_repo.lower()
    return Head(str(head.get("sha") or ""), str(head.get("ref") or ""), repo, is_fork, repo is not None)


def mergeable_of(pull: Any) -> bool | None:
    """``True``/``False`` once GitHub has computed it; ``None`` while it is still computing."""
    value = pull.get("mergeable") if isinstance(pull, dict) else None
    return value if isinstance(value, bool) else None


def organization_of(payload: Any) -> str | None:
    """The organisation login of a delivery, or ``None`` for a user-owned repository."""
    org = payload.get("organization") if isinstance(payload, dict) else None
    login = org.get("login") if isinstance(org, dict) else None
    return login if isinstance(login, str) and login else None
