"""Label mode: the repo's own run-sweep.yml runs a labelled PR's sweep; the bot labels and follows it."""

from __future__ import annotations

from typing import Any, Protocol

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.clock import utcnow
from app.core.runmatch import match_label_run
from app.flows.botconfig import BotConfig, stored_config
from app.models.sweeps import JobState, Sweep, SweepJob, SweepState
from app.store.audit import record
from app.store.reports import mark_report_dirty
from app.store.sweeps import sweep_mode

log = structlog.get_logger(__name__)

BOT = "sweepbot"


class LabelGateway(Protocol):
    """What label mode uses: the PR's labels and the repo's runs."""

    def add_labels(self, repo: str, number: int, labels: list[str]) -> Any: ...
    def list_workflow_runs(
        self, repo: str, workflow: str | None = None, **params: Any
    ) -> list[dict[str, Any]]: ...


def sweep_settings(session: Session, repo: str) -> Any:
    """The repo's sweep mode (botconfig.SweepSettings) from its last read config; no GitHub call."""
    return (stored_config(session, repo) or BotConfig()).sweep


def apply_sweep_label(
    session: Session, gw: LabelGateway, sweep: Sweep, pr: dict[str, Any], label: str
) -> None:
    """Label mode: put the repo's primary sweep label on the PR (idempotent: GitHub keeps one)."""
    present = {str(lb.get("name")) for lb in pr.get("labels") or [] if isinstance(lb, dict)}
    if label in present:
        # Already labelled: the bump's push (synchronize) is what starts the repo's run.
        log.info("sweep_label_present", repo=sweep.repo, pr=sweep.pr_number, label=label)
        return
    gw.add_labels(sweep.repo, sweep.pr_number, [label])
    record(
        session,
        actor=BOT,
        action="sweep.label",
        target=f"{sweep.repo}#{sweep.pr_number}",
        detail={"sweep": sweep.id, "label": label},
    )


def find_label_run(session: Session, gw: LabelGateway, sweep: Sweep) -> dict[str, Any] | None:
    """Label mode: the repo's run-sweep.yml run for the sweep's head commit (runmatch.match_label_run)."""
    cfg = sweep_settings(session, sweep.repo)
    runs = gw.list_workflow_runs(
        sweep.repo, cfg.workflow, event="pull_request", head_sha=sweep.head_sha, limit=50
    )
    found = match_label_run(runs, head_sha=sweep.head_sha)
    log.info("label_run_lookup", sweep=sweep.id, how=found.how, reason=found.reason)
    return dict(found.run) if found.run is not None else None


def adopt_label_run(session: Session, sweep: Sweep, run: dict[str, Any]) -> bool:
    """Give the sweep's waiting label-mode jobs the repo's run; True when some were adopted."""
    waiting = session.scalars(
        select(SweepJob).where(
            SweepJob.sweep_id == sweep.id,
            SweepJob.run_id.is_(None),
            SweepJob.state.in_(JobState.IN_FLIGHT),
        )
    ).all()
    for job in waiting:
        job.run_id, job.run_url, job.reason = int(run["id"]), run.get("html_url"), None
        job.updated_at = utcnow()
    if waiting:
        record(
            session,
            actor=BOT,
            action="sweep.follow_run",
            target=f"{sweep.repo}#{sweep.pr_number}",
            detail={
                "sweep": sweep.id,
                "run_id": run["id"],
                "title": run.get("display_title"),
                "jobs": len(waiting),
            },
        )
        mark_report_dirty(session, sweep.id)
    return bool(waiting)


def label_sweeps_for_run(session: Session, run: dict[str, Any]) -> list[Sweep]:
    """Active label-mode sweeps whose head commit this (repo-started) run is for."""
    head_sha = str(run.get("head_sha") or "")
    if not head_sha or run.get("event") not in (None, "pull_request"):
        return []
    sweeps = session.scalars(
        select(Sweep).where(Sweep.head_sha == head_sha, Sweep.state == SweepState.ACTIVE)
    ).all()
    path = str(run.get("path") or "")
    return [
        s
        for s in sweeps
        if sweep_mode(s) == "label"
        and (not path or path.endswith("/" + sweep_settings(session, s.repo).workflow))
    ]
