"""How much of the installation's hourly GitHub rate limit the bot may still spend; pure.

Input: the gateway's last ``X-RateLimit-*`` response headers (``parse_rate_headers``) — what GitHub
says is left of the installation's primary limit and when the window resets. The bot keeps itself
under ``share`` of that limit (the rest stays for people and other tools on the installation).
Only polling is throttled: dispatches, collections and report edits are the work itself and are
already bounded per job; the repair poll is a fallback for lost webhooks and can wait.

Modes (``decide``):
- ``normal``: polling at its configured interval fits well inside what is left (every poll the
  beat starts goes out);
- ``spread``: it would not, so polls are spaced to spend at most ``POLL_FRACTION`` of the allowance
  over the rest of the window;
- ``webhooks_only``: the allowance is down to the reserve: no polls until the window resets
  (webhooks keep the jobs moving; the repair poll resumes after the reset).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import structlog

from app.core.ratelimit import read_headers

log = structlog.get_logger(__name__)

POLL_FRACTION = 0.5  # polls may take at most this part of what is left; the rest is for the work
RESERVE_FRACTION = 0.05  # below this part of the cap left, stop polling
DUE_TOLERANCE = 0.9


@dataclass(frozen=True)
class RateSnapshot:
    limit: int
    remaining: int
    reset: float  # epoch seconds when the window resets
    observed_at: float  # epoch seconds of the answer that carried the headers
    resource: str = "core"

    @property
    def used(self) -> int:
        return max(0, self.limit - self.remaining)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RateSnapshot | None:
        try:
            return cls(
                int(data["limit"]),
                int(data["remaining"]),
                float(data["reset"]),
                float(data["observed_at"]),
                str(data.get("resource") or "core"),
            )
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class BudgetDecision:
    mode: str  # "normal" | "spread" | "webhooks_only"
    poll: bool  # whether a poll due now may go out
    poll_interval_s: float  # the interval polls should keep now
    cap: int | None  # share x limit: what the bot may spend per window
    spent: int | None  # used in this window (by the installation, as GitHub counts it)
    allowance: int | None  # cap - spent
    resets_in_s: float | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def parse_rate_headers(headers: Mapping[str, Any], now: float) -> RateSnapshot | None:
    """The primary rate limit from an answer's headers; None when they are absent or unreadable."""
    h = read_headers(headers)
    if h.limit is None or h.remaining is None or h.reset is None or h.limit <= 0 or h.remaining < 0:
        return None
    return RateSnapshot(h.limit, h.remaining, h.reset, now, h.resource)


def newer(a: RateSnapshot | None, b: RateSnapshot | None) -> RateSnapshot | None:
    """The reading to keep: the later window, and within one window the lower remaining."""
    if a is None or b is None:
        return a or b
    if a.reset != b.reset:
        return a if a.reset > b.reset else b
    return a if a.remaining <= b.remaining else b


def decide(
    snapshot: RateSnapshot | None,
    *,
    share: float,
    base_interval_s: float,
    now: float,
    last_poll_at: float | None = None,
    poll_cost: int = 1,
) -> BudgetDecision:
    """Whether the repair poll may go out now, and at what interval polls should run."""
    share = min(1.0, max(0.0, share))

    def due(interval: float) -> bool:
        # a beat task fires a little early or late: within 10% of the interval is on time
        return last_poll_at is None or now - last_poll_at >= DUE_TOLERANCE * interval

    if snapshot is None:
        reason = "no rate-limit reading yet: polling at the configured interval"
        return _log(BudgetDecision("normal", True, base_interval_s, None, None, None, None, reason))
    if snapshot.reset <= now:
        reason = "the window of the last reading has reset: polling at the configured interval"
        return _log(BudgetDecision("normal", True, base_interval_s, None, None, None, 0.0, reason))
    cap = int(math.floor(share * snapshot.limit))
    spent = snapshot.used
    allowance = cap - spent
    left = snapshot.reset - now
    reserve = max(poll_cost, int(math.ceil(RESERVE_FRACTION * cap)))
    if allowance <= reserve:
        reason = (
            f"{spent} of the installation's {snapshot.limit} calls used, cap {cap} ({share:.0%}): "
            f"{max(0, allowance)} left <= reserve {reserve}; webhooks only for {left:.0f} s"
        )
        return _log(BudgetDecision("webhooks_only", False, left, cap, spent, allowance, left, reason))
    polls_left = left / base_interval_s
    affordable = POLL_FRACTION * allowance / poll_cost
    if polls_left <= affordable:
        reason = (
            f"{allowance} of cap {cap} left for {left:.0f} s: {polls_left:.0f} polls at "
            f"{base_interval_s:.0f} s fit in {POLL_FRACTION:.0%} of it"
        )
        return _log(BudgetDecision("normal", True, base_interval_s, cap, spent, allowance, left, reason))
    interval = min(left, left / affordable)
    reason = (
        f"{allowance} of cap {cap} left for {left:.0f} s: polling every {interval:.0f} s instead of "
        f"{base_interval_s:.0f} s keeps polls within {POLL_FRACTION:.0%} of it"
    )
    return _log(BudgetDecision("spread", due(interval), interval, cap, spent, allowance, left, reason))


def _log(decision: BudgetDecision) -> BudgetDecision:
    log.info("github_budget", mode=decision.mode, poll=decision.poll, reason=decision.reason)
    return decision
