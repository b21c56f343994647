"""Operator actions: each calls one flow function (``app.flows.commands.operator``,
``app.flows.ingest.deliveries.replay``),
then audits who asked and how it ended. Nothing here calls GitHub: what an action leaves to do there
(stopping the runs of cancelled jobs, a watch's check) is queued for a worker after the commit.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from html import escape
from typing import Any

import structlog
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from app.adapters import queue
from app.flows.commands import operator as op
from app.flows.ingest.deliveries import replay
from app.store.audit import record
from app.web.dashboard import schemas as S
from app.web.dashboard.auth import Identity, session_of
from app.web.dashboard.deps import DB, Operator
from app.web.dashboard.render import safe_next

log = structlog.get_logger(__name__)

BROKER_DOWN = "the broker is unreachable"


@dataclass
class Done:
    """What an action did (its message), and what to queue once its transaction committed: each
    ``later`` callback returns a note for the message, or None."""

    message: str
    later: list[Callable[[], str | None]] = field(default_factory=list)


def stop_runs_later(stop: op.RunStop, actor: str) -> list[Callable[[], str | None]]:
    """Queue ``sweepbot.cancel_runs`` for the runs a cancel left going on GitHub."""
    if not stop.run_ids:
        return []

    def ring() -> str:
        count = len(stop.run_ids)
        if queue.enqueue("sweepbot.cancel_runs", stop.repo, list(stop.run_ids), actor):
            return f"stopping {count} run(s) on GitHub"
        return f"{BROKER_DOWN}: {count} run(s) still going on GitHub ({stop.repo}); cancel them there"

    return [ring]


async def respond(request: Request, result: S.ActionResult, default_next: str) -> Response:
    status = 200 if result.ok else 409
    if request.headers.get("hx-request") == "true":
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


def run_action(
    session: Session, ident: Identity, action: str, target: str, do: Callable[[], Done]
) -> S.ActionResult:
    """Run one action, audit who asked and how it ended (in its own commit), then queue its rest."""
    try:
        done = do()
        ok, outcome = True, "ok"
    except LookupError as exc:
        session.rollback()
        _audit(session, ident, action, target, "failed", {"error": str(exc), "via": ident.via})
        raise HTTPException(404, str(exc).strip("'\"")) from exc
    except ValueError as exc:  # the domain refused: e.g. already finished, being processed
        session.rollback()
        done, ok, outcome = Done(str(exc)), False, "refused"
    _audit(session, ident, action, target, outcome, {"message": done.message, "via": ident.via})
    notes = [note for later in done.later if (note := later())]
    message = "; ".join([done.message, *notes])
    log.info("dashboard_action", actor=ident.actor, action=action, target=target, outcome=outcome)
    return S.ActionResult(ok=ok, action=action, target=target, message=message)


def _audit(
    session: Session, ident: Identity, action: str, target: str, outcome: str, detail: dict[str, Any]
) -> None:
    record(
        session,
        actor=ident.actor,
        action=f"dashboard.{action}",
        target=target,
        outcome=outcome,
        detail=detail,
    )
    session.commit()


RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "no operator identity"},
    403: {"description": "missing or wrong CSRF token (session sign-in), or a cross-site request"},
    404: {"description": "no such object"},
    409: {"description": "refused by the domain (e.g. already finished)", "model": S.ActionResult},
}
TAGS: list[str | Enum] = ["dashboard actions"]
COMMON: dict[str, Any] = {"response_model": S.ActionResult, "tags": TAGS, "responses": RESPONSES}


def action_routes(router: APIRouter) -> None:
    _sweep_actions(router)
    _job_actions(router)
    _other_actions(router)


def _sweep_actions(router: APIRouter) -> None:
    @router.post(
        "/api/sweeps/{sweep_id}/cancel", summary="Cancel a sweep's queued and running jobs", **COMMON
    )
    async def cancel_sweep(request: Request, sweep_id: int, session: DB, ident: Operator) -> Response:
        def do() -> Done:
            stop = op.cancel_sweep(session, sweep_id, actor=ident.actor)
            return Done(f"sweep {sweep_id} cancelled", stop_runs_later(stop, ident.actor))

        result = run_action(session, ident, "cancel_sweep", f"sweep {sweep_id}", do)
        return await respond(request, result, f"/sweeps/{sweep_id}")

    @router.post(
        "/api/sweeps/{sweep_id}/retry", summary="Queue a sweep's failed and cancelled jobs again", **COMMON
    )
    async def retry_sweep(request: Request, sweep_id: int, session: DB, ident: Operator) -> Response:
        def do() -> Done:
            op.retry_sweep(session, sweep_id, actor=ident.actor)
            return Done(f"sweep {sweep_id} retried")

        result = run_action(session, ident, "retry_sweep", f"sweep {sweep_id}", do)
        return await respond(request, result, f"/sweeps/{sweep_id}")


def _job_actions(router: APIRouter) -> None:
    @router.post("/api/jobs/{job_id}/retry", summary="Queue one failed or cancelled job again", **COMMON)
    async def retry_job(request: Request, job_id: int, session: DB, ident: Operator) -> Response:
        sweep_id = _sweep_of(session, job_id)

        def do() -> Done:
            op.retry_job(session, job_id, actor=ident.actor)
            return Done(f"job {job_id} retried")

        result = run_action(session, ident, "retry_job", f"job {job_id}", do)
        return await respond(request, result, f"/sweeps/{sweep_id}")

    @router.post("/api/jobs/{job_id}/cancel", summary="Cancel one queued or running job", **COMMON)
    async def cancel_job(request: Request, job_id: int, session: DB, ident: Operator) -> Response:
        sweep_id = _sweep_of(session, job_id)

        def do() -> Done:
            stop = op.cancel_job(session, job_id, actor=ident.actor)
            return Done(f"job {job_id} cancelled", stop_runs_later(stop, ident.actor))

        result = run_action(session, ident, "cancel_job", f"job {job_id}", do)
        return await respond(request, result, f"/sweeps/{sweep_id}")


def _sweep_of(session: Session, job_id: int) -> int:
    try:
        return op.job_sweep_id(session, job_id)
    except LookupError as exc:
        raise HTTPException(404, str(exc)) from exc


def _other_actions(router: APIRouter) -> None:
    @router.post("/api/deliveries/{delivery_id}/replay", summary="Process a stored delivery again", **COMMON)
    async def replay_delivery(request: Request, delivery_id: str, session: DB, ident: Operator) -> Response:
        def do() -> Done:
            d = replay(session, delivery_id, actor=ident.actor)
            return Done(f"delivery {d.id} ({d.event}) queued for processing again")

        result = run_action(session, ident, "replay_delivery", delivery_id, do)
        return await respond(request, result, f"/deliveries/{urllib.parse.quote(delivery_id)}")

    for paused, verb, summary in ((True, "pause", "Stop"), (False, "resume", "Resume")):
        _label_action(router, paused, verb, f"{summary} dispatching to a runner label")

    @router.post("/api/watches/{watch_id}/check", summary="Re-run a watch's check now", **COMMON)
    async def check_watch(request: Request, watch_id: int, session: DB, ident: Operator) -> Response:
        def do() -> Done:
            title = op.watch_title(session, watch_id)
            if not queue.enqueue("sweepbot.check_watch", watch_id):
                raise ValueError(f"{BROKER_DOWN}: the check was not queued (the next poll will run it)")
            return Done(f"check of {title} queued")

        result = run_action(session, ident, "check_watch", f"watch {watch_id}", do)
        return await respond(request, result, f"/watches#watch-{watch_id}")


def _label_action(router: APIRouter, paused: bool, verb: str, summary: str) -> None:
    @router.post(f"/api/labels/{{label}}/{verb}", summary=summary, name=f"{verb}_label", **COMMON)
    async def label_action(request: Request, label: str, session: DB, ident: Operator) -> Response:
        def do() -> Done:
            op.set_label_paused(session, label, paused, actor=ident.actor)
            return Done(f"dispatch to {label} {'paused' if paused else 'resumed'}")

        result = run_action(session, ident, f"{verb}_label", label, do)
        return await respond(request, result, "/")
