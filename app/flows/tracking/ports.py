"""The gateway methods each tracking flow uses, as typed Protocols (``GitHubGateway`` satisfies
them all; a test fake implements only the ones of the flow it drives)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from app.adapters.permissions import PermissionGateway
from app.flows.repo.bot_config import ConfigReader
from app.flows.repo.recipe_files import RecipeReader
from app.flows.sweeps.request import RequestGateway

if TYPE_CHECKING:  # annotations only: the dashboard imports these Protocols, PyGithub stays out
    from app.adapters.github.base import Conditional


class PullReader(Protocol):
    def get_pull(self, repo: str, number: int) -> dict[str, Any]: ...

    def get_pull_conditional(self, repo: str, number: int) -> Conditional: ...


class CompareGateway(Protocol):
    """Containment: compare answers and short-SHA resolution in the upstream repo."""

    def compare(self, repo: str, base: str, head: str) -> dict[str, Any]: ...

    def resolve_commit(self, repo: str, ref: str) -> str | None: ...


class StatusGateway(Protocol):
    """The sticky status comment."""

    def update_comment(self, repo: str, comment_id: int, body: str) -> dict[str, Any]: ...

    def upsert_comment(self, repo: str, number: int, marker: str, body: str) -> dict[str, Any]: ...


class GitWriter(Protocol):
    """The Git Data API writes of a bump (blobs -> tree -> commit -> ref, never forced)."""

    def get_conditional(self, op: str, path: str, params: dict[str, Any] | None = None) -> Conditional: ...

    def get_commit(self, repo: str, sha: str) -> dict[str, Any]: ...

    def create_blob(self, repo: str, text: str) -> str: ...

    def create_tree(self, repo: str, base_tree: str, files: dict[str, str]) -> str: ...

    def create_commit(self, repo: str, message: str, tree: str, parents: list[str]) -> dict[str, Any]: ...

    def update_ref(self, repo: str, ref: str, sha: str, *, force: bool = False) -> dict[str, Any]: ...

    def create_ref(self, repo: str, ref: str, sha: str) -> dict[str, Any]: ...


class BumpPrGateway(StatusGateway, Protocol):
    """The bump PR: look before create, update in place, close superseded ones with a comment."""

    def get_pull(self, repo: str, number: int) -> dict[str, Any]: ...

    def list_pulls(
        self, repo: str, *, state: str = "open", head: str | None = None, base: str | None = None
    ) -> list[dict[str, Any]]: ...

    def create_pull(self, repo: str, *, title: str, head: str, base: str, body: str) -> dict[str, Any]: ...

    def update_pull(self, repo: str, number: int, **fields: Any) -> dict[str, Any]: ...

    def create_comment(self, repo: str, number: int, body: str) -> dict[str, Any]: ...

    def get_repo(self, repo: str) -> dict[str, Any]: ...


class BumpSweepGateway(RequestGateway, ConfigReader, Protocol):
    """Queueing the bump's sweep: the scheduler's request, and the PR's changelog at base and head."""


class BumpGateway(GitWriter, BumpPrGateway, RecipeReader, BumpSweepGateway, Protocol):
    """Everything a bump touches (it also requests the sweep, which reads the PR and its files)."""


class TrackingGateway(BumpGateway, PullReader, CompareGateway, PermissionGateway, Protocol):
    """Everything evaluating a watch may touch: reads, containment, the bump, the status comment,
    and who wrote a PR's dependency lines (app.core.admission)."""
