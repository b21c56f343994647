"""The dashboard's HTML pages (server-rendered; the same read functions as the JSON API)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse

from app.flows.ingest.redelivery import counts as recovery_counts
from app.flows.nightly.watch import series_view, watched_keys
from app.web.dashboard.auth import current_settings
from app.web.dashboard.charts import nightly_charts, results_charts
from app.web.dashboard.data import fleet, overview, records, results, sweeps, watches
from app.web.dashboard.data.common import html_base
from app.web.dashboard.deps import DB, PageNo, PageViewer
from app.web.dashboard.render import qs, render

HTML: dict[str, Any] = {"response_class": HTMLResponse, "include_in_schema": False}


def page_routes(router: APIRouter) -> None:
    _status_pages(router)
    _sweep_pages(router)
    _record_pages(router)
    _audit_pages(router)


def _status_pages(router: APIRouter) -> None:
    html = HTML

    @router.get("/", **html)
    def overview_page(request: Request, session: DB, ident: PageViewer) -> HTMLResponse:
        return render(
            request,
            "overview.html",
            ident,
            data=overview.overview(session, current_settings(request)),
            title="Overview",
        )

    @router.get("/fleet", **html)
    def fleet_page(request: Request, session: DB, ident: PageViewer) -> HTMLResponse:
        return render(request, "fleet.html", ident, data=fleet.fleet(session), title="Fleet")

    @router.get("/watches", **html)
    def watches_page(
        request: Request,
        session: DB,
        ident: PageViewer,
        repo: str | None = None,
        state: str | None = None,
        page: PageNo = 1,
    ) -> HTMLResponse:
        out = watches.watches(
            session, current_settings(request), repo=repo or None, state=state or None, page=page, per_page=25
        )
        return render(
            request,
            "watches.html",
            ident,
            data=out,
            title="Watches",
            repo=repo or "",
            state=state or "",
            qs=lambda **c: qs(request, **c),
        )

    @router.get("/nightlies", **html)
    def nightlies_page(request: Request, session: DB, ident: PageViewer) -> HTMLResponse:
        return render(request, "nightlies.html", ident, keys=watched_keys(session), title="Nightly watch")

    @router.get("/nightlies/{owner}/{name}/{config_key}", **html)
    def nightly_series_page(
        request: Request, owner: str, name: str, config_key: str, session: DB, ident: PageViewer
    ) -> HTMLResponse:
        view = series_view(session, f"{owner}/{name}", config_key)
        return render(
            request,
            "nightly_series.html",
            ident,
            view=view,
            charts=nightly_charts(view),
            title=f"Nightly series: {config_key}",
        )


def _sweep_pages(router: APIRouter) -> None:
    html = HTML

    @router.get("/sweeps", **html)
    def sweeps_page(
        request: Request,
        session: DB,
        ident: PageViewer,
        repo: str | None = None,
        pr: str | None = None,
        config_key: str | None = None,
        state: str | None = None,
        page: PageNo = 1,
    ) -> HTMLResponse:
        pr_number = int(pr) if pr and pr.strip().isdigit() else None
        out = sweeps.sweeps(
            session,
            repo=repo or None,
            pr=pr_number,
            config_key=config_key or None,
            state=state or None,
            page=page,
            per_page=50,
            base=html_base(current_settings(request)),
        )
        return render(
            request,
            "sweeps.html",
            ident,
            data=out,
            title="Sweeps",
            filters={
                "repo": repo or "",
                "pr": pr or "",
                "config_key": config_key or "",
                "state": state or "",
            },
            choices=sweeps.sweep_filter_values(session),
            qs=lambda **c: qs(request, **c),
        )

    @router.get("/sweeps/{sweep_id}", **html)
    def sweep_page(request: Request, sweep_id: int, session: DB, ident: PageViewer) -> HTMLResponse:
        out = sweeps.sweep_detail(session, sweep_id, html_base(current_settings(request)))
        if out is None:
            raise HTTPException(404, f"no sweep {sweep_id}")
        return render(request, "sweep.html", ident, sweep=out, title=f"Sweep {sweep_id}")

    @router.get("/results", **html)
    def results_index(request: Request, session: DB, ident: PageViewer) -> HTMLResponse:
        return render(
            request, "results_index.html", ident, keys=results.result_keys(session), title="Results"
        )

    @router.get("/results/{config_key}", **html)
    def results_page(
        request: Request,
        config_key: str,
        session: DB,
        ident: PageViewer,
        image: str | None = None,
        seq: str | None = None,
    ) -> HTMLResponse:
        out = results.results_for_key(
            session,
            config_key,
            image=image or None,
            seq=seq or None,
            accuracy_tolerance=current_settings(request).accuracy_tolerance,
        )
        return render(
            request,
            "results.html",
            ident,
            data=out,
            charts=results_charts(out),
            title=f"Results: {config_key}",
        )


def _record_pages(router: APIRouter) -> None:
    html = HTML

    @router.get("/deliveries", **html)
    def deliveries_page(
        request: Request,
        session: DB,
        ident: PageViewer,
        q: str | None = None,
        event: str | None = None,
        status: str | None = None,
        page: PageNo = 1,
    ) -> HTMLResponse:
        out = records.deliveries(
            session, q=q or None, event=event or None, status=status or None, page=page, per_page=50
        )
        return render(
            request,
            "deliveries.html",
            ident,
            data=out,
            redelivery=recovery_counts(session),
            title="Deliveries",
            filters={"q": q or "", "event": event or "", "status": status or ""},
            events=records.delivery_events(session),
            qs=lambda **c: qs(request, **c),
        )

    @router.get("/deliveries/{delivery_id}", **html)
    def delivery_page(request: Request, delivery_id: str, session: DB, ident: PageViewer) -> HTMLResponse:
        out = records.delivery_detail(session, delivery_id)
        if out is None:
            raise HTTPException(404, f"no delivery {delivery_id!r}")
        pretty = (
            json.dumps(out.payload, indent=2, sort_keys=True)
            if not isinstance(out.payload, str)
            else out.payload
        )
        return render(request, "delivery.html", ident, d=out, pretty=pretty, title=f"Delivery {delivery_id}")


def _audit_pages(router: APIRouter) -> None:
    html = HTML

    @router.get("/audit", **html)
    def audit_page(
        request: Request,
        session: DB,
        ident: PageViewer,
        actor: str | None = None,
        action: str | None = None,
        outcome: str | None = None,
        target: str | None = None,
        caused_by: str | None = None,
        plumbing: str | None = None,
        group: str | None = None,
        page: PageNo = 1,
    ) -> HTMLResponse:
        out = records.audit(
            session,
            actor=actor or None,
            action=action or None,
            outcome=outcome or None,
            target=target or None,
            caused_by=caused_by or None,
            page=page,
            per_page=50,
            hide_plumbing=plumbing == "hide",
        )
        return render(
            request,
            "audit.html",
            ident,
            data=out,
            title="Audit log",
            filters={
                "actor": actor or "",
                "action": action or "",
                "outcome": outcome or "",
                "target": target or "",
                "caused_by": caused_by or "",
                "plumbing": plumbing or "",
                "group": group or "",
            },
            groups=records.by_sweep(out.items) if group == "sweep" else None,
            qs=lambda **c: qs(request, **c),
        )
