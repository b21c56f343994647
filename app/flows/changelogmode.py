"""The eval mode a PR's perf-changelog entries ask for a key, read through the gateway: the
changelog at the PR's base and head, compared by ``app.core.changelog_modes`` (pure)."""

from __future__ import annotations

from typing import Any

import structlog

from app.core.changelog_modes import ChangelogEvalMode, pr_eval_mode
from app.core.payloads import DELETED_FORK, head_of
from app.flows.trackports import ConfigReader

log = structlog.get_logger(__name__)


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
