"""The broker: the Celery application (configuration and beat schedule), sending a task by name,
and the broker's health.

The database is the source of truth and the broker only a doorbell: tasks take ids, load state,
and are safe to run twice (late acks + reject on worker loss, so a killed worker's task is
redelivered; the reaper re-enqueues anything the broker lost). The task functions live in
``workers/`` (named below for Celery to import in a worker); producers only send by name.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import structlog
from celery import Celery
from kombu.transport import sqlalchemy as kombu_sqla
from sqlalchemy import column, create_engine, delete, false, table
from sqlalchemy.engine import Engine

from app.settings import get_settings

log = structlog.get_logger(__name__)

TASK_MODULES = [
    "workers.tasks_ingest",
    "workers.tasks_tracking",
    "workers.tasks_sweeps",
    "workers.tasks_results",
    "workers.tasks_operator",
    "workers.tasks_retention",
]


# Beat's periodic work; routed to ``periodic_queue`` (also when the API or a task rings one early).
PERIODIC_TASKS = (
    "sweepbot.reap_deliveries",
    "sweepbot.beat_heartbeat",
    "sweepbot.poll_watches",
    "sweepbot.scheduler_tick",
    "sweepbot.repair_jobs",
    "sweepbot.flush_reports",
    "sweepbot.watch_nightlies",
    "sweepbot.recover_deliveries",
    "sweepbot.purge_broker",
    "sweepbot.prune_history",
)
# How often the embedded broker's consumed messages are deleted (``purge_consumed``).
PURGE_INTERVAL = 60.0


# Seconds between the embedded broker's polls of an empty queue (Redis pushes; SQLite is polled).
EMBEDDED_POLL_SECONDS = 0.1


def periodic_queue(queue_name: str) -> str:
    return f"{queue_name}.periodic"


def declare_embedded_queues() -> list[str]:
    """Create the embedded broker's queues (rows of ``kombu_queue``) once, before any process
    uses them. kombu creates a queue on first use behind a lock of its process only, so an API and
    a worker starting at once both inserted it and one failed (``UNIQUE constraint failed:
    kombu_queue.name``: the worker was lost in 1 of 7 starts). ``db upgrade`` calls this; with Redis
    there is nothing to create. The names declared."""
    settings = get_settings()
    if not settings.broker_url.startswith("sqla+"):
        return []
    names = [settings.queue_name, periodic_queue(settings.queue_name)]
    with current_celery().connection_for_write() as conn:
        for name in names:
            conn.default_channel.queue_declare(queue=name)
    return names


def make_celery() -> Celery:
    settings = get_settings()
    app = Celery("sweepbot", broker=settings.broker_url, include=TASK_MODULES)
    transport_options: dict[str, object]
    if settings.broker_url.startswith("sqla+"):
        # kombu hands these to SQLAlchemy's create_engine: wait on a locked SQLite file, don't fail.
        transport_options = {"connect_args": {"timeout": 30}}
        # ... so the poll interval cannot go there (create_engine refuses unknown arguments): it is
        # the transport's own attribute, 1 s by default, and a worker watching two queues took
        # 2.0-2.8 s (median) to pick a delivery up. Polling an indexed SQLite table is cheap.
        kombu_sqla.Transport.polling_interval = EMBEDDED_POLL_SECONDS
    else:
        transport_options = {
            "visibility_timeout": 3600,
            "socket_connect_timeout": 2,
            "socket_timeout": 5,
            "socket_keepalive": True,
            "health_check_interval": 10,  # notice a restarted Redis on an idle connection too
            "retry_on_timeout": True,
        }
    periodic = periodic_queue(settings.queue_name)

    def every(seconds: float, task: str) -> dict[str, object]:
        # On their own queue, so a backlog of deliveries never delays (or is crowded by) them; a
        # tick that waited longer than its period is dropped, the next one does the same work.
        return {
            "task": task,
            "schedule": timedelta(seconds=seconds),
            "options": {"queue": periodic, "expires": max(seconds, 5.0)},
        }

    app.conf.update(
        task_default_queue=settings.queue_name,
        task_routes={name: {"queue": periodic} for name in PERIODIC_TASKS},
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        broker_transport_options=transport_options,
        # Ride out a broker restart of any length: reconnect forever (None; 0 would mean never),
        # with kombu's growing interval, and log each attempt (app/logging.py makes it an event).
        broker_connection_retry=True,
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        broker_connection_timeout=2,
        # With late acks, a task running when the connection drops is redelivered after the
        # reconnect; cancelling it then avoids two copies running at once (Celery 6's default).
        worker_cancel_long_running_tasks_on_connection_loss=True,
        task_publish_retry=True,
        task_publish_retry_policy={
            "max_retries": 2,
            "interval_start": 0,
            "interval_step": 0.2,
            "interval_max": 0.5,
        },
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
        worker_send_task_events=False,
        timezone="UTC",
        beat_schedule={
            "reap-deliveries": every(settings.reaper_interval, "sweepbot.reap_deliveries"),
            "heartbeat-beat": every(min(15.0, settings.reaper_interval), "sweepbot.beat_heartbeat"),
            "recover-deliveries": every(settings.redelivery_interval, "sweepbot.recover_deliveries"),
            "poll-watches": every(settings.poll_interval, "sweepbot.poll_watches"),
            "scheduler-tick": every(settings.scheduler_interval, "sweepbot.scheduler_tick"),
            "repair-jobs": every(settings.job_repair_interval, "sweepbot.repair_jobs"),
            "watch-nightlies": every(settings.nightly_watch_interval, "sweepbot.watch_nightlies"),
            "flush-reports": every(settings.report_debounce_seconds, "sweepbot.flush_reports"),
            **(
                {"purge-broker": every(PURGE_INTERVAL, "sweepbot.purge_broker")}
                if is_sql_broker(settings.broker_url)
                else {}
            ),
            "prune-history": every(settings.retention_interval, "sweepbot.prune_history"),
        },
    )
    return app


_app: Celery | None = None


def current_celery() -> Celery:
    """The Celery app for the settings in force now (workers, the API, the CLI, tests).

    Settings are read once per process in production, so this is always the same app; when they
    change (tests), a fresh app is built instead of sending to a stale broker.
    """
    global _app
    settings = get_settings()
    if (
        _app is None
        or _app.conf.broker_url != settings.broker_url
        or _app.conf.task_default_queue != settings.queue_name
    ):
        _app = make_celery()
    return _app


def send_task(
    task_name: str, args: list[Any], countdown: float | None = None, argsrepr: str | None = None
) -> None:
    """Publish one task message by name (raises what kombu raises when the broker is unreachable).

    ``argsrepr`` is what the message's headers show of ``args`` (Celery writes ``repr(args)``
    otherwise, at a tenth of the publish's cost for a list of 100 delivery ids)."""
    options: dict[str, Any] = {} if argsrepr is None else {"argsrepr": argsrepr}
    current_celery().send_task(task_name, args=args, countdown=countdown, **options)


def broker_health() -> dict[str, Any]:
    """Can a connection to the broker be made now (``/readyz``, the dashboard)."""
    try:
        with current_celery().connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return {"ok": True}
    except Exception as exc:
        return {"ok": False, "error": f"{exc.__class__.__name__}: {exc}"}


# ---------------------------------------------------------------------- the embedded broker's table

SQL_SCHEMES = ("sqla+", "sqlalchemy+")
# kombu's SQLAlchemy transport, as make_celery configures it (no ``message_tablename`` option).
_MESSAGES = table("kombu_message", column("visible"))
_purge_engines: dict[str, Engine] = {}


def is_sql_broker(broker_url: str) -> bool:
    return broker_url.startswith(SQL_SCHEMES)


def purge_consumed(broker_url: str) -> int:
    """Delete the messages kombu's SQLAlchemy transport has handed to a consumer; how many.

    That transport takes a message by setting ``visible = false`` and never deletes the row (no
    transport option does), so its table grows by every message ever sent: ~3.8 rows a second on
    an idle embedded stack, from beat alone. An invisible row is never read again: a message a
    worker took and did not acknowledge is put back by kombu as a *new* row (``restore_unacked``),
    and one lost with a killed worker stays invisible forever (the reaper re-sends its
    deliveries from the database). A visible row is never touched.
    """
    if not is_sql_broker(broker_url):
        return 0
    url = broker_url.split("+", 1)[1]
    engine = _purge_engines.get(url)
    if engine is None:
        # A locked SQLite file is waited on, as the transport itself does (make_celery).
        args = {"timeout": 30} if url.startswith("sqlite") else {}
        engine = _purge_engines[url] = create_engine(url, connect_args=args)
    with engine.begin() as conn:
        deleted = conn.execute(delete(_MESSAGES).where(_MESSAGES.c.visible == false())).rowcount
    log.info("broker_purged", deleted=deleted)
    return int(deleted or 0)
