"""Which workflow runs a repair poll must act on, from one listing of a workflow's runs; pure.

The repair poll is the fallback for webhook deliveries GitHub failed to send. Asking for every
in-flight job's run costs one rate-limited call per job per poll; instead, per (repo, workflow),
the poll makes one *conditional* ``GET .../runs?event=workflow_dispatch&created=>=<cutoff>``
(``If-None-Match``: a 304 costs no rate limit, and GitHub answers 304 only when no run in the
listing changed) and then acts only on the runs whose state is ahead of what our jobs know.

- ``created_cutoff``: the ``created`` filter (GitHub's search date syntax, ``>=2026-12-01T11:00:00Z``)
  covering every in-flight dispatch, floored to a quantum so the request, and with it the stored
  ETag, stays the same from one poll to the next (a moving cutoff would never be answered 304);
- ``plan_poll``: given the listing and a summary of our in-flight jobs per run, the runs to apply
  (the listing already carries each run's status and conclusion: no per-run fetch), the runs of
  jobs that never learnt their run id (adopted by the run name in the title), and, only for
  tracked runs the listing did not show, whether to fetch them one by one or read more pages
  (whichever costs fewer calls).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from app.core.runmatch import run_name_in_title

log = structlog.get_logger(__name__)

CUTOFF_SLACK = timedelta(minutes=10)  # clock skew between us and GitHub's created_at
CUTOFF_QUANTUM_SECONDS = 3600  # the cutoff moves at most once an hour: a stable request, a stable ETag
PER_PAGE = 100  # GitHub's maximum page size for the runs listing


@dataclass(frozen=True)
class JobView:
    """What we know of one in-flight job of a run (the run's tracked state, as our jobs hold it)."""

    state: str  # "dispatched" | "running" (in-flight states only)
    run_conclusion: str | None = None  # "success" once the run/job said so (collection pending)


@dataclass(frozen=True)
class PollPlan:
    apply: tuple[Mapping[str, Any], ...]  # listed runs ahead of our jobs: fold them in, no fetch
    fetch: tuple[int, ...]  # tracked runs the listing did not show: get each (1 call per run)
    more_pages: int  # or read this many further pages of the listing instead (cheaper)
    unchanged: int  # listed runs our jobs already reflect
    reason: str


def created_cutoff(
    oldest_dispatch: datetime,
    *,
    slack: timedelta = CUTOFF_SLACK,
    quantum_seconds: int = CUTOFF_QUANTUM_SECONDS,
) -> str:
    """The ``created`` filter value covering runs dispatched at or after ``oldest_dispatch``."""
    if oldest_dispatch.tzinfo is None:
        oldest_dispatch = oldest_dispatch.replace(tzinfo=UTC)
    start = (oldest_dispatch - slack).timestamp()
    floored = math.floor(start / quantum_seconds) * quantum_seconds
    return ">=" + datetime.fromtimestamp(floored, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_is_ahead(run: Mapping[str, Any], jobs: Sequence[JobView]) -> bool:
    """True when the run's state says something our jobs of it do not yet reflect."""
    status = run.get("status")
    live = [j for j in jobs if j.run_conclusion != "success"]  # success: collection's business
    if status == "completed":
        return bool(live)
    if status == "in_progress":
        return any(j.state == "dispatched" for j in live)
    return False  # queued / requested / waiting: our jobs are dispatched, nothing to learn


def plan_poll(
    listing: Sequence[Mapping[str, Any]],
    *,
    total_count: int | None,
    tracked: Mapping[int, Sequence[JobView]],
    waiting_names: Collection[str] = (),
    per_page: int = PER_PAGE,
) -> PollPlan:
    """What to do with one listing (first page) of a workflow's runs.

    ``tracked``: run id -> our in-flight jobs of that run; ``waiting_names``: run names of in-flight
    jobs with no run id yet (the dispatch answer was lost); ``total_count``: the listing's
    ``total_count`` (how many runs matched, over every page).
    """
    apply: list[Mapping[str, Any]] = []
    listed: set[int] = set()
    unchanged = 0
    for run in listing:
        try:
            run_id = int(run["id"])
        except (KeyError, TypeError, ValueError):
            continue
        listed.add(run_id)
        name = run_name_in_title(str(run.get("display_title") or ""))
        if run_id in tracked:
            if run_is_ahead(run, tracked[run_id]):
                apply.append(run)
            else:
                unchanged += 1
        elif name is not None and name in waiting_names:
            apply.append(run)  # a job that never learnt its run id: adopted by its run name
    missing = sorted(set(tracked) - listed)
    complete = total_count is None or total_count <= len(listing)
    fetch: tuple[int, ...] = ()
    more_pages = 0
    if missing:
        pages_left = 0 if complete else math.ceil((total_count or 0) / per_page) - 1
        if 0 < pages_left < len(missing):
            more_pages = pages_left
        else:
            fetch = tuple(missing)
    reason = (
        f"{len(listing)} listed of {total_count if total_count is not None else len(listing)}: "
        f"{len(apply)} ahead of our jobs, {unchanged} unchanged"
    )
    if missing:
        how = f"read {more_pages} more page(s)" if more_pages else f"fetch {len(fetch)} one by one"
        reason += f"; {len(missing)} tracked run(s) not listed: {how}"
    log.debug("run_poll_plan", reason=reason)
    return PollPlan(tuple(apply), fetch, more_pages, unchanged, reason)
