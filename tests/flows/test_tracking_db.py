"""Tracking tables: the migration matches the models; handlers and tasks are registered."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from app.db import engine_for
from app.models import Base

TRACKING_TABLES = {
    "watches",
    "watch_dependencies",
    "image_tags",
    "compare_cache",
    "bumps",
    "status_comments",
    "bot_configs",
}


def test_migration_0002_matches_the_tracking_models(sqlite_url: str) -> None:
    with engine_for(sqlite_url).connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(ctx, Base.metadata)
    ours = [d for d in diff if any(t in repr(d) for t in TRACKING_TABLES)]
    assert ours == []
    assert set(Base.metadata.tables) >= TRACKING_TABLES


def test_handlers_and_tasks_are_registered() -> None:
    import app.flows.tracking.watches as tracking
    from app.flows.ingest.handlers import composed

    router = composed()

    for action in ("opened", "edited", "synchronize", "reopened", "closed"):
        assert tracking.on_pull_request in router.handlers_for("pull_request", action)
    assert tracking.on_push in router.handlers_for("push", None)
    import workers.tasks_tracking  # noqa: F401
    from workers.celery_app import celery_app

    assert {"sweepbot.poll_watches", "sweepbot.check_watch"} <= set(celery_app.tasks)
