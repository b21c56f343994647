"""Which webhook deliveries GitHub failed to send should be asked for again (pure: no I/O).

GitHub records every delivery attempt for 3 days and never retries a failed one by itself
("Handling failed webhook deliveries"): an integrator lists them (``GET /app/hook/deliveries``,
or ``/repos/{owner}/{repo}/hooks/{hook_id}/deliveries``, newest first, cursor paging) and asks
for a redelivery (``POST .../deliveries/{id}/attempts``). A delivery failed when its ``status``
is not ``OK``. Its ``guid`` is the ``X-GitHub-Delivery`` the bot stores, so a failed attempt whose
GUID the bot has (it stored the delivery but answered late) needs nothing.

A scan reads pages newest first down to the newest delivery the previous complete scan saw (the
watermark) or the 3-day horizon; when its page budget runs out first, the next cycle resumes at
the saved cursor, so a burst larger than one cycle's budget is still read whole, once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="next"')


def next_cursor(link_header: str | None) -> str | None:
    """The ``cursor`` of the ``rel="next"`` page in a ``Link`` header, or ``None`` on the last page."""
    if not link_header:
        return None
    m = _NEXT.search(link_header)
    if not m:
        return None
    values = parse_qs(urlsplit(m.group(1)).query).get("cursor")
    return values[0] if values else None


@dataclass(frozen=True)
class Item:
    """One entry of the deliveries list (``hook-delivery-item``)."""

    id: int
    guid: str
    status: str
    status_code: int
    event: str
    action: str | None
    delivered_at: float | None  # epoch seconds
    redelivery: bool

    @property
    def failed(self) -> bool:
        return self.status != "OK"


def parse_item(raw: Any) -> Item | None:
    """A list entry, or ``None`` (logged by the caller) when it lacks what a decision needs."""
    if not isinstance(raw, dict):
        return None
    ident, guid = raw.get("id"), raw.get("guid")
    if not isinstance(ident, int) or not isinstance(guid, str) or not guid:
        return None
    when: float | None = None
    stamp = raw.get("delivered_at")
    if isinstance(stamp, str):
        try:
            when = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            when = None
    return Item(
        id=ident,
        guid=guid[:64],
        status=str(raw.get("status") or ""),
        status_code=int(raw.get("status_code") or 0),
        event=str(raw.get("event") or ""),
        action=raw.get("action") if isinstance(raw.get("action"), str) else None,
        delivered_at=when,
        redelivery=bool(raw.get("redelivery")),
    )


@dataclass
class ScanState:
    """What a hook's scans remember between cycles."""

    watermark: int | None = None  # newest delivery id a complete scan examined
    resume_cursor: str | None = None  # an unfinished scan continues here
    pending_top: int | None = None  # newest id of the unfinished scan (its watermark once done)


@dataclass
class PageVerdict:
    wanted: list[Item] = field(default_factory=list)  # failed, never stored, never asked: ask
    stop: bool = False  # reached the watermark or the horizon: the scan is complete
    reasons: dict[str, int] = field(default_factory=dict)  # why items were passed over (for logs)


def judge_page(
    items: Iterable[Item],
    *,
    stored: set[str],
    asked: set[str],
    floor: int | None,
    horizon: float,
) -> PageVerdict:
    """Decide one page: which items to redeliver, and whether the scan has gone far enough.

    ``stored``: GUIDs the bot has; ``asked``: GUIDs it already asked GitHub to redeliver (never
    twice); ``floor``: the watermark (items at or below it were examined by an earlier scan);
    ``horizon``: epoch seconds before which GitHub no longer keeps (or redelivers) deliveries.
    """
    verdict = PageVerdict()
    seen: set[str] = set()

    def skip(reason: str) -> None:
        verdict.reasons[reason] = verdict.reasons.get(reason, 0) + 1

    for item in items:
        if floor is not None and item.id <= floor:
            verdict.stop = True
            break
        if item.delivered_at is not None and item.delivered_at < horizon:
            verdict.stop = True
            break
        if not item.failed:
            skip("ok")
        elif item.guid in stored:
            skip("stored")  # the bot has it (it answered too late, or a redelivery came through)
        elif item.guid in asked or item.guid in seen:
            skip("asked")
        else:
            seen.add(item.guid)
            verdict.wanted.append(item)
    return verdict
