"""Nightly watch, the telling side: the upstream range of a regression, its issue, recovery, notes.

Once the first bad nightly is named, the upstream commit range between the last good and the
first bad nightly's source commits comes from the compare API (paged; bounded, and the issue says
when the range is longer than what was read) and the merged PRs in it from the commits'
associated-pulls API (bounded; commit titles name the rest). One issue per regression, found by
its hidden marker and edited in place only when its text changed, lists every series that moved,
the chart, the range and the PRs; it is closed when the later nightlies are back at the old level.
Watches pinned at or after the first bad nightly get a note on their PR (once each).
"""

from __future__ import annotations

from typing import Any, Protocol

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.adapters.registry import parse_image
from app.core.changepoint import DEFAULT_MIN_SIZE
from app.core.nightly_watch import (
    IssueView,
    issue_marker,
    issue_title,
    merged_pulls,
    recovered_at,
    render_issue,
    watch_note,
)
from app.flows.nightly.canary import BOT, KeyContext, KeyReport, canaries, now
from app.models.nightly import NightlyCanary, NightlyRegression, RegressionState
from app.models.tracking import Watch
from app.store.audit import record

log = structlog.get_logger(__name__)

Series = dict[tuple[str, str], list[tuple[str, float]]]

MAX_RANGE_COMMITS = 1000  # commits read from the compare API per regression (10 pages of 100)
MAX_PULL_LOOKUPS = 100  # associated-pulls calls per regression; titles name the PRs of the rest


class RangeGateway(Protocol):
    """Naming the upstream range: the paged compare, and each commit's associated PRs."""

    def compare_range(
        self, repo: str, base: str, head: str, *, max_commits: int = 1000
    ) -> dict[str, Any]: ...
    def commit_pulls(self, repo: str, sha: str) -> list[dict[str, Any]]: ...


class NoteGateway(Protocol):
    """A note on a pinned watch's PR (one comment per regression, found by its marker)."""

    def upsert_comment(self, repo: str, number: int, marker: str, body: str) -> dict[str, Any]: ...


class IssueGateway(NoteGateway, Protocol):
    """The regression's issue (look before create, edited in place, closed once recovered)."""

    def upsert_issue(
        self, repo: str, marker: str, *, title: str, body: str, number: int | None = None
    ) -> dict[str, Any]: ...
    def update_issue(self, repo: str, number: int, **fields: Any) -> dict[str, Any]: ...


def name_range(
    gw: RangeGateway, ctx: KeyContext, reg: NightlyRegression, by_tag: dict[str, NightlyCanary]
) -> None:
    """The upstream commits between the two nightlies' source commits and the merged PRs in them."""
    good, bad = by_tag.get(reg.last_good_tag), by_tag.get(reg.first_bad_tag)
    reg.last_good_sha = good.commit_sha if good else None
    reg.first_bad_sha = bad.commit_sha if bad else None
    reg.source_repo = ctx.source_repo
    if not (ctx.source_repo and reg.last_good_sha and reg.first_bad_sha):
        reg.commits, reg.pulls, reg.commits_total = [], [], None
        return
    cmp = gw.compare_range(
        ctx.source_repo, reg.last_good_sha, reg.first_bad_sha, max_commits=MAX_RANGE_COMMITS
    )
    commits = [
        {
            "sha": str(c.get("sha") or ""),
            "title": str((c.get("commit") or {}).get("message") or "").split("\n")[0],
        }
        for c in cmp["commits"]
    ]
    associated: dict[str, list[dict[str, Any]]] = {}
    # Newest first: the merge commits of the PRs that introduced the change sit at the range's end.
    for c in list(reversed(commits))[:MAX_PULL_LOOKUPS]:
        associated[c["sha"]] = gw.commit_pulls(ctx.source_repo, c["sha"])
    reg.commits = commits
    reg.commits_total = int(cmp.get("total_commits") or len(commits))
    reg.pulls = merged_pulls(commits, associated)
    reg.compare_url = str(cmp.get("html_url") or "") or None
    log.info(
        "nightly_range_named",
        regression=reg.id,
        commits=len(commits),
        total=reg.commits_total,
        looked_up=len(associated),
        pulls=len(reg.pulls),
    )


def _worst(reg: NightlyRegression) -> dict[str, Any]:
    return max(reg.series or [{}], key=lambda f: abs(float(f.get("change") or 0.0)))


def check_recovery(reg: NightlyRegression, series: Series, report: KeyReport) -> None:
    """Recovered when every series of the regression has a final run back at the old level."""
    if not reg.series:
        return
    tags: list[str] = []
    for f in reg.series:
        points = series.get((str(f["result_name"]), str(f["metric"])), [])
        tag = recovered_at(
            points, reg.first_bad_tag, float(f["before"]), float(f["after"]), min_run=DEFAULT_MIN_SIZE
        )
        if tag is None:
            return
        tags.append(tag)
    order = [t for t, _ in next(iter(series.values()))]
    reg.recovered_tag = max(tags, key=lambda t: order.index(t) if t in order else -1)
    reg.state = RegressionState.RECOVERED
    reg.closed_at = reg.updated_at = now()
    report.notes.append(f"regression {reg.id} recovered in {reg.recovered_tag}")


def _pinned_watches(
    session: Session, ctx: KeyContext, reg: NightlyRegression, order: list[str]
) -> list[Watch]:
    if reg.first_bad_tag not in order:
        return []
    bad_at = order.index(reg.first_bad_tag)
    out = []
    for w in session.scalars(
        select(Watch).where(Watch.image_repo == ctx.image_repo, Watch.pinned_image.is_not(None))
    ):
        try:
            tag = parse_image(str(w.pinned_image)).tag
        except ValueError:
            continue
        if tag in order and order.index(tag) >= bad_at:
            out.append(w)
    return out


def issue_view(ctx: KeyContext, reg: NightlyRegression, series: Series, watches: list[Watch]) -> IssueView:
    worst = _worst(reg)
    return IssueView(
        repo=ctx.repo,
        config_key=ctx.key.config_key,
        image_repo=ctx.image_repo,
        last_good_tag=reg.last_good_tag,
        first_bad_tag=reg.first_bad_tag,
        findings=reg.series or [],
        chart_points=series.get((str(worst.get("result_name")), str(worst.get("metric"))), []),
        chart_metric=str(worst.get("metric") or "mean_tpot_ms"),
        chart_point=str(worst.get("result_name") or ""),
        narrowing=(reg.reason or "adjacent measured nightlies")
        + (
            f"; {reg.bisect_runs} bisection canary(ies) measured"
            if reg.bisect_runs
            else "; no bisection needed"
        ),
        source_repo=reg.source_repo,
        compare_url=reg.compare_url,
        commits=reg.commits or [],
        commits_total=reg.commits_total,
        pulls=reg.pulls or [],
        recovered_tag=reg.recovered_tag,
        watch_notes=[f"{w.repo}#{w.pr_number} `{w.config_key}` pins `{w.pinned_image}`" for w in watches],
    )


def tell(
    session: Session,
    gw: IssueGateway,
    ctx: KeyContext,
    reg: NightlyRegression,
    series: Series,
    report: KeyReport,
) -> None:
    """Create or update the regression's issue (and close it once recovered); note pinned watches."""
    order = [r.tag for r in canaries(session, ctx.repo, ctx.key.config_key)]
    watches = _pinned_watches(session, ctx, reg, order) if reg.state == RegressionState.OPEN else []
    view = issue_view(ctx, reg, series, watches)
    issue_repo = ctx.cfg.watch_nightlies.issue_repo or ctx.repo
    marker = issue_marker(ctx.repo, ctx.key.config_key, reg.first_bad_tag)
    remembered = reg.issue_number
    issue = gw.upsert_issue(
        issue_repo, marker, title=issue_title(view), body=render_issue(view), number=remembered
    )
    reg.issue_repo, reg.issue_number = issue_repo, int(issue["number"])
    report.issues.append(reg.issue_number)
    if reg.issue_number != remembered:
        detail: dict[str, Any] = {"regression": reg.id, "first_bad": reg.first_bad_tag}
        if remembered is not None:
            # upsert_issue found #remembered gone (a maintainer deleted it: GitHub answers 410)
            # and took the issue holding the marker, or opened a new one when none did.
            detail["replaces"] = remembered
            log.warning(
                "nightly_issue_replaced",
                regression=reg.id,
                was=f"{issue_repo}#{remembered}",
                now=f"{issue_repo}#{reg.issue_number}",
                why="the remembered issue is gone (deleted); found by its marker or opened again",
            )
        record(
            session,
            actor=BOT,
            action="nightly.issue_open",
            target=f"{issue_repo}#{reg.issue_number}",
            detail=detail,
        )
    if reg.state == RegressionState.RECOVERED and issue.get("state") != "closed":
        gw.update_issue(issue_repo, reg.issue_number, state="closed", state_reason="completed")
        record(
            session,
            actor=BOT,
            action="nightly.issue_close",
            target=f"{issue_repo}#{reg.issue_number}",
            detail={"regression": reg.id, "recovered": reg.recovered_tag},
        )
    _note_watches(session, gw, reg, view, watches, str(issue.get("html_url") or "") or None)


def _note_watches(
    session: Session,
    gw: NoteGateway,
    reg: NightlyRegression,
    view: IssueView,
    watches: list[Watch],
    url: str | None,
) -> None:
    noted = set(reg.noted_watches or [])
    for w in watches:
        if w.id in noted:
            continue
        if w.pr_number:
            gw.upsert_comment(
                w.repo,
                w.pr_number,
                f"<!-- sweepbot:regression-note:{reg.id} -->",
                watch_note(reg.id, view, url),
            )
        noted.add(w.id)
        record(
            session,
            actor=BOT,
            action="nightly.watch_note",
            target=f"{w.repo}#{w.pr_number}",
            detail={"regression": reg.id, "watch": w.id, "pin": w.pinned_image},
        )
    reg.noted_watches = sorted(noted)
