"""The cap on concurrent GitHub requests per credential: shared through Redis when Redis is the
broker (several worker processes, several machines), per process on the embedded broker.

Against the real Redis (a database index of its own): processes that each hold their own
``RedisSlots`` never have more than the limit in flight together; a process killed while holding
a slot frees it when the lease runs out; no Redis means the per-process cap, not no cap.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from typing import Any

import pytest
import redis

from app.adapters.ghslots import LocalSlots, RedisSlots, SlotTimeout, lease_seconds, make_slots
from app.adapters.github.credentials import FixedCredentials
from app.adapters.github.gateway import GitHubGateway
from app.core.routing import TransientError
from app.settings import Settings

pytestmark = pytest.mark.services

COUNTER = "test:github-slots:in-flight"
PEAKS = "test:github-slots:peaks"


def _worker(url: str, threads: int, calls: int) -> None:
    """One process: its own client and slots, ``threads`` threads making ``calls`` requests each."""
    slots = make_slots(
        Settings(broker_url=url, github_max_concurrency_per_installation=2, github_api_url="http://gh"),
        "token:shared",
    )
    assert isinstance(slots, RedisSlots)
    client = redis.Redis.from_url(url)

    def run() -> None:
        for _ in range(calls):
            with slots("inst:1"):
                client.rpush(PEAKS, client.incr(COUNTER))
                time.sleep(0.02)
                client.decr(COUNTER)

    pool = [threading.Thread(target=run) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=60)


def test_processes_sharing_redis_never_exceed_the_cap_together(redis_url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(redis_url, 3, 4)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    client = redis.Redis.from_url(redis_url)
    peaks = [int(v) for v in client.lrange(PEAKS, 0, -1)]
    assert len(peaks) == 3 * 3 * 4  # every request ran
    assert max(peaks) == 2  # never more than the cap in flight across the three processes, and it was used
    assert int(client.get(COUNTER) or 0) == 0
    assert client.keys("sweepbot:github-slots:*") == [] or all(  # every slot given back
        client.zcard(k) == 0 for k in client.keys("sweepbot:github-slots:*")
    )


def _hold_forever(url: str, ready: Any) -> None:
    slots = RedisSlots(redis.Redis.from_url(url), 1, scope="dead", lease_seconds=1.0)
    with slots("inst:7"):
        ready.set()
        time.sleep(60)


def test_a_process_killed_holding_a_slot_frees_it_when_its_lease_ends(redis_url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold_forever, args=(redis_url, ready))
    holder.start()
    try:
        assert ready.wait(30)
        os.kill(holder.pid or 0, signal.SIGKILL)
        holder.join(timeout=10)
        impatient = RedisSlots(
            redis.Redis.from_url(redis_url), 1, scope="dead", lease_seconds=1.0, max_wait_seconds=0.1
        )
        with pytest.raises(SlotTimeout), impatient("inst:7"):
            pass  # the dead process's lease still holds the only slot
        patient = RedisSlots(
            redis.Redis.from_url(redis_url), 1, scope="dead", lease_seconds=1.0, max_wait_seconds=5.0
        )
        started = time.monotonic()
        with patient("inst:7"):
            waited = time.monotonic() - started
        assert waited < 2.0  # freed by the lease (1 s), not held forever
    finally:
        if holder.is_alive():
            holder.kill()
            holder.join(timeout=10)


def test_a_slot_that_never_comes_free_is_a_transient_error_of_the_call(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    slots = RedisSlots(client, 1, scope="busy", lease_seconds=30.0, max_wait_seconds=0.1)
    client.zadd(slots.redis_key("token"), {"someone-else": time.time() * 1000 + 60_000})

    class NoRequester:
        def requestJson(self, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 (PyGithub's name)
            raise AssertionError("no request may go out without a slot")

    gw = GitHubGateway(FixedCredentials(NoRequester(), slots))
    with pytest.raises(TransientError, match="no GitHub request slot"):
        gw.get_repo("o/r")


def test_without_redis_the_cap_is_the_process_s_own() -> None:
    assert isinstance(make_slots(Settings(broker_url="sqla+sqlite:////tmp/b.sqlite3"), "x"), LocalSlots)
    # Redis as the broker but unreachable: the call still goes out, under the process's cap.
    down = RedisSlots(
        redis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2),
        1,
        scope="down",
        lease_seconds=5.0,
    )
    with down("inst:1"):
        assert down.peak == {"inst:1": 1}
    assert lease_seconds(Settings(github_timeout_seconds=15, github_max_retries=2)) == 55.0
