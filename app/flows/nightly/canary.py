"""Nightly watch, the canary side: which key is watched where, and one canary per nightly.

A canary is a branch ``sweepbot/canary/<key>/<tag>`` off the default branch whose one change is
the key's image pin (the benchmark workflow reads the image from the config at the dispatched
ref), and a sweep of the configured points at the canary priority (``reason='canary'``): the
scheduler releases it only onto idle runners, preempts it for real work and keeps it within the
weekly runner-hour budget (``app.core.release_policy``). Finished canary sweeps are folded back
into their nightly's row (``nightly_canaries``) and their branch is deleted.

``app.flows.nightly.watch`` drives the pass; this module holds the reads and writes of one canary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.adapters import queue
from app.adapters.github.errors import Conflict
from app.adapters.registry import parse_image
from app.core.bot_config import BotConfig, NightlyKey
from app.core.dispatchjobs import DispatchJobs, plan_dispatch_jobs
from app.core.recipes import expand_points, parse_master, recipe_fingerprint, set_image
from app.core.recipes.errors import RecipeError
from app.core.recipes.master import get_entry
from app.core.recipes.points import Point
from app.core.recipes.scripts import script_candidates
from app.core.sweepspec import SweepError, group_fields
from app.flows.repo.bench_repo import RepoFiles, callers_of, workflow_prediction_at
from app.flows.repo.recipe_files import locate as _locate
from app.flows.repo.recipe_files import read_master_configs
from app.flows.sweeps.cancel import CancelGateway
from app.flows.sweeps.create import create_sweep
from app.flows.tracking.watches import _image_source
from app.models.nightly import CanaryState, NightlyCanary
from app.models.sweeps import CANARY_PRIORITY, CANARY_REASON, JobState, Sweep, SweepJob, SweepState
from app.settings import get_settings
from app.store.audit import record

log = structlog.get_logger(__name__)

BOT = "sweepbot"
BRANCH_PREFIX = "sweepbot/canary"


class BranchReader(Protocol):
    def get_ref(self, repo: str, ref: str) -> dict[str, Any] | None: ...


class KeyGateway(RepoFiles, BranchReader, Protocol):
    """Reading a key's context: the default branch's head and its master configs."""


class BranchDropper(BranchReader, Protocol):
    """Deleting a finished canary's branch (after looking that nobody pushed to it)."""

    def delete_ref(self, repo: str, ref: str) -> None: ...


class CanaryBranchWriter(BranchReader, Protocol):
    """The Git Data API writes of a canary branch (blob -> tree -> commit -> ref)."""

    def get_commit(self, repo: str, sha: str) -> dict[str, Any]: ...
    def create_blob(self, repo: str, text: str) -> str: ...
    def create_tree(self, repo: str, base_tree: str, files: dict[str, str]) -> str: ...
    def create_commit(self, repo: str, message: str, tree: str, parents: list[str]) -> dict[str, Any]: ...
    def create_ref(self, repo: str, ref: str, sha: str) -> dict[str, Any]: ...


class ScriptReader(Protocol):
    def get_file(self, repo: str, path: str, ref: str | None = None) -> tuple[str, str] | None: ...


class LaunchGateway(CanaryBranchWriter, ScriptReader, CancelGateway, Protocol):
    """Launching a canary: its branch, the recipe's script (its fingerprint), and its sweep
    (storing one may cancel a superseded sweep's runs)."""


class CanaryGateway(KeyGateway, BranchDropper, LaunchGateway, Protocol):
    """Everything the canary side of a pass touches."""


def now() -> datetime:
    return datetime.now(UTC)


def aware(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


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


@dataclass
class KeyContext:
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


def key_context(gw: KeyGateway, repo: str, cfg: BotConfig, nk: NightlyKey) -> KeyContext:
    """The key's recipe on the default branch, its image repository and that image's source repo."""
    default_branch = str(gw.get_repo(repo).get("default_branch") or "main")
    ref = gw.get_ref(repo, f"heads/{default_branch}")
    if ref is None:
        raise ValueError(f"{repo} has no branch {default_branch}")
    head_sha = str(ref["object"]["sha"])
    files = read_master_configs(gw, repo, head_sha, cfg.bump.config_dirs)
    path = _locate(files, nk.config_key)
    entry = get_entry(parse_master(files[path]), nk.config_key)
    image = str(entry.get("image") or "")
    image_repo = parse_image(image).image_repo
    pattern, _kind, _url, source_repo = _image_source(cfg, image_repo)
    return KeyContext(
        repo, nk, cfg, default_branch, head_sha, path, files[path], image_repo, pattern, source_repo
    )


def canaries(session: Session, repo: str, key: str) -> list[NightlyCanary]:
    """The key's nightlies, oldest first (push time, then registry order)."""
    rows = list(
        session.scalars(
            select(NightlyCanary).where(NightlyCanary.repo == repo, NightlyCanary.config_key == key)
        )
    )

    def order(r: NightlyCanary) -> tuple[float, int, int]:
        pushed = aware(r.pushed_at)
        return (pushed.timestamp() if pushed else 0.0, r.tag_seq, r.id)

    return sorted(rows, key=order)


def fold_sweeps(
    session: Session, gw: BranchDropper, repo: str, rows: list[NightlyCanary], report: KeyReport
) -> None:
    """Finished canary sweeps into their nightly's row: measured, or failed with why."""
    for row in rows:
        if row.state != CanaryState.QUEUED or row.sweep_id is None:
            continue
        sweep = session.get(Sweep, row.sweep_id)
        if sweep is None or sweep.state in (SweepState.CANCELLED, SweepState.SUPERSEDED):
            row.state, row.reason, row.updated_at = (
                CanaryState.FAILED,
                "the canary sweep was cancelled",
                now(),
            )
            continue
        if sweep.state != SweepState.DONE:
            continue
        jobs = list(session.scalars(select(SweepJob).where(SweepJob.sweep_id == sweep.id)))
        bad = [j for j in jobs if j.state not in (JobState.SUCCEEDED, JobState.REUSED)]
        at = now()
        if bad:
            row.state = CanaryState.FAILED
            row.reason = f"{len(bad)} of {len(jobs)} point(s) failed: " + "; ".join(
                f"{j.result_name}: {j.reason or j.state}" for j in bad[:3]
            )
        else:
            row.state, row.reason, row.measured_at = CanaryState.MEASURED, "every point measured", at
            report.measured.append(row.tag)
        row.updated_at = at
        drop_branch(gw, repo, row)


def drop_branch(gw: BranchDropper, repo: str, row: NightlyCanary) -> None:
    """The canary branch served its runs: delete it, unless someone pushed to it since."""
    if not row.branch:
        return
    ref = gw.get_ref(repo, f"heads/{row.branch}")
    if ref is not None and str((ref.get("object") or {}).get("sha") or "") == row.branch_sha:
        gw.delete_ref(repo, f"heads/{row.branch}")


def _canary_branch(
    gw: CanaryBranchWriter, ctx: KeyContext, row: NightlyCanary, branch: str, text: str
) -> str:
    """The canary branch's head: adopted when an earlier attempt made it, else one commit made now."""
    existing = gw.get_ref(ctx.repo, f"heads/{branch}")
    if existing is not None:  # made by an earlier attempt whose transaction was lost: adopt it
        return str(existing["object"]["sha"])
    key = ctx.key.config_key
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
    return sha


def _script_text(gw: ScriptReader, repo: str, entry: dict[str, Any], sha: str) -> str | None:
    for candidate in script_candidates(entry):
        got = gw.get_file(repo, candidate, ref=sha)
        if got is not None:
            return str(got[0])
    return None


def _matrix(master: Any, key: str, points: list[Point], unexpanded: frozenset[str]) -> DispatchJobs:
    """What the canary's dispatches hold (app.core.dispatchjobs), as a sweep's."""
    rows, fields = [p.to_json() for p in points], group_fields(get_settings())
    return plan_dispatch_jobs(master, key, rows, fields, unexpanded=unexpanded)


def launch(
    session: Session, gw: LaunchGateway, ctx: KeyContext, row: NightlyCanary, report: KeyReport
) -> None:
    """The canary branch (pin edit only) and its sweep at the canary priority."""
    key = ctx.key.config_key
    branch = f"{BRANCH_PREFIX}/{key}/{row.tag}"
    try:
        text = set_image(ctx.master_text, key, row.image)
        master = parse_master(text)
        entry = get_entry(master, key)
        points = expand_points(master, key, seq=ctx.key.seq, conc=list(ctx.key.conc))
    except RecipeError as exc:
        row.state, row.reason, row.updated_at = CanaryState.FAILED, f"cannot plan the canary: {exc}", now()
        return
    if not points:
        row.state, row.updated_at = CanaryState.FAILED, now()
        row.reason = f"conc {ctx.key.conc} matches none of {key}'s points: fix watch-nightlies in {ctx.repo}"
        return
    sha = _canary_branch(gw, ctx, row, branch, text)
    prediction = workflow_prediction_at(gw, ctx.repo, sha)
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
            fingerprint=recipe_fingerprint(entry, _script_text(gw, ctx.repo, entry, sha)),
            points=[p.to_json() for p in points],
            requested_by=BOT,
            reason=CANARY_REASON,
            priority=CANARY_PRIORITY,
            matrix=_matrix(master, key, points, callers_of(prediction)),
            supersede=False,
            unexpanded=prediction,
        )
    except SweepError as exc:
        row.state, row.reason, row.updated_at = CanaryState.FAILED, str(exc), now()
        return
    row.state, row.sweep_id, row.branch, row.branch_sha = CanaryState.QUEUED, sweep.id, branch, sha
    row.reason, row.updated_at = f"canary sweep {sweep.id} queued ({row.purpose})", now()
    report.launched.append(row.tag)
    record(
        session,
        actor=BOT,
        action="canary.queue",
        target=f"{ctx.repo}:{key}",
        detail={"tag": row.tag, "sweep": sweep.id, "purpose": row.purpose, "branch": branch},
    )
    queue.enqueue("sweepbot.scheduler_tick")
