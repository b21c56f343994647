"""The edges of one page of GitHub's delivery list (app.core.redelivery.judge_page): the
watermark's own id was examined by the last scan, the horizon's own second is still kept."""

from __future__ import annotations

import pytest

from app.core.redelivery import Item, judge_page

HORIZON = 1_000_000.0


def _failed(ident: int, at: float) -> Item:
    return Item(ident, f"guid-{ident}", "Invalid HTTP Response: 503", 503, "push", None, at, False)


@pytest.mark.parametrize(
    ("ident", "at", "floor", "wanted", "stop"),
    [
        (11, HORIZON + 5, 10, True, False),  # newer than the watermark, inside the horizon
        (10, HORIZON + 5, 10, False, True),  # the watermark itself: examined last time
        (9, HORIZON + 5, 10, False, True),
        (11, HORIZON, 10, True, False),  # delivered exactly at the horizon: GitHub still has it
        (11, HORIZON - 1, 10, False, True),  # a second older: gone
        (11, HORIZON, None, True, False),  # no watermark yet
    ],
)
def test_the_page_stops_at_the_watermark_and_past_the_horizon(
    ident: int, at: float, floor: int | None, wanted: bool, stop: bool
) -> None:
    verdict = judge_page([_failed(ident, at)], stored=set(), asked=set(), floor=floor, horizon=HORIZON)
    assert ([i.id for i in verdict.wanted] == [ident]) is wanted
    assert verdict.stop is stop


def test_items_after_the_stop_are_not_asked_for() -> None:
    items = [_failed(12, HORIZON + 9), _failed(10, HORIZON + 8), _failed(13, HORIZON + 7)]
    verdict = judge_page(items, stored=set(), asked=set(), floor=10, horizon=HORIZON)
    assert [i.id for i in verdict.wanted] == [12] and verdict.stop
