"""Git data: refs, commits, blobs and trees (what a bot branch is built from).

A read of a ref or commit this gateway just wrote waits out GitHub's visibility lag
(``GatewayBase._eventually``); the writes retry briefly on it too.
"""

from __future__ import annotations

from typing import Any

from app.adapters.github.base import GatewayBase
from app.adapters.github.errors import GitHubError, NotFound


class GitDataGateway(GatewayBase):
    """Reading and writing a repository's git objects and refs directly (no clone)."""

    def get_ref(self, repo: str, ref: str) -> dict[str, Any] | None:
        """``ref`` like ``heads/main``; ``None`` when it does not exist."""

        def read() -> Any:
            return self._get("git/get-ref", f"/repos/{repo}/git/ref/{ref}")

        try:
            if (repo, ref) in self._written:  # a read after our own write may lag behind it
                return self._eventually("git/get-ref", read)
            return read()
        except NotFound:
            return None

    def create_ref(self, repo: str, ref: str, sha: str) -> dict[str, Any]:
        data = self._eventually(
            "git/create-ref",
            lambda: self._write(
                "git/create-ref",
                "POST",
                f"/repos/{repo}/git/refs",
                {"ref": f"refs/{ref}", "sha": sha},
                target=f"{repo}:{ref}",
            ),
        )
        self._written.add((repo, ref))
        return data

    def update_ref(self, repo: str, ref: str, sha: str, *, force: bool = False) -> dict[str, Any]:
        data = self._eventually(
            "git/update-ref",
            lambda: self._write(
                "git/update-ref",
                "PATCH",
                f"/repos/{repo}/git/refs/{ref}",
                {"sha": sha, "force": force},
                target=f"{repo}:{ref}",
            ),
        )
        self._written.add((repo, ref))
        return data

    def delete_ref(self, repo: str, ref: str) -> None:
        """``ref`` like ``heads/sweepbot/canary/...``; a ref already gone is not an error."""
        try:
            self._write("git/delete-ref", "DELETE", f"/repos/{repo}/git/refs/{ref}", target=f"{repo}:{ref}")
        except NotFound:
            return

    def get_commit(self, repo: str, sha: str) -> dict[str, Any]:
        def read() -> Any:
            return self._get("git/get-commit", f"/repos/{repo}/git/commits/{sha}")

        return self._eventually("git/get-commit", read) if (repo, sha) in self._written else read()

    def resolve_commit(self, repo: str, ref: str) -> str | None:
        """The full SHA ``ref`` (a short SHA, branch or tag) names in ``repo``; None when GitHub knows
        no such commit or the short SHA is ambiguous (422). Commits never change: callers cache it."""
        try:
            data = self._get("repos/get-commit", f"/repos/{repo}/commits/{ref}")
        except NotFound:
            return None
        except GitHubError as exc:
            if exc.status == 422:
                return None
            raise
        sha = data.get("sha") if isinstance(data, dict) else None
        return str(sha) if sha else None

    def create_blob(self, repo: str, text: str) -> str:
        data = self._write(
            "git/create-blob",
            "POST",
            f"/repos/{repo}/git/blobs",
            {"content": text, "encoding": "utf-8"},
            target=repo,
        )
        return str(data["sha"])

    def create_tree(self, repo: str, base_tree: str, files: dict[str, str]) -> str:
        """``files``: path -> blob sha (mode 100644)."""
        tree = [{"path": p, "mode": "100644", "type": "blob", "sha": s} for p, s in sorted(files.items())]
        data = self._eventually(
            "git/create-tree",
            lambda: self._write(
                "git/create-tree",
                "POST",
                f"/repos/{repo}/git/trees",
                {"base_tree": base_tree, "tree": tree},
                target=repo,
            ),
        )
        return str(data["sha"])

    def create_commit(self, repo: str, message: str, tree: str, parents: list[str]) -> dict[str, Any]:
        data = self._eventually(
            "git/create-commit",
            lambda: self._write(
                "git/create-commit",
                "POST",
                f"/repos/{repo}/git/commits",
                {"message": message, "tree": tree, "parents": parents},
                target=repo,
            ),
        )
        if isinstance(data, dict) and data.get("sha"):
            self._written.add((repo, str(data["sha"])))
        return data
