"""Helpers every read-side module uses: paging, aware datetimes, github.com-style links."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select
from sqlalchemy.orm import Session

from app.settings import Settings

MAX_PER_PAGE = 200


def aware(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; everything stored is UTC."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def page_of(session: Session, stmt: Select[Any], page: int, per_page: int) -> tuple[list[Any], bool]:
    """One page of ``stmt``'s rows, and whether there is a next one (never a COUNT)."""
    page = max(1, page)
    per_page = max(1, min(MAX_PER_PAGE, per_page))
    rows = list(session.scalars(stmt.offset((page - 1) * per_page).limit(per_page + 1)))
    return rows[:per_page], len(rows) > per_page


def html_base(settings: Settings) -> str:
    """Where github.com-style pages live: api.github.com -> github.com, <host>/api/v3 -> <host>."""
    api = settings.github_api_url.rstrip("/")
    if api == "https://api.github.com":
        return "https://github.com"
    if api.endswith("/api/v3"):
        return api[: -len("/api/v3")]
    return settings.oauth_base_url.rstrip("/")
