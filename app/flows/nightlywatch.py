"""Nightly regression watch: canary sweeps of new nightlies, change points, bisection, issues.

For every key under ``watch-nightlies:`` in a repo's ``.github/sweepbot.yml`` (``app.flows.botconfig``),
``watch_nightlies`` (beat task ``sweepbot.watch_nightlies``):

1. lists the key's image repository (the repository of the key's ``image:`` on the default branch)
   and records every nightly it has not seen (``nightly_canaries``); the newest new one is planned
   for measurement (``app.core.nightly_logic.plan_new_nightlies``);
2. launches each planned canary: a branch ``sweepbot/canary/<key>/<tag>`` off the default branch
   whose one change is the key's image pin (the benchmark workflow reads the image from the
   config at the dispatched ref), and a sweep of the configured points at the canary priority
   (``reason='canary'``): the scheduler releases it only onto idle runners, preempts it for real
   work and keeps it within the weekly runner-hour budget (``app.core.release_policy``);
3. folds finished canary sweeps in, builds each (point, metric) series over the measured
   nightlies (oldest first) and runs the change-point detector (``app.core.changepoint``);
4. a regression whose last good and first bad nightly have retained, unmeasured nightlies between
   them is narrowed by bisection over those tags (bounded by ``max-bisect-runs``); then the
   upstream commit range comes from the compare API, and one issue per regression (found by its
   hidden marker, edited in place) names the first bad nightly, the range and the merged PRs;
5. watches pinned at or after a regressed nightly get a note on their PR; an issue is closed when
   the later nightlies are back at the old level.

Pure decisions live in ``app.core.nightly_logic``; this module reads and writes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.core.changepoint import DetectorSettings
from app.core.nightly_logic import (
    METRICS,
    IssueView,
    Nightly,
    analyze,
    group_by_bracket,
    issue_marker,
    issue_title,
    narrow_step,
    plan_new_nightlies,
    pulls_in,
    recovered_at,
    render_issue,
    watch_note,
    within,
)
from app.core.routing import TransientError
from app.flows.botconfig import BotConfig, NightlyKey, NightlyWatch, stored_config
from app.flows.canary_budget import canary_budget
from app.models.nightly import CanaryState, NightlyCanary, NightlyRegression, RegressionState
from app.models.results import Result
from app.models.sweeps import CANARY_PRIORITY, CANARY_REASON, JobState, Sweep, SweepJob, SweepState
from app.models.tracking import BotConfigRecord, ImageTag, Watch
from app.store.audit import record

log = structlog.get_logger(__name__)

BOT = "sweepbot"
DEFAULT_JOB_HOURS = 0.5  # expected runner-hours of one canary job before any has finished
MAX_LAUNCHES_PER_PASS = 4  # canary branches + sweeps made per key per pass (bounded work per task)
BRANCH_PREFIX = "sweepbot/canary"

GatewayFactory = Callable[[Session], Any]


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


# ------------------------------------------------------------------------------------ the pass


@dataclass
class KeyReport:
    repo: str
    config_key: str
    image_repo: str | None = None
    planned: list[str] = field(default_factory=list)
    launched: list[str] = field(default_factory=list)
    measured: list[str] = field(default_factory=list)
    regressions: list[int] = field(default_factory=list)
    issues: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # why nothing (or something) happened
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


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


@dataclass
class _KeyContext:
    repo: str
    key: NightlyKey
    cfg: BotConfig
    default_branch: str
    head_sha: str
    path: str
    master_text: str
    image_repo: str
    pattern: str
    source_repo: str | None


def _key_context(gw: Any, repo: str, cfg: BotConfig, nk: NightlyKey) -> _KeyContext:
    from app.adapters.registry import parse_image
    from app.core.recipes import parse_master
    from app.core.recipes.master import get_entry
    from app.flows.scheduler import _locate, _master_files
    from app.flows.tracking import _image_source

    default_branch = str(gw.get_repo(repo).get("default_branch") or "main")
    ref = gw.get_ref(repo, f"heads/{default_branch}")
    if ref is None:
        raise ValueError(f"{repo} has no branch {default_branch}")
    head_sha = str(ref["object"]["sha"])
    files = _master_files(gw, repo, head_sha)
    path = _locate(files, nk.config_key)
    entry = get_entry(parse_master(files[path]), nk.config_key)
    image = str(entry.get("image") or "")
    image_repo = parse_image(image).image_repo
    pattern, _kind, _url, source_repo = _image_source(cfg, image_repo)
    return _KeyContext(
        repo, nk, cfg, default_branch, head_sha, path, files[path], image_repo, pattern, source_repo
    )


def watch_key(
    session: Session,
    gw: Any,
    repo: str,
    cfg: BotConfig,
    nk: NightlyKey,
    report: KeyReport,
    *,
    http: Any = None,
) -> KeyReport:
    from app.adapters.registry import TagPattern
    from app.flows.tracking import _image_source, refresh_tags

    ctx = _key_context(gw, repo, cfg, nk)
    report.image_repo = ctx.image_repo
    _pattern, kind, url, _src = _image_source(cfg, ctx.image_repo)
    tags = refresh_tags(
        session, ctx.image_repo, pattern=ctx.pattern, registry_kind=kind, registry_url=url, http=http
    )
    if not tags.ok:
        report.notes.append(f"registry listing failed: {tags.error}; using the tags known so far")
    tag_rows = {
        r.tag: r for r in session.scalars(select(ImageTag).where(ImageTag.image_repo == ctx.image_repo))
    }
    rows = _canaries(session, repo, nk.config_key)
    known = {r.tag for r in rows}
    present = [t for t, _ in tags.present]
    plan = plan_new_nightlies(known, present, first_run=not rows)
    report.notes.append(plan.reason)
    tp = TagPattern(ctx.pattern)
    for tag in [*plan.skip, *plan.measure]:
        itag = tag_rows.get(tag)
        purpose = "first" if not rows else "new"
        session.add(
            NightlyCanary(
                repo=repo,
                config_key=nk.config_key,
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
                updated_at=_now(),
            )
        )
        if tag in plan.measure:
            report.planned.append(tag)
    session.flush()
    rows = _canaries(session, repo, nk.config_key)
    names = tags.names if tags.ok else {r.tag for r in tag_rows.values() if r.deleted_at is None}
    for row in rows:
        if row.state in (CanaryState.SKIPPED, CanaryState.PLANNED) and row.tag not in names:
            row.state, row.reason, row.updated_at = CanaryState.GONE, "deleted by the registry", _now()

    _fold_sweeps(session, gw, repo, rows, report)
    launched = 0
    for row in rows:
        if row.state == CanaryState.PLANNED and launched < MAX_LAUNCHES_PER_PASS:
            _launch(session, gw, ctx, row, report)
            launched += 1
    _analyze(session, gw, ctx, report, names)
    return report


def _canaries(session: Session, repo: str, key: str) -> list[NightlyCanary]:
    rows = list(
        session.scalars(
            select(NightlyCanary).where(NightlyCanary.repo == repo, NightlyCanary.config_key == key)
        )
    )

    def order(r: NightlyCanary) -> tuple[float, int, int]:
        pushed = _aware(r.pushed_at)
        return (pushed.timestamp() if pushed else 0.0, r.tag_seq, r.id)

    return sorted(rows, key=order)


def _fold_sweeps(session: Session, gw: Any, repo: str, rows: list[NightlyCanary], report: KeyReport) -> None:
    for row in rows:
        if row.state != CanaryState.QUEUED or row.sweep_id is None:
            continue
        sweep = session.get(Sweep, row.sweep_id)
        if sweep is None or sweep.state in (SweepState.CANCELLED, SweepState.SUPERSEDED):
            row.state, row.reason, row.updated_at = (
                CanaryState.FAILED,
                "the canary sweep was cancelled",
                _now(),
            )
            continue
        if sweep.state != SweepState.DONE:
            continue
        jobs = list(session.scalars(select(SweepJob).where(SweepJob.sweep_id == sweep.id)))
        bad = [j for j in jobs if j.state not in (JobState.SUCCEEDED, JobState.REUSED)]
        now = _now()
        if bad:
            row.state = CanaryState.FAILED
            row.reason = f"{len(bad)} of {len(jobs)} point(s) failed: " + "; ".join(
                f"{j.result_name}: {j.reason or j.state}" for j in bad[:3]
            )
        else:
            row.state, row.reason, row.measured_at = CanaryState.MEASURED, "every point measured", now
            report.measured.append(row.tag)
        row.updated_at = now
        _drop_branch(gw, repo, row)


def _drop_branch(gw: Any, repo: str, row: NightlyCanary) -> None:
    """The canary branch served its runs: delete it, unless someone pushed to it since."""
    if not row.branch:
        return
    ref = gw.get_ref(repo, f"heads/{row.branch}")
    if ref is not None and str((ref.get("object") or {}).get("sha") or "") == row.branch_sha:
        gw.delete_ref(repo, f"heads/{row.branch}")


def _launch(session: Session, gw: Any, ctx: _KeyContext, row: NightlyCanary, report: KeyReport) -> None:
    """The canary branch (pin edit only) and its sweep at the canary priority."""
    from app.adapters.github import Conflict
    from app.core.recipes import expand_points, parse_master, recipe_fingerprint, set_image
    from app.core.recipes.errors import RecipeError
    from app.core.recipes.master import get_entry, script_candidates
    from app.flows.scheduler import SweepError, _group_key, create_sweep, group_fields
    from app.settings import get_settings

    key = ctx.key.config_key
    branch = f"{BRANCH_PREFIX}/{key}/{row.tag}"
    try:
        text = set_image(ctx.master_text, key, row.image)
        master = parse_master(text)
        entry = get_entry(master, key)
        points = expand_points(master, key, seq=ctx.key.seq, conc=list(ctx.key.conc))
    except RecipeError as exc:
        row.state, row.reason, row.updated_at = CanaryState.FAILED, f"cannot plan the canary: {exc}", _now()
        return
    if not points:
        row.state, row.updated_at = CanaryState.FAILED, _now()
        row.reason = f"conc {ctx.key.conc} matches none of {key}'s points: fix watch-nightlies in {ctx.repo}"
        return
    existing = gw.get_ref(ctx.repo, f"heads/{branch}")
    if existing is not None:  # made by an earlier attempt whose transaction was lost: adopt it
        sha = str(existing["object"]["sha"])
    else:
        base_tree = str(gw.get_commit(ctx.repo, ctx.head_sha)["tree"]["sha"])
        blob = gw.create_blob(ctx.repo, text)
        tree = gw.create_tree(ctx.repo, base_tree, {ctx.path: blob})
        message = (
            f"Canary: {key} on {row.image}\n\nNightly regression watch (sweepbot): measures this nightly "
            f"at conc {', '.join(str(c) for c in ctx.key.conc)}; not meant to be merged."
        )
        sha = str(gw.create_commit(ctx.repo, message, tree, [ctx.head_sha])["sha"])
        try:
            gw.create_ref(ctx.repo, f"heads/{branch}", sha)
        except Conflict:
            again = gw.get_ref(ctx.repo, f"heads/{branch}")
            if again is None:
                raise
            sha = str(again["object"]["sha"])
    script_text = None
    for candidate in script_candidates(entry):
        got = gw.get_file(ctx.repo, candidate, ref=sha)
        if got is not None:
            script_text = got[0]
            break
    fields = group_fields(get_settings())
    slots: dict[str, int] = {}
    for seq in sorted({p.seq for p in points}):
        for p in expand_points(master, key, seq=seq):
            gk = _group_key(p.to_json(), fields)
            slots[gk] = slots.get(gk, 0) + 1
    try:
        sweep, _created, _ = create_sweep(
            session,
            gw,
            repo=ctx.repo,
            pr_number=0,
            head_sha=sha,
            head_ref=branch,
            base_ref=ctx.default_branch,
            head_repo=ctx.repo,
            is_fork=False,
            config_key=key,
            config_path=ctx.path,
            image=row.image,
            fingerprint=recipe_fingerprint(entry, script_text),
            points=[p.to_json() for p in points],
            requested_by=BOT,
            reason=CANARY_REASON,
            priority=CANARY_PRIORITY,
            slots=slots,
            supersede=False,
        )
    except SweepError as exc:
        row.state, row.reason, row.updated_at = CanaryState.FAILED, str(exc), _now()
        return
    row.state, row.sweep_id, row.branch, row.branch_sha = CanaryState.QUEUED, sweep.id, branch, sha
    row.reason, row.updated_at = f"canary sweep {sweep.id} queued ({row.purpose})", _now()
    report.launched.append(row.tag)
    record(
        session,
        actor=BOT,
        action="canary.queue",
        target=f"{ctx.repo}:{key}",
        detail={"tag": row.tag, "sweep": sweep.id, "purpose": row.purpose, "branch": branch},
    )
    from app.adapters.queue import enqueue

    enqueue("sweepbot.scheduler_tick")


# ------------------------------------------------------------------------------------ analysis


def _series(session: Session, rows: list[NightlyCanary]) -> dict[tuple[str, str], list[tuple[str, float]]]:
    """(result name, metric) -> [(tag, value)] over the measured nightlies, oldest first."""
    measured = [r for r in rows if r.state == CanaryState.MEASURED and r.sweep_id is not None]
    # One recipe per series: a change of the key's recipe (its fingerprint) on the default branch
    # is not a change of the nightlies; the series restarts with the recipe canaries now measure.
    recipes = {
        r.id: session.scalar(select(Sweep.fingerprint).where(Sweep.id == r.sweep_id)) for r in measured
    }
    if measured:
        newest = max(measured, key=lambda r: (_aware(r.measured_at) or _now(), r.id))
        measured = [r for r in measured if recipes[r.id] == recipes[newest.id]]
    out: dict[tuple[str, str], list[tuple[str, float]]] = {}
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


def _analyze(session: Session, gw: Any, ctx: _KeyContext, report: KeyReport, names: set[str]) -> None:
    watch = ctx.cfg.watch_nightlies
    rows = _canaries(session, ctx.repo, ctx.key.config_key)
    series = _series(session, rows)
    if not series:
        report.notes.append("no measured nightly yet")
        return
    analysis = analyze(series, _detector(watch, ctx.repo, ctx.key.config_key))
    if analysis.not_enough_data:
        report.notes.append(analysis.not_enough_data[0])
    nightlies = _nightlies(rows, names)
    regs = list(
        session.scalars(
            select(NightlyRegression).where(
                NightlyRegression.repo == ctx.repo, NightlyRegression.config_key == ctx.key.config_key
            )
        )
    )
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
            match = NightlyRegression(
                repo=ctx.repo,
                config_key=ctx.key.config_key,
                image_repo=ctx.image_repo,
                state=RegressionState.NARROWING,
                last_good_tag=good,
                first_bad_tag=bad,
                series=[],
                bisect_runs=0,
                created_at=_now(),
            )
            session.add(match)
            regs.append(match)
            record(
                session,
                actor=BOT,
                action="nightly.regression_found",
                target=f"{ctx.repo}:{ctx.key.config_key}",
                detail={"last_good": good, "first_bad": bad, "series": len(findings)},
            )
        elif match.state == RegressionState.OPEN and (match.last_good_tag, match.first_bad_tag) != (
            good,
            bad,
        ):
            continue  # the bracket is final once narrowed; noise must not move an open issue
        match.last_good_tag, match.first_bad_tag = good, bad
        match.series = [f.to_json() for f in findings]
        match.updated_at = _now()
    session.flush()
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
                target.state, target.purpose, target.updated_at = CanaryState.PLANNED, "bisect", _now()
                target.reason = f"bisection of regression {reg.id}: {step.reason}"
                reg.bisect_runs += 1
                _launch(session, gw, ctx, target, report)
                nightlies = _nightlies(rows, names)
            elif step.done:
                reg.state = RegressionState.OPEN
                _name_range(gw, ctx, reg, by_tag)
        if reg.state == RegressionState.OPEN:
            _check_recovery(ctx, reg, series, report)
            _tell(session, gw, ctx, reg, series, report)
            report.regressions.append(reg.id)


def _name_range(gw: Any, ctx: _KeyContext, reg: NightlyRegression, by_tag: dict[str, NightlyCanary]) -> None:
    good, bad = by_tag.get(reg.last_good_tag), by_tag.get(reg.first_bad_tag)
    reg.last_good_sha = good.commit_sha if good else None
    reg.first_bad_sha = bad.commit_sha if bad else None
    reg.source_repo = ctx.source_repo
    if not (ctx.source_repo and reg.last_good_sha and reg.first_bad_sha):
        reg.commits, reg.pulls = [], []
        return
    cmp = gw.compare(ctx.source_repo, reg.last_good_sha, reg.first_bad_sha)
    commits = [
        {
            "sha": str(c.get("sha") or ""),
            "title": str((c.get("commit") or {}).get("message") or "").split("\n")[0],
        }
        for c in cmp.get("commits") or []
    ]
    reg.commits = commits
    reg.pulls = pulls_in(commits)
    reg.compare_url = str(cmp.get("html_url") or "") or None


def _worst(reg: NightlyRegression) -> dict[str, Any]:
    return max(reg.series or [{}], key=lambda f: abs(float(f.get("change") or 0.0)))


def _check_recovery(
    ctx: _KeyContext,
    reg: NightlyRegression,
    series: dict[tuple[str, str], list[tuple[str, float]]],
    report: KeyReport,
) -> None:
    if not reg.series:
        return
    tags: list[str] = []
    for f in reg.series:
        points = series.get((str(f["result_name"]), str(f["metric"])), [])
        tag = recovered_at(
            points, reg.first_bad_tag, float(f["before"]), float(f["after"]), min_run=_detector_min_run()
        )
        if tag is None:
            return
        tags.append(tag)
    order = [t for t, _ in next(iter(series.values()))]
    reg.recovered_tag = max(tags, key=lambda t: order.index(t) if t in order else -1)
    reg.state = RegressionState.RECOVERED
    reg.closed_at = reg.updated_at = _now()
    report.notes.append(f"regression {reg.id} recovered in {reg.recovered_tag}")


def _detector_min_run() -> int:
    from app.core.changepoint import DEFAULT_MIN_SIZE

    return DEFAULT_MIN_SIZE


def _pinned_watches(
    session: Session, ctx: _KeyContext, reg: NightlyRegression, order: list[str]
) -> list[Watch]:
    from app.adapters.registry import parse_image

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


def _tell(
    session: Session,
    gw: Any,
    ctx: _KeyContext,
    reg: NightlyRegression,
    series: dict[tuple[str, str], list[tuple[str, float]]],
    report: KeyReport,
) -> None:
    """Create or update the regression's issue (and close it once recovered); note pinned watches."""
    worst = _worst(reg)
    points = series.get((str(worst.get("result_name")), str(worst.get("metric"))), [])
    order = [r.tag for r in _canaries(session, ctx.repo, ctx.key.config_key)]
    watches = _pinned_watches(session, ctx, reg, order) if reg.state == RegressionState.OPEN else []
    view = IssueView(
        repo=ctx.repo,
        config_key=ctx.key.config_key,
        image_repo=ctx.image_repo,
        last_good_tag=reg.last_good_tag,
        first_bad_tag=reg.first_bad_tag,
        findings=reg.series or [],
        chart_points=points,
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
        pulls=reg.pulls or [],
        recovered_tag=reg.recovered_tag,
        watch_notes=[f"{w.repo}#{w.pr_number} `{w.config_key}` pins `{w.pinned_image}`" for w in watches],
    )
    issue_repo = ctx.cfg.watch_nightlies.issue_repo or ctx.repo
    marker = issue_marker(ctx.repo, ctx.key.config_key, reg.first_bad_tag)
    issue = gw.upsert_issue(
        issue_repo, marker, title=issue_title(view), body=render_issue(view), number=reg.issue_number
    )
    created = reg.issue_number is None
    reg.issue_repo, reg.issue_number = issue_repo, int(issue["number"])
    report.issues.append(reg.issue_number)
    if created:
        record(
            session,
            actor=BOT,
            action="nightly.issue_open",
            target=f"{issue_repo}#{reg.issue_number}",
            detail={"regression": reg.id, "first_bad": reg.first_bad_tag},
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
    noted = set(reg.noted_watches or [])
    url = str(issue.get("html_url") or "") or None
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


# ------------------------------------------------------------------------------------ views


def series_view(session: Session, repo: str, key: str) -> dict[str, Any]:
    """The dashboard's nightly-series page data: nightlies, series, regressions, budget."""
    rows = _canaries(session, repo, key)
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
            rows = _canaries(session, repo, nk.config_key)
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
