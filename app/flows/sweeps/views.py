"""Views of sweeps and runner queues (``sweep status``, ``sweepbot queue``, the dashboard)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.core.clock import aware
from app.core.sweepspec import (
    display_key,
)
from app.flows.repo.bench_repo import RepoFiles, label_capacity
from app.models.sweeps import PRIORITIES, JobState, RunnerLabel, Sweep, SweepJob, SweepState
from app.store.jobs import inflight_slots
from app.store.sweeps import get_sweep


def sweep_summary(session: Session, sweep_id: int) -> dict[str, Any]:
    """A sweep and its jobs, listed by ``display_key``; ``position`` is each job's release order."""
    sweep = get_sweep(session, sweep_id)
    jobs = sorted(
        session.scalars(select(SweepJob).where(SweepJob.sweep_id == sweep.id)).all(), key=display_key
    )
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job.state] = counts.get(job.state, 0) + 1
    done = sum(1 for j in jobs if j.state in JobState.FINAL)

    def iso(value: datetime | None) -> str | None:
        value = aware(value)
        return value.isoformat() if value else None

    return {
        "id": sweep.id,
        "repo": sweep.repo,
        "pr": sweep.pr_number,
        "head_sha": sweep.head_sha,
        "head_ref": sweep.head_ref,
        "config_key": sweep.config_key,
        "config_path": sweep.config_path,
        "image": sweep.image,
        "fingerprint": sweep.fingerprint,
        "requested_by": sweep.requested_by,
        "reason": sweep.reason,
        "priority": next((k for k, v in PRIORITIES.items() if v == sweep.priority), str(sweep.priority)),
        "state": sweep.state,
        "state_reason": sweep.state_reason,
        "superseded_by": sweep.superseded_by,
        "fork": sweep.is_fork,
        "approved_by": sweep.approved_by,
        "approved_sha": sweep.approved_sha,
        "filters": sweep.filters,
        "created_at": iso(sweep.created_at),
        "finished_at": iso(sweep.finished_at),
        "counts": counts,
        "done": done,
        "total": len(jobs),
        "jobs": [
            {
                "id": j.id,
                "position": j.position,
                "result_name": j.result_name,
                "seq": j.seq,
                "conc": j.conc,
                "tp": j.tp,
                "runner": j.runner_label,
                "state": j.state,
                "reason": j.reason,
                "attempts": j.attempts,
                "run_id": j.run_id,
                "run_url": j.run_url,
                "run_cancel_refused": j.run_cancel_refused,  # what GitHub said when it refused
                "result_url": j.result_url,
                "dispatched_at": iso(j.dispatched_at),
                "started_at": iso(j.started_at),
                "finished_at": iso(j.finished_at),
            }
            for j in jobs
        ],
    }


def queue_snapshot(session: Session, gw: RepoFiles | None = None) -> list[dict[str, Any]]:
    """Per runner label: capacity, busy, free, queued, paused, and each open sweep's progress."""
    labels = {r.label: r for r in session.scalars(select(RunnerLabel)).all()}
    open_rows = session.execute(
        select(SweepJob.runner_label, Sweep.id)
        .join(Sweep, Sweep.id == SweepJob.sweep_id)
        .where(Sweep.state.in_(SweepState.OPEN))
        .distinct()
    ).all()
    per_label: dict[str, set[int]] = {}
    for label, sid in open_rows:
        per_label.setdefault(str(label), set()).add(int(sid))
    out = []
    for label in sorted(set(labels) | set(per_label)):
        row = labels.get(label)
        sweeps = [session.get(Sweep, sid) for sid in sorted(per_label.get(label, ()))]
        repo = sweeps[0].repo if sweeps and sweeps[0] is not None else None
        if row is not None and row.capacity is not None:
            capacity, source = row.capacity, row.capacity_source or "last tick"
        else:
            capacity, source = label_capacity(gw, label, repo)
        busy = inflight_slots(session, label)
        queued = session.execute(
            select(func.count())
            .select_from(SweepJob)
            .join(Sweep, Sweep.id == SweepJob.sweep_id)
            .where(
                SweepJob.runner_label == label,
                SweepJob.state == JobState.QUEUED,
                Sweep.state.in_(SweepState.OPEN),
            )
        ).scalar_one()
        items = []
        for sweep in sweeps:
            if sweep is None:
                continue
            states = [
                s
                for (s,) in session.execute(
                    select(SweepJob.state).where(
                        SweepJob.sweep_id == sweep.id, SweepJob.runner_label == label
                    )
                ).all()
            ]
            items.append(
                {
                    "id": sweep.id,
                    "repo": sweep.repo,
                    "pr": sweep.pr_number,
                    "config_key": sweep.config_key,
                    "state": sweep.state,
                    "total": len(states),
                    "done": sum(1 for s in states if s in JobState.FINAL),
                    "running": sum(1 for s in states if s in JobState.IN_FLIGHT),
                    "queued": sum(1 for s in states if s == JobState.QUEUED),
                }
            )
        out.append(
            {
                "label": label,
                "capacity": capacity,
                "capacity_source": source,
                "busy": busy,
                "free": max(0, capacity - busy),
                "queued": int(queued),
                "paused": bool(row.paused) if row is not None else False,
                "sweeps": items,
            }
        )
    return out
