"""The edges of one page of GitHub's delivery list (app.core.redelivery.judge_page): the
watermark's own id was examined by the last scan, the horizon's own second is still kept."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.redelivery import Item, judge_page, next_cursor, parse_item

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


def _item(ident: int, guid: str, status: str = "Invalid HTTP Response: 503") -> Item:
    return Item(ident, guid, status, 503 if status != "OK" else 200, "push", None, HORIZON + ident, False)


def test_a_page_asks_only_for_failed_unstored_unasked_deliveries_once_and_counts_why() -> None:
    items = [
        _item(20, "ok-1", "OK"),
        _item(19, "ok-2", "OK"),
        _item(18, "stored"),
        _item(17, "asked"),
        _item(16, "twice"),
        _item(15, "twice"),  # a redelivery of the same delivery, failed again: asked for once
        _item(14, "fresh"),
    ]
    verdict = judge_page(items, stored={"stored", "ok-1"}, asked={"asked"}, floor=None, horizon=HORIZON)
    assert [i.guid for i in verdict.wanted] == ["twice", "fresh"]
    assert verdict.reasons == {"ok": 2, "stored": 1, "asked": 2}
    assert verdict.stop is False


def test_a_guid_asked_before_is_not_asked_again_even_when_never_seen_on_this_page() -> None:
    verdict = judge_page([_item(5, "g")], stored=set(), asked={"g"}, floor=None, horizon=HORIZON)
    assert verdict.wanted == [] and verdict.reasons == {"asked": 1}


def test_an_undated_delivery_is_judged_not_stopped_at() -> None:
    undated = Item(3, "u", "failed", 500, "push", None, None, False)
    verdict = judge_page([undated], stored=set(), asked=set(), floor=None, horizon=HORIZON)
    assert [i.guid for i in verdict.wanted] == ["u"] and not verdict.stop


@pytest.mark.parametrize(
    ("header", "cursor"),
    [
        (None, None),
        ("", None),
        ('<https://api.github.com/app/hook/deliveries?per_page=100&cursor=v1_42>; rel="next"', "v1_42"),
        (
            '<https://api.github.com/app/hook/deliveries?cursor=a>; rel="prev", '
            '<https://api.github.com/app/hook/deliveries?cursor=b&per_page=100>; rel="next"',
            "b",
        ),
        ('<https://api.github.com/app/hook/deliveries?cursor=a>; rel="prev"', None),
        ('<https://api.github.com/app/hook/deliveries?per_page=100>; rel="next"', None),
    ],
)
def test_next_cursor_is_the_next_links_cursor(header: str | None, cursor: str | None) -> None:
    assert next_cursor(header) == cursor


def test_parse_item_reads_a_github_delivery_entry() -> None:
    raw = {
        "id": 12345678,
        "guid": "0b989ba4-242f-11e5-81e1-c7b6966d2516",
        "delivered_at": "2019-06-03T00:57:16Z",
        "redelivery": True,
        "duration": 0.27,
        "status": "Invalid HTTP Response: 400",
        "status_code": 400,
        "event": "issues",
        "action": "opened",
    }
    item = parse_item(raw)
    assert item == Item(
        id=12345678,
        guid="0b989ba4-242f-11e5-81e1-c7b6966d2516",
        status="Invalid HTTP Response: 400",
        status_code=400,
        event="issues",
        action="opened",
        delivered_at=1559523436.0,
        redelivery=True,
    )
    assert item.failed


def test_parse_item_defaults_and_refusals() -> None:
    item = parse_item({"id": 7, "guid": "g" * 80, "status": "OK", "delivered_at": "not a date"})
    assert item == Item(7, "g" * 64, "OK", 0, "", None, None, False)
    assert not item.failed
    bare = parse_item({"id": 8, "guid": "h", "action": 3, "delivered_at": 1559523436})
    assert bare == Item(8, "h", "", 0, "", None, None, False)
    assert bare.failed  # no status is not "OK"
    refused: tuple[Any, ...] = (
        None,
        [],
        {"guid": "g"},
        {"id": "7", "guid": "g"},
        {"id": 7},
        {"id": 7, "guid": ""},
        {"id": 7, "guid": 5},
    )
    for raw in refused:
        assert parse_item(raw) is None, raw


@pytest.mark.parametrize(
    ("stamp", "when"),
    [
        ("2019-06-03T00:57:16Z", 1559523436.0),  # GitHub's form
        ("2019-06-03T00:57:16+00:00", 1559523436.0),
        ("2019-06-03T02:57:16+02:00", 1559523436.0),
        # a lower-case "z" is not GitHub's form and fromisoformat refuses it: the delivery is
        # undated, so it is judged rather than taken for the horizon (see the undated test above)
        ("2019-06-03T00:57:16z", None),
    ],
)
def test_parse_item_reads_the_time_with_a_capital_z_or_an_offset(stamp: str, when: float | None) -> None:
    item = parse_item({"id": 9, "guid": "i", "delivered_at": stamp})
    assert item is not None and item.delivered_at == when
