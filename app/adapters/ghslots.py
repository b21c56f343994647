"""How many GitHub requests one credential has in flight: per process, or across every process.

GitHub's secondary rate limits punish concurrent requests by one installation (or token); the
cap keeps a burst (several workers and handlers, the dashboard) from tripping them. With the
embedded broker every process is on one machine and the cap is per process (``LocalSlots``).
With Redis as the broker, workers run on several machines and the cap is shared (``RedisSlots``):
a slot is a member of a sorted set per credential, scored by its lease's expiry in Redis's own
clock, taken and given back by one atomic script each. A process that dies holding a slot
cannot leak it: the lease runs out (at most one request's worst case: the timeout times the
attempts, plus a margin) and the next taker prunes it. When Redis cannot be reached the call
falls back to the process's own cap (logged), never to no cap and never to failing the call.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Protocol

import redis
import structlog

from app.settings import Settings

log = structlog.get_logger(__name__)

# Take a slot if fewer than ARGV[1] unexpired leases are held; the lease ends ARGV[2] ms from now.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], 2 * tonumber(ARGV[2]))
  return 1
end
return 0
"""


class SlotTimeout(Exception):
    """No slot came free in time: the caller retries the work later (a task retry)."""


class Slots(Protocol):
    peak: dict[str, int]

    def __call__(self, key: str) -> contextlib.AbstractContextManager[None]: ...


class LocalSlots:
    """At most ``limit`` requests in flight per credential key in this process."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._slots: dict[str, threading.BoundedSemaphore] = {}
        self._guard = threading.Lock()
        self.peak: dict[str, int] = {}
        self._active: dict[str, int] = {}

    @contextlib.contextmanager
    def __call__(self, key: str) -> Iterator[None]:
        with self._guard:
            sem = self._slots.setdefault(key, threading.BoundedSemaphore(self.limit))
        with sem:
            with self._guard:
                self._active[key] = self._active.get(key, 0) + 1
                self.peak[key] = max(self.peak.get(key, 0), self._active[key])
            try:
                yield
            finally:
                with self._guard:
                    self._active[key] -= 1


class RedisSlots:
    """At most ``limit`` requests in flight per credential key across every process sharing Redis."""

    def __init__(
        self,
        client: redis.Redis,
        limit: int,
        *,
        scope: str,
        lease_seconds: float,
        max_wait_seconds: float = 30.0,
    ) -> None:
        self.limit = max(1, limit)
        self._client = client
        self._scope = scope
        self._lease_ms = max(1000, int(lease_seconds * 1000))
        self._max_wait = max_wait_seconds
        self._acquire = client.register_script(_ACQUIRE)
        self._fallback = LocalSlots(limit)
        self.peak = self._fallback.peak  # this process's own peak (the shared one is Redis's to keep)

    def redis_key(self, key: str) -> str:
        return f"sweepbot:github-slots:{self._scope}:{key}"

    @contextlib.contextmanager
    def __call__(self, key: str) -> Iterator[None]:
        token = uuid.uuid4().hex
        name = self.redis_key(key)
        try:
            self._take(name, token)
        except redis.RedisError as exc:
            log.warning("github_slots_unshared", key=key, error=f"{exc.__class__.__name__}: {exc}")
            with self._fallback(key):
                yield
            return
        try:
            with self._fallback(key):  # also counts this process's peak
                yield
        finally:
            with contextlib.suppress(redis.RedisError):  # unreleased, the lease frees it
                self._client.zrem(name, token)

    def _take(self, name: str, token: str) -> None:
        deadline = time.monotonic() + self._max_wait
        pause = 0.01
        while not self._acquire(keys=[name], args=[self.limit, self._lease_ms, token]):
            if time.monotonic() >= deadline:
                raise SlotTimeout(f"no GitHub request slot of {name} came free in {self._max_wait:.0f}s")
            time.sleep(pause)
            pause = min(0.25, pause * 2)


def uses_redis(settings: Settings) -> bool:
    return settings.broker_url.startswith(("redis://", "rediss://", "unix://"))


def lease_seconds(settings: Settings) -> float:
    """One request's worst case: every attempt timing out, plus a margin."""
    return settings.github_timeout_seconds * (settings.github_max_retries + 1) + 10.0


def make_slots(settings: Settings, identity: str) -> Slots:
    """The cap for one set of credentials (``identity``: a digest naming them, never a secret)."""
    limit = settings.github_max_concurrency_per_installation
    if not uses_redis(settings):
        return LocalSlots(limit)
    client = redis.Redis.from_url(settings.broker_url, socket_connect_timeout=2, socket_timeout=5)
    scope = hashlib.sha256(f"{settings.github_api_url}|{identity}".encode()).hexdigest()[:16]
    return RedisSlots(client, limit, scope=scope, lease_seconds=lease_seconds(settings))
