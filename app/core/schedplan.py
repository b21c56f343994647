"""The priority controller's plan over a snapshot of queued jobs and runners (pure).

``plan(snapshot, policy)`` says which idle online runner gets which queued job's scheduling labels
(so GitHub's rule, an idle runner takes the oldest queued job whose labels it all carries, hands
exactly that job to it), which stale scheduling labels come off idle runners, and which jobs cannot
be prioritised. The offline planner (``sweepbot sched plan``), the live controller
(``app/flows/scheduler/runner_control.py``) and the benchmark call this one function.

Effective priority of a queued job = its own score (read from its ``ci-job-`` label) + aging
(``aging_per_hour`` x hours queued) + a fair share term (``-fair_share_weight`` per runner-hour its PR
used recently, decayed, and holds now: 4 a runner-hour, so a PR a runner-hour or more behind goes
first whatever the scores, and the score orders that PR's jobs; among PRs that all used little, as
when many PRs share few runners, the score and aging still weigh) - ``canary_penalty`` for
the bot's canaries (so they take only runners no other job can use). Two ranks stand above it: a
PR's first job (its PR has used no runner yet and holds none: a new PR is never kept behind the
backlog) and, below that, a job queued past ``starve_after_hours`` (7 h), the oldest first (the
starvation bound: whatever its PR's use, it waits no longer than the overdue jobs before it). An
authorised ``ci-skip-queue-pr-<n>`` goes before everything. Jobs are placed greedily, the highest
effective priority first, each on the compatible free runner fewest other waiting jobs could use;
the fair share term is recomputed after every placement. A job that failed for infrastructure
reasons avoids the runner it failed on while another compatible runner exists. A ``nodes:N`` job
takes N free runners of one ``cluster:*`` pool under one ``ci-lease-…`` label, whole or not at all;
once it has waited ``lease_hold_minutes`` the free runners of its pool are held for it.
Busy and offline runners, and running jobs, are never touched.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from app.core import schedlabels as sl
from app.core.schedlabels import ContractLabels


@dataclass(frozen=True)
class SnapJob:
    id: int
    run_id: int
    pr: int | None
    labels: tuple[str, ...]
    created_at: datetime
    status: str  # "queued" | "in_progress"


@dataclass(frozen=True)
class SnapRunner:
    id: int
    name: str
    labels: tuple[str, ...]
    status: str  # "online" | "offline"
    busy: bool

    @property
    def idle(self) -> bool:
        return self.status == "online" and not self.busy


@dataclass(frozen=True)
class Snapshot:
    now: datetime
    jobs: tuple[SnapJob, ...]
    runners: tuple[SnapRunner, ...]


@dataclass(frozen=True)
class Policy:
    aging_per_hour: float = 1.0
    # priority lost per runner-hour of a PR's recent use (decayed, plus the runners it holds now):
    # large against the scores' spread, so the PR that used least goes first (fair share dominates)
    fair_share_weight: float = 4.0
    running_weight_hours: float = 1.0  # a running job's weight in a PR's use, in runner-hours
    # a job queued longer goes before every other (but a PR's first job), oldest first
    starve_after_hours: float | None = 7.0
    canary_penalty: float = 1000.0
    lease_hold_minutes: float | None = 120.0  # None: never hold a pool for a waiting lease
    canary_runs: frozenset[int] = frozenset()
    skip_queue_prs: frozenset[int] = frozenset()  # PRs whose skip_queue label is authorised
    avoid: Mapping[str, frozenset[str]] = field(default_factory=dict)  # token -> runner names
    usage_hours: Mapping[int, float] = field(default_factory=dict)  # PR -> decayed runner-hours


OVERDUE = 1e6  # the rank of a job past the starvation bound: above any score, aging or fair share
FRESH = 2e6  # the rank of a PR's first job (no recent use) while there is a starvation bound


@dataclass(frozen=True)
class Priority:
    score: float
    aging: float
    fair: float
    canary: float
    skip: bool = False
    overdue: float | None = None  # hours queued, when past ``starve_after_hours`` (oldest first)
    fresh: bool = False  # the PR's first job: it has used no runner yet and holds none

    @property
    def total(self) -> float:
        if self.skip:
            return float("inf")
        if self.fresh:
            return FRESH + self.score + self.aging
        if self.overdue is not None:
            return OVERDUE + self.overdue
        return self.score + self.aging + self.fair - self.canary

    def parts(self) -> str:
        head = "skip-queue, " if self.skip else ""
        if self.fresh:
            head += "the PR's first job (no use yet): before overdue jobs; "
        elif self.overdue is not None:
            head += f"queued {self.overdue:.2f} h, past the starvation bound: oldest first; "
        tail = f" - canary {self.canary:g}" if self.canary else ""
        return f"{head}score {self.score:.3f} + aging {self.aging:.2f} + fair share {self.fair:+.2f}{tail}"

    def with_fair(self, share: tuple[float, bool]) -> Priority:
        fair, fresh = share
        fresh = fresh and not self.canary
        return Priority(self.score, self.aging, fair, self.canary, self.skip, self.overdue, fresh)


@dataclass(frozen=True)
class Assignment:
    runner_id: int
    runner_name: str
    job_id: int
    add_labels: tuple[str, ...]
    lease: str | None
    why: str
    head: bool = True  # the lease runner the job itself runs on (single-node: always)


@dataclass(frozen=True)
class Cleanup:
    runner_id: int
    runner_name: str
    remove_labels: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class Notice:
    job_id: int
    run_id: int
    text: str
    why: str


@dataclass(frozen=True)
class QueueEntry:
    job_id: int
    pr: int | None
    priority: Priority
    runner_id: int | None  # the runner it was given (or already labelled for), None: waits
    why: str


@dataclass(frozen=True)
class Plan:
    assignments: tuple[Assignment, ...]
    cleanups: tuple[Cleanup, ...]
    notices: tuple[Notice, ...]
    queue: tuple[QueueEntry, ...]  # every queued contract job, highest effective priority first
    held: tuple[tuple[int, int, str], ...] = ()  # (runner id, job id, why) kept idle for a lease

    def as_json(self) -> list[dict[str, object]]:
        """The answer ``sweepbot sched plan --json`` prints: assignments, then clean-ups."""
        out: list[dict[str, object]] = [
            {
                "runner_id": a.runner_id,
                "job_id": a.job_id,
                "add_labels": list(a.add_labels),
                "lease": a.lease,
                "why": a.why,
            }
            for a in self.assignments
        ]
        out += [{"runner_id": c.runner_id, "remove_labels": list(c.remove_labels)} for c in self.cleanups]
        return out


@dataclass
class _Queued:
    job: SnapJob
    c: ContractLabels

    @property
    def lease(self) -> str:
        return sl.lease_label(self.c.token, self.c.attempt)


@dataclass
class _Round:
    """One plan's working state (local to ``plan``; the function stays pure)."""

    snap: Snapshot
    policy: Policy
    free: dict[int, SnapRunner] = field(default_factory=dict)
    desired: dict[int, frozenset[str]] = field(default_factory=dict)  # runner -> scheduling labels
    assignments: list[Assignment] = field(default_factory=list)
    placed: dict[int, tuple[int, str]] = field(default_factory=dict)  # job -> (runner, why)
    running: dict[int, float] = field(default_factory=dict)  # PR -> runners it occupies
    held: list[tuple[int, int, str]] = field(default_factory=list)
    keep: set[int] = field(default_factory=set)  # idle runners of a running lease: untouched
    prio: dict[int, Priority] = field(default_factory=dict)
    base: dict[int, Priority] = field(default_factory=dict)  # job -> its priority without fair share
    _base: dict[int, frozenset[str]] = field(default_factory=dict)

    def fits(self, needs: frozenset[str], runner: SnapRunner) -> bool:
        base = self._base.get(runner.id)
        if base is None:
            base = self._base[runner.id] = sl.base_labels(runner.labels)
        return needs <= base

    def priority(self, q: _Queued, competing: int, share: tuple[float, bool] | None = None) -> Priority:
        p = self.policy
        hours = max(0.0, (self.snap.now - q.job.created_at).total_seconds()) / 3600
        skip = q.c.skip_pr is not None and q.c.skip_pr in p.skip_queue_prs
        canary = p.canary_penalty if q.job.run_id in p.canary_runs else 0.0
        bound = p.starve_after_hours
        overdue = round(hours, 4) if bound is not None and hours > bound and not canary else None
        base = Priority(q.c.score, round(p.aging_per_hour * hours, 4), 0.0, canary, skip, overdue)
        return base.with_fair(self.fair(q.job.pr, competing) if share is None else share)

    def fair(self, pr: int | None, competing: int) -> tuple[float, bool]:
        """The fair share term: minus ``fair_share_weight`` per runner-hour the PR used recently
        (decayed) and holds now, 0 while fewer than two PRs have work (nobody to be fair to); and
        whether this is the PR's first job (no use at all) while a starvation bound is set (so a
        new PR's first job still goes first when older jobs are overdue)."""
        p = self.policy
        if not p.fair_share_weight or competing < 2:
            return 0.0, False
        key = _pr_key(pr)
        use = p.usage_hours.get(key, 0.0) + self.running.get(key, 0.0) * p.running_weight_hours
        return round(-p.fair_share_weight * use, 4), use <= 0


def _pr_key(pr: int | None) -> int:
    return pr if pr is not None else 0


def _names(labels: frozenset[str] | set[str]) -> tuple[str, ...]:
    return tuple(sorted(labels))


def _sched(runner: SnapRunner) -> frozenset[str]:
    return frozenset(x for x in sl.norm(runner.labels) if sl.is_scheduling(x))


def _read_jobs(snap: Snapshot) -> tuple[list[_Queued], list[_Queued], list[Notice]]:
    queued: list[_Queued] = []
    running: list[_Queued] = []
    notices: list[Notice] = []
    for job in snap.jobs:
        c = sl.read_contract(job.labels)
        if isinstance(c, sl.Unprioritisable):
            if job.status == "queued":
                notices.append(Notice(job.id, job.run_id, sl.CANNOT_PRIORITISE, c.reason))
            continue
        if job.status == "queued":
            queued.append(_Queued(job, c))
        else:
            running.append(_Queued(job, c))
    return queued, running, notices


def _adopt(r: _Round, queued: list[_Queued], running: list[_Queued]) -> list[_Queued]:
    """Runners already labelled for a queued job keep it; leases kept whole or released."""
    by_job = {q.c.job_label: q for q in queued}
    by_lease = {q.lease: q for q in queued if q.c.nodes > 1}
    live_leases = {q.lease: q.job.id for q in running if q.c.nodes > 1}
    lease_runners: dict[str, list[SnapRunner]] = {}
    for runner in r.free.copy().values():
        labels = _sched(runner)
        leases = sorted(x for x in labels if x.startswith(sl.LEASE_PREFIX))
        if leases and leases[0] in live_leases:
            del r.free[runner.id]
            r.keep.add(runner.id)
            r.held.append((runner.id, live_leases[leases[0]], f"in lease {leases[0]} of a running job"))
            continue
        if leases and leases[0] in by_lease:
            lease_runners.setdefault(leases[0], []).append(runner)
            continue
        jobs = [by_job[x] for x in labels if x in by_job and by_job[x].c.nodes == 1]
        if jobs and r.fits(jobs[0].c.needs, runner) and jobs[0].job.id not in r.placed:
            _place(r, jobs[0], [runner], None, "already labelled for this job; GitHub hands it over")
    for lease, runners in lease_runners.items():
        q = by_lease[lease]
        if len(runners) >= q.c.nodes and q.job.id not in r.placed:
            _place(
                r,
                q,
                sorted(runners, key=lambda x: x.name)[: q.c.nodes],
                lease,
                f"lease {lease} already whole ({q.c.nodes} runners)",
            )
    return [q for q in queued if q.job.id not in r.placed]


def _place(r: _Round, q: _Queued, runners: list[SnapRunner], lease: str | None, why: str) -> None:
    head = runners[0]
    for runner in runners:
        want = (q.c.scheduling() if runner is head else frozenset()) | ({lease} if lease else set())
        r.desired[runner.id] = frozenset(want)
        add = want - sl.norm(runner.labels)
        r.assignments.append(
            Assignment(runner.id, runner.name, q.job.id, _names(add), lease, why, head=runner is head)
        )
        r.free.pop(runner.id, None)
    r.placed[q.job.id] = (head.id, why)
    key = _pr_key(q.job.pr)
    r.running[key] = r.running.get(key, 0.0) + len(runners)


Fits = dict[frozenset[str], list[SnapRunner]]


def _allowed(r: _Round, q: _Queued, cache: Fits) -> tuple[list[SnapRunner], str]:
    """Free runners this job may take, and why none when there are none."""
    fits = cache.get(q.c.needs)
    if fits is None:
        fits = cache[q.c.needs] = [x for x in r.free.values() if r.fits(q.c.needs, x)]
    if not fits:
        return [], "no compatible idle runner"
    avoid = r.policy.avoid.get(q.c.token, frozenset())
    if not avoid:
        return fits, ""
    others = [x for x in fits if x.name.lower() not in avoid]
    elsewhere = any(
        x.status == "online" and x.name.lower() not in avoid and r.fits(q.c.needs, x) for x in r.snap.runners
    )
    if others or elsewhere:
        return others, "" if others else f"waits for a runner other than {', '.join(sorted(avoid))}"
    return fits, ""


def _pool(r: _Round, q: _Queued, fits: list[SnapRunner]) -> list[SnapRunner]:
    """N free runners of one ``cluster:*`` pool, the fullest pool first; [] when none has N."""
    pools: dict[str, list[SnapRunner]] = {}
    for runner in fits:
        for cluster in sl.clusters(runner.labels):
            pools.setdefault(cluster, []).append(runner)
    best = sorted(pools.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    for _, members in best:
        if len(members) >= q.c.nodes:
            return sorted(members, key=lambda x: x.name)[: q.c.nodes]
    return []


def _choose(r: _Round, fits: list[SnapRunner], demand: Counter[frozenset[str]]) -> SnapRunner:
    """The compatible runner the fewest other waiting jobs could use (keep versatile ones free)."""
    if len(fits) == 1:
        return fits[0]

    def users(runner: SnapRunner) -> int:
        return sum(n for k, n in demand.items() if n > 0 and r.fits(k, runner))

    return min(fits, key=lambda x: (users(x), x.name, x.id))


def _why(p: Priority, rank: int, fits: int) -> str:
    return (
        f"effective priority {p.total:.2f} ({p.parts()}), first of the jobs still waiting "
        f"that a free runner fits (rank {rank}); {fits} compatible free runner(s)"
    )


def _hold_for_lease(r: _Round, q: _Queued, fits: list[SnapRunner]) -> bool:
    """A multi-node job that has waited past the policy's hold keeps the compatible free runners
    it found (they leave ``r.free``) so its lease can gather; whether any was held."""
    hold_after = r.policy.lease_hold_minutes
    waited = (r.snap.now - q.job.created_at).total_seconds() / 60
    if q.c.nodes <= 1 or not fits or hold_after is None or waited < hold_after:
        return False
    for runner in list(fits):
        r.free.pop(runner.id, None)
        why = f"held for the lease of job {q.job.id} (needs {q.c.nodes}, waited {waited:.0f} min)"
        r.held.append((runner.id, q.job.id, why))
    return True


def _greedy(r: _Round, waiting: list[_Queued], competing: int) -> dict[int, str]:
    """Place the best-placeable job, recompute priorities (fair share moved), until none fits.

    The part of a job's priority that does not depend on the fair share (score, aging, canary,
    skip-queue) is fixed for one plan, so the waiting jobs are grouped by (needs, PR) and each group
    sorted once; a placement round ranks only the groups' heads (a heap over at most needs x PRs
    entries, each group's next job pushed when its head cannot be placed), so a round's work is in
    the number of groups and of jobs it looks at, not in the length of the queue."""
    why_waiting: dict[int, str] = {}
    group_why: dict[tuple[frozenset[str], int | None], str] = {}
    base = r.base
    groups: dict[tuple[frozenset[str], int | None], list[_Queued]] = {}
    for q in waiting:
        base[q.job.id] = r.priority(q, competing, (0.0, False))
        groups.setdefault((q.c.needs, q.job.pr), []).append(q)
    for g in groups.values():
        g.sort(key=lambda q: (-base[q.job.id].total, q.job.created_at, q.job.id))
    demand = Counter(q.c.needs for q in waiting)

    def ranked(q: _Queued, share: tuple[float, bool]) -> Priority:
        return base[q.job.id].with_fair(share)

    while groups and r.free:
        # only the jobs some free runner could take compete (the rest wait whatever their rank)
        usable = {k for k in {key[0] for key in groups} if any(r.fits(k, x) for x in r.free.values())}
        fair = {pr: r.fair(pr, competing) for pr in {key[1] for key in groups if key[0] in usable}}
        heap: list[tuple[float, datetime, int, tuple[frozenset[str], int | None], int]] = []
        for key, g in groups.items():
            if key[0] not in usable:
                group_why.setdefault(key, "no compatible idle runner")
                continue
            head = g[0]
            heap.append((-ranked(head, fair[key[1]]).total, head.job.created_at, head.job.id, key, 0))
        heapq.heapify(heap)
        chosen = None
        cache: Fits = {}
        rank = 0
        while heap:
            _, _, _, key, i = heapq.heappop(heap)
            q = groups[key][i]
            rank += 1
            r.prio[q.job.id] = ranked(q, fair[key[1]])
            fits, reason = _allowed(r, q, cache)
            group = _pool(r, q, fits) if q.c.nodes > 1 else fits
            if group:
                chosen = (rank, key, i, q, fits, group)
                break
            why_waiting[q.job.id] = reason or f"no cluster pool with {q.c.nodes} free compatible runners"
            if _hold_for_lease(r, q, fits):
                cache.clear()
            if i + 1 < len(groups[key]):
                nxt = groups[key][i + 1]
                heapq.heappush(
                    heap, (-ranked(nxt, fair[key[1]]).total, nxt.job.created_at, nxt.job.id, key, i + 1)
                )
        if chosen is None:
            break
        rank, key, i, q, fits, group = chosen
        del groups[key][i]
        if not groups[key]:
            del groups[key]
        demand[q.c.needs] -= 1
        why = _why(r.prio[q.job.id], rank, len(fits))
        if q.c.nodes > 1:
            _place(r, q, group, q.lease, f"{why}; lease of {q.c.nodes} runners")
        else:
            _place(r, q, [_choose(r, fits, demand)], None, why)
        why_waiting.pop(q.job.id, None)
    for key, g in groups.items():
        for q in g:
            if q.job.id not in why_waiting:
                why_waiting[q.job.id] = group_why.get(key, "no free runner left")
    return why_waiting


def _fill(r: _Round, jobs: list[_Queued], competing: int) -> None:
    """The priority of every job not yet given one (the fair share term computed once per PR)."""
    fair: dict[int | None, tuple[float, bool]] = {}
    for q in jobs:
        if q.job.id not in r.prio:
            if q.job.pr not in fair:
                fair[q.job.pr] = r.fair(q.job.pr, competing)
            b = r.base.get(q.job.id)
            share = fair[q.job.pr]
            r.prio[q.job.id] = r.priority(q, competing, share) if b is None else b.with_fair(share)


def _cleanups(r: _Round) -> list[Cleanup]:
    out = []
    for runner in r.snap.runners:
        if not runner.idle or runner.id in r.keep:
            continue
        have = _sched(runner)
        want = r.desired.get(runner.id, frozenset())
        kinds = {x.split("-")[1] if x.startswith("ci-") else "nodes" for x in want}
        stale = {
            x
            for x in have - want
            if sl.is_identifying(x)
            or (x.startswith(sl.ATTEMPT_PREFIX) and "attempt" in kinds)
            or (x.startswith(sl.NODES_PREFIX) and "nodes" in kinds)
        }
        if stale:
            why = (
                "idle, given another job: its old scheduling labels come off"
                if want
                else "idle: scheduling labels of no queued job (stale) come off"
            )
            out.append(Cleanup(runner.id, runner.name, _names(stale), why))
    return out


def plan(snapshot: Snapshot, policy: Policy) -> Plan:
    queued, running, notices = _read_jobs(snapshot)
    r = _Round(snapshot, policy, free={x.id: x for x in snapshot.runners if x.idle})
    for q in running:
        key = _pr_key(q.job.pr)
        r.running[key] = r.running.get(key, 0.0) + q.c.nodes
    competing = len({_pr_key(q.job.pr) for q in queued} | set(r.running))
    waiting = _adopt(r, queued, running)
    why_waiting = _greedy(r, waiting, competing)
    _fill(r, queued, competing)
    entries = [
        QueueEntry(
            q.job.id,
            q.job.pr,
            r.prio[q.job.id],
            r.placed[q.job.id][0] if q.job.id in r.placed else None,
            r.placed[q.job.id][1] if q.job.id in r.placed else why_waiting.get(q.job.id, ""),
        )
        for q in queued
    ]
    entries.sort(key=lambda e: (-e.priority.total, e.job_id))
    return Plan(tuple(r.assignments), tuple(_cleanups(r)), tuple(notices), tuple(entries), tuple(r.held))


def needs_plan(snapshot: Snapshot, reported: frozenset[int] | set[int] = frozenset()) -> bool:
    """Whether a plan over this snapshot could do anything: an idle runner that is free (not waiting
    for GitHub to hand it the queued job it is labelled for, nor in a lease that is whole and
    published or belongs to a running job) and either carries scheduling labels naming a job or a
    lease (stale: a clean-up) or fits some queued contract job. When none is, ``plan`` would place
    nothing and clean nothing, so a controller need not plan on every delivery (the periodic tick
    still does, for aging and lease holds). A queued job not yet ``reported`` as unprioritisable
    also needs one (for its notice)."""
    idle = [x for x in snapshot.runners if x.idle]
    if not idle:
        return False
    queued: list[ContractLabels] = []
    running_leases: set[str] = set()
    for job in snapshot.jobs:
        c = sl.read_contract(job.labels)
        if isinstance(c, sl.Unprioritisable):
            if job.status == "queued" and job.id not in reported:
                return True
            continue
        if job.status == "queued":
            queued.append(c)
        elif c.nodes > 1:
            running_leases.add(sl.lease_label(c.token, c.attempt))
    # a single-node job's full scheduling labels (a re-run keeps its token, so its ci-job- label is the
    # first attempt's: a runner still carrying ci-attempt-1 for it awaits nothing)
    singles = {c.job_label: c.scheduling() for c in queued if c.nodes == 1}
    leases = {sl.lease_label(c.token, c.attempt): c for c in queued if c.nodes > 1}
    members: Counter[str] = Counter()
    for runner in idle:
        for x in _sched(runner):
            if x in leases:
                members[x] += 1
    needs = {c.needs for c in queued}
    for runner in idle:
        ident = {x for x in _sched(runner) if sl.is_identifying(x)}
        have = _sched(runner)
        if any(singles[x] <= have for x in ident if x in singles) or ident & running_leases:
            continue
        published = [
            x
            for x in ident
            if x in leases and members[x] >= leases[x].nodes and _published(idle, x, leases[x])
        ]
        if published:
            continue
        if ident:
            return True  # stale labels, or a lease not whole: a clean-up or a re-placement
        base = sl.base_labels(runner.labels)
        if any(n <= base for n in needs):
            return True
    return False


def _published(idle: list[SnapRunner], lease: str, c: ContractLabels) -> bool:
    """Some idle runner of the lease (its head) carries all of the job's scheduling labels."""
    return any(lease in _sched(r) and c.scheduling() <= _sched(r) for r in idle)
