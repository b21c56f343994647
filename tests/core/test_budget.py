"""The GitHub budget decision: stay under a share of the installation's hourly limit."""

from __future__ import annotations

from app.core.budget import RateSnapshot, decide, newer, parse_rate_headers

NOW = 1_800_000_000.0


def snap(remaining: int, *, limit: int = 5000, reset_in: float = 3000.0) -> RateSnapshot:
    return RateSnapshot(limit, remaining, NOW + reset_in, NOW)


def test_headers_parse_case_insensitively_and_refuse_garbage() -> None:
    got = parse_rate_headers(
        {"X-RateLimit-Limit": "5000", "x-ratelimit-remaining": "4990", "X-RateLimit-Reset": "1800003600"}, NOW
    )
    assert got == RateSnapshot(5000, 4990, 1800003600.0, NOW, "core")
    assert got.used == 10
    assert parse_rate_headers({"X-RateLimit-Limit": "5000"}, NOW) is None
    assert (
        parse_rate_headers(
            {"X-RateLimit-Limit": "x", "X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "1"}, NOW
        )
        is None
    )
    assert RateSnapshot.from_json(got.to_json()) == got
    assert RateSnapshot.from_json({"limit": 1}) is None


def test_normal_when_polling_fits() -> None:
    d = decide(snap(4900), share=0.5, base_interval_s=120, now=NOW)
    assert d.mode == "normal" and d.poll and d.poll_interval_s == 120
    assert d.cap == 2500 and d.spent == 100 and d.allowance == 2400
    # normal: the beat spaces polls, every one it starts goes out
    assert decide(snap(4900), share=0.5, base_interval_s=120, now=NOW, last_poll_at=NOW - 1).poll


def test_spread_when_polls_would_eat_the_allowance() -> None:
    # cap 2500, 2200 spent: 300 left for 3000 s; 300 polls at 10 s would take 300 > 150 (half)
    d = decide(snap(2800), share=0.5, base_interval_s=10, now=NOW, last_poll_at=NOW - 15)
    assert d.mode == "spread" and d.poll_interval_s == 20.0
    assert not d.poll  # 15 s since the last poll < 20 s
    assert "every 20 s" in d.reason
    assert decide(
        snap(2800), share=0.5, base_interval_s=10, now=NOW, last_poll_at=NOW - 19
    ).poll  # 10% early is on time


def test_webhooks_only_when_low_and_back_after_reset() -> None:
    d = decide(snap(2600), share=0.5, base_interval_s=120, now=NOW)
    assert d.mode == "webhooks_only" and not d.poll and d.allowance == 100
    assert "webhooks only" in d.reason
    after = decide(snap(2600, reset_in=-1), share=0.5, base_interval_s=120, now=NOW)
    assert after.mode == "normal" and after.poll


def test_no_reading_polls_normally_and_newer_keeps_the_latest_window() -> None:
    assert decide(None, share=0.5, base_interval_s=120, now=NOW).mode == "normal"
    a, b = snap(100, reset_in=100), snap(4000, reset_in=3600)
    assert newer(a, b) is b and newer(None, a) is a
    same_window = newer(snap(10), snap(20))
    assert same_window is not None and same_window.remaining == 10
