"""Security headers for what a browser renders (the dashboard, its API, the API docs).

Built with ``secure`` (a small, maintained header library) and applied by a pure ASGI middleware
that only adds headers to the response start: no body buffering, nothing on the webhook route,
whose callers are not browsers.

The dashboard needs nothing inline: its script (htmx) and stylesheet are files under /static,
its charts are inline SVG with presentation attributes (not ``style``), so the policy is strict.
The Swagger UI page at /docs (and ReDoc) starts with an inline script, so those two pages alone
also allow inline script and style. Every page refuses to be framed (clickjacking).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import secure

_SELF, _NONE = "'self'", "'none'"


def _policy(*, allow_inline: bool) -> secure.Secure:
    inline = ("'unsafe-inline'",) if allow_inline else ()
    csp = (
        secure.ContentSecurityPolicy()
        .default_src(_SELF)
        .script_src(_SELF, *inline)
        .style_src(_SELF, *inline)
        .img_src(_SELF, "data:")
        .connect_src(_SELF)
        .font_src(_SELF)
        .object_src(_NONE)
        .base_uri(_NONE)
        .form_action(_SELF)
        .frame_ancestors(_NONE)
    )
    return secure.Secure(
        csp=csp,
        xfo=secure.XFrameOptions().deny(),
        xcto=secure.XContentTypeOptions().nosniff(),
        referrer=secure.ReferrerPolicy().strict_origin_when_cross_origin(),
        permissions=secure.PermissionsPolicy().geolocation().microphone().camera(),
        coop=secure.CrossOriginOpenerPolicy().same_origin(),
    )


_STRICT = [
    (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in _policy(allow_inline=False).headers.items()
]
_DOCS = [
    (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in _policy(allow_inline=True).headers.items()
]
_DOCS_PATHS = ("/docs", "/redoc")
_SKIP_PREFIXES = ("/webhooks/",)


def headers_for(path: str) -> list[tuple[bytes, bytes]]:
    """The headers a response to ``path`` gets (pure); none for the webhook route."""
    if path.startswith(_SKIP_PREFIXES):
        return []
    if path in _DOCS_PATHS or path.startswith(("/docs/", "/redoc/")):
        return _DOCS
    return _STRICT


ASGIApp = Callable[[MutableMapping[str, Any], Any, Any], Awaitable[None]]


class SecurityHeaders:
    """ASGI middleware: adds ``headers_for(path)`` to every HTTP response it has not set itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = headers_for(str(scope.get("path", "")))
        if not extra:
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []), *(h for h in extra if h[0] not in present)]
            await send(message)

        await self.app(scope, receive, send_with_headers)
