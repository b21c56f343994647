"""The FastAPI app factory: webhooks, health, metrics, and the dashboard."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from app.settings import Settings, get_settings


class _StoredDeliveries:
    """Counts read from the database at scrape time, so they are right across processes."""

    def collect(self) -> Any:
        from sqlalchemy import func, select

        from app.db import session_scope
        from app.flows.ingest import oldest_unprocessed, queue_progress
        from app.models import Delivery

        stored = GaugeMetricFamily(
            "sweepbot_deliveries_stored", "Stored deliveries by event and status", labels=["event", "status"]
        )
        try:
            with session_scope() as session:
                rows = session.execute(
                    select(Delivery.event, Delivery.status, func.count()).group_by(
                        Delivery.event, Delivery.status
                    )
                ).all()
                oldest = oldest_unprocessed(session)
                consumed = queue_progress(session).consumed_at
        except Exception:
            rows, oldest, consumed = [], None, None
        for event, status, count in rows:
            stored.add_metric([event, status], float(count))
        yield stored
        t = datetime.now(UTC)
        yield GaugeMetricFamily(
            "sweepbot_oldest_unprocessed_delivery_age_seconds",
            "Age of the oldest stored delivery not yet done, ignored or failed (0 when none)",
            value=(t - oldest).total_seconds() if oldest is not None else 0.0,
        )
        if consumed is not None:
            yield GaugeMetricFamily(
                "sweepbot_delivery_consumed_age_seconds",
                "Seconds since a worker last started on deliveries",
                value=(t - consumed).total_seconds(),
            )


def _registry() -> CollectorRegistry:
    from prometheus_client import REGISTRY, multiprocess

    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    return registry


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    settings.check_production()
    from app.logging import configure

    configure(settings.log_level, settings.log_json)

    from fastapi_offline import FastAPIOffline

    # The API docs' JavaScript and CSS come from the installed package, not a CDN: /docs renders
    # on a machine with no internet access (and sends no visitor's browser to a third party).
    # No /redoc: ReDoc's sidebar fetches its logo from the vendor's CDN whatever the asset source.
    api = FastAPIOffline(
        redoc_url=None,
        title="sweepbot",
        version="0.1.0",
        description="GitHub bot and sweep scheduler for an LLM-inference benchmark repository.",
    )
    from app.web.secheaders import SecurityHeaders
    from app.web.webhooks import install as install_webhooks

    api.add_middleware(SecurityHeaders)  # CSP, no framing, nosniff, referrer policy (not on webhooks)
    install_webhooks(api)  # a plain ASGI route in front of the stack (issue 19)

    stored = _StoredDeliveries()
    scrape_registry = CollectorRegistry()
    scrape_registry.register(stored)

    @api.get("/healthz", tags=["health"], summary="The process is up")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @api.get(
        "/readyz",
        tags=["health"],
        summary="Database and broker are reachable, and workers consume what waits",
    )
    def readyz() -> JSONResponse:
        from app.flows.ingest import broker_health

        db: dict[str, Any]
        try:
            from sqlalchemy import text

            from app.db import session_scope

            with session_scope() as session:
                session.execute(text("SELECT 1"))
            db = {"ok": True}
        except Exception as exc:
            db = {"ok": False, "error": f"{exc.__class__.__name__}: {exc}"}
        broker = broker_health()
        consumption: dict[str, Any] = {"ok": False, "reason": "database unreachable"}
        if db["ok"]:
            from app.flows.ingest import consumption_health

            try:
                with session_scope() as session:
                    consumption = consumption_health(session)
            except Exception as exc:
                consumption = {"ok": False, "reason": f"{exc.__class__.__name__}: {exc}"}
        ok = bool(db["ok"] and broker["ok"] and consumption["ok"])
        return JSONResponse(
            {"ready": ok, "database": db, "broker": broker, "consumption": consumption},
            status_code=200 if ok else 503,
        )

    @api.get("/metrics", tags=["health"], summary="Prometheus metrics", response_class=Response)
    def metrics() -> Response:
        from app.db import session_scope
        from app.flows.ingest import queue_depth
        from app.metrics import QUEUE_DEPTH

        try:
            with session_scope() as session:
                depth = queue_depth(session)
            for status in ("received", "queued", "processing", "retry"):
                QUEUE_DEPTH.labels(status=status).set(depth.get(status, 0))
            from app.flows.recovery import counts
            from app.metrics import REDELIVERY_STATE

            with session_scope() as session:
                for state, n in counts(session).items():
                    REDELIVERY_STATE.labels(state=state).set(n)
        except Exception:
            pass
        body = generate_latest(_registry()) + generate_latest(scrape_registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    _mount_dashboard(api)
    return api


def _mount_dashboard(api: FastAPI) -> None:
    from fastapi.staticfiles import StaticFiles

    from app.web.dashboard import build_router

    static = Path(__file__).parent / "dashboard" / "static"
    if static.is_dir():
        api.mount("/static", StaticFiles(directory=static), name="static")
    api.include_router(build_router())
