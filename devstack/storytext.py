"""How ``sweepbot demo`` tells its story, as pure text functions: repeats collapsed
(``push ×12``), lines kept within the terminal, and a sentence for what the bot is doing while
nothing visible happens. The demo feeds events in and prints what comes out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

ELLIPSIS = "…"


def fit(line: str, width: int) -> str:
    """One line no wider than ``width`` (cut with an ellipsis): a narrow terminal gets no wraps."""
    if width <= 0 or len(line) <= width:
        return line
    if width == 1:
        return ELLIPSIS
    return line[: width - 1] + ELLIPSIS


@dataclass(frozen=True)
class Event:
    """One thing seen: ``who`` (github -> bot, bot, sim) did ``what`` to ``where``."""

    at: float  # seconds since the story started
    who: str
    what: str
    where: str = ""
    outcome: str = ""

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.who, self.what, self.where, self.outcome)


def render(event: Event, count: int = 1) -> str:
    what = event.what + (f" ×{count}" if count > 1 else "")
    parts = [f"[{event.at:6.1f}s]", f"{event.who:<13}", what]
    if event.where:
        parts.append(event.where)
    if event.outcome and event.outcome != "ok":
        parts.append(f"[{event.outcome}]")
    return " ".join(parts)


@dataclass
class Collapser:
    """Holds events back for ``window`` seconds and prints each distinct one once with its count,
    in order of first appearance: twelve pushes in a burst read ``push ×12``, and a sweep's
    interleaved ``workflow_run.requested``/``workflow_job.queued`` pairs read as two lines."""

    window: float = 2.0
    pending: dict[tuple[str, str, str, str], list[Any]] = field(default_factory=dict)
    first_at: float = 0.0

    def feed(self, event: Event) -> list[str]:
        out = self.tick(event.at)
        if not self.pending:
            self.first_at = event.at
        held = self.pending.get(event.key)
        if held is None:
            self.pending[event.key] = [event, 1]
        else:
            held[1] += 1
        return out

    def tick(self, now: float) -> list[str]:
        """What is due at ``now``: the held events once their window has passed."""
        if self.pending and now - self.first_at >= self.window:
            return self.flush()
        return []

    def flush(self) -> list[str]:
        out = [render(event, count) for event, count in self.pending.values()]
        self.pending = {}
        return out


@dataclass
class IdleNarrator:
    """Says what the bot is doing after ``quiet`` seconds without a visible event, then at most
    every ``every`` seconds, and only when the sentence changed or ``every`` has passed again."""

    quiet: float = 4.0
    every: float = 10.0
    last_output: float = 0.0
    last_said: str = ""
    last_said_at: float = field(default=-1e9)

    def saw_output(self, now: float) -> None:
        self.last_output = now

    def due(self, now: float, sentence: str) -> bool:
        if now - self.last_output < self.quiet:
            return False
        if sentence == self.last_said and now - self.last_said_at < self.every:
            return False
        self.last_said, self.last_said_at = sentence, now
        return True


FINISHED = ("succeeded", "failed", "cancelled", "reused")


def sweep_activity(states: Iterable[str], report_complete: bool, debounce_seconds: float) -> str:
    """What the bot is doing while a sweep runs, from its jobs' states."""
    counts = Counter(states)
    total = sum(counts.values())
    if total == 0:
        return "planning the sweep from the recipe's matrix and queueing its jobs"
    done = sum(counts[s] for s in FINISHED)
    running = counts["running"] + counts["dispatched"]
    queued = total - done - running
    if done < total:
        parts = []
        if running:
            parts.append(f"{running} on the runners or having their results collected")
        if queued:
            parts.append(f"{queued} queued for a free runner")
        detail = "; ".join(parts) or "waiting for GitHub to report them"
        return f"collecting results: {done}/{total} jobs finished ({detail})"
    if not report_complete:
        return (
            f"every job finished; waiting out the report debounce ({debounce_seconds:g}s) before "
            "the final edit of the gap report"
        )
    return "the report shows the gap for every concurrency; checking that nothing more changes"


def waiting_activity(what: str) -> str:
    """The fallback sentence: the step the story is waiting for."""
    return f"waiting for {what}"
