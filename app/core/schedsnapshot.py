"""The planner's snapshot read from JSON, with errors that say what was wrong and how to fix it.

Shape (``sweepbot sched plan SNAPSHOT.json``)::

    {"now": ISO-8601,
     "jobs": [{"id", "run_id", "pr", "labels", "created_at", "status"}],   # queued | in_progress
     "runners": [{"id", "name", "labels", "status", "busy"}]}            # online | offline

A runner's ``labels`` may be names or the runners API's ``{"name": ...}`` objects.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from app.core.schedplan import SnapJob, SnapRunner, Snapshot

MAX_JOBS = 50_000
MAX_RUNNERS = 5_000
JOB_STATUSES = ("queued", "in_progress")
RUNNER_STATUSES = ("online", "offline")


class SnapshotError(ValueError):
    """The snapshot is not of the documented shape; the message names the field and the fix."""


def _time(value: object, where: str) -> datetime:
    if not isinstance(value, str):
        raise SnapshotError(f"{where} must be an ISO-8601 time string such as 2026-01-02T03:04:05Z")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise SnapshotError(f"{where} {value[:40]!r} is not ISO-8601 (e.g. 2026-01-02T03:04:05Z)") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _int(value: object, where: str, *, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "a whole number or null" if optional else "a whole number"
        raise SnapshotError(f"{where} must be {kind}, got {type(value).__name__}")
    return value


def _labels(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise SnapshotError(f"{where} must be a list of label names")
    out = []
    for i, item in enumerate(value):
        name = item.get("name") if isinstance(item, dict) else item
        if not isinstance(name, str) or not name or len(name) > 256:
            raise SnapshotError(f"{where}[{i}] must be a label name (1-256 characters)")
        out.append(name)
    return tuple(out)


def _choice(value: object, where: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise SnapshotError(f"{where} must be one of {', '.join(allowed)}, got {str(value)[:40]!r}")
    return str(value)


def _fields(item: object, where: str, keys: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise SnapshotError(f"{where} must be an object with {', '.join(keys)}")
    missing = [k for k in keys if k not in item]
    if missing:
        raise SnapshotError(f"{where} lacks {', '.join(missing)} (each needs {', '.join(keys)})")
    return item


def _job(item: object, i: int) -> SnapJob:
    w = f"jobs[{i}]"
    d = _fields(item, w, ("id", "run_id", "pr", "labels", "created_at", "status"))
    return SnapJob(
        id=_int(d["id"], f"{w}.id") or 0,
        run_id=_int(d["run_id"], f"{w}.run_id") or 0,
        pr=_int(d["pr"], f"{w}.pr", optional=True),
        labels=_labels(d["labels"], f"{w}.labels"),
        created_at=_time(d["created_at"], f"{w}.created_at"),
        status=_choice(d["status"], f"{w}.status", JOB_STATUSES),
    )


def _runner(item: object, i: int) -> SnapRunner:
    w = f"runners[{i}]"
    d = _fields(item, w, ("id", "name", "labels", "status", "busy"))
    if not isinstance(d["name"], str) or not d["name"]:
        raise SnapshotError(f"{w}.name must be the runner's name")
    if not isinstance(d["busy"], bool):
        raise SnapshotError(f"{w}.busy must be true or false")
    return SnapRunner(
        id=_int(d["id"], f"{w}.id") or 0,
        name=d["name"],
        labels=_labels(d["labels"], f"{w}.labels"),
        status=_choice(d["status"], f"{w}.status", RUNNER_STATUSES),
        busy=d["busy"],
    )


def _unique(ids: list[int], what: str) -> None:
    seen: set[int] = set()
    for x in ids:
        if x in seen:
            raise SnapshotError(f"{what} id {x} appears twice; each {what} once")
        seen.add(x)


def parse_snapshot(data: object) -> Snapshot:
    d = _fields(data, "the snapshot", ("now", "jobs", "runners"))
    if not isinstance(d["jobs"], list) or not isinstance(d["runners"], list):
        raise SnapshotError("the snapshot's jobs and runners must be lists")
    if len(d["jobs"]) > MAX_JOBS or len(d["runners"]) > MAX_RUNNERS:
        raise SnapshotError(f"at most {MAX_JOBS} jobs and {MAX_RUNNERS} runners; split the snapshot")
    jobs = tuple(_job(x, i) for i, x in enumerate(d["jobs"]))
    runners = tuple(_runner(x, i) for i, x in enumerate(d["runners"]))
    _unique([j.id for j in jobs], "job")
    _unique([r.id for r in runners], "runner")
    return Snapshot(_time(d["now"], "now"), jobs, runners)
