"""The eval mode a PR's perf-changelog entries ask for a key, read through the gateway: the
changelog at the PR's base and head, compared by ``app.core.changelog_mode`` (pure). Both ways a
sweep is requested use it: the bump's sweep (``app.flows.tracking.bump_sweep``) and ``/sweep`` without
``evals=`` (``changelog_filters``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

import structlog
from sqlalchemy.orm import Session

from app.core.changelog_mode import ChangelogEvalMode, pr_eval_mode
from app.core.payloads import DELETED_FORK, head_of
from app.core.sweepspec import SweepFilters
from app.flows.repo.bot_config import ConfigReader, bot_config

log = structlog.get_logger(__name__)


class ChangelogGateway(ConfigReader, Protocol):
    def get_pull(self, repo: str, number: int) -> dict[str, Any]: ...


def changelog_eval_mode(
    gw: ConfigReader, repo: str, pull: dict[str, Any], key: str, path: str = "perf-changelog.yaml"
) -> ChangelogEvalMode:
    """What the entries ``pull`` adds to the changelog say about ``key``'s evals (None: nothing)."""
    head = head_of(pull, repo)
    if not head.readable:
        return ChangelogEvalMode(None, f"the PR head cannot be read ({DELETED_FORK})")
    base_sha = str((pull.get("base") or {}).get("sha") or "")
    got_head = gw.get_file(str(head.repo), path, ref=head.sha)
    got_base = gw.get_file(repo, path, ref=base_sha) if base_sha else None
    return pr_eval_mode(got_base[0] if got_base else None, got_head[0] if got_head else None, key)


def changelog_filters(
    session: Session,
    gw: ChangelogGateway,
    repo: str,
    pr_number: int,
    key: str,
    filters: SweepFilters | None,
    *,
    explicit: bool,
) -> SweepFilters | None:
    """The filters a sweep of ``key`` on a PR runs with: an explicit ``evals=`` wins; otherwise the
    eval mode the PR's changelog entries ask for the key (evals-only, all-evals), if any."""
    if explicit:
        log.info("sweep_eval_mode", key=key, pr=pr_number, why="evals= given in the command")
        return filters
    pull = gw.get_pull(repo, pr_number)
    path = bot_config(session, gw, repo).bump.changelog
    found = changelog_eval_mode(gw, repo, pull, key, path)
    log.info(
        "sweep_eval_mode", key=key, pr=pr_number, mode=found.mode.value if found.mode else None, why=found.why
    )
    if found.mode is None:
        return filters
    return replace(filters or SweepFilters(), evals=found.mode.value)
