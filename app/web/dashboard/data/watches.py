"""Watches: each with its dependencies, its bump and why there is none yet, and the nightly
timelines of the images they follow."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import case, select
from sqlalchemy.orm import Session

from app.core.chosen_nightly import NightlyLabels, label_nightlies
from app.core.readiness import BUMP_HAPPENED, DepView, explain_readiness
from app.models.tracking import Bump, Dependency, ImageTag, Watch, WatchState
from app.settings import Settings
from app.web.dashboard import schemas as S
from app.web.dashboard.data.common import aware, html_base, page_of


def _why_no_bump(w: Watch, deps: list[Dependency], bump: Bump | None) -> str | None:
    """The one readiness explanation (the same the tracking flow logs), over the stored rows."""
    return explain_readiness(
        watch_state=w.state,
        reason=w.reason,
        deps=[DepView(d.ref, d.state, d.merge_sha, d.title, d.contained_in, d.dropped) for d in deps],
        bump_state=bump.state if bump is not None else None,
    )


def _bump_out(b: Bump, base: str) -> S.BumpOut:
    diff: str | None = None
    if b.commit_sha:
        diff = f"{base}/{b.repo}/commit/{b.commit_sha}"
    if b.bump_pr_number:
        diff = f"{base}/{b.repo}/pull/{b.bump_pr_number}/files"
    return S.BumpOut(
        image=b.image,
        old_image=b.old_image,
        state=b.state,
        mode=b.mode,
        commit_sha=b.commit_sha,
        branch=b.branch,
        bump_pr_number=b.bump_pr_number,
        diff_url=diff,
        created_at=aware(b.created_at),
    )


@dataclass
class _Page:
    """One page of watches with their children, loaded with one query per kind."""

    rows: list[Watch]
    more: bool
    deps: dict[int, list[Dependency]]
    bumps: dict[int, Bump]
    labels: dict[int, NightlyLabels]


def _load(session: Session, *, repo: str | None, state: str | None, page: int, per_page: int) -> _Page:
    # Waiting and blocked watches first: they are the ones someone may need to act on.
    active_first = case((Watch.state.in_(WatchState.ACTIVE), 0), else_=1)
    stmt = select(Watch).order_by(active_first, Watch.id.desc())
    if repo:
        stmt = stmt.where(Watch.repo == repo)
    if state:
        stmt = stmt.where(Watch.state == state)
    rows, more = page_of(session, stmt, page, per_page)
    ids = [w.id for w in rows]
    deps: dict[int, list[Dependency]] = defaultdict(list)
    bumps: dict[int, Bump] = {}
    if ids:
        for d in session.scalars(
            select(Dependency).where(Dependency.watch_id.in_(ids)).order_by(Dependency.id)
        ):
            deps[d.watch_id].append(d)
        for bump in session.scalars(select(Bump).where(Bump.watch_id.in_(ids)).order_by(Bump.id)):
            bumps[bump.watch_id] = bump  # the newest wins
    labels: dict[int, NightlyLabels] = {}
    for w in rows:
        b = bumps.get(w.id)
        bumped_image = b.image if b is not None and b.state in BUMP_HAPPENED else None
        labels[w.id] = label_nightlies(
            pinned_image=w.pinned_image, newest_tag=w.chosen_tag, bumped_image=bumped_image
        )
    return _Page(rows, more, deps, bumps, labels)


def _watch_out(w: Watch, p: _Page, base: str) -> S.WatchOut:
    b = p.bumps.get(w.id)
    dep_rows = p.deps.get(w.id, [])
    return S.WatchOut(
        id=w.id,
        repo=w.repo,
        pr_number=w.pr_number,
        config_key=w.config_key,
        state=w.state,
        image_repo=w.image_repo,
        pinned_image=w.pinned_image,
        chosen_tag=p.labels[w.id].chosen,
        newest_containing_tag=p.labels[w.id].newest_containing,
        first_containing_tag=w.first_containing_tag,
        decision=w.decision,
        reason=w.reason,
        checked_at=aware(w.checked_at),
        dependencies=[
            S.DependencyOut(
                ref=d.ref,
                state=d.state,
                merge_sha=d.merge_sha,
                title=d.title,
                contained_in=d.contained_in,
                dropped=d.dropped,
                dropped_by=d.dropped_by,
                url=f"{base}/{d.dep_repo}/pull/{d.dep_number}",
            )
            for d in dep_rows
        ],
        bump=_bump_out(b, base) if b is not None else None,
        why_no_bump=_why_no_bump(w, dep_rows, b),
    )


def _pin_tag(w: Watch) -> str | None:
    return w.pinned_image.rsplit(":", 1)[-1] if w.pinned_image and ":" in w.pinned_image else None


def _timeline(session: Session, image_repo: str, p: _Page, limit: int) -> S.Timeline:
    """An image's newest ``limit`` tags, plus the pinned, chosen and newest-containing ones of the
    page's watches however old; a pin the registry deleted before it was ever listed comes first."""
    mine = [w for w in p.rows if w.image_repo == image_repo]
    pinned = {t for w in mine if (t := _pin_tag(w))}
    chosen = {t for w in mine if (t := p.labels[w.id].chosen)}
    newest = {t for w in mine if (t := p.labels[w.id].newest_containing)}
    tags = list(
        session.scalars(
            select(ImageTag)
            .where(ImageTag.image_repo == image_repo)
            .order_by(ImageTag.pushed_at.desc().nulls_last(), ImageTag.seq.desc())
            .limit(limit)
        )
    )
    # A pinned tag older than the window (or deleted long ago) still belongs on the timeline.
    extra = (pinned | chosen | newest) - {t.tag for t in tags}
    if extra:
        tags += list(
            session.scalars(
                select(ImageTag).where(ImageTag.image_repo == image_repo, ImageTag.tag.in_(sorted(extra)))
            )
        )
    tags.sort(key=lambda t: (aware(t.pushed_at) or datetime.min.replace(tzinfo=UTC), t.seq))
    listed = {t.tag for t in tags}
    never_listed = sorted(
        t for w in mine if (t := _pin_tag(w)) and w.pinned_missing_since is not None and t not in listed
    )
    return S.Timeline(
        image_repo=image_repo,
        tags=[
            S.TagOut(tag=name, commit_sha=None, pushed_at=None, deleted=True, pinned=True, chosen=False)
            for name in dict.fromkeys(never_listed)
        ]
        + [
            S.TagOut(
                tag=t.tag,
                commit_sha=t.commit_sha,
                pushed_at=aware(t.pushed_at),
                deleted=t.deleted_at is not None,
                pinned=t.tag in pinned,
                chosen=t.tag in chosen,
                newest_containing=t.tag in newest and t.tag not in chosen,
            )
            for t in tags
        ],
    )


def watches(
    session: Session,
    settings: Settings,
    *,
    repo: str | None,
    state: str | None,
    page: int,
    per_page: int,
    timeline_tags: int = 20,
) -> S.WatchesOut:
    base = html_base(settings)
    p = _load(session, repo=repo, state=state, page=page, per_page=per_page)
    image_repos = sorted({w.image_repo for w in p.rows if w.image_repo})
    return S.WatchesOut(
        watches=S.Page[S.WatchOut](
            items=[_watch_out(w, p, base) for w in p.rows], page=page, per_page=per_page, has_next=p.more
        ),
        timelines=[_timeline(session, r, p, timeline_tags) for r in image_repos],
    )
