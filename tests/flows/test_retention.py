"""The retention pass deletes history past its retention, in bounded batches: finished deliveries
(job events sooner), audit rows, stale redelivery requests; never a pending delivery, never
anything younger than its setting; retention shorter than GitHub's redelivery horizon is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db import session_factory
from app.flows.ingest.retention import prune_history
from app.models import AuditEntry, Delivery
from app.models.redelivery import RedeliveryRequest
from app.settings import Settings

NOW = datetime(2027, 1, 1, tzinfo=UTC)
DAY = 24 * 3600.0


def _delivery(session: Session, did: str, event: str, status: str, age_days: float) -> None:
    session.add(
        Delivery(
            id=did, event=event, action=None, repo="o/r", status=status, attempts=1, body=b"{}", body_bytes=2,
            received_at=NOW - timedelta(days=age_days),
        )
    )  # fmt: skip


def _ids(session: Session) -> set[str]:
    session.expire_all()
    return set(session.scalars(select(Delivery.id)))


def _settings(**kw: float) -> Settings:
    return Settings(**kw)  # type: ignore[arg-type]


def test_each_kind_is_pruned_at_its_own_age(db_session: Session) -> None:
    _delivery(db_session, "push-old", "push", "done", 31)
    _delivery(db_session, "push-young", "push", "done", 29)
    _delivery(db_session, "job-old", "workflow_job", "done", 8)
    _delivery(db_session, "job-young", "workflow_job", "ignored", 6)
    _delivery(db_session, "run-old", "workflow_run", "failed", 8)
    _delivery(db_session, "pending-ancient", "workflow_job", "retry", 400)
    _delivery(db_session, "received-ancient", "push", "received", 400)
    db_session.add(AuditEntry(at=NOW - timedelta(days=181), actor="a", action="x", outcome="ok"))
    db_session.add(AuditEntry(at=NOW - timedelta(days=179), actor="a", action="y", outcome="ok"))
    for guid, age in (("g-old", 7), ("g-young", 5)):
        db_session.add(
            RedeliveryRequest(
                guid=guid, hook="app", github_delivery_id=1, event="push", status="requested",
                requested_at=NOW - timedelta(days=age),
            )
        )  # fmt: skip
    db_session.commit()
    gone = prune_history(session_factory(), _settings(), NOW)
    assert gone == {"job_events": 2, "deliveries": 1, "audit": 1, "redelivery_requests": 1}
    assert _ids(db_session) == {"push-young", "job-young", "pending-ancient", "received-ancient"}
    assert list(db_session.scalars(select(AuditEntry.action))) == ["y"]
    assert list(db_session.scalars(select(RedeliveryRequest.guid))) == ["g-young"]
    # Nothing left past its age: a second pass deletes nothing.
    assert set(prune_history(session_factory(), _settings(), NOW).values()) == {0}


def test_a_pass_is_bounded_and_the_next_one_goes_on(db_session: Session) -> None:
    for i in range(25):
        _delivery(db_session, f"old-{i:02}", "push", "done", 40)
    db_session.commit()
    settings = _settings(retention_batch_size=4)
    first = prune_history(session_factory(), settings, NOW, max_batches=3)
    assert first["deliveries"] == 12 and len(_ids(db_session)) == 13
    prune_history(session_factory(), settings, NOW, max_batches=3)
    prune_history(session_factory(), settings, NOW, max_batches=3)
    assert db_session.scalar(select(func.count()).select_from(Delivery)) == 0


def test_retention_inside_the_redelivery_horizon_is_refused() -> None:
    with pytest.raises(ValueError, match="SWEEPBOT_JOB_EVENT_RETENTION_SECONDS"):
        _settings(job_event_retention_seconds=DAY)
    with pytest.raises(ValueError, match="SWEEPBOT_DELIVERY_RETENTION_SECONDS"):
        _settings(delivery_retention_seconds=2 * DAY)
    assert _settings(delivery_retention_seconds=2 * DAY, redelivery_horizon_seconds=DAY)


def test_the_pass_is_on_beats_schedule(db_session: Session) -> None:
    from app.adapters.broker import PERIODIC_TASKS, TASK_MODULES, make_celery

    schedule = make_celery().conf.beat_schedule
    assert schedule["prune-history"]["task"] == "sweepbot.prune_history"
    assert "sweepbot.prune_history" in PERIODIC_TASKS and "workers.tasks_retention" in TASK_MODULES
