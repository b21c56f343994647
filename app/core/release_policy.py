"""Whether the scheduler may release a dispatch now, and which canary runs real work preempts.

Pure: small value types in, a decision with its reason out (no Session, no gateway). The tick
(``app.flows.tick``) gathers the label's state under the label lock, the release plan
(``app.core.release.plan_release``) asks these functions, and the tick does the writes.

Canary sweeps (nightly regression watch, ``app.flows.nightlywatch``) use idle runner time only:

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

import structlog

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class LabelView:
    """One runner label as the tick sees it under the label lock."""

    label: str
    capacity: int
    in_flight: int  # runner slots in use (real and canary)
    real_waiting_slots: int = 0  # slots of real dispatches still queued (not released this tick)
    canary_hours_used: float = 0.0  # canary runner-hours spent this week (repo of the candidate)
    canary_budget_hours: float | None = None  # None: no budget configured (no limit)

    @property
    def free(self) -> int:
        return self.capacity - self.in_flight


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
    # A dispatch wider than the whole label may still run alone on an idle label, or it would
    # wait forever.
    if cost > label.free and not (cost > label.capacity and label.in_flight == 0):
        return Decision(False, f"{cost} slot(s) needed, {max(0, label.free)} free on {label.label}")
    if candidate.canary:
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
    return Decision(True, f"{cost} slot(s) free on {label.label}")


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
