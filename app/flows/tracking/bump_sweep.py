"""The sweep a bump queues for the bumped key (reason ``bump``); the scheduler owns sweeps.

Its eval mode follows the changelog: when the entries the PR adds for the key carry
``evals-only`` / ``all-evals`` (``no-evals``), the sweep runs that mode (``app.core.changelog_mode``).
"""

from __future__ import annotations

import structlog
from sqlalchemy.orm import Session

from app.core.sweepspec import SweepFilters
from app.flows.repo.changelog_mode import changelog_eval_mode
from app.flows.sweeps.request import request_sweep
from app.flows.tracking.ports import BumpSweepGateway
from app.models.tracking import Bump, Watch

log = structlog.get_logger(__name__)


def request_bump_sweep(
    session: Session,
    gw: BumpSweepGateway,
    watch: Watch,
    pr_number: int | None,
    bump: Bump | None = None,
    *,
    changelog: str = "perf-changelog.yaml",
) -> None:
    """Queue the sweep of the bumped key on the PR the bump landed in (the recipe PR or the bump PR)."""
    number = pr_number or watch.pr_number
    if not number:
        log.info("sweep_not_requested", key=watch.config_key, why="no PR to sweep on")
        return
    pull = gw.get_pull(watch.repo, int(number))
    evals = changelog_eval_mode(gw, watch.repo, pull, watch.config_key, changelog)
    filters = SweepFilters(evals=evals.mode.value) if evals.mode is not None else None
    log.info(
        "bump_sweep_requested",
        key=watch.config_key,
        pr=number,
        evals=evals.mode.value if evals.mode else "default",
        why=evals.why,
    )
    request_sweep(
        session,
        gw,
        repo=watch.repo,
        pr_number=int(number),
        config_key=watch.config_key,
        requested_by="sweepbot",
        reason="bump",
        filters=filters,
    )
    if bump is not None:
        bump.sweep_requested = True
