"""The dashboard's JSON API (read side), under ``/api/``: what the pages show, as typed JSON."""

from __future__ import annotations

from enum import Enum
from typing import Any

from fastapi import APIRouter, HTTPException, Request

from app.flows.nightly.watch import series_view, watched_keys
from app.web.dashboard import schemas as S
from app.web.dashboard.auth import current_settings, identity_of, session_of
from app.web.dashboard.data import overview, records, results, sweeps, watches
from app.web.dashboard.data.common import html_base
from app.web.dashboard.deps import DB, PageNo, PerPage, Viewer

TAGS: list[str | Enum] = ["dashboard"]


def api_routes(router: APIRouter) -> None:
    _status_api(router)
    _sweep_api(router)
    _record_api(router)


def _status_api(router: APIRouter) -> None:
    tags = TAGS

    @router.get(
        "/api/overview",
        response_model=S.Overview,
        tags=tags,
        summary="Health, rate limit, runner use per label, failures that need a human",
    )
    def api_overview(request: Request, session: DB, _v: Viewer) -> S.Overview:
        return overview.overview(session, current_settings(request))

    @router.get(
        "/api/labels", response_model=list[S.LabelUsage], tags=tags, summary="Runners busy/free per label"
    )
    def api_labels(request: Request, session: DB, _v: Viewer) -> list[S.LabelUsage]:
        return overview.label_usage(session, current_settings(request))

    @router.get(
        "/api/watches",
        response_model=S.WatchesOut,
        tags=tags,
        summary="Watches with their dependencies and bump, and the nightly timelines",
    )
    def api_watches(
        request: Request,
        session: DB,
        _v: Viewer,
        repo: str | None = None,
        state: str | None = None,
        page: PageNo = 1,
        per_page: PerPage = 25,
    ) -> S.WatchesOut:
        return watches.watches(
            session, current_settings(request), repo=repo, state=state, page=page, per_page=per_page
        )

    @router.get("/api/me", tags=tags, summary="Who the dashboard thinks you are, and your CSRF token")
    def api_me(request: Request) -> dict[str, Any]:
        ident = identity_of(request)
        return {
            "identity": None
            if ident is None
            else {"name": ident.name, "via": ident.via, "actor": ident.actor},
            "csrf_token": session_of(request).csrf,
        }


def _sweep_api(router: APIRouter) -> None:
    tags = TAGS

    @router.get("/api/sweeps", response_model=S.Page[S.SweepOut], tags=tags, summary="Sweeps, newest first")
    def api_sweeps(
        request: Request,
        session: DB,
        _v: Viewer,
        repo: str | None = None,
        pr: int | None = None,
        config_key: str | None = None,
        state: str | None = None,
        page: PageNo = 1,
        per_page: PerPage = 50,
    ) -> S.Page[S.SweepOut]:
        return sweeps.sweeps(
            session,
            repo=repo,
            pr=pr,
            config_key=config_key,
            state=state,
            page=page,
            per_page=per_page,
            base=html_base(current_settings(request)),
        )

    @router.get(
        "/api/sweeps/{sweep_id}", response_model=S.SweepDetail, tags=tags, summary="One sweep and its jobs"
    )
    def api_sweep(request: Request, sweep_id: int, session: DB, _v: Viewer) -> S.SweepDetail:
        out = sweeps.sweep_detail(session, sweep_id, html_base(current_settings(request)))
        if out is None:
            raise HTTPException(404, f"no sweep {sweep_id}")
        return out

    @router.get(
        "/api/results", response_model=list[S.KeySummary], tags=tags, summary="Config keys with results"
    )
    def api_result_keys(session: DB, _v: Viewer) -> list[S.KeySummary]:
        return results.result_keys(session)

    @router.get(
        "/api/results/{config_key}",
        response_model=S.ResultsKeyOut,
        tags=tags,
        summary="A config key's curve, its reference, the gap, and TPOT per image over time",
    )
    def api_results(
        request: Request,
        config_key: str,
        session: DB,
        _v: Viewer,
        image: str | None = None,
        seq: str | None = None,
    ) -> S.ResultsKeyOut:
        tolerance = current_settings(request).accuracy_tolerance
        return results.results_for_key(
            session, config_key, image=image, seq=seq, accuracy_tolerance=tolerance
        )


def _record_api(router: APIRouter) -> None:
    tags = TAGS

    @router.get(
        "/api/deliveries",
        response_model=S.Page[S.DeliveryOut],
        tags=tags,
        summary="Webhook deliveries, newest first; q matches an id prefix",
    )
    def api_deliveries(
        session: DB,
        _v: Viewer,
        q: str | None = None,
        event: str | None = None,
        status: str | None = None,
        page: PageNo = 1,
        per_page: PerPage = 50,
    ) -> S.Page[S.DeliveryOut]:
        return records.deliveries(session, q=q, event=event, status=status, page=page, per_page=per_page)

    @router.get(
        "/api/deliveries/{delivery_id}",
        response_model=S.DeliveryDetail,
        tags=tags,
        summary="One delivery with its stored payload",
    )
    def api_delivery(delivery_id: str, session: DB, _v: Viewer) -> S.DeliveryDetail:
        out = records.delivery_detail(session, delivery_id)
        if out is None:
            raise HTTPException(404, f"no delivery {delivery_id!r}")
        return out

    @router.get(
        "/api/audit", response_model=S.Page[S.AuditOut], tags=tags, summary="The audit log, newest first"
    )
    def api_audit(
        session: DB,
        _v: Viewer,
        actor: str | None = None,
        action: str | None = None,
        outcome: str | None = None,
        target: str | None = None,
        caused_by: str | None = None,
        hide_plumbing: bool = False,
        page: PageNo = 1,
        per_page: PerPage = 50,
    ) -> S.Page[S.AuditOut]:
        return records.audit(
            session,
            actor=actor,
            action=action,
            outcome=outcome,
            target=target,
            caused_by=caused_by,
            page=page,
            per_page=per_page,
            hide_plumbing=hide_plumbing,
        )

    @router.get(
        "/api/nightlies",
        tags=tags,
        summary="Watched keys of the nightly regression watch, with the canary budget",
    )
    def api_nightlies(session: DB, _v: Viewer) -> list[dict[str, Any]]:
        return watched_keys(session)

    @router.get(
        "/api/nightlies/{owner}/{name}/{config_key}",
        tags=tags,
        summary="One key's nightly series, canaries, regressions and budget",
    )
    def api_nightly_series(owner: str, name: str, config_key: str, session: DB, _v: Viewer) -> dict[str, Any]:
        return series_view(session, f"{owner}/{name}", config_key)
