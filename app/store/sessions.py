"""The dashboard's server-side sessions: start one at sign-in, check one per request, end it at
sign-out. The cookie carries a random id; the table keeps only its SHA-256."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.models.sessions import DashboardSession


def _key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def start_session(session: Session, *, user: str, via: str, now: datetime, ttl: timedelta) -> str:
    """A new session's id (for the cookie); expired rows are removed on the way."""
    session.execute(delete(DashboardSession).where(DashboardSession.expires_at <= now))
    session_id = secrets.token_urlsafe(32)
    session.add(
        DashboardSession(id=_key(session_id), user=user, via=via, created_at=now, expires_at=now + ttl)
    )
    return session_id


def session_user(session: Session, session_id: str, now: datetime) -> tuple[str, str] | None:
    """(user, via) of a live session, or None when it was ended, expired or never existed."""
    row = session.execute(
        select(DashboardSession.user, DashboardSession.via, DashboardSession.expires_at).where(
            DashboardSession.id == _key(session_id)
        )
    ).first()
    if row is None:
        return None
    expires = row.expires_at if row.expires_at.tzinfo else row.expires_at.replace(tzinfo=now.tzinfo)
    return (row.user, row.via) if expires > now else None


def end_session(session: Session, session_id: str) -> bool:
    """Revoke a session; True when it was live."""
    result = session.execute(delete(DashboardSession).where(DashboardSession.id == _key(session_id)))
    return bool(getattr(result, "rowcount", 0))
