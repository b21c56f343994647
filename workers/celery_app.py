"""The Celery application, its configuration and the beat schedule.

The database is the source of truth and the broker only a doorbell: tasks take ids, load state,
and are safe to run twice (late acks + reject on worker loss, so a killed worker's task is
redelivered; the reaper re-enqueues anything the broker lost).
"""

from __future__ import annotations

from datetime import timedelta

from celery import Celery

from app.settings import get_settings

TASK_MODULES = [
    "workers.tasks_ingest",
    "workers.tasks_tracking",
    "workers.tasks_sweeps",
    "workers.tasks_results",
]


def make_celery() -> Celery:
    settings = get_settings()
    app = Celery("sweepbot", broker=settings.broker_url, include=TASK_MODULES)
    transport_options: dict[str, object]
    if settings.broker_url.startswith("sqla+"):
        # kombu hands these to SQLAlchemy's create_engine: wait on a locked SQLite file, don't fail.
        transport_options = {"connect_args": {"timeout": 30}}
    else:
        transport_options = {
            "visibility_timeout": 3600,
            "socket_connect_timeout": 2,
            "socket_timeout": 5,
            "retry_on_timeout": True,
        }
    app.conf.update(
        task_default_queue=settings.queue_name,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        broker_transport_options=transport_options,
        broker_connection_retry_on_startup=True,
        broker_connection_timeout=2,
        task_publish_retry=True,
        task_publish_retry_policy={
            "max_retries": 2,
            "interval_start": 0,
            "interval_step": 0.2,
            "interval_max": 0.5,
        },
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        timezone="UTC",
        beat_schedule={
            "reap-deliveries": {
                "task": "sweepbot.reap_deliveries",
                "schedule": timedelta(seconds=settings.reaper_interval),
            },
            "heartbeat-beat": {
                "task": "sweepbot.beat_heartbeat",
                "schedule": timedelta(seconds=min(15.0, settings.reaper_interval)),
            },
            "poll-watches": {
                "task": "sweepbot.poll_watches",
                "schedule": timedelta(seconds=settings.poll_interval),
            },
            "scheduler-tick": {
                "task": "sweepbot.scheduler_tick",
                "schedule": timedelta(seconds=settings.scheduler_interval),
            },
            "repair-jobs": {
                "task": "sweepbot.repair_jobs",
                "schedule": timedelta(seconds=settings.job_repair_interval),
            },
            "watch-nightlies": {
                "task": "sweepbot.watch_nightlies",
                "schedule": timedelta(seconds=settings.nightly_watch_interval),
            },
            "flush-reports": {
                "task": "sweepbot.flush_reports",
                "schedule": timedelta(seconds=settings.report_debounce_seconds),
            },
        },
    )
    return app


celery_app = make_celery()


def current_celery() -> Celery:
    """The Celery app for the settings in force now (producers: the API, the CLI, tests).

    Settings are read once per process in production, so this is ``celery_app``; when they
    change (tests), a fresh app is built instead of sending to a stale broker.
    """
    global celery_app
    settings = get_settings()
    if (
        celery_app.conf.broker_url != settings.broker_url
        or celery_app.conf.task_default_queue != settings.queue_name
    ):
        celery_app = make_celery()
    return celery_app
