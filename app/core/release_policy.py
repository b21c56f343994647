"""Whether the scheduler may release a dispatch now, and which canary runs real work preempts.

Pure: small value types in, a decision with its reason out (no Session, no gateway). The tick
(``app.flows.scheduler.tick``) gathers the label's state under the label lock, the release plan
(``app.core.release_plan.plan_release``) asks these functions, and the tick does the writes.

Real work fits a label by its free runners and the overcommit (``SWEEPBOT_RUNNER_OVERCOMMIT``: how
many of a dispatch group's jobs may wait in GitHub's own queue for a runner, where GitHub, not the
bot, orders them):

- ``"auto"`` (the setting's default): a group goes out when at least one of its jobs can start on a
  free runner now, so at most its width - 1 jobs wait on GitHub, and never a group none of whose
  jobs can start (a label with every runner taken, counting what is in flight, releases nothing);
- ``0``: a group waits until its whole width is free (never more jobs in flight than runners);
- ``N``: a group goes out when at most N of the label's jobs would wait (planned as runners + N).

Canary sweeps (nightly regression watch, ``app.flows.nightly.watch``) use idle runner time only:

- a canary is released only when no real job waits for that runner label (real work is served
  first anyway: canaries are the lowest class; a real job still queued after the real classes
  were served is one that did not fit, and a canary must not take the runner it waits for);
- a canary is released only while the repo's weekly runner-hour budget for canaries has room
  for it (the hours it is expected to take);
- a canary already running is preempted (its run cancelled, the job put back in the queue) when
  real work waits and the label has no free runner for it: newest canary first, as few as free
  the slots the waiting real work needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

import structlog

log = structlog.get_logger(__name__)

AUTO: Final = "auto"
Overcommit = int | Literal["auto"]  # SWEEPBOT_RUNNER_OVERCOMMIT (module docstring)


@dataclass(frozen=True)
class LabelView:
    """One runner label as the tick sees it under the label lock."""

    label: str
    capacity: int
    in_flight: int  # runner slots in use (real and canary)
    real_waiting_slots: int = 0  # slots of real dispatches still queued (not released this tick)
    canary_hours_used: float = 0.0  # canary runner-hours spent this week (repo of the candidate)
    canary_budget_hours: float | None = None  # None: no budget configured (no limit)
    overcommit: Overcommit = 0  # jobs of real work that may wait on GitHub (module docstring)

    @property
    def free(self) -> int:
        """Runners free now (negative when more jobs are in flight than runners)."""
        return self.capacity - self.in_flight

    @property
    def planned_capacity(self) -> int:
        """What real work is planned against: the runners, plus N with an integer overcommit."""
        return self.capacity + (0 if self.overcommit == AUTO else int(self.overcommit))

    @property
    def room(self) -> int:
        """Slots real work may take now by the planned capacity (``"auto"``: the free runners; a
        group then goes out whole once one of them is free, see ``release_decision``)."""
        return self.planned_capacity - self.in_flight


@dataclass(frozen=True)
class Candidate:
    slots: int  # runners the dispatch occupies
    canary: bool = False
    expected_hours: float = 0.0  # runner-hours it is expected to take (slots x duration)


@dataclass(frozen=True)
class Decision:
    release: bool
    reason: str
    stop_label: bool = False  # nothing more of this class can go on this label this tick


def release_decision(candidate: Candidate, label: LabelView) -> Decision:
    """May ``candidate`` be dispatched onto ``label`` now? Says why either way."""
    cost = max(1, candidate.slots)
    if not candidate.canary:
        return _real_work(cost, label)
    # Canaries take truly idle runners only, whatever the overcommit. A dispatch wider than the
    # whole label may still run alone on an idle label, or it would wait forever.
    if cost > label.free and label.in_flight > 0:
        return Decision(False, f"{cost} slot(s) needed, {max(0, label.free)} free on {label.label}")
    if label.real_waiting_slots > 0:
        return Decision(
            False,
            f"canary waits: {label.real_waiting_slots} slot(s) of real work queued on {label.label}",
            stop_label=True,
        )
    budget = label.canary_budget_hours
    if budget is not None and label.canary_hours_used + candidate.expected_hours > budget:
        return Decision(
            False,
            f"canary budget: {label.canary_hours_used:.1f} of {budget:.1f} runner-hours used this "
            f"week, the next canary needs about {candidate.expected_hours:.1f}",
            stop_label=True,
        )
    return Decision(True, f"idle runner on {label.label}: canary released")


def _real_work(cost: int, label: LabelView) -> Decision:
    """A real dispatch of ``cost`` slots: by the free runners and the overcommit (module docstring).
    An idle label takes any dispatch, even one wider than the label (or it would wait forever)."""
    if label.overcommit == AUTO:
        if label.free < 1 and label.in_flight > 0:
            return Decision(
                False,
                f"{cost} slot(s) needed, none free on {label.label} "
                "(auto overcommit: a group goes out once one of its jobs can start)",
            )
        return _released(cost, label, "auto overcommit")
    if cost > label.room and label.in_flight > 0:
        extra = f", counting {label.overcommit} job(s) that may wait on GitHub" if label.overcommit else ""
        return Decision(False, f"{cost} slot(s) needed, {max(0, label.room)} free on {label.label}{extra}")
    return _released(
        cost, label, f"overcommit {label.overcommit}" if label.overcommit else "alone on an idle label"
    )


def _released(cost: int, label: LabelView, why: str) -> Decision:
    """Released; the reason says how many of its jobs will wait in GitHub's queue for a runner."""
    free = max(0, label.free)
    if cost <= free:
        return Decision(True, f"{cost} slot(s) free on {label.label}")
    return Decision(
        True,
        f"{why}: {free} slot(s) free on {label.label}, {cost} needed; "
        f"{cost - free} job(s) wait in GitHub's queue for a runner",
    )


def fits_nothing(label: LabelView, narrowest: int) -> bool:
    """Can no queued dispatch go on ``label`` now, none being narrower than ``narrowest`` slots?
    Never while the label is idle (it takes any one, even one wider than the label); with
    ``"auto"`` once no runner is free (a group of any width goes out while one is); otherwise once
    the room left is under ``narrowest``. A canary then cannot go either: it needs free runners,
    never more than the room."""
    if label.in_flight <= 0:
        return False
    return label.room < (1 if label.overcommit == AUTO else max(1, narrowest))


@dataclass(frozen=True)
class CanaryRun:
    run_name: str
    slots: int
    dispatched_at: datetime


def pick_preemptions(label: LabelView, canaries: Sequence[CanaryRun]) -> list[str]:
    """Run names of the in-flight canaries to cancel so the waiting real work gets runners.

    Newest first (the least measurement thrown away), only as many as needed: the slots the
    waiting real work needs (at most the label's capacity) minus the slots already free.
    """
    needed = min(label.real_waiting_slots, label.capacity) - max(0, label.free)
    if needed <= 0 or not canaries:
        return []
    picked: list[str] = []
    freed = 0
    for run in sorted(canaries, key=lambda c: (c.dispatched_at, c.run_name), reverse=True):
        if freed >= needed:
            break
        picked.append(run.run_name)
        freed += max(1, run.slots)
    log.info("canary_preempt", label=label.label, needed=needed, runs=picked)
    return picked
