"""Celery tasks the dashboard queues (thin: they call app/): GitHub work an operator's request
must not wait for."""

from __future__ import annotations

from app.adapters.github.gateway import session_gateway
from app.db import session_scope
from app.flows.commands.github_status import refresh_rate_limit as refresh
from app.flows.commands.operator import stop_runs
from workers.celery_app import celery_app


@celery_app.task(name="sweepbot.cancel_runs")
def cancel_runs(repo: str, run_ids: list[int], actor: str) -> list[str]:
    """Cancel the runs of jobs an operator cancelled (each cancel audited as ``actor``)."""
    with session_scope() as session:
        return stop_runs(session_gateway(session, actor=actor), repo, [int(r) for r in run_ids], session)


@celery_app.task(name="sweepbot.refresh_rate_limit")
def refresh_rate_limit() -> None:
    """Fetch GitHub's ``/rate_limit`` into the shared cache the dashboard reads."""
    with session_scope() as session:
        refresh(session_gateway(session))
