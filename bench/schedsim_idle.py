"""Where idle runner time comes from in bench/schedsim.py: each idle runner-second, while the bot
had queued work, put down to one cause.

At every sample the driver records what the sim's fleet did (jobs running, jobs queued on GitHub)
next to what the bot believed (slots it counted in use) and what waited (the narrowest queued
dispatch). An idle runner-second is then:

- ``overcounted``: the bot counted the runner in use though no GitHub job (running or queued)
  held it (a finished job it had not heard of, a dispatch counted at more runners than it holds);
- ``too_narrow``: the bot saw it free, but fewer runners were free than the narrowest queued
  dispatch needs (a four-job conc group waits for four);
- ``latency``: enough was free and nothing went out yet (the tick, webhook delivery).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class IdleSample:
    t: float
    running: int  # GitHub jobs on a runner
    queued_on_github: int  # GitHub jobs of the label waiting for a runner
    held: int  # slots the bot counted in use (app.store.jobs.inflight_slots)
    waiting: int  # jobs queued in the bot
    narrowest: int  # slots of the narrowest queued dispatch (0: none)


def idle_causes(samples: Sequence[IdleSample], runners: int) -> dict[str, float]:
    """Idle runner-seconds while work waited, by cause, as shares of runner time while work waited."""
    out = {"overcounted": 0.0, "too_narrow": 0.0, "latency": 0.0}
    total = 0.0
    for s, nxt in zip(samples, samples[1:], strict=False):
        dt = nxt.t - s.t
        if s.waiting <= 0 or dt <= 0:
            continue
        total += runners * dt
        idle = max(0, runners - s.running)
        if idle == 0:
            continue
        over = min(idle, max(0, s.held - s.running - s.queued_on_github))
        free = max(0, runners - s.held)
        narrow = idle - over if 0 < free < s.narrowest else 0
        out["overcounted"] += over * dt
        out["too_narrow"] += narrow * dt
        out["latency"] += (idle - over - narrow) * dt
    return {k: round(v / total, 4) if total else 0.0 for k, v in out.items()}
