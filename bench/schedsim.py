"""The scheduler at scale on a virtual clock: the harness of bench/scheduler_holds.py and its test.

The real bot code (request_sweep, tick, the workflow_job/workflow_run handlers, the repair poll,
collection, the sticky report) runs against the sim's GitHub API over HTTP (a SimServer on
loopback, the production gateway and its ETag cache), and every GitHub call is counted by the
sim. Time is virtual: the sim's clock (``sim.world.time``) is replaced by ``VirtualClock`` and the
driver jumps from one event to the next (a job ends, a webhook is due, a PR arrives, a beat task
is due), so thousands of simulated hours take minutes and nothing sleeps.

Injected: PRs arriving over time (a burst, then exponential gaps), some with high priority;
runners lost mid-job (an infrastructure failure the bot retries); runs cancelled through the API;
sweeps cancelled by their PR; a share of webhook deliveries that never arrive (GitHub does not
retry them), which only the repair poll recovers.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KEY = "minimaxm3-fp4-mi355x-vllm"
LABEL = "mi355x"
POLL_OPS = ("actions/get-workflow-run", "actions/list-workflow-runs", "actions/list-workflow-runs-for-repo")
REPORT_OPS = ("issues/list-comments", "issues/update-comment", "issues/create-comment")


@dataclass
class Config:
    prs: int = 50
    conc_end: int = 512  # concs 1, 2, 4 .. conc_end for each of 4 (seq-len, tp) spaces: 40 points at 512
    burst: int = 10  # PRs that arrive at t=0; the rest at exponential gaps
    mean_gap_s: float = 1800.0
    high_every: int = 5  # every 5th PR asks for priority high
    runner_lost_every: int = 50  # every Nth job start loses its runner (infrastructure failure)
    system_cancel_every: int = 40  # every Nth run is cancelled through the API 240 s in
    user_cancels: int = 2  # PRs that cancel their sweep halfway
    webhook_drop: float = 0.02  # deliveries GitHub failed to send
    webhook_delay_s: float = 1.0
    repair_interval_s: float = 120.0
    scheduler_interval_s: float = 15.0  # the beat's tick (webhooks ring one sooner)
    debounce_s: float = 30.0  # report flush interval
    strategy: str = "runpoll"  # "runpoll" (this code) | "baseline" (main before: get_run per job)
    rate_limit: int = 5000  # the sim's hourly limit per token (GitHub's for a user token)
    overcommit: int | str = "auto"  # SWEEPBOT_RUNNER_OVERCOMMIT: "auto" or jobs that may wait on GitHub
    # The real e2e-tests.yml never assigns EVALS (its `eval /` job fails unexpanded, no single-node
    # eval runs); True seeds a fixed copy whose get-jobs does (sim.getjobs.assign_evals).
    evals_assigned: bool = False
    seed: int = 7


@dataclass
class Figures:
    strategy: str
    jobs: int
    points: int
    runners: int
    makespan_s: float
    lower_bound_s: float
    ratio: float
    idle_share_while_queued: float
    idle_causes: dict[str, float]  # bench/schedsim_idle.py: shares of runner time while work waited
    p95_high_first_wait_s: float
    max_high_first_wait_s: float
    calls_total: int
    calls_rate_limited: int
    calls_not_modified: int
    calls_per_job: float
    poll_calls_per_job: float
    report_calls_per_job: float
    webhook_path_calls_per_job: float  # rate-limited calls outside the repair poll, per job
    report_edits: int
    job_events: int
    inflight_violations: int
    states: dict[str, int]
    eval_points: dict[str, int] = field(default_factory=dict)  # planned / scored / not_run (eval_not_run)
    by_operation: dict[str, dict[str, int]] = field(default_factory=dict)
    dropped_deliveries: int = 0
    injected: dict[str, int] = field(default_factory=dict)
    loops: int = 0
    budget_modes: dict[str, int] = field(default_factory=dict)  # repair polls by budget mode
    max_hour_calls: int = 0  # most rate-limited calls the sim counted in one of its hourly windows


class VirtualClock:
    """``time``-module stand-in for the sim: epoch seconds that move only when the driver says."""

    def __init__(self, start: float) -> None:
        self.now = start

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:  # nothing in a virtual run may wait for real
        raise RuntimeError(f"wall-clock sleep of {seconds} s on the virtual clock")


def pr_master(master: str, image_tag: str, conc_end: int) -> str:
    """Main's master config with the key's block rewritten: its own image, 4 spaces x concs."""
    start = master.index(f"{KEY}:\n")
    scen = master.index("  scenarios:\n", start)
    end = master.find("\n\n", scen)
    end = len(master) if end < 0 else end
    head = master[start:scen]
    head = "\n".join(
        f"  image: vllm/vllm-openai-rocm:{image_tag}" if line.startswith("  image:") else line
        for line in head.split("\n")
    )
    spaces = []
    for isl, tps in ((1024, (8, 4)), (8192, (4, 8))):
        spaces.append(f"    - isl: {isl}\n      osl: 1024\n      search-space:")
        spaces += [f"      - {{ tp: {tp}, conc-start: 1, conc-end: {conc_end} }}" for tp in tps]
    block = head + "  scenarios:\n    fixed-seq-len:\n" + "\n".join(spaces)
    return master[:start] + block + master[end:]


def _arrivals(cfg: Config, rng: random.Random) -> list[float]:
    out, t = [], 0.0
    for i in range(cfg.prs):
        if i >= cfg.burst:
            t += rng.expovariate(1.0 / cfg.mean_gap_s)
        out.append(t if i >= cfg.burst else 0.0)
    return out


def _env(tmp: str, cfg: Config) -> None:
    os.environ.update(
        {
            "SWEEPBOT_DATA_DIR": tmp,
            "SWEEPBOT_DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite3",
            "SWEEPBOT_GITHUB_TOKEN": "sim-token",
            "SWEEPBOT_LOG_LEVEL": "WARNING",
            "SWEEPBOT_JOB_REPAIR_INTERVAL": str(cfg.repair_interval_s),
            "SWEEPBOT_REPORT_DEBOUNCE_SECONDS": str(cfg.debounce_s),
            "SWEEPBOT_GITHUB_CONSISTENCY_DELAYS": "0",
            "SWEEPBOT_RUNNER_OVERCOMMIT": str(cfg.overcommit),
            # PyGithub's spacing of requests is wall time; the sim runs on a virtual clock
            "SWEEPBOT_GITHUB_SECONDS_BETWEEN_REQUESTS": "0",
            "SWEEPBOT_GITHUB_SECONDS_BETWEEN_WRITES": "0",
        }
    )


def _quiet() -> None:
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    logging.getLogger("httpx").setLevel(logging.WARNING)


def run(cfg: Config) -> Figures:
    """One bench run of ``cfg`` in a fresh sim and a fresh SQLite database."""
    _quiet()
    from bench.schedsim_driver import Driver

    shm = Path("/dev/shm")  # SQLite commits without fsync to disk when the machine has it
    tmp = tempfile.mkdtemp(prefix="sweepbot-bench-sched-", dir=str(shm) if shm.is_dir() else None)
    _env(tmp, cfg)
    driver = Driver(cfg, tmp)
    try:
        driver.setup()
        driver.loop()
        return driver.figures()
    finally:
        driver.close()
        shutil.rmtree(tmp, ignore_errors=True)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, int(round(q * (len(ordered) - 1)))))
    return ordered[k]


def lower_bound(
    arrivals: list[float], work: dict[int, float], longest: dict[int, float], runners: int
) -> float:
    """No schedule finishes before max over arrival times a of (a + work arriving at or after a / R),
    nor before any PR's arrival plus its longest job."""
    bound = 0.0
    for a in sorted(set(arrivals)):
        later = sum(w for i, w in work.items() if arrivals[i] >= a)
        bound = max(bound, a + later / runners)
    for i, job in longest.items():
        bound = max(bound, arrivals[i] + job)
    return bound


def idle_share(samples: list[tuple[float, int, int]], runners: int) -> float:
    """Idle runner time while some released work waited / runner time while work waited.

    ``samples``: (t, busy runners, waiting jobs) at every event; state is constant in between.
    """
    idle = total = 0.0
    for (t0, busy, waiting), (t1, _, _) in zip(samples, samples[1:], strict=False):
        if waiting > 0 and t1 > t0:
            idle += max(0, runners - busy) * (t1 - t0)
            total += runners * (t1 - t0)
    return idle / total if total else 0.0


def utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


Callback = Callable[[], None]
