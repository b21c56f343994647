"""Response models of the dashboard's JSON API (they document it in the OpenAPI schema)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    items: list[T]
    page: int = Field(description="1-based page number")
    per_page: int
    has_next: bool = Field(description="True when another page follows (no COUNT(*) over big tables)")


class HealthPart(BaseModel):
    ok: bool
    error: str | None = None
    seen: dict[str, str] | None = Field(None, description="process name -> last heartbeat (ISO 8601)")


class RateLimit(BaseModel):
    remaining: int | None = None
    limit: int | None = None
    reset_at: datetime | None = None
    fetched_at: datetime | None = None
    stale: bool = Field(
        True, description="older than the refresh interval (a refresh runs in the background)"
    )
    note: str | None = None


class LabelUsage(BaseModel):
    label: str
    capacity: int | None = Field(None, description="runners configured for the label (None: unknown)")
    busy: int = Field(description="runner slots held by dispatched or running jobs")
    free: int | None
    queued: int
    paused: bool
    paused_by: str | None = None


class Failure(BaseModel):
    kind: str = Field(
        description="delivery | job | watch | report | bot_config | publication | pinned_deleted | "
        "registry | dependency | runner_job"
    )
    id: str
    summary: str
    at: datetime | None = None
    link: str


class Budget(BaseModel):
    """The bot's own GitHub budget (app.core.budget): a share of the installation's hourly limit."""

    share: float = Field(
        description="part of the hourly limit the bot may spend (SWEEPBOT_GITHUB_BUDGET_SHARE)"
    )
    mode: str = Field("normal", description="normal | spread | webhooks_only: how the repair poll runs now")
    cap: int | None = Field(None, description="calls the bot may spend in this window")
    spent: int | None = Field(None, description="calls used in this window, as GitHub counts them")
    allowance: int | None = None
    poll_interval_s: float | None = None
    resets_at: datetime | None = None
    last_poll_at: datetime | None = None
    reason: str | None = None


class Overview(BaseModel):
    health: dict[str, HealthPart]
    deliveries_pending: dict[str, int]
    rate_limit: RateLimit
    budget: Budget | None = None
    labels: list[LabelUsage]
    failures: list[Failure]


class DeliveryOut(BaseModel):
    id: str
    event: str
    action: str | None
    repo: str | None
    status: str
    attempts: int
    error: str | None
    body_bytes: int
    received_at: datetime | None
    finished_at: datetime | None


class DeliveryDetail(DeliveryOut):
    payload: Any = Field(description="the stored payload (JSON), or its text when it is not JSON")


class AuditOut(BaseModel):
    id: int
    at: datetime | None
    actor: str  # who made the change (the bot, for every GitHub write)
    caused_by: str | None = None  # whose action led to it, when that is someone else
    action: str
    target: str | None
    outcome: str
    detail: dict[str, Any] | None
    delivery_id: str | None
    sweep: int | None = None  # the sweep the entry is about, when its detail names one


class JobOut(BaseModel):
    id: int
    position: int
    seq: str
    conc: int
    tp: int
    runner_label: str
    state: str
    reason: str | None
    attempts: int
    run_id: int | None
    run_url: str | None
    created_at: datetime | None
    dispatched_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    duration_s: float | None = Field(description="started (or dispatched) to finished, seconds")


class Progress(BaseModel):
    total: int
    finished: int
    by_state: dict[str, int]
    percent: float


class SweepOut(BaseModel):
    id: int
    repo: str
    pr_number: int
    config_key: str
    image: str
    state: str
    state_reason: str | None
    requested_by: str
    reason: str
    priority: int
    created_at: datetime | None
    finished_at: datetime | None
    progress: Progress
    pr_url: str | None = Field(default=None, description="the PR on GitHub (none for a nightly canary)")
    report_url: str | None = Field(default=None, description="the PR's report comment, once posted")
    results_url: str = Field(default="", description="the dashboard's results of the sweep's key and image")


class SweepLinks(BaseModel):
    """Where a sweep is discussed and what it measured (``SweepOut``'s link fields)."""

    pr_url: str | None = None
    report_url: str | None = None
    results_url: str = ""


class SweepDetail(SweepOut):
    head_sha: str
    jobs: list[JobOut]


class DependencyOut(BaseModel):
    ref: str
    state: str = Field(description="open | merged | closed (without merge) | unknown")
    merge_sha: str | None
    title: str | None
    contained_in: str | None = Field(description="the oldest nightly that contains the merge commit")
    dropped: bool
    dropped_by: str | None
    url: str


class BumpOut(BaseModel):
    image: str
    old_image: str | None
    state: str
    mode: str
    commit_sha: str | None
    branch: str | None
    bump_pr_number: int | None
    diff_url: str | None
    created_at: datetime | None


class WatchOut(BaseModel):
    id: int
    repo: str
    pr_number: int
    config_key: str
    state: str
    image_repo: str | None
    pinned_image: str | None
    chosen_tag: str | None = Field(
        description="the nightly chosen for the bump: before a bump the newest containing every "
        "dependency, after one the pinned nightly"
    )
    newest_containing_tag: str | None = Field(
        default=None,
        description="after a bump, a newer nightly that also contains every dependency (not bumped to)",
    )
    first_containing_tag: str | None
    decision: str | None
    reason: str | None
    checked_at: datetime | None
    dependencies: list[DependencyOut]
    bump: BumpOut | None
    why_no_bump: str | None = Field(description="why no bump was made yet (None once bumped)")


class TagOut(BaseModel):
    tag: str
    commit_sha: str | None
    pushed_at: datetime | None
    deleted: bool
    pinned: bool = Field(description="some watch's config key pins this tag")
    chosen: bool = Field(description="some watch chose this tag for its bump (after a bump: the pinned one)")
    newest_containing: bool = Field(
        default=False, description="after a bump, newer and also containing every dependency; not bumped to"
    )


class Timeline(BaseModel):
    image_repo: str
    tags: list[TagOut]


class WatchesOut(BaseModel):
    watches: Page[WatchOut]
    timelines: list[Timeline]


class ResultPoint(BaseModel):
    conc: int
    mean_tpot_ms: float | None
    median_tpot_ms: float | None
    mean_ttft_ms: float | None
    tput_per_gpu: float | None
    interactivity: float | None
    output_tput: float | None
    run_url: str | None


class GapRow(BaseModel):
    conc: int
    recipe: float | None = Field(
        description="mean of the recipe's runs at this conc (the reference's metric)"
    )
    runs: int
    reference: float | None
    gap_pct: float | None = Field(
        description="(recipe - reference) / reference * 100; for latencies positive is slower"
    )
    tolerance_pct: float | None = Field(description="noise band used for the verdict, percent")
    verdict: str = Field(description="behind | matched | ahead | no result | no reference at this conc")


class ImagePoint(BaseModel):
    image: str
    first_at: datetime | None
    conc: int
    mean_tpot_ms: float | None


class AccuracyRowOut(BaseModel):
    task: str
    filter: str = Field(description="lm-eval filter: strict-match, flexible-extract ...")
    conc: int | None
    score: float
    stderr: float | None = Field(description="standard error of the score (None: the file gave none)")
    n: int | None = Field(description="samples scored (n-samples effective)")
    limit: float | None = Field(description="--limit of the eval (None: the whole split)")
    reference: float | None
    diff_pts: float | None = Field(description="(score - reference) in percentage points")
    half_width_pts: float | None = Field(description="95% interval half-width in points")
    verdict: str = Field(description="not worse | worse | not enough data | no reference")
    run_url: str | None = None


class ResultsKeyOut(BaseModel):
    config_key: str
    seq: str | None
    image: str | None = Field(
        description="the image charted: asked for, else the one of the sweep the PR report discusses "
        "(canaries apart), else the newest measured"
    )
    sweep_id: int | None = Field(default=None, description="the sweep whose image is charted by default")
    sweep_pr: str | None = Field(default=None, description="owner/repo#N of that sweep's PR")
    points: list[ResultPoint]
    reference_name: str | None
    reference_source: str | None
    reference_caveat: str | None
    reference_points: list[ResultPoint]
    reference_metric: str | None
    gap: list[GapRow]
    images: list[ImagePoint] = Field(description="mean TPOT per image and conc over time")
    accuracy: list[AccuracyRowOut] = Field(default_factory=list, description="eval scores vs the reference")
    accuracy_source: str | None = None
    accuracy_notes: list[str] = Field(default_factory=list)
    verdict: str | None = Field(default=None, description="the overall line: latency and accuracy")


class KeySummary(BaseModel):
    config_key: str
    results: int
    last_at: datetime | None


class ActionResult(BaseModel):
    ok: bool
    action: str
    target: str
    message: str
