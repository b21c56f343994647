"""A GitHub write that happened stays audited when the caller's transaction rolls back."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.adapters.github.gateway import SessionAudit
from app.db import engine_for
from app.models import AuditEntry
from app.settings import Settings
from app.store import audit
from app.store.auditspool import AuditSpool


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


@pytest.mark.services
def test_an_outage_past_the_retries_spools_the_row_and_the_next_write_lands_it_once(
    pg_clean_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The database stays down past the retries: the caller's transaction will be rolled back by
    the outage, so the row goes to the local spool, and the next audit write that reaches the
    database drains it, with the time of the write kept."""
    engine = engine_for(pg_clean_url)
    spool = AuditSpool(tmp_path / "spool")
    real_record = audit.record
    down = [True]

    def maybe_down(session: Session, **fields: Any) -> AuditEntry:
        if down[0]:
            raise OperationalError("INSERT", {}, Exception("connection refused"))
        return real_record(session, **fields)

    monkeypatch.setattr(audit, "record", maybe_down)
    with Session(engine) as caller:
        audit.record_outside(
            caller,
            sleep=lambda _s: None,
            spool=spool,
            actor="sweepbot",
            caused_by="alice",
            action="github.issues/update-comment",
            target="o/r comment 7",
            detail={"id": 7},
        )
        caller.rollback()  # the outage rolls the caller back: nothing of the row was in it
    assert spool.pending()
    with Session(engine) as check:
        assert check.scalars(select(AuditEntry)).all() == []
    down[0] = False
    with Session(engine) as caller:
        audit.record_outside(caller, spool=spool, actor="sweepbot", action="github.git/update-ref")
    assert not spool.pending()
    with Session(engine) as check:
        rows = check.scalars(select(AuditEntry).order_by(AuditEntry.at)).all()
    assert [(r.action, r.caused_by, r.target) for r in rows] == [
        ("github.issues/update-comment", "alice", "o/r comment 7"),
        ("github.git/update-ref", None, None),
    ]
    assert rows[0].detail is not None and rows[0].detail["id"] == 7 and len(rows[0].detail["spool_id"]) == 32


@pytest.mark.services
def test_a_drain_that_died_after_its_commit_does_not_insert_twice(pg_clean_url: str, tmp_path: Path) -> None:
    engine = engine_for(pg_clean_url)
    spool = AuditSpool(tmp_path / "spool")
    spool.put({"actor": "sweepbot", "action": "github.git/create-blob", "outcome": "ok"})
    spool.put({"actor": "sweepbot", "action": "github.git/create-tree", "outcome": "ok"})
    with Session(engine) as session:
        assert spool.drain(session) == 2
    # As if the drainer (a pid no longer alive) had committed and died before deleting its file:
    (tmp_path / "spool" / "again.jsonl").write_text("")
    crashed = tmp_path / "spool" / "audit-1.jsonl.999999999.draining"
    with Session(engine) as session:
        for row in session.scalars(select(AuditEntry)).all():
            line = {"actor": row.actor, "action": row.action, "outcome": row.outcome, "detail": row.detail}
            with crashed.open("a") as out:
                out.write(json.dumps(line) + "\n")
        with crashed.open("a") as out:
            out.write('{"actor": "sweepbot", "action": "torn')  # a crash mid-append: skipped
    with Session(engine) as session:
        assert spool.drain(session) == 0
        assert sorted(session.scalars(select(AuditEntry.action)).all()) == [
            "github.git/create-blob",
            "github.git/create-tree",
        ]
    assert not spool.pending()


def test_a_spool_file_another_live_process_is_draining_is_left_alone(
    tmp_path: Path, db_session: Session
) -> None:
    spool = AuditSpool(tmp_path)
    busy = tmp_path / f"audit-1.jsonl.{os.getpid()}.draining"  # this test's pid: alive
    busy.write_text(
        json.dumps({"actor": "a", "action": "x", "outcome": "ok", "detail": {"spool_id": "s"}}) + "\n"
    )
    assert spool.drain(db_session) == 0
    assert busy.exists()


@pytest.mark.services
def test_the_row_is_written_ahead_of_the_write_so_a_crash_after_github_accepted_it_leaves_a_trace(
    pg_clean_url: str, tmp_path: Path
) -> None:
    """The worker dies (SIGKILL) after GitHub accepted a dispatch and before the outcome was
    recorded: the row written ahead says the write was sent (``pending``); a settled one says ok."""
    engine = engine_for(pg_clean_url)
    settings = Settings(data_dir=tmp_path, database_url=pg_clean_url)
    with Session(engine) as caller:
        audit_trail = SessionAudit(caller, actor="alice", delivery_id="d-1", settings=settings)
        crashed = audit_trail.before("github.actions/create-workflow-dispatch", "o/r e2e-tests.yml")
        caller.rollback()  # the process is gone: nothing after the write ran
        done = audit_trail.before("github.issues/create-comment", "o/r#1")
        audit_trail.after(done, "ok", {"status": 201, "id": 5})
    assert isinstance(crashed, audit.Mark) and crashed.entry_id is not None
    with Session(engine) as check:
        rows = check.scalars(select(AuditEntry).order_by(AuditEntry.id)).all()
    assert [(r.action, r.outcome, r.caused_by, r.delivery_id) for r in rows] == [
        ("github.actions/create-workflow-dispatch", "pending", "alice", "d-1"),
        ("github.issues/create-comment", "ok", "alice", "d-1"),
    ]
    assert rows[1].detail == {"status": 201, "id": 5}


@pytest.mark.services
def test_a_write_sent_while_the_database_was_down_lands_with_its_outcome(
    pg_clean_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    engine = engine_for(pg_clean_url)
    spool = AuditSpool(tmp_path / "spool")
    real_record = audit.record
    down = [True]

    def maybe_down(session: Session, **fields: Any) -> AuditEntry:
        if down[0]:
            raise OperationalError("INSERT", {}, Exception("connection refused"))
        return real_record(session, **fields)

    monkeypatch.setattr(audit, "record", maybe_down)
    with Session(engine) as caller:
        mark = audit.record_outside(
            caller,
            sleep=lambda _s: None,
            spool=spool,
            actor="sweepbot",
            action="github.git/update-ref",
            outcome="pending",
            detail={},
        )
        audit.settle_outside(
            caller, mark, outcome="ok", detail={"status": 200, "ref": "refs/heads/x"}, spool=spool
        )
    down[0] = False
    with Session(engine) as session:
        assert spool.drain(session) == 1
        (row,) = session.scalars(select(AuditEntry)).all()
    assert (row.action, row.outcome) == ("github.git/update-ref", "ok")
    assert row.detail is not None and row.detail["ref"] == "refs/heads/x"
