"""The label-contract scheduler benchmark's world, on a virtual clock (the harness of
bench/scheduler.py): GitHub's assignment rule from the simulator (``sim.world_runners.labels_match``:
an idle online runner takes the oldest queued job whose labels it all carries), the real templates'
``runs-on`` evaluated by ``sim.priority`` with scores from configs/ci-priority.yaml, and, for the
controller strategies, the real ``app.flows.scheduler.runner_control`` against a gateway that plays
the runners API
on this world and counts every call.

Faults: a flaky runner loses 30% of its jobs and any runner 1% (the job fails, GitHub re-runs it as
attempt 2 after 5 minutes, same queue token); one runner goes offline for 2 h; two PRs cancel their
queued jobs; 2% of webhook deliveries never arrive. Without a controller (``fifo``) a multi-node
job handed to a runner of the pool gathers its other nodes as they go idle (the pool's own
allocator), idle while it gathers.
"""

from __future__ import annotations

import heapq
import itertools
import random
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import yaml

from app.core import schedlabels as sl
from app.core.schedplan import Policy
from app.flows.scheduler.runner_control import (
    ControllerConfig,
    MemoryFacts,
    ReconcileResult,
    apply_workflow_job,
    reconcile,
)
from bench.labelsim_idle import CAUSES, cause
from sim.priority import queue_token, runs_on, score
from sim.world_runners import DATA, label_set

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
REPO = "SemiAnalysisAI/InferenceX"
SINGLE, POOL = "mi355x", "cluster:b200-nv"
OUTAGE = (6, 4 * 3600.0, 6 * 3600.0)  # runner 6 (a single-node one) is offline from 4 h to 6 h


@dataclass
class Config:
    prs: int = 50
    jobs: int = 2000
    runners: int = 9
    pool: int = 8
    multi_prs: int = 5
    seed: int = 7
    mean_gap_s: float = 1500.0
    single_mean_s: float = 360.0
    multi_mean_s: float = 1200.0
    loss: float = 0.02
    latency_s: float = 3.0
    policy: Policy | None = None  # sweepbot's (None: ``Policy()``), for trying a policy
    half_life_hours: float | None = None  # the controller's decay of a PR's use (None: its default)


@dataclass
class BJob:
    id: int
    run_id: int
    pr: int
    labels: list[str]
    nodes: int
    duration: float
    created: float
    attempt: int = 1
    entry: dict[str, Any] = field(default_factory=dict)
    status: str = "queued"
    start: float | None = None
    end: float | None = None
    runner: int | None = None
    held: list[int] = field(default_factory=list)  # fifo multi-node: the pool nodes it gathered
    work_start: float | None = None
    fate: str = "success"


@dataclass
class BRunner:
    id: int
    name: str
    base: list[str]
    custom: list[str] = field(default_factory=list)
    online: bool = True
    job: int | None = None
    flaky: bool = False
    last_job: int | None = None  # the job it ran last (whose completed delivery frees it)
    freed_at: float = 0.0

    def labels(self) -> list[str]:
        return ["self-hosted", "Linux", "X64", *self.base, *self.custom]

    def row(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "status": "online" if self.online else "offline",
            "busy": self.job is not None,
            "labels": [{"name": x} for x in self.labels()],
        }


@cache
def _runs_on(name: str) -> str:
    return str(yaml.safe_load((DATA / "workflows" / name).read_text())["jobs"]["benchmark"]["runs-on"])


@cache
def _policy() -> dict[str, Any]:
    return dict(yaml.safe_load((DATA / "configs" / "ci-priority.yaml").read_text()))


@cache
def _want(labels: tuple[str, ...]) -> frozenset[str]:
    """A job's ``runs-on`` as GitHub matches it (fixed once queued; read once, not on every scan)."""
    return frozenset(label_set(list(labels)))


FRAMEWORKS = ["vllm", "sglang", "atom", "dynamo-vllm"]
MODELS = ["minimaxm3", "dsr1", "gptoss", "kimik3", "qwen3.5"]


def workload(cfg: Config) -> list[dict[str, Any]]:
    """PRs: arrival, event, labels, and their jobs' matrix entries and durations (seeded)."""
    rng = random.Random(cfg.seed)
    weights = [rng.lognormvariate(0, 0.6) for _ in range(cfg.prs)]
    sizes = [max(5, round(cfg.jobs * w / sum(weights))) for w in weights]
    sizes[-1] += cfg.jobs - sum(sizes)
    t, prs = 0.0, []
    for i in range(cfg.prs):
        t = rng.uniform(0, 60) if i < 10 else t + rng.expovariate(1 / cfg.mean_gap_s)
        multi = (
            i % (cfg.prs // max(1, cfg.multi_prs)) == 3
            and i // (cfg.prs // max(1, cfg.multi_prs)) < cfg.multi_prs
        )
        labels = ["ci-checklist-complete"] if i % 7 == 2 else ["ci-patchwork"] if i == 11 else []
        entries = []
        for _ in range(sizes[i]):
            mn = multi and rng.random() < 0.5
            e = {
                "runner": POOL if mn else SINGLE,
                "framework": rng.choice(FRAMEWORKS),
                "precision": rng.choice(["fp4", "fp8"]),
                "model-prefix": rng.choice(MODELS),
                "spec-decoding": rng.choice(["none", "none", "mtp"]),
                "conc": rng.choice([4, 8, 16, 32, 64]),
            }
            if mn:
                e["prefill"] = {"num-worker": 1}
                e["node-count"] = rng.choice([2, 2, 3, 4])
            mean = cfg.multi_mean_s if mn else cfg.single_mean_s
            e["_duration"] = min(6 * mean, max(mean / 4, rng.lognormvariate(0, 0.5) * mean))
            entries.append(e)
        prs.append(
            {
                "pr": 1000 + i,
                "at": t,
                "event": "push" if i % 5 == 4 else "pull_request",
                "labels": labels,
                "high": i % 5 == 4,
                "entries": entries,
            }
        )
    return prs


def job_labels(
    entry: dict[str, Any], pr: dict[str, Any], run_id: int, index: int, attempt: int, contract: bool
) -> list[str]:
    clean = {k: v for k, v in entry.items() if not k.startswith("_")}
    family = "multi" if "prefill" in clean else "single"
    inputs = {
        "runner": clean["runner"],
        "skip-queue-pr": "",
        "priority": score(clean, _policy(), event=pr["event"], pr_labels=frozenset(pr["labels"])),
        "queue-token": queue_token(clean, f"{run_id}:1:{family}", (str(index),)),
    }
    ctx = {
        "vars": {"PRIORITY_SCHEDULER_ENABLED": "true" if contract else "false"},
        "inputs": inputs,
        "github": {"run_attempt": str(attempt)},
    }
    name = "benchmark-multinode-tmpl.yml" if family == "multi" else "benchmark-tmpl.yml"
    labels = runs_on(_runs_on(name), ctx)
    if contract:  # NODE_SLOT_SCHEDULER_ENABLED on (see sim/world_runners.py)
        labels.append(f"nodes:{int(clean.get('node-count') or 1)}")
    return labels


class World:
    """Jobs, runners, the event queue; GitHub's rule; the controller (when there is one)."""

    def __init__(self, cfg: Config, strategy: str) -> None:
        self.cfg, self.strategy = cfg, strategy
        self.rng = random.Random(cfg.seed + 1)
        self.t = 0.0
        self.events: list[tuple[float, int, str, Any]] = []
        self.seq = itertools.count()
        self.jobs: dict[int, BJob] = {}
        self.queued: dict[int, BJob] = {}  # in the order GitHub queued them
        self.runners: dict[int, BRunner] = {}
        ids = itertools.count(1)
        for i in range(cfg.runners):
            rid = next(ids)
            self.runners[rid] = BRunner(rid, f"mi355x-amds_{i:02d}", [SINGLE], flaky=i == 3)
        for i in range(cfg.pool):
            rid = next(ids)
            self.runners[rid] = BRunner(rid, f"b200-nv_{i:02d}", [POOL, "b200-nv"])
        self.job_ids = itertools.count(10_000)
        self.calls: dict[str, int] = {}
        self.intervals: list[tuple[float, float, int, int]] = []  # start, end, pr, nodes
        self.idle_wait = 0.0
        self.idle_by_cause = dict.fromkeys(CAUSES, 0.0)  # bench/labelsim_idle.py
        self.lost_completed: set[int] = set()  # jobs whose completed delivery GitHub never sent
        self.last_result: ReconcileResult | None = None
        self._by_label: tuple[int, dict[str, list[BJob]]] = (-1, {})
        self.online_time = 0.0
        self.last = 0.0
        self.queue_version = 0
        self.listed_version = -1
        self.facts = MemoryFacts() if cfg.half_life_hours is None else MemoryFacts(cfg.half_life_hours)
        self.ctl: ControllerConfig | None = None
        if strategy != "fifo":
            policy = (
                (cfg.policy or Policy())
                if strategy == "sweepbot"
                else Policy(
                    aging_per_hour=0.25,
                    fair_share_weight=0.0,
                    lease_hold_minutes=None,
                    canary_penalty=0.0,
                    starve_after_hours=None,
                )
            )
            self.ctl = ControllerConfig(REPO, policy)
        self.learn_avoid = strategy == "sweepbot"
        self.tick_pending = False
        self.prs: dict[int, dict[str, Any]] = {}

    def at(self, dt: float, kind: str, data: Any = None) -> None:
        heapq.heappush(self.events, (self.t + dt, next(self.seq), kind, data))

    def now(self) -> datetime:
        return EPOCH + timedelta(seconds=self.t)

    def count(self, op: str) -> None:
        self.calls[op] = self.calls.get(op, 0) + 1

    # -- GitHub: deliveries, the assignment rule, jobs starting and ending

    def hook(self, job: BJob, action: str, conclusion: str | None = None) -> None:
        if self.ctl is None:
            return
        if self.rng.random() < self.cfg.loss:
            if action == "completed":
                self.lost_completed.add(job.id)
            return  # GitHub never delivered it
        runner = self.runners.get(job.runner or 0)
        payload = {
            "action": action,
            "workflow_job": {
                "id": job.id,
                "run_id": job.run_id,
                "labels": list(job.labels),
                "conclusion": conclusion,
                "runner_id": job.runner,
                "runner_name": runner.name if runner else None,
            },
        }
        self.at(self.cfg.latency_s, "hook", (payload, job.pr))

    def scan(self) -> None:
        """GitHub's rule; without a controller, the pool's allocator feeds gathering jobs first."""
        for job in sorted(
            (j for j in self.jobs.values() if j.status == "gathering"), key=lambda j: j.created
        ):
            for r in self.runners.values():
                if len(job.held) + 1 >= job.nodes:
                    break
                if r.online and r.job is None and POOL in r.base:
                    r.job = -job.id
                    job.held.append(r.id)
            if len(job.held) + 1 >= job.nodes:
                self.work(job)
        idle = [r for r in self.runners.values() if r.online and r.job is None]
        if not idle:
            return
        have = {r.id: label_set(r.labels()) for r in idle}
        # GitHub's rule (sim.world_runners.labels_match), the sets computed once; ``queued`` is in
        # queueing order (jobs are queued as time goes on)
        # (runners only get taken during a scan, so a label set no idle runner matched stays unmatched)
        unmatched: set[frozenset[str]] = set()
        for job in list(self.queued.values()):
            if job.id not in self.queued:
                continue
            want = _want(tuple(job.labels))
            if want in unmatched:
                continue
            runner = next((r for r in idle if r.job is None and want <= have[r.id]), None)
            if runner is None:
                unmatched.add(want)
                if all(r.job is not None for r in idle):
                    return
                continue
            self.start(job, runner)

    def start(self, job: BJob, runner: BRunner) -> None:
        job.status, job.start, job.runner = "in_progress", self.t, runner.id
        self.queued.pop(job.id, None)
        runner.job = job.id
        self.queue_version += 1
        lost = 0.3 if runner.flaky else 0.01
        job.fate = "runner_lost" if self.rng.random() < lost else "success"
        self.hook(job, "in_progress")
        if job.nodes > 1 and self.ctl is None:
            job.status = "gathering"
            self.scan()
            return
        if job.nodes > 1:  # the lease's other runners are the job's nodes while it runs
            lease = next((x for x in runner.custom if x.startswith("ci-lease-")), None)
            for r in self.runners.values():
                if r is not runner and lease and lease in r.custom and r.job is None:
                    r.job = -job.id
                    job.held.append(r.id)
        self.work(job)

    def work(self, job: BJob) -> None:
        job.status, job.work_start = "in_progress", self.t
        self.at(job.duration * (0.5 if job.fate == "runner_lost" else 1.0), "end", job.id)

    def end(self, job: BJob, fate: str | None = None) -> None:
        if job.status == "completed":
            return
        fate = fate or job.fate
        job.status, job.end = "completed", self.t
        if job.work_start is not None:
            self.intervals.append((job.work_start, self.t, job.pr, job.nodes))
        for rid in [job.runner, *job.held]:
            if rid is not None and self.runners[rid].job in (job.id, -job.id):
                self.runners[rid].job = None
                self.runners[rid].last_job, self.runners[rid].freed_at = job.id, self.t
        self.hook(job, "completed", "runner_lost" if fate == "runner_lost" else "success")
        if fate == "runner_lost":
            self.at(300.0, "rerun", job.id)
        self.scan()

    def rerun(self, old: BJob) -> None:
        pr = self.prs[old.pr]
        index = int(old.entry["_index"])
        job = replace(
            old,
            id=next(self.job_ids),
            attempt=old.attempt + 1,
            status="queued",
            created=self.t,
            start=None,
            end=None,
            runner=None,
            held=[],
            work_start=None,
            fate="success",
            labels=job_labels(old.entry, pr, old.run_id, index, old.attempt + 1, self.ctl is not None),
        )
        self.jobs[job.id] = job
        self.queued[job.id] = job
        self.queue_version += 1
        self.hook(job, "queued")
        self.scan()

    # -- the workload and faults

    def arrive(self, pr: dict[str, Any]) -> None:
        run_id = 500_000 + pr["pr"]
        for index, entry in enumerate(pr["entries"]):
            entry = {**entry, "_index": index}
            job = BJob(
                next(self.job_ids),
                run_id,
                pr["pr"],
                [],
                int(entry.get("node-count") or 1),
                float(entry["_duration"]),
                self.t,
                entry=entry,
            )
            job.labels = job_labels(entry, pr, run_id, index, 1, self.ctl is not None)
            self.jobs[job.id] = job
            self.queued[job.id] = job
            self.hook(job, "queued")
        self.queue_version += 1
        self.scan()

    def cancel(self, pr: int) -> None:
        for job in self.jobs.values():
            if job.pr == pr and job.status == "queued":
                job.status, job.end = "cancelled", self.t
                self.queued.pop(job.id, None)
                self.hook(job, "completed", "cancelled")
        self.queue_version += 1

    def offline(self, rid: int, on: bool) -> None:
        r = self.runners[rid]
        r.online = on
        if not on and r.job is not None and r.job > 0:
            self.end(self.jobs[r.job], "runner_lost")
        self.scan()

    # -- the controller

    def on_hook(self, payload: dict[str, Any], pr: int) -> None:
        apply_workflow_job(self.facts, payload, self.now(), pr)
        if not self.tick_pending:
            self.tick_pending = True
            self.at(2.0, "reconcile")

    def reconcile(self) -> None:
        self.tick_pending = False
        if self.ctl is None:
            return
        if not self.learn_avoid:
            self.facts.avoid.clear()
        self.last_result = reconcile(self.facts, Gateway(self), self.ctl, self.now())
        self.at(2.0, "scan")

    # -- the loop and what it measures

    def account(self, t: float) -> None:
        dt = t - self.last
        if dt > 0:
            online = [r for r in self.runners.values() if r.online]
            self.online_time += dt * len(online)
            counted = self.idle_while_waiting(online)
            self.idle_wait += dt * len(counted)
            for r in counted:
                self.idle_by_cause[cause(self, r)] += dt
        self.last = t

    def idle_while_waiting(self, online: list[BRunner]) -> list[BRunner]:
        idle = [r for r in online if r.job is None or (r.job < 0 and self.jobs[-r.job].status == "gathering")]
        if not idle or not self.queued:
            return []
        waiting = list(self.queued.values())
        pool = [r for r in idle if POOL in r.base]
        single = any(j.nodes == 1 and SINGLE in j.labels for j in waiting)
        multi = min((j.nodes for j in waiting if POOL in j.labels), default=None)
        out = [r for r in idle if SINGLE in r.base] if single else []
        if multi is not None and len(pool) >= multi:
            out += pool
        return out

    def queued_by_label(self) -> dict[str, list[BJob]]:
        """Queued jobs by their lowercased ``ci-job-`` and lease labels (rebuilt when the queue moves)."""
        if self._by_label[0] != self.queue_version:
            out: dict[str, list[BJob]] = {}
            for job in self.queued.values():
                c = sl.read_contract(job.labels)
                if isinstance(c, sl.ContractLabels):
                    out.setdefault(c.job_label.lower(), []).append(job)
                    if c.nodes > 1:
                        out.setdefault(sl.lease_label(c.token, c.attempt).lower(), []).append(job)
            self._by_label = (self.queue_version, out)
        return self._by_label[1]

    def run(self, prs: list[dict[str, Any]]) -> None:
        self.prs = {p["pr"]: p for p in prs}
        for p in prs:
            heapq.heappush(self.events, (p["at"], next(self.seq), "arrive", p))
        for i in (i for i in (8, 20) if i < len(prs)):
            heapq.heappush(self.events, (prs[i]["at"] + 3600, next(self.seq), "cancel", prs[i]["pr"]))
        rid, off, on = OUTAGE
        heapq.heappush(self.events, (off, next(self.seq), "offline", (rid, False)))
        heapq.heappush(self.events, (on, next(self.seq), "offline", (rid, True)))
        if self.ctl is not None:
            heapq.heappush(self.events, (60.0, next(self.seq), "tick", None))
        while self.events:
            t, _, kind, data = heapq.heappop(self.events)
            if (
                kind == "tick"
                and not any(j.status in ("queued", "in_progress", "gathering") for j in self.jobs.values())
                and not self.events
            ):
                break
            self.account(t)
            self.t = t
            self.dispatch(kind, data)

    def dispatch(self, kind: str, data: Any) -> None:
        if kind == "arrive":
            self.arrive(data)
        elif kind == "end":
            self.end(self.jobs[data])
        elif kind == "rerun":
            self.rerun(self.jobs[data])
        elif kind == "hook":
            self.on_hook(*data)
        elif kind == "reconcile":
            self.reconcile()
        elif kind == "scan":
            self.scan()
        elif kind == "cancel":
            self.cancel(data)
        elif kind == "offline":
            self.offline(*data)
        elif kind == "tick":
            self.reconcile()
            self.at(60.0, "tick")


class Gateway:
    """The runners API on the bench's world (``app.flows.scheduler.runner_control.RunnerGateway``),
    every call counted."""

    def __init__(self, world: World) -> None:
        self.w = world

    def list_runners(self, repo: str) -> list[dict[str, Any]]:
        rows = [r.row() for r in self.w.runners.values()]
        for _ in range(max(1, -(-len(rows) // 100))):
            self.w.count("list-runners")
        return rows

    def get_runner(self, repo: str, runner_id: int) -> dict[str, Any]:
        self.w.count("get-runner")
        return self.w.runners[runner_id].row()

    def add_runner_labels(self, repo: str, runner_id: int, labels: list[str]) -> list[str]:
        self.w.count("add-labels")
        r = self.w.runners[runner_id]
        have = {x.lower() for x in r.labels()}
        r.custom += [x for x in labels if x.lower() not in have]
        self.w.at(2.0, "scan")
        return r.labels()

    def remove_runner_label(self, repo: str, runner_id: int, name: str) -> list[str] | None:
        self.w.count("remove-label")
        r = self.w.runners[runner_id]
        match = [x for x in r.custom if x.lower() == name.lower()]
        if not match:
            return None
        r.custom.remove(match[0])
        return r.labels()

    def queued_jobs(self, repo: str) -> list[dict[str, Any]] | None:
        if self.w.listed_version == self.w.queue_version:
            return None  # 304: free
        self.w.listed_version = self.w.queue_version
        queued = list(self.w.queued.values())
        self.w.count("list-runs")
        for _ in {j.run_id for j in queued}:
            self.w.count("list-jobs")
        return [
            {
                "id": j.id,
                "run_id": j.run_id,
                "labels": j.labels,
                "created_at": (EPOCH + timedelta(seconds=j.created)).isoformat(),
            }
            for j in queued
        ]
