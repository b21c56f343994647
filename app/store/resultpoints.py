"""Keeping ``result_points`` (the results pages' index) current: every result inserted through the
ORM adds itself to its point's row in the same transaction (an upsert, so two workers storing runs
of one point at once both count). ``rebuild`` recomputes the whole index from ``results`` (after a
bulk load that bypassed the ORM, e.g. bench/dashboard.py's COPY)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, event, func, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Mapper, Session

from app.models.results import NO_SHAPE, Result, ResultPoint

POINT = ("config_key", "image", "isl", "osl", "tp", "conc")


def _shape(value: int | None) -> int:
    return NO_SHAPE if value is None else int(value)


def shape_of(value: int) -> int | None:
    """A ``result_points`` isl/osl back as a result's (None: no sequence lengths)."""
    return None if value == NO_SHAPE else value


def add_result(conn: Connection, row: Result) -> None:
    """Count ``row`` into its point's index row (created on its first result)."""
    # Not the attribute: a server default not fetched yet would be loaded mid-flush.
    at = row.__dict__.get("created_at") or datetime.now(UTC)
    values: dict[str, Any] = {
        "config_key": row.config_key,
        "image": row.image,
        "isl": _shape(row.isl),
        "osl": _shape(row.osl),
        "tp": row.tp,
        "conc": row.conc,
        "latest_id": row.id,
        "first_id": row.id,
        "runs": 1,
        "tpot_sum": row.mean_tpot_ms or 0.0,
        "tpot_n": 0 if row.mean_tpot_ms is None else 1,
        "first_at": at,
        "last_at": at,
    }
    pg = conn.dialect.name == "postgresql"
    stmt = (postgresql if pg else sqlite).insert(ResultPoint).values(**values)
    new, table = stmt.excluded, ResultPoint.__table__.c
    # Two-argument MAX/MIN are SQLite's scalar functions; PostgreSQL spells them GREATEST/LEAST.
    higher, lower = (func.greatest, func.least) if pg else (func.max, func.min)
    conn.execute(
        stmt.on_conflict_do_update(
            index_elements=list(POINT),
            set_={
                "latest_id": higher(table.latest_id, new.latest_id),
                "first_id": lower(table.first_id, new.first_id),
                "runs": table.runs + 1,
                "tpot_sum": table.tpot_sum + new.tpot_sum,
                "tpot_n": table.tpot_n + new.tpot_n,
                "first_at": lower(table.first_at, new.first_at),
                "last_at": higher(table.last_at, new.last_at),
            },
        )
    )


@event.listens_for(Result, "after_insert")
def _indexed(_mapper: Mapper[Result], conn: Connection, row: Result) -> None:
    add_result(conn, row)


def rebuild(session: Session) -> int:
    """Recompute the whole index from ``results``; how many points it has."""
    isl, osl = func.coalesce(Result.isl, NO_SHAPE), func.coalesce(Result.osl, NO_SHAPE)
    session.execute(delete(ResultPoint))
    grouped = select(
        Result.config_key,
        Result.image,
        isl,
        osl,
        Result.tp,
        Result.conc,
        func.max(Result.id),
        func.min(Result.id),
        func.count(),
        func.coalesce(func.sum(Result.mean_tpot_ms), 0.0),
        func.count(Result.mean_tpot_ms),
        func.min(Result.created_at),
        func.max(Result.created_at),
    ).group_by(Result.config_key, Result.image, isl, osl, Result.tp, Result.conc)
    columns = [*POINT, "latest_id", "first_id", "runs", "tpot_sum", "tpot_n", "first_at", "last_at"]
    session.execute(insert(ResultPoint).from_select(columns, grouped))
    return int(session.scalar(select(func.count()).select_from(ResultPoint)) or 0)
