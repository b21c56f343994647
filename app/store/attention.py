"""What is wrong that only a person can fix, read for the overview's "Needs a human" and /metrics.

One query per problem, so the dashboard lists them and ``/metrics`` counts the same rows:

- ``pinned_deleted``: a live watch whose pinned image tag vanished from the registry;
- ``registry_unreachable``: a live watch whose image's tag listing failed (the tags known so far
  stand in, so "no nightly contains it yet" may be wrong: ``watches.registry_error``);
- ``dependency_missing``: a dependency GitHub answers 404 for (it can never merge);
- ``cannot_prioritise``: a queued job the runner controller cannot prioritise (no usable
  ``ci-job-`` label: "re-dispatch it"), from the controller's last plan (``runner_controller``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.models.runnerctl import RunnerController
from app.models.tracking import Dependency, DepState, Watch, WatchState

KINDS = ("pinned_deleted", "registry_unreachable", "dependency_missing", "cannot_prioritise")
_OVER = (WatchState.CLOSED, WatchState.DONE)  # a finished watch needs nobody


def _flagged(session: Session, since: Any, limit: int) -> list[Watch]:
    """Live watches whose ``since`` column is set, newest first."""
    query = select(Watch).where(since.is_not(None), Watch.state.not_in(_OVER))
    return list(session.scalars(query.order_by(since.desc()).limit(limit)))


def pinned_deleted(session: Session, limit: int) -> list[Watch]:
    return _flagged(session, Watch.pinned_missing_since, limit)


def registry_unreachable(session: Session, limit: int) -> list[Watch]:
    return _flagged(session, Watch.registry_error_since, limit)


def _missing_query() -> Any:
    return (
        select(Dependency, Watch)
        .join(Watch, Dependency.watch_id == Watch.id)
        .where(Dependency.state == DepState.MISSING, Dependency.dropped.is_(False), Watch.state.not_in(_OVER))
    )


def missing_dependencies(session: Session, limit: int) -> list[tuple[Dependency, Watch]]:
    rows = session.execute(_missing_query().order_by(Dependency.updated_at.desc()).limit(limit))
    return [(d, w) for d, w in rows.tuples()]


def unprioritisable(session: Session, limit: int) -> list[tuple[RunnerController, dict[str, Any]]]:
    """The last plan's notices of every controlled repository (each ``{job, run, text, why}``)."""
    out: list[tuple[RunnerController, dict[str, Any]]] = []
    for row in session.scalars(select(RunnerController).order_by(RunnerController.updated_at.desc())):
        notices = (row.view or {}).get("notices") or []
        out += [(row, n) for n in notices if isinstance(n, dict)] if isinstance(notices, list) else []
    return out[:limit]


def attention_counts(session: Session) -> dict[str, int]:
    """How many of each problem there are now (every kind present, zero included)."""

    def count(query: Any) -> int:
        return int(session.scalar(select(func.count()).select_from(query.subquery())) or 0)

    live = Watch.state.not_in(_OVER)
    return {
        "pinned_deleted": count(select(Watch.id).where(Watch.pinned_missing_since.is_not(None), live)),
        "registry_unreachable": count(select(Watch.id).where(Watch.registry_error_since.is_not(None), live)),
        "dependency_missing": count(_missing_query().with_only_columns(Dependency.id)),
        "cannot_prioritise": len(unprioritisable(session, limit=100_000)),
    }
