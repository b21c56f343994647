"""Approval of a fork PR's sweeps, bound to the exact head sha a maintainer reviewed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.adapters.permissions import PermissionGateway
from app.core.clock import utcnow
from app.models.sweeps import Sweep, SweepJob, SweepState
from app.store.audit import record
from app.store.jobs import requeue
from app.store.reports import mark_report_dirty

log = structlog.get_logger(__name__)
BOT = "sweepbot"
WRITE_ROLES = ("admin", "maintain", "write")


class ApprovalGateway(PermissionGateway, Protocol):
    def get_pull(self, repo: str, number: int) -> dict[str, Any]: ...


def approve_pr(
    session: Session, gw: ApprovalGateway, *, repo: str, pr_number: int, head_sha: str | None, approver: str
) -> str:
    """Approve the fork PR's open sweeps for exactly ``head_sha`` (default: the PR's current head)."""
    role = gw.permission(repo, approver)
    if role not in WRITE_ROLES:
        record(
            session,
            actor=approver,
            action="sweep.approve",
            target=f"{repo}#{pr_number}",
            outcome="refused",
            detail={"role": role},
        )
        return (
            f"@{approver} has `{role}` permission on {repo}; approving a fork's sweep needs write, "
            "maintain or admin."
        )
    pr = gw.get_pull(repo, pr_number)
    current = str((pr.get("head") or {}).get("sha") or "")
    head_sha = head_sha or current
    if head_sha != current:
        record(
            session,
            actor=approver,
            action="sweep.approve",
            target=f"{repo}#{pr_number}",
            outcome="refused",
            detail={"asked": head_sha, "head": current},
        )
        return (
            f"The PR's head is now `{current[:7]}`, not `{head_sha[:7]}`: review the new commits and "
            "approve again."
        )
    sweeps = session.scalars(
        select(Sweep).where(
            Sweep.repo == repo,
            Sweep.pr_number == pr_number,
            Sweep.state.in_(SweepState.OPEN),
            Sweep.head_sha == head_sha,
        )
    ).all()
    now = utcnow()
    for sweep in sweeps:
        sweep.approved_by, sweep.approved_sha, sweep.approved_at = approver, head_sha, now
        if sweep.state == SweepState.AWAITING_APPROVAL:
            sweep.state, sweep.state_reason = SweepState.ACTIVE, f"approved by {approver} for {head_sha[:7]}"
        sweep.updated_at = now
        mark_report_dirty(session, sweep.id)
    record(
        session,
        actor=approver,
        action="sweep.approve",
        target=f"{repo}#{pr_number}",
        detail={"head_sha": head_sha, "sweeps": [s.id for s in sweeps]},
    )
    if not sweeps:
        return f"Nothing to approve: no open sweep of {repo}#{pr_number} is at `{head_sha[:7]}`."
    return (
        f"Approved by @{approver} for `{head_sha[:7]}`: sweep(s) "
        + ", ".join(str(s.id) for s in sweeps)
        + " will run. A new push needs a new approval."
    )


def void_stale_approval(
    session: Session,
    gw: ApprovalGateway,
    sweep: Sweep,
    jobs: Sequence[SweepJob],
    approved_sha: str | None,
    head_sha: str,
) -> bool:
    """Just before a fork's dispatch: True (and the jobs back in the queue, the sweep awaiting a
    new approval) when the PR's head is no longer the approved, planned sha."""
    pr = gw.get_pull(sweep.repo, sweep.pr_number)
    current = str((pr.get("head") or {}).get("sha") or "")
    if approved_sha and current == approved_sha and current == head_sha:
        return False
    for job in jobs:
        requeue(job, "waiting for approval of the new head", refund=True)
    sweep.state, sweep.approved_by, sweep.approved_sha, sweep.approved_at = (
        SweepState.AWAITING_APPROVAL,
        None,
        None,
        None,
    )
    sweep.state_reason = f"head moved to {current[:7]}: approval voided"
    record(
        session,
        actor=BOT,
        action="sweep.approval_voided",
        target=f"{sweep.repo}#{sweep.pr_number}",
        detail={"sweep": sweep.id, "approved": approved_sha, "head": current},
    )
    log.info("approval_voided", sweep=sweep.id, approved=approved_sha, head=current)
    mark_report_dirty(session, sweep.id)
    return True
