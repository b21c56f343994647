"""Scheduler benchmark at scale on a virtual clock: 50 PRs, 2,000 points, 9 mi355x runners.

The real bot (request_sweep, tick, the webhook handlers, the repair poll, collection, the sticky
report) against the sim's GitHub API on loopback, with every call counted by the sim; the sim's
clock is virtual, so nothing sleeps (bench/schedsim.py). PRs arrive over time (a burst of 10, then
exponential gaps), every 5th asks for priority high; runners are lost mid-job, runs are cancelled
through the API, two PRs cancel their sweep, 2% of webhook deliveries never arrive.

The same workload runs twice in one invocation: ``baseline`` (the repair poll of main before
issue 19: one get-workflow-run per in-flight job per poll, the report looked up before every edit,
a run's job list read on every workflow_job event whose name two points share) and ``runpoll``
(this code), each in a process of its own. Printed for each, in simulated seconds:

- makespan / lower bound (aim <= 1.05), the bound being, over every arrival time a,
  a + (work arriving at or after a) / runners, and every PR's arrival plus its longest job;
- idle share of runner time while released work waited (aim < 2%);
- p95 wait of a high-priority PR's first job (arrival to start on a runner);
- rate-limited GitHub calls per job: all, the repair poll's, the report's, and the webhook path's
  (everything but the poll; aim <= 4); and the ratio runpoll / baseline.

``--overcommit`` is ``SWEEPBOT_RUNNER_OVERCOMMIT``: ``auto`` (the default, as the bot's) or N.
``--evals-assigned`` seeds a fixed e2e-tests.yml: the real one (843c6254) never assigns EVALS, so
its `eval /` job fails unexpanded and no single-node eval runs (docs/sim.md).

    .venv/bin/python bench/scheduler_holds.py                  # full scale, both strategies
    .venv/bin/python bench/scheduler_holds.py --prs 4 --conc-end 8 --strategies runpoll
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.schedsim import Config, Figures, run  # noqa: E402

ROWS = (
    ("jobs", "jobs (points)"),
    ("makespan_s", "makespan s"),
    ("lower_bound_s", "lower bound s"),
    ("ratio", "makespan / lower bound"),
    ("idle_share_while_queued", "idle share while queued"),
    ("p95_high_first_wait_s", "p95 first-job wait, high priority s"),
    ("calls_per_job", "rate-limited calls / job"),
    ("webhook_path_calls_per_job", "  webhook path (all but the poll) / job"),
    ("poll_calls_per_job", "  repair poll / job"),
    ("report_calls_per_job", "  report comment / job"),
    ("report_edits", "report edits"),
    ("job_events", "job webhook events"),
    ("calls_not_modified", "conditional 304s (free)"),
    ("inflight_violations", "times more in flight than runners"),
)


def table(figures: list[Figures]) -> str:
    names = [f.strategy for f in figures]
    head = f"{'figure':42s}" + "".join(f"{n:>12s}" for n in names)
    if len(figures) == 2:
        head += f"{'ratio':>10s}"
    lines = [head]
    for key, label in ROWS:
        values = [getattr(f, key) for f in figures]
        line = f"{label:42s}" + "".join(f"{v:>12}" for v in values)
        if len(values) == 2 and isinstance(values[0], int | float) and values[0]:
            line += f"{values[1] / values[0]:>10.3f}"
        lines.append(line)
    return "\n".join(lines)


def _overcommit(value: str) -> int | str:
    """``auto`` or a whole number, as the setting takes it."""
    if value.strip().lower() == "auto":
        return "auto"
    if not value.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{value!r} is not auto or a whole number of jobs")
    return int(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prs", type=int, default=50)
    parser.add_argument(
        "--conc-end", type=int, default=512, help="concs 1..N (powers of 2) x 4 spaces per PR"
    )
    parser.add_argument("--strategies", default="baseline,runpoll")
    parser.add_argument("--burst", type=int, default=10, help="PRs that arrive at t=0")
    parser.add_argument("--mean-gap", type=float, default=1800.0, help="mean seconds between later PRs")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--overcommit",
        type=_overcommit,
        default="auto",
        help="SWEEPBOT_RUNNER_OVERCOMMIT: auto (the default) or N jobs that may wait on GitHub",
    )
    parser.add_argument(
        "--evals-assigned",
        action="store_true",
        help="seed a fixed e2e-tests.yml whose get-jobs assigns EVALS (the real one never does, so its "
        "`eval /` job fails unexpanded and no single-node eval runs)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    configs = [
        Config(
            prs=args.prs,
            conc_end=args.conc_end,
            burst=args.burst,
            mean_gap_s=args.mean_gap,
            strategy=name.strip(),
            seed=args.seed,
            overcommit=args.overcommit,
            evals_assigned=args.evals_assigned,
        )
        for name in args.strategies.split(",")
    ]
    started = time.monotonic()
    # Each strategy in a process of its own (own sim, database and settings), side by side.
    with ProcessPoolExecutor(max_workers=len(configs), mp_context=get_context("spawn")) as pool:
        figures = list(pool.map(run, configs))
    print(
        f"{sum(f.jobs for f in figures)} jobs in {time.monotonic() - started:.0f} s of wall time, "
        f"SWEEPBOT_RUNNER_OVERCOMMIT={args.overcommit}, e2e-tests.yml "
        + ("fixed (EVALS assigned)" if args.evals_assigned else "as at 843c6254 (`eval /` never expands)"),
        flush=True,
    )
    print(table(figures))
    for f in figures:
        print(
            f"{f.strategy}: states {f.states}; injected {f.injected}; "
            f"dropped deliveries {f.dropped_deliveries}; eval points {f.eval_points}"
        )
        print(f"{f.strategy}: idle while work waited, by cause {f.idle_causes}")
        print(f"{f.strategy}: by operation " + json.dumps(f.by_operation, sort_keys=True))
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(f) for f in figures], indent=2))
    # More in flight than runners is a fault only under the strict hold; an overcommit has jobs
    # wait on GitHub for a runner by design (counted and printed all the same).
    return 1 if args.overcommit == 0 and any(f.inflight_violations for f in figures) else 0


if __name__ == "__main__":
    raise SystemExit(main())
