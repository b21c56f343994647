"""The story as it happens, for ``sweepbot demo``, the end-to-end test and ``bench/story.py``: new sim
deliveries and bot audit entries printed once each with the elapsed time (``Timeline``), and
waits for the bot's reaction that give up with ``StoryTimeout`` (``wait_until``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.models import AuditEntry
from devstack.storytext import (
    Collapser,
    Event,
    IdleNarrator,
    audit_event,
    delivery_event,
    fit,
    render,
    waiting_activity,
)

Say = Callable[[str], None]


class StoryTimeout(RuntimeError):
    pass


@dataclass
class Timeline:
    """Prints new sim deliveries and bot audit entries, once each, with the elapsed time.

    Only what a person cares about is shown (``storytext.audit_event``/``delivery_event`` leave
    out the plumbing), in the order it happened and with times that never go backwards (an audit
    row written before a webhook already shown is shown at that webhook's time); identical events
    within a short window are collapsed (``push ×12``), every line fits ``width`` (0: full lines,
    for a file or a pipe), and when nothing visible happens for a while it says what the bot is
    doing (``activity``). Two timelines of one demo share ``started``: one clock for the story."""

    world: Any
    factory: sessionmaker[Session]
    say: Say
    started: float = field(default_factory=time.time)  # wall clock: audit rows carry wall-clock times
    seen_deliveries: int = 0
    seen_audit: int = 0
    marks: dict[str, float] = field(default_factory=dict)
    width: int = 0  # 0: no limit (tests, JSON consumers)
    collapser: Collapser = field(default_factory=Collapser)
    narrator: IdleNarrator = field(default_factory=IdleNarrator)
    activity: Callable[[], str] | None = None
    bot_login: str = ""
    last_at: float = 0.0  # the latest time shown: no line says an earlier one

    def follow(self, before: Timeline) -> None:
        """Go on where ``before`` stopped: its clock, and nothing it already showed shown again."""
        self.started, self.last_at = before.started, before.last_at
        self.seen_deliveries, self.seen_audit = before.seen_deliveries, before.seen_audit

    def now(self) -> float:
        return time.time() - self.started

    def stamp(self) -> str:
        return f"[{self.now():6.1f}s]"

    def mark(self, name: str, at: float | None = None) -> None:
        self.marks.setdefault(name, (at if at is not None else time.time()) - self.started)

    def emit(self, lines: list[str]) -> None:
        for line in lines:
            self.say(fit(line, self.width))
            self.narrator.saw_output(self.now())

    def event(self, event: Event) -> None:
        self.last_at = max(self.last_at, event.at)
        self.emit(self.collapser.feed(replace(event, at=self.last_at)))

    def note(self, who: str, text: str) -> None:
        """A line of narration: never collapsed, printed after any held-back event."""
        self.last_at = max(self.last_at, self.now())
        self.emit(self.collapser.flush() + [render(Event(self.last_at, who, text))])

    def pump(self) -> None:
        with self.world.lock:
            fresh = self.world.deliveries[self.seen_deliveries :]
            self.seen_deliveries = len(self.world.deliveries)
        seen: list[tuple[float, Event | None]] = []
        for d in fresh:
            at = d.created_at - self.started
            seen.append((at, delivery_event(at, d.event, d.action, d.payload, self.bot_login)))
        with self.factory() as session:
            rows = (
                session.execute(
                    select(AuditEntry).where(AuditEntry.id > self.seen_audit).order_by(AuditEntry.id)
                )
                .scalars()
                .all()
            )
        for row in rows:
            self.seen_audit = max(self.seen_audit, row.id)
            at = row.at.replace(tzinfo=row.at.tzinfo or UTC).timestamp()
            if row.action in ("github.git/update-ref", "github.git/create-ref"):
                self.mark("bump_committed", at)
            if row.action in ("github.actions/create-workflow-dispatch", "sweep.follow_run"):
                self.mark("first_dispatch", at)  # label mode: the bot starts following the repo's run
            at -= self.started
            seen.append(
                (at, audit_event(at, row.actor, row.action, row.target or "", row.outcome, row.caused_by))
            )
        for _at, event in sorted(seen, key=lambda pair: pair[0]):
            if event is not None:
                self.event(event)
        if not fresh and not rows:
            # Quiet: show a held-back repeat now, and say what is going on once it has been quiet.
            self.emit(self.collapser.tick(self.now()))
            quiet = self.now() - self.narrator.last_output >= self.narrator.quiet
            sentence = self.activity() if quiet and self.activity is not None else ""
            if sentence and self.narrator.due(self.now(), sentence):
                self.note("bot", "… " + sentence)

    def close(self) -> None:
        self.emit(self.collapser.flush())


def wait_until(
    predicate: Callable[[], bool],
    timeline: Timeline,
    timeout: float,
    what: str,
    activity: Callable[[], str] | None = None,
) -> None:
    timeline.activity = activity or (lambda: waiting_activity(what))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        timeline.pump()
        if predicate():
            return
        time.sleep(0.25)
    timeline.pump()
    timeline.close()
    raise StoryTimeout(f"timed out after {timeout:.0f}s waiting for {what}")
