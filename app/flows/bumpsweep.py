"""The sweep a bump queues for the bumped key (reason ``bump``); the scheduler owns sweeps."""

from __future__ import annotations

import structlog
from sqlalchemy.orm import Session

from app.flows.scheduler import request_sweep
from app.flows.trackports import BumpGateway
from app.models.tracking import Bump, Watch

log = structlog.get_logger(__name__)


def request_bump_sweep(
    session: Session, gw: BumpGateway, watch: Watch, pr_number: int | None, bump: Bump | None = None
) -> None:
    """Queue the sweep of the bumped key on the PR the bump landed in (the recipe PR or the bump PR)."""
    number = pr_number or watch.pr_number
    if not number:
        log.info("sweep_not_requested", key=watch.config_key, why="no PR to sweep on")
        return
    request_sweep(
        session,
        gw,
        repo=watch.repo,
        pr_number=int(number),
        config_key=watch.config_key,
        requested_by="sweepbot",
        reason="bump",
    )
    if bump is not None:
        bump.sweep_requested = True
