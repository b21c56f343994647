"""The priority controller on GitHub's runner-label contract, at scale on a virtual clock.

50 PRs / 2,000 jobs on 9 single-node mi355x runners plus a multi-node pool of 8 (``cluster:b200-nv``,
jobs of ``nodes:2..4``), faults injected (bench/labelsim.py), three strategies in one run:

- ``fifo``: the variable off, no controller: GitHub hands each idle runner the oldest queued job
  whose labels it carries (a multi-node job gathers its nodes as the pool frees them);
- ``score+aging``: the repo's documented controller: score from the label + 0.25 per hour queued,
  nothing else (no fair share, no pool hold, no memory of infrastructure failures);
- ``sweepbot``: ``app.core.schedplan.Policy()`` through the live flow ``app.flows.scheduler.runner_control``.

Printed for each: idle runner time while a compatible job waited (share of online runner time),
makespan / lower bound, p95 first-job wait of the high-priority PRs (every 5th PR is a ``push``:
+2.0) and its ratio to FIFO's, Jain's index of runner-time across backlogged PRs in contended hours,
the longest wait of any job, GitHub calls per job (label writes, runner reads, the fallback
listing). Aims for sweepbot: < 1%, <= 1.03, <= 0.5x, >= 0.9, < 6 h, <= 4.

    .venv/bin/python bench/scheduler.py                      # full scale, three strategies
    .venv/bin/python bench/scheduler.py --prs 10 --jobs 200  # small
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.core.schedplan import Policy  # noqa: E402
from bench.labelbounds import wait_bound  # noqa: E402
from bench.labelfair import jain, jain_bound, jain_by_class  # noqa: E402
from bench.labelsim import POOL, Config, World, workload  # noqa: E402

STRATEGIES = ("fifo", "score+aging", "sweepbot")


@dataclass
class Figures:
    strategy: str
    jobs: int
    idle_while_waiting: float
    idle_causes: dict[str, float]  # share of online runner time, by cause (bench/labelsim_idle.py)
    makespan_h: float
    lower_bound_h: float
    ratio: float
    p95_high_first_wait_min: float
    p95_vs_fifo: float
    jain_contended: float | None
    contended_windows: int
    jain_bound: float | None  # the most any division of the same runner-time reaches (labelfair.py)
    jain_by_class: float | None
    class_windows: int
    longest_wait_h: float
    wait_bound_h: float  # no schedule of this run's work waits less (bench/labelbounds.py)
    calls_per_job: float
    calls: dict[str, int]
    wall_s: float


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def lower_bound(w: World, prs: list[dict[str, object]]) -> float:
    """Per class (single-node, pool): max over arrivals a of a + work arriving >= a / runners; and
    every PR's arrival plus its longest job. Work is what the run executed (lost halves included)."""
    bound = 0.0
    for pool, cap in ((False, w.cfg.runners), (True, w.cfg.pool)):
        arrivals = sorted(
            (
                (j.created, (j.end - j.work_start) * j.nodes)
                for j in w.jobs.values()
                if j.work_start is not None and j.end is not None and (POOL in j.labels) == pool
            ),
            key=lambda x: x[0],
        )
        rest = sum(x[1] for x in arrivals)
        for a, work in arrivals:
            bound = max(bound, a + rest / cap)
            rest -= work
    for job in w.jobs.values():
        if job.work_start is not None and job.end is not None:
            bound = max(bound, job.created + job.end - job.work_start)
    return bound


def figures(strategy: str, cfg: Config, fifo_p95: float | None) -> Figures:
    started = time.monotonic()
    prs = workload(cfg)
    w = World(cfg, strategy)
    w.run(prs)
    done = [j for j in w.jobs.values() if j.status == "completed"]
    makespan = max(j.end or 0.0 for j in done)
    bound = lower_bound(w, prs)
    first: dict[int, float] = {}
    for j in done:
        if j.start is not None:
            first[j.pr] = min(first.get(j.pr, j.start), j.start)
    high = [first[p["pr"]] - float(p["at"]) for p in prs if p["high"] and p["pr"] in first]
    p95 = percentile(high, 0.95)
    waits = [j.start - j.created for j in done if j.start is not None]
    fair, windows = jain(w)
    by_class, class_windows = jain_by_class(w)
    best = jain_bound(w)
    return Figures(
        strategy=strategy,
        jobs=len(done),
        idle_while_waiting=round(w.idle_wait / w.online_time, 4),
        idle_causes={k: round(v / w.online_time, 5) for k, v in w.idle_by_cause.items() if v > 0},
        makespan_h=round(makespan / 3600, 2),
        lower_bound_h=round(bound / 3600, 2),
        ratio=round(makespan / bound, 3),
        p95_high_first_wait_min=round(p95 / 60, 1),
        p95_vs_fifo=round(p95 / fifo_p95, 3) if fifo_p95 else 1.0,
        jain_contended=round(fair, 3) if fair is not None else None,
        contended_windows=windows,
        jain_bound=round(best, 3) if best is not None else None,
        jain_by_class=round(by_class, 3) if by_class is not None else None,
        class_windows=class_windows,
        longest_wait_h=round(max(waits) / 3600, 2),
        wait_bound_h=round(wait_bound(w) / 3600, 2),
        calls_per_job=round(sum(w.calls.values()) / cfg.jobs, 3),
        calls=dict(sorted(w.calls.items())),
        wall_s=round(time.monotonic() - started, 1),
    )


ROWS = (
    ("jobs", "jobs run (attempts)"),
    ("idle_while_waiting", "idle while a compatible job waits"),
    ("makespan_h", "makespan h"),
    ("lower_bound_h", "lower bound h"),
    ("ratio", "makespan / lower bound"),
    ("p95_high_first_wait_min", "p95 first-job wait, high PRs, min"),
    ("p95_vs_fifo", "  vs FIFO"),
    ("jain_contended", "Jain's index, contended hours"),
    ("contended_windows", "  contended hours"),
    ("jain_bound", "  most any schedule reaches"),
    ("jain_by_class", "Jain's index per runner class"),
    ("class_windows", "  contended (hour, class)"),
    ("longest_wait_h", "longest wait of a job h"),
    ("wait_bound_h", "  lower bound on it h"),
    ("calls_per_job", "GitHub calls / job"),
    ("wall_s", "wall s"),
)


def table(rows: list[Figures]) -> str:
    lines = [f"{'figure':40s}" + "".join(f"{f.strategy:>14s}" for f in rows)]
    for key, label in ROWS:
        cells = ("n/a" if getattr(f, key) is None else str(getattr(f, key)) for f in rows)
        lines.append(f"{label:40s}" + "".join(f"{c:>14s}" for c in cells))
    lines += [f"calls of {f.strategy}: {json.dumps(f.calls)}" for f in rows if f.calls]
    for f in rows:
        if f.idle_causes:
            parts = ", ".join(f"{k} {v:.2%}" for k, v in sorted(f.idle_causes.items(), key=lambda kv: -kv[1]))
            lines.append(f"idle of {f.strategy} by cause (share of online runner time): {parts}")
    return "\n".join(lines)


def policy_of(text: str) -> Policy | None:
    """``--policy aging_per_hour=2,starve_after_hours=none``: Policy() with those fields changed."""
    if not text:
        return None
    fields: dict[str, float | None] = {}
    for pair in text.split(","):
        name, _, value = pair.partition("=")
        fields[name.strip()] = None if value.strip().lower() == "none" else float(value)
    return replace(Policy(), **fields)  # type: ignore[arg-type]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prs", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--policy", default="", help="sweepbot's Policy fields to try: NAME=VALUE,...")
    ap.add_argument("--half-life", type=float, default=None, help="hours a PR's recent use halves in")
    args = ap.parse_args()
    cfg = Config(
        prs=args.prs,
        jobs=args.jobs,
        seed=args.seed,
        multi_prs=max(1, args.prs // 10),
        mean_gap_s=1500.0 * 50 / max(1, args.prs) * args.jobs / 2000,
        policy=policy_of(args.policy),
        half_life_hours=args.half_life,
    )
    rows: list[Figures] = []
    fifo_p95: float | None = None
    for name in args.strategies.split(","):
        f = figures(name, cfg, fifo_p95)
        if name == "fifo":
            fifo_p95 = f.p95_high_first_wait_min * 60
        rows.append(f)
    print(json.dumps([asdict(f) for f in rows], indent=2) if args.json else table(rows))


if __name__ == "__main__":
    main()
