"""The beat task's I/O around ``app.core.redelivery``: read GitHub's delivery lists, ask again for the
failed ones the bot never stored, remember every GUID asked for (never twice).

Bounded per cycle: at most ``redelivery_max_pages`` pages read and ``redelivery_max_requests``
redeliveries asked per hook; an unfinished scan resumes at its cursor the next cycle.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.adapters.github.errors import GitHubError
from app.core.redelivery import Item, ScanState, judge_page, parse_item
from app.core.routing import TransientError
from app.metrics import REDELIVERIES
from app.models import Delivery
from app.models.redelivery import RedeliveryRequest, RedeliveryScan
from app.settings import Settings

log = structlog.get_logger(__name__)


@dataclass
class HookReport:
    hook: str
    pages: int = 0
    examined: int = 0
    failed_found: int = 0
    requested: int = 0
    refused: int = 0
    complete: bool = False
    skipped: dict[str, int] = field(default_factory=dict)


class RedeliverGateway(Protocol):
    def redeliver(self, hook: str, delivery_id: int) -> None: ...


class DeliveryGateway(RedeliverGateway, Protocol):
    """A hook's recorded deliveries (paged by cursor, newest first) and asking for one again."""

    def list_hook_deliveries(
        self, hook: str, cursor: str | None = None, per_page: int = 100
    ) -> tuple[list[dict[str, Any]], str | None]: ...


def _state(session: Session, hook: str) -> RedeliveryScan:
    row = session.get(RedeliveryScan, hook)
    if row is None:
        row = RedeliveryScan(hook=hook)
        session.add(row)
    return row


def _known(session: Session, guids: set[str]) -> tuple[set[str], set[str]]:
    """(stored, asked): which of ``guids`` the bot has as deliveries, and has asked for before."""
    if not guids:
        return set(), set()
    stored = set(session.scalars(select(Delivery.id).where(Delivery.id.in_(guids))))
    asked = set(session.scalars(select(RedeliveryRequest.guid).where(RedeliveryRequest.guid.in_(guids))))
    return stored, asked


def _ask(session: Session, gw: RedeliverGateway, hook: str, item: Item, report: HookReport) -> None:
    # Remember first (committed), then ask: a crash in between errs on the side of not asking
    # twice; a transient failure of the ask forgets the row so the next cycle asks again.
    row = RedeliveryRequest(
        guid=item.guid,
        hook=hook,
        github_delivery_id=item.id,
        event=item.event[:64],
        action=(item.action or None),
        status="asking",
        failure=f"{item.status} ({item.status_code})"[:500],
        requested_at=datetime.now(UTC),
    )
    session.add(row)
    session.commit()
    try:
        gw.redeliver(hook, item.id)
    except TransientError:
        session.delete(row)
        session.commit()
        raise
    except GitHubError as exc:  # 4xx: GitHub will not redeliver it (too old, gone): say so, once
        row.status, row.error = "refused", str(exc)[:1000]
        session.commit()
        report.refused += 1
        REDELIVERIES.labels(hook=hook, outcome="refused").inc()
        log.warning("redelivery_refused", hook=hook, guid=item.guid, error=str(exc))
        return
    row.status = "requested"
    session.commit()
    report.requested += 1
    REDELIVERIES.labels(hook=hook, outcome="requested").inc()
    log.info(
        "redelivery_requested",
        hook=hook,
        guid=item.guid,
        github_delivery_id=item.id,
        event_name=item.event,
        failure=item.status,
    )


def recover_hook(
    session: Session,
    gw: DeliveryGateway,
    hook: str,
    *,
    max_pages: int,
    max_requests: int,
    horizon_seconds: float,
    now: float | None = None,
    per_page: int = 100,
) -> HookReport:
    """One bounded cycle over one hook's delivery list."""
    report = HookReport(hook)
    scan = _state(session, hook)
    state = ScanState(scan.watermark, scan.resume_cursor, scan.pending_top)
    horizon = (now if now is not None else time.time()) - horizon_seconds
    cursor = state.resume_cursor
    top = state.pending_top
    while report.pages < max_pages:
        raw, next_cursor = gw.list_hook_deliveries(hook, cursor, per_page)
        report.pages += 1
        items = [i for i in (parse_item(r) for r in raw) if i is not None]
        if len(items) != len(raw):
            log.warning("redelivery_items_unreadable", hook=hook, count=len(raw) - len(items))
        if top is None and items:
            top = items[0].id  # newest seen: the watermark once this scan completes
        report.examined += len(items)
        stored, asked = _known(session, {i.guid for i in items})
        verdict = judge_page(items, stored=stored, asked=asked, floor=state.watermark, horizon=horizon)
        for reason, n in verdict.reasons.items():
            report.skipped[reason] = report.skipped.get(reason, 0) + n
        report.failed_found += len(verdict.wanted)
        for item in verdict.wanted:
            if report.requested + report.refused >= max_requests:
                # Budget spent: stop here and resume at this page next cycle (it is re-judged).
                scan.resume_cursor, scan.pending_top = cursor, top
                scan.scanned_at = datetime.now(UTC)
                session.commit()
                log.info("redelivery_budget_spent", hook=hook, requested=report.requested)
                return report
            _ask(session, gw, hook, item, report)
        if verdict.stop or next_cursor is None:
            report.complete = True
            break
        cursor = next_cursor
    if report.complete:
        scan.watermark = max(filter(None, (top, state.watermark)), default=None)
        scan.resume_cursor, scan.pending_top = None, None
    else:
        scan.resume_cursor, scan.pending_top = cursor, top
    scan.scanned_at = datetime.now(UTC)
    session.commit()
    log.info(
        "redelivery_scan",
        hook=hook,
        pages=report.pages,
        examined=report.examined,
        failed_found=report.failed_found,
        requested=report.requested,
        complete=report.complete,
        skipped=report.skipped,
    )
    return report


def recover(session: Session, gw: DeliveryGateway, settings: Settings) -> list[HookReport]:
    """Every configured hook, each on its own (one hook's failure does not stop the others)."""
    reports = []
    for hook in settings.effective_redelivery_hooks:
        try:
            reports.append(
                recover_hook(
                    session,
                    gw,
                    hook,
                    max_pages=settings.redelivery_max_pages,
                    max_requests=settings.redelivery_max_requests,
                    horizon_seconds=settings.redelivery_horizon_seconds,
                )
            )
        except (TransientError, GitHubError) as exc:
            session.rollback()
            log.warning("redelivery_scan_failed", hook=hook, error=str(exc))
    return reports


def counts(session: Session) -> dict[str, int]:
    """requested / recovered (a GUID asked for and stored since) / refused / waiting."""
    rows = dict(
        session.execute(
            select(RedeliveryRequest.status, func.count()).group_by(RedeliveryRequest.status)
        ).all()
    )
    recovered = session.scalar(
        select(func.count())
        .select_from(RedeliveryRequest)
        .join(Delivery, Delivery.id == RedeliveryRequest.guid)
    )
    asked = int(rows.get("requested", 0)) + int(rows.get("asking", 0))
    return {
        "requested": asked,
        "recovered": int(recovered or 0),
        "refused": int(rows.get("refused", 0)),
        "waiting": max(0, asked - int(recovered or 0)),
    }
