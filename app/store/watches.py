"""Watches, their dependencies and the status comment record (tables ``watches``,
``watch_dependencies``, ``status_comments``): the queries and writes tracking needs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.deprefs import DepRef
from app.models.tracking import Dependency, DepState, StatusComment, Watch, WatchState

log = structlog.get_logger(__name__)


def watches_for_pr(session: Session, repo: str, pr_number: int) -> list[Watch]:
    return list(
        session.scalars(
            select(Watch).where(Watch.repo == repo, Watch.pr_number == pr_number).order_by(Watch.id)
        )
    )


def active_watches(session: Session) -> list[Watch]:
    """Watches a poll cycle checks (waiting or blocked), oldest first."""
    return list(session.scalars(select(Watch).where(Watch.state.in_(WatchState.ACTIVE)).order_by(Watch.id)))


def all_watches(session: Session) -> list[Watch]:
    return list(session.scalars(select(Watch).order_by(Watch.repo, Watch.pr_number, Watch.config_key)))


def ensure_watch(session: Session, repo: str, pr_number: int, key: str, source: str) -> Watch:
    watch = session.scalar(
        select(Watch).where(Watch.repo == repo, Watch.pr_number == pr_number, Watch.config_key == key)
    )
    if watch is None:
        watch = Watch(repo=repo, pr_number=pr_number, config_key=key, source=source, state=WatchState.WAITING)
        session.add(watch)
        session.flush()
        log.info("watch_created", repo=repo, pr=pr_number, key=key, source=source)
    return watch


def live_dependencies(watch: Watch) -> list[Dependency]:
    """The dependencies the watch still waits for (not dropped)."""
    return [d for d in watch.dependencies if not d.dropped]


def sync_dependencies(
    session: Session,
    watch: Watch,
    refs: Sequence[DepRef],
    *,
    source: str,
    actor: str | None,
    authoritative: bool = False,
) -> tuple[list[str], list[str]]:
    """Add ``refs``; with ``authoritative`` (a re-read PR body) drop ``source`` deps no longer listed.

    A dependency dropped by a command stays dropped even if the body still lists it.
    """
    added: list[str] = []
    removed: list[str] = []
    current = {(d.dep_repo, d.dep_number): d for d in watch.dependencies}
    wanted = {(r.repo, r.number) for r in refs}
    for ref in refs:
        dep = current.get((ref.repo, ref.number))
        if dep is None:
            dep = Dependency(
                dep_repo=ref.repo,
                dep_number=ref.number,
                source=source,
                state=DepState.UNKNOWN,
                dropped=False,
                added_by=actor,
            )
            watch.dependencies.append(dep)
            added.append(str(ref))
        elif dep.dropped and source == "command":
            dep.dropped, dep.dropped_by, dep.source, dep.added_by = False, None, source, actor
            added.append(str(ref))
    if authoritative:
        for (repo, number), dep in current.items():
            if dep.source == source and not dep.dropped and (repo, number) not in wanted:
                dep.dropped, dep.dropped_by = True, f"{source} edit"
                removed.append(dep.ref)
    session.flush()
    return added, removed


def drop_dependencies(watches: Sequence[Watch], refs: Sequence[DepRef], actor: str) -> list[str]:
    """Mark ``refs`` dropped on every watch (by ``actor``); the refs actually dropped, in order."""
    wanted = {(r.repo, r.number) for r in refs}
    dropped: list[str] = []
    for w in watches:
        for d in w.dependencies:
            if (d.dep_repo, d.dep_number) in wanted and not d.dropped:
                d.dropped, d.dropped_by = True, actor
                if d.ref not in dropped:
                    dropped.append(d.ref)
    return dropped


def status_record(session: Session, repo: str, pr_number: int) -> StatusComment | None:
    return session.scalar(
        select(StatusComment).where(StatusComment.repo == repo, StatusComment.pr_number == pr_number)
    )


def save_status_record(
    session: Session, rec: StatusComment | None, repo: str, pr_number: int, *, comment_id: int, digest: str
) -> None:
    if rec is None:
        rec = StatusComment(repo=repo, pr_number=pr_number)
        session.add(rec)
    rec.comment_id, rec.body_sha, rec.updated_at = comment_id, digest, datetime.now(UTC)
    session.flush()
