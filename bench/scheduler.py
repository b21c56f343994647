"""Scheduler benchmark: five PRs each ask for a full 8k1k sweep (conc 1..512) on 9 mi355x runners.

Runs the real scheduler (tick + repair poll, SQLite) against the in-process sim with scaled time and
prints, in simulated seconds:
- makespan / lower bound, the bound being max(total work / runners, longest job);
- idle share of runner time while any job was waiting;
- the longest wait of any PR's first job.

    .venv/bin/python bench/scheduler.py [--time-scale 0.02] [--prs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-scale", type=float, default=0.02, help="real seconds per simulated second")
    parser.add_argument("--prs", type=int, default=5)
    parser.add_argument("--poll", type=float, default=0.01, help="real seconds between scheduler loops")
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="sweepbot-bench-")
    os.environ.update(
        {
            "SWEEPBOT_DATA_DIR": tmp,
            "SWEEPBOT_DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite3",
            "SWEEPBOT_GITHUB_TOKEN": "sim-token",
            "SWEEPBOT_LOG_LEVEL": "WARNING",
        }
    )
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

    from sim.scenario import SeedScenario
    from sim.server import SimServer
    from sim.world import SimSettings

    with SimServer(settings=SimSettings(time_scale=args.time_scale, seed=11)) as sim:
        scenario = SeedScenario(sim.world)
        scenario.load()
        facts = scenario.facts
        os.environ["SWEEPBOT_GITHUB_API_URL"] = sim.github_api_url
        from sqlalchemy import select

        from app.adapters.github import gateway
        from app.db import session_factory
        from app.flows import ring, scheduler
        from app.migrate import upgrade
        from app.models.sweeps import JobState, SweepJob
        from app.settings import get_settings, reset_settings_cache

        reset_settings_cache()
        settings = get_settings()
        upgrade(settings.database_url)
        ring.enqueue = lambda task, *a, **kw: True  # type: ignore[assignment]  # no broker in the bench
        factory = session_factory()

        def gw(session: Any) -> Any:
            return gateway(get_settings(), session)

        repo, key = facts["bench_repo"], facts["config_key"]
        world = sim.world
        head = world.resolve(world.repo(repo), facts["recipe_branch"])
        prs = [facts["recipe_pr"]]
        for i in range(1, args.prs):
            branch = f"bench-sweep-{i}"
            world.set_ref(repo, f"refs/heads/{branch}", head, pusher="carol-writer")
            prs.append(world.open_pull(repo, branch, "main", f"bench PR {i}", user="carol-writer").number)

        sweep_ids = []
        with factory() as s:
            for pr in prs:
                req = scheduler.request_sweep(
                    s,
                    gw(s),
                    repo=repo,
                    pr_number=pr,
                    config_key=key,
                    requested_by="bench",
                    reason="api",
                    filters=scheduler.SweepFilters(seq="8k1k"),
                )
                sweep_ids.append(req.sweep.id)
            s.commit()
        t0 = time.time()  # requests are planned; the clock starts when jobs can be released
        loops = 0
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            loops += 1
            scheduler.tick(factory, gw)
            scheduler.repair_jobs(factory, gw)
            with factory() as s:
                open_jobs = s.scalars(select(SweepJob).where(SweepJob.state.notin_(JobState.FINAL))).all()
                for job in open_jobs:
                    if job.run_conclusion == "success":  # collection stands in for the results capability
                        scheduler.finish_job(s, job.id, JobState.SUCCEEDED)
                s.commit()
            if not open_jobs:
                break
            time.sleep(args.poll)
        with world.lock:
            jobs = [(j.started_at, j.completed_at, j.run_id) for j in world.jobs.values()]
            run_sweep = {r.id: int(r.name.split("-")[1]) for r in world.runs.values()}
        with factory() as s:
            counts = {sid: scheduler.sweep_summary(s, sid)["counts"] for sid in sweep_ids}

    scale = args.time_scale
    spans = [
        ((a - t0) / scale, (b - t0) / scale, rid) for a, b, rid in jobs if a is not None and b is not None
    ]
    runners = 9
    work = sum(b - a for a, b, _ in spans)
    longest = max(b - a for a, b, _ in spans)
    makespan = max(b for _, b, _ in spans)
    bound = max(work / runners, longest)
    # idle runner share while any job waited (a job waits from t0 until it starts on a runner)
    events = sorted({0.0, *(a for a, _, _ in spans), *(b for _, b, _ in spans)})
    idle = total = 0.0
    for lo, hi in zip(events, events[1:], strict=False):
        mid = (lo + hi) / 2
        waiting = sum(1 for a, _, _ in spans if a > mid)
        if waiting:
            busy = sum(1 for a, b, _ in spans if a <= mid < b)
            idle += (runners - busy) * (hi - lo)
            total += runners * (hi - lo)
    first_wait = {}
    for a, _, rid in spans:
        sid = run_sweep[rid]
        first_wait[sid] = min(first_wait.get(sid, a), a)
    out = {
        "jobs": len(spans),
        "runners": runners,
        "makespan_s": round(makespan),
        "lower_bound_s": round(bound),
        "ratio": round(makespan / bound, 3),
        "idle_share_while_queued": round(idle / total, 4) if total else 0.0,
        "longest_first_job_wait_s": round(max(first_wait.values())),
        "total_work_s": round(work),
        "longest_job_s": round(longest),
        "scheduler_loops": loops,
        "time_scale": scale,
        "sweep_states": counts,
    }
    print(f"makespan {out['makespan_s']} s / lower bound {out['lower_bound_s']} s = ratio {out['ratio']}")
    print(f"idle runner share while jobs were queued: {out['idle_share_while_queued']:.1%}")
    print(f"longest wait of any PR's first job: {out['longest_first_job_wait_s']} s (simulated)")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
