"""The group commit's writer on PostgreSQL: a batch of deliveries as one prepared statement.

``INSERT ... SELECT FROM unnest(arrays)`` on one asynchronous psycopg connection in autocommit
(the statement is its own transaction: when ``execute`` returns, the rows are committed), the
bodies sent as binary. Its own module so that psycopg (~20 MB resident) is imported only by an
API whose database is PostgreSQL (``app.web.groupcommit.writer_for``), not by the embedded one.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Any

import psycopg

from app.core.delivery import IncomingDelivery
from app.flows.ingest.deliveries import RowsRefused, Stored, StoreUnavailable, now, stored_outcomes
from app.models.core import DeliveryStatus as S

CONNECT_TIMEOUT = 10  # seconds: a database host that does not answer is an outage (503), not a hang

# The row ``delivery_rows`` describes, written by PostgreSQL from five arrays and one timestamp:
# status, attempts, the size and the times follow from the event and the commit time, so they
# are not sent as arrays of their own (psycopg dumps each array element in Python).
COLUMNS: dict[str, str] = {
    "id": "u.id",
    "event": "u.event",
    "action": "u.action",
    "repo": "u.repo",
    "status": f"CASE WHEN u.event = 'ping' THEN '{S.DONE}' ELSE '{S.RECEIVED}' END",
    "attempts": "0",
    "body": "u.body",
    "body_bytes": "octet_length(u.body)",
    "received_at": "%(t)s::timestamptz",
    "enqueued_at": "CASE WHEN u.event = 'ping' THEN NULL ELSE %(t)s::timestamptz END",
    "finished_at": "CASE WHEN u.event = 'ping' THEN %(t)s::timestamptz END",
}
INSERT = (
    f"INSERT INTO deliveries ({', '.join(COLUMNS)}) SELECT {', '.join(COLUMNS.values())} FROM unnest("
    "%(id)s::text[], %(event)s::text[], %(action)s::text[], %(repo)s::text[], %(body)b::bytea[]"
    ") AS u(id, event, action, repo, body) ON CONFLICT (id) DO NOTHING RETURNING id"
)


def batch_params(items: list[IncomingDelivery], t: datetime) -> dict[str, Any]:
    """The arrays of ``INSERT`` for a batch received at ``t`` (an id repeated in the batch once)."""
    ids: list[str] = []
    events: list[str] = []
    actions: list[str | None] = []
    repos: list[str | None] = []
    bodies: list[bytes] = []
    seen: set[str] = set()
    for item in items:
        if item.id not in seen:
            seen.add(item.id)
            ids.append(item.id)
            events.append(item.event)
            actions.append(item.action)
            repos.append(item.repo)
            bodies.append(item.payload)
    return {"id": ids, "event": events, "action": actions, "repo": repos, "body": bodies, "t": t}


class PostgresBatchInsert:
    """The batch as one prepared statement on a connection of its own (reopened after an error)."""

    def __init__(self, conninfo: str) -> None:
        self._conninfo = conninfo
        self._conn: psycopg.AsyncConnection[Any] | None = None

    async def __call__(self, items: list[IncomingDelivery]) -> list[Stored]:
        params = batch_params(items, now())
        try:
            if self._conn is None or self._conn.closed:
                self._conn = await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT
                )
            cursor = await self._conn.execute(INSERT, params, prepare=True)
            created = {row[0] for row in await cursor.fetchall()}
        except psycopg.DataError as exc:
            # A value no column takes (refused by psycopg or the server): in autocommit the failed
            # statement left nothing behind and the connection is fine.
            raise RowsRefused(str(exc)) from exc
        except psycopg.Error as exc:
            await self.close()  # a connection that failed once is not trusted again
            raise StoreUnavailable(f"{exc.__class__.__name__}: {exc}") from exc
        return stored_outcomes(items, created)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            with contextlib.suppress(psycopg.Error):  # closing a broken one: nothing left to release
                await conn.close()
