"""Queries and state changes of the Sweep aggregate."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.clock import utcnow
from app.core.sweepspec import SweepError
from app.models.sweeps import JobState, Sweep, SweepJob, SweepState


def get_sweep(session: Session, sweep_id: int) -> Sweep:
    sweep = session.get(Sweep, sweep_id)
    if sweep is None:
        raise SweepError(f"sweep {sweep_id} does not exist (see `sweepbot queue` for open sweeps)")
    return sweep


def sweep_mode(sweep: Sweep) -> str:
    """``dispatch`` or ``label``: kept in the sweep's filters JSON (set once, at creation)."""
    return str((sweep.filters or {}).get("mode") or "dispatch")


def reopen(sweep: Sweep) -> None:
    approved = sweep.approved_sha is not None and sweep.approved_sha == sweep.head_sha
    sweep.state = SweepState.AWAITING_APPROVAL if sweep.is_fork and not approved else SweepState.ACTIVE
    sweep.finished_at, sweep.updated_at = None, utcnow()


def maybe_finish_sweep(session: Session, sweep: Sweep) -> None:
    if sweep.state not in SweepState.OPEN:
        return
    open_jobs = session.scalars(
        select(SweepJob.id).where(SweepJob.sweep_id == sweep.id, SweepJob.state.notin_(JobState.FINAL))
    ).first()
    if open_jobs is None:
        now = utcnow()
        sweep.state, sweep.finished_at, sweep.updated_at = SweepState.DONE, now, now


def open_sweeps(session: Session, *, repo: str, pr_number: int, config_key: str | None = None) -> list[Sweep]:
    """Open sweeps of a PR (of one config key, when given), oldest first."""
    query = select(Sweep).where(
        Sweep.repo == repo, Sweep.pr_number == pr_number, Sweep.state.in_(SweepState.OPEN)
    )
    if config_key is not None:
        query = query.where(Sweep.config_key == config_key)
    return list(session.scalars(query.order_by(Sweep.id)).all())
