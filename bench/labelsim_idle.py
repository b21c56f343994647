"""Where the label-contract bench's idle runner time goes (bench/labelsim.py's World, read only).

Every runner-second counted as "idle while a compatible job waits" is given one cause, read from the
world and the controller's state as they are during that second (the state is constant between
two events, so classifying at the start of each interval is exact). The causes, checked in order:

- ``gathering``: no controller; a pool node held while its multi-node job gathers the others;
- ``hand-over``: the runner carries a queued job's labels (or a lease of one); GitHub has yet to
  hand it over after the label write;
- ``delivery``: the runner went idle and the ``completed`` delivery is still in flight;
- ``delivery lost``: that delivery never came; the controller learns it at the next runner listing;
- ``busy in facts``: the delivery came, yet the controller still thinks the runner busy;
- ``reconcile``: the controller knows the runner is idle; its reconcile is due (debounce);
- ``lease hold``: the last plan held this pool runner for a waiting ``nodes:N`` lease (policy), or
  kept it as an idle runner of a running job's lease (when that job has in fact ended, the cause is
  its ``completed`` delivery: ``delivery`` or ``delivery lost``);
- ``queued unseen``: every compatible waiting job is unknown to the controller (its ``queued``
  delivery in flight or lost; the fallback listing finds it);
- ``avoid``: every compatible waiting job is a re-run that avoids this runner (policy);
- ``pool too few``: the free pool runners are fewer than any waiting lease the plan could place;
- ``other``: none of those (a plan left a runner idle that a known job could take).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.core import schedlabels as sl

if TYPE_CHECKING:
    from bench.labelsim import BJob, BRunner, World

CAUSES = (
    "gathering",
    "hand-over",
    "delivery",
    "delivery lost",
    "busy in facts",
    "reconcile",
    "lease hold",
    "queued unseen",
    "avoid",
    "pool too few",
    "other",
)


def _compatible(w: World, r: BRunner) -> list[BJob]:
    from bench.labelsim import POOL, SINGLE

    if POOL in r.base:
        return [j for j in w.queued.values() if POOL in j.labels]
    return [j for j in w.queued.values() if j.nodes == 1 and SINGLE in j.labels]


def _awaited(w: World, r: BRunner) -> bool:
    """The runner carries every label of a queued job, or a queued job's lease."""
    have = {x.lower() for x in r.labels()}
    for label in r.custom:
        low = label.lower()
        if low.startswith(sl.JOB_PREFIX) or low.startswith(sl.LEASE_PREFIX):
            for job in w.queued_by_label().get(low, ()):
                if low.startswith(sl.LEASE_PREFIX) or {x.lower() for x in job.labels} <= have:
                    return True
    return False


def cause(w: World, r: BRunner) -> str:
    from bench.labelsim import POOL

    if r.job is not None:
        return "gathering"
    if w.ctl is None:
        return "other"
    if _awaited(w, r):
        return "hand-over"
    seen = w.facts.runners.get(r.id)
    if seen is None or seen.busy:
        if r.last_job in w.lost_completed:
            return "delivery lost"
        return "delivery" if w.t - r.freed_at <= w.cfg.latency_s + 1e-6 else "busy in facts"
    if w.tick_pending:
        return "reconcile"
    last = w.last_result
    for rid, job_id, _ in last.plan.held if last is not None else ():
        if rid == r.id:
            done = w.jobs.get(job_id)
            if done is not None and done.status == "completed":  # kept for a lease that has ended
                return "delivery lost" if job_id in w.lost_completed else "delivery"
            return "lease hold"
    known = [j for j in _compatible(w, r) if j.id in w.facts.jobs and w.facts.jobs[j.id].status == "queued"]
    if not known:
        return "queued unseen"
    name = r.name.lower()
    if all(name in w.facts.avoid.get(_token(j), set()) for j in known):
        return "avoid"
    if POOL in r.base:
        free = sum(
            1
            for x in w.runners.values()
            if x.online and x.job is None and POOL in x.base and not any(map(sl.is_identifying, x.custom))
        )
        if all(j.nodes > free for j in known):
            return "pool too few"
    return "other"


def _token(job: BJob) -> str:
    c = sl.read_contract(job.labels)
    return c.token if isinstance(c, sl.ContractLabels) else ""
