"""The world's shared state: every resource's tables, ids and clocks, wakeups, event listeners,
and the API call accounting.

Every mutation goes through a World method holding `world.lock`, so the HTTP layer, the
actions engine thread and the scenario driver can act concurrently. Methods raise `SimError`
(carrying an HTTP status and a GitHub-style message) when GitHub would refuse the operation.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from sim import perf
from sim.models import (
    EPOCH,
    App,
    Artifact,
    Budget,
    Delivery,
    Event,
    Faults,
    ImageRepo,
    Installation,
    Job,
    Repo,
    Run,
    Runner,
    SimError,
    SimSettings,
    TokenInfo,
    User,
)


class WorldBase:
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
        self.repo_variables: dict[str, dict[str, str]] = {}  # repo -> Actions variables
        self.runner_nodes: dict[str, list[str]] = {}  # label -> node names (runners.yaml `labels:`)
        self.recipe_suffix = False  # jobs carry a `recipe-fingerprint` (`_recipe-<16 hex>` names)
        # Evals: the workflow's `eval-limit` input (None: the whole split) and per-framework
        # accuracy overrides (filter -> probability; defaults in sim.perf.ENGINE_ACCURACY).
        self.eval_limit: int | None = None
        self.eval_accuracy: dict[str, dict[str, float]] = {}
        self.runs: dict[int, Run] = {}
        self.sweep_decisions: list[dict[str, Any]] = []  # every run-sweep.yml trigger and its outcome
        self._held: dict[int, list[tuple[str, dict[str, Any]]]] = {}  # run id -> jobs after its canary
        self.ingests: list[dict[str, Any]] = []  # trigger-ingest's dispatches to InferenceX-app
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
        # every registry request (tag lists, token fetches): which path, for which image (a test
        # reads it), and the images whose tag list answers with a redirect (to another host)
        self.registry_requests: list[dict[str, Any]] = []
        self.registry_redirects: dict[str, str] = {}
        self._wakeups: list[threading.Event] = []
        self.scenario: Any = None  # a sim.scenario.SeedScenario once loaded
        self.nightly_story: Any = None  # a sim.nightly_scenario.NightlyRegressionStory once loaded
        self.regressions: list[perf.Regression] = []  # injected upstream performance changes
        # Who hears each event, in order (sim.world.World: the webhook renderer, run-sweep.yml).
        self.listeners: list[Callable[[Event], None]] = []

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

    def emit(self, event: Event) -> None:
        """Tell every listener, in order, while the caller still holds the lock."""
        for listener in self.listeners:
            listener(event)

    def repo(self, full_name: str) -> Repo:
        r = self.repos.get(full_name)
        if r is None:
            raise SimError(404, "Not Found")
        return r

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
