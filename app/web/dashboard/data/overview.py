"""The overview page: health, GitHub's rate limit, runner use per label, what needs a human."""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import structlog
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.adapters import queue
from app.core import budget
from app.flows.commands.github_status import RATE_LIMIT_KEY
from app.flows.ingest.deliveries import health as ingest_health
from app.flows.scheduler.run_poll import load_budget
from app.models import Delivery, DeliveryStatus, HttpCacheEntry
from app.models.results import ReportState
from app.models.sweeps import JobState, RunnerLabel, SweepJob
from app.models.tracking import BotConfigRecord, Watch, WatchState
from app.settings import Settings
from app.store import attention
from app.store.publications import publication_problems
from app.web.dashboard import schemas as S
from app.web.dashboard.data.common import aware

log = structlog.get_logger(__name__)

__all__ = ["RATE_LIMIT_KEY", "failures", "github_budget", "health", "label_usage", "overview", "rate_limit"]

_HEALTH_TTL = 5.0
_health_cache: dict[str, tuple[float, dict[str, Any]]] = {}
_health_lock = threading.Lock()


def health(settings: Settings) -> dict[str, Any]:
    """``app.flows.ingest.deliveries.health`` cached for a few seconds: it pings the broker, which
    a busy overview
    page (live refresh, several viewers) should not do on every request."""
    key = settings.database_url + "|" + settings.broker_url
    with _health_lock:
        hit = _health_cache.get(key)
        if hit is not None and time.monotonic() - hit[0] < _HEALTH_TTL:
            return hit[1]
    value = ingest_health(settings)
    with _health_lock:
        _health_cache[key] = (time.monotonic(), value)
    return value


RATE_LIMIT_REFRESH_SECONDS = 300.0
RATE_LIMIT_ASK_SECONDS = 60.0
_ask_lock = threading.Lock()
_asked_at = -RATE_LIMIT_ASK_SECONDS


def rate_limit(session: Session, settings: Settings) -> S.RateLimit:
    """The last ``/rate_limit`` answer, stored in the shared HTTP cache (so every API replica sees
    it); when it is older than the refresh interval a worker is asked for a new one. A page view
    never waits for GitHub."""
    row = session.get(HttpCacheEntry, RATE_LIMIT_KEY)
    out = S.RateLimit(stale=True)
    if row is not None:
        try:
            core = json.loads(row.body).get("resources", {}).get("core", {})
            out.remaining = int(core["remaining"]) if "remaining" in core else None
            out.limit = int(core["limit"]) if "limit" in core else None
            if core.get("reset"):
                out.reset_at = datetime.fromtimestamp(int(core["reset"]), tz=UTC)
        except (ValueError, TypeError, AttributeError, KeyError):
            out.note = "the stored rate-limit answer is not readable"
        out.fetched_at = aware(row.fetched_at)
    age = (datetime.now(UTC) - out.fetched_at).total_seconds() if out.fetched_at else None
    out.stale = age is None or age > RATE_LIMIT_REFRESH_SECONDS
    has_credentials = settings.github_token is not None or settings.github_app_id is not None
    if not has_credentials:
        out.note = out.note or "no GitHub credentials configured"
    elif out.stale:
        _ask_for_refresh(settings)
        out.note = out.note or "refreshing in the background"
    return out


def _ask_for_refresh(settings: Settings) -> None:
    """Queue a worker's fetch of ``/rate_limit``, at most once a minute per process (every viewer
    of a stale page would otherwise queue one)."""
    global _asked_at
    with _ask_lock:
        if time.monotonic() - _asked_at < RATE_LIMIT_ASK_SECONDS:
            return
        _asked_at = time.monotonic()
    if not queue.enqueue("sweepbot.refresh_rate_limit"):
        log.info("rate_limit_refresh_not_queued", reason="broker unreachable")


def github_budget(session: Session, settings: Settings) -> S.Budget:
    """The repair poll's budget decision, recomputed now from its last stored rate-limit reading."""
    state = load_budget(session)
    now = time.time()
    got = budget.decide(
        state.snapshot,
        share=settings.github_budget_share,
        base_interval_s=settings.job_repair_interval,
        now=now,
        last_poll_at=state.last_poll_at,
    )
    snap = state.snapshot
    return S.Budget(
        share=settings.github_budget_share,
        mode=got.mode,
        cap=got.cap,
        spent=got.spent,
        allowance=got.allowance,
        poll_interval_s=got.poll_interval_s,
        resets_at=datetime.fromtimestamp(snap.reset, tz=UTC) if snap and snap.reset > now else None,
        last_poll_at=datetime.fromtimestamp(state.last_poll_at, tz=UTC) if state.last_poll_at else None,
        reason=got.reason,
    )


def label_usage(session: Session, settings: Settings) -> list[S.LabelUsage]:
    # Runners held: each in-flight dispatch counts its slots once (several jobs may share one run),
    # as the scheduler counts them. In-flight rows are bounded by the runner capacity: few.
    per_run: dict[tuple[str, str], int] = {}
    for label, run_name, job_id, slots in session.execute(
        select(SweepJob.runner_label, SweepJob.run_name, SweepJob.id, SweepJob.slots).where(
            SweepJob.state.in_(JobState.IN_FLIGHT)
        )
    ):
        key = (label, run_name or f"job-{job_id}")
        per_run[key] = max(per_run.get(key, 0), int(slots or 1))
    busy: dict[str, int] = defaultdict(int)
    for (label, _run), slots in per_run.items():
        busy[label] += slots
    queued = {
        label: int(n)
        for label, n in session.execute(
            select(SweepJob.runner_label, func.count())
            .where(SweepJob.state == JobState.QUEUED)
            .group_by(SweepJob.runner_label)
        )
    }
    rows = {r.label: r for r in session.scalars(select(RunnerLabel))}
    labels = sorted(set(busy) | set(queued) | set(rows) | set(settings.runner_capacity))
    out: list[S.LabelUsage] = []
    for label in labels:
        row = rows.get(label)
        capacity = (
            row.capacity
            if row is not None and row.capacity is not None
            else settings.runner_capacity.get(label)
        )
        used = busy.get(label, 0)
        out.append(
            S.LabelUsage(
                label=label,
                capacity=capacity,
                busy=used,
                free=max(0, capacity - used) if capacity is not None else None,
                queued=queued.get(label, 0),
                paused=bool(row.paused) if row else False,
                paused_by=row.paused_by if row else None,
            )
        )
    return out


def _failed_deliveries(session: Session, limit: int) -> list[S.Failure]:
    out: list[S.Failure] = []
    for d in session.scalars(
        select(Delivery)
        .where(Delivery.status == DeliveryStatus.FAILED)
        .order_by(Delivery.received_at.desc())
        .limit(limit)
    ):
        out.append(
            S.Failure(
                kind="delivery",
                id=d.id,
                at=aware(d.finished_at or d.received_at),
                summary=f"{d.event}{'.' + d.action if d.action else ''} failed after "
                f"{d.attempts} attempt(s): {(d.error or '')[:200]}",
                link=f"/deliveries/{d.id}",
            )
        )
    return out


def _failed_jobs(session: Session, limit: int) -> list[S.Failure]:
    out: list[S.Failure] = []
    for j in session.scalars(
        select(SweepJob).where(SweepJob.state == JobState.FAILED).order_by(SweepJob.id.desc()).limit(limit)
    ):
        out.append(
            S.Failure(
                kind="job",
                id=str(j.id),
                at=aware(j.finished_at or j.updated_at),
                summary=f"sweep {j.sweep_id} job {j.seq} conc {j.conc} failed: {(j.reason or '')[:200]}",
                link=f"/sweeps/{j.sweep_id}#job-{j.id}",
            )
        )
    return out


def _blocked_watches(session: Session, limit: int) -> list[S.Failure]:
    out: list[S.Failure] = []
    for w in session.scalars(
        select(Watch)
        .where(Watch.state.in_((WatchState.BLOCKED, WatchState.ARCHIVED)))
        .order_by(Watch.updated_at.desc())
        .limit(limit)
    ):
        out.append(
            S.Failure(
                kind="watch",
                id=str(w.id),
                at=aware(w.updated_at),
                summary=f"{w.repo}#{w.pr_number} {w.config_key} {w.state}: {(w.reason or '')[:200]}",
                link=f"/watches#watch-{w.id}",
            )
        )
    return out


def _report_errors(session: Session, limit: int) -> list[S.Failure]:
    out: list[S.Failure] = []
    for r in session.scalars(
        select(ReportState)
        .where(ReportState.last_error.is_not(None))
        .order_by(ReportState.id.desc())
        .limit(limit)
    ):
        out.append(
            S.Failure(
                kind="report",
                id=str(r.id),
                at=aware(r.marked_at),
                summary=f"report {r.repo}#{r.pr_number} {r.config_key}: {(r.last_error or '')[:200]}",
                link=f"/sweeps/{r.sweep_id}",
            )
        )
    return out


def _unpublished_merges(session: Session, limit: int) -> list[S.Failure]:
    out: list[S.Failure] = []
    for sweep, pub in publication_problems(session, limit):
        recovery = str(pub.get("recovery") or "").splitlines()
        out.append(
            S.Failure(
                kind="publication",
                id=str(sweep.id),
                at=aware(sweep.updated_at),
                summary=f"{sweep.repo}#{sweep.pr_number} after merge ({pub.get('kind')}): "
                f"{str(pub.get('why') or '')[:200]}"
                + (f"; recovery: {recovery[0][:160]}" if recovery else ""),
                link=f"/sweeps/{sweep.id}",
            )
        )
    return out


def _config_errors(session: Session, limit: int) -> list[S.Failure]:
    out: list[S.Failure] = []
    for c in session.scalars(select(BotConfigRecord).where(BotConfigRecord.ok.is_(False)).limit(limit)):
        out.append(
            S.Failure(
                kind="bot_config",
                id=c.repo,
                at=aware(c.read_at),
                summary=f"{c.repo} bot config refused: {(c.error or '')[:200]}",
                link=f"/watches?repo={c.repo}",
            )
        )
    return out


def _pinned_deleted(session: Session, limit: int) -> list[S.Failure]:
    return [
        S.Failure(
            kind="pinned_deleted",
            id=str(w.id),
            at=aware(w.pinned_missing_since),
            summary=f"{w.repo}#{w.pr_number} {w.config_key}: the pinned image {w.pinned_image} was "
            "deleted from the registry; pin a tag that exists",
            link=f"/watches#watch-{w.id}",
        )
        for w in attention.pinned_deleted(session, limit)
    ]


def _registry_unreachable(session: Session, limit: int) -> list[S.Failure]:
    return [
        S.Failure(
            kind="registry",
            id=str(w.id),
            at=aware(w.registry_error_since),
            summary=f"{w.repo}#{w.pr_number} {w.config_key}: the registry of {w.image_repo} cannot be "
            f"read, so no nightly can be chosen: {(w.registry_error or '')[:200]}",
            link=f"/watches#watch-{w.id}",
        )
        for w in attention.registry_unreachable(session, limit)
    ]


def _missing_dependencies(session: Session, limit: int) -> list[S.Failure]:
    return [
        S.Failure(
            kind="dependency",
            id=str(d.id),
            at=aware(d.updated_at),
            summary=f"{w.repo}#{w.pr_number} {w.config_key} depends on {d.ref}, which does not exist "
            f"(GitHub answers 404): fix the reference or `/depends-on drop {d.ref}`",
            link=f"/watches#watch-{w.id}",
        )
        for d, w in attention.missing_dependencies(session, limit)
    ]


def _unprioritisable_jobs(session: Session, limit: int) -> list[S.Failure]:
    return [
        S.Failure(
            kind="runner_job",
            id=f"{row.repo}:{n.get('job')}",
            at=aware(row.updated_at),
            summary=f"{row.repo} job {n.get('job')} (run {n.get('run')}): {str(n.get('text') or '')[:80]} "
            f"({str(n.get('why') or '')[:160]})",
            link="/fleet",
        )
        for row, n in attention.unprioritisable(session, limit)
    ]


_FAILURE_SOURCES = (
    _failed_deliveries,
    _failed_jobs,
    _blocked_watches,
    _report_errors,
    _unpublished_merges,
    _config_errors,
    _pinned_deleted,
    _registry_unreachable,
    _missing_dependencies,
    _unprioritisable_jobs,
)


def failures(session: Session, limit: int = 10) -> list[S.Failure]:
    """What needs a human: failed deliveries and jobs, blocked watches, report and config errors,
    merges main did not publish verifiably (the runbook's case and its recovery), and
    ``app.store.attention``'s problems (a deleted pin, an unreachable registry, a dependency that
    does not exist, a job the runner controller cannot prioritise)."""
    out = [f for source in _FAILURE_SOURCES for f in source(session, limit)]
    out.sort(key=lambda f: f.at or datetime.min.replace(tzinfo=UTC), reverse=True)
    return out[: 3 * limit]


def overview(session: Session, settings: Settings) -> S.Overview:
    raw = health(settings)
    parts = {
        name: S.HealthPart(ok=bool(v.get("ok")), error=v.get("error"), seen=v.get("seen"))
        for name in ("database", "broker", "workers", "beat")
        if isinstance(v := raw.get(name), dict)
    }
    return S.Overview(
        health=parts,
        deliveries_pending={k: int(v) for k, v in (raw.get("queue") or {}).items()},
        rate_limit=rate_limit(session, settings),
        budget=github_budget(session, settings),
        labels=label_usage(session, settings),
        failures=failures(session),
    )
