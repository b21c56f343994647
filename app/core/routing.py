"""Route a stored delivery to the handlers registered for its event and action (pure).

A small registry in the spirit of gidgethub's ``routing.Router``: each capability keeps its own
``Router`` of plain functions and exports it; the application composes them
(app/flows/ingest/handlers.py) and the processing flow looks handlers up. A delivery with no handler is
``ignored``. Handlers must be idempotent: a delivery can be processed again after a crash (its
effects converge, they are not repeated).

Nothing here knows the database or GitHub: the context carries the delivery's session and a
gateway factory, both given by whoever runs the handlers. The context is generic over both, so a
handler says which gateway it needs (``HandlerContext[Session, SomeFlowGateway]``, the Protocol
of the flows it calls) and mypy checks its body against that; the processing flow gives it the
real gateway (tests/flows/test_handler_gateways.py has mypy check it fits every handler).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, NoReturn, TypeVar

from app.core.ratelimit import backoff


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


S = TypeVar("S")
# Covariant: a context holding a gateway that offers more serves a handler that needs less.
G = TypeVar("G", covariant=True)

GatewayFactory = Callable[[str], G]
"""Makes the GitHub gateway that acts as the given actor (the processing flow supplies it)."""


def no_gateway(actor: str) -> NoReturn:
    """The factory of a context that was given none: a handler asking for GitHub is a bug there."""
    raise LookupError(f"this handler context has no gateway factory (asked to act as {actor!r})")


@dataclass
class HandlerContext(Generic[S, G]):
    """What a handler may use: the delivery's database session, its event, and GitHub through
    ``gateway()``. ``after_commit`` callbacks run once the delivery's work committed (enqueue
    follow-up tasks there, so a worker never sees uncommitted rows)."""

    session: S
    event: Event
    gateways: GatewayFactory[G] = no_gateway
    after_commit: list[Callable[[], None]] = field(default_factory=list)
    _made: dict[str, G] = field(default_factory=dict)

    def gateway(self, actor: str = "sweepbot") -> G:
        """The GitHub gateway acting as ``actor``: one per actor, shared by every handler of the
        delivery (made on first use, so handlers that need no GitHub cost nothing)."""
        if actor not in self._made:
            self._made[actor] = self.gateways(actor)
        return self._made[actor]


Handler = Callable[[HandlerContext[Any, Any]], None]


class Router:
    """One capability's handlers, or (``compose``) the whole application's."""

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

    @classmethod
    def compose(cls, routers: Iterable[Router]) -> Router:
        """One router with every handler of ``routers``, in their order."""
        out = cls()
        for router in routers:
            for key, handlers in router._handlers.items():
                out._handlers.setdefault(key, []).extend(handlers)
        return out
