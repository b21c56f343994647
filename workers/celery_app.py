"""The worker's Celery application: the one app/adapters/broker.py configures (tasks register on it
in ``workers/tasks_*.py``), with the API's JSON logging.
"""

from __future__ import annotations

from celery.signals import setup_logging

from app.adapters.broker import PERIODIC_TASKS, TASK_MODULES, current_celery, make_celery, periodic_queue
from app.logging import configure
from app.settings import get_settings

__all__ = ["PERIODIC_TASKS", "TASK_MODULES", "celery_app", "current_celery", "make_celery", "periodic_queue"]

celery_app = current_celery()


@setup_logging.connect
def _json_logs(**_: object) -> None:
    """Worker and beat log the API's JSON events (connecting this stops Celery's own setup)."""
    settings = get_settings()
    configure(settings.log_level, settings.log_json)
