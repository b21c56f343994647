"""Group commit for webhook ingest: requests arriving together share one database transaction.

Each request still waits until its own delivery is durably committed before it is answered
(nothing is acknowledged that a crash could lose); under load, many requests ride the same
commit, so the per-request cost of the WAL flush shrinks instead of capping throughput.
At low load a batch is one request and the latency is one commit.

On PostgreSQL the writer is one asynchronous psycopg connection per event loop and the batch is
one prepared statement (``app.web.pgbatch``): no thread hop, no ORM, no per-row parameter
processing. Other
databases (the embedded SQLite) use ``app.flows.ingest.deliveries.store_batch`` in a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sqlalchemy.engine import make_url
from starlette.concurrency import run_in_threadpool

from app.core.delivery import IncomingDelivery
from app.flows.ingest.deliveries import RowsRefused, Stored, store_batch
from app.settings import get_settings

MAX_BATCH = 200

Writer = Callable[[list[IncomingDelivery]], Awaitable[list[Stored]]]


def writer_for(database_url: str) -> tuple[Writer, Callable[[], Awaitable[None]] | None]:
    """The batch writer for this database, and what closes it (None when nothing needs closing)."""
    url = make_url(database_url)
    if url.get_backend_name() in ("postgresql", "postgres"):
        from app.web.pgbatch import PostgresBatchInsert  # lazy: psycopg only for a PostgreSQL database

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
    except RowsRefused as exc:
        # Some row holds what the database cannot store (the edge's checks missed it): the halves
        # are written again, until the refused rows stand alone and only their senders get the
        # error. k such rows cost about 2k·log2(batch) statements; the others are stored.
        if len(batch) == 1:
            _fail(batch, exc)
            return
        half = len(batch) // 2
        await _write(write, batch[:half], on_stored)
        await _write(write, batch[half:], on_stored)
        return
    except Exception as exc:  # the database is down: every request of the batch gets the error
        _fail(batch, exc)
        return
    if on_stored is not None:
        on_stored([p.item.id for p, result in zip(batch, results, strict=True) if result.enqueue])
    for p, result in zip(batch, results, strict=True):
        if not p.done.done():
            p.done.set_result(result)


def _fail(batch: list[_Pending], exc: Exception) -> None:
    for p in batch:
        if not p.done.done():
            p.done.set_exception(exc)
