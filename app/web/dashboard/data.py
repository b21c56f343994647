"""Read-side queries of the dashboard: each page is a handful of bounded, index-friendly queries.

Rules kept here: every list is paginated (``LIMIT per_page + 1`` tells whether a next page exists,
so big tables are never counted); children of a page's rows are loaded with one ``IN`` query per
kind (no N+1); nothing here calls GitHub.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import structlog
from sqlalchemy import Select, case, func, select
from sqlalchemy.orm import Session

from app.core import budget
from app.core.gap import gap_table
from app.core.nightlies import NightlyLabels, label_nightlies
from app.core.references import ReferenceError
from app.flows.runpoll import load_budget
from app.models import AuditEntry, Delivery, DeliveryStatus, HttpCacheEntry
from app.models.results import ReportState, Result
from app.models.sweeps import JobState, RunnerLabel, Sweep, SweepJob, SweepState
from app.models.tracking import BotConfigRecord, Bump, Dependency, DepState, ImageTag, Watch, WatchState
from app.settings import Settings
from app.store.references import choose_reference
from app.web.dashboard import schemas as S

log = structlog.get_logger(__name__)

MAX_PER_PAGE = 200


def _aware(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def page_of(session: Session, stmt: Select[Any], page: int, per_page: int) -> tuple[list[Any], bool]:
    page = max(1, page)
    per_page = max(1, min(MAX_PER_PAGE, per_page))
    rows = list(session.scalars(stmt.offset((page - 1) * per_page).limit(per_page + 1)))
    return rows[:per_page], len(rows) > per_page


def html_base(settings: Settings) -> str:
    """Where github.com-style pages live: api.github.com -> github.com, <host>/api/v3 -> <host>."""
    api = settings.github_api_url.rstrip("/")
    if api == "https://api.github.com":
        return "https://github.com"
    if api.endswith("/api/v3"):
        return api[: -len("/api/v3")]
    return settings.oauth_base_url.rstrip("/")


# ---------------------------------------------------------------------- overview

_HEALTH_TTL = 5.0
_health_cache: dict[str, tuple[float, dict[str, Any]]] = {}
_health_lock = threading.Lock()


def health(settings: Settings) -> dict[str, Any]:
    """``app.flows.ingest.health`` cached for a few seconds: it pings the broker, which a busy overview
    page (live refresh, several viewers) should not do on every request."""
    key = settings.database_url + "|" + settings.broker_url
    with _health_lock:
        hit = _health_cache.get(key)
        if hit is not None and time.monotonic() - hit[0] < _HEALTH_TTL:
            return hit[1]
    from app.flows.ingest import health as ingest_health

    value = ingest_health(settings)
    with _health_lock:
        _health_cache[key] = (time.monotonic(), value)
    return value


RATE_LIMIT_KEY = "GET /rate_limit?"
RATE_LIMIT_REFRESH_SECONDS = 300.0
_refreshing = threading.Lock()


def rate_limit(session: Session, settings: Settings) -> S.RateLimit:
    """The last ``/rate_limit`` answer, stored in the shared HTTP cache (so every API replica sees
    it); when it is older than the refresh interval a background thread fetches a new one. A page
    view never waits for GitHub."""
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
        out.fetched_at = _aware(row.fetched_at)
    age = (datetime.now(UTC) - out.fetched_at).total_seconds() if out.fetched_at else None
    out.stale = age is None or age > RATE_LIMIT_REFRESH_SECONDS
    has_credentials = settings.github_token is not None or settings.github_app_id is not None
    if not has_credentials:
        out.note = out.note or "no GitHub credentials configured"
    elif out.stale:
        _refresh_rate_limit_async(settings)
        out.note = out.note or "refreshing in the background"
    return out


def _refresh_rate_limit_async(settings: Settings) -> None:
    if not _refreshing.acquire(blocking=False):
        return  # one refresh at a time per process

    def run() -> None:
        try:
            from app.adapters.github import gateway
            from app.db import engine_for

            with Session(engine_for(settings.database_url)) as session:
                # /rate_limit itself does not count against the rate limit.
                gateway(settings, session).get_conditional("rate-limit/get", "/rate_limit")
                session.commit()
        except Exception as exc:
            log.warning("rate_limit_refresh_failed", error=f"{exc.__class__.__name__}: {exc}")
        finally:
            _refreshing.release()

    threading.Thread(target=run, name="sweepbot-rate-limit", daemon=True).start()


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


def failures(session: Session, limit: int = 10) -> list[S.Failure]:
    """What needs a human: failed deliveries and jobs, blocked watches, report and config errors."""
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
                at=_aware(d.finished_at or d.received_at),
                summary=f"{d.event}{'.' + d.action if d.action else ''} failed after "
                f"{d.attempts} attempt(s): {(d.error or '')[:200]}",
                link=f"/deliveries/{d.id}",
            )
        )
    for j in session.scalars(
        select(SweepJob).where(SweepJob.state == JobState.FAILED).order_by(SweepJob.id.desc()).limit(limit)
    ):
        out.append(
            S.Failure(
                kind="job",
                id=str(j.id),
                at=_aware(j.finished_at or j.updated_at),
                summary=f"sweep {j.sweep_id} job {j.seq} conc {j.conc} failed: {(j.reason or '')[:200]}",
                link=f"/sweeps/{j.sweep_id}#job-{j.id}",
            )
        )
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
                at=_aware(w.updated_at),
                summary=f"{w.repo}#{w.pr_number} {w.config_key} {w.state}: {(w.reason or '')[:200]}",
                link=f"/watches#watch-{w.id}",
            )
        )
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
                at=_aware(r.marked_at),
                summary=f"report {r.repo}#{r.pr_number} {r.config_key}: {(r.last_error or '')[:200]}",
                link=f"/sweeps/{r.sweep_id}",
            )
        )
    for c in session.scalars(select(BotConfigRecord).where(BotConfigRecord.ok.is_(False)).limit(limit)):
        out.append(
            S.Failure(
                kind="bot_config",
                id=c.repo,
                at=_aware(c.read_at),
                summary=f"{c.repo} bot config refused: {(c.error or '')[:200]}",
                link=f"/watches?repo={c.repo}",
            )
        )
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


# ---------------------------------------------------------------------- deliveries and audit


def delivery_out(d: Delivery) -> S.DeliveryOut:
    return S.DeliveryOut(
        id=d.id,
        event=d.event,
        action=d.action,
        repo=d.repo,
        status=d.status,
        attempts=d.attempts,
        error=d.error,
        body_bytes=d.body_bytes,
        received_at=_aware(d.received_at),
        finished_at=_aware(d.finished_at),
    )


def deliveries(
    session: Session, *, q: str | None, event: str | None, status: str | None, page: int, per_page: int
) -> S.Page[S.DeliveryOut]:
    # Only the listed columns: the stored bodies can be megabytes each.
    stmt = select(Delivery).order_by(Delivery.received_at.desc(), Delivery.id)
    if q:
        stmt = stmt.where(Delivery.id.startswith(q.strip(), autoescape=True))
    if event:
        stmt = stmt.where(Delivery.event == event)
    if status:
        stmt = stmt.where(Delivery.status == status)
    from sqlalchemy.orm import defer

    stmt = stmt.options(defer(Delivery.body))
    rows, more = page_of(session, stmt, page, per_page)
    return S.Page[S.DeliveryOut](
        items=[delivery_out(d) for d in rows], page=page, per_page=per_page, has_next=more
    )


def delivery_detail(session: Session, delivery_id: str) -> S.DeliveryDetail | None:
    d = session.get(Delivery, delivery_id)
    if d is None:
        return None
    try:
        payload: Any = json.loads(d.body)
    except (ValueError, UnicodeDecodeError):
        payload = d.body.decode("utf-8", errors="replace")
    return S.DeliveryDetail(**delivery_out(d).model_dump(), payload=payload)


def delivery_events(session: Session) -> list[str]:
    return [e for (e,) in session.execute(select(Delivery.event).distinct().order_by(Delivery.event))]


def audit(
    session: Session,
    *,
    actor: str | None,
    action: str | None,
    outcome: str | None,
    target: str | None,
    page: int,
    per_page: int,
    caused_by: str | None = None,
) -> S.Page[S.AuditOut]:
    stmt = select(AuditEntry).order_by(AuditEntry.id.desc())
    if actor:
        stmt = stmt.where(AuditEntry.actor == actor)
    if caused_by:
        stmt = stmt.where(AuditEntry.caused_by == caused_by)
    if action:
        stmt = stmt.where(AuditEntry.action.startswith(action, autoescape=True))
    if outcome:
        stmt = stmt.where(AuditEntry.outcome == outcome)
    if target:
        stmt = stmt.where(AuditEntry.target.contains(target, autoescape=True))
    rows, more = page_of(session, stmt, page, per_page)
    items = [
        S.AuditOut(
            id=a.id,
            at=_aware(a.at),
            actor=a.actor,
            caused_by=a.caused_by,
            action=a.action,
            target=a.target,
            outcome=a.outcome,
            detail=a.detail,
            delivery_id=a.delivery_id,
        )
        for a in rows
    ]
    return S.Page[S.AuditOut](items=items, page=page, per_page=per_page, has_next=more)


# ---------------------------------------------------------------------- sweeps


def job_out(j: SweepJob) -> S.JobOut:
    start = _aware(j.started_at or j.dispatched_at)
    end = _aware(j.finished_at)
    return S.JobOut(
        id=j.id,
        position=j.position,
        seq=j.seq,
        conc=j.conc,
        tp=j.tp,
        runner_label=j.runner_label,
        state=j.state,
        reason=j.reason,
        attempts=j.attempts,
        run_id=j.run_id,
        run_url=j.run_url,
        created_at=_aware(j.created_at),
        dispatched_at=_aware(j.dispatched_at),
        started_at=_aware(j.started_at),
        finished_at=end,
        duration_s=(end - start).total_seconds() if start and end else None,
    )


def _progress(by_state: dict[str, int]) -> S.Progress:
    total = sum(by_state.values())
    finished = sum(n for s, n in by_state.items() if s in JobState.FINAL)
    return S.Progress(
        total=total,
        finished=finished,
        by_state=by_state,
        percent=round(100.0 * finished / total, 1) if total else 0.0,
    )


def _sweep_out(s: Sweep, by_state: dict[str, int]) -> S.SweepOut:
    return S.SweepOut(
        id=s.id,
        repo=s.repo,
        pr_number=s.pr_number,
        config_key=s.config_key,
        image=s.image,
        state=s.state,
        state_reason=s.state_reason,
        requested_by=s.requested_by,
        reason=s.reason,
        priority=s.priority,
        created_at=_aware(s.created_at),
        finished_at=_aware(s.finished_at),
        progress=_progress(by_state),
    )


def sweeps(
    session: Session,
    *,
    repo: str | None,
    pr: int | None,
    config_key: str | None,
    state: str | None,
    page: int,
    per_page: int,
) -> S.Page[S.SweepOut]:
    stmt = select(Sweep).order_by(Sweep.id.desc())
    if repo:
        stmt = stmt.where(Sweep.repo == repo)
    if pr is not None:
        stmt = stmt.where(Sweep.pr_number == pr)
    if config_key:
        stmt = stmt.where(Sweep.config_key == config_key)
    if state:
        stmt = stmt.where(Sweep.state == state)
    rows, more = page_of(session, stmt, page, per_page)
    counts: dict[int, dict[str, int]] = defaultdict(dict)
    if rows:
        for sweep_id, job_state, n in session.execute(
            select(SweepJob.sweep_id, SweepJob.state, func.count())
            .where(SweepJob.sweep_id.in_([s.id for s in rows]))
            .group_by(SweepJob.sweep_id, SweepJob.state)
        ):
            counts[sweep_id][job_state] = int(n)
    items = [_sweep_out(s, counts.get(s.id, {})) for s in rows]
    return S.Page[S.SweepOut](items=items, page=page, per_page=per_page, has_next=more)


def sweep_detail(session: Session, sweep_id: int) -> S.SweepDetail | None:
    s = session.get(Sweep, sweep_id)
    if s is None:
        return None
    from app.flows.scheduler import display_key

    # Listed as a curve is read (ascending conc), not in dispatch order (largest conc first).
    jobs = sorted(session.scalars(select(SweepJob).where(SweepJob.sweep_id == sweep_id)), key=display_key)
    by_state: dict[str, int] = defaultdict(int)
    for j in jobs:
        by_state[j.state] += 1
    base = _sweep_out(s, dict(by_state))
    return S.SweepDetail(**base.model_dump(), head_sha=s.head_sha, jobs=[job_out(j) for j in jobs])


def _accuracy_for(
    session: Session,
    config_key: str,
    image: str | None,
    isl: int | None,
    osl: int | None,
    ref: Any,
    gap_rows: list[S.GapRow],
) -> tuple[list[S.AccuracyRowOut], list[str], str]:
    """The key's newest eval score per conc, task and filter on ``image``, against the reference."""
    from app.core.accuracy import accuracy_notes, compare_accuracy, overall_verdict_line
    from app.models.results import EvalResult

    stmt = select(EvalResult).where(EvalResult.config_key == config_key)
    if image:
        stmt = stmt.where(EvalResult.image == image)
    if isl is not None and osl is not None:
        stmt = stmt.where(EvalResult.isl == isl, EvalResult.osl == osl)
    newest: dict[tuple[int, str, str], EvalResult] = {}
    for row in session.scalars(stmt.order_by(EvalResult.id)):
        newest[(row.conc, row.task, row.filter)] = row
    scores = [newest[k] for k in sorted(newest)]
    rows = compare_accuracy(scores, list(ref.accuracy) if ref is not None else [])
    out = [
        S.AccuracyRowOut(
            task=r.task,
            filter=r.filter,
            conc=r.conc,
            score=r.score,
            stderr=r.stderr,
            n=r.n,
            limit=r.limit,
            reference=r.reference,
            diff_pts=None if r.shortfall is None else round(-r.shortfall * 100, 2),
            half_width_pts=None if r.half_width is None else round(r.half_width * 100, 2),
            verdict=r.verdict,
            run_url=src.run_url,
        )
        for r, src in zip(rows, scores, strict=True)
    ]
    return out, accuracy_notes(rows), overall_verdict_line(gap_rows, rows)


def sweep_filter_values(session: Session) -> dict[str, list[str]]:
    """Choices for the filter form, from the small label-like columns only."""
    repos = [r for (r,) in session.execute(select(Sweep.repo).distinct().order_by(Sweep.repo).limit(200))]
    return {"repos": repos, "states": [SweepState.AWAITING_APPROVAL, *SweepState.OPEN[1:], *SweepState.FINAL]}


# ---------------------------------------------------------------------- watches


def _why_no_bump(w: Watch, deps: list[Dependency]) -> str | None:
    if w.state == WatchState.ARCHIVED and w.reason:
        return w.reason  # the key moved to configs/deprecated/: nothing else matters
    live = [d for d in deps if not d.dropped]
    closed = [d for d in live if d.state == DepState.CLOSED]
    if closed:
        refs = " ".join(d.ref for d in closed)
        return (
            f"{', '.join(d.ref for d in closed)} closed without merge: it can never ship; drop it with "
            f"`/depends-on drop {refs}`"
        )
    open_ = [d for d in live if d.state in (DepState.OPEN, DepState.UNKNOWN)]
    if open_:
        return "waiting for " + ", ".join(f"{d.ref} ({d.state})" for d in open_) + " to merge"
    missing = [d for d in live if d.state == DepState.MERGED and not d.contained_in]
    if missing:
        return "merged, but no nightly contains " + ", ".join(d.ref for d in missing) + " yet"
    if w.reason:
        return w.reason
    if not live:
        return "no dependencies to wait for"
    return "every dependency shipped; the bump happens at the next check"


def _bump_out(b: Bump, base: str) -> S.BumpOut:
    diff: str | None = None
    if b.commit_sha:
        diff = f"{base}/{b.repo}/commit/{b.commit_sha}"
    if b.bump_pr_number:
        diff = f"{base}/{b.repo}/pull/{b.bump_pr_number}/files"
    return S.BumpOut(
        image=b.image,
        old_image=b.old_image,
        state=b.state,
        mode=b.mode,
        commit_sha=b.commit_sha,
        branch=b.branch,
        bump_pr_number=b.bump_pr_number,
        diff_url=diff,
        created_at=_aware(b.created_at),
    )


def watches(
    session: Session,
    settings: Settings,
    *,
    repo: str | None,
    state: str | None,
    page: int,
    per_page: int,
    timeline_tags: int = 20,
) -> S.WatchesOut:
    base = html_base(settings)
    # Waiting and blocked watches first: they are the ones someone may need to act on.
    active_first = case((Watch.state.in_(WatchState.ACTIVE), 0), else_=1)
    stmt = select(Watch).order_by(active_first, Watch.id.desc())
    if repo:
        stmt = stmt.where(Watch.repo == repo)
    if state:
        stmt = stmt.where(Watch.state == state)
    rows, more = page_of(session, stmt, page, per_page)
    ids = [w.id for w in rows]
    deps: dict[int, list[Dependency]] = defaultdict(list)
    bumps: dict[int, Bump] = {}
    if ids:
        for d in session.scalars(
            select(Dependency).where(Dependency.watch_id.in_(ids)).order_by(Dependency.id)
        ):
            deps[d.watch_id].append(d)
        for bump in session.scalars(select(Bump).where(Bump.watch_id.in_(ids)).order_by(Bump.id)):
            bumps[bump.watch_id] = bump  # the newest wins
    items: list[S.WatchOut] = []
    labels: dict[int, NightlyLabels] = {}
    for w in rows:
        b = bumps.get(w.id)
        bumped_image = b.image if b is not None and b.state in ("committed", "already") else None
        labels[w.id] = label_nightlies(
            pinned_image=w.pinned_image, newest_tag=w.chosen_tag, bumped_image=bumped_image
        )
    for w in rows:
        b = bumps.get(w.id)
        dep_rows = deps.get(w.id, [])
        items.append(
            S.WatchOut(
                id=w.id,
                repo=w.repo,
                pr_number=w.pr_number,
                config_key=w.config_key,
                state=w.state,
                image_repo=w.image_repo,
                pinned_image=w.pinned_image,
                chosen_tag=labels[w.id].chosen,
                newest_containing_tag=labels[w.id].newest_containing,
                first_containing_tag=w.first_containing_tag,
                decision=w.decision,
                reason=w.reason,
                checked_at=_aware(w.checked_at),
                dependencies=[
                    S.DependencyOut(
                        ref=d.ref,
                        state=d.state,
                        merge_sha=d.merge_sha,
                        title=d.title,
                        contained_in=d.contained_in,
                        dropped=d.dropped,
                        dropped_by=d.dropped_by,
                        url=f"{base}/{d.dep_repo}/pull/{d.dep_number}",
                    )
                    for d in dep_rows
                ],
                bump=_bump_out(b, base) if b is not None else None,
                why_no_bump=None
                if b is not None and b.state in ("committed", "already")
                else _why_no_bump(w, dep_rows),
            )
        )
    timelines: list[S.Timeline] = []
    for image_repo in sorted({w.image_repo for w in rows if w.image_repo}):
        pinned = {
            w.pinned_image.rsplit(":", 1)[-1]
            for w in rows
            if w.image_repo == image_repo and w.pinned_image and ":" in w.pinned_image
        }
        chosen = {t for w in rows if w.image_repo == image_repo and (t := labels[w.id].chosen)}
        newest = {t for w in rows if w.image_repo == image_repo and (t := labels[w.id].newest_containing)}
        tags = list(
            session.scalars(
                select(ImageTag)
                .where(ImageTag.image_repo == image_repo)
                .order_by(ImageTag.pushed_at.desc().nulls_last(), ImageTag.seq.desc())
                .limit(timeline_tags)
            )
        )
        shown = {t.tag for t in tags}
        # A pinned tag older than the window (or deleted long ago) still belongs on the timeline.
        extra = (pinned | chosen | newest) - shown
        if extra:
            tags += list(
                session.scalars(
                    select(ImageTag).where(ImageTag.image_repo == image_repo, ImageTag.tag.in_(sorted(extra)))
                )
            )
        tags.sort(key=lambda t: (_aware(t.pushed_at) or datetime.min.replace(tzinfo=UTC), t.seq))
        # A pin the registry deleted before sweepbot ever listed it has no row: show it anyway,
        # first (it is older than anything listed), as pinned and deleted.
        never_listed = sorted(
            w.pinned_image.rsplit(":", 1)[-1]
            for w in rows
            if w.image_repo == image_repo
            and w.pinned_image
            and ":" in w.pinned_image
            and w.pinned_missing_since is not None
            and w.pinned_image.rsplit(":", 1)[-1] not in {t.tag for t in tags}
        )
        timelines.append(
            S.Timeline(
                image_repo=image_repo,
                tags=[
                    S.TagOut(
                        tag=name, commit_sha=None, pushed_at=None, deleted=True, pinned=True, chosen=False
                    )
                    for name in dict.fromkeys(never_listed)
                ]
                + [
                    S.TagOut(
                        tag=t.tag,
                        commit_sha=t.commit_sha,
                        pushed_at=_aware(t.pushed_at),
                        deleted=t.deleted_at is not None,
                        pinned=t.tag in pinned,
                        chosen=t.tag in chosen,
                        newest_containing=t.tag in newest and t.tag not in chosen,
                    )
                    for t in tags
                ],
            )
        )
    return S.WatchesOut(
        watches=S.Page[S.WatchOut](items=items, page=page, per_page=per_page, has_next=more),
        timelines=timelines,
    )


# ---------------------------------------------------------------------- results


def result_keys(session: Session, *, limit: int = 200) -> list[S.KeySummary]:
    rows = session.execute(
        select(Result.config_key, func.count(), func.max(Result.created_at))
        .group_by(Result.config_key)
        .order_by(func.max(Result.id).desc())
        .limit(limit)
    )
    return [S.KeySummary(config_key=k, results=int(n), last_at=_aware(at)) for k, n, at in rows]


def seq_name(isl: int | None, osl: int | None) -> str | None:
    if isl is None or osl is None:
        return None

    def short(n: int) -> str:
        return f"{n // 1024}k" if n % 1024 == 0 else str(n)

    return f"{short(isl)}{short(osl)}"


def _point(r: Result) -> S.ResultPoint:
    return S.ResultPoint(
        conc=r.conc,
        mean_tpot_ms=r.mean_tpot_ms,
        median_tpot_ms=r.median_tpot_ms,
        mean_ttft_ms=r.mean_ttft_ms,
        tput_per_gpu=r.tput_per_gpu,
        interactivity=r.interactivity,
        output_tput=r.output_tput,
        run_url=r.run_url,
    )


def _configured_references(session: Session, repo: str | None) -> dict[str, str]:
    if not repo:
        return {}
    rec = session.get(BotConfigRecord, repo)
    refs = (rec.config or {}).get("references") if rec is not None and rec.ok else None
    return {str(k): str(v) for k, v in refs.items()} if isinstance(refs, dict) else {}


def results_for_key(
    session: Session,
    config_key: str,
    *,
    image: str | None = None,
    seq: str | None = None,
    max_images: int = 10,
) -> S.ResultsKeyOut:
    cols = (
        Result.id,
        Result.image,
        Result.isl,
        Result.osl,
        Result.tp,
        Result.model,
        Result.runner,
        Result.repo,
    )
    newest_stmt = select(*cols).where(Result.config_key == config_key)
    if image:
        newest_stmt = newest_stmt.where(Result.image == image)
    newest = session.execute(newest_stmt.order_by(Result.id.desc()).limit(1)).first()
    empty = S.ResultsKeyOut(
        config_key=config_key,
        seq=seq,
        image=image,
        points=[],
        reference_name=None,
        reference_source=None,
        reference_caveat=None,
        reference_points=[],
        reference_metric=None,
        gap=[],
        images=[],
    )
    if newest is None:
        return empty
    isl, osl = newest.isl, newest.osl
    if seq:
        found = session.execute(
            select(Result.isl, Result.osl)
            .where(Result.config_key == config_key)
            .group_by(Result.isl, Result.osl)
        ).all()
        match = [(a, b) for a, b in found if seq_name(a, b) == seq]
        if not match:
            return empty
        isl, osl = match[0]
    chosen_image = image or newest.image
    rows = list(
        session.scalars(
            select(Result)
            .where(
                Result.config_key == config_key,
                Result.image == chosen_image,
                Result.isl == isl,
                Result.osl == osl,
            )
            .order_by(Result.conc, Result.id)
        )
    )
    # The chart shows the newest run per conc; the gap uses every run (its spread is the noise).
    latest: dict[int, Result] = {}
    runs: dict[int, list[float]] = defaultdict(list)
    for r in rows:
        latest[r.conc] = r
        if r.mean_tpot_ms is not None:
            runs[r.conc].append(r.mean_tpot_ms)
    sample = rows[-1] if rows else None
    try:
        ref = choose_reference(
            session,
            config_key=config_key,
            model=sample.model if sample else None,
            hardware=sample.runner if sample else None,
            tp=sample.tp if sample else None,
            isl=isl,
            osl=osl,
            configured=_configured_references(session, sample.repo if sample else None),
        )
    except ReferenceError as exc:
        log.warning("reference_unusable", config_key=config_key, error=str(exc))
        ref = None
    gap_rows: list[S.GapRow] = []
    ref_points: list[S.ResultPoint] = []
    metric = ref.metric if ref is not None else None
    if ref is not None:
        # A tp4 table says nothing about tp8 runs: only runs at the reference's tp are compared.
        table = gap_table(
            [(r.conc, r) for r in rows if ref.tp is None or r.tp == ref.tp],
            ref,
            tp=ref.tp,
            seq=f"{isl}_{osl}" if isl is not None and osl is not None else None,
        )
        for g in table.rows:
            gap_rows.append(
                S.GapRow(
                    conc=g.conc,
                    recipe=g.recipe,
                    runs=g.runs,
                    reference=g.reference,
                    gap_pct=None if g.gap is None else round(g.gap * 100, 2),
                    tolerance_pct=None if g.tolerance is None else round(g.tolerance * 100, 2),
                    verdict=g.verdict,
                )
            )
        for conc, v in sorted(ref.points.items()):
            ref_points.append(
                S.ResultPoint(
                    conc=conc,
                    mean_tpot_ms=v.get("mean_tpot_ms"),
                    median_tpot_ms=v.get("median_tpot_ms"),
                    mean_ttft_ms=v.get("mean_ttft_ms"),
                    tput_per_gpu=v.get("tput_per_gpu"),
                    interactivity=v.get("interactivity"),
                    output_tput=v.get("output_tput"),
                    run_url=next(iter(ref.runs.get(conc) or []), None),
                )
            )
    # Per image over time: mean TPOT per (image, conc), images ordered by their first result.
    per_image = session.execute(
        select(
            Result.image,
            Result.conc,
            func.avg(Result.mean_tpot_ms),
            func.min(Result.created_at),
            func.min(Result.id),
        )
        .where(Result.config_key == config_key, Result.isl == isl, Result.osl == osl)
        .group_by(Result.image, Result.conc)
    ).all()
    first_id: dict[str, int] = {}
    for img, _conc, _avg, _at, min_id in per_image:
        first_id[img] = min(first_id.get(img, min_id), min_id)
    keep = set(sorted(first_id, key=lambda i: first_id[i])[-max_images:])
    images = sorted(
        (
            S.ImagePoint(
                image=img, first_at=_aware(at), conc=conc, mean_tpot_ms=None if avg is None else float(avg)
            )
            for img, conc, avg, at, _min in per_image
            if img in keep
        ),
        key=lambda p: (first_id[p.image], p.conc),
    )
    accuracy, notes, verdict = _accuracy_for(session, config_key, chosen_image, isl, osl, ref, gap_rows)
    return S.ResultsKeyOut(
        accuracy=accuracy,
        accuracy_source=(ref.accuracy_source or ref.source) if ref is not None and ref.accuracy else None,
        accuracy_notes=notes,
        verdict=verdict,
        config_key=config_key,
        seq=seq_name(isl, osl),
        image=chosen_image,
        points=[_point(r) for _c, r in sorted(latest.items())],
        reference_name=ref.name if ref else None,
        reference_source=ref.source if ref else None,
        reference_caveat=ref.caveat if ref else None,
        reference_points=ref_points,
        reference_metric=metric,
        gap=gap_rows,
        images=images,
    )
