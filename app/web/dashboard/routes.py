"""Dashboard routes: HTML pages, the JSON API under ``/api/`` behind them, and operator actions.

Routes are thin: data comes from ``app.web.dashboard.data`` (read side) and actions call the owning
capability's function (``app.flows.ingest.replay``, ``app.flows.scheduler.*``, the watch-check task), then
write an audit entry naming the operator.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterator
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import structlog
from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from sqlalchemy.orm import Session

from app.web.dashboard import data
from app.web.dashboard import schemas as S
from app.web.dashboard.auth import (
    CSRF_FIELD,
    DashboardRoute,
    Identity,
    current_settings,
    identity_of,
    operator,
    session_of,
)
from app.web.dashboard.auth import viewer as _viewer
from app.web.dashboard.charts import nightly_charts, results_charts, short_image
from app.web.dashboard.signin import safe_next

log = structlog.get_logger(__name__)

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
TEMPLATES.env.globals["short_image"] = short_image
TEMPLATES.env.filters["urlq"] = lambda v: urllib.parse.quote(str(v), safe="")


def db(request: Request) -> Iterator[Session]:
    from app.db import engine_for

    session = Session(engine_for(current_settings(request).database_url), expire_on_commit=False)
    try:
        yield session
    finally:
        session.close()


def viewer_page(request: Request) -> Identity | None:
    """Like ``viewer`` but a page redirects to the sign-in form instead of answering 401."""
    from app.web.dashboard.auth import SignInRequired

    try:
        return _viewer(request)
    except SignInRequired as exc:
        raise HTTPException(
            303,
            "sign in first",
            headers={"Location": "/login?next=" + urllib.parse.quote(exc.next_url, safe="")},
        ) from None


DB = Annotated[Session, Depends(db)]
Viewer = Annotated[Identity | None, Depends(_viewer)]
PageViewer = Annotated[Identity | None, Depends(viewer_page)]
Operator = Annotated[Identity, Depends(operator)]
PageNo = Annotated[int, Query(ge=1, le=100_000, description="1-based page")]
PerPage = Annotated[int, Query(ge=1, le=data.MAX_PER_PAGE)]


def render(request: Request, template: str, ident: Identity | None, **context: Any) -> HTMLResponse:
    settings = current_settings(request)
    state = session_of(request)
    flash = state.pop("flash") if state.get("flash") else None
    from app.web.dashboard.auth import oauth_enabled

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


def _qs(request: Request, **changes: Any) -> str:
    """The current query string with ``changes`` applied (pagination links keep the filters)."""
    params = dict(request.query_params)
    for key, value in changes.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = str(value)
    return "?" + urllib.parse.urlencode(params) if params else "?"


def build_router() -> APIRouter:
    router = APIRouter(route_class=DashboardRoute)
    _pages(router)
    _api(router)
    _actions(router)
    from app.web.dashboard.signin import signin_routes

    signin_routes(router)
    return router


# ---------------------------------------------------------------------- JSON API (read)


def _api(router: APIRouter) -> None:
    tags: list[str | Enum] = ["dashboard"]

    @router.get(
        "/api/overview",
        response_model=S.Overview,
        tags=tags,
        summary="Health, rate limit, runner use per label, failures that need a human",
    )
    def api_overview(request: Request, session: DB, _v: Viewer) -> S.Overview:
        return data.overview(session, current_settings(request))

    @router.get(
        "/api/labels", response_model=list[S.LabelUsage], tags=tags, summary="Runners busy/free per label"
    )
    def api_labels(request: Request, session: DB, _v: Viewer) -> list[S.LabelUsage]:
        return data.label_usage(session, current_settings(request))

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
        return data.watches(
            session, current_settings(request), repo=repo, state=state, page=page, per_page=per_page
        )

    @router.get("/api/sweeps", response_model=S.Page[S.SweepOut], tags=tags, summary="Sweeps, newest first")
    def api_sweeps(
        session: DB,
        _v: Viewer,
        repo: str | None = None,
        pr: int | None = None,
        config_key: str | None = None,
        state: str | None = None,
        page: PageNo = 1,
        per_page: PerPage = 50,
    ) -> S.Page[S.SweepOut]:
        return data.sweeps(
            session, repo=repo, pr=pr, config_key=config_key, state=state, page=page, per_page=per_page
        )

    @router.get(
        "/api/sweeps/{sweep_id}", response_model=S.SweepDetail, tags=tags, summary="One sweep and its jobs"
    )
    def api_sweep(sweep_id: int, session: DB, _v: Viewer) -> S.SweepDetail:
        out = data.sweep_detail(session, sweep_id)
        if out is None:
            raise HTTPException(404, f"no sweep {sweep_id}")
        return out

    @router.get(
        "/api/results", response_model=list[S.KeySummary], tags=tags, summary="Config keys with results"
    )
    def api_result_keys(session: DB, _v: Viewer) -> list[S.KeySummary]:
        return data.result_keys(session)

    @router.get(
        "/api/results/{config_key}",
        response_model=S.ResultsKeyOut,
        tags=tags,
        summary="A config key's curve, its reference, the gap, and TPOT per image over time",
    )
    def api_results(
        config_key: str, session: DB, _v: Viewer, image: str | None = None, seq: str | None = None
    ) -> S.ResultsKeyOut:
        return data.results_for_key(session, config_key, image=image, seq=seq)

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
        return data.deliveries(session, q=q, event=event, status=status, page=page, per_page=per_page)

    @router.get(
        "/api/deliveries/{delivery_id}",
        response_model=S.DeliveryDetail,
        tags=tags,
        summary="One delivery with its stored payload",
    )
    def api_delivery(delivery_id: str, session: DB, _v: Viewer) -> S.DeliveryDetail:
        out = data.delivery_detail(session, delivery_id)
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
        page: PageNo = 1,
        per_page: PerPage = 50,
    ) -> S.Page[S.AuditOut]:
        return data.audit(
            session,
            actor=actor,
            action=action,
            outcome=outcome,
            target=target,
            caused_by=caused_by,
            page=page,
            per_page=per_page,
        )

    @router.get(
        "/api/nightlies",
        tags=tags,
        summary="Watched keys of the nightly regression watch, with the canary budget",
    )
    def api_nightlies(session: DB, _v: Viewer) -> list[dict[str, Any]]:
        from app.flows.nightlywatch import watched_keys

        return watched_keys(session)

    @router.get(
        "/api/nightlies/{owner}/{name}/{config_key}",
        tags=tags,
        summary="One key's nightly series, canaries, regressions and budget",
    )
    def api_nightly_series(owner: str, name: str, config_key: str, session: DB, _v: Viewer) -> dict[str, Any]:
        from app.flows.nightlywatch import series_view

        return series_view(session, f"{owner}/{name}", config_key)

    @router.get("/api/me", tags=tags, summary="Who the dashboard thinks you are, and your CSRF token")
    def api_me(request: Request) -> dict[str, Any]:
        ident = identity_of(request)
        return {
            "identity": None
            if ident is None
            else {"name": ident.name, "via": ident.via, "actor": ident.actor},
            "csrf_token": session_of(request).csrf,
        }


# ---------------------------------------------------------------------- pages


def _pages(router: APIRouter) -> None:
    html: dict[str, Any] = {"response_class": HTMLResponse, "include_in_schema": False}

    @router.get("/", **html)
    def overview_page(request: Request, session: DB, ident: PageViewer) -> HTMLResponse:
        return render(
            request,
            "overview.html",
            ident,
            data=data.overview(session, current_settings(request)),
            title="Overview",
        )

    @router.get("/watches", **html)
    def watches_page(
        request: Request,
        session: DB,
        ident: PageViewer,
        repo: str | None = None,
        state: str | None = None,
        page: PageNo = 1,
    ) -> HTMLResponse:
        out = data.watches(
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
            qs=lambda **c: _qs(request, **c),
        )

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
        out = data.sweeps(
            session,
            repo=repo or None,
            pr=pr_number,
            config_key=config_key or None,
            state=state or None,
            page=page,
            per_page=50,
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
            choices=data.sweep_filter_values(session),
            qs=lambda **c: _qs(request, **c),
        )

    @router.get("/sweeps/{sweep_id}", **html)
    def sweep_page(request: Request, sweep_id: int, session: DB, ident: PageViewer) -> HTMLResponse:
        out = data.sweep_detail(session, sweep_id)
        if out is None:
            raise HTTPException(404, f"no sweep {sweep_id}")
        return render(request, "sweep.html", ident, sweep=out, title=f"Sweep {sweep_id}")

    @router.get("/results", **html)
    def results_index(request: Request, session: DB, ident: PageViewer) -> HTMLResponse:
        return render(request, "results_index.html", ident, keys=data.result_keys(session), title="Results")

    @router.get("/results/{config_key}", **html)
    def results_page(
        request: Request,
        config_key: str,
        session: DB,
        ident: PageViewer,
        image: str | None = None,
        seq: str | None = None,
    ) -> HTMLResponse:
        out = data.results_for_key(session, config_key, image=image or None, seq=seq or None)
        return render(
            request,
            "results.html",
            ident,
            data=out,
            charts=results_charts(out),
            title=f"Results: {config_key}",
        )

    @router.get("/nightlies", **html)
    def nightlies_page(request: Request, session: DB, ident: PageViewer) -> HTMLResponse:
        from app.flows.nightlywatch import watched_keys

        return render(request, "nightlies.html", ident, keys=watched_keys(session), title="Nightly watch")

    @router.get("/nightlies/{owner}/{name}/{config_key}", **html)
    def nightly_series_page(
        request: Request, owner: str, name: str, config_key: str, session: DB, ident: PageViewer
    ) -> HTMLResponse:
        from app.flows.nightlywatch import series_view

        view = series_view(session, f"{owner}/{name}", config_key)
        return render(
            request,
            "nightly_series.html",
            ident,
            view=view,
            charts=nightly_charts(view),
            title=f"Nightly series: {config_key}",
        )

    from app.flows.recovery import counts as recovery_counts

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
        out = data.deliveries(
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
            events=data.delivery_events(session),
            qs=lambda **c: _qs(request, **c),
        )

    @router.get("/deliveries/{delivery_id}", **html)
    def delivery_page(request: Request, delivery_id: str, session: DB, ident: PageViewer) -> HTMLResponse:
        import json

        out = data.delivery_detail(session, delivery_id)
        if out is None:
            raise HTTPException(404, f"no delivery {delivery_id!r}")
        pretty = (
            json.dumps(out.payload, indent=2, sort_keys=True)
            if not isinstance(out.payload, str)
            else out.payload
        )
        return render(request, "delivery.html", ident, d=out, pretty=pretty, title=f"Delivery {delivery_id}")

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
        page: PageNo = 1,
    ) -> HTMLResponse:
        out = data.audit(
            session,
            actor=actor or None,
            action=action or None,
            outcome=outcome or None,
            target=target or None,
            caused_by=caused_by or None,
            page=page,
            per_page=50,
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
            },
            qs=lambda **c: _qs(request, **c),
        )


# ---------------------------------------------------------------------- actions


async def _respond(request: Request, result: S.ActionResult, default_next: str) -> Response:
    status = 200 if result.ok else 409
    if request.headers.get("hx-request") == "true":
        from html import escape

        cls = "ok" if result.ok else "err"
        return HTMLResponse(
            f'<span class="flash {cls}" role="status">{escape(result.message)}</span>', status_code=200
        )
    ctype = request.headers.get("content-type", "")
    if ctype.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        form = await request.form()
        nxt = form.get("next")
        session_of(request).set("flash", {"ok": result.ok, "message": result.message})
        return RedirectResponse(
            safe_next(nxt if isinstance(nxt, str) else None, default_next), status_code=303
        )
    return JSONResponse(result.model_dump(), status_code=status)


def _run_action(
    request: Request, session: Session, ident: Identity, action: str, target: str, do: Callable[[], str]
) -> S.ActionResult:
    """Run one action, then audit who asked and how it ended (in its own commit)."""
    from app.store.audit import record

    try:
        message = do()
        ok, outcome = True, "ok"
    except LookupError as exc:
        session.rollback()
        record(
            session,
            actor=ident.actor,
            action=f"dashboard.{action}",
            target=target,
            outcome="failed",
            detail={"error": str(exc), "via": ident.via},
        )
        session.commit()
        raise HTTPException(404, str(exc).strip("'\"")) from exc
    except ValueError as exc:  # the domain refused: e.g. already finished, being processed
        session.rollback()
        message, ok, outcome = str(exc), False, "refused"
    record(
        session,
        actor=ident.actor,
        action=f"dashboard.{action}",
        target=target,
        outcome=outcome,
        detail={"message": message, "via": ident.via},
    )
    session.commit()
    log.info("dashboard_action", actor=ident.actor, action=action, target=target, outcome=outcome)
    return S.ActionResult(ok=ok, action=action, target=target, message=message)


def _gateway(request: Request, session: Session, ident: Identity) -> Any:
    from app.adapters.github import gateway

    return gateway(current_settings(request), session, actor=ident.actor)


def _actions(router: APIRouter) -> None:
    tags: list[str | Enum] = ["dashboard actions"]
    responses: dict[int | str, dict[str, Any]] = {
        401: {"description": "no operator identity"},
        403: {"description": "missing or wrong CSRF token (session sign-in), or a cross-site request"},
        404: {"description": "no such object"},
        409: {"description": "refused by the domain (e.g. already finished)", "model": S.ActionResult},
    }
    common: dict[str, Any] = {"response_model": S.ActionResult, "tags": tags, "responses": responses}

    @router.post("/api/deliveries/{delivery_id}/replay", summary="Process a stored delivery again", **common)
    async def replay_delivery(request: Request, delivery_id: str, session: DB, ident: Operator) -> Response:
        def do() -> str:
            from app.flows.ingest import replay

            d = replay(session, delivery_id, actor=ident.actor)
            return f"delivery {d.id} ({d.event}) queued for processing again"

        result = _run_action(request, session, ident, "replay_delivery", delivery_id, do)
        return await _respond(request, result, f"/deliveries/{urllib.parse.quote(delivery_id)}")

    @router.post(
        "/api/sweeps/{sweep_id}/cancel", summary="Cancel a sweep's queued and running jobs", **common
    )
    async def cancel_sweep(request: Request, sweep_id: int, session: DB, ident: Operator) -> Response:
        def do() -> str:
            from app.flows import scheduler

            _require_sweep(session, sweep_id)
            out = scheduler.cancel_sweep(
                session,
                _gateway(request, session, ident),
                sweep_id,
                actor=ident.actor,
                reason=f"cancelled from the dashboard by {ident.actor}",
            )
            return f"sweep {sweep_id} cancelled" + _describe(out)

        result = _run_action(request, session, ident, "cancel_sweep", f"sweep {sweep_id}", do)
        return await _respond(request, result, f"/sweeps/{sweep_id}")

    @router.post(
        "/api/sweeps/{sweep_id}/retry", summary="Queue a sweep's failed and cancelled jobs again", **common
    )
    async def retry_sweep(request: Request, sweep_id: int, session: DB, ident: Operator) -> Response:
        def do() -> str:
            from app.flows import scheduler

            _require_sweep(session, sweep_id)
            out = _call(
                scheduler.retry_sweep,
                session,
                sweep_id,
                actor=ident.actor,
                gw=lambda: _gateway(request, session, ident),
            )
            return f"sweep {sweep_id} retried" + _describe(out)

        result = _run_action(request, session, ident, "retry_sweep", f"sweep {sweep_id}", do)
        return await _respond(request, result, f"/sweeps/{sweep_id}")

    @router.post("/api/jobs/{job_id}/retry", summary="Queue one failed or cancelled job again", **common)
    async def retry_job(request: Request, job_id: int, session: DB, ident: Operator) -> Response:
        sweep_id = _require_job(session, job_id)

        def do() -> str:
            from app.flows import scheduler

            out = _call(
                scheduler.retry_job,
                session,
                job_id,
                actor=ident.actor,
                gw=lambda: _gateway(request, session, ident),
            )
            return f"job {job_id} retried" + _describe(out)

        result = _run_action(request, session, ident, "retry_job", f"job {job_id}", do)
        return await _respond(request, result, f"/sweeps/{sweep_id}")

    @router.post("/api/jobs/{job_id}/cancel", summary="Cancel one queued or running job", **common)
    async def cancel_job(request: Request, job_id: int, session: DB, ident: Operator) -> Response:
        sweep_id = _require_job(session, job_id)

        def do() -> str:
            from app.flows import scheduler

            reason = f"cancelled from the dashboard by {ident.actor}"
            if hasattr(scheduler, "cancel_job"):
                _call(
                    scheduler.cancel_job,
                    session,
                    job_id,
                    actor=ident.actor,
                    gw=lambda: _gateway(request, session, ident),
                    reason=reason,
                )
            else:
                _cancel_job(session, _gateway(request, session, ident), job_id, reason)
            return f"job {job_id} cancelled"

        result = _run_action(request, session, ident, "cancel_job", f"job {job_id}", do)
        return await _respond(request, result, f"/sweeps/{sweep_id}")

    @router.post("/api/labels/{label}/pause", summary="Stop dispatching to a runner label", **common)
    async def pause_label(request: Request, label: str, session: DB, ident: Operator) -> Response:
        def do() -> str:
            from app.flows.scheduler import set_label_paused

            set_label_paused(session, label, True, actor=ident.actor)
            return f"dispatch to {label} paused"

        result = _run_action(request, session, ident, "pause_label", label, do)
        return await _respond(request, result, "/")

    @router.post("/api/labels/{label}/resume", summary="Resume dispatching to a runner label", **common)
    async def resume_label(request: Request, label: str, session: DB, ident: Operator) -> Response:
        def do() -> str:
            from app.flows.scheduler import set_label_paused

            set_label_paused(session, label, False, actor=ident.actor)
            return f"dispatch to {label} resumed"

        result = _run_action(request, session, ident, "resume_label", label, do)
        return await _respond(request, result, "/")

    @router.post("/api/watches/{watch_id}/check", summary="Re-run a watch's check now", **common)
    async def check_watch(request: Request, watch_id: int, session: DB, ident: Operator) -> Response:
        def do() -> str:
            from app.adapters.queue import enqueue
            from app.models.tracking import Watch

            watch = session.get(Watch, watch_id)
            if watch is None:
                raise LookupError(f"no watch {watch_id}")
            if not enqueue("sweepbot.check_watch", watch_id):
                raise ValueError(
                    "the broker is unreachable: the check was not queued (the next poll will run it)"
                )
            return f"check of {watch.repo}#{watch.pr_number} {watch.config_key} queued"

        result = _run_action(request, session, ident, "check_watch", f"watch {watch_id}", do)
        return await _respond(request, result, f"/watches#watch-{watch_id}")


def _require_sweep(session: Session, sweep_id: int) -> None:
    from app.models.sweeps import Sweep

    if session.get(Sweep, sweep_id) is None:
        raise LookupError(f"no sweep {sweep_id}")


def _require_job(session: Session, job_id: int) -> int:
    from app.models.sweeps import SweepJob

    job = session.get(SweepJob, job_id)
    if job is None:
        raise HTTPException(404, f"no job {job_id}")
    return job.sweep_id


def _cancel_job(session: Session, gw: Any, job_id: int, reason: str) -> None:
    """Cancel one job with the scheduler's own primitives: stop its run if it has one, then record
    the final state (``finish_job`` closes the sweep when it was the last open job)."""
    from app.flows.scheduler import finish_job
    from app.models.sweeps import JobState, Sweep, SweepJob

    job = session.get(SweepJob, job_id)
    if job is None:
        raise LookupError(f"no job {job_id}")
    if job.state in JobState.FINAL:
        raise ValueError(f"job {job_id} is already {job.state}")
    if job.state in JobState.IN_FLIGHT and job.run_id is not None:
        sweep = session.get(Sweep, job.sweep_id)
        if sweep is not None:
            gw.cancel_run(sweep.repo, job.run_id)
    finish_job(session, job_id, JobState.CANCELLED, reason=reason)


def _call(
    func: Any, session: Session, obj_id: int, *, actor: str, gw: Callable[[], Any], **extra: Any
) -> Any:
    """Call a scheduler action whether or not it takes the gateway (retries need none)."""
    import inspect

    params = inspect.signature(func).parameters
    kwargs: dict[str, Any] = {"actor": actor}
    kwargs.update({k: v for k, v in extra.items() if k in params})
    if "gw" in params:
        return func(session, gw(), obj_id, **kwargs)
    return func(session, obj_id, **kwargs)


def _describe(out: Any) -> str:
    if isinstance(out, int) and not isinstance(out, bool):
        return f" ({out} job(s))"
    if isinstance(out, list | tuple | set):
        return f" ({len(out)} job(s))"
    return ""
