"""Sweeps: the list with progress per sweep, one sweep with its jobs, the filter choices."""

from __future__ import annotations

from collections import defaultdict
from urllib.parse import quote

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.sweepspec import display_key
from app.models.results import ReportState
from app.models.sweeps import CANARY_REASON, JobState, Sweep, SweepJob, SweepState
from app.web.dashboard import schemas as S
from app.web.dashboard.data.common import aware, page_of


def job_out(j: SweepJob) -> S.JobOut:
    start = aware(j.started_at or j.dispatched_at)
    end = aware(j.finished_at)
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
        created_at=aware(j.created_at),
        dispatched_at=aware(j.dispatched_at),
        started_at=aware(j.started_at),
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


def _report_comments(session: Session, rows: list[Sweep]) -> dict[tuple[str, int, str], int]:
    """The report comment id per (repo, PR, config key) of ``rows``."""
    prs = {s.pr_number for s in rows if s.reason != CANARY_REASON}
    if not prs:
        return {}
    found = session.execute(
        select(ReportState.repo, ReportState.pr_number, ReportState.config_key, ReportState.comment_id).where(
            ReportState.pr_number.in_(prs), ReportState.comment_id.is_not(None)
        )
    )
    return {(repo, pr, key): int(cid) for repo, pr, key, cid in found if cid is not None}


def _links(s: Sweep, base: str, comments: dict[tuple[str, int, str], int]) -> S.SweepLinks:
    """Where a sweep is discussed and what it measured: its PR, the report comment, its results."""
    results = f"/results/{quote(s.config_key, safe='')}?image={quote(s.image, safe='')}"
    if s.reason == CANARY_REASON:
        return S.SweepLinks(results_url=results)
    pr = f"{base}/{s.repo}/pull/{s.pr_number}"
    comment = comments.get((s.repo, s.pr_number, s.config_key))
    report = f"{pr}#issuecomment-{comment}" if comment is not None else None
    return S.SweepLinks(pr_url=pr, report_url=report, results_url=results)


def _sweep_out(s: Sweep, by_state: dict[str, int], links: S.SweepLinks) -> S.SweepOut:
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
        created_at=aware(s.created_at),
        finished_at=aware(s.finished_at),
        progress=_progress(by_state),
        **links.model_dump(),
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
    base: str = "https://github.com",
) -> S.Page[S.SweepOut]:
    """A page of sweeps, newest first; ``base``: where the PRs' GitHub pages live."""
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
    comments = _report_comments(session, rows)
    items = [_sweep_out(s, counts.get(s.id, {}), _links(s, base, comments)) for s in rows]
    return S.Page[S.SweepOut](items=items, page=page, per_page=per_page, has_next=more)


def sweep_detail(session: Session, sweep_id: int, base: str = "https://github.com") -> S.SweepDetail | None:
    s = session.get(Sweep, sweep_id)
    if s is None:
        return None
    # Listed as a curve is read (ascending conc), not in dispatch order (largest conc first).
    jobs = sorted(session.scalars(select(SweepJob).where(SweepJob.sweep_id == sweep_id)), key=display_key)
    by_state: dict[str, int] = defaultdict(int)
    for j in jobs:
        by_state[j.state] += 1
    out = _sweep_out(s, dict(by_state), _links(s, base, _report_comments(session, [s])))
    return S.SweepDetail(**out.model_dump(), head_sha=s.head_sha, jobs=[job_out(j) for j in jobs])


def sweep_filter_values(session: Session) -> dict[str, list[str]]:
    """Choices for the filter form, from the small label-like columns only."""
    repos = [r for (r,) in session.execute(select(Sweep.repo).distinct().order_by(Sweep.repo).limit(200))]
    return {"repos": repos, "states": [SweepState.AWAITING_APPROVAL, *SweepState.OPEN[1:], *SweepState.FINAL]}
