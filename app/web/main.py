"""The FastAPI app factory: webhooks, health, metrics, and the dashboard."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily
from sqlalchemy import func, select, text

from app.adapters import broker  # called as broker.broker_health: tests replace it there
from app.db import session_scope
from app.flows.ingest import consumption_health, oldest_unprocessed, queue_depth, queue_progress
from app.flows.recovery import counts
from app.logging import configure
from app.metrics import PUBLICATION_PROBLEMS, QUEUE_DEPTH, REDELIVERY_STATE
from app.models import Delivery
from app.settings import Settings, get_settings
from app.store.publications import problem_counts
from app.web.dashboard import STATIC_DIR
from app.web.dashboard.routes import build_router
from app.web.secheaders import SecurityHeaders
from app.web.webhooks import edge_first


class _StoredDeliveries:
    """Counts read from the database at scrape time, so they are right across processes."""

    def collect(self) -> Any:
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
        try:
            with session_scope() as session:
                depth = queue_depth(session)
            for status in ("received", "queued", "processing", "retry"):
                QUEUE_DEPTH.labels(status=status).set(depth.get(status, 0))
            with session_scope() as session:
                for state, n in counts(session).items():
                    REDELIVERY_STATE.labels(state=state).set(n)
                for case, n in problem_counts(session).items():
                    PUBLICATION_PROBLEMS.labels(case=case).set(n)
        except Exception:
            pass
        body = generate_latest(_registry()) + generate_latest(scrape_registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    _mount_dashboard(api)
    return api


def _mount_dashboard(api: FastAPI) -> None:
    if STATIC_DIR.is_dir():
        api.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    api.include_router(build_router())
