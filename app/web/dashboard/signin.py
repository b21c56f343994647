"""Sign-in: the form (operator token, or user and password) and GitHub OAuth restricted to an org/team.

GitHub OAuth web flow: ``/auth/github/login`` redirects to ``<oauth_base_url>/login/oauth/authorize``
with a random ``state`` kept in the signed session; ``/auth/github/callback`` checks that state,
trades the code for a user token, reads ``GET /user``, and lets the user in only when
``GET /orgs/{org}/members/{user}`` answers 204 (or, with a team configured, the team membership is
``active``). The token is used for those checks only and never stored.
"""

from __future__ import annotations

import secrets
import urllib.parse
from typing import Annotated, Any

import httpx
import structlog
from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.exc import SQLAlchemyError

from app.settings import Settings
from app.web.dashboard.auth import (
    Identity,
    check_basic,
    check_csrf,
    check_sign_in_allowed,
    check_token,
    close_session,
    current_settings,
    identity_of,
    oauth_enabled,
    open_session,
    operators_configured,
    session_of,
    sign_in_result,
)
from app.web.dashboard.render import render, safe_next

log = structlog.get_logger(__name__)

_DB_DOWN = "The database is unreachable, so the server could not {what}; try again in a minute."


class OAuthRefused(Exception):
    """The GitHub user may not operate this dashboard; the message says why."""


def allowed_team(settings: Settings) -> tuple[str, str] | None:
    """``SWEEPBOT_OAUTH_ALLOWED_TEAM`` as ``org/team`` or a team slug of ``..._ALLOWED_ORG``."""
    team = settings.oauth_allowed_team
    if not team:
        return None
    if "/" in team:
        org, _, slug = team.partition("/")
        return org, slug
    if not settings.oauth_allowed_org:
        raise OAuthRefused(
            "SWEEPBOT_OAUTH_ALLOWED_TEAM needs an org: write it as org/team or set SWEEPBOT_OAUTH_ALLOWED_ORG"
        )
    return settings.oauth_allowed_org, team


def github_user_allowed(settings: Settings, token: str, client: httpx.Client) -> str:
    """The login of the token's user when they belong to the allowed org/team; else ``OAuthRefused``."""
    api = settings.github_api_url.rstrip("/")
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json"}
    resp = client.get(f"{api}/user", headers=headers)
    if resp.status_code != 200:
        raise OAuthRefused(f"GitHub did not accept the sign-in token (GET /user answered {resp.status_code})")
    login = str(resp.json().get("login") or "")
    if not login:
        raise OAuthRefused("GitHub's /user answer has no login")
    team = allowed_team(settings)
    if team is not None:
        org, slug = team
        q = urllib.parse.quote
        resp = client.get(f"{api}/orgs/{q(org)}/teams/{q(slug)}/memberships/{q(login)}", headers=headers)
        if resp.status_code == 200 and resp.json().get("state") == "active":
            return login
        raise OAuthRefused(f"{login} is not an active member of the team {org}/{slug}")
    org = settings.oauth_allowed_org or ""
    resp = client.get(
        f"{api}/orgs/{urllib.parse.quote(org)}/members/{urllib.parse.quote(login)}",
        headers=headers,
        follow_redirects=False,
    )
    if resp.status_code == 204:
        return login
    raise OAuthRefused(
        f"{login} is not a member of the organization {org} (GitHub answered {resp.status_code})"
    )


def signin_routes(router: APIRouter) -> None:
    """The sign-in form, sign-out, and the GitHub OAuth web flow."""
    _form_routes(router)
    _oauth_routes(router)


def _login_form(
    request: Request, ident: Identity | None, nxt: str | None, error: str | None, status: int = 200
) -> HTMLResponse:
    settings = current_settings(request)
    page = render(
        request,
        "login.html",
        ident,
        title="Sign in",
        next=safe_next(nxt),
        error=error,
        configured=operators_configured(settings),
        basic=bool(settings.operator_basic),
        tokens=bool(settings.operator_tokens),
    )
    page.status_code = status
    return page


def _form_routes(router: APIRouter) -> None:
    @router.get("/login", response_class=HTMLResponse, include_in_schema=False)
    def login_page(request: Request, next: str | None = None, error: str | None = None) -> HTMLResponse:
        return _login_form(request, identity_of(request), next, error)

    @router.post("/login", include_in_schema=False)
    async def login_submit(
        request: Request,
        token: Annotated[str, Form()] = "",
        username: Annotated[str, Form()] = "",
        password: Annotated[str, Form()] = "",
        next: Annotated[str, Form()] = "/",
    ) -> Response:
        await check_csrf(request)  # login CSRF: a stranger must not sign a browser into their identity
        settings = current_settings(request)
        account = None if token else username
        try:
            keys = check_sign_in_allowed(request, account)
        except HTTPException as exc:  # the form again, saying when to come back
            page = _login_form(request, None, next, f"Sign-in refused: {exc.detail}.", status=429)
            page.headers.update(exc.headers or {})
            return page
        ident = None
        if token:
            ident = check_token(settings, token.strip())
        elif username:
            ident = check_basic(settings, username, password)
        sign_in_result(request, keys, ident, account)
        if ident is None:
            log.info("dashboard_sign_in_refused", via="token" if token else "basic")
            return _login_form(request, None, next, "Wrong token, or wrong user or password.")
        try:
            open_session(request, ident.name, "session")
        except SQLAlchemyError:
            return _login_form(request, None, next, _DB_DOWN.format(what="sign you in"), status=503)
        log.info("dashboard_sign_in", actor=ident.actor)
        return RedirectResponse(safe_next(next), status_code=303)

    @router.post("/logout", include_in_schema=False)
    async def logout(request: Request) -> Response:
        await check_csrf(request)
        try:
            close_session(request)
        except SQLAlchemyError:
            # The session could not be ended on the server: saying "signed out" would be a lie.
            raise HTTPException(503, _DB_DOWN.format(what="end the session")) from None
        return RedirectResponse("/", status_code=303)


def _oauth_routes(router: APIRouter) -> None:
    @router.get("/auth/github/login", include_in_schema=False)
    def oauth_start(request: Request, next: str | None = None) -> Response:
        settings = current_settings(request)
        if not oauth_enabled(settings):
            raise HTTPException(
                404,
                "GitHub sign-in is not configured: set SWEEPBOT_OAUTH_CLIENT_ID, "
                "SWEEPBOT_OAUTH_CLIENT_SECRET and SWEEPBOT_OAUTH_ALLOWED_ORG (or _TEAM)",
            )
        state = secrets.token_urlsafe(24)
        session = session_of(request)
        session.set("oauth_state", state)
        session.set("oauth_next", safe_next(next))
        params = {
            "client_id": settings.oauth_client_id or "",
            "state": state,
            "scope": "read:org",
            "redirect_uri": str(request.url_for("oauth_callback")),
            "allow_signup": "false",
        }
        url = f"{settings.oauth_base_url.rstrip('/')}/login/oauth/authorize?{urllib.parse.urlencode(params)}"
        return RedirectResponse(url, status_code=302)

    @router.get("/auth/github/callback", name="oauth_callback", include_in_schema=False)
    def oauth_callback(request: Request, code: str = "", state: str = "") -> Response:
        # The one GitHub call a request makes: the sign-in itself (the user is waiting for it).
        settings = current_settings(request)
        session = session_of(request)
        expected = session.pop("oauth_state")
        nxt = safe_next(session.pop("oauth_next"))
        if not oauth_enabled(settings):
            raise HTTPException(404, "GitHub sign-in is not configured")
        if not code or not isinstance(expected, str) or not secrets.compare_digest(state, expected):
            return _login_error("the sign-in expired or did not start here; try again")
        try:
            with httpx.Client(timeout=settings.github_timeout_seconds) as client:
                token = _exchange_code(settings, client, code, str(request.url_for("oauth_callback")))
                login = github_user_allowed(settings, token, client)
        except OAuthRefused as exc:
            log.info("dashboard_oauth_refused", reason=str(exc))
            return _login_error(str(exc))
        except httpx.HTTPError as exc:
            return _login_error(f"GitHub could not be reached for the sign-in ({exc.__class__.__name__})")
        try:
            open_session(request, login, "github")
        except SQLAlchemyError:
            return _login_error(_DB_DOWN.format(what="sign you in"))
        log.info("dashboard_sign_in", actor=login, via="github")
        return RedirectResponse(nxt, status_code=303)


def _exchange_code(settings: Settings, client: httpx.Client, code: str, redirect_uri: str) -> str:
    secret = settings.oauth_client_secret.get_secret_value() if settings.oauth_client_secret else ""
    resp = client.post(
        f"{settings.oauth_base_url.rstrip('/')}/login/oauth/access_token",
        data={
            "client_id": settings.oauth_client_id or "",
            "client_secret": secret,
            "code": code,
            "redirect_uri": redirect_uri,
        },
        headers={"Accept": "application/json"},
    )
    body: dict[str, Any] = (
        resp.json()
        if resp.headers.get("content-type", "").startswith("application/json")
        else dict(urllib.parse.parse_qsl(resp.text))
    )
    token = body.get("access_token")
    if resp.status_code != 200 or not token:
        raise OAuthRefused(
            "GitHub refused the sign-in code: "
            f"{body.get('error_description') or body.get('error') or resp.status_code}"
        )
    return str(token)


def _login_error(message: str) -> Response:
    return RedirectResponse("/login?" + urllib.parse.urlencode({"error": message}), status_code=303)
