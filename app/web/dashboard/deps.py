"""What dashboard routes depend on: a database session, who is looking, paging parameters."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Query, Request
from sqlalchemy.orm import Session

from app.db import engine_for
from app.web.dashboard.auth import Identity, SignInRequired, current_settings, operator, viewer
from app.web.dashboard.data.common import MAX_PER_PAGE


def db(request: Request) -> Iterator[Session]:
    session = Session(engine_for(current_settings(request).database_url), expire_on_commit=False)
    try:
        yield session
    finally:
        session.close()


def viewer_page(request: Request) -> Identity | None:
    """Like ``viewer`` but a page redirects to the sign-in form instead of answering 401."""
    try:
        return viewer(request)
    except SignInRequired as exc:
        raise HTTPException(
            303,
            "sign in first",
            headers={"Location": "/login?next=" + urllib.parse.quote(exc.next_url, safe="")},
        ) from None


DB = Annotated[Session, Depends(db)]
Viewer = Annotated[Identity | None, Depends(viewer)]
PageViewer = Annotated[Identity | None, Depends(viewer_page)]
Operator = Annotated[Identity, Depends(operator)]
PageNo = Annotated[int, Query(ge=1, le=100_000, description="1-based page")]
PerPage = Annotated[int, Query(ge=1, le=MAX_PER_PAGE)]
