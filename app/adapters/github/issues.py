"""Pull requests, issues, their comments, reactions and labels (a pull request is an issue to GitHub).

The sticky comment and the marker issue are upserted under a lock (``app.db.serialized``), so two
workers handling events of the same PR never both create one.
"""

from __future__ import annotations

import contextlib
from typing import Any

import structlog

from app.adapters.github.base import Conditional, GatewayBase, quote_segment
from app.adapters.github.errors import Gone, NotFound
from app.db import serialized

log = structlog.get_logger(__name__)


def _is_pull(issue: dict[str, Any]) -> bool:
    """Whether an entry of an issue list is a pull request. GitHub marks those with
    ``pull_request`` links; its recorded 2012 answers carry ``pull_request`` with null links on
    every plain issue too, so the key alone does not make a pull request."""
    links = issue.get("pull_request")
    return isinstance(links, dict) and any(links.get(k) for k in ("url", "html_url"))


class IssuesGateway(GatewayBase):
    """Pull requests, issues, comments, reactions and labels: what the bot says on GitHub."""

    # ------------------------------------------------------------------ pulls

    def get_pull(self, repo: str, number: int) -> dict[str, Any]:
        return self._get("pulls/get", f"/repos/{repo}/pulls/{number}")

    def get_pull_conditional(self, repo: str, number: int) -> Conditional:
        return self.get_conditional("pulls/get", f"/repos/{repo}/pulls/{number}")

    def list_pull_files(self, repo: str, number: int) -> list[dict[str, Any]]:
        """Changed files of a PR (``filename``, ``status``, ``previous_filename``...), up to GitHub's 3000."""
        return list(self._paginate("pulls/list-files", f"/repos/{repo}/pulls/{number}/files", limit=3000))

    def list_pull_commits(self, repo: str, number: int) -> list[dict[str, Any]]:
        """A PR's commits, oldest first (GitHub lists up to 250)."""
        return list(self._paginate("pulls/list-commits", f"/repos/{repo}/pulls/{number}/commits", limit=250))

    def list_pulls(
        self, repo: str, *, state: str = "open", head: str | None = None, base: str | None = None
    ) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"state": state}
        if head:
            params["head"] = head
        if base:
            params["base"] = base
        return list(self._paginate("pulls/list", f"/repos/{repo}/pulls", params))

    def create_pull(self, repo: str, *, title: str, head: str, base: str, body: str) -> dict[str, Any]:
        # Right after the head branch was pushed GitHub may answer "head invalid": retry briefly.
        return self._eventually(
            "pulls/create",
            lambda: self._write(
                "pulls/create",
                "POST",
                f"/repos/{repo}/pulls",
                {"title": title, "head": head, "base": base, "body": body},
                target=repo,
            ),
        )

    def update_pull(self, repo: str, number: int, **fields: Any) -> dict[str, Any]:
        return self._write(
            "pulls/update", "PATCH", f"/repos/{repo}/pulls/{number}", fields, target=f"{repo}#{number}"
        )

    # ------------------------------------------------------------------ issues

    def get_issue(self, repo: str, number: int) -> dict[str, Any]:
        return self._get("issues/get", f"/repos/{repo}/issues/{number}")

    def create_issue(
        self, repo: str, *, title: str, body: str, labels: list[str] | None = None
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"title": title, "body": body}
        if labels:
            payload["labels"] = labels
        return self._write("issues/create", "POST", f"/repos/{repo}/issues", payload, target=repo)

    def update_issue(self, repo: str, number: int, **fields: Any) -> dict[str, Any]:
        return self._write(
            "issues/update", "PATCH", f"/repos/{repo}/issues/{number}", fields, target=f"{repo}#{number}"
        )

    def find_issue(self, repo: str, marker: str, *, creator: str | None = None) -> dict[str, Any] | None:
        """The first issue (open or closed, not a pull request) whose body holds ``marker``."""
        params: dict[str, Any] = {"state": "all"}
        if creator:
            params["creator"] = creator
        for issue in self._paginate("issues/list-for-repo", f"/repos/{repo}/issues", params, limit=1000):
            if not _is_pull(issue) and marker in (issue.get("body") or ""):
                return issue
        return None

    def upsert_issue(
        self, repo: str, marker: str, *, title: str, body: str, number: int | None = None
    ) -> dict[str, Any]:
        """Create the issue holding ``marker`` once, then edit it in place (look before create).

        ``number``, the issue remembered, is read first; if it is gone (deleted: 410, or 404) it is
        looked up by ``marker`` like a first time, and only if none holds it is one created. A
        closed issue is not gone: it is edited in place and stays closed."""
        if marker not in body:
            body = f"{marker}\n{body}"
        with serialized(self._cache_session, f"issue:{repo}:{marker}"):
            existing = self._remembered_issue(repo, number) if number else None
            if existing is None or marker not in (existing.get("body") or ""):
                existing = self.find_issue(repo, marker)
            if existing is None:
                return self.create_issue(repo, title=title, body=body)
            if existing.get("body") == body and existing.get("title") == title:
                return existing
            return self.update_issue(repo, int(existing["number"]), title=title, body=body)

    def _remembered_issue(self, repo: str, number: int) -> dict[str, Any] | None:
        """Issue ``number``, or None when it is gone. GitHub documents ("Get an issue"): 410 Gone
        when it was deleted from a repository we may read; 404 when it was deleted from, or
        transferred to, one we may not."""
        try:
            return self.get_issue(repo, number)
        except (Gone, NotFound) as exc:
            log.warning("issue_gone", repo=repo, number=number, status=exc.status)
            return None

    # ------------------------------------------------------------------ comments and reactions

    def list_comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        return list(self._paginate("issues/list-comments", f"/repos/{repo}/issues/{number}/comments"))

    def create_comment(self, repo: str, number: int, body: str) -> dict[str, Any]:
        return self._write(
            "issues/create-comment",
            "POST",
            f"/repos/{repo}/issues/{number}/comments",
            {"body": body},
            target=f"{repo}#{number}",
        )

    def update_comment(self, repo: str, comment_id: int, body: str) -> dict[str, Any]:
        return self._write(
            "issues/update-comment",
            "PATCH",
            f"/repos/{repo}/issues/comments/{comment_id}",
            {"body": body},
            target=f"{repo} comment {comment_id}",
        )

    def find_comment(self, repo: str, number: int, marker: str) -> dict[str, Any] | None:
        """The first comment holding ``marker`` (a hidden HTML comment) — the sticky-comment lookup."""
        for comment in self.list_comments(repo, number):
            if marker in (comment.get("body") or ""):
                return comment
        return None

    def upsert_comment(self, repo: str, number: int, marker: str, body: str) -> dict[str, Any]:
        """Create the sticky comment once, then edit it in place; no edit when nothing changed."""
        if marker not in body:
            body = f"{body}\n\n{marker}"
        # Two workers handling events of the same PR must not both find nothing and both create.
        with serialized(self._cache_session, f"comment:{repo}#{number}:{marker}"):
            existing = self.find_comment(repo, number, marker)
            if existing is None:
                return self.create_comment(repo, number, body)
            if existing.get("body") == body:
                return existing
            return self.update_comment(repo, int(existing["id"]), body)

    def add_reaction(self, repo: str, comment_id: int, content: str) -> dict[str, Any]:
        # GitHub answers 200 (not 201) when the reaction already exists: naturally idempotent.
        return self._write(
            "reactions/create-for-issue-comment",
            "POST",
            f"/repos/{repo}/issues/comments/{comment_id}/reactions",
            {"content": content},
            target=f"{repo} comment {comment_id}",
        )

    # ------------------------------------------------------------------ labels

    def add_labels(self, repo: str, number: int, labels: list[str]) -> list[dict[str, Any]]:
        """Add labels to an issue or PR (idempotent: a label already there stays once)."""
        data = self._write(
            "issues/add-labels",
            "POST",
            f"/repos/{repo}/issues/{number}/labels",
            {"labels": labels},
            target=f"{repo}#{number}",
        )
        return list(data) if isinstance(data, list) else []

    def remove_label(self, repo: str, number: int, label: str) -> None:
        """Take a label off an issue or PR (idempotent: a 404, label not there, is the state we want)."""
        with contextlib.suppress(NotFound):
            self._write(
                "issues/remove-label",
                "DELETE",
                f"/repos/{repo}/issues/{number}/labels/{quote_segment(label)}",
                target=f"{repo}#{number}",
            )
