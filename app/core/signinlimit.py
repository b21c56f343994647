"""How often a client address, or an account, may fail to sign in (pure: times in, a verdict out).

The dashboard's sign-in checks a token or a user and password; without a limit a stranger can
try passwords as fast as the API answers. Failures are counted in a sliding window per key (the
client address, and the account named by the user field); once a key has used up its failures,
every attempt on it is refused with the seconds until its oldest failure leaves the window,
without checking the credentials (an answer that still said "right" or "wrong" would let the
guessing go on). A success clears the account's count, never the address's: an attacker's own
valid account must not buy more guesses at someone else's.

The counts live in the API process (several replicas each keep their own, so the effective
limit is that many times the figure); ``max_keys`` bounds the memory a spray of names can take.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Limit:
    failures: int  # failures allowed in the window; the next attempt is refused
    window_seconds: float


# An address tries many accounts (an office behind one NAT too); an account is one person's.
ADDRESS_LIMIT = Limit(failures=20, window_seconds=600)
ACCOUNT_LIMIT = Limit(failures=5, window_seconds=600)


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    retry_after: int  # whole seconds until an attempt is allowed again; 0 when allowed
    why: str


ALLOWED = Verdict(True, 0, "under the sign-in limits")


class FailureLog:
    """Recent failed sign-ins per key (``"address 10.0.0.1"``, ``"account alice"``)."""

    def __init__(self, max_keys: int = 10_000) -> None:
        self.max_keys = max_keys
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()  # header sign-ins are checked in the threadpool

    def verdict(self, keys: Sequence[tuple[str, Limit]], now: float) -> Verdict:
        """Whether an attempt on ``keys`` may be checked now; the longest wait when not."""
        with self._lock:
            worst = ALLOWED
            for key, limit in keys:
                recent = self._recent(key, limit, now)
                if len(recent) >= limit.failures:
                    wait = max(1, math.ceil(recent[0] + limit.window_seconds - now))
                    if wait > worst.retry_after:
                        worst = Verdict(
                            False,
                            wait,
                            f"{len(recent)} failed sign-ins from {key} in the last "
                            f"{round(limit.window_seconds / 60)} minutes",
                        )
            return worst

    def failed(self, keys: Sequence[tuple[str, Limit]], now: float) -> None:
        with self._lock:
            for key, limit in keys:
                self._recent(key, limit, now).append(now)
            self._bound(now, max(limit.window_seconds for _, limit in keys) if keys else 0.0)

    def succeeded(self, key: str) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def _recent(self, key: str, limit: Limit, now: float) -> deque[float]:
        recent = self._failures.setdefault(key, deque())
        while recent and recent[0] <= now - limit.window_seconds:
            recent.popleft()
        return recent

    def _bound(self, now: float, window: float) -> None:
        if len(self._failures) <= self.max_keys:
            return
        for key in [k for k, times in self._failures.items() if not times or times[-1] <= now - window]:
            del self._failures[key]
        while len(self._failures) > self.max_keys:  # still a spray: the oldest keys go first
            del self._failures[next(iter(self._failures))]


def sign_in_keys(address: str | None, account: str | None) -> list[tuple[str, Limit]]:
    """The keys an attempt counts against: its client address, and the account it names."""
    keys = [(f"address {address or 'unknown'}", ADDRESS_LIMIT)]
    if account:
        keys.append((account_key(account), ACCOUNT_LIMIT))
    return keys


def account_key(account: str) -> str:
    return f"account {account.strip().lower()}"
