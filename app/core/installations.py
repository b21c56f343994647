"""Which GitHub App installation acts for a call, and its cached access token (pure: no I/O).

A GitHub App is installed on several accounts; each installation has its own token, minted with
the App's JWT (``POST /app/installations/{id}/access_tokens``) and valid until its ``expires_at``
(an hour). Minting one per task wastes a call and a secondary-limit slot, so a token is reused
until shortly before it expires. Which installation acts:

- for a delivery: the ``installation.id`` of its payload (GitHub says which installation the
  event belongs to);
- for polling and scheduled work: the installation that owns the repository, asked once
  (``GET /repos/{owner}/{repo}/installation``) and remembered; a repository the App is not
  installed on (an upstream public repo) is read with the default installation's token.

The I/O (minting, the look-up) is the caller's: these classes only decide and remember.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

log = structlog.get_logger(__name__)

REFRESH_MARGIN_SECONDS = 300.0  # mint a new token this long before the old one expires
_REPO_PATH = re.compile(r"^/repos/([^/?#]+)/([^/?#]+)")


def repo_of_path(path: str) -> str | None:
    """``owner/name`` of a ``/repos/{owner}/{repo}/...`` REST path, lower-cased; else ``None``."""
    m = _REPO_PATH.match(path)
    return f"{m.group(1)}/{m.group(2)}".lower() if m else None


def parse_expires_at(value: object) -> float | None:
    """``expires_at`` of a token answer (ISO 8601, ``Z``) as epoch seconds; ``None`` if unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


@dataclass(frozen=True)
class CachedToken:
    token: str
    expires_at: float  # epoch seconds

    def fresh(self, now: float, margin: float) -> bool:
        return self.expires_at - margin > now


class TokenCache:
    """Installation tokens by installation id, reused until ``margin`` seconds before expiry."""

    def __init__(self, margin: float = REFRESH_MARGIN_SECONDS) -> None:
        self.margin = margin
        self._tokens: dict[int, CachedToken] = {}
        self._locks: dict[int, threading.Lock] = {}
        self._guard = threading.Lock()
        self.minted = 0  # tokens minted by this process (a test and a metric read it)

    def _lock(self, installation_id: int) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(installation_id, threading.Lock())

    def get(self, installation_id: int, now: float, mint: Callable[[int], tuple[str, float | None]]) -> str:
        """The cached token, or a new one from ``mint`` (one minting at a time per installation)."""
        with self._lock(installation_id):
            cached = self._tokens.get(installation_id)
            if cached is not None and cached.fresh(now, self.margin):
                return cached.token
            token, expires_at = mint(installation_id)
            # No readable expiry: GitHub documents one hour; assume less so we refresh early.
            expiry = expires_at if expires_at is not None else now + 3000.0
            self._tokens[installation_id] = CachedToken(token, expiry)
            self.minted += 1
            log.info(
                "installation_token_minted",
                installation_id=installation_id,
                reason="expiring" if cached is not None else "first use",
                expires_in=round(expiry - now),
            )
            return token

    def forget(self, installation_id: int) -> None:
        """Drop a token GitHub refused (revoked, or the clock was off): the next call mints anew."""
        with self._lock(installation_id):
            self._tokens.pop(installation_id, None)


class InstallationMap:
    """Repository -> installation id (``None``: the App is not installed there), learnt once."""

    def __init__(self) -> None:
        self._by_repo: dict[str, int | None] = {}
        self._lock = threading.Lock()

    def known(self, repo: str) -> tuple[bool, int | None]:
        with self._lock:
            key = repo.lower()
            return key in self._by_repo, self._by_repo.get(key)

    def learn(self, repo: str, installation_id: int | None) -> None:
        with self._lock:
            self._by_repo[repo.lower()] = installation_id


def installation_of(payload: object) -> int | None:
    """``installation.id`` of a webhook payload (absent for a repository webhook without an App)."""
    if not isinstance(payload, dict):
        return None
    inst = payload.get("installation")
    value = inst.get("id") if isinstance(inst, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
