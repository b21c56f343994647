"""The sticky reports' debounce state (``report_states``) and the sweep rows a report is made of.

Every job state change calls ``mark_report_dirty(session, sweep_id)``, which bumps the report's
``version``; the report flow (``app.flows.results.reports.flush_reports``) lands every report whose
``version`` is ahead of ``flushed_version``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.models.results import ReportState
from app.models.sweeps import Sweep, SweepJob


def _now() -> datetime:
    return datetime.now(UTC)


def mark_report_dirty(session: Session, sweep_id: int) -> None:
    sweep = session.get(Sweep, sweep_id)
    if sweep is None or sweep.reason == "canary":  # canaries have no PR: the nightly watch reports them
        return
    stmt = select(ReportState).where(
        ReportState.repo == sweep.repo,
        ReportState.pr_number == sweep.pr_number,
        ReportState.config_key == sweep.config_key,
    )
    state = session.scalars(stmt).first()
    if state is None:
        try:
            with session.begin_nested():
                state = ReportState(
                    repo=sweep.repo,
                    pr_number=sweep.pr_number,
                    config_key=sweep.config_key,
                    sweep_id=sweep_id,
                    version=0,
                    flushed_version=0,
                )
                session.add(state)
        except IntegrityError:  # another worker created it first
            state = session.scalars(stmt).one()
    if sweep_id > state.sweep_id:
        state.sweep_id = sweep_id  # the newest sweep is the one shown
    # Incremented in SQL, not read-modify-write: two workers marking at once must both count, or a
    # flush that saw the first mark would settle the report without the second change.
    state.version = ReportState.version + 1
    state.marked_at = _now()
    session.flush()


def dirty_report_ids(session: Session) -> list[int]:
    """Reports with a change not yet landed."""
    return list(
        session.scalars(select(ReportState.id).where(ReportState.version > ReportState.flushed_version))
    )


def sweep_jobs(session: Session, sweep_id: int) -> Sequence[SweepJob]:
    return session.scalars(select(SweepJob).where(SweepJob.sweep_id == sweep_id)).all()


def newer_sweep_id(session: Session, sweep: Sweep) -> int | None:
    """The newest later sweep of the same PR and config key (it supersedes this one's results)."""
    return session.scalars(
        select(Sweep.id)
        .where(
            Sweep.repo == sweep.repo,
            Sweep.pr_number == sweep.pr_number,
            Sweep.config_key == sweep.config_key,
            Sweep.id > sweep.id,
        )
        .order_by(Sweep.id.desc())
        .limit(1)
    ).first()


def pr_sweeps(session: Session, *, repo: str, pr_number: int) -> Sequence[Sweep]:
    """Every sweep of a PR, newest first."""
    return session.scalars(
        select(Sweep).where(Sweep.repo == repo, Sweep.pr_number == pr_number).order_by(Sweep.id.desc())
    ).all()


def job_states(session: Session, sweep_id: int) -> list[str]:
    return list(session.scalars(select(SweepJob.state).where(SweepJob.sweep_id == sweep_id)))
