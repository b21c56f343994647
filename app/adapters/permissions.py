"""Who may run commands that spend runner time or change files: write, maintain or admin.

The role is asked of the API (collaborator permission) and cached briefly in-process, so a burst
of commands costs one call while a revoked permission stops working within ``TTL_SECONDS``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

WRITE_ROLES = frozenset({"admin", "maintain", "write"})
TTL_SECONDS = 60.0

_lock = threading.Lock()
_cache: dict[tuple[str, str], tuple[str, float]] = {}


class PermissionGateway(Protocol):
    def permission(self, repo: str, username: str) -> str: ...


def permission_of(
    gw: PermissionGateway,
    repo: str,
    login: str,
    *,
    ttl: float = TTL_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """The user's role on ``repo`` (``admin`` ... ``none``), cached for ``ttl`` seconds."""
    key = (repo.lower(), login.lower())
    now = clock()
    with _lock:
        hit = _cache.get(key)
        if hit is not None and hit[1] > now:
            return hit[0]
    role = str(gw.permission(repo, login))
    with _lock:
        _cache[key] = (role, now + ttl)
    return role


def can_write(gw: PermissionGateway, repo: str, login: str) -> tuple[bool, str]:
    """(allowed, role): allowed when the role is write, maintain or admin."""
    role = permission_of(gw, repo, login)
    return role in WRITE_ROLES, role


def clear_cache() -> None:
    with _lock:
        _cache.clear()
