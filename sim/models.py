"""The simulator's objects (users, repos, pulls, runs, jobs, deliveries ...) and the events the world emits.

Plain data: the rules that change them live in the `sim/world_*.py` resource modules, which
`sim.world.World` puts together.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sim.gitgraph import ObjectStore

PERMISSIONS = ("admin", "maintain", "write", "triage", "read", "none")
REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")
EPOCH = 1782864000  # 2026-07-01T00:00:00Z: base of the deterministic git clock


class SimError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        errors: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors
        self.headers = headers or {}


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class SimSettings:
    seed: int = 0
    time_scale: float = 1.0  # real seconds per simulated second (0.0005 in tests)
    default_token: str = "sim-token"
    default_token_user: str = "sweepbot[bot]"
    rate_limit: int = 5000
    base_url: str = "http://127.0.0.1"  # replaced by SimServer with the bound URL
    webhook_url: str | None = None
    webhook_secret: str = "sim-webhook-secret"
    # GitHub never retries a failed delivery (it records it; an integrator may ask for a
    # redelivery through the hook-deliveries API): one attempt, like GitHub. >1 only for tests.
    webhook_retries: int = 1
    webhook_timeout: float = 5.0
    installation_token_ttl: float = 3600.0  # real seconds an installation token lives (GitHub: 1 h)


@dataclass
class User:
    login: str
    id: int
    type: str = "User"  # "User" | "Bot" | "Organization"
    name: str | None = None
    email: str | None = None


@dataclass
class Reaction:
    id: int
    user: str
    content: str
    created_at: float


@dataclass
class Comment:
    id: int
    issue_number: int
    user: str
    body: str
    created_at: float
    updated_at: float
    reactions: list[Reaction] = field(default_factory=list)


@dataclass
class Pull:
    number: int
    id: int
    title: str
    body: str
    user: str
    head_repo: str  # full name of the repo holding the head branch
    head_ref: str
    base_ref: str
    created_at: float
    updated_at: float
    state: str = "open"
    merged: bool = False
    merged_at: float | None = None
    merged_by: str | None = None
    merge_commit_sha: str | None = None
    closed_at: float | None = None
    head_sha_frozen: str | None = None  # head sha at close/merge (the branch may move or vanish)
    labels: list[str] = field(default_factory=list)
    head_repo_deleted: bool = False  # the fork the head lived in was deleted: head.repo is null
    mergeable_at: float = 0.0  # monotonic time GitHub's background mergeability job finishes


@dataclass
class Issue:
    """A plain issue (pull requests live in ``Repo.pulls``; both share the repo's numbers)."""

    number: int
    id: int
    title: str
    body: str
    user: str
    created_at: float
    updated_at: float
    state: str = "open"  # open | closed
    state_reason: str | None = None  # completed | not_planned | reopened
    closed_at: float | None = None
    labels: list[str] = field(default_factory=list)


@dataclass
class Workflow:
    id: int
    path: str
    name: str


@dataclass
class Job:
    id: int
    run_id: int
    name: str
    label: str
    point: dict[str, Any]
    created_at: float
    status: str = "queued"  # queued | in_progress | completed
    conclusion: str | None = None
    started_at: float | None = None
    completed_at: float | None = None
    runner_name: str | None = None
    runner_id: int | None = None
    ends_at_real: float | None = None  # monotonic deadline while running
    fate: str = "success"  # success | benchmark_failure | runner_lost
    labels: list[str] = field(default_factory=list)  # runs-on (sim.world_runners); [] -> [label]
    created_mono: float = field(default_factory=time.monotonic)
    steps: list[dict[str, Any]] = field(default_factory=list)
    annotations: list[dict[str, Any]] = field(default_factory=list)  # its check run's annotations


@dataclass
class Artifact:
    id: int
    run_id: int
    name: str
    data: bytes
    created_at: float


@dataclass
class Run:
    id: int
    repo: str
    workflow_id: int
    name: str
    head_branch: str
    head_sha: str
    actor: str
    inputs: dict[str, Any]
    created_at: float
    updated_at: float
    run_number: int
    status: str = "queued"  # queued | in_progress | completed
    conclusion: str | None = None
    run_started_at: float | None = None
    jobs: list[int] = field(default_factory=list)
    error: str | None = None
    event: str = "workflow_dispatch"  # or "pull_request" (run-sweep.yml started by the repo)
    pr_number: int | None = None


@dataclass
class Repo:
    id: int
    owner: str
    name: str
    default_branch: str = "main"
    private: bool = False
    description: str | None = None
    objects: ObjectStore = field(default_factory=ObjectStore)
    refs: dict[str, str] = field(default_factory=dict)  # "refs/heads/main" -> sha
    pulls: dict[int, Pull] = field(default_factory=dict)
    issues: dict[int, Issue] = field(default_factory=dict)
    deleted_issues: set[int] = field(default_factory=set)  # GitHub answers their numbers 410 Gone
    next_number: int = 1
    comments: dict[int, Comment] = field(default_factory=dict)
    collaborators: dict[str, str] = field(default_factory=dict)
    workflows: dict[str, Workflow] = field(default_factory=dict)
    installation_id: int | None = None
    created_at: float = 0.0
    pushed_at: float = 0.0
    ref_visible_at: dict[str, float] = field(default_factory=dict)  # just-created ref -> monotonic

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass
class Tag:
    name: str
    digest: str
    pushed_at: float
    seq: int


@dataclass
class ImageRepo:
    name: str  # "vllm/vllm-openai-rocm"
    tags: dict[str, Tag] = field(default_factory=dict)
    keep_nightlies: int | None = None  # retention: keep the newest N tags matching nightly-*


@dataclass
class Runner:
    id: int
    name: str
    label: str
    busy_job: int | None = None
    status: str = "online"  # online | offline
    extra_labels: list[str] = field(default_factory=list)  # e.g. cluster:<pool> (sim.world_runners)
    custom_labels: list[str] = field(default_factory=list)  # added through the runners API

    @property
    def idle(self) -> bool:
        return self.busy_job is None and self.status == "online"


@dataclass
class App:
    id: int
    slug: str
    name: str
    owner: str
    public_key_pem: str


@dataclass
class Installation:
    id: int
    app_id: int
    account: str
    repos: list[str]
    created_at: float


@dataclass
class TokenInfo:
    token: str
    login: str | None = None  # user token
    installation_id: int | None = None  # installation token
    expires_at: float | None = None

    @property
    def budget_key(self) -> str:
        return f"inst:{self.installation_id}" if self.installation_id else f"user:{self.login}"


@dataclass
class Budget:
    limit: int
    used: int = 0
    reset: float = 0.0


@dataclass
class Faults:
    # per operation id (or "*"): list of pending statuses to answer instead of the real one
    fail_next: dict[str, list[int]] = field(default_factory=dict)
    secondary_limit_next: dict[str, int] = field(default_factory=dict)
    retry_after: int = 60
    latency_ms: dict[str, int] = field(default_factory=dict)
    dispatch_ignore_run_details: bool = False
    runner_lost_next: int = 0
    benchmark_fail_next: int = 0
    queue_delay_s: float = 0.0  # simulated seconds a job waits after a runner frees up
    mergeable_delay_s: float = 5.0  # simulated seconds GitHub takes to compute `mergeable`
    retry_after_header: bool = True  # False: a secondary limit answers without Retry-After
    ref_lag_s: float = 0.0  # simulated seconds a just-created ref stays invisible to reads/PRs
    forbid_permission_check: bool = False  # the permission call answers 403 for everyone
    trigger_ingest_fail: bool = False  # the next push-to-main run's trigger-ingest job fails


@dataclass
class Delivery:
    id: int
    guid: str
    event: str
    action: str | None
    payload: dict[str, Any]
    created_at: float
    status: str = "pending"  # pending | delivered | failed | dropped | no-url
    attempts: int = 0
    response_status: int | None = None
    redelivery: bool = False
    duplicate_of: str | None = None
    error: str | None = None
    delivered_at: float | None = None
    duration: float = 0.0
    installation_id: int | None = None
    repository_id: int | None = None

    @property
    def status_text(self) -> str:
        """The hook-deliveries API's ``status``: ``OK``, or what went wrong (GitHub's wording)."""
        if self.status == "delivered":
            return "OK"
        if self.response_status:
            return f"Invalid HTTP Response: {self.response_status}"
        return "failed to connect to host"


@dataclass(frozen=True)
class Event:
    """Something happened that GitHub would send a webhook for (and a workflow may be triggered by).

    ``name`` is the webhook event (``pull_request``, ``issue_comment``, ``push``, ``workflow_run``,
    ``workflow_job``); ``subject`` the object it is about (a Pull, Comment, Run or Job; None for a
    push); ``extra`` what the payload carries besides (``before``/``after``/``label``/``changes``,
    a push's ``ref``/``forced``).
    """

    name: str
    action: str | None
    repo: Repo
    sender: str
    subject: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
