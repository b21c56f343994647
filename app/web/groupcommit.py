"""Group commit for webhook ingest: requests arriving together share one database transaction.

Each request still waits until its own delivery is durably committed before it is answered
(nothing is acknowledged that a crash could lose); under load, many requests ride the same
commit, so the per-request cost of the WAL flush shrinks instead of capping throughput.
At low load a batch is one request and the latency is one commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.concurrency import run_in_threadpool

from app.core.delivery import IncomingDelivery
from app.flows.ingest import Stored, store_batch

MAX_BATCH = 200


@dataclass
class _Pending:
    item: IncomingDelivery
    done: asyncio.Future[Stored]


@dataclass
class GroupCommit:
    store: Callable[[list[IncomingDelivery]], list[Stored]] = store_batch
    max_batch: int = MAX_BATCH
    _queue: asyncio.Queue[_Pending] | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _task: asyncio.Task[None] | None = None
    _background: set[asyncio.Task[None]] = field(default_factory=set)

    async def submit(self, item: IncomingDelivery) -> Stored:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._task is None or self._task.done():
            # One writer per event loop (a test client starts a loop of its own).
            self._loop, self._queue = loop, asyncio.Queue()
            self._task = loop.create_task(self._run())
        assert self._queue is not None
        pending = _Pending(item, loop.create_future())
        await self._queue.put(pending)
        return await pending.done

    async def _run(self) -> None:
        assert self._queue is not None
        queue = self._queue
        while True:
            batch = [await queue.get()]
            while len(batch) < self.max_batch and not queue.empty():
                batch.append(queue.get_nowait())
            try:
                results = await run_in_threadpool(self.store, [p.item for p in batch])
            except Exception as exc:  # the database is down: every request of the batch gets the error
                for p in batch:
                    if not p.done.done():
                        p.done.set_exception(exc)
                continue
            for p, result in zip(batch, results, strict=True):
                if not p.done.done():
                    p.done.set_result(result)


group_commit = GroupCommit()
