"""Repositories: metadata, file contents, comparisons, a commit's pulls, collaborator permission."""

from __future__ import annotations

import base64
import binascii
import urllib.parse
from typing import Any

import structlog

from app.adapters.github.base import GatewayBase, quote_segment
from app.adapters.github.errors import GitHubError, NotFound
from app.core.roles import effective_role

log = structlog.get_logger(__name__)

MAX_FILE_BYTES = 10 * 1024 * 1024  # master configs are a few hundred KB


class ReposGateway(GatewayBase):
    """A repository, its files at a ref, comparisons of two refs, who may do what in it."""

    def get_repo(self, repo: str) -> dict[str, Any]:
        return self._get("repos/get", f"/repos/{repo}")

    def get_file(self, repo: str, path: str, ref: str | None = None) -> tuple[str, str] | None:
        """Text and blob sha of a file at ``ref``, or ``None`` when it does not exist."""
        params = {"ref": ref} if ref else None
        try:
            data = self._get(
                "repos/get-content", f"/repos/{repo}/contents/{urllib.parse.quote(path)}", params
            )
        except NotFound:
            return None
        if not isinstance(data, dict) or data.get("type") != "file":
            return None
        if int(data.get("size") or 0) > MAX_FILE_BYTES:
            raise GitHubError(
                413, f"{repo}:{path} is {data['size']} bytes, over the {MAX_FILE_BYTES}-byte cap"
            )
        encoded = data.get("content") or ""
        if data.get("encoding") == "none" or (not encoded and int(data.get("size") or 0) > 0):
            # Files over 1 MB come without content from the contents API: read the blob instead.
            blob = self._get("git/get-blob", f"/repos/{repo}/git/blobs/{data['sha']}")
            encoded = (blob.get("content") or "") if isinstance(blob, dict) else ""
        try:
            content = base64.b64decode(encoded).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise GitHubError(
                502, f"{repo}:{path}: the content GitHub sent is not base64 UTF-8 text: {exc}"
            ) from exc
        return content, data["sha"]

    def list_dir(self, repo: str, path: str, ref: str | None = None) -> list[dict[str, Any]]:
        params = {"ref": ref} if ref else None
        try:
            data = self._get(
                "repos/get-content", f"/repos/{repo}/contents/{urllib.parse.quote(path)}", params
            )
        except NotFound:
            return []
        return data if isinstance(data, list) else []

    def compare(self, repo: str, base: str, head: str) -> dict[str, Any]:
        """One unpaged compare: its status and counts; ``commits`` holds at most 250 of them."""
        return self._get(
            "repos/compare-commits", f"/repos/{repo}/compare/{quote_segment(base)}...{quote_segment(head)}"
        )

    def compare_range(self, repo: str, base: str, head: str, *, max_commits: int = 1000) -> dict[str, Any]:
        """The compare answer with every commit of the range (oldest first), read page by page.

        Unpaged, GitHub lists at most 250 commits of a comparison; paged (``per_page``/``page``)
        it lists them all, the files on the first page only. At most ``max_commits`` are read:
        ``total_commits`` greater than ``len(commits)`` means the list was cut short."""
        path = f"/repos/{repo}/compare/{quote_segment(base)}...{quote_segment(head)}"
        per_page = min(100, max(1, max_commits))
        first: dict[str, Any] = {}
        commits: list[dict[str, Any]] = []
        page = 1
        while len(commits) < max_commits:
            data = self._get("repos/compare-commits", path, {"per_page": per_page, "page": page})
            if not isinstance(data, dict):
                break
            first = first or data
            got = [c for c in data.get("commits") or [] if isinstance(c, dict)]
            commits += got[: max_commits - len(commits)]
            total = int(data.get("total_commits") or 0)
            if len(got) < per_page or len(commits) >= total:
                break
            page += 1
        return {**first, "commits": commits}

    def commit_pulls(self, repo: str, sha: str) -> list[dict[str, Any]]:
        """PRs associated with a commit: on the default branch, the merged PR that introduced it;
        elsewhere, open and merged PRs that contain it."""
        data = self._get(
            "repos/list-pull-requests-associated-with-commit",
            f"/repos/{repo}/commits/{quote_segment(sha)}/pulls",
            {"per_page": 100},
        )
        return [p for p in data if isinstance(p, dict)] if isinstance(data, list) else []

    def permission(self, repo: str, username: str) -> str:
        """``admin``, ``maintain``, ``write``, ``triage``, ``read`` or ``none``."""
        try:
            data = self._get(
                "repos/get-collaborator-permission-level",
                f"/repos/{repo}/collaborators/{quote_segment(username)}/permission",
            )
        except NotFound:  # not a collaborator (or not a user)
            return "none"
        except GitHubError as exc:
            if exc.status != 403:
                raise
            # "Must have push access to view collaborator permission": whoever cannot be asked
            # about is treated as having no permission, never as a failure of the command.
            log.info("permission_check_refused", repo=repo, user=username, error=str(exc))
            return "none"
        return effective_role(data)
