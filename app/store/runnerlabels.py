"""Runner label rows: one per label, the lock a tick takes, paused flag and last known capacity."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from app.core.clock import utcnow
from app.models.sweeps import RunnerLabel


def ensure_label(session_factory: sessionmaker[Session], label: str) -> None:
    with session_factory() as session:
        if session.get(RunnerLabel, label) is not None:
            return
        session.add(RunnerLabel(label=label, paused=False, release_seq=0, updated_at=utcnow()))
        try:
            session.commit()
        except IntegrityError:  # another tick created it first
            session.rollback()


def lock_label(session: Session, label: str) -> RunnerLabel | None:
    """Take the label's lock row for this transaction; None when another tick holds it (PostgreSQL)."""
    if session.get_bind().dialect.name == "postgresql":
        return session.scalars(
            select(RunnerLabel).where(RunnerLabel.label == label).with_for_update(skip_locked=True)
        ).first()
    # SQLite: a write as the transaction's first statement takes the database write lock, so the
    # reads that follow see every committed claim and no other tick can claim until we commit.
    session.execute(
        update(RunnerLabel).where(RunnerLabel.label == label).values(release_seq=RunnerLabel.release_seq + 0)
    )
    return session.get(RunnerLabel, label)
