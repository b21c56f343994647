"""Rendering a dashboard page: the templates, the context every page gets, query-string links,
and the one rule for where a form goes next."""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from app.web.dashboard.auth import CSRF_FIELD, Identity, current_settings, oauth_enabled, session_of
from app.web.dashboard.charts import short_image

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
TEMPLATES.env.globals["short_image"] = short_image
TEMPLATES.env.filters["urlq"] = lambda v: urllib.parse.quote(str(v), safe="")


def safe_next(value: str | None, default: str = "/") -> str:
    """Only same-site relative paths are followed after sign-in or an action: never an open redirect."""
    if value and value.startswith("/") and not value.startswith("//") and "\\" not in value:
        return value
    return default


def render(request: Request, template: str, ident: Identity | None, **context: Any) -> HTMLResponse:
    settings = current_settings(request)
    state = session_of(request)
    flash = state.pop("flash") if state.get("flash") else None
    return TEMPLATES.TemplateResponse(
        request,
        template,
        {
            "identity": ident,
            "csrf_token": state.csrf,
            "csrf_field": CSRF_FIELD,
            "flash": flash,
            "oauth": oauth_enabled(settings),
            "public": settings.dashboard_public,
            "path": request.url.path,
            "query": request.url.query,
            **context,
        },
    )


def qs(request: Request, **changes: Any) -> str:
    """The current query string with ``changes`` applied (pagination links keep the filters)."""
    params = dict(request.query_params)
    for key, value in changes.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = str(value)
    return "?" + urllib.parse.urlencode(params) if params else "?"
