"""How ``sweepbot demo`` tells its story, as pure text functions: one line per event a person
cares about (``audit_event``, ``delivery_event``: no git plumbing, no echo of the bot's own
writes), repeats collapsed (``push ×12``), lines kept within a terminal (full lines in a file), a
sentence for what the bot is doing while nothing visible happens, and the end in plain text
(``ending``: the gap and accuracy tables, the links). The demo feeds events in and prints what
comes out.
"""

from __future__ import annotations

import re
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


# What a person reading the story cares about: the bot's decisions and what it wrote where they
# look (comments, the bump, runs), not the git objects under a commit, the canary branches a
# nightly's measurement needs, reactions to a command or the runner labels the controller moves.
CANARY_REF = "sweepbot/canary/"
CANARY_SWEEP = "#0"  # the pseudo-PR a nightly canary's sweep is filed under
PLUMBING = (
    "github.git/create-blob",
    "github.git/create-tree",
    "github.git/create-commit",
    "github.reactions/",
    "github.actions/add-custom-label",
    "github.actions/remove-custom-label",
)
_SAID = {
    "github.git/update-ref": "pushed a commit to",
    "github.git/create-ref": "created the branch",
    "github.issues/create-comment": "commented on",
    "github.issues/update-comment": "edited its comment",
    "github.issues/create": "opened an issue in",
    "github.issues/update": "updated",
    "github.issues/add-labels": "labelled",
    "github.issues/remove-label": "took a label off",
    "github.pulls/create": "opened a pull request in",
    "github.pulls/update": "updated",
    "github.actions/create-workflow-dispatch": "dispatched",
    "github.actions/cancel-workflow-run": "cancelled",
}


def audit_event(
    at: float, actor: str, action: str, target: str, outcome: str, caused_by: str | None = None
) -> Event | None:
    """The line for one audit row, or None for plumbing (``PLUMBING``, canary branches)."""
    if action.startswith(PLUMBING) or (action.startswith("github.git/") and CANARY_REF in target):
        return None
    if action.startswith("sweep.") and target.endswith(CANARY_SWEEP):
        return None  # a canary's sweep and its dispatches: ``canary.queue`` says what it is for
    said = _SAID.get(action)
    what = f"{said} {target}".strip() if said else " ".join(filter(None, (action, target)))
    if caused_by:
        what += f" (asked by @{caused_by})"
    return Event(at, "bot" if actor == "sweepbot" else actor, what, "", outcome)


def delivery_event(
    at: float, event: str, action: str | None, payload: dict[str, Any], bot: str
) -> Event | None:
    """The line for one webhook the sim sent, or None for the echo of the bot's own comment or
    push (its audit row says it) and for canary branches."""
    repo = (payload.get("repository") or {}).get("full_name", "")
    sender = (payload.get("sender") or {}).get("login", "")
    if event == "push":
        ref = str(payload.get("ref", "")).removeprefix("refs/heads/")
        if sender == bot or CANARY_REF in ref:
            return None
        return Event(at, "github -> bot", f"push to {ref} by @{sender}", repo)
    if event == "issue_comment":
        if sender == bot:
            return None
        number = (payload.get("issue") or {}).get("number")
        return Event(at, "github -> bot", f"@{sender} commented on #{number}", repo)
    if event == "pull_request":
        if sender == bot:  # the bot's push (synchronize) or label: its audit row said it
            return None
        pr = payload.get("pull_request") or {}
        did = "merged" if action == "closed" and pr.get("merged") else action
        return Event(at, "github -> bot", f"PR #{pr.get('number')} {did}", repo)
    if event == "workflow_run":
        run = payload.get("workflow_run") or {}
        done = f" ({run.get('conclusion')})" if action == "completed" and run.get("conclusion") else ""
        return Event(at, "github -> bot", f"run of {run.get('name', 'a workflow')} {action}{done}", repo)
    if event == "workflow_job":
        return Event(at, "github -> bot", f"job {action}", repo)
    return Event(at, "github -> bot", event + (f".{action}" if action else ""), repo)


_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")


def plain_cell(cell: str) -> str:
    """A markdown table cell as plain text: links by their text, no emphasis or code marks."""
    return _LINK.sub(r"\1", cell).replace("**", "").replace("`", "").replace("\\|", "|").strip()


def plain_table(markdown: list[str]) -> list[str]:
    """A markdown table as aligned plain-text columns (the ``---`` row becomes a rule)."""
    rows = [
        [plain_cell(c) for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        for line in markdown
        if line.strip().startswith("|")
    ]
    rows = [r for r in rows if not all(re.fullmatch(r":?-+:?", c) for c in r if c)]
    if not rows:
        return []
    widths = [max(len(r[i]) if i < len(r) else 0 for r in rows) for i in range(max(map(len, rows)))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in rows]
    return [lines[0], "  ".join("-" * w for w in widths), *lines[1:]]


def ending(summary: dict[str, Any]) -> list[str]:
    """What the demo prints once the story is over: the gap and accuracy tables, then the links."""
    out: list[str] = []
    for title, key in (("Gap against the reference", "report_table"), ("Accuracy", "accuracy_table")):
        table = plain_table(list(summary.get(key) or []))
        out += ["", f"{title}:", *(f"  {line}" for line in table)] if table else ["", f"{title}: none"]
    links = summary.get("links") or {}
    if links:
        out += ["", "Links:"]
        width = max(len(name) for name in links)
        out += [f"  {name.ljust(width)}  {url}" for name, url in links.items()]
    return out
