"""Who is asking, and may they act: operator identities, the signed session cookie, CSRF.

Identities come from, in order:

- ``Authorization: Bearer <token>`` matching one of ``SWEEPBOT_OPERATOR_TOKENS``;
- ``Authorization: Basic`` matching one of ``SWEEPBOT_OPERATOR_BASIC`` (``user:password``);
- the signed session cookie set by the sign-in form (token or user/password) or by GitHub OAuth
  (restricted to ``SWEEPBOT_OAUTH_ALLOWED_ORG`` / ``..._TEAM``). The cookie names a server-side
  session (``app/store/sessions.py``): it authenticates only while that row lives, so sign-out
  revokes every saved copy of it. Failed sign-ins are limited per client address and per account
  (``app/core/signinlimit.py``), for the form and for ``Basic``/``Bearer`` headers alike.

CSRF: a browser attaches cookies to cross-site requests, so every state-changing request made
with the session cookie must carry the session's CSRF token (form field ``csrf_token`` or header
``X-CSRF-Token``, which htmx sends). Header credentials are never ambient — the app never answers
with a ``WWW-Authenticate: Basic`` challenge, so a browser never caches basic credentials for
this origin — and need no token. A session request a browser marks ``Sec-Fetch-Site: cross-site`` is
refused outright. Cookies are ``HttpOnly`` and ``SameSite=Lax``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog
from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute
from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.core.signinlimit import FailureLog, Limit, account_key, sign_in_keys
from app.db import engine_for
from app.settings import Settings, get_settings
from app.store import sessions
from app.store.audit import record

log = structlog.get_logger(__name__)

COOKIE = "sweepbot_session"
SESSION_MAX_AGE = 12 * 3600
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf_token"


def current_settings(request: Request) -> Settings:
    """The app's settings when the factory stored them, else the process settings."""
    settings = getattr(request.app.state, "settings", None)
    return settings if isinstance(settings, Settings) else get_settings()


@dataclass(frozen=True)
class Identity:
    name: str  # operator name, basic user, or GitHub login
    via: str  # "token", "basic", "session", "github"

    @property
    def actor(self) -> str:
        """What the audit log records as the actor."""
        return self.name if self.via == "github" else f"operator:{self.name}"

    @property
    def needs_csrf(self) -> bool:
        return self.via in ("session", "github")


# ---------------------------------------------------------------------- session cookie


def _secret(settings: Settings) -> str:
    if settings.session_secret is not None:
        return settings.session_secret.get_secret_value()
    # Embedded default: a random secret kept under the data dir, so sign-ins survive a restart.
    # Several API replicas must share SWEEPBOT_SESSION_SECRET instead.
    path = Path(settings.data_dir) / "session_secret"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        value = secrets.token_urlsafe(32)
        try:
            with open(path, "x") as fh:  # "x": a concurrent creator wins, we re-read its value
                fh.write(value)
            path.chmod(0o600)
        except FileExistsError:
            return path.read_text().strip()
        return value


def _serializer(settings: Settings) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(_secret(settings), salt="sweepbot-dashboard-session")


class SessionState:
    """The decoded cookie: ``csrf`` always; ``user``/``via`` once signed in; ``oauth_state`` mid-OAuth."""

    def __init__(self, data: dict[str, Any] | None = None) -> None:
        self.data: dict[str, Any] = dict(data or {})
        self.dirty = False
        if not isinstance(self.data.get("csrf"), str):
            self.data["csrf"] = secrets.token_urlsafe(24)
            self.dirty = True

    @property
    def csrf(self) -> str:
        return str(self.data["csrf"])

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def set(self, key: str, value: Any) -> None:
        self.data[key] = value
        self.dirty = True

    def pop(self, key: str) -> Any:
        self.dirty = True
        return self.data.pop(key, None)

    def sign_in(self, session_id: str) -> None:
        # A fresh CSRF token at sign-in: a token planted before sign-in is worthless after it.
        # Who signed in is the server's record of ``session_id``, not the cookie's word.
        self.data = {"csrf": secrets.token_urlsafe(24), "sid": session_id, "iat": int(time.time())}
        self.dirty = True

    def sign_out(self) -> None:
        self.data = {"csrf": secrets.token_urlsafe(24)}
        self.dirty = True


def load_session(request: Request, settings: Settings) -> SessionState:
    raw = request.cookies.get(COOKIE)
    data: dict[str, Any] | None = None
    if raw:
        try:
            loaded = _serializer(settings).loads(raw, max_age=SESSION_MAX_AGE)
            data = loaded if isinstance(loaded, dict) else None
        except BadSignature:
            data = None
    state = SessionState(data)
    if raw and data is None:
        state.dirty = True  # replace a bad or expired cookie
    return state


def save_session(request: Request, response: Response, settings: Settings, state: SessionState) -> None:
    if not state.dirty:
        return
    response.set_cookie(
        COOKIE,
        _serializer(settings).dumps(state.data),
        max_age=SESSION_MAX_AGE,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path="/",
    )


def session_of(request: Request) -> SessionState:
    state = getattr(request.state, "dash_session", None)
    if state is None:
        state = load_session(request, current_settings(request))
        request.state.dash_session = state
    return state


class DashboardRoute(APIRoute):
    """Loads the session cookie before the endpoint and writes it back when it changed.

    A route class rather than an app middleware, so the dashboard stays one ``include_router``.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        original = super().get_route_handler()

        async def handler(request: Request) -> Response:
            state = session_of(request)
            response = await original(request)
            save_session(request, response, current_settings(request), state)
            return response

        return handler


# ---------------------------------------------------------------------- credentials


def _token_name(token: str) -> str:
    # Operator tokens carry no name; a short digest names one in the audit log without leaking it.
    return "token-" + hashlib.sha256(token.encode()).hexdigest()[:8]


def check_token(settings: Settings, token: str) -> Identity | None:
    given = token.encode()
    found: Identity | None = None
    for candidate in settings.operator_tokens:
        value = candidate.get_secret_value()
        # Compare against every configured token (constant time each), no early exit.
        if value and hmac.compare_digest(value.encode(), given):
            found = Identity(_token_name(value), "token")
    return found


def check_basic(settings: Settings, user: str, password: str) -> Identity | None:
    found: Identity | None = None
    for entry in settings.operator_basic:
        name, sep, secret = entry.partition(":")
        if not sep or not name:
            continue
        ok_user = hmac.compare_digest(name.encode(), user.encode())
        ok_pass = hmac.compare_digest(secret.encode(), password.encode())
        if ok_user and ok_pass:
            found = Identity(name, "basic")
    return found


def header_identity(request: Request, settings: Settings) -> Identity | None:
    """Identity from the Authorization header; 401 when one is given and it is wrong."""
    header = request.headers.get("authorization")
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    scheme = scheme.lower()
    value = value.strip()
    if scheme == "bearer":
        keys = check_sign_in_allowed(request, None)
        ident = check_token(settings, value)
        sign_in_result(request, keys, ident, None)
        if ident is None:
            raise HTTPException(
                401,
                "the bearer token is not a configured operator token (SWEEPBOT_OPERATOR_TOKENS)",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return ident
    if scheme == "basic":
        try:
            user, _, password = base64.b64decode(value, validate=True).decode("utf-8").partition(":")
        except (ValueError, UnicodeDecodeError):
            raise HTTPException(
                401, "malformed Basic credentials: expected base64 of user:password"
            ) from None
        keys = check_sign_in_allowed(request, user)
        ident = check_basic(settings, user, password)
        sign_in_result(request, keys, ident, user)
        if ident is None:
            # Deliberately no "WWW-Authenticate: Basic": a browser must never cache these.
            raise HTTPException(401, "wrong user or password (SWEEPBOT_OPERATOR_BASIC)")
        return ident
    raise HTTPException(401, f"unsupported Authorization scheme {scheme!r}: use Bearer or Basic")


def identity_of(request: Request) -> Identity | None:
    settings = current_settings(request)
    ident = header_identity(request, settings)
    if ident is not None:
        return ident
    return session_identity(request, settings)


_UNCHECKED = object()


def session_identity(request: Request, settings: Settings) -> Identity | None:
    """Who the session cookie's server-side session belongs to (checked once per request)."""
    cached = getattr(request.state, "dash_identity", _UNCHECKED)
    if cached is not _UNCHECKED:
        return cached  # type: ignore[return-value]  # only ever an Identity or None
    state = session_of(request)
    session_id = state.get("sid")
    found: Identity | None = None
    if isinstance(session_id, str):
        try:
            with Session(engine_for(settings.database_url)) as db:
                live = sessions.session_user(db, session_id, datetime.now(UTC))
        except SQLAlchemyError as exc:
            # Fail closed while the database is away, but keep the cookie: the session is back with it.
            log.warning("dashboard_session_unchecked", error=exc.__class__.__name__)
            return None
        if live is None:
            state.sign_out()  # signed out elsewhere, or expired: the cookie is replaced
        else:
            found = Identity(*live)
    request.state.dash_identity = found
    return found


def open_session(request: Request, name: str, via: str) -> None:
    """Sign the browser in as ``name``: a server-side session, named by the cookie."""
    settings = current_settings(request)
    with Session(engine_for(settings.database_url)) as db:
        session_id = sessions.start_session(
            db, user=name, via=via, now=datetime.now(UTC), ttl=timedelta(seconds=SESSION_MAX_AGE)
        )
        db.commit()
    session_of(request).sign_in(session_id)
    request.state.dash_identity = Identity(name, via)


def close_session(request: Request) -> None:
    """Sign out: the server forgets the session, so no saved copy of the cookie works again."""
    state = session_of(request)
    session_id = state.get("sid")
    if isinstance(session_id, str):
        with Session(engine_for(current_settings(request).database_url)) as db:
            sessions.end_session(db, session_id)
            db.commit()
    state.sign_out()
    request.state.dash_identity = None


# ---------------------------------------------------------------------- sign-in limits


def failure_log(request: Request) -> FailureLog:
    """The app's count of failed sign-ins (one per app: a test's app starts with none)."""
    found = getattr(request.app.state, "signin_failures", None)
    if not isinstance(found, FailureLog):
        found = request.app.state.signin_failures = FailureLog()
    return found


def client_address(request: Request) -> str | None:
    return request.client.host if request.client else None


def check_sign_in_allowed(request: Request, account: str | None) -> list[tuple[str, Limit]]:
    """The keys an attempt counts against; 429 with ``Retry-After`` when one is over its limit."""
    keys = sign_in_keys(client_address(request), account)
    verdict = failure_log(request).verdict(keys, time.monotonic())
    if not verdict.allowed:
        log.warning("dashboard_sign_in_limited", why=verdict.why, retry_after=verdict.retry_after)
        raise HTTPException(
            429,
            f"too many failed sign-ins ({verdict.why}); try again in {verdict.retry_after} seconds",
            headers={"Retry-After": str(verdict.retry_after)},
        )
    return keys


def sign_in_result(
    request: Request, keys: list[tuple[str, Limit]], ident: Identity | None, account: str | None
) -> None:
    """Count a failed attempt against its keys; a success clears its account's failures."""
    log_ = failure_log(request)
    if ident is None:
        log_.failed(keys, time.monotonic())
    elif account:
        log_.succeeded(account_key(account))


def operators_configured(settings: Settings) -> bool:
    return bool(settings.operator_tokens or settings.operator_basic or oauth_enabled(settings))


def oauth_enabled(settings: Settings) -> bool:
    return bool(
        settings.oauth_client_id
        and settings.oauth_client_secret
        and (settings.oauth_allowed_org or settings.oauth_allowed_team)
    )


# ---------------------------------------------------------------------- dependencies


class SignInRequired(Exception):
    """A read-only HTML page when the dashboard is not public: redirect to the sign-in form."""

    def __init__(self, next_url: str) -> None:
        super().__init__(next_url)
        self.next_url = next_url


def viewer(request: Request) -> Identity | None:
    """Read access: anyone when ``SWEEPBOT_DASHBOARD_PUBLIC`` (the default), else a signed-in identity."""
    ident = identity_of(request)
    if ident is None and not current_settings(request).dashboard_public:
        if request.url.path.startswith("/api/"):
            raise HTTPException(
                401,
                "sign in first: this dashboard is not public (SWEEPBOT_DASHBOARD_PUBLIC=false); "
                "send Authorization: Bearer <operator token>",
            )
        raise SignInRequired(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
    return ident


async def _submitted_csrf(request: Request) -> str | None:
    token = request.headers.get(CSRF_HEADER)
    if token:
        return token
    ctype = request.headers.get("content-type", "")
    if ctype.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        form = await request.form()
        value = form.get(CSRF_FIELD)
        return value if isinstance(value, str) else None
    return None


async def check_csrf(request: Request) -> None:
    """403 unless the request carries the session's CSRF token (and is not cross-site)."""
    if request.headers.get("sec-fetch-site") == "cross-site":
        raise HTTPException(403, "cross-site request refused")
    submitted = await _submitted_csrf(request)
    expected = session_of(request).csrf
    if not submitted or not hmac.compare_digest(submitted.encode(), expected.encode()):
        raise HTTPException(
            403,
            "missing or wrong CSRF token: reload the page and try again "
            "(htmx sends it as X-CSRF-Token; forms as the csrf_token field)",
        )


async def operator(request: Request) -> Identity:
    """An action's dependency: 401 without an identity, 403 without a valid CSRF token."""
    ident = identity_of(request)
    if ident is None:
        raise HTTPException(
            401,
            "this action needs an operator: sign in at /login, or send "
            "Authorization: Bearer <token from SWEEPBOT_OPERATOR_TOKENS>",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if ident.needs_csrf:
        try:
            await check_csrf(request)
        except HTTPException as exc:
            _audit_refusal(request, ident, str(exc.detail))
            raise
    return ident


def _audit_refusal(request: Request, ident: Identity, reason: str) -> None:
    # A known operator whose request failed the CSRF check: worth a trace (a forged request, or a
    # stale page). Anonymous refusals are only logged, so strangers cannot fill the audit table.
    with Session(engine_for(current_settings(request).database_url)) as session:
        record(
            session,
            actor=ident.actor,
            action="dashboard.refused",
            target=request.url.path,
            outcome="refused",
            detail={"reason": reason, "method": request.method},
        )
        session.commit()
