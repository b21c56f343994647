"""A GitHub write that happened stays audited when the caller's transaction rolls back."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.db import engine_for
from app.models import AuditEntry
from app.store import audit


@pytest.mark.services
def test_the_row_survives_the_callers_rollback(pg_clean_url: str) -> None:
    engine = engine_for(pg_clean_url)
    with Session(engine) as caller:
        audit.record_outside(caller, actor="sweepbot", action="github.actions/create-workflow-dispatch")
        caller.rollback()  # e.g. the database restarted before the job's state was committed
    with Session(engine) as check:
        actions = check.scalars(select(AuditEntry.action)).all()
    assert actions == ["github.actions/create-workflow-dispatch"]


@pytest.mark.services
def test_a_short_outage_is_retried_then_the_row_lands(
    pg_clean_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = engine_for(pg_clean_url)
    failures = [OperationalError("INSERT", {}, Exception("server closed the connection"))] * 2
    real_record = audit.record
    waits: list[float] = []

    def flaky(session: Session, **fields: Any) -> AuditEntry:
        if failures and session.get_bind() is engine and not isinstance(session, _Caller):
            raise failures.pop()
        return real_record(session, **fields)

    class _Caller(Session):
        pass

    monkeypatch.setattr(audit, "record", flaky)
    with _Caller(engine) as caller:
        audit.record_outside(caller, sleep=waits.append, actor="sweepbot", action="github.git/update-ref")
        caller.rollback()
    assert waits == list(audit.OUTSIDE_RETRY_DELAYS[:2])
    with Session(engine) as check:
        assert check.scalars(select(AuditEntry.action)).all() == ["github.git/update-ref"]


@pytest.mark.services
def test_when_the_outage_outlasts_the_retries_the_row_goes_in_the_callers_transaction(
    pg_clean_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = engine_for(pg_clean_url)
    real_record = audit.record

    class _Caller(Session):
        pass

    def down(session: Session, **fields: Any) -> AuditEntry:
        if not isinstance(session, _Caller):
            raise OperationalError("INSERT", {}, Exception("connection refused"))
        return real_record(session, **fields)

    monkeypatch.setattr(audit, "record", down)
    with _Caller(engine) as caller:
        audit.record_outside(caller, sleep=lambda _s: None, actor="sweepbot", action="github.git/update-ref")
        caller.commit()
    with Session(engine) as check:
        assert check.scalars(select(AuditEntry.action)).all() == ["github.git/update-ref"]


def test_sqlite_stays_in_the_callers_transaction(db_session: Session) -> None:
    audit.record_outside(db_session, actor="sweepbot", action="github.issues/create-comment")
    assert [e.action for e in db_session.new if isinstance(e, AuditEntry)] == ["github.issues/create-comment"]
    db_session.rollback()
    assert db_session.scalars(select(AuditEntry)).all() == []
