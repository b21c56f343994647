"""The repair poll's reads of workflow runs: O(1) rate-limited calls per poll per workflow.

For each repository with in-flight dispatched jobs: one conditional listing of the dispatch
workflow's runs created since the oldest in-flight dispatch (``app.core.runpoll.created_cutoff``;
a 304 is free), then ``app.core.runpoll.plan_poll`` says which listed runs are ahead of our jobs;
only those are folded in (``app.flows.scheduler.run_tracking.apply_workflow_run``, as a delivery would be).
Tracked runs the listing did not show are fetched one by one or paged, whichever is cheaper.

Before polling, ``app.core.budget.decide`` reads the last rate-limit headers (stored in the shared
HTTP cache under ``BUDGET_KEY``, so every worker and the dashboard see the same reading): polls
are spread, or skipped (webhooks only), when the bot nears its share of the installation's hourly
limit.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

import structlog
from sqlalchemy.orm import Session, sessionmaker

from app.core import budget
from app.core.routing import TransientError
from app.core.runmatch import run_name_in_title
from app.core.runpoll import JobView, PollPlan, created_cutoff, plan_poll, run_is_ahead
from app.flows.scheduler.run_tracking import TrackingGateway, apply_workflow_run
from app.models import HttpCacheEntry
from app.settings import Settings

if TYPE_CHECKING:  # annotations only: the dashboard reads the budget here, PyGithub stays out
    from app.adapters.github.base import Conditional

log = structlog.get_logger(__name__)

BUDGET_KEY = "sweepbot:github-budget"  # a row of the shared HTTP cache (no ETag): budget state


class RunListing(Protocol):
    """The poll's one read per repository: a conditional (ETag) listing of the workflow's runs."""

    def get_conditional(self, op: str, path: str, params: dict[str, Any] | None = None) -> Conditional: ...


class PollGateway(RunListing, TrackingGateway, Protocol):
    """The poll's reads (the listing, single runs) and what folding a run in uses."""

    def get_run(self, repo: str, run_id: int) -> dict[str, Any]: ...


GatewayFactory = Callable[[Session], PollGateway]


@dataclass(frozen=True)
class Target:
    """One in-flight job of a dispatched sweep, as the poll needs it."""

    job_id: int
    repo: str
    run_id: int | None
    run_name: str | None
    state: str
    run_conclusion: str | None
    dispatched_at: datetime | None


@dataclass
class RunPollResult:
    listings: int = 0  # listing requests made (first pages and further pages)
    not_modified: int = 0  # of them answered 304 (free)
    fetched: int = 0  # single runs read
    applied: int = 0  # runs folded into our jobs that changed something
    budget_mode: str = "normal"
    budget_reason: str = ""
    skipped: bool = False  # the budget held the poll back
    covered: set[int] = field(default_factory=set)  # job ids whose run state this poll knows
    unseen: set[int] = field(default_factory=set)  # jobs with no run id a complete listing did not show
    errors: list[str] = field(default_factory=list)


@dataclass
class BudgetState:
    snapshot: budget.RateSnapshot | None = None
    last_poll_at: float | None = None
    decision: dict[str, Any] | None = None

    def to_json(self) -> str:
        return json.dumps(
            {
                "snapshot": self.snapshot.to_json() if self.snapshot else None,
                "last_poll_at": self.last_poll_at,
                "decision": self.decision,
            }
        )


def load_budget(session: Session) -> BudgetState:
    row = session.get(HttpCacheEntry, BUDGET_KEY)
    if row is None:
        return BudgetState()
    try:
        data = json.loads(row.body)
        snap = budget.RateSnapshot.from_json(data.get("snapshot") or {})
        last = data.get("last_poll_at")
        return BudgetState(snap, float(last) if last is not None else None, data.get("decision"))
    except (ValueError, TypeError, AttributeError):
        log.warning("budget_state_unreadable")
        return BudgetState()


def save_budget(session: Session, state: BudgetState) -> None:
    row = session.get(HttpCacheEntry, BUDGET_KEY)
    if row is None:
        row = HttpCacheEntry(key=BUDGET_KEY, body="")
        session.add(row)
    row.body = state.to_json()
    row.fetched_at = datetime.now(UTC)


def note_rate(session: Session, snapshot: budget.RateSnapshot | None) -> None:
    """Keep a rate-limit reading (from any answer's headers) for the next budget decision."""
    if snapshot is None:
        return
    state = load_budget(session)
    state.snapshot = budget.newer(state.snapshot, snapshot)
    save_budget(session, state)


def _runs_path(repo: str, workflow: str | None) -> tuple[str, str]:
    if workflow:
        return (
            "actions/list-workflow-runs",
            f"/repos/{repo}/actions/workflows/{quote(workflow, safe='')}/runs",
        )
    return "actions/list-workflow-runs-for-repo", f"/repos/{repo}/actions/runs"


def poll_runs(
    session_factory: sessionmaker[Session],
    gw_factory: GatewayFactory,
    targets: Sequence[Target],
    *,
    workflow: str | None,
    settings: Settings,
    now: float | None = None,
) -> RunPollResult:
    """Fold the runs of ``targets`` that moved into our jobs, spending O(1) calls per repository."""
    result = RunPollResult()
    if not targets:
        return result
    moment = time.time() if now is None else now
    with session_factory() as session:
        state = load_budget(session)
    decision = budget.decide(
        state.snapshot,
        share=settings.github_budget_share,
        base_interval_s=settings.job_repair_interval,
        now=moment,
        last_poll_at=state.last_poll_at,
    )
    result.budget_mode, result.budget_reason = decision.mode, decision.reason
    if not decision.poll:
        result.skipped = True
        with session_factory() as session:
            current = load_budget(session)
            current.decision = decision.to_json()
            save_budget(session, current)
            session.commit()
        return result
    by_repo: dict[str, list[Target]] = {}
    for target in targets:
        by_repo.setdefault(target.repo, []).append(target)
    for repo, group in sorted(by_repo.items()):
        try:
            _poll_repo(session_factory, gw_factory, repo, group, workflow, settings, result)
        except TransientError as exc:
            log.warning("run_poll_transient", repo=repo, error=str(exc))
            result.errors.append(f"{repo}: {exc}")
    with session_factory() as session:
        current = load_budget(session)
        current.last_poll_at = moment
        current.decision = decision.to_json()
        save_budget(session, current)
        session.commit()
    log.info(
        "run_poll",
        listings=result.listings,
        not_modified=result.not_modified,
        fetched=result.fetched,
        applied=result.applied,
        budget=result.budget_mode,
    )
    return result


def _list_page(
    session: Session, gw: RunListing, op: str, path: str, params: dict[str, Any], result: RunPollResult
) -> tuple[list[dict[str, Any]], int | None]:
    got = gw.get_conditional(op, path, params)
    result.listings += 1
    result.not_modified += 0 if got.changed else 1
    note_rate(session, getattr(gw, "last_rate", None))
    data = got.data if isinstance(got.data, dict) else {}
    runs = [r for r in data.get("workflow_runs") or [] if isinstance(r, dict)]
    total = data.get("total_count")
    return runs, int(total) if isinstance(total, int) else None


def _poll_repo(
    session_factory: sessionmaker[Session],
    gw_factory: GatewayFactory,
    repo: str,
    group: Sequence[Target],
    workflow: str | None,
    settings: Settings,
    result: RunPollResult,
) -> None:
    tracked: dict[int, list[JobView]] = {}
    for t in group:
        if t.run_id is not None:
            tracked.setdefault(t.run_id, []).append(JobView(t.state, t.run_conclusion))
    waiting = {t.run_name for t in group if t.run_id is None and t.run_name}
    oldest = min((t.dispatched_at for t in group if t.dispatched_at is not None), default=datetime.now(UTC))
    op, path = _runs_path(repo, workflow)
    params: dict[str, Any] = {
        "event": "workflow_dispatch",
        "created": created_cutoff(oldest),
        "per_page": 100,
    }
    with session_factory() as session:
        gw = gw_factory(session)
        listing, total = _list_page(session, gw, op, path, params, result)
        plan: PollPlan = plan_poll(listing, total_count=total, tracked=tracked, waiting_names=waiting)
        runs = list(plan.apply)
        seen = {int(r["id"]) for r in listing if isinstance(r.get("id"), int)}
        for page in range(2, 2 + plan.more_pages):
            more, _ = _list_page(session, gw, op, path, {**params, "page": page}, result)
            seen |= {int(r["id"]) for r in more if isinstance(r.get("id"), int)}
            runs += [
                r for r in more if int(r.get("id") or 0) in tracked and run_is_ahead(r, tracked[int(r["id"])])
            ]
        for run_id in plan.fetch:
            fetched = gw.get_run(repo, run_id)
            result.fetched += 1
            seen.add(run_id)
            if run_is_ahead(fetched, tracked[run_id]):
                runs.append(fetched)
        session.commit()  # the listing's ETag and body, and the rate-limit reading
    complete = total is None or total <= len(listing) or plan.more_pages > 0
    names = {run_name_in_title(str(r.get("display_title") or "")) for r in runs}
    for t in group:
        known = t.run_id in seen if t.run_id is not None else t.run_name in names
        if known:
            result.covered.add(t.job_id)
        elif t.run_id is None and complete:
            result.unseen.add(t.job_id)
    for run in runs:
        after: list[Callable[[], None]] = []
        with session_factory() as session:
            try:
                if apply_workflow_run(
                    session, gw_factory(session), dict(run), after_commit=after, settings=settings
                ):
                    result.applied += 1
                session.commit()
            except TransientError as exc:
                session.rollback()
                log.warning("run_poll_apply_transient", run=run.get("id"), error=str(exc))
                result.errors.append(f"run {run.get('id')}: {exc}")
                continue
        for callback in after:
            callback()
