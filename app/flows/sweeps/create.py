"""Storing a sweep: one job per point, identical requests converge, older sweeps are superseded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from app.core.clock import utcnow
from app.core.dispatchjobs import DispatchJobs
from app.core.sweepspec import (
    SweepError,
    SweepFilters,
    group_fields,
    group_key,
    point_conc,
    point_order,
    point_seq,
    point_tp,
    sweep_digest,
)
from app.db import transaction_lock
from app.flows.sweeps.cancel import CancelGateway, close_sweep
from app.models.sweeps import PRIORITIES, JobState, Sweep, SweepJob, SweepState
from app.settings import get_settings
from app.store import reuse
from app.store.audit import record
from app.store.reports import mark_report_dirty
from app.store.reuse import result_link
from app.store.sweeps import maybe_finish_sweep, open_sweeps


def create_sweep(
    session: Session,
    gw: CancelGateway | None,
    *,
    mode: str = "dispatch",
    repo: str,
    pr_number: int,
    head_sha: str,
    head_ref: str,
    base_ref: str,
    head_repo: str | None,
    is_fork: bool,
    config_key: str,
    config_path: str | None,
    image: str,
    fingerprint: str,
    points: Sequence[dict[str, Any]],
    requested_by: str,
    reason: str,
    filters: SweepFilters | None = None,
    priority: int = PRIORITIES["normal"],
    matrix: DispatchJobs | None = None,
    supersede: bool = True,
    unexpanded: dict[str, Any] | None = None,
) -> tuple[Sweep, bool, list[int]]:
    """Store a sweep with one job per point; returns (sweep, created, ids of sweeps it superseded).

    An open sweep for the same PR, key, head sha, image and points is returned as is (replays of a
    command or a bump converge). Older open sweeps of the same PR and key are superseded, unless
    ``supersede`` is False (canaries: one sweep per nightly, several may be open at once).
    ``mode`` ``label``: the repo's own run-sweep.yml runs the points, so the jobs start out
    ``dispatched`` (holding their runner slots, never released by a tick) with no run, until the
    repo's run is found (``find_label_run``). ``matrix``: what each dispatch's run holds (its
    runners, each point's place among the run's jobs of its name; app.core.dispatchjobs);
    ``unexpanded``: what it never holds (benchrepo.workflow_prediction_at; dispatch mode only)."""
    if not points:
        raise SweepError(f"{config_key}: the plan has no points")
    fields = group_fields(get_settings())
    digest = sweep_digest(points)
    # two identical requests at once (a command and a bump, two workers) must not both create one
    transaction_lock(session, f"sweep:{repo}#{pr_number}:{config_key}")
    existing = open_sweeps(session, repo=repo, pr_number=pr_number, config_key=config_key)
    for old in existing:
        if (
            old.head_sha == head_sha
            and old.image == image
            and old.points_digest == digest
            and old.fingerprint == fingerprint
        ):
            return old, False, []
    sweep = Sweep(
        repo=repo,
        pr_number=pr_number,
        head_sha=head_sha,
        head_ref=head_ref,
        base_ref=base_ref,
        head_repo=head_repo,
        is_fork=is_fork,
        config_key=config_key,
        config_path=config_path,
        image=image,
        fingerprint=fingerprint,
        points_digest=digest,
        filters={**(filters or SweepFilters()).to_json(), "mode": mode},
        unexpanded=unexpanded if mode == "dispatch" else None,
        requested_by=requested_by,
        reason=reason,
        priority=priority,
        state=SweepState.AWAITING_APPROVAL if is_fork else SweepState.ACTIVE,
        last_release=0,
        updated_at=utcnow(),
    )
    session.add(sweep)
    session.flush()
    _add_jobs(session, sweep, points, fields, mode=mode, matrix=matrix or DispatchJobs())
    superseded = _supersede(session, gw, existing if supersede else [], sweep, actor=requested_by)
    _record_created(session, sweep, len(points), superseded, actor=requested_by)
    maybe_finish_sweep(session, sweep)
    mark_report_dirty(session, sweep.id)
    return sweep, True, superseded


def _add_jobs(
    session: Session,
    sweep: Sweep,
    points: Sequence[dict[str, Any]],
    fields: Sequence[str],
    *,
    mode: str,
    matrix: DispatchJobs,
) -> None:
    """One job per point; points a stored result already answers are reused at once.

    Jobs are inserted in the repo's order (ids follow it); ``position`` is the release order.
    """
    now = utcnow()
    for point, pos in zip(points, point_order(points), strict=True):
        gk = group_key(point, fields)
        # label mode: the repo's run-sweep.yml names its jobs with their seq-len, no e2e-tests.yml matrix
        rank = matrix.ranks.get(str(point["result-name"])) if mode == "dispatch" else None
        job = SweepJob(
            sweep_id=sweep.id,
            position=pos,
            point=dict(point),
            result_name=str(point["result-name"]),
            runner_label=str(point["runner"]),
            seq=point_seq(point),
            conc=point_conc(point),
            tp=point_tp(point),
            group_key=gk,
            # label mode: the repo's run gives each point its own runner
            slots=max(1, matrix.slots.get(gk, 1)) if mode == "dispatch" else 1,
            matrix_rank=rank.rank if rank is not None else None,
            matrix_twins=rank.twins if rank is not None else None,
            state=JobState.QUEUED if mode == "dispatch" else JobState.DISPATCHED,
            attempts=0 if mode == "dispatch" else 1,
            dispatched_at=None if mode == "dispatch" else now,
            reason=None if mode == "dispatch" else "waiting for the repo's sweep run",
            updated_at=now,
        )
        reusable = reuse.reusable_for_point(
            session,
            image=sweep.image,
            fingerprint=sweep.fingerprint,
            result_name=job.result_name,
            point=point,
        )
        if reusable is not None:
            job.state, job.finished_at = JobState.REUSED, now
            job.result_url = result_link(reusable)
            job.reason = "same image, recipe and point already measured"
        session.add(job)
    session.flush()


def _supersede(
    session: Session, gw: CancelGateway | None, older: Sequence[Sweep], sweep: Sweep, *, actor: str
) -> list[int]:
    for old in older:
        close_sweep(
            session,
            gw,
            old,
            state=SweepState.SUPERSEDED,
            actor=actor,
            reason=f"superseded by sweep {sweep.id}",
            superseded_by=sweep.id,
        )
    return [old.id for old in older]


def _record_created(
    session: Session, sweep: Sweep, points: int, superseded: list[int], *, actor: str
) -> None:
    record(
        session,
        actor=actor,
        action="sweep.create",
        target=f"{sweep.repo}#{sweep.pr_number}",
        detail={
            "sweep": sweep.id,
            "key": sweep.config_key,
            "head_sha": sweep.head_sha,
            "image": sweep.image,
            "points": points,
            "reason": sweep.reason,
            "fork": sweep.is_fork,
            "superseded": superseded,
        },
    )
