"""The sticky status comment on a recipe PR (pure): one table per watched config key.

Deterministic (no timestamps), so an unchanged state renders the same text and costs no edit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from app.core.readiness import Dep, DepView, Readiness

STATUS_MARKER = "<!-- sweepbot:status -->"


@dataclass(frozen=True)
class WatchView:
    key: str
    deps: Sequence[DepView]
    image_repo: str | None
    pinned_image: str | None
    pinned_missing: bool
    chosen_tag: str | None
    first_tag: str | None
    decision: Readiness | None
    bump_line: str | None = None
    dropped: Sequence[str] = field(default_factory=tuple)
    bumped: bool = False  # a bump happened: chosen_tag is the pinned nightly
    newest_containing: str | None = None  # after a bump, a newer nightly with every merge commit
    held: str | None = None  # nothing is watched: waits for a maintainer, or the image is refused


def _short(sha: str | None) -> str:
    return (sha or "")[:7]


def _dep_line(d: DepView, chosen: str | None) -> str:
    if d.state == Dep.MERGED:
        where = f", contained in nightly `{chosen}`" if chosen else ", not in a nightly yet"
        return f"merged at `{_short(d.merge_sha)}`{where}" if d.merge_sha else "merged"
    if d.state == Dep.CLOSED:
        return (
            f"**closed without merge** — if the recipe can do without it, comment `/depends-on drop {d.ref}`"
        )
    if d.state == Dep.OPEN:
        return "open"
    return "not found yet (checking)"


def render_status(views: Sequence[WatchView]) -> str:
    """The sticky status comment. Deterministic (no timestamps) so an unchanged state is no edit."""
    lines = [STATUS_MARKER, "### sweepbot: upstream dependencies"]
    for v in views:
        if v.held:
            # One line: nothing is polled for this key, so there is no state to show.
            lines += ["", f"**`{v.key}`**", "", f"- ⏸️ {v.held.rstrip('.')}."]
            continue
        lines += ["", f"**`{v.key}`**", "", "| dependency | state |", "| --- | --- |"]
        for d in v.deps:
            title = f" {d.title}" if d.title else ""
            lines.append(f"| {d.ref}{title} | {_dep_line(d, v.chosen_tag)} |".replace("\n", " "))
        if not v.deps:
            lines.append("| (none) | |")
        if v.dropped:
            lines.append("")
            lines.append("Dropped: " + ", ".join(v.dropped))
        lines.append("")
        if v.pinned_image:
            warn = (
                " — ⚠️ **deleted from the registry: this image can no longer be pulled**"
                if v.pinned_missing
                else ""
            )
            lines.append(f"- pinned image: `{v.pinned_image}`{warn}")
        if v.chosen_tag and v.bumped:
            lines.append(f"- nightly chosen: `{v.image_repo}:{v.chosen_tag}` (the one the bump pinned)")
            if v.newest_containing:
                lines.append(
                    f"- newer nightly also containing every merge commit: `{v.image_repo}:"
                    f"{v.newest_containing}` (not bumped to: a bump happens once)"
                )
        elif v.chosen_tag:
            first = (
                f" (first nightly containing them all: `{v.first_tag}`)"
                if v.first_tag and v.first_tag != v.chosen_tag
                else ""
            )
            lines.append(
                f"- nightly chosen: `{v.image_repo}:{v.chosen_tag}`, the newest containing every "
                f"merge commit{first}"
            )
        elif v.image_repo:
            lines.append(f"- nightly chosen: none yet (watching `{v.image_repo}`)")
        if v.bump_line:
            lines.append(f"- {v.bump_line}")
        if v.decision is not None:
            lines.append(f"- next: {_next_step(v.decision)}")
    return "\n".join(lines) + "\n"


def _next_step(decision: Readiness) -> str:
    if decision.action == "wait":
        return f"{decision.reason}."
    if decision.action == "blocked":
        return f"blocked: {decision.reason}."
    if decision.action == "stopped":
        return f"**stopped watching**: {decision.reason}."
    if decision.action == "bump":
        return f"bumping the pin to `{decision.image}` and queueing the sweep."
    return f"nothing to do: {decision.reason}."
