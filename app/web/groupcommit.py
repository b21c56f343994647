"""Group commit for webhook ingest: requests arriving together share one database transaction.

Each request still waits until its own delivery is durably committed before it is answered
(nothing is acknowledged that a crash could lose); under load, many requests ride the same
commit, so the per-request cost of the WAL flush shrinks instead of capping throughput.
At low load a batch is one request and the latency is one commit.

On PostgreSQL the writer is one asynchronous psycopg connection per event loop and the batch is
one prepared statement (``INSERT ... SELECT FROM unnest(arrays)``, the bodies sent as binary):
no thread hop, no ORM, no per-row parameter processing. The connection is in autocommit, so
the statement is its own transaction: when ``execute`` returns, the rows are committed. Other
databases (the embedded SQLite) use ``app.flows.ingest.store_batch`` in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from sqlalchemy.engine import make_url
from starlette.concurrency import run_in_threadpool

from app.core.delivery import IncomingDelivery
from app.flows.ingest import Stored, now, store_batch, stored_outcomes
from app.models.core import DeliveryStatus as S
from app.settings import get_settings

MAX_BATCH = 200
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


Writer = Callable[[list[IncomingDelivery]], Awaitable[list[Stored]]]


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
        except psycopg.Error:
            await self.close()  # a connection that failed once is not trusted again
            raise
        return stored_outcomes(items, created)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            with contextlib.suppress(psycopg.Error):  # closing a broken one: nothing left to release
                await conn.close()


def writer_for(database_url: str) -> tuple[Writer, Callable[[], Awaitable[None]] | None]:
    """The batch writer for this database, and what closes it (None when nothing needs closing)."""
    url = make_url(database_url)
    if url.get_backend_name() in ("postgresql", "postgres"):
        pg = PostgresBatchInsert(url.set(drivername="postgresql").render_as_string(hide_password=False))
        return pg, pg.close
    return _in_thread(store_batch), None


def _in_thread(store: Callable[[list[IncomingDelivery]], list[Stored]]) -> Writer:
    async def write(items: list[IncomingDelivery]) -> list[Stored]:
        return await run_in_threadpool(store, items)

    return write


@dataclass
class _Pending:
    item: IncomingDelivery
    done: asyncio.Future[Stored]


@dataclass
class GroupCommit:
    # Told the ids of each commit that are new and need a worker (the doorbell), before anyone
    # is answered: one broker message per commit instead of one per request.
    on_stored: Callable[[list[str]], None] | None = None
    # A synchronous store to use instead of the database URL's writer (tests inject one).
    store: Callable[[list[IncomingDelivery]], list[Stored]] | None = None
    max_batch: int = MAX_BATCH
    _queue: asyncio.Queue[_Pending] | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _task: asyncio.Task[None] | None = None

    async def submit(self, item: IncomingDelivery) -> Stored:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._task is None or self._task.done():
            # One writer per event loop (a test client starts a loop of its own).
            self._loop, self._queue = loop, asyncio.Queue()
            self._task = loop.create_task(self._run())
        assert self._queue is not None
        pending = _Pending(item, loop.create_future())
        self._queue.put_nowait(pending)
        return await pending.done

    async def _run(self) -> None:
        assert self._queue is not None
        queue = self._queue
        if self.store is not None:
            write, close = _in_thread(self.store), None
        else:
            write, close = writer_for(get_settings().database_url)
        try:
            while True:
                batch = [await queue.get()]
                while len(batch) < self.max_batch and not queue.empty():
                    batch.append(queue.get_nowait())
                await _write(write, batch, self.on_stored)
        finally:
            if close is not None:
                await close()


async def _write(write: Writer, batch: list[_Pending], on_stored: Callable[[list[str]], None] | None) -> None:
    try:
        results = await write([p.item for p in batch])
    except Exception as exc:  # the database is down: every request of the batch gets the error
        for p in batch:
            if not p.done.done():
                p.done.set_exception(exc)
        return
    if on_stored is not None:
        on_stored([p.item.id for p, result in zip(batch, results, strict=True) if result.enqueue])
    for p, result in zip(batch, results, strict=True):
        if not p.done.done():
            p.done.set_result(result)
