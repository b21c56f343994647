"""Label mode: the repo's own run-sweep.yml runs a labelled PR's sweep; the bot labels and follows it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Protocol

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.bot_config import BotConfig
from app.core.clock import utcnow
from app.core.runmatch import RunMatch, match_label_run
from app.core.sweepway import SweepWay
from app.models.sweeps import JobState, Sweep, SweepJob, SweepState
from app.store.audit import record
from app.store.bot_configs import stored_config
from app.store.reports import mark_report_dirty
from app.store.sweeps import sweep_mode

log = structlog.get_logger(__name__)

BOT = "sweepbot"
# How much earlier than the bot labelled the PR a run may be created (GitHub's clock vs ours)
# and still count as the label's run.
LABEL_CLOCK_SKEW = timedelta(seconds=30)


class LabelGateway(Protocol):
    """What label mode uses: the PR's labels and the repo's runs."""

    def add_labels(self, repo: str, number: int, labels: list[str]) -> Any: ...
    def remove_label(self, repo: str, number: int, label: str) -> Any: ...
    def list_workflow_runs(
        self, repo: str, workflow: str | None = None, **params: Any
    ) -> list[dict[str, Any]]: ...


def sweep_settings(session: Session, repo: str) -> Any:
    """The repo's sweep mode (botconfig.SweepSettings) from its last read config; no GitHub call."""
    return (stored_config(session, repo) or BotConfig()).sweep


def _filters(sweep: Sweep) -> dict[str, Any]:
    return dict(sweep.filters or {})


def _note(sweep: Sweep, **changes: Any) -> None:
    """Label mode's state rides in the sweep's filters JSON (a new dict: the column sees the change)."""
    sweep.filters = {**_filters(sweep), **changes}


def note_way(sweep: Sweep, way: SweepWay) -> None:
    """Keep why the sweep runs this way, and whether its run can be reused at merge (the report)."""
    _note(sweep, way=way.why, publishable=way.publishable, publishable_why=way.publishable_why)


def label_not_before(sweep: Sweep) -> datetime | None:
    """Runs created before this are not the one the bot's label started (None: any run counts)."""
    text = _filters(sweep).get("labelled_at")
    if not text:
        return None
    return datetime.fromisoformat(str(text)) - LABEL_CLOCK_SKEW


def ignored_runs(sweep: Sweep) -> list[int]:
    """The repo's runs found to run no benchmark job for this head: never followed again."""
    return [int(r) for r in _filters(sweep).get("ignored_runs") or []]


def _waiting(session: Session, sweep: Sweep) -> list[SweepJob]:
    return list(
        session.scalars(
            select(SweepJob).where(
                SweepJob.sweep_id == sweep.id,
                SweepJob.run_id.is_(None),
                SweepJob.state.in_(JobState.IN_FLIGHT),
            )
        ).all()
    )


def trigger_label_run(
    session: Session,
    gw: LabelGateway,
    sweep: Sweep,
    pr: dict[str, Any],
    label: str,
    way: SweepWay | None = None,
) -> str:
    """Label mode: make the repo start its sweep run for ``sweep`` (idempotent); says what it did.

    run-sweep.yml runs on ``labeled`` (and on a labelled PR's ``synchronize``). A PR that already
    has the label gets no new run from adding it again (GitHub keeps one label and sends no event),
    so the label is taken off and put back. Done once per sweep (``labelled_at``); a replay after a
    crash between the two calls puts the label back. A bump's sweep on a labelled PR needs nothing:
    the bump's push starts the run. ``way``'s modifiers (``evals-only``, ``all-evals``) are put on
    (and eval modifiers asking for another mode taken off) while the primary label is off, so only
    the primary label's ``labeled`` event starts a sweep (run-sweep.yml needs a primary label).
    """
    add, remove = (way.add, way.remove) if way is not None else ((), ())
    present = label in {str(lb.get("name")) for lb in pr.get("labels") or [] if isinstance(lb, dict)}
    state = _filters(sweep)
    if not _waiting(session, sweep):
        why = "the sweep already follows the repo's run"
    elif present and (state.get("labelled_at") or state.get("label_trigger") == "push"):
        why = "the label is on the PR and already started this sweep's run"
    elif present and sweep.reason == "bump" and not (add or remove):
        _note(sweep, label_trigger="push")
        why = "labelled PR: the bump's push starts the repo's run"
    else:
        if present:
            gw.remove_label(sweep.repo, sweep.pr_number, label)
        for modifier in remove:
            gw.remove_label(sweep.repo, sweep.pr_number, modifier)
        if add:
            gw.add_labels(sweep.repo, sweep.pr_number, list(add))
        _note(sweep, labelled_at=utcnow().isoformat(), label_trigger="label", labels=[label, *add])
        gw.add_labels(sweep.repo, sweep.pr_number, [label])
        record(
            session,
            actor=BOT,
            action="sweep.label",
            target=f"{sweep.repo}#{sweep.pr_number}",
            detail={
                "sweep": sweep.id,
                "label": label,
                "reapplied": present,
                "modifiers": list(add),
                "removed": list(remove),
            },
        )
        why = "label taken off and put back: the repo starts a run" if present else "label added"
    log.info("sweep_label", repo=sweep.repo, pr=sweep.pr_number, sweep=sweep.id, label=label, why=why)
    return why


def _match(sweep: Sweep, runs: list[dict[str, Any]]) -> RunMatch:
    return match_label_run(
        runs, head_sha=sweep.head_sha, not_before=label_not_before(sweep), ignore=ignored_runs(sweep)
    )


def find_label_run(session: Session, gw: LabelGateway, sweep: Sweep) -> dict[str, Any] | None:
    """Label mode: the repo's run-sweep.yml run for the sweep's head commit that the label started
    (runmatch.match_label_run)."""
    cfg = sweep_settings(session, sweep.repo)
    runs = gw.list_workflow_runs(
        sweep.repo, cfg.workflow, event="pull_request", head_sha=sweep.head_sha, limit=50
    )
    found = _match(sweep, runs)
    log.info("label_run_lookup", sweep=sweep.id, how=found.how, reason=found.reason)
    return dict(found.run) if found.run is not None else None


def adopt_label_run(session: Session, sweep: Sweep, run: dict[str, Any]) -> bool:
    """Give the sweep's waiting label-mode jobs the repo's run; True when some were adopted."""
    found = _match(sweep, [run])
    if found.run is None:
        log.info("label_run_passed_over", sweep=sweep.id, run=run.get("id"), reason=found.reason)
        return False
    waiting = _waiting(session, sweep)
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


def drop_label_run(
    session: Session, sweep: Sweep, jobs: list[SweepJob], run_id: int, why: str, *, ignore: bool
) -> None:
    """Let label-mode jobs go of a repo run that does not run the sweep; they follow the next one
    (``ignore``: and never this run again)."""
    now = utcnow()
    for job in jobs:
        job.run_id, job.run_url, job.updated_at = None, None, now
        job.reason = f"{why}; following the repo's next sweep run"
    if ignore:
        _note(sweep, ignored_runs=sorted({*ignored_runs(sweep), run_id}))
    log.info("label_run_dropped", sweep=sweep.id, run=run_id, why=why)
    mark_report_dirty(session, sweep.id)


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
