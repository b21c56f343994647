"""The budget decision at its edges (app.core.budget): whole decisions, reasons included (the
reason is what the operator reads in the log and the dashboard), and the boundaries of every mode."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from app.core.budget import BudgetDecision, RateSnapshot, decide, newer, parse_rate_headers

NOW = 1_800_000_000.0


def snap(
    remaining: int, *, limit: int = 5000, reset_in: float = 3000.0, resource: str = "core"
) -> RateSnapshot:
    return RateSnapshot(limit, remaining, NOW + reset_in, NOW, resource)


def test_no_reading() -> None:
    assert decide(None, share=0.5, base_interval_s=120, now=NOW) == BudgetDecision(
        "normal",
        True,
        120,
        None,
        None,
        None,
        None,
        "no rate-limit reading yet: polling at the configured interval",
    )


@pytest.mark.parametrize("reset_in", [0.0, -5.0])
def test_a_reset_window_polls_normally(reset_in: float) -> None:
    assert decide(snap(0, reset_in=reset_in), share=0.5, base_interval_s=120, now=NOW) == BudgetDecision(
        "normal",
        True,
        120,
        None,
        None,
        None,
        0.0,
        "the window of the last reading has reset: polling at the configured interval",
    )


def test_webhooks_only_at_exactly_the_reserve() -> None:
    # cap 2500, reserve ceil(5% of 2500) = 125; 2375 spent leaves exactly 125
    d = decide(snap(2625), share=0.5, base_interval_s=120, now=NOW)
    assert d == BudgetDecision(
        "webhooks_only",
        False,
        3000.0,
        2500,
        2375,
        125,
        3000.0,
        "2375 of the installation's 5000 calls used, cap 2500 (50%): 125 left <= reserve 125; "
        "webhooks only for 3000 s",
    )
    assert decide(snap(2626), share=0.5, base_interval_s=120, now=NOW).mode != "webhooks_only"


def test_overspent_shows_zero_left_and_the_reserve_is_at_least_one_poll() -> None:
    d = decide(snap(4000, limit=5000), share=0.1, base_interval_s=60, now=NOW, poll_cost=40)
    # cap 500, 1000 spent: -500 left; the reserve is max(poll cost 40, ceil(25)) = 40
    assert d.mode == "webhooks_only" and d.allowance == -500
    assert "0 left <= reserve 40;" in d.reason
    # 41 left of cap 500 (reserve max(40, 25) = 40): not the reserve yet
    assert decide(snap(4541), share=0.1, base_interval_s=60, now=NOW, poll_cost=40).mode == "spread"
    assert decide(snap(4540), share=0.1, base_interval_s=60, now=NOW, poll_cost=40).mode == "webhooks_only"


def test_normal_at_exactly_the_affordable_polls() -> None:
    # cap 2500, 100 spent: 2400 left; half is 1200 polls; 3000 s / 2.5 s = 1200 polls: fits
    d = decide(snap(4900), share=0.5, base_interval_s=2.5, now=NOW)
    assert d == BudgetDecision(
        "normal",
        True,
        2.5,
        2500,
        100,
        2400,
        3000.0,
        "2400 of cap 2500 left for 3000 s: 1200 polls at 2 s fit in 50% of it",
    )


def test_spread_interval_and_reason() -> None:
    # 2400 left, poll cost 2: 600 affordable polls over 3000 s: every 5 s instead of 2.5 s
    d = decide(snap(4900), share=0.5, base_interval_s=2.5, now=NOW, poll_cost=2, last_poll_at=NOW - 4.5)
    assert d == BudgetDecision(
        "spread",
        True,  # 4.5 s since the last: within 10% of 5 s
        5.0,
        2500,
        100,
        2400,
        3000.0,
        "2400 of cap 2500 left for 3000 s: polling every 5 s instead of 2 s keeps polls within 50% of it",
    )
    assert not decide(
        snap(4900), share=0.5, base_interval_s=2.5, now=NOW, poll_cost=2, last_poll_at=NOW - 4.4
    ).poll
    assert decide(snap(4900), share=0.5, base_interval_s=2.5, now=NOW, poll_cost=2).poll  # never polled


def test_the_spread_interval_never_exceeds_the_window() -> None:
    # 130 left over 10 s at 66 calls a poll: 0.98 affordable polls, every 10.15 s: capped at 10 s
    d = decide(snap(2630, reset_in=10.0), share=0.5, base_interval_s=0.001, now=NOW, poll_cost=66)
    assert d.mode == "spread" and d.poll_interval_s == 10.0


@pytest.mark.parametrize(("share", "cap"), [(1.5, 5000), (-0.2, 0), (0.25, 1250)])
def test_the_share_is_clamped(share: float, cap: int) -> None:
    assert decide(snap(5000), share=share, base_interval_s=120, now=NOW).cap == cap


def test_every_decision_is_logged() -> None:
    with capture_logs() as logs:
        d = decide(snap(2600), share=0.5, base_interval_s=120, now=NOW)
    assert logs == [
        {
            "event": "github_budget",
            "log_level": "info",
            "mode": "webhooks_only",
            "poll": False,
            "reason": d.reason,
        }
    ]


def test_headers() -> None:
    headers = {
        "X-RateLimit-Limit": "15000",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": "1800003600",
        "X-RateLimit-Resource": "graphql",
    }
    assert parse_rate_headers(headers, NOW) == RateSnapshot(15000, 0, 1800003600.0, NOW, "graphql")
    assert parse_rate_headers({**headers, "X-RateLimit-Limit": "0"}, NOW) is None
    assert parse_rate_headers({**headers, "X-RateLimit-Limit": "1"}, NOW) == RateSnapshot(
        1, 0, 1800003600.0, NOW, "graphql"
    )
    assert parse_rate_headers({**headers, "X-RateLimit-Remaining": "-1"}, NOW) is None
    assert parse_rate_headers({k: v for k, v in headers.items() if "Reset" not in k}, NOW) is None
    assert parse_rate_headers({k: v for k, v in headers.items() if "Remaining" not in k}, NOW) is None


def test_snapshot_json_and_used() -> None:
    s = snap(6000, limit=5000, resource="search")
    assert s.used == 0  # more remaining than the limit (a window change mid-answer): nothing used
    assert s.to_json() == {
        "limit": 5000,
        "remaining": 6000,
        "reset": NOW + 3000.0,
        "observed_at": NOW,
        "resource": "search",
    }
    assert RateSnapshot.from_json(s.to_json()) == s
    assert RateSnapshot.from_json(
        {"limit": "5", "remaining": 1, "reset": 2, "observed_at": 3}
    ) == RateSnapshot(5, 1, 2.0, 3.0, "core")
    assert RateSnapshot.from_json({"limit": "x", "remaining": 1, "reset": 2, "observed_at": 3}) is None
    assert RateSnapshot.from_json({"limit": None, "remaining": 1, "reset": 2, "observed_at": 3}) is None
    d = decide(None, share=0.5, base_interval_s=1, now=NOW)
    assert d.to_json()["mode"] == "normal" and d.to_json()["reason"] == d.reason


def test_newer() -> None:
    a, b = snap(10, reset_in=100), snap(20, reset_in=100)
    assert newer(a, b) is a and newer(b, a) is a
    same = snap(10, reset_in=100)
    assert newer(a, same) is a  # equal: the first
    later = snap(4000, reset_in=200)
    assert newer(a, later) is later and newer(later, a) is later
    assert newer(a, None) is a and newer(None, None) is None
