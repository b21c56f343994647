"""The live priority controller: facts from ``workflow_job`` webhooks and the runners API, the
core's plan (``app.core.schedplan.plan``), effects as runner-label writes.

- Facts: ``queued`` deliveries carry the job's ``labels``; ``in_progress`` / ``completed`` carry
  ``runner_id`` / ``runner_name``. Runners come from ``GET …/actions/runners`` (refreshed every
  ``runner_refresh_s`` and whenever the facts disagree with GitHub) and from the answers of our own
  label writes (each answers the runner's labels after the change). A job labelled for a runner
  that has not started within ``assign_timeout_s`` means a missed delivery or a lost race: the
  runners are listed again and the job's labels come off that runner (the next plan places it anew).
- Effects, idempotent: a label is removed only if the runner (as last seen) carries it, added only
  if it lacks it; clean-ups go first. A ``nodes:N`` lease: the ``ci-lease-…`` label goes on every
  runner, each is read back (online, idle, carrying the lease), and only then does the head get
  the job's labels; a lease that does not verify is released at once.
- Jobs without a ``ci-job-`` label are reported once (``ReconcileResult.notices``).

``Facts`` is the store this needs; ``MemoryFacts`` keeps it in memory (one controller process per
repository; ``bench/scheduler.py`` and the tests run it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

import structlog

from app.adapters.github.errors import GitHubError, NotFound
from app.core import schedlabels as sl
from app.core.schedplan import (
    Assignment,
    Notice,
    Plan,
    Policy,
    SnapJob,
    SnapRunner,
    Snapshot,
    needs_plan,
    plan,
)

log = structlog.get_logger(__name__)

CONTRACT_VARIABLE = "PRIORITY_SCHEDULER_ENABLED"
INFRA_CONCLUSIONS = frozenset({"runner_lost", "infrastructure"})


class RunnerGateway(Protocol):
    def list_runners(self, repo: str) -> list[dict[str, Any]]: ...
    def get_runner(self, repo: str, runner_id: int) -> dict[str, Any]: ...
    def add_runner_labels(self, repo: str, runner_id: int, labels: list[str]) -> list[str]: ...
    def remove_runner_label(self, repo: str, runner_id: int, name: str) -> list[str] | None: ...
    def queued_jobs(self, repo: str) -> list[dict[str, Any]] | None: ...


class VariableGateway(Protocol):
    def get_repo_variable(self, repo: str, name: str) -> str | None: ...


def contract_on(gw: VariableGateway, repo: str) -> bool:
    """The repo variable ``PRIORITY_SCHEDULER_ENABLED`` is ``true`` (the templates compare so)."""
    value = gw.get_repo_variable(repo, CONTRACT_VARIABLE)
    return value is not None and value.strip().lower() == "true"


CONTRACT_TTL_S = 300.0
_contract_seen: dict[str, tuple[bool, float]] = {}


def reset_contract_cache() -> None:
    _contract_seen.clear()


def contract_on_cached(gw: VariableGateway, repo: str, *, now: float | None = None) -> bool:
    """``contract_on``, read at most once every ``CONTRACT_TTL_S`` per repository and process (the
    tick asks on every label it plans; a missing or unreadable variable means off)."""
    at = time.monotonic() if now is None else now
    seen = _contract_seen.get(repo)
    if seen is not None and at - seen[1] < CONTRACT_TTL_S:
        return seen[0]
    try:
        on = contract_on(gw, repo)
    except GitHubError:
        on = False
    _contract_seen[repo] = (on, at)
    return on


@dataclass
class MemoryFacts:
    """What the controller knows: jobs, runners as last seen, PRs' recent runner-time, infra failures."""

    # a PR's recent use halves in this time: the fair share is over about the last hour, the window
    # fairness is judged in (bench/scheduler.py: 0.5 h against 2 h, Jain's index higher)
    half_life_hours: float = 0.5
    jobs: dict[int, SnapJob] = field(default_factory=dict)
    started: dict[int, tuple[int, datetime]] = field(default_factory=dict)  # job -> (runner, at)
    runners: dict[int, SnapRunner] = field(default_factory=dict)
    listed_at: datetime | None = None
    queued_listed_at: datetime | None = None  # the fallback listing of queued jobs, on its own clock
    labelled_at: dict[int, tuple[int, datetime]] = field(default_factory=dict)  # runner -> (job, at)
    usage: dict[int, tuple[float, datetime]] = field(default_factory=dict)  # PR -> (hours, at)
    avoid: dict[str, set[str]] = field(default_factory=dict)
    reported: set[int] = field(default_factory=set)
    stale: bool = True

    def queued(self, job_id: int, run_id: int, pr: int | None, labels: list[str], at: datetime) -> None:
        self.jobs[job_id] = SnapJob(job_id, run_id, pr, tuple(labels), at, "queued")

    def in_progress(self, job_id: int, runner_id: int | None, at: datetime) -> None:
        job = self.jobs.get(job_id)
        if job is not None:
            self.jobs[job_id] = replace(job, status="in_progress")
        if runner_id is not None:
            self.started[job_id] = (runner_id, at)
            runner = self.runners.get(runner_id)
            if runner is not None:
                self.runners[runner_id] = replace(runner, busy=True)
            self.labelled_at.pop(runner_id, None)

    def completed(
        self,
        job_id: int,
        runner_name: str | None,
        conclusion: str | None,
        at: datetime,
        runner_id: int | None = None,
    ) -> None:
        job = self.jobs.pop(job_id, None)
        start = self.started.pop(job_id, None)
        # the runner the delivery names is free, even when its in_progress never came (else it
        # looks busy until the next listing, up to runner_refresh_s of a runner idle)
        for rid in {start[0] if start else runner_id, runner_id}:
            if rid is not None:
                self._free(rid, job_id)
        if job is None:
            return
        c = sl.read_contract(job.labels)
        nodes = c.nodes if isinstance(c, sl.ContractLabels) else 1
        if isinstance(c, sl.ContractLabels) and nodes > 1:
            # a multi-node job's other nodes are free too: no delivery names them
            lease = sl.lease_label(c.token, c.attempt)
            for rid, runner in self.runners.items():
                if runner.busy and lease in sl.norm(runner.labels):
                    self._free(rid, job_id)
        if start is not None and job.pr is not None:
            hours = (at - start[1]).total_seconds() / 3600 * nodes
            self.usage[job.pr] = (self._decayed(job.pr, at) + hours, at)
        if conclusion in INFRA_CONCLUSIONS and runner_name and isinstance(c, sl.ContractLabels):
            self.avoid.setdefault(c.token, set()).add(runner_name.lower())

    def _free(self, runner_id: int, job_id: int) -> None:
        """The runner is idle now, unless another job started on it since (deliveries may cross)."""
        runner = self.runners.get(runner_id)
        if runner is None or any(r == runner_id for j, (r, _) in self.started.items() if j != job_id):
            return
        self.runners[runner_id] = replace(runner, busy=False)

    def _decayed(self, pr: int, now: datetime) -> float:
        hours, at = self.usage.get(pr, (0.0, now))
        return hours * math.pow(0.5, max(0.0, (now - at).total_seconds()) / 3600 / self.half_life_hours)

    def usage_hours(self, now: datetime) -> dict[int, float]:
        return {pr: self._decayed(pr, now) for pr in self.usage}

    def set_runners(self, rows: list[dict[str, Any]], at: datetime) -> None:
        self.runners = {int(r["id"]): runner_of(r) for r in rows}
        self.listed_at, self.stale = at, False
        for job_id, (runner_id, _) in list(self.started.items()):
            runner = self.runners.get(runner_id)
            if runner is None or not runner.busy:  # its completed delivery was lost
                self.completed(job_id, runner.name if runner else None, None, at)

    def set_labels(self, runner_id: int, labels: list[str]) -> None:
        runner = self.runners.get(runner_id)
        if runner is not None:
            self.runners[runner_id] = replace(runner, labels=tuple(labels))

    def snapshot(self, now: datetime) -> Snapshot:
        return Snapshot(now, tuple(self.jobs.values()), tuple(self.runners.values()))

    def first_report(self, job_id: int) -> bool:
        if job_id in self.reported:
            return False
        self.reported.add(job_id)
        return True


def runner_of(row: Mapping[str, Any]) -> SnapRunner:
    labels = [x["name"] if isinstance(x, dict) else str(x) for x in row.get("labels") or []]
    return SnapRunner(
        int(row["id"]),
        str(row["name"]),
        tuple(labels),
        str(row.get("status", "offline")),
        bool(row.get("busy")),
    )


def apply_workflow_job(
    facts: MemoryFacts, payload: Mapping[str, Any], at: datetime, pr: int | None = None
) -> None:
    """One ``workflow_job`` delivery into the facts (the controller plans on the next reconcile)."""
    job = payload.get("workflow_job") or {}
    action, job_id = payload.get("action"), int(job.get("id") or 0)
    if not job_id:
        return
    if action == "queued":
        labels = [x for x in job.get("labels") or [] if isinstance(x, str)][:64]
        facts.queued(job_id, int(job.get("run_id") or 0), pr, labels, at)
    elif action == "in_progress":
        rid = job.get("runner_id")
        facts.in_progress(job_id, int(rid) if rid else None, at)
    elif action == "completed":
        rid = job.get("runner_id")
        facts.completed(job_id, job.get("runner_name"), job.get("conclusion"), at, int(rid) if rid else None)


@dataclass(frozen=True)
class ControllerConfig:
    repo: str
    policy: Policy = Policy()
    runner_refresh_s: float = 900.0
    assign_timeout_s: float = 180.0
    # while a job waits, the runners are listed this often: a lost ``completed`` delivery otherwise
    # leaves its runners looking busy (and idle in fact) until the next runner_refresh_s listing
    waiting_refresh_s: float | None = 120.0


@dataclass
class ReconcileResult:
    plan: Plan
    notices: list[Notice] = field(default_factory=list)  # reported for the first time
    writes: int = 0
    reads: int = 0
    planned: bool = False  # False: ``needs_plan`` said a plan would do nothing, none was made


def _refresh(
    facts: MemoryFacts, gw: RunnerGateway, cfg: ControllerConfig, now: datetime, out: ReconcileResult
) -> None:
    late = [
        rid for rid, (_, at) in facts.labelled_at.items() if (now - at).total_seconds() > cfg.assign_timeout_s
    ]
    limit = cfg.runner_refresh_s
    if cfg.waiting_refresh_s is not None and any(j.status == "queued" for j in facts.jobs.values()):
        limit = min(limit, cfg.waiting_refresh_s)
    old = facts.listed_at is None or (now - facts.listed_at).total_seconds() > limit
    # the fallback listing keeps its own clock: the late-assignment listings of runners (every
    # assign_timeout_s while a job is labelled and not taken) must not starve it
    missed = (
        facts.queued_listed_at is None
        or (now - facts.queued_listed_at).total_seconds() > cfg.runner_refresh_s
    )
    if missed:
        facts.queued_listed_at = now
        # a job GitHub stopped listing may have started on a runner the facts still think idle
        # (its in_progress delivery not here yet): list the runners before planning, or that
        # runner's labels for it would look stale and come off a running job's runner
        if _missed_queued(facts, gw, cfg.repo, now, out):
            facts.stale = True
    if facts.stale or old or late:
        facts.set_runners(gw.list_runners(cfg.repo), now)
        out.reads += 1
        for rid, (job_id, _) in list(facts.labelled_at.items()):
            runner = facts.runners.get(rid)
            if runner is not None and runner.busy:
                # it started its job, late or not: its in_progress was lost or is on its way (else
                # the job, still "queued", is placed again, and a multi-node one's second lease
                # keeps idle runners for as long as it runs)
                facts.in_progress(job_id, rid, now)
            elif rid in late:
                facts.labelled_at.pop(rid)
                if runner is not None:  # not taken: its labels come off, the next plan places it anew
                    _Effects(facts, gw, cfg.repo, out).release(rid)


def _missed_queued(
    facts: MemoryFacts, gw: RunnerGateway, repo: str, now: datetime, out: ReconcileResult
) -> int:
    """Fold the fallback listing of queued jobs into the facts; how many jobs it dropped."""
    listed = gw.queued_jobs(repo)
    if listed is None:
        return 0
    out.reads += 1 + len({j.get("run_id") for j in listed})
    # a job we think queued that GitHub no longer lists started or was cancelled, its delivery lost:
    # it goes (else it is labelled for a runner again and again, and GitHub never hands it over)
    ids = {int(j["id"]) for j in listed}
    dropped = [i for i, job in facts.jobs.items() if job.status == "queued" and i not in ids]
    for job_id in dropped:
        del facts.jobs[job_id]
    for j in listed:
        if int(j["id"]) not in facts.jobs:
            at = j.get("created_at")
            when = datetime.fromisoformat(at.replace("Z", "+00:00")) if isinstance(at, str) else now
            facts.queued(int(j["id"]), int(j.get("run_id") or 0), None, list(j.get("labels") or []), when)
    return len(dropped)


@dataclass
class _Effects:
    """Label writes on one repository's runners, looked before (the facts' labels) and counted."""

    facts: MemoryFacts
    gw: RunnerGateway
    repo: str
    out: ReconcileResult

    def remove(self, runner_id: int, names: tuple[str, ...]) -> None:
        for name in names:
            runner = self.facts.runners.get(runner_id)
            if runner is None or name.lower() not in sl.norm(runner.labels):
                continue  # look before write: it is not there
            after = self.gw.remove_runner_label(self.repo, runner_id, name)
            self.out.writes += 1
            if after is None:
                after = [x for x in runner.labels if x.lower() != name.lower()]
            self.facts.set_labels(runner_id, after)

    def release(self, runner_id: int) -> None:
        """Every label naming a job or a lease comes off the runner."""
        runner = self.facts.runners.get(runner_id)
        if runner is not None:
            self.remove(runner_id, tuple(x for x in runner.labels if sl.is_identifying(x)))

    def add(self, runner_id: int, names: tuple[str, ...]) -> bool:
        runner = self.facts.runners.get(runner_id)
        have = sl.norm(runner.labels) if runner else frozenset()
        missing = [x for x in names if x.lower() not in have]
        if not missing:
            return True
        try:
            after = self.gw.add_runner_labels(self.repo, runner_id, missing)
        except NotFound:
            self.facts.stale = True  # the runner is gone
            return False
        self.out.writes += 1
        self.facts.set_labels(runner_id, after)
        return {x.lower() for x in missing} <= {x.lower() for x in after}


def _lease(fx: _Effects, rows: list[Assignment], now: datetime) -> None:
    """Lease labels on every runner, each read back, then the job's labels on the head; or release."""
    lease = rows[0].lease or ""
    ok = all(fx.add(a.runner_id, (lease,)) for a in rows)
    for a in rows:
        if not ok:
            break
        try:
            seen = runner_of(fx.gw.get_runner(fx.repo, a.runner_id))
        except GitHubError:
            seen = None
        fx.out.reads += 1
        ok = seen is not None and seen.idle and lease in sl.norm(seen.labels)
    head = next(a for a in rows if a.head)
    if ok and fx.add(head.runner_id, tuple(x for x in head.add_labels if x != lease)):
        fx.facts.labelled_at[head.runner_id] = (head.job_id, now)
        return
    log.info("sched.lease_released", lease=lease, job=head.job_id, why="not every runner verified")
    fx.facts.stale = True  # the facts thought those runners idle: list them before the next plan
    for a in rows:
        fx.release(a.runner_id)


def reconcile(facts: MemoryFacts, gw: RunnerGateway, cfg: ControllerConfig, now: datetime) -> ReconcileResult:
    """One round: refresh what is stale, plan, apply (clean-ups, leases, single jobs)."""
    out = ReconcileResult(plan=Plan((), (), (), ()))
    _refresh(facts, gw, cfg, now, out)
    snap = facts.snapshot(now)
    if not needs_plan(snap, facts.reported):
        return out  # nothing to place or clean: no idle runner is free for a queued job or stale
    out.planned = True
    policy = replace(
        cfg.policy,
        usage_hours=facts.usage_hours(now),
        avoid={**cfg.policy.avoid, **{k: frozenset(v) for k, v in facts.avoid.items()}},
    )
    out.plan = result = plan(snap, policy)
    fx = _Effects(facts, gw, cfg.repo, out)
    for c in result.cleanups:
        fx.remove(c.runner_id, c.remove_labels)
        facts.labelled_at.pop(c.runner_id, None)
    leases: dict[str, list[Assignment]] = {}
    for a in result.assignments:
        if a.lease:
            leases.setdefault(a.lease, []).append(a)
        elif a.add_labels and fx.add(a.runner_id, a.add_labels):
            facts.labelled_at[a.runner_id] = (a.job_id, now)
    for rows in leases.values():
        if any(x.add_labels for x in rows):
            _lease(fx, rows, now)
    out.notices = [n for n in result.notices if facts.first_report(n.job_id)]
    for n in out.notices:
        log.warning("sched.cannot_prioritise", job=n.job_id, run=n.run_id, why=n.why, text=n.text)
    return out
