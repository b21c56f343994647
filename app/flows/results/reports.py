"""The sticky report comment: one per PR and config key, created once, edited in place, debounced.

Every job state change calls ``app.store.reports.mark_report_dirty(session, sweep_id)``, which
bumps the report's ``version``; ``flush_reports`` (beat, every ``report_debounce_seconds``) renders
and upserts each report whose ``version`` is ahead of ``flushed_version`` and that was not flushed
within the debounce interval: at most one edit per window per comment. A body equal to the one the
comment was last given (``body_digest``) is not sent: many job changes do not show in the report.
A report stays dirty until a flush lands, so the final state always lands. The text is pure
(``app.core.report``); this module loads its data and lands it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog
from sqlalchemy.orm import Session

from app.adapters.github.errors import NotFound
from app.core.references import ReferenceError
from app.core.report import (
    FINAL_JOB_STATES,
    JobView,
    ReportData,
    progress_bar,
    render_report_data,
    report_marker,
)
from app.core.routing import TransientError
from app.core.sweepspec import display_key
from app.models.results import EvalResult, ReportState, Result
from app.models.sweeps import Sweep
from app.settings import get_settings
from app.store.bot_configs import stored_config
from app.store.references import choose_reference
from app.store.reports import dirty_report_ids, job_states, newer_sweep_id, pr_sweeps, sweep_jobs
from app.store.results import find_reusable, point_evals, sweep_evals, sweep_results

log = structlog.get_logger(__name__)


class CommentGateway(Protocol):
    """The gateway call a report flush makes (``app.adapters.github.GitHubGateway`` has it)."""

    def upsert_comment(self, repo: str, number: int, marker: str, body: str) -> dict[str, Any]: ...

    def update_comment(self, repo: str, comment_id: int, body: str) -> dict[str, Any]: ...


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(dt: datetime | None) -> datetime | None:
    if dt is not None and dt.tzinfo is None:
        return dt.replace(tzinfo=UTC)  # SQLite returns naive datetimes
    return dt


# ------------------------------------------------------------------------------------ flush


def _flush_one(
    session: Session,
    state_id: int,
    gw_factory: Callable[[Session], CommentGateway],
    debounce_seconds: float,
    moment: datetime,
) -> bool:
    """Land one dirty report unless it was edited within the debounce interval; True when it landed."""
    state = session.get(ReportState, state_id)
    if state is None or state.version <= state.flushed_version:
        return False
    flushed_at = _aware(state.flushed_at)
    if flushed_at is not None and (moment - flushed_at).total_seconds() < debounce_seconds:
        return False  # edited recently: the next flush lands it
    seen = state.version
    try:
        body = render_report(session, state.sweep_id)
        digest = hashlib.sha256(body.encode()).hexdigest()
        if state.comment_id is not None and digest == state.body_digest:
            # the change that marked it does not show (a job's run_conclusion, a claim): settled
            # without an edit, and the debounce window still counts from the last real one
            state.flushed_version, state.last_error = seen, None
            session.commit()
            return False
        gw = gw_factory(session)
        comment = _land(gw, state, body)
    except TransientError as exc:
        session.rollback()
        log.warning("report_flush_failed", report=state_id, error=str(exc))
        return False
    except Exception as exc:
        # One report that cannot land (sweep gone, PR locked, comment refused) must not
        # stop every report after it: record why (the dashboard lists it) and go on.
        session.rollback()
        log.exception("report_flush_error", report=state_id)
        failed = session.get(ReportState, state_id)
        if failed is not None:
            failed.last_error = f"{exc.__class__.__name__}: {exc}"[:2000]
            session.commit()
        return False
    state = session.get(ReportState, state_id)
    assert state is not None
    state.comment_id = int(comment["id"]) if isinstance(comment, dict) and "id" in comment else None
    state.flushed_version = seen  # a mark that raced with us keeps it dirty
    state.flushed_at, state.body_digest = moment, digest
    state.last_error = None
    session.commit()
    return True


def _land(gw: CommentGateway, state: ReportState, body: str) -> dict[str, Any]:
    """Edit the sticky comment by the id the last flush stored (one call); look it up (list, then
    create or edit) only when no id is known or the comment is gone."""
    marker = report_marker(state.config_key)
    if state.comment_id is not None:
        try:
            return gw.update_comment(
                state.repo, state.comment_id, body if marker in body else f"{body}\n\n{marker}"
            )
        except NotFound:
            log.info("report_comment_gone", repo=state.repo, pr=state.pr_number, comment=state.comment_id)
    return gw.upsert_comment(state.repo, state.pr_number, marker, body)


def flush_reports(
    session_factory: Callable[[], Session],
    gw_factory: Callable[[Session], CommentGateway],
    *,
    debounce_seconds: float | None = None,
    now: datetime | None = None,
) -> int:
    """Upsert every dirty report not flushed within the debounce interval; return how many landed."""
    if debounce_seconds is None:
        debounce_seconds = get_settings().report_debounce_seconds
    moment = now or _now()
    with session_factory() as session:
        ids = dirty_report_ids(session)
    landed = 0
    for state_id in ids:
        with session_factory() as session:
            landed += _flush_one(session, state_id, gw_factory, debounce_seconds, moment)
    return landed


# ------------------------------------------------------------------------------------ the data


def _reused_rows(
    session: Session,
    sweep: Sweep,
    jobs: list[JobView],
    results: dict[str, list[Result]],
    evals: list[EvalResult],
) -> None:
    """Add the stored rows a reused job stands for (its result and, for an eval point, its scores)."""
    for j in jobs:
        if j.state == "reused" and j.result_name not in results:
            hit = find_reusable(
                session, image=sweep.image, fingerprint=sweep.fingerprint, result_name=j.result_name
            )
            if hit is not None:
                results[j.result_name] = [hit]
    have_eval = {e.result_name for e in evals}
    for j in jobs:
        if j.state == "reused" and (j.point or {}).get("run-eval") and j.result_name not in have_eval:
            evals += point_evals(
                session, image=sweep.image, fingerprint=sweep.fingerprint, result_name=j.result_name
            )


def load_report_data(session: Session, sweep_id: int) -> ReportData:
    sweep = session.get(Sweep, sweep_id)
    if sweep is None:
        raise LookupError(f"sweep {sweep_id} does not exist (see `sweepbot queue` for open sweeps)")
    # Points as a curve is read (ascending conc per seq-len and tp), not in release order.
    jobs = sorted(sweep_jobs(session, sweep_id), key=display_key)
    views = [
        JobView(j.id, j.conc, j.seq, j.tp, j.state, j.run_url, j.reason, j.result_name, dict(j.point or {}))
        for j in jobs
    ]
    results = sweep_results(session, sweep_id)
    evals = sweep_evals(session, sweep_id)
    _reused_rows(session, sweep, views, results, evals)
    superseded = sweep.superseded_by or newer_sweep_id(session, sweep)
    point = dict(jobs[0].point) if jobs else {}
    notes: list[str] = []
    reference = None
    try:
        reference = choose_reference(
            session,
            config_key=sweep.config_key,
            model=point.get("model"),
            hardware=point.get("runner"),
            tp=point.get("tp"),
            isl=point.get("isl"),
            osl=point.get("osl"),
            configured=_configured_references(session, sweep.repo),
        )
    except ReferenceError as exc:
        notes.append(f"Reference configuration problem: {exc}")
    return ReportData(
        sweep.id,
        sweep.repo,
        sweep.pr_number,
        sweep.config_key,
        sweep.image,
        sweep.fingerprint,
        sweep.head_sha,
        sweep.requested_by,
        sweep.state,
        views,
        results,
        reference,
        superseded,
        notes,
        list(evals),
        float(get_settings().accuracy_tolerance),
        str((sweep.filters or {}).get("mode") or "dispatch"),
        eval_thresholds=sweep.eval_thresholds,
        merge=merge_state(sweep.filters or {}),
    )


def merge_state(filters: dict[str, Any]) -> dict[str, Any]:
    """What the report says about reuse at merge and main's run (app.core.reusereport)."""
    keys = ("publishable", "publishable_why", "reuse", "publication")
    return {k: filters[k] for k in keys if k in filters}


def _configured_references(session: Session, repo: str) -> dict[str, str] | None:
    """``references:`` of the repo's bot config (config key -> table name | sibling | none), if any."""
    cfg = stored_config(session, repo)
    refs = getattr(cfg, "references", None) if cfg is not None else None
    return dict(refs) if isinstance(refs, dict) else None


def render_report(session: Session, sweep_id: int) -> str:
    return render_report_data(load_report_data(session, sweep_id))


def pr_status_text(session: Session, *, repo: str, pr_number: int) -> str:
    """``/sweep status``: the newest sweep per config key of this PR, with progress."""
    sweeps = pr_sweeps(session, repo=repo, pr_number=pr_number)
    if not sweeps:
        return "No sweep has been requested on this PR yet. Start one with `/sweep`."
    seen: set[str] = set()
    lines = ["| config key | sweep | state | progress |", "| --- | ---: | --- | --- |"]
    for sweep in sweeps:
        if sweep.config_key in seen:
            continue
        seen.add(sweep.config_key)
        states = job_states(session, sweep.id)
        done = sum(1 for s in states if s in FINAL_JOB_STATES)
        lines.append(
            f"| `{sweep.config_key}` | #{sweep.id} | {sweep.state} | "
            f"`{progress_bar(done, len(states), 10)}` {done}/{len(states)} |"
        )
    return "\n".join(lines)
