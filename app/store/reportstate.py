"""A PR report's dirty mark: every change to a sweep bumps its report's version; the flush posts it.

Here, below the flows, so the scheduler's flows and the results' flows can both mark a report
without importing each other (issue 17).
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.models.results import ReportState
from app.models.sweeps import CANARY_REASON, Sweep


def _now() -> datetime:
    return datetime.now(UTC)


def mark_report_dirty(session: Session, sweep_id: int) -> None:
    """Bump the report of ``sweep_id``'s PR and key (created on first mark); canaries have none."""
    sweep = session.get(Sweep, sweep_id)
    if sweep is None or sweep.reason == CANARY_REASON:  # canaries have no PR: the nightly watch reports them
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
