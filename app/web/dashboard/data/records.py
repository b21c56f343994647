"""Deliveries and the audit log, newest first (the stored bodies are only read for one delivery)."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import func, not_, or_, select
from sqlalchemy.orm import Session, defer

from app.models import AuditEntry, Delivery
from app.web.dashboard import schemas as S
from app.web.dashboard.data.common import aware, page_of


def delivery_out(d: Delivery) -> S.DeliveryOut:
    return S.DeliveryOut(
        id=d.id,
        event=d.event,
        action=d.action,
        repo=d.repo,
        status=d.status,
        attempts=d.attempts,
        error=d.error,
        body_bytes=d.body_bytes,
        received_at=aware(d.received_at),
        finished_at=aware(d.finished_at),
    )


def deliveries(
    session: Session, *, q: str | None, event: str | None, status: str | None, page: int, per_page: int
) -> S.Page[S.DeliveryOut]:
    # Only the listed columns: the stored bodies can be megabytes each.
    stmt = select(Delivery).order_by(Delivery.received_at.desc(), Delivery.id)
    if q:
        stmt = stmt.where(Delivery.id.startswith(q.strip(), autoescape=True))
    if event:
        stmt = stmt.where(Delivery.event == event)
    if status:
        stmt = stmt.where(Delivery.status == status)
    stmt = stmt.options(defer(Delivery.body))
    rows, more = page_of(session, stmt, page, per_page)
    return S.Page[S.DeliveryOut](
        items=[delivery_out(d) for d in rows], page=page, per_page=per_page, has_next=more
    )


def delivery_detail(session: Session, delivery_id: str) -> S.DeliveryDetail | None:
    d = session.get(Delivery, delivery_id)
    if d is None:
        return None
    try:
        payload: Any = json.loads(d.body)
    except (ValueError, UnicodeDecodeError):
        payload = d.body.decode("utf-8", errors="replace")
    return S.DeliveryDetail(**delivery_out(d).model_dump(), payload=payload)


def delivery_events(session: Session) -> list[str]:
    return [e for (e,) in session.execute(select(Delivery.event).distinct().order_by(Delivery.event))]


# Canary plumbing: what the nightly watch's canaries write to measure a nightly (their branches,
# their sweeps, under the pseudo-PR #0) and the git objects under any commit (the ref write
# says what the commit was for). The watch's decisions (canary.*, nightly.*) are not plumbing.
CANARY_BRANCHES = "sweepbot/canary/"
CANARY_TARGET_SUFFIX = "#0"
GIT_OBJECTS = ("github.git/create-blob", "github.git/create-tree", "github.git/create-commit")


def _plumbing() -> Any:
    target = func.coalesce(AuditEntry.target, "")
    return or_(
        target.contains(CANARY_BRANCHES, autoescape=True),
        target.endswith(CANARY_TARGET_SUFFIX, autoescape=True),
        AuditEntry.action.in_(GIT_OBJECTS),
    )


def sweep_of(detail: dict[str, Any] | None) -> int | None:
    """The sweep an audit entry is about: its detail's ``sweep`` (sweep.*, canary.queue)."""
    value = (detail or {}).get("sweep")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def by_sweep(items: list[S.AuditOut]) -> list[tuple[int | None, list[S.AuditOut]]]:
    """``items`` grouped by the sweep they are about, groups in order of their newest entry; the
    entries about no sweep form one group (``None``) in the same order."""
    groups: dict[int | None, list[S.AuditOut]] = {}
    for item in items:
        groups.setdefault(item.sweep, []).append(item)
    return list(groups.items())


def audit(
    session: Session,
    *,
    actor: str | None,
    action: str | None,
    outcome: str | None,
    target: str | None,
    page: int,
    per_page: int,
    caused_by: str | None = None,
    hide_plumbing: bool = False,
) -> S.Page[S.AuditOut]:
    stmt = select(AuditEntry).order_by(AuditEntry.id.desc())
    if hide_plumbing:
        stmt = stmt.where(not_(_plumbing()))
    if actor:
        stmt = stmt.where(AuditEntry.actor == actor)
    if caused_by:
        stmt = stmt.where(AuditEntry.caused_by == caused_by)
    if action:
        stmt = stmt.where(AuditEntry.action.startswith(action, autoescape=True))
    if outcome:
        stmt = stmt.where(AuditEntry.outcome == outcome)
    if target:
        stmt = stmt.where(AuditEntry.target.contains(target, autoescape=True))
    rows, more = page_of(session, stmt, page, per_page)
    items = [
        S.AuditOut(
            id=a.id,
            at=aware(a.at),
            actor=a.actor,
            caused_by=a.caused_by,
            action=a.action,
            target=a.target,
            outcome=a.outcome,
            detail=a.detail,
            delivery_id=a.delivery_id,
            sweep=sweep_of(a.detail),
        )
        for a in rows
    ]
    return S.Page[S.AuditOut](items=items, page=page, per_page=per_page, has_next=more)
