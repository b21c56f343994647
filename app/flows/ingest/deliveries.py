"""Deliveries after the request: store, claim, route, record the outcome, retry, reap, replay.

Exactly once in effect: a delivery is stored once (its id is the primary key); a worker takes it
only through an atomic claim (one UPDATE guarded by its state and lease), so two workers never
process it at once; handlers are idempotent, so the rare re-run after a crash converges.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import structlog
from sqlalchemy import ColumnElement, and_, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DataError, IntegrityError, OperationalError
from sqlalchemy.orm import Session

from app.adapters import broker, queue  # called through the module: tests replace them there
from app.core.backlog import QueueProgress, queue_position, readiness, ring_cutoff
from app.core.delivery import IncomingDelivery
from app.core.installations import installation_of
from app.core.routing import Event, GatewayFactory, HandlerContext, HandlerSkipped, TransientError
from app.db import get_engine, session_factory, session_scope
from app.metrics import DELIVERIES, INGEST_TO_DONE, TASK_FAILURES
from app.models import Delivery, DeliveryStatus, Heartbeat
from app.settings import get_settings
from app.store.audit import record

if TYPE_CHECKING:  # the API stores deliveries and never calls GitHub: PyGithub stays out of it
    from app.adapters.github.gateway import GitHubGateway

log = structlog.get_logger(__name__)

S = DeliveryStatus


def now() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime | None) -> datetime | None:
    # SQLite hands back naive datetimes; everything here is UTC.
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


class StoreUnavailable(Exception):
    """The database could not take a batch of deliveries (none of it was stored)."""


class RowsRefused(Exception):
    """The database refused what a batch's rows hold (a data error, not an outage): some row has
    a value a column cannot store. Nothing of the batch was stored; the group commit writes the
    rest again without the row (``app.web.groupcommit``), whose sender gets a 400."""


@dataclass(frozen=True)
class Stored:
    created: bool
    enqueue: bool


def store_batch(items: list[IncomingDelivery]) -> list[Stored]:
    """Insert deliveries in one transaction (one commit, so one WAL flush, for the whole batch).

    A delivery id already stored (a redelivery), or repeated within the batch, changes nothing:
    ``INSERT ... ON CONFLICT DO NOTHING RETURNING id`` tells which rows are new. (On PostgreSQL
    the API's group commit runs the same rows as one prepared statement: app/web/groupcommit.py.)
    """
    if not items:
        return []
    rows = delivery_rows(items, now())
    engine = get_engine()
    dialect = postgresql if engine.dialect.name == "postgresql" else sqlite
    # executemany with RETURNING: SQLAlchemy batches it into multi-row INSERTs ("insertmanyvalues")
    # from one cached compiled statement, and returns the ids that were new.
    statement = dialect.insert(Delivery).on_conflict_do_nothing(index_elements=["id"]).returning(Delivery.id)
    try:
        with engine.begin() as conn:
            created = set(conn.execute(statement, rows).scalars())
    except DataError as exc:  # rolled back: a value no column takes, not a database outage
        raise RowsRefused(str(exc.orig)) from exc
    return stored_outcomes(items, created)


def delivery_rows(items: list[IncomingDelivery], t: datetime) -> list[dict[str, Any]]:
    """The ``deliveries`` rows for a batch received at ``t`` (an id repeated in the batch once)."""
    rows, seen = [], set()
    for item in items:
        if item.id in seen:
            continue
        seen.add(item.id)
        is_ping = item.event == "ping"
        rows.append(
            {
                "id": item.id,
                "event": item.event,
                "action": item.action,
                "repo": item.repo,
                "status": S.DONE if is_ping else S.RECEIVED,
                "attempts": 0,
                "body": item.payload,
                "body_bytes": len(item.payload),
                "received_at": t,
                # The API rings the doorbell right after the commit: the reaper reads this as the
                # moment the delivery joined the broker's queue (app/core/backlog.py).
                "enqueued_at": None if is_ping else t,
                "finished_at": t if is_ping else None,
            }
        )
    return rows


def stored_outcomes(items: list[IncomingDelivery], created: set[str]) -> list[Stored]:
    """What each item of a batch became, given the ids the insert reported new (logged per item)."""
    out, first = [], set()
    batch_log = log.bind()  # one logger for the batch: the lazy proxy builds one on every call
    for item in items:
        is_new = item.id in created and item.id not in first
        first.add(item.id)
        if not is_new:
            batch_log.info("delivery_duplicate", delivery_id=item.id, event_name=item.event)
        else:
            if item.event == "ping":
                DELIVERIES.labels(event="ping", outcome=S.DONE).inc()
            batch_log.info(
                "delivery_stored",
                delivery_id=item.id,
                event_name=item.event,
                action=item.action,
                bytes=len(item.payload),
            )
        out.append(Stored(created=is_new, enqueue=is_new and item.event != "ping"))
    return out


def mark_not_enqueued(delivery_ids: list[str]) -> None:
    """The doorbell failed for these (broker down): clear their enqueue time for the reaper."""
    with session_scope() as session:
        session.execute(
            update(Delivery)
            .where(Delivery.id.in_(delivery_ids), Delivery.status.in_((S.RECEIVED, S.QUEUED)))
            .values(enqueued_at=None)
            .execution_options(synchronize_session=False)
        )


def store_delivery(incoming: IncomingDelivery) -> Stored:
    """Insert one delivery; a redelivery of a known id changes nothing."""
    return store_batch([incoming])[0]


def _lease_seconds() -> float:
    return get_settings().delivery_lease_seconds


def claim(session: Session, delivery_id: str, worker: str) -> bool:
    """Atomically move a pending (or lease-expired) delivery to ``processing``; True if we got it."""
    t = now()
    result = session.execute(
        update(Delivery)
        .where(
            Delivery.id == delivery_id,
            or_(
                and_(
                    Delivery.status.in_(S.PENDING),
                    or_(Delivery.next_attempt_at.is_(None), Delivery.next_attempt_at <= t),
                ),
                and_(Delivery.status == S.PROCESSING, Delivery.lease_until < t),
            ),
        )
        .values(
            status=S.PROCESSING,
            attempts=Delivery.attempts + 1,
            started_at=t,
            lease_until=t + timedelta(seconds=_lease_seconds()),
            worker=worker,
        )
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return bool(result.rowcount)  # type: ignore[attr-defined]  # a CursorResult for UPDATE


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def backoff_seconds(attempts: int) -> float:
    return float(min(600, 2 ** min(attempts, 10)))


def process_delivery(delivery_id: str) -> str:
    """Process one stored delivery; returns its final (or retry) status, or ``skipped``."""
    settings = get_settings()
    factory = session_factory()
    with factory() as session:
        if not claim(session, delivery_id, worker_name()):
            log.info("delivery_not_claimed", delivery_id=delivery_id)
            return "skipped"
    structlog.contextvars.bind_contextvars(delivery_id=delivery_id)
    try:
        return _run_claimed(factory, delivery_id, settings.delivery_max_attempts)
    finally:
        structlog.contextvars.unbind_contextvars("delivery_id")


def delivery_gateways(session: Session, event: Event) -> GatewayFactory[GitHubGateway]:
    """The handlers' GitHub: writes audited in the delivery's session as the asked-for actor, tagged
    with the delivery; GitHub names the installation the delivery belongs to, and that one acts."""
    installation = installation_of(event.payload)

    def make(actor: str) -> GitHubGateway:
        from app.adapters.github.gateway import session_gateway  # lazy: PyGithub only where handlers run

        return session_gateway(
            session, actor=actor, delivery_id=event.delivery_id, installation_id=installation, repo=event.repo
        )

    return make


def _run_claimed(factory: Any, delivery_id: str, max_attempts: int) -> str:
    from app.flows.ingest.handlers import composed  # lazy: the handlers (and PyGithub) only in the worker

    router = composed(tuple(get_settings().extra_handler_modules))
    session: Session = factory()
    try:
        delivery = session.get(Delivery, delivery_id)
        assert delivery is not None
        attempt = delivery.attempts  # the claim's token: the claim incremented it
        payload = json.loads(delivery.body)
        event = Event(delivery_id=delivery.id, name=delivery.event, action=delivery.action, payload=payload)
        handlers = router.handlers_for(event.name, event.action)
        ctx = HandlerContext(session=session, event=event, gateways=delivery_gateways(session, event))
        did_work = False
        for handler in handlers:
            try:
                handler(ctx)
                did_work = True
            except HandlerSkipped as skip:
                log.info("handler_skipped", handler=handler.__qualname__, reason=str(skip))
        outcome = S.DONE if did_work else S.IGNORED
        if not _settle(session, delivery_id, attempt, status=outcome, error=None):
            # Our lease ran out and another worker took the delivery: its run decides.
            session.rollback()
            return "superseded"
        session.commit()
    except TransientError as exc:
        session.rollback()
        return _retry_later(factory, delivery_id, attempt, exc, max_attempts)
    except (IntegrityError, OperationalError) as exc:
        # Two workers inserting the same row (a watch, a tag, a cached compare), a deadlock, a
        # dropped connection: the retry finds the row or the database back. Not a permanent failure.
        session.rollback()
        reason = f"database: {exc.__class__.__name__}: {str(exc.orig)[:300]}"
        return _retry_later(factory, delivery_id, attempt, TransientError(reason), max_attempts)
    except Exception as exc:  # a bug or bad data: record it, keep the payload for replay
        session.rollback()
        log.exception("delivery_failed", error=str(exc))
        TASK_FAILURES.labels(task="process_delivery", kind="error").inc()
        _finish(factory, delivery_id, attempt, S.FAILED, f"{exc.__class__.__name__}: {exc}")
        return S.FAILED
    finally:
        session.close()
    for callback in ctx.after_commit:
        try:
            callback()
        except Exception:
            log.exception("after_commit_failed")
    received = _aware(delivery.received_at)
    if received is not None:
        INGEST_TO_DONE.observe((now() - received).total_seconds())
    DELIVERIES.labels(event=event.name, outcome=outcome).inc()
    log.info(
        "delivery_processed",
        event_name=event.name,
        action=event.action,
        outcome=outcome,
        handlers=len(handlers),
    )
    return outcome


def _settle(session: Session, delivery_id: str, attempt: int, **values: Any) -> bool:
    """Record an attempt's outcome only while that attempt still holds the delivery.

    A handler that outlived its lease may find the delivery claimed again (``attempts`` moved on);
    writing its outcome then would overwrite the newer attempt's.
    """
    values.setdefault("lease_until", None)
    if values.get("status") in S.FINAL:
        values.setdefault("finished_at", now())
    result = session.execute(
        update(Delivery)
        .where(Delivery.id == delivery_id, Delivery.status == S.PROCESSING, Delivery.attempts == attempt)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]  # a CursorResult for UPDATE


def _finish(factory: Any, delivery_id: str, attempt: int, status: str, error: str | None) -> None:
    with factory() as session:
        settled = _settle(session, delivery_id, attempt, status=status, error=error)
        session.commit()
        if settled:
            event = session.scalar(select(Delivery.event).where(Delivery.id == delivery_id)) or "?"
            DELIVERIES.labels(event=event, outcome=status).inc()


def _retry_later(factory: Any, delivery_id: str, attempt: int, exc: TransientError, max_attempts: int) -> str:
    TASK_FAILURES.labels(task="process_delivery", kind="transient").inc()
    # A rate limit only delays the work (GitHub said when to come back); it never uses up the
    # delivery's retry budget, so a long secondary-limit episode cannot drop a delivery.
    if attempt >= max_attempts and not exc.rate_limited:
        _finish(
            factory,
            delivery_id,
            attempt,
            S.FAILED,
            f"gave up after {max_attempts} attempts; last error: {exc}",
        )
        return S.FAILED
    wait = exc.delay(attempt, backoff_seconds(attempt))
    with factory() as session:
        settled = _settle(
            session,
            delivery_id,
            attempt,
            status=S.RETRY,
            error=str(exc),
            next_attempt_at=now() + timedelta(seconds=wait),
            enqueued_at=now() + timedelta(seconds=wait),  # its countdown message fires then
        )
        session.commit()
    if not settled:
        return "superseded"
    log.warning("delivery_retry", error=str(exc), wait_seconds=wait)
    queue.enqueue("sweepbot.process_delivery", delivery_id, countdown=wait)
    return S.RETRY


REAP_CHUNK = 50  # ids per process_deliveries message: a backlog drains in batches


def queue_progress(session: Session) -> QueueProgress:
    rows = dict(
        session.execute(
            select(Heartbeat.name, Heartbeat.seen_at).where(Heartbeat.name.in_((CONSUMED, POSITION)))
        ).all()
    )
    return QueueProgress(consumed_at=_aware(rows.get(CONSUMED)), position=_aware(rows.get(POSITION)))


def _stall() -> timedelta:
    return timedelta(seconds=get_settings().consumption_stall_seconds)


def reap(grace_seconds: float | None = None, limit: int = 500) -> list[str]:
    """Re-enqueue deliveries stored but not processed: broker was down, message lost, worker killed.

    Only what is not already waiting: a delivery still queued behind the ones workers are on is
    left alone (app/core/backlog.py), so a burst's backlog is not multiplied by every reaper run.
    """
    grace = timedelta(
        seconds=grace_seconds if grace_seconds is not None else get_settings().reaper_grace_seconds
    )
    t = now()
    with session_scope() as session:
        progress = queue_progress(session)
        cutoff = ring_cutoff(now=t, progress=progress, grace=grace, stall=_stall())
        waiting_lost: ColumnElement[bool] = Delivery.enqueued_at.is_(None)
        if cutoff is not None:
            waiting_lost = or_(waiting_lost, Delivery.enqueued_at <= cutoff)
        stale = or_(Delivery.enqueued_at.is_(None), Delivery.enqueued_at < t - grace)
        rows = (
            session.execute(
                select(Delivery.id)
                .where(
                    or_(
                        and_(
                            Delivery.status.in_((S.RECEIVED, S.QUEUED)),
                            Delivery.received_at < t - grace,
                            waiting_lost,
                        ),
                        and_(Delivery.status == S.RETRY, Delivery.next_attempt_at <= t, stale),
                        and_(Delivery.status == S.PROCESSING, Delivery.lease_until < t, stale),
                    )
                )
                .order_by(Delivery.received_at)
                .limit(limit)
            )
            .scalars()
            .all()
        )
        ids = list(rows)
        if ids:
            session.execute(
                update(Delivery)
                .where(Delivery.id.in_(ids))
                .values(enqueued_at=t)
                .execution_options(synchronize_session=False)
            )
    sent: list[str] = []
    for start in range(0, len(ids), REAP_CHUNK):
        chunk = ids[start : start + REAP_CHUNK]
        if queue.enqueue("sweepbot.process_deliveries", chunk, t.timestamp()):
            sent += chunk
    if ids:
        log.info(
            "reaper_requeued",
            count=len(sent),
            found=len(ids),
            cutoff=cutoff.isoformat() if cutoff else None,
            consumed_at=progress.consumed_at.isoformat() if progress.consumed_at else None,
        )
    return sent


def replay(session: Session, delivery_id: str, *, actor: str) -> Delivery:
    """Process a stored delivery again (operator action); handlers converge, so this is safe."""
    delivery = session.get(Delivery, delivery_id)
    if delivery is None:
        raise LookupError(f"no delivery with id {delivery_id!r}")
    if delivery.status == S.PROCESSING:
        raise ValueError(f"delivery {delivery_id} is being processed right now; replay it once it finishes")
    previous = {"status": delivery.status, "attempts": delivery.attempts, "error": delivery.error}
    delivery.status = S.RECEIVED
    delivery.attempts = 0  # a replay gets a fresh retry budget; the audit entry keeps the old count
    delivery.next_attempt_at = None
    delivery.error = None
    delivery.enqueued_at = now()
    record(
        session,
        actor=actor,
        action="delivery.replay",
        target=delivery_id,
        outcome="ok",
        detail={"event": delivery.event, "action": delivery.action, "previous": previous},
    )
    session.commit()
    queue.enqueue("sweepbot.process_delivery", delivery_id)
    return delivery


def beat(session: Session, name: str, kind: str) -> None:
    row = session.get(Heartbeat, name)
    if row is None:
        session.add(Heartbeat(name=name, kind=kind, seen_at=now()))
    else:
        row.seen_at = now()


CONSUMED = "deliveries:consumed"  # when a worker last started on deliveries
POSITION = "deliveries:position"  # the newest enqueue time among what workers started


def record_consumption(session: Session, delivery_ids: list[str], *, sent_at: float | None) -> None:
    """A worker starts on ``delivery_ids``: the heartbeat that measures consumption.

    ``sent_at`` is when the message was pushed onto the FIFO queue (the doorbell's and the
    reaper's batches carry it); a countdown retry or a replay fires out of order and moves no
    position. The enqueue times in the database are not used for this: the reaper rewrites them.
    """
    beat(session, f"worker@{worker_name()}", "worker")
    beat(session, CONSUMED, "consumption")
    if sent_at is None:
        return
    moved = queue_position(datetime.fromtimestamp(sent_at, UTC))
    row = session.get(Heartbeat, POSITION)
    if row is None:
        session.add(Heartbeat(name=POSITION, kind="position", seen_at=moved))
    elif (_aware(row.seen_at) or moved) < moved:
        row.seen_at = moved


def oldest_waiting(session: Session) -> datetime | None:
    """Since when the longest-waiting delivery has been ready to run (received, or its retry due)."""
    t = now()
    received = session.scalar(
        select(func.min(Delivery.received_at)).where(Delivery.status.in_((S.RECEIVED, S.QUEUED)))
    )
    due = session.scalar(
        select(func.min(Delivery.next_attempt_at)).where(
            Delivery.status == S.RETRY, Delivery.next_attempt_at <= t
        )
    )
    times = [x for x in (_aware(received), _aware(due)) if x is not None]
    return min(times) if times else None


def oldest_unprocessed(session: Session) -> datetime | None:
    """When the oldest delivery not yet done, ignored or failed was stored."""
    return _aware(
        session.scalar(select(func.min(Delivery.received_at)).where(Delivery.status.notin_(S.FINAL)))
    )


def consumption_health(session: Session) -> dict[str, Any]:
    """Ready unless deliveries wait while no worker consumes (``/readyz``, the dashboard)."""
    t = now()
    progress = queue_progress(session)
    waiting = oldest_waiting(session)
    verdict = readiness(waiting, now=t, progress=progress, stall=_stall())
    return {
        "ok": verdict.yes,
        "reason": verdict.reason,
        "last_consumed_at": progress.consumed_at.isoformat() if progress.consumed_at else None,
        "oldest_waiting_seconds": round((t - waiting).total_seconds(), 1) if waiting else 0.0,
    }


def queue_depth(session: Session) -> dict[str, int]:
    rows = session.execute(
        select(Delivery.status, func.count()).where(Delivery.status.notin_(S.FINAL)).group_by(Delivery.status)
    ).all()
    return {status: int(count) for status, count in rows}


def health(settings: Any) -> dict[str, Any]:
    """Database, broker, workers and beat: what /readyz and the dashboard show."""
    out: dict[str, Any] = {}
    try:
        with session_scope() as session:
            session.execute(select(1))
            beats = session.execute(select(Heartbeat)).scalars().all()
            out["database"] = {"ok": True}
            horizon = now() - timedelta(seconds=max(60.0, 4 * settings.reaper_interval))
            workers = [b for b in beats if b.kind == "worker"]
            beat_rows = [b for b in beats if b.kind == "beat"]
            out["workers"] = {
                "ok": any((_aware(b.seen_at) or horizon) > horizon for b in workers),
                "seen": {b.name: _aware(b.seen_at).isoformat() for b in workers},  # type: ignore[union-attr]
            }
            out["beat"] = {
                "ok": any((_aware(b.seen_at) or horizon) > horizon for b in beat_rows),
                "seen": {b.name: _aware(b.seen_at).isoformat() for b in beat_rows},  # type: ignore[union-attr]
            }
            out["queue"] = queue_depth(session)
            out["consumption"] = consumption_health(session)
    except Exception as exc:
        out["database"] = {"ok": False, "error": f"{exc.__class__.__name__}: {exc}"}
    out["broker"] = broker.broker_health()
    return out
