"""Nightly regression watch: canary sweeps of new nightlies, change points, bisection, issues.

For every key under ``watch-nightlies:`` in a repo's ``.github/sweepbot.yml`` (``app.flows.repo.bot_config``),
``watch_nightlies`` (beat task ``sweepbot.watch_nightlies``):

1. lists the key's image repository (the repository of the key's ``image:`` on the default branch)
   and records every nightly it has not seen (``nightly_canaries``); the newest new one is planned
   for measurement (``app.core.nightly_watch.plan_new_nightlies``);
2. launches each planned canary (``app.flows.nightly.canary``): a branch off the default branch
   whose one change is the key's image pin, and a sweep at the canary priority that runs only in
   idle runner time, within the weekly budget;
3. folds finished canary sweeps in, builds each (point, metric) series over the measured
   nightlies (oldest first) and runs the change-point detector (``app.core.changepoint``);
4. a regression whose last good and first bad nightly have retained, unmeasured nightlies between
   them is narrowed by bisection over those tags (bounded by ``max-bisect-runs``); then the
   upstream commit range comes from the compare API, and one issue per regression (found by its
   hidden marker, edited in place) names the first bad nightly, the range and the merged PRs
   (``app.flows.nightly.issue``); while it is open, every pass refreshes the series it lists at
   its (fixed) bracket;
5. watches pinned at or after a regressed nightly get a note on their PR; an issue is closed when
   the later nightlies are back at the old level.

Pure decisions live in ``app.core.nightly_watch``; this module and its two helpers read and write.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Protocol

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.adapters.registry import TagPattern
from app.core.bot_config import BotConfig, NightlyKey, NightlyWatch
from app.core.changepoint import DetectorSettings
from app.core.nightly_watch import (
    METRICS,
    Analysis,
    Nightly,
    analyze,
    group_by_bracket,
    narrow_step,
    plan_new_nightlies,
    refresh_findings,
    within,
)
from app.core.routing import TransientError
from app.flows.nightly.canary import (
    BOT,
    CanaryGateway,
    KeyContext,
    KeyReport,
    aware,
    canaries,
    fold_sweeps,
    key_context,
    launch,
    now,
)
from app.flows.nightly.issue import IssueGateway, RangeGateway, Series, check_recovery, name_range, tell
from app.flows.scheduler.canary_budget import canary_budget
from app.flows.tracking.tags import trusted_registries
from app.flows.tracking.watches import _image_source, refresh_tags
from app.models.nightly import CanaryState, NightlyCanary, NightlyRegression, RegressionState
from app.models.results import Result
from app.models.sweeps import Sweep, SweepJob
from app.models.tracking import BotConfigRecord, ImageTag
from app.store.audit import record
from app.store.bot_configs import stored_config

log = structlog.get_logger(__name__)

MAX_LAUNCHES_PER_PASS = 4  # canary branches + sweeps made per key per pass (bounded work per task)


class NightlyGateway(CanaryGateway, RangeGateway, IssueGateway, Protocol):
    """Everything a pass over one watched key touches (``GitHubGateway`` has it all)."""


GatewayFactory = Callable[[Session], NightlyGateway]


__all__ = ["KeyReport", "series_view", "watch_key", "watch_nightlies", "watched_keys", "watched_repos"]

# Kept for callers and tests that read the rows the way the watch does.
_canaries = canaries


# ------------------------------------------------------------------------------------ the pass


def watched_repos(session: Session) -> list[tuple[str, BotConfig]]:
    """Repos whose last good bot config lists ``watch-nightlies`` keys (no GitHub call)."""
    out: list[tuple[str, BotConfig]] = []
    for repo in session.scalars(select(BotConfigRecord.repo).order_by(BotConfigRecord.repo)):
        cfg = stored_config(session, repo)
        if cfg is not None and cfg.watch_nightlies.keys:
            out.append((repo, cfg))
    return out


def watch_nightlies(
    session_factory: sessionmaker[Session], gw_factory: GatewayFactory, *, http: Any = None
) -> list[KeyReport]:
    """One pass over every watched key; each key in its own transaction (one failing key stops none)."""
    with session_factory() as session:
        targets = [(repo, cfg) for repo, cfg in watched_repos(session)]
    reports: list[KeyReport] = []
    for repo, cfg in targets:
        for nk in cfg.watch_nightlies.keys:
            with session_factory() as session:
                report = KeyReport(repo, nk.config_key)
                try:
                    watch_key(session, gw_factory(session), repo, cfg, nk, report, http=http)
                    session.commit()
                except Exception as exc:
                    session.rollback()
                    log.exception("nightly_watch_failed", repo=repo, key=nk.config_key)
                    report.error = f"{exc.__class__.__name__}: {exc}"
                    if isinstance(exc, TransientError):
                        raise
                reports.append(report)
    return reports


def _record_new(
    session: Session,
    ctx: KeyContext,
    rows: list[NightlyCanary],
    present: list[str],
    tag_rows: dict[str, ImageTag],
    report: KeyReport,
) -> None:
    """A row for every nightly not seen before: the newest planned, older ones skipped for now."""
    plan = plan_new_nightlies({r.tag for r in rows}, present, first_run=not rows)
    report.notes.append(plan.reason)
    tp = TagPattern(ctx.pattern)
    purpose = "first" if not rows else "new"
    for tag in [*plan.skip, *plan.measure]:
        itag = tag_rows.get(tag)
        session.add(
            NightlyCanary(
                repo=ctx.repo,
                config_key=ctx.key.config_key,
                image_repo=ctx.image_repo,
                tag=tag,
                image=f"{ctx.image_repo}:{tag}",
                commit_sha=tp.commit_of(tag),
                pushed_at=itag.pushed_at if itag else None,
                tag_seq=itag.seq if itag else 0,
                purpose=purpose,
                state=CanaryState.PLANNED if tag in plan.measure else CanaryState.SKIPPED,
                reason=plan.reason,
                preempted_hours=0.0,
                updated_at=now(),
            )
        )
        if tag in plan.measure:
            report.planned.append(tag)
    session.flush()


def watch_key(
    session: Session,
    gw: NightlyGateway,
    repo: str,
    cfg: BotConfig,
    nk: NightlyKey,
    report: KeyReport,
    *,
    http: Any = None,
) -> KeyReport:
    ctx = key_context(gw, repo, cfg, nk)
    report.image_repo = ctx.image_repo
    _pattern, kind, url, _src = _image_source(cfg, ctx.image_repo)
    tags = refresh_tags(
        session,
        ctx.image_repo,
        pattern=ctx.pattern,
        trusted=trusted_registries(cfg, [ctx.image_repo]),  # the key's pin on the default branch
        registry_kind=kind,
        registry_url=url,
        http=http,
    )
    if not tags.ok:
        report.notes.append(f"registry listing failed: {tags.error}; using the tags known so far")
    tag_rows = {
        r.tag: r for r in session.scalars(select(ImageTag).where(ImageTag.image_repo == ctx.image_repo))
    }
    _record_new(
        session, ctx, canaries(session, repo, nk.config_key), [t for t, _ in tags.present], tag_rows, report
    )
    rows = canaries(session, repo, nk.config_key)
    names = tags.names if tags.ok else {r.tag for r in tag_rows.values() if r.deleted_at is None}
    for row in rows:
        if row.state in (CanaryState.SKIPPED, CanaryState.PLANNED) and row.tag not in names:
            row.state, row.reason, row.updated_at = CanaryState.GONE, "deleted by the registry", now()

    fold_sweeps(session, gw, repo, rows, report)
    launched = 0
    for row in rows:
        if row.state == CanaryState.PLANNED and launched < MAX_LAUNCHES_PER_PASS:
            launch(session, gw, ctx, row, report)
            launched += 1
    _analyze(session, gw, ctx, report, names)
    return report


# ------------------------------------------------------------------------------------ analysis


def _series(session: Session, rows: list[NightlyCanary]) -> Series:
    """(result name, metric) -> [(tag, value)] over the measured nightlies, oldest first."""
    measured = [r for r in rows if r.state == CanaryState.MEASURED and r.sweep_id is not None]
    # One recipe per series: a change of the key's recipe (its fingerprint) on the default branch
    # is not a change of the nightlies; the series restarts with the recipe canaries now measure.
    recipes = {
        r.id: session.scalar(select(Sweep.fingerprint).where(Sweep.id == r.sweep_id)) for r in measured
    }
    if measured:
        newest = max(measured, key=lambda r: (aware(r.measured_at) or now(), r.id))
        measured = [r for r in measured if recipes[r.id] == recipes[newest.id]]
    out: Series = {}
    for row in measured:
        jobs = list(session.scalars(select(SweepJob).where(SweepJob.sweep_id == row.sweep_id)))
        for job in jobs:
            result = session.scalars(
                select(Result)
                .where(Result.image == row.image, Result.result_name == job.result_name)
                .order_by(Result.id.desc())
            ).first()
            if result is None:
                continue
            for metric in METRICS:
                value = getattr(result, metric, None)
                if value is not None:
                    out.setdefault((job.result_name, metric), []).append((row.tag, float(value)))
    return out


def _detector(watch: NightlyWatch, repo: str, key: str) -> DetectorSettings:
    seed = int.from_bytes(hashlib.sha256(f"{repo}:{key}".encode()).digest()[:4], "big")
    return DetectorSettings(
        p_value=watch.p_value, min_effect=watch.min_effect, min_points=watch.min_nightlies, seed=seed
    )


def _nightlies(rows: list[NightlyCanary], names: set[str]) -> list[Nightly]:
    return [
        Nightly(
            tag=r.tag,
            commit_sha=r.commit_sha,
            measured=r.state == CanaryState.MEASURED,
            retained=r.tag in names,
            planned=r.state in CanaryState.OPEN,
        )
        for r in rows
    ]


def _analyze(
    session: Session, gw: NightlyGateway, ctx: KeyContext, report: KeyReport, names: set[str]
) -> None:
    rows = canaries(session, ctx.repo, ctx.key.config_key)
    series = _series(session, rows)
    if not series:
        report.notes.append("no measured nightly yet")
        return
    analysis = analyze(series, _detector(ctx.cfg.watch_nightlies, ctx.repo, ctx.key.config_key))
    if analysis.not_enough_data:
        report.notes.append(analysis.not_enough_data[0])
    regs = list(
        session.scalars(
            select(NightlyRegression).where(
                NightlyRegression.repo == ctx.repo, NightlyRegression.config_key == ctx.key.config_key
            )
        )
    )
    _match(session, ctx, analysis, _nightlies(rows, names), regs, series)
    session.flush()
    _advance(session, gw, ctx, report, regs, rows, names, series)


def _match(
    session: Session,
    ctx: KeyContext,
    analysis: Analysis,
    nightlies: list[Nightly],
    regs: list[NightlyRegression],
    series: Series,
) -> None:
    """This pass's findings onto the regressions: new ones recorded, narrowing ones re-bracketed,
    open ones (whose bracket is final) keep their bracket but list their series as measured now."""
    found_for: dict[int, list[Any]] = {}
    for (good, bad), findings in group_by_bracket(analysis.findings).items():
        match = next(
            (
                r
                for r in regs
                if r.state in RegressionState.ACTIVE
                and (
                    within(nightlies, (r.last_good_tag, r.first_bad_tag), (good, bad))
                    or within(nightlies, (good, bad), (r.last_good_tag, r.first_bad_tag))
                )
            ),
            None,
        )
        if match is None and any(r.first_bad_tag == bad for r in regs):
            continue  # already reported (and recovered): the same change is not a new regression
        if match is None:
            match = _new_regression(session, ctx, good, bad, len(findings))
            regs.append(match)
        if match.state == RegressionState.OPEN:
            found_for.setdefault(id(match), []).extend(findings)
            continue  # the bracket is final once narrowed; noise must not move an open issue
        match.last_good_tag, match.first_bad_tag = good, bad
        match.series = [f.to_json() for f in findings]
        match.updated_at = now()
    for reg in regs:
        if reg.state != RegressionState.OPEN:
            continue
        listed = refresh_findings(
            series, reg.last_good_tag, reg.first_bad_tag, reg.series or [], found_for.get(id(reg), [])
        )
        if listed != (reg.series or []):
            reg.series, reg.updated_at = listed, now()


def _new_regression(session: Session, ctx: KeyContext, good: str, bad: str, moved: int) -> NightlyRegression:
    reg = NightlyRegression(
        repo=ctx.repo,
        config_key=ctx.key.config_key,
        image_repo=ctx.image_repo,
        state=RegressionState.NARROWING,
        last_good_tag=good,
        first_bad_tag=bad,
        series=[],
        bisect_runs=0,
        created_at=now(),
    )
    session.add(reg)
    record(
        session,
        actor=BOT,
        action="nightly.regression_found",
        target=f"{ctx.repo}:{ctx.key.config_key}",
        detail={"last_good": good, "first_bad": bad, "series": moved},
    )
    return reg


def _advance(
    session: Session,
    gw: NightlyGateway,
    ctx: KeyContext,
    report: KeyReport,
    regs: list[NightlyRegression],
    rows: list[NightlyCanary],
    names: set[str],
    series: Series,
) -> None:
    """Narrow what is narrowing (one bisection canary at a time), then tell what is open."""
    watch = ctx.cfg.watch_nightlies
    nightlies = _nightlies(rows, names)
    by_tag = {r.tag: r for r in rows}
    for reg in regs:
        if reg.state == RegressionState.NARROWING:
            step = narrow_step(
                nightlies,
                reg.last_good_tag,
                reg.first_bad_tag,
                runs_left=watch.max_bisect_runs - reg.bisect_runs,
            )
            reg.reason = step.reason
            if step.measure is not None:
                target = by_tag[step.measure]
                target.state, target.purpose, target.updated_at = CanaryState.PLANNED, "bisect", now()
                target.reason = f"bisection of regression {reg.id}: {step.reason}"
                reg.bisect_runs += 1
                launch(session, gw, ctx, target, report)
                nightlies = _nightlies(rows, names)
            elif step.done:
                reg.state = RegressionState.OPEN
                name_range(gw, ctx, reg, by_tag)
        if reg.state == RegressionState.OPEN:
            check_recovery(reg, series, report)
            tell(session, gw, ctx, reg, series, report)
            report.regressions.append(reg.id)


# ------------------------------------------------------------------------------------ views


def series_view(session: Session, repo: str, key: str) -> dict[str, Any]:
    """The dashboard's nightly-series page data: nightlies, series, regressions, budget."""
    rows = canaries(session, repo, key)
    series = _series(session, rows)
    regs = list(
        session.scalars(
            select(NightlyRegression)
            .where(NightlyRegression.repo == repo, NightlyRegression.config_key == key)
            .order_by(NightlyRegression.id)
        )
    )
    return {
        "repo": repo,
        "config_key": key,
        "nightlies": [
            {
                "tag": r.tag,
                "state": r.state,
                "purpose": r.purpose,
                "sweep_id": r.sweep_id,
                "reason": r.reason,
                "commit_sha": r.commit_sha,
            }
            for r in rows
        ],
        "series": [
            {"result_name": name, "metric": metric, "points": [{"tag": t, "value": v} for t, v in pts]}
            for (name, metric), pts in sorted(series.items())
        ],
        "regressions": [
            {
                "id": r.id,
                "state": r.state,
                "last_good": r.last_good_tag,
                "first_bad": r.first_bad_tag,
                "series": r.series,
                "issue": f"{r.issue_repo}#{r.issue_number}" if r.issue_number else None,
                "commits": len(r.commits or []),
                "pulls": r.pulls or [],
                "recovered": r.recovered_tag,
                "reason": r.reason,
            }
            for r in regs
        ],
        "budget": canary_budget(session, repo).to_json(),
    }


def watched_keys(session: Session) -> list[dict[str, Any]]:
    out = []
    for repo, cfg in watched_repos(session):
        budget = canary_budget(session, repo).to_json()
        for nk in cfg.watch_nightlies.keys:
            rows = canaries(session, repo, nk.config_key)
            active = session.scalars(
                select(NightlyRegression).where(
                    NightlyRegression.repo == repo,
                    NightlyRegression.config_key == nk.config_key,
                    NightlyRegression.state.in_(RegressionState.ACTIVE),
                )
            ).all()
            out.append(
                {
                    "repo": repo,
                    "config_key": nk.config_key,
                    "conc": nk.conc,
                    "nightlies": len(rows),
                    "measured": sum(1 for r in rows if r.state == CanaryState.MEASURED),
                    "open_regressions": len(active),
                    "budget": budget,
                }
            )
    return out
