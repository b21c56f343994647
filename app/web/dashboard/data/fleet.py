"""The fleet page's data: per repository the priority controller places jobs for, each runner, its
labels, the job it holds and why; the queue in effective-priority order with the score's parts
(the view the controller stored with its last plan, app/flows/scheduler/runner_hook.py)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models.runnerctl import RunnerController

MAX_QUEUE_ROWS = 500


def named_runners(queue: list[dict[str, Any]], runners: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each queue row with ``runner_name``: the name of the runner it is placed on (the view keeps
    its id), ``#id`` for a runner no longer listed, empty when it waits for one."""
    names = {r.get("id"): r.get("name") for r in runners}
    return [
        {**q, "runner_name": "" if q.get("runner") is None else names.get(q["runner"]) or f"#{q['runner']}"}
        for q in queue
    ]


def fleet(session: Session) -> list[dict[str, Any]]:
    out = []
    for row in session.scalars(select(RunnerController).order_by(RunnerController.repo)):
        view: dict[str, Any] = dict(row.view or {})
        queue = named_runners(list(view.get("queue") or []), list(view.get("runners") or []))
        out.append(
            {
                "repo": row.repo,
                "updated_at": row.updated_at,
                "runners": list(view.get("runners") or []),
                "queue": queue[:MAX_QUEUE_ROWS],
                "queue_total": len(queue),
                "notices": list(view.get("notices") or []),
            }
        )
    return out
