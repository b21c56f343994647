"""Is a watch ready to bump, and why (pure): containment of merge commits in nightlies, the
readiness decision, the nightly choice, and the one readiness explanation the dashboard shows.

Every decision is a value with its reason, and logs that reason (Renovate style). The caller
loads the facts (dependency states, tags, compare answers) and applies the decision.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import structlog

from app.core.recipes import is_archived_path

log = structlog.get_logger(__name__)

CONTAINED = ("ahead", "identical")


class Dep:
    """A dependency's state (the values stored in ``watch_dependencies.state``)."""

    OPEN = "open"
    MERGED = "merged"
    CLOSED = "closed"  # closed without merging
    UNKNOWN = "unknown"  # not fetched yet
    MISSING = "missing"  # GitHub answers 404: no such PR (or one the bot cannot see)


ARCHIVED_WATCH = "archived"  # the watch state of a key moved to configs/deprecated/
BUMP_HAPPENED = ("committed", "already")  # bump states after which nothing waits any more

# ================================================================================== containment


def is_contained(status: str) -> bool:
    """``compare(merge...tag)`` says the tag's commit contains the merge commit."""
    return status in CONTAINED


@dataclass(frozen=True)
class ContainmentSearch:
    newest: int | None  # index of the newest candidate containing everything
    first: int | None  # index of the oldest such candidate (where it first shipped)
    probes: int


def search_containing(n: int, contains: Callable[[int], bool]) -> ContainmentSearch:
    """Over candidates ``0..n-1`` ordered oldest to newest (tags of a linear main are ordered by
    their commit, so containment is monotone), find the newest and the first containing one with
    at most ``1 + ceil(log2 n)`` probes: the newest is probed first (if it lacks a merge, none
    has it), then a binary search finds where it first shipped."""
    if n <= 0:
        return ContainmentSearch(None, None, 0)
    probes = 1
    if not contains(n - 1):
        return ContainmentSearch(None, None, probes)
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi) // 2
        probes += 1
        if contains(mid):
            hi = mid
        else:
            lo = mid + 1
    return ContainmentSearch(n - 1, lo, probes)


@dataclass(frozen=True)
class NightlyChoice:
    """The nightly a bump would pin (the newest containing every merge commit) and the first one
    that contained them all; None when no candidate does."""

    chosen: str | None
    first: str | None
    probes: int


def choose_nightly(candidates: Sequence[tuple[str, str]], contains: Callable[[str], bool]) -> NightlyChoice:
    """``candidates``: (tag, full commit) oldest first; ``contains(commit)``: that commit holds
    every merge commit. Logs which nightly was chosen and why."""
    found = search_containing(len(candidates), lambda i: contains(candidates[i][1]))
    chosen = candidates[found.newest][0] if found.newest is not None else None
    first = candidates[found.first][0] if found.first is not None else None
    log.info(
        "nightly_choice",
        candidates=len(candidates),
        chosen=chosen,
        first=first,
        probes=found.probes,
        why="the newest nightly containing every merge commit" if chosen else "no nightly contains them all",
    )
    return NightlyChoice(chosen, first, found.probes)


# ==================================================================================== readiness


@dataclass(frozen=True)
class DepView:
    ref: str
    state: str
    merge_sha: str | None = None
    title: str | None = None
    contained_in: str | None = None
    dropped: bool = False


Action = Literal["wait", "bump", "noop", "blocked", "stopped"]


@dataclass(frozen=True)
class Readiness:
    """What to do with a watch now, and why (the reason is logged and shown on the PR)."""

    action: Action
    reason: str
    image: str | None = None


def decide_readiness(
    *,
    key: str,
    deps: Sequence[DepView],
    image_repo: str | None,
    chosen_tag: str | None,
    pinned_image: str | None,
    pinned_contains: bool | None,
    bumped_image: str | None,
    bumped_covers: bool | None = None,
    config_problem: str | None = None,
    registry_error: str | None = None,
) -> Readiness:
    """The one readiness decision (Renovate style: every path says why, and logs it).

    A bump happens once per image: after one, nothing more happens unless ``bumped_covers`` is
    False (a dependency added since is not in the bumped image), which allows the next bump.
    ``config_problem`` (the key is missing or archived) blocks with that explanation; a
    dependency GitHub does not know (``missing``) blocks too. ``registry_error``: the image's tag
    listing failed, so "no nightly contains it" would be a guess: say the registry is unreachable."""

    def out(action: Action, reason: str, image: str | None = None) -> Readiness:
        log.info("readiness", key=key, action=action, reason=reason, image=image)
        return Readiness(action, reason, image)

    if bumped_image and bumped_covers is not False:
        return out("noop", f"already bumped to {bumped_image}; a bump happens once")
    if not deps:
        return out("noop", "no upstream dependencies to wait for")
    if config_problem:
        return out("blocked", config_problem)
    closed = [d.ref for d in deps if d.state == Dep.CLOSED]
    if closed:
        drops = ", ".join(f"`/depends-on drop {r}`" for r in closed)
        return out(
            "blocked",
            f"{', '.join(closed)} closed without merging; it will never ship. "
            f"If the recipe no longer needs it, comment {drops}",
        )
    missing = [d.ref for d in deps if d.state == Dep.MISSING]
    if missing:
        drops = " ".join(missing)
        return out(
            "blocked",
            f"{', '.join(missing)} does not exist (GitHub answers 404 Not Found): fix the reference "
            f"in the PR body or comment `/depends-on drop {drops}`",
        )
    waiting = [d.ref for d in deps if d.state in (Dep.OPEN, Dep.UNKNOWN)]
    if waiting:
        return out("wait", f"waiting for {', '.join(waiting)} to merge")
    no_sha = [d.ref for d in deps if not d.merge_sha]
    if no_sha:
        return out("wait", f"{', '.join(no_sha)} merged but GitHub has not reported the merge commit yet")
    if not image_repo:
        return out("blocked", f"config key {key} has no image pin to bump")
    if pinned_contains:
        return out("noop", f"the pinned image {pinned_image} already contains every dependency")
    if not chosen_tag and registry_error:
        return out(
            "wait",
            f"the registry of {image_repo} cannot be read ({registry_error[:200]}), so no nightly "
            "can be chosen; checking again at the next poll",
        )
    if not chosen_tag:
        return out(
            "wait",
            f"no nightly of {image_repo} contains every merge commit yet; checking again at the next poll",
        )
    image = f"{image_repo}:{chosen_tag}"
    if pinned_image == image:
        return out("noop", f"the pin is already {image}")
    return out("bump", f"every dependency is merged and contained in {image}", image)


def archived_key_reason(key: str, path: str | None) -> str | None:
    """Why a watch stops when its key lives only under ``configs/deprecated/`` (else None)."""
    if not path or not is_archived_path(path):
        return None
    return (
        f"config key {key} moved to `{path}`, which sweep generation no longer reads (its scenario "
        "was deprecated), so there is no pin to bump; sweepbot stopped watching it. Move the key "
        "back into an active master config (a push to this PR re-checks it) or watch a current key"
    )


def stop_if_archived(
    decision: Readiness, *, key: str, path: str | None, config_problem: str | None, bumped: bool
) -> Readiness:
    """A config problem on a key archived to ``configs/deprecated/`` (and never bumped) stops the
    watch instead of blocking it: blocking would wait forever on a file nobody reads."""
    archived = archived_key_reason(key, path) if config_problem else None
    if archived is None or bumped:
        return decision
    log.info("watch_stopped_archived", key=key, path=path, reason=archived)
    return Readiness("stopped", archived)


def explain_readiness(
    *, watch_state: str, reason: str | None, deps: Sequence[DepView], bump_state: str | None
) -> str | None:
    """Why no bump happened (yet), in one line for the dashboard; None once a bump happened.

    ``deps`` are every dependency of the watch (dropped ones are skipped), with ``contained_in``
    the first nightly holding its merge commit; ``reason`` is the stored readiness reason."""
    if bump_state in BUMP_HAPPENED:
        return None
    if watch_state == ARCHIVED_WATCH and reason:
        return reason  # the key moved to configs/deprecated/: nothing else matters
    live = [d for d in deps if not d.dropped]
    closed = [d for d in live if d.state == Dep.CLOSED]
    if closed:
        refs = " ".join(d.ref for d in closed)
        return (
            f"{', '.join(d.ref for d in closed)} closed without merge: it can never ship; drop it with "
            f"`/depends-on drop {refs}`"
        )
    gone = [d for d in live if d.state == Dep.MISSING]
    if gone:
        return f"{', '.join(d.ref for d in gone)} does not exist (GitHub answers 404 Not Found)"
    open_ = [d for d in live if d.state in (Dep.OPEN, Dep.UNKNOWN)]
    if open_:
        return "waiting for " + ", ".join(f"{d.ref} ({d.state})" for d in open_) + " to merge"
    missing = [d for d in live if d.state == Dep.MERGED and not d.contained_in]
    if missing:
        return "merged, but no nightly contains " + ", ".join(d.ref for d in missing) + " yet"
    if reason:
        return reason
    if not live:
        return "no dependencies to wait for"
    return "every dependency shipped; the bump happens at the next check"
