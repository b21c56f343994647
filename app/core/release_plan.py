"""Which queued dispatches of one runner label go out now: a pure plan the tick only applies.

Order: priority class first; inside a class, round-robin across sweeps (one dispatch per sweep
per round, the sweep served least recently first, as the caller orders ``queues``); inside a
sweep, its point order (``app.core.sweepspec.point_order``). A queue's head that a stored result
already answers is reused instead of run. Whether one dispatch may go is
``app.core.release_policy.release_decision`` (free slots and the overcommit, canaries only on idle
runners and within their budget). The plan stops once no queued dispatch of the label fits the
room left (``app.core.release_policy.fits_nothing``: none is narrower than the label's narrowest
queued job, of every sweep, ``narrowest``): no free runner with the ``"auto"`` overcommit, less room
than that width with an integer one (counting the N jobs that may wait on GitHub). Whatever the
plan would do past that point is no dispatch: it would reuse the heads stored results answer and
hold the rest, sweep after sweep. Those sweeps are left to the tick that reaches them, so a tick's
plan reaches only as many sweeps as it can release to, not every one (docs/benchmarks.md, "Tick").

Reuse needs a database lookup, which a pure function cannot make: the plan asks for it instead. When
it reaches a head job whose ``reusable`` is ``None`` it ends with one ``check`` release naming that
job; the caller looks it up and plans again with the answer. So the caller looks up exactly the
jobs the plan reaches, as many as it would have looked up inline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import structlog

from app.core.release_policy import Candidate, LabelView, Overcommit, fits_nothing, release_decision

log = structlog.get_logger(__name__)

Action = Literal["dispatch", "reuse", "hold", "check"]


@dataclass(frozen=True)
class QueuedJob:
    job_id: int
    group_key: str  # jobs of a sweep with the same key go out in one dispatch
    slots: int  # runners that dispatch occupies
    reusable: bool | None = None  # a stored result answers it; None: not looked up yet


@dataclass(frozen=True)
class SweepQueue:
    sweep_id: int
    priority: int
    jobs: tuple[QueuedJob, ...]  # in the sweep's point order
    canary: bool = False
    repo: str = ""


@dataclass(frozen=True)
class CanaryHours:
    """A repo's canary runner-hours this week: used, the budget (None: no limit), one canary's hours."""

    used: float = 0.0
    budget: float | None = None
    expected: float = 0.0


@dataclass(frozen=True)
class Release:
    """One step of the plan, in order: ``dispatch`` these jobs as one run, ``reuse`` a stored
    result for one job, ``hold`` a sweep for this tick, or ``check`` whether one job is reusable
    (the plan ends there; plan again with the answer)."""

    action: Action
    sweep_id: int
    job_ids: tuple[int, ...]
    reason: str
    slots: int = 0
    canary: bool = False
    backfill: bool = False  # a later group of the sweep, released (or looked up) as its head waits

    @property
    def run_name(self) -> str:
        """The dispatch's deterministic run name (the repair poll finds a lost run by it)."""
        return f"sweepbot-{self.sweep_id}-{min(self.job_ids)}"


@dataclass(frozen=True)
class DispatchSlots:
    """One dispatch (one run) holding runners: what GitHub has said of its jobs that we follow."""

    slots: int  # runners it occupies: every point its command expands to
    running: int  # our jobs of it GitHub has not said finished
    finished: int  # our jobs of it GitHub said finished (workflow_job or run completed), collected or not


def slots_in_use(dispatches: Sequence[DispatchSlots]) -> int:
    """Runners in use on a label. A runner is free once GitHub says its job finished, not once the
    bot collected the result (collection runs alongside): a dispatch holds its slots less its
    finished jobs, and none once every job of ours in it finished (points the sweep filtered out
    are not followed; the run completing says they are done too)."""
    return sum(max(0, max(1, d.slots) - d.finished) for d in dispatches if d.running > 0)


@dataclass(frozen=True)
class RunSlots:
    """A run we dispatched, followed until GitHub says it completed, whether or not we still need
    any of its jobs: a retry re-runs its whole conc group (the workflow selects by conc only), so
    siblings whose results we already have run again and hold runners as long as ours do."""

    slots: int  # jobs on the label its command was planned to expand to
    seen: int  # jobs of it on the label GitHub told us of (queued, running or completed)
    done: int  # of them, the ones GitHub said completed
    completed: bool = False  # GitHub said the run completed
    ours_done: int = 0  # our jobs of it we know finished (an event of them may have been lost)


def run_slots_in_use(runs: Sequence[RunSlots]) -> int:
    """Runners the runs we dispatched hold: every job of a run not yet completed, ours or not (the
    planned count, or more when GitHub queued more on the label), less the ones known finished (by
    GitHub's events, or our own jobs' states when more of them are known so); none once the run
    completed."""
    return sum(0 if r.completed else max(0, max(r.slots, r.seen) - max(r.done, r.ours_done)) for r in runs)


@dataclass
class _State:
    queues: dict[int, list[QueuedJob]]
    sweeps: dict[int, SweepQueue]
    hours: dict[str, CanaryHours]
    in_flight: int
    capacity: int
    overcommit: Overcommit
    out: list[Release] = field(default_factory=list)
    backfilled: set[int] = field(default_factory=set)  # sweeps that had their backfill this plan

    def view(self) -> LabelView:
        """The label's runners, what is in flight and the overcommit, as the decision sees them."""
        return LabelView("", self.capacity, self.in_flight, overcommit=self.overcommit)

    def real_waiting_slots(self) -> int:
        """Slots of the real (non-canary) dispatches still queued: one count per dispatch group."""
        groups: dict[tuple[int, str], int] = {}
        for sid, queue in self.queues.items():
            if not self.sweeps[sid].canary:
                for job in queue:
                    groups[(sid, job.group_key)] = max(1, job.slots)
        return sum(groups.values())


def plan_release(
    queues: Sequence[SweepQueue],
    capacity: int,
    in_flight: int,
    *,
    label: str = "",
    canary_hours: Mapping[str, CanaryHours] | None = None,
    overcommit: Overcommit = 0,
) -> list[Release]:
    """The releases for one label now (see the module docstring); ``queues`` in serving order, the
    label's whole queue; ``capacity``: the label's runners; ``overcommit``: ``SWEEPBOT_RUNNER_OVERCOMMIT``."""
    releases, _ = plan_release_prefix(
        queues, capacity, in_flight, label=label, canary_hours=canary_hours, overcommit=overcommit
    )
    return releases


def narrowest_queued(queues: Sequence[SweepQueue]) -> int:
    """Slots of the narrowest job queued in ``queues`` (at least 1): no dispatch group is narrower
    (a group is as wide as its widest job). ``app.store.jobs.narrowest_queued`` reads the same of
    the database, without reading every sweep."""
    return min((max(1, j.slots) for q in queues for j in q.jobs), default=1)


def plan_release_prefix(
    queues: Sequence[SweepQueue],
    capacity: int,
    in_flight: int,
    *,
    label: str = "",
    canary_hours: Mapping[str, CanaryHours] | None = None,
    overcommit: Overcommit = 0,
    narrowest: int | None = None,
) -> tuple[list[Release], bool]:
    """``plan_release`` over the first sweeps of the serving order, and whether that is not enough.

    ``narrowest``: the slots of the narrowest job queued on the label, of every sweep, given or not
    (``narrowest_queued`` of the whole queue; None: ``queues`` are the whole queue). The second
    value is True when the plan went round past the last of ``queues``: over a longer list with
    these first, it would next serve a sweep not given (the next of the last priority class in the
    first round, or of a later class), so the caller must give more. When False the plan ended
    (nothing queued fits the room left, or a reuse ``check``) before that and is the plan over any
    such longer list: the sweeps after these change nothing (the tick reads the queue so, sweep by
    sweep in serving order; canaries apart, whose turn counts the real work queued behind every
    sweep)."""
    narrowest = narrowest_queued(queues) if narrowest is None else narrowest
    state = _State(
        queues={q.sweep_id: list(q.jobs) for q in queues},
        sweeps={q.sweep_id: q for q in queues},
        hours=dict(canary_hours or {}),
        in_flight=in_flight,
        capacity=capacity,
        overcommit=overcommit,
    )
    classes = sorted({q.priority for q in queues})
    past_last = False  # the first round of the last class went past its last sweep
    if (why := _nothing_fits(state, narrowest)) is not None:
        return _done(state, label, why), False  # a full label: no sweep is reached
    for prio in classes:
        order = [q.sweep_id for q in queues if q.priority == prio]
        progress = True
        while progress and order:
            progress = False
            for sid in list(order):
                step = _serve(state, sid, label)
                if step == "check":
                    log.info(
                        "release_plan", label=label, outcome="needs a reuse lookup", why=state.out[-1].reason
                    )
                    return state.out, past_last
                if step == "released":
                    progress = True
                if step in ("done", "held") or (step == "released" and not state.queues[sid]):
                    order.remove(sid)
                if step == "released" and (why := _nothing_fits(state, narrowest)) is not None:
                    return _done(state, label, why), past_last
            past_last = past_last or prio == classes[-1]
    return _done(state, label, "nothing more queued that may go"), True


def _nothing_fits(state: _State, narrowest: int) -> str | None:
    """Why the plan ends here, when no queued dispatch fits the room left (``fits_nothing``): the
    rest of the round, and any after it, would only reuse and hold. None: the plan goes on."""
    view = state.view()
    if not fits_nothing(view, narrowest):
        return None
    if view.room <= 0:
        return "no free slot left"
    return f"{view.room} slot(s) left, the narrowest dispatch queued needs {narrowest}"


def _serve(state: _State, sid: int, label: str) -> str:
    """One turn of one sweep: reuse heads a stored result answers, then release or hold its head."""
    queue = state.queues[sid]
    sweep = state.sweeps[sid]
    while queue and queue[0].reusable:
        head = queue.pop(0)
        state.out.append(
            Release("reuse", sid, (head.job_id,), "same image, recipe and point already measured")
        )
    if not queue:
        return "done"
    head = queue[0]
    if head.reusable is None:
        state.out.append(
            Release("check", sid, (head.job_id,), f"is job {head.job_id} answered by a stored result?")
        )
        return "check"
    cost = max(1, head.slots)
    hours = state.hours.get(sweep.repo, CanaryHours()) if sweep.canary else CanaryHours()
    decision = release_decision(
        Candidate(slots=cost, canary=sweep.canary, expected_hours=hours.expected * cost),
        LabelView(
            label=label,
            capacity=state.capacity,
            in_flight=state.in_flight,
            real_waiting_slots=state.real_waiting_slots() if sweep.canary else 0,
            canary_hours_used=hours.used,
            canary_budget_hours=hours.budget,
            overcommit=state.overcommit,
        ),
    )
    if not decision.release:
        filled = None if sweep.canary else _backfill(state, sid, head, label)
        if filled is not None:
            return filled
        state.out.append(
            Release("hold", sid, (head.job_id,), decision.reason, slots=cost, canary=sweep.canary)
        )
        return "held"
    _dispatch(state, sid, head.group_key, cost, decision.reason)
    if sweep.canary:
        state.hours[sweep.repo] = replace(hours, used=hours.used + hours.expected * cost)
    return "released"


def _dispatch(
    state: _State, sid: int, group_key: str, cost: int, reason: str, backfill: bool = False
) -> None:
    queue = state.queues[sid]
    group = [j for j in queue if j.group_key == group_key]
    for job in group:
        queue.remove(job)
    state.in_flight += cost
    ids = tuple(j.job_id for j in group)
    canary = state.sweeps[sid].canary
    state.out.append(Release("dispatch", sid, ids, reason, slots=cost, canary=canary, backfill=backfill))


def _backfill(state: _State, sid: int, head: QueuedJob, label: str) -> str | None:
    """The sweep's head does not fit the free slots: release the sweep's first later group that
    does instead (its point order is a preference; idle runners are what is avoided). At most one
    per sweep and plan, and only the first group of each width (a later one of a width already
    seen waits its turn), so the tick's reader knows what to read (``queued_on_label``). Not past
    a head wider than the whole label: it waits for an idle label, which backfill would deny it.
    None when nothing fits; ``check`` when the candidate's reuse is not looked up yet. By the planned
    capacity (runners + an integer overcommit); with ``"auto"`` a head is held only when no runner
    is free, so there is nothing to backfill."""
    view = state.view()
    free = view.room
    if sid in state.backfilled or max(1, head.slots) > view.planned_capacity or free <= 0:
        return None
    queue = state.queues[sid]
    waiting = {j.job_id for j in queue}
    everything = state.sweeps[sid].jobs  # the first of each width is by the sweep's whole queue
    groups, widths = {head.group_key}, {max(1, head.slots)}
    for job in everything:
        if job.group_key in groups:
            continue
        groups.add(job.group_key)
        group = [j for j in everything if j.group_key == job.group_key]
        cost = max(1, max(j.slots for j in group))
        if cost in widths:
            continue
        widths.add(cost)
        if cost > free or any(j.reusable for j in group) or any(j.job_id not in waiting for j in group):
            continue  # too wide, answered by a stored result (reused at its turn), or gone already
        unknown = next((j for j in group if j.reusable is None), None)
        if unknown is not None:
            why = f"is job {unknown.job_id} answered by a stored result?"
            state.out.append(Release("check", sid, (unknown.job_id,), why, backfill=True))
            return "check"
        state.backfilled.add(sid)
        why = (
            f"backfill: {free} slot(s) free on {label}, the sweep's next dispatch (job {head.job_id}) "
            f"needs {max(1, head.slots)}; this one {cost}"
        )
        _dispatch(state, sid, job.group_key, cost, why, backfill=True)
        return "released"
    return None


def _done(state: _State, label: str, why: str) -> list[Release]:
    counts: dict[str, int] = {}
    for step in state.out:
        counts[step.action] = counts.get(step.action, 0) + 1
    log.info(
        "release_plan",
        label=label,
        capacity=state.capacity,
        overcommit=state.overcommit,
        in_flight=state.in_flight,
        waiting_on_github=max(0, state.in_flight - state.capacity),
        dispatches=counts.get("dispatch", 0),
        reused=counts.get("reuse", 0),
        held=[s.reason for s in state.out if s.action == "hold"],
        why=why,
    )
    return state.out
