"""The FastAPI app factory: webhooks, health, metrics, and the dashboard."""

from __future__ import annotations

import os
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, multiprocess
from sqlalchemy import text

from app.adapters import broker  # called as broker.broker_health: tests replace it there
from app.db import session_scope
from app.flows.ingest.deliveries import consumption_health
from app.logging import configure
from app.settings import Settings, get_settings
from app.web.dashboard import STATIC_DIR
from app.web.dashboard.routes import build_router
from app.web.dbmetrics import DatabaseFigures
from app.web.secheaders import SecurityHeaders
from app.web.webhooks import edge_first


def _registry() -> CollectorRegistry:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    return registry


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    settings.check_production()
    configure(settings.log_level, settings.log_json)

    # The API docs' JavaScript and CSS come from the installed package, not a CDN: /docs renders
    # on a machine with no internet access (and sends no visitor's browser to a third party).
    # No /redoc: ReDoc's sidebar fetches its logo from the vendor's CDN whatever the asset source.
    api = FastAPIOffline(
        redoc_url=None,
        title="sweepbot",
        version="0.1.0",
        description="GitHub bot and sweep scheduler for an LLM-inference benchmark repository.",
    )
    api.add_middleware(SecurityHeaders)  # CSP, no framing, nosniff, referrer policy (not on webhooks)
    api = edge_first(api)  # the webhook route is answered before FastAPI's layers (issue 19)

    scrape_registry = CollectorRegistry()
    scrape_registry.register(DatabaseFigures())  # read at scrape time; absent while the database is down

    @api.get("/healthz", tags=["health"], summary="The process is up")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @api.get(
        "/readyz",
        tags=["health"],
        summary="Database and broker are reachable, and workers consume what waits",
    )
    def readyz() -> JSONResponse:
        db: dict[str, Any]
        try:
            with session_scope() as session:
                session.execute(text("SELECT 1"))
            db = {"ok": True}
        except Exception as exc:
            db = {"ok": False, "error": f"{exc.__class__.__name__}: {exc}"}
        queue_ok = broker.broker_health()
        consumption: dict[str, Any] = {"ok": False, "reason": "database unreachable"}
        if db["ok"]:
            try:
                with session_scope() as session:
                    consumption = consumption_health(session)
            except Exception as exc:
                consumption = {"ok": False, "reason": f"{exc.__class__.__name__}: {exc}"}
        ok = bool(db["ok"] and queue_ok["ok"] and consumption["ok"])
        return JSONResponse(
            {"ready": ok, "database": db, "broker": queue_ok, "consumption": consumption},
            status_code=200 if ok else 503,
        )

    @api.get("/metrics", tags=["health"], summary="Prometheus metrics", response_class=Response)
    def metrics() -> Response:
        body = generate_latest(_registry()) + generate_latest(scrape_registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    _mount_dashboard(api)
    return api


def _mount_dashboard(api: FastAPI) -> None:
    if STATIC_DIR.is_dir():
        api.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    api.include_router(build_router())
