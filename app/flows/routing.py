"""Route a stored delivery to the handlers registered for its event and action.

A small registry in the spirit of gidgethub's ``routing.Router``: capabilities register plain
functions; the processing task looks them up. A delivery with no handler is ``ignored``.
Handlers must be idempotent: a delivery can be processed again after a crash (its effects
converge, they are not repeated).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session


class HandlerSkipped(Exception):
    """Raised by a handler that looked and found nothing to do (counts toward ``ignored``)."""


class TransientError(Exception):
    """A failure worth retrying later (GitHub 5xx, rate limit, lock timeout).

    ``retry_after``: the earliest retry GitHub allows (seconds). ``rate_limited``: a rate limit,
    which only delays work (it never counts toward giving up). ``exponential``: GitHub gave no
    hint (a secondary limit without ``Retry-After``), so each repeated hit doubles the wait.
    """

    def __init__(
        self,
        message: str,
        retry_after: float | None = None,
        *,
        rate_limited: bool = False,
        exponential: bool = False,
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.rate_limited = rate_limited
        self.exponential = exponential

    def delay(self, attempt: int, default: float) -> float:
        """Seconds before retry number ``attempt`` (1 = first retry); ``default`` without a hint."""
        if self.retry_after is None:
            return default
        from app.core.ratelimit import backoff

        return backoff(self.retry_after, self.exponential, attempt)


@dataclass
class Event:
    delivery_id: str
    name: str  # X-GitHub-Event
    action: str | None
    payload: dict[str, Any]

    @property
    def repo(self) -> str | None:
        repo = self.payload.get("repository") or {}
        full = repo.get("full_name") if isinstance(repo, dict) else None
        return full if isinstance(full, str) else None

    @property
    def sender(self) -> str | None:
        sender = self.payload.get("sender") or {}
        login = sender.get("login") if isinstance(sender, dict) else None
        return login if isinstance(login, str) else None


@dataclass
class HandlerContext:
    """What a handler may use. ``after_commit`` callbacks run once the delivery's work committed
    (enqueue follow-up tasks there, so a worker never sees uncommitted rows)."""

    session: Session
    event: Event
    after_commit: list[Callable[[], None]] = field(default_factory=list)
    _gateways: dict[str, Any] = field(default_factory=dict)

    def gateway(self, actor: str = "sweepbot") -> Any:
        """The GitHub gateway for this delivery: writes audited in this session as ``actor``, tagged
        with the delivery; one per actor, shared by every handler of the delivery."""
        if actor not in self._gateways:
            from app.adapters.github import session_gateway
            from app.core.installations import installation_of

            # GitHub names the installation a delivery belongs to: that one acts for it.
            self._gateways[actor] = session_gateway(
                self.session,
                actor=actor,
                delivery_id=self.event.delivery_id,
                installation_id=installation_of(self.event.payload),
                repo=self.event.repo,
            )
        return self._gateways[actor]


Handler = Callable[[HandlerContext], None]


class Router:
    def __init__(self) -> None:
        self._handlers: dict[tuple[str, str | None], list[Handler]] = {}

    def register(self, event: str, action: str | None = None) -> Callable[[Handler], Handler]:
        """Register for one event; ``action=None`` means every action of it."""

        def decorator(func: Handler) -> Handler:
            self._handlers.setdefault((event, action), []).append(func)
            return func

        return decorator

    def handlers_for(self, event: str, action: str | None) -> list[Handler]:
        found = list(self._handlers.get((event, None), []))
        if action is not None:
            found += self._handlers.get((event, action), [])
        return found

    def known_events(self) -> list[tuple[str, str | None]]:
        return sorted(self._handlers, key=lambda k: (k[0], k[1] or ""))


router = Router()

# Modules whose import registers handlers on ``router``. Each capability owns one.
HANDLER_MODULES = (
    "app.flows.tracking",
    "app.flows.scheduler",
    "app.flows.commands",
    "app.flows.collect",
    "app.store.heads",
)

_loaded = False


def load_handlers() -> Router:
    """Import every capability's handler module once (plus ``SWEEPBOT_EXTRA_HANDLER_MODULES``)."""
    global _loaded
    if not _loaded:
        from app.settings import get_settings

        for name in (*HANDLER_MODULES, *get_settings().extra_handler_modules):
            importlib.import_module(name)
        _loaded = True
    return router
