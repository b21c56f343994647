"""The simulator's in-memory state and the rules that change it.

Every mutation goes through a `World` method holding `world.lock`, so the HTTP layer, the
actions engine thread and the scenario driver can act concurrently. Methods raise `SimError`
(carrying an HTTP status and a GitHub-style message) when GitHub would refuse the operation.
"""

from __future__ import annotations

import base64
import hashlib
import io
import itertools
import json
import threading
import time
import uuid
import zipfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sim import perf
from sim.gitgraph import GitError, ObjectStore, Signature, compare

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


class World:
    def __init__(self, settings: SimSettings | None = None) -> None:
        self.settings = settings or SimSettings()
        self.lock = threading.RLock()
        self._ids = itertools.count(1001)
        self._git_clock = EPOCH
        self.users: dict[str, User] = {}
        self.tokens: dict[str, TokenInfo] = {}
        self.budgets: dict[str, Budget] = {}
        self.repos: dict[str, Repo] = {}
        self.orgs: dict[str, dict[str, Any]] = {}
        self.apps: dict[int, App] = {}
        self.installations: dict[int, Installation] = {}
        self.images: dict[str, ImageRepo] = {}
        self._tag_seq = itertools.count(1)
        self.runners: dict[str, list[Runner]] = {}
        self.runner_nodes: dict[str, list[str]] = {}  # label -> node names (runners.yaml `labels:`)
        self.recipe_suffix = False  # jobs carry a `recipe-fingerprint` (`_recipe-<16 hex>` names)
        # Evals: the workflow's `eval-limit` input (None: the whole split) and per-framework
        # accuracy overrides (filter -> probability; defaults in sim.perf.ENGINE_ACCURACY).
        self.eval_limit: int | None = None
        self.eval_accuracy: dict[str, dict[str, float]] = {}
        self.runs: dict[int, Run] = {}
        self.sweep_decisions: list[dict[str, Any]] = []  # every run-sweep.yml trigger and its outcome
        self.jobs: dict[int, Job] = {}
        self.artifacts: dict[int, Artifact] = {}
        self._run_numbers: Counter[str] = Counter()
        self.faults = Faults()
        self.deliveries: list[Delivery] = []
        self.drop_next_deliveries = 0
        self.duplicate_deliveries = False
        self.hook_id = 424242
        self.custom_roles: dict[str, str] = {}  # custom repository role name -> base role
        # every authenticated REST call: who made it with which token (a test reads it)
        self.requests: list[dict[str, Any]] = []
        self.calls: Counter[tuple[str, int, str]] = Counter()
        self.oauth_codes: dict[str, str] = {}
        self.oauth_default_user: str | None = None
        self.oauth_clients: dict[str, str] = {}
        self.registry_tokens: set[str] = set()
        self._wakeups: list[threading.Event] = []
        self.scenario: Any = None  # a sim.scenario.SeedScenario once loaded
        self.nightly_story: Any = None  # a sim.nightly_scenario.NightlyRegressionStory once loaded
        self.regressions: list[perf.Regression] = []  # injected upstream performance changes
        self.add_user(self.settings.default_token_user, type="Bot")
        self.add_token(self.settings.default_token, login=self.settings.default_token_user)

    # -- ids, clocks -------------------------------------------------------------------------------
    def next_id(self) -> int:
        return next(self._ids)

    def now(self) -> float:
        return time.time()

    def git_now(self) -> int:
        """Deterministic commit timestamps, so the same script yields the same SHAs."""
        self._git_clock += 60
        return self._git_clock

    def add_wakeup(self, ev: threading.Event) -> None:
        self._wakeups.append(ev)

    def _wake(self) -> None:
        for ev in self._wakeups:
            ev.set()

    # -- users, tokens, orgs, apps -----------------------------------------------------------------
    def add_user(
        self, login: str, type: str = "User", name: str | None = None, email: str | None = None
    ) -> User:
        with self.lock:
            if login in self.users:
                return self.users[login]
            u = User(login, self.next_id(), type, name or login, email or f"{login}@users.sim")
            self.users[login] = u
            return u

    def user(self, login: str) -> User:
        u = self.users.get(login)
        if u is None:
            raise SimError(404, f"user {login!r} not found")
        return u

    def add_token(
        self,
        token: str,
        login: str | None = None,
        installation_id: int | None = None,
        expires_at: float | None = None,
    ) -> TokenInfo:
        with self.lock:
            if login is not None:
                self.add_user(login)
            info = TokenInfo(token, login, installation_id, expires_at)
            self.tokens[token] = info
            return info

    def add_org(self, org: str) -> None:
        with self.lock:
            self.add_user(org, type="Organization")
            self.orgs.setdefault(org, {"members": set(), "teams": {}})

    def add_org_member(self, org: str, login: str, team: str | None = None, role: str = "member") -> None:
        with self.lock:
            self.add_org(org)
            self.add_user(login)
            self.orgs[org]["members"].add(login)
            if team:
                self.orgs[org]["teams"].setdefault(team, {})[login] = role

    def add_app(self, app_id: int, slug: str, public_key_pem: str, owner: str) -> App:
        with self.lock:
            app = App(app_id, slug, slug, owner, public_key_pem)
            self.apps[app_id] = app
            self.add_user(f"{slug}[bot]", type="Bot")
            return app

    def add_installation(
        self, app_id: int, account: str, repos: list[str], installation_id: int | None = None
    ) -> Installation:
        with self.lock:
            if app_id not in self.apps:
                raise SimError(404, f"app {app_id} not registered")
            inst = Installation(installation_id or self.next_id(), app_id, account, list(repos), self.now())
            self.installations[inst.id] = inst
            for r in repos:
                if r in self.repos:
                    self.repos[r].installation_id = inst.id
            return inst

    def issue_installation_token(self, installation_id: int) -> TokenInfo:
        with self.lock:
            if installation_id not in self.installations:
                raise SimError(404, "Not Found")
            token = "ghs_" + hashlib.sha256(f"{installation_id}:{uuid.uuid4()}".encode()).hexdigest()[:36]
            expires = self.now() + self.settings.installation_token_ttl
            return self.add_token(token, installation_id=installation_id, expires_at=expires)

    def budget(self, key: str) -> Budget:
        b = self.budgets.get(key)
        now = self.now()
        if b is None or now >= b.reset:
            limit = self.settings.rate_limit if not key.startswith("anon:") else 60
            b = Budget(limit, 0, now + 3600)
            self.budgets[key] = b
        return b

    # -- repos and git -----------------------------------------------------------------------------
    def add_repo(
        self,
        full_name: str,
        default_branch: str = "main",
        private: bool = False,
        description: str | None = None,
    ) -> Repo:
        with self.lock:
            if full_name in self.repos:
                return self.repos[full_name]
            owner, _, name = full_name.partition("/")
            if not owner or not name:
                raise SimError(422, f"repository name must be owner/name, got {full_name!r}")
            if owner not in self.users:
                self.add_user(owner, type="Organization")
            repo = Repo(
                self.next_id(), owner, name, default_branch, private, description, created_at=self.now()
            )
            self.repos[full_name] = repo
            for inst in self.installations.values():
                if full_name in inst.repos:
                    repo.installation_id = inst.id
            return repo

    def repo(self, full_name: str) -> Repo:
        r = self.repos.get(full_name)
        if r is None:
            raise SimError(404, "Not Found")
        return r

    def signature(self, login: str) -> Signature:
        u = self.add_user(login)
        return Signature(u.name or login, u.email or f"{login}@users.sim", self.git_now())

    def commit_files(
        self,
        full_name: str,
        branch: str,
        files: Mapping[str, str | bytes | None],
        message: str,
        author: str = "sim",
        emit_push: bool = True,
    ) -> str:
        """Commit on top of `branch` (created from nothing if absent); a value None deletes."""
        with self.lock:
            repo = self.repo(full_name)
            ref = f"refs/heads/{branch}"
            parent = repo.refs.get(ref)
            current: dict[str, tuple[str, str]] = {}
            if parent:
                current = repo.objects.flatten(repo.objects.commits[parent].tree)
            for path, content in files.items():
                path = path.strip("/")
                if content is None:
                    current.pop(path, None)
                    continue
                data = content.encode() if isinstance(content, str) else content
                current[path] = ("100644", repo.objects.put_blob(data))
            tree = repo.objects.build_tree(current)
            sig = self.signature(author)
            sha = repo.objects.put_commit(tree, [parent] if parent else [], sig, sig, message)
            self.set_ref(full_name, ref, sha, force=True, pusher=author, emit_push=emit_push)
            return sha

    def set_ref(
        self,
        full_name: str,
        ref: str,
        sha: str,
        force: bool = False,
        pusher: str | None = None,
        emit_push: bool = True,
        create: bool = False,
    ) -> None:
        with self.lock:
            repo = self.repo(full_name)
            if sha not in repo.objects.commits:
                raise SimError(422, "Object does not exist")
            old = repo.refs.get(ref)
            if create and old is not None:
                raise SimError(422, "Reference already exists")
            if old is not None and not force and old != sha and old not in repo.objects.ancestors(sha):
                raise SimError(422, "Update is not a fast forward")
            repo.refs[ref] = sha
            repo.pushed_at = self.now()
            if emit_push and old != sha:
                self._emit_push(repo, ref, old, sha, pusher or self.settings.default_token_user, force)
            if ref.startswith("refs/heads/"):
                self._on_branch_moved(repo, ref[len("refs/heads/") :], old, sha)

    def delete_ref(self, full_name: str, ref: str) -> None:
        with self.lock:
            repo = self.repo(full_name)
            if ref not in repo.refs:
                raise SimError(422, "Reference does not exist")
            del repo.refs[ref]

    def resolve(self, repo: Repo, ref: str | None) -> str:
        """Resolve a branch name, full ref, tag or commit sha to a commit sha."""
        ref = ref or repo.default_branch
        for cand in (ref, f"refs/heads/{ref}", f"refs/tags/{ref}"):
            if cand in repo.refs:
                return repo.refs[cand]
        if len(ref) >= 7:
            matches = [c for c in repo.objects.commits if c.startswith(ref)]
            if len(matches) == 1:
                return matches[0]
        raise SimError(404, f"No commit found for the ref {ref}")

    def read_file(self, full_name: str, path: str, ref: str | None = None) -> bytes | None:
        with self.lock:
            repo = self.repo(full_name)
            sha = self.resolve(repo, ref)
            entry = repo.objects.lookup(repo.objects.commits[sha].tree, path)
            if entry is None or entry.type != "blob":
                return None
            return repo.objects.blobs[entry.sha]

    def compare(self, full_name: str, base: str, head: str) -> Any:
        with self.lock:
            repo = self.repo(full_name)
            b, h = self.resolve(repo, base), self.resolve(repo, head)
            try:
                return b, h, compare(repo.objects, b, h)
            except (GitError, KeyError) as exc:
                raise SimError(404, f"Not Found: {exc}") from exc

    # -- permissions -------------------------------------------------------------------------------
    def add_custom_role(self, name: str, base_role: str) -> None:
        """An organisation's custom repository role, inheriting ``base_role``'s permissions."""
        if base_role not in PERMISSIONS[:-1]:
            raise SimError(422, f"base_role must be one of {', '.join(PERMISSIONS[:-1])}")
        with self.lock:
            self.custom_roles[name] = base_role

    def base_role(self, role: str) -> str:
        return self.custom_roles.get(role, role)

    def set_permission(self, full_name: str, login: str, permission: str) -> None:
        if permission not in PERMISSIONS and permission not in self.custom_roles:
            raise SimError(
                422, f"permission must be one of {', '.join(PERMISSIONS)} or a custom role added first"
            )
        with self.lock:
            self.add_user(login)
            self.repo(full_name).collaborators[login] = permission

    def role(self, full_name: str, login: str) -> str:
        """The assigned role, a custom role's own name included (the API's ``role_name``)."""
        with self.lock:
            repo = self.repo(full_name)
            if login == repo.owner:
                return "admin"
            return repo.collaborators.get(login, "read" if not repo.private else "none")

    def permission(self, full_name: str, login: str) -> str:
        """The base role (a custom role resolves to the role it inherits)."""
        return self.base_role(self.role(full_name, login))

    def ref_visible(self, repo: Repo, ref: str) -> bool:
        """False while a just-created ref is still invisible (eventual consistency)."""
        until = repo.ref_visible_at.get(ref)
        if until is None:
            return True
        if time.monotonic() >= until:
            repo.ref_visible_at.pop(ref, None)
            return True
        return False

    def delete_repo(self, full_name: str) -> None:
        """Delete a repository (a fork): its open PRs elsewhere keep their head, with no repo."""
        with self.lock:
            repo = self.repo(full_name)
            for other in self.repos.values():
                if other is repo:
                    continue
                for pr in other.pulls.values():
                    if pr.head_repo != full_name:
                        continue
                    # GitHub keeps the head commits in the base repository (refs/pull/N/head).
                    pr.head_sha_frozen = self.pull_head_sha(pr)
                    other.objects.commits.update(repo.objects.commits)
                    other.objects.trees.update(repo.objects.trees)
                    other.objects.blobs.update(repo.objects.blobs)
                    pr.head_repo_deleted = True
            del self.repos[full_name]

    # -- pulls -------------------------------------------------------------------------------------
    def _take_number(self, repo: Repo, number: int | None) -> int:
        if number is None:
            number = repo.next_number
        if number in repo.pulls or number in repo.issues:
            raise SimError(422, f"number {number} is already used in {repo.full_name}")
        repo.next_number = max(repo.next_number, number + 1)
        return number

    def open_pull(
        self,
        full_name: str,
        head: str,
        base: str,
        title: str,
        body: str = "",
        user: str | None = None,
        number: int | None = None,
        head_repo: str | None = None,
    ) -> Pull:
        with self.lock:
            repo = self.repo(full_name)
            user = user or self.settings.default_token_user
            self.add_user(user)
            if ":" in head:
                owner, _, head = head.partition(":")
                if head_repo is None:
                    head_repo = next(
                        (
                            r.full_name
                            for r in self.repos.values()
                            if r.owner == owner and r.name == repo.name
                        ),
                        full_name,
                    )
            head_repo = head_repo or full_name
            hrepo = self.repo(head_repo)
            if f"refs/heads/{head}" not in hrepo.refs:
                raise SimError(
                    422,
                    "Validation Failed",
                    [{"resource": "PullRequest", "field": "head", "code": "invalid"}],
                )
            if f"refs/heads/{base}" not in repo.refs:
                raise SimError(
                    422,
                    "Validation Failed",
                    [{"resource": "PullRequest", "field": "base", "code": "invalid"}],
                )
            for p in repo.pulls.values():
                if (
                    p.state == "open"
                    and p.head_ref == head
                    and p.head_repo == head_repo
                    and p.base_ref == base
                ):
                    raise SimError(422, f"A pull request already exists for {hrepo.owner}:{head}.")
            n = self._take_number(repo, number)
            now = self.now()
            pr = Pull(n, self.next_id(), title, body, user, head_repo, head, base, now, now)
            self._recompute_mergeable(pr)
            repo.pulls[n] = pr
            self.emit_pull_request(repo, pr, "opened", sender=user)
            return pr

    def _recompute_mergeable(self, pr: Pull) -> None:
        pr.mergeable_at = time.monotonic() + self.faults.mergeable_delay_s * self.settings.time_scale

    def mergeable(self, pr: Pull) -> bool | None:
        """null while GitHub's background job computes it (after opening, after each push)."""
        if pr.state != "open" or time.monotonic() < pr.mergeable_at:
            return None
        return True

    def pull(self, full_name: str, number: int) -> Pull:
        pr = self.repo(full_name).pulls.get(number)
        if pr is None:
            raise SimError(404, "Not Found")
        return pr

    def pull_head_sha(self, pr: Pull) -> str:
        if pr.head_sha_frozen and (pr.state != "open" or pr.head_repo_deleted):
            return pr.head_sha_frozen
        hrepo = self.repos.get(pr.head_repo)
        sha = hrepo.refs.get(f"refs/heads/{pr.head_ref}") if hrepo else None
        return sha or pr.head_sha_frozen or ""

    def pull_base_sha(self, pr: Pull) -> str:
        return self.repo_base_sha(pr)

    def repo_base_sha(self, pr: Pull) -> str:
        for repo in self.repos.values():
            if pr in repo.pulls.values():
                return repo.refs.get(f"refs/heads/{pr.base_ref}", "")
        return ""

    def merge_pull(
        self,
        full_name: str,
        number: int,
        merger: str | None = None,
        commit_title: str | None = None,
        sha: str | None = None,
    ) -> str:
        with self.lock:
            repo = self.repo(full_name)
            pr = self.pull(full_name, number)
            merger = merger or self.settings.default_token_user
            if pr.state != "open":
                raise SimError(405, "Pull Request is not mergeable")
            head_sha = self.pull_head_sha(pr)
            if sha and sha != head_sha:
                raise SimError(409, "Head branch was modified. Review and try the merge again.")
            hrepo = self.repo(pr.head_repo)
            # bring the head's objects over when the head lives in a fork
            if hrepo is not repo:
                for c in hrepo.objects.ancestors(head_sha):
                    if c not in repo.objects.commits:
                        repo.objects.commits[c] = hrepo.objects.commits[c]
                repo.objects.blobs.update(hrepo.objects.blobs)
                repo.objects.trees.update(hrepo.objects.trees)
            base_ref = f"refs/heads/{pr.base_ref}"
            base_sha = repo.refs[base_ref]
            cmp = compare(repo.objects, base_sha, head_sha)
            base_files = repo.objects.flatten(repo.objects.commits[base_sha].tree)
            head_files = repo.objects.flatten(repo.objects.commits[head_sha].tree)
            if cmp.merge_base is None:
                raise SimError(405, "Pull Request is not mergeable")
            mb_files = repo.objects.flatten(repo.objects.commits[cmp.merge_base].tree)
            merged_files = dict(base_files)
            for path in set(head_files) | set(mb_files):
                h, m, b = head_files.get(path), mb_files.get(path), base_files.get(path)
                if h == m:
                    continue
                if b != m and b != h:
                    raise SimError(405, "Pull Request is not mergeable (merge conflict)")
                if h is None:
                    merged_files.pop(path, None)
                else:
                    merged_files[path] = h
            tree = repo.objects.build_tree(merged_files)
            sig = self.signature(merger)
            title = commit_title or f"Merge pull request #{number} from {hrepo.owner}/{pr.head_ref}"
            merge_sha = repo.objects.put_commit(
                tree, [base_sha, head_sha], sig, sig, f"{title}\n\n{pr.title}"
            )
            now = self.now()
            pr.state, pr.merged, pr.merged_at, pr.merged_by = "closed", True, now, merger
            pr.merge_commit_sha, pr.closed_at, pr.updated_at, pr.head_sha_frozen = (
                merge_sha,
                now,
                now,
                head_sha,
            )
            self.set_ref(full_name, base_ref, merge_sha, pusher=merger)
            self.emit_pull_request(repo, pr, "closed", sender=merger)
            return merge_sha

    def pulls_with_commit(self, full_name: str, sha: str) -> list[Pull]:
        """GitHub's commit -> pulls answer: for a commit on the default branch, the merged PR that
        introduced it (its merge commit, or a commit of its branch); for any other commit, the open
        and merged PRs whose head contains it."""
        with self.lock:
            repo = self.repo(full_name)
            main = repo.refs.get(f"refs/heads/{repo.default_branch}")
            on_default = bool(main) and sha in repo.objects.ancestors(str(main))
            out: list[Pull] = []
            for pr in sorted(repo.pulls.values(), key=lambda x: x.number):
                if on_default and not pr.merged:
                    continue
                if pr.merge_commit_sha == sha:
                    out.append(pr)
                    continue
                head = self.pull_head_sha(pr)
                if not head or head not in repo.objects.commits:
                    continue
                if pr.merged and pr.merge_commit_sha in repo.objects.commits:
                    base = repo.objects.commits[str(pr.merge_commit_sha)].parents[0]
                else:
                    base = repo.refs.get(f"refs/heads/{pr.base_ref}", "")
                below = repo.objects.ancestors(base) if base in repo.objects.commits else set()
                if sha in repo.objects.ancestors(head) - below:
                    out.append(pr)
            return out

    def close_pull(self, full_name: str, number: int, user: str | None = None) -> Pull:
        with self.lock:
            repo = self.repo(full_name)
            pr = self.pull(full_name, number)
            if pr.state == "closed":
                return pr
            now = self.now()
            pr.head_sha_frozen = self.pull_head_sha(pr)
            pr.state, pr.closed_at, pr.updated_at = "closed", now, now
            self.emit_pull_request(repo, pr, "closed", sender=user or self.settings.default_token_user)
            return pr

    def update_pull(
        self,
        full_name: str,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        state: str | None = None,
        user: str | None = None,
    ) -> Pull:
        with self.lock:
            repo = self.repo(full_name)
            pr = self.pull(full_name, number)
            if title is not None:
                pr.title = title
            if body is not None:
                pr.body = body
            pr.updated_at = self.now()
            if state == "closed":
                self.close_pull(full_name, number, user)
            elif state == "open" and pr.state == "closed" and not pr.merged:
                pr.state, pr.closed_at = "open", None
                self.emit_pull_request(repo, pr, "reopened", sender=user or self.settings.default_token_user)
            return pr

    def _on_branch_moved(self, repo: Repo, branch: str, old: str | None, new: str) -> None:
        for r in self.repos.values():
            for pr in r.pulls.values():
                if pr.state == "open" and pr.head_repo == repo.full_name and pr.head_ref == branch and old:
                    pr.updated_at = self.now()
                    self._recompute_mergeable(pr)  # GitHub recomputes it after every push
                    self.emit_pull_request(
                        r, pr, "synchronize", sender=self.settings.default_token_user, before=old, after=new
                    )
                    self._maybe_run_sweep(r, pr, "synchronize", None)

    # -- labels and the repo's own run-sweep.yml -------------------------------------------------------
    def add_labels(self, full_name: str, number: int, labels: list[str], sender: str) -> list[str]:
        """Label a PR; each newly added label is a `pull_request.labeled` event (as on GitHub)."""
        with self.lock:
            repo = self.repo(full_name)
            pr = repo.pulls.get(number)
            if pr is None:
                raise SimError(404, "Not Found")
            for label in labels:
                if label in pr.labels:
                    continue  # GitHub keeps one and sends no event
                pr.labels.append(label)
                pr.updated_at = self.now()
                self.emit_pull_request(repo, pr, "labeled", sender=sender, label=label)
                self._maybe_run_sweep(repo, pr, "labeled", label)
            self._wake()
            return list(pr.labels)

    def _maybe_run_sweep(self, repo: Repo, pr: Pull, action: str, label: str | None) -> Run | None:
        """run-sweep.yml's `on: pull_request` + `setup` conditions, then its sweep run.

        Runs (sim/runs.py `sweep_run_wanted`) only when the PR changes perf-changelog.yaml, carries
        exactly one primary sweep label, comes from the same repo, and its head commit message has
        no `[skip-sweep]`; a newer run cancels the PR's older one (its concurrency group).
        """
        from sim.runs import RUN_SWEEP, changelog_keys, sweep_run_wanted

        wf = repo.workflows.get(RUN_SWEEP)
        if wf is None or pr.state != "open":
            return None
        head = self.pull_head_sha(pr)
        base = self.repo_base_sha(pr)
        base_log = self.read_file(repo.full_name, "perf-changelog.yaml", base)
        head_log = self.read_file(repo.full_name, "perf-changelog.yaml", head)
        message = repo.objects.commits[head].message if head in repo.objects.commits else ""
        why = sweep_run_wanted(
            action=action,
            label=label,
            labels=pr.labels,
            same_repo=pr.head_repo == repo.full_name,
            changelog_changed=base_log != head_log,
            head_message=message,
        )
        self.sweep_decisions.append({"pr": pr.number, "action": action, "head": head, "decision": why})
        if why != "run":
            return None
        keys = changelog_keys((base_log or b"").decode(), (head_log or b"").decode())
        for old in self.runs.values():
            if old.pr_number == pr.number and old.workflow_id == wf.id and old.status != "completed":
                self.cancel_run(old.id)
        self._run_numbers[repo.full_name] += 1
        now = self.now()
        run = Run(
            self.next_id(),
            repo.full_name,
            wf.id,
            f"Run Sweep - {pr.title}",  # run-name: Run Sweep - ${{ github.event.pull_request.title || ... }}
            pr.head_ref,
            head,
            pr.user,
            {"keys": keys, "labels": list(pr.labels)},
            now,
            now,
            self._run_numbers[repo.full_name],
            event="pull_request",
            pr_number=pr.number,
        )
        self.runs[run.id] = run
        self.emit_workflow_run(run, "requested")
        self._plan_sweep_jobs(run)
        self._wake()
        return run

    def _plan_sweep_jobs(self, run: Run) -> None:
        from sim.runs import job_name, sweep_points

        try:
            points = sweep_points(self, run)
        except Exception as exc:  # the setup job fails, as process_changelog.py would
            run.error = str(exc)
            self._add_setup_job(run, ok=False)
            run.status, run.conclusion, run.updated_at = "completed", "failure", self.now()
            self.emit_workflow_run(run, "completed")
            return
        self._add_setup_job(run, ok=True)
        for p in points:
            seq = str(p["exp-name"]).rsplit("_", 1)[-1]
            job = Job(self.next_id(), run.id, job_name(f"single-node {seq} /", p), p["runner"], p, self.now())
            self.jobs[job.id] = job
            run.jobs.append(job.id)
            self.emit_workflow_job(job, "queued")
        if not points:
            run.status, run.conclusion, run.updated_at = "completed", "success", self.now()
            self.emit_workflow_run(run, "completed")

    # -- comments and reactions --------------------------------------------------------------------
    def add_comment(self, full_name: str, number: int, user: str, body: str) -> Comment:
        with self.lock:
            repo = self.repo(full_name)
            if number not in repo.pulls:
                raise SimError(404, "Not Found")
            self.add_user(user)
            now = self.now()
            c = Comment(self.next_id(), number, user, body, now, now)
            repo.comments[c.id] = c
            self.emit_issue_comment(repo, c, "created", sender=user)
            return c

    # -- issues ------------------------------------------------------------------------------------
    def open_issue(
        self, full_name: str, title: str, body: str, user: str, labels: list[str] | None = None
    ) -> Issue:
        with self.lock:
            repo = self.repo(full_name)
            if not title.strip():
                raise SimError(
                    422,
                    "Validation Failed",
                    [{"resource": "Issue", "code": "missing_field", "field": "title"}],
                )
            self.add_user(user)
            now = self.now()
            issue = Issue(
                self._take_number(repo, None),
                self.next_id(),
                title,
                body,
                user,
                now,
                now,
                labels=list(labels or []),
            )
            repo.issues[issue.number] = issue
            return issue

    def issue(self, full_name: str, number: int) -> Issue:
        issue = self.repo(full_name).issues.get(number)
        if issue is None:
            raise SimError(404, "Not Found")
        return issue

    def update_issue(self, full_name: str, number: int, **fields: Any) -> Issue:
        with self.lock:
            issue = self.issue(full_name, number)
            now = self.now()
            if "title" in fields and fields["title"] is not None:
                issue.title = str(fields["title"])
            if "body" in fields and fields["body"] is not None:
                issue.body = str(fields["body"])
            state = fields.get("state")
            if state is not None:
                if state not in ("open", "closed"):
                    raise SimError(422, f"state must be open or closed, not {state!r}")
                if state == "closed" and issue.state == "open":
                    issue.closed_at = now
                    issue.state_reason = str(fields.get("state_reason") or "completed")
                elif state == "open" and issue.state == "closed":
                    issue.closed_at, issue.state_reason = None, "reopened"
                issue.state = state
            issue.updated_at = now
            return issue

    # -- injected performance changes --------------------------------------------------------------
    def inject_regression(
        self, repo: str, commit: str, factor: float, *, fixed_by: str | None = None, metric: str = "tpot"
    ) -> perf.Regression:
        """From upstream ``commit`` on (until ``fixed_by``), nightlies built from ``repo`` run slower."""
        with self.lock:
            if commit not in self.repo(repo).objects.commits:
                raise SimError(422, f"{commit!r} is not a commit of {repo}")
            if metric not in ("tpot", "ttft"):
                raise SimError(422, f"metric {metric!r} must be tpot or ttft")
            reg = perf.Regression(repo, commit, factor, fixed_by, metric)
            self.regressions.append(reg)
            return reg

    def fix_regression(self, reg: perf.Regression, fixed_by: str) -> perf.Regression:
        with self.lock:
            fixed = perf.Regression(reg.repo, reg.commit, reg.factor, fixed_by, reg.metric)
            self.regressions[self.regressions.index(reg)] = fixed
            return fixed

    def _contains(self, repo: str, commit: str, head: str) -> bool:
        try:
            _b, _h, cmp = self.compare(repo, commit, head)
        except (SimError, GitError, KeyError):
            return False
        return cmp.status in ("ahead", "identical")

    def image_slowdown(self, image: str) -> dict[str, float]:
        """The injected slowdowns of an image (``nightly-<sha>`` of an upstream repo's commit)."""
        sha = perf.image_commit(image)
        if sha is None or not self.regressions:
            return {}
        return perf.slowdown(self.regressions, lambda repo, c: self._contains(repo, c, sha))

    def comment(self, full_name: str, comment_id: int) -> Comment:
        c = self.repo(full_name).comments.get(comment_id)
        if c is None:
            raise SimError(404, "Not Found")
        return c

    def edit_comment(self, full_name: str, comment_id: int, body: str, user: str | None = None) -> Comment:
        with self.lock:
            repo = self.repo(full_name)
            c = self.comment(full_name, comment_id)
            old = c.body
            c.body, c.updated_at = body, self.now()
            self.emit_issue_comment(repo, c, "edited", sender=user or c.user, changes={"body": {"from": old}})
            return c

    def add_reaction(self, full_name: str, comment_id: int, user: str, content: str) -> tuple[Reaction, bool]:
        if content not in REACTIONS:
            raise SimError(422, f"reaction content must be one of {', '.join(REACTIONS)}")
        with self.lock:
            c = self.comment(full_name, comment_id)
            for r in c.reactions:
                if r.user == user and r.content == content:
                    return r, False
            r = Reaction(self.next_id(), user, content, self.now())
            c.reactions.append(r)
            return r, True

    # -- registry ----------------------------------------------------------------------------------
    def add_image(self, name: str, keep_nightlies: int | None = None) -> ImageRepo:
        with self.lock:
            img = self.images.setdefault(name, ImageRepo(name))
            if keep_nightlies is not None:
                img.keep_nightlies = keep_nightlies
            return img

    def push_tag(self, image: str, tag: str) -> Tag:
        with self.lock:
            img = self.add_image(image)
            digest = "sha256:" + hashlib.sha256(f"{image}:{tag}".encode()).hexdigest()
            t = Tag(tag, digest, self.now(), next(self._tag_seq))
            img.tags[tag] = t
            self._apply_retention(img)
            return t

    def delete_tag(self, image: str, tag: str) -> None:
        with self.lock:
            img = self.images.get(image)
            if img is None or tag not in img.tags:
                raise SimError(404, f"tag {image}:{tag} not found")
            del img.tags[tag]

    def set_retention(self, image: str, keep_nightlies: int | None) -> None:
        with self.lock:
            img = self.add_image(image)
            img.keep_nightlies = keep_nightlies
            self._apply_retention(img)

    def _apply_retention(self, img: ImageRepo) -> None:
        if img.keep_nightlies is None:
            return
        nightlies = sorted(
            (t for t in img.tags.values() if t.name.startswith("nightly")), key=lambda t: t.seq
        )
        for t in nightlies[: max(0, len(nightlies) - img.keep_nightlies)]:
            del img.tags[t.name]

    # -- runners and actions -----------------------------------------------------------------------
    def set_runners(self, label: str, count: int) -> None:
        with self.lock:
            current = self.runners.setdefault(label, [])
            nodes = self.runner_nodes.get(label, [])
            taken = {r.name for r in current}
            while len(current) < count:
                # Node names as the repo's runners.yaml lists them; invented ones past its end.
                spare = [n for n in nodes if n not in taken]
                name = spare[0] if spare else f"{label}-amds_{len(current):02d}"
                while name in taken:
                    name += "x"
                taken.add(name)
                current.append(Runner(self.next_id(), name, label))
            # shrinking removes idle runners only; busy ones finish their job first
            keep = [r for r in current if r.busy_job is not None]
            idle = [r for r in current if r.busy_job is None]
            self.runners[label] = (keep + idle)[: max(count, len(keep))]
            self._wake()

    def add_workflow(self, full_name: str, path: str, name: str) -> Workflow:
        with self.lock:
            repo = self.repo(full_name)
            wf = repo.workflows.get(path.rsplit("/", 1)[-1])
            if wf is None:
                wf = Workflow(self.next_id(), path, name)
                repo.workflows[path.rsplit("/", 1)[-1]] = wf
            return wf

    def workflow(self, full_name: str, workflow_id: str) -> Workflow:
        repo = self.repo(full_name)
        if workflow_id in repo.workflows:
            return repo.workflows[workflow_id]
        for wf in repo.workflows.values():
            if str(wf.id) == workflow_id:
                return wf
        raise SimError(404, "Not Found")

    def dispatch(self, full_name: str, workflow_id: str, ref: str, inputs: dict[str, Any], actor: str) -> Run:
        with self.lock:
            repo = self.repo(full_name)
            wf = self.workflow(full_name, workflow_id)
            try:
                sha = self.resolve(repo, ref)
            except SimError as exc:
                raise SimError(422, f"No ref found for: {ref}") from exc
            for k, v in inputs.items():
                if not isinstance(v, str | bool | int | float):
                    raise SimError(422, f"input {k!r} must be a scalar")
            from sim.runs import dispatch_error, evaluate_title, read_workflow

            # GitHub reads the workflow file at the dispatched ref and refuses what it does not declare.
            text = self.read_file(full_name, wf.path, sha)
            if text is None:
                raise SimError(404, "Not Found")
            spec = read_workflow(text.decode())
            problem = dispatch_error(spec, inputs)
            if problem is not None:
                raise SimError(422, problem)
            branch = ref[len("refs/heads/") :] if ref.startswith("refs/heads/") else ref
            self._run_numbers[full_name] += 1
            now = self.now()
            str_inputs = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in inputs.items()}
            context = {"inputs": str_inputs, "github": {"event": {"inputs": str_inputs}}}
            name = evaluate_title(spec.run_name, spec.name or wf.name, context)
            run = Run(
                self.next_id(),
                full_name,
                wf.id,
                name,
                branch,
                sha,
                actor,
                dict(inputs),
                now,
                now,
                self._run_numbers[full_name],
            )
            self.runs[run.id] = run
            self.emit_workflow_run(run, "requested")
            self._plan_jobs(run)
            self._wake()
            return run

    def _plan_jobs(self, run: Run) -> None:
        from sim.runs import plan_points

        try:
            points = plan_points(self, run)
        except Exception as exc:  # a bad command or config fails the run, as the matrix job would
            run.error = str(exc)
            self._add_setup_job(run, ok=False)
            run.status, run.conclusion, run.updated_at = "completed", "failure", self.now()
            self.emit_workflow_run(run, "completed")
            return
        self._add_setup_job(run, ok=True)
        from sim.runs import job_name

        for p in points:
            label = p["runner"]
            job = Job(self.next_id(), run.id, job_name("single-node /", p), label, p, self.now())
            self.jobs[job.id] = job
            run.jobs.append(job.id)
            self.emit_workflow_job(job, "queued")
        if not points:
            run.error = "the command matched no points"
            run.status, run.conclusion, run.updated_at = "completed", "failure", self.now()
            self.emit_workflow_run(run, "completed")

    def _add_setup_job(self, run: Run, *, ok: bool) -> None:
        """e2e-tests.yml's `get-jobs` (ubuntu-latest, no runner of ours): done by the time jobs exist."""
        now = self.now()
        job = Job(self.next_id(), run.id, "get-jobs", "ubuntu-latest", {}, now)
        job.status, job.conclusion, job.started_at, job.completed_at = (
            "completed",
            "success" if ok else "failure",
            now,
            now,
        )
        job.runner_name = "GitHub Actions 1"
        job.steps = [
            {
                "name": n,
                "status": "completed",
                "conclusion": c,
                "number": i,
                "started_at": iso(now),
                "completed_at": iso(now),
            }
            for i, (n, c) in enumerate(
                [
                    ("Set up job", "success"),
                    ("Run get-jobs", "success" if ok else "failure"),
                    ("Complete job", "success"),
                ],
                start=1,
            )
        ]
        if not ok:
            job.annotations = [
                {
                    "path": ".github",
                    "start_line": 1,
                    "end_line": 1,
                    "annotation_level": "failure",
                    "title": "",
                    "raw_details": "",
                    "message": "Process completed with exit code 2.",
                }
            ]
        self.jobs[job.id] = job
        run.jobs.append(job.id)

    def cancel_run(self, run_id: int) -> Run:
        with self.lock:
            run = self.runs.get(run_id)
            if run is None:
                raise SimError(404, "Not Found")
            if run.status == "completed":
                raise SimError(409, "Cannot cancel a workflow run that is completed.")
            for jid in run.jobs:
                job = self.jobs[jid]
                if job.status != "completed":
                    self._finish_job(job, "cancelled")
            self._maybe_finish_run(run)
            self._wake()
            return run

    def free_runners(self, label: str) -> int:
        with self.lock:
            return sum(1 for r in self.runners.get(label, []) if r.busy_job is None)

    def tick(self) -> float | None:
        """Advance the fleet: start queued jobs on free runners, finish due jobs.

        Returns the real seconds until the next deadline (None when nothing is running).
        """
        with self.lock:
            mono = time.monotonic()
            for job in sorted(self.jobs.values(), key=lambda j: j.id):
                if job.status == "in_progress" and job.ends_at_real is not None and job.ends_at_real <= mono:
                    self._complete_job(job)
            for job in sorted(self.jobs.values(), key=lambda j: j.id):
                if job.status != "queued":
                    continue
                runner = next((r for r in self.runners.get(job.label, []) if r.busy_job is None), None)
                if runner is None:
                    continue
                if self.faults.queue_delay_s and (mono - job.created_mono) < (
                    self.faults.queue_delay_s * self.settings.time_scale
                ):
                    continue
                self._start_job(job, runner, mono)
            deadlines = [
                j.ends_at_real
                for j in self.jobs.values()
                if j.status == "in_progress" and j.ends_at_real is not None
            ]
            queued = any(j.status == "queued" for j in self.jobs.values())
            if deadlines:
                wait = max(0.0, min(deadlines) - mono)
                return min(wait, 0.05) if queued else wait
            return 0.05 if queued else None

    def _start_job(self, job: Job, runner: Runner, mono: float) -> None:
        run = self.runs[job.run_id]
        runner.busy_job = job.id
        job.status, job.started_at = "in_progress", self.now()
        job.runner_name, job.runner_id = runner.name, runner.id
        if self.faults.runner_lost_next > 0:
            self.faults.runner_lost_next -= 1
            job.fate = "runner_lost"
        elif self.faults.benchmark_fail_next > 0:
            self.faults.benchmark_fail_next -= 1
            job.fate = "benchmark_failure"
        result = self._result_for(job)
        seconds = perf.job_seconds(result)
        if job.fate == "runner_lost":
            seconds *= 0.5
        job.ends_at_real = mono + seconds * self.settings.time_scale
        if run.status == "queued":
            run.status, run.run_started_at, run.updated_at = "in_progress", self.now(), self.now()
            self.emit_workflow_run(run, "in_progress")
        self.emit_workflow_job(job, "in_progress")

    def _result_for(self, job: Job) -> dict[str, Any]:
        p = job.point
        attempt = sum(
            1
            for j in self.jobs.values()
            if j.point.get("result-name") == p.get("result-name") and j.id < job.id
        )
        # A multi-node row runs its whole conc list on one engine; the simulated result is the
        # row's highest conc on its decode workers (one result per job, as the bot tracks them).
        conc = max(p["conc"]) if isinstance(p["conc"], list) else p["conc"]
        tp = p["tp"] if "tp" in p else (p.get("decode") or {}).get("tp", 4)
        return perf.benchmark_result(
            perf.PerfInput(
                str(p.get("framework", "vllm")),
                int(conc),
                int(p.get("isl", 8192)),
                int(p.get("osl", 1024)),
                int(tp),
                str(p.get("model", "")),
                str(p.get("image", "")),
                self.image_slowdown(str(p.get("image", ""))),
            ),
            self.settings.seed,
            attempt,
        )

    def _complete_job(self, job: Job) -> None:
        if job.fate == "runner_lost":
            self._finish_job(job, "failure", lost=True)
        elif job.fate == "benchmark_failure":
            self._finish_job(job, "failure")
        else:
            self._upload_artifacts(job, self._result_for(job))
            self._finish_job(job, "success")
        self._maybe_finish_run(self.runs[job.run_id])

    def _upload_logs(self, job: Job) -> None:
        """A failed job still uploads its logs and metrics (those steps run `if: always()`)."""
        self._upload_artifacts(job, None)

    def _upload_artifacts(self, job: Job, result: dict[str, Any] | None) -> None:
        """What one benchmark-tmpl.yml job uploads (its `Upload ...` steps); no result: logs only."""
        from sim.runs import result_filename

        fingerprint = str(job.point.get("recipe-fingerprint") or "")
        if not fingerprint and self.recipe_suffix:
            fingerprint = hashlib.sha256(str(job.point.get("result-name")).encode()).hexdigest()
        rf = result_filename(job.point, str(job.runner_name), fingerprint)
        eval_only = bool(job.point.get("eval-only"))
        logs = "eval_" if eval_only else ""  # the template's eval-only prefix for logs and metrics
        uploads: dict[str, dict[str, str]] = {
            f"{logs}server_logs_{rf}": {"server.log": "INFO: Started server process\n"},
            f"{logs}gpu_metrics_{rf}": {"gpu_metrics.csv": "timestamp,gpu,power_w\n0,0,750\n"},
        }
        if result is not None and not eval_only:
            agg = json.dumps(result, indent=2)
            uploads[f"bmk_{rf}"] = {f"agg_{rf}.json": agg}
            uploads[f"power_audit_{rf}"] = {f"{rf}.json": agg, f"agg_{rf}.json": agg}
        if result is not None and (job.point.get("run-eval") or eval_only):
            uploads[f"eval_{job.point.get('exp-name')}_{rf}"] = self._eval_members(job)
        for name, members in uploads.items():
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
                for member, text in members.items():
                    zf.writestr(member, text)
            art = Artifact(self.next_id(), job.run_id, name, buf.getvalue(), self.now())
            self.artifacts[art.id] = art

    def _eval_members(self, job: Job) -> dict[str, str]:
        """The eval upload: `meta_env.json` and the harness's `results_<time>.json` (EVALS.md)."""
        p = job.point
        when = self.now()
        stamp = datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H-%M-%S.%f")
        attempt = sum(
            1
            for j in self.jobs.values()
            if j.point.get("result-name") == p.get("result-name") and j.id < job.id
        )
        result = perf.eval_result(
            perf.PerfInput(
                str(p.get("framework", "vllm")),
                int(p["conc"]),
                int(p.get("isl", 8192)),
                int(p.get("osl", 1024)),
                int(p.get("tp", 4)),
                str(p.get("model", "")),
                str(p.get("image", "")),
            ),
            self.settings.seed,
            attempt,
            limit=self.eval_limit,
            accuracy=self.eval_accuracy.get(str(p.get("framework"))),
            date=when,
        )
        return {
            "meta_env.json": json.dumps(perf.meta_env(p, str(job.label)), indent=2),
            f"results_{stamp}.json": json.dumps(result, indent=2),
        }

    # benchmark-tmpl.yml's steps of a fixed-seq-len throughput job, with the `if:` that runs each
    # (None: only on success so far; "always": `always()`; "never": an eval-only or agentic step).
    BENCH_STEPS: tuple[tuple[str, str | None], ...] = (
        ("Set up job", None),
        ("Resource cleanup (pre-run)", None),
        ("Run actions/checkout@9c091bb21b7c1c1d1991bb908d89e4e9dddfe3e0", None),
        ("Launch job script", None),
        ("Process result", None),
        ("Upload result", None),
        ("Upload agentic aggregated result", "never"),
        ("Upload agentic raw results", "never"),
        ("Upload server logs", "always"),
        ("Upload GPU metrics", "always"),
        ("Upload power audit bundle", "always"),
        ("Upload eval results (if any)", "never"),
        ("Verify eval scores", "never"),
        ("Cleanup eval outputs (post-upload)", "never"),
        ("Resource cleanup (post-run)", "always"),
        ("Post Run actions/checkout@9c091bb21b7c1c1d1991bb908d89e4e9dddfe3e0", "always"),
        ("Complete job", "always"),
    )

    def _finish_job(self, job: Job, conclusion: str, lost: bool = False) -> None:
        was_running = job.status == "in_progress"
        job.status, job.conclusion, job.completed_at = "completed", conclusion, self.now()
        job.ends_at_real = None
        started = job.started_at or job.completed_at
        steps: list[dict[str, Any]] = []
        launch = [n for n, _ in self.BENCH_STEPS].index("Launch job script")
        for number, (name, when) in enumerate(self.BENCH_STEPS, start=1):
            index = number - 1
            if not was_running or when == "never":
                state = "skipped"
            elif conclusion == "success" or index < launch:
                state = "success"
            elif index == launch:
                state = "cancelled" if lost or conclusion == "cancelled" else "failure"
            elif lost:
                state = "skipped"  # the runner is gone: not even `always()` steps ran
            else:
                state = "success" if when == "always" else "skipped"
            steps.append(
                {
                    "name": name,
                    "status": "completed",
                    "conclusion": state,
                    "number": number,
                    "started_at": iso(started),
                    "completed_at": iso(job.completed_at),
                }
            )
        job.steps = steps
        # What GitHub writes on the job's check run (GET /check-runs/{job id}/annotations).
        note = {
            "path": ".github",
            "blob_href": None,
            "start_line": 1,
            "end_line": 1,
            "start_column": None,
            "end_column": None,
            "annotation_level": "failure",
            "title": "",
            "raw_details": "",
        }
        if lost:
            job.annotations = [
                note
                | {
                    "message": f"The self-hosted runner: {job.runner_name} lost communication with the "
                    "server. "
                    "Verify the machine is running and has a healthy network connection. Anything in your "
                    "workflow that terminates the runner process, starves it for CPU/Memory, or blocks its "
                    "network access can cause this error."
                }
            ]
        elif conclusion == "failure":
            job.annotations = [note | {"message": "Process completed with exit code 1."}]
        elif conclusion == "cancelled" and was_running:
            job.annotations = [note | {"message": "The operation was canceled."}]
        if was_running and conclusion != "success" and not lost:
            self._upload_logs(job)
        for runners in self.runners.values():
            for r in runners:
                if r.busy_job == job.id:
                    r.busy_job = None
        self.emit_workflow_job(job, "completed")

    def _maybe_finish_run(self, run: Run) -> None:
        if run.status == "completed":
            return
        jobs = [self.jobs[j] for j in run.jobs]
        if any(j.status != "completed" for j in jobs):
            return
        conclusions = {j.conclusion for j in jobs}
        if "cancelled" in conclusions:
            run.conclusion = "cancelled"
        elif "failure" in conclusions:
            run.conclusion = "failure"
        else:
            run.conclusion = "success"
        run.status, run.updated_at = "completed", self.now()
        self.emit_workflow_run(run, "completed")

    # -- webhooks ----------------------------------------------------------------------------------
    def _emit(self, event: str, payload: dict[str, Any]) -> None:
        d = Delivery(self.next_id(), str(uuid.uuid4()), event, payload.get("action"), payload, self.now())
        d.installation_id = (payload.get("installation") or {}).get("id")
        d.repository_id = (payload.get("repository") or {}).get("id")
        if self.drop_next_deliveries > 0:
            self.drop_next_deliveries -= 1
            d.status = "dropped"
        elif not self.settings.webhook_url:
            d.status = "no-url"
        self.deliveries.append(d)
        if d.status == "pending" and self.duplicate_deliveries:
            dup = Delivery(self.next_id(), d.guid, event, d.action, payload, self.now(), duplicate_of=d.guid)
            self.deliveries.append(dup)
        self._wake()

    def redeliver(self, guid: str) -> Delivery:
        with self.lock:
            orig = next((d for d in self.deliveries if d.guid == guid), None)
            if orig is None:
                raise SimError(404, f"delivery {guid} not found")
            return self._redeliver(orig)

    def redeliver_id(self, delivery_id: int) -> Delivery:
        """``POST .../deliveries/{delivery_id}/attempts``: send that delivery again (same GUID)."""
        with self.lock:
            orig = next((d for d in self.deliveries if d.id == delivery_id), None)
            if orig is None or orig.status in ("no-url", "pending", "sending"):
                raise SimError(404, "Not Found")
            return self._redeliver(orig)

    def hook_deliveries(self, repo: str | None = None, app: bool = False) -> list[Delivery]:
        """Deliveries GitHub attempted, newest first: an App's (those with an installation), or
        one repository's webhook's. A dropped delivery is a failed attempt (the receiver was down)."""
        with self.lock:
            out = []
            for d in self.deliveries:
                if d.status in ("no-url", "pending", "sending") or d.duplicate_of:
                    continue
                if app and d.installation_id is None:
                    continue
                if repo is not None and (d.payload.get("repository") or {}).get("full_name") != repo:
                    continue
                out.append(d)
            return sorted(out, key=lambda d: -d.id)

    def _redeliver(self, orig: Delivery) -> Delivery:
        with self.lock:
            d = Delivery(
                self.next_id(), orig.guid, orig.event, orig.action, orig.payload, self.now(), redelivery=True
            )
            d.installation_id, d.repository_id = orig.installation_id, orig.repository_id
            if not self.settings.webhook_url:
                d.status = "no-url"
            self.deliveries.append(d)
            self._wake()
            return d

    def emit_pull_request(
        self,
        repo: Repo,
        pr: Pull,
        action: str,
        sender: str,
        before: str | None = None,
        after: str | None = None,
        label: str | None = None,
    ) -> None:
        from sim import render

        payload = {
            "action": action,
            "number": pr.number,
            "pull_request": render.pull_request(self, repo, pr),
            "repository": render.hook_repository(self, repo),
            "sender": render.user(self, sender),
        }
        if action == "synchronize":
            payload["before"], payload["after"] = before, after
        if label is not None:
            payload["label"] = render.label(self, repo, label)
        self._add_installation(payload, repo)
        self._emit("pull_request", payload)

    def emit_issue_comment(
        self, repo: Repo, c: Comment, action: str, sender: str, changes: dict[str, Any] | None = None
    ) -> None:
        from sim import render

        pr = repo.pulls[c.issue_number]
        payload: dict[str, Any] = {
            "action": action,
            "issue": render.hook_issue(self, repo, pr),
            "comment": render.hook_comment(self, repo, c),
            "repository": render.hook_repository(self, repo),
            "sender": render.user(self, sender),
        }
        if changes is not None:
            payload["changes"] = changes
        self._add_installation(payload, repo)
        self._emit("issue_comment", payload)

    def _emit_push(self, repo: Repo, ref: str, old: str | None, new: str, pusher: str, forced: bool) -> None:
        from sim import render

        payload = render.push_payload(self, repo, ref, old, new, pusher, forced)
        self._add_installation(payload, repo)
        self._emit("push", payload)

    def emit_workflow_run(self, run: Run, action: str) -> None:
        from sim import render

        repo = self.repo(run.repo)
        payload = {
            "action": action,
            "workflow_run": render.hook_workflow_run(self, run),
            "workflow": render.hook_workflow(self, repo, run.workflow_id),
            "repository": render.hook_repository(self, repo),
            "sender": render.user(self, run.actor),
        }
        self._add_installation(payload, repo)
        self._emit("workflow_run", payload)

    def emit_workflow_job(self, job: Job, action: str) -> None:
        from sim import render

        run = self.runs[job.run_id]
        repo = self.repo(run.repo)
        payload = {
            "action": action,
            "workflow_job": render.hook_workflow_job(self, job),
            "repository": render.hook_repository(self, repo),
            "sender": render.user(self, run.actor),
        }
        self._add_installation(payload, repo)
        self._emit("workflow_job", payload)

    def _add_installation(self, payload: dict[str, Any], repo: Repo) -> None:
        # As GitHub does: `organization` when the owner is an organisation, `installation` when the
        # delivery is for a GitHub App installed on the repository.
        if repo.owner in self.orgs or self.users.get(repo.owner, User("", 0)).type == "Organization":
            from sim import render

            payload["organization"] = render.organization(self, repo.owner)
        if repo.installation_id:
            payload["installation"] = {
                "id": repo.installation_id,
                "node_id": base64.b64encode(f"Inst{repo.installation_id}".encode()).decode(),
            }

    # -- accounting --------------------------------------------------------------------------------
    def record_call(self, op: str, status: int, kind: str) -> None:
        with self.lock:
            self.calls[(op, status, kind)] += 1

    def log_request(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.requests.append(entry)
            if len(self.requests) > 20000:
                del self.requests[:5000]

    def call_summary(self) -> dict[str, Any]:
        with self.lock:
            by_op: dict[str, dict[str, int]] = {}
            total = limited = not_modified = 0
            for (op, status, kind), n in self.calls.items():
                by_op.setdefault(op, {})
                by_op[op][str(status)] = by_op[op].get(str(status), 0) + n
                total += n
                if kind == "counted":
                    limited += n
                elif kind == "not_modified":
                    not_modified += n
            return {
                "total": total,
                "rate_limited": limited,
                "not_modified": not_modified,
                "by_operation": by_op,
            }

    def reset_calls(self) -> None:
        with self.lock:
            self.calls.clear()
            self.requests.clear()
