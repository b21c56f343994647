"""Story budget: GitHub API cost and reaction time of the whole story against the simulator.

Runs the ``both-merge`` variant of the seed story (so "the nightly that contains the last
dependency" is a real event) with the bot as separate API, worker and beat processes, then
watches a quiet window of several poll cycles. Prints:

- GitHub API calls of the whole story: total, rate-limited, conditional 304s, by operation, and
  rate-limited calls per dispatched job;
- rate-limited calls during the quiet window (aim: 0 — a poll that finds nothing new is free);
- seconds from that nightly's push to "bump committed" and to "first job dispatched"
  (aim: the bump within one poll interval).

    .venv/bin/python bench/story.py [--postgres] [--quiet-cycles 5]

``--postgres`` runs on PostgreSQL + Redis at 127.0.0.1 (the production shape); the default is
the embedded SQLite + SQLAlchemy broker.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# What a job costs after its sweep is planned: dispatch, following the run, collection, the report.
JOB_OPS = (
    "actions/create-workflow-dispatch",
    "actions/get-workflow-run",
    "actions/list-workflow-runs",
    "actions/list-workflow-runs-for-repo",
    "actions/list-jobs-for-workflow-run",
    "checks/list-annotations",
    "actions/list-workflow-run-artifacts",
    "actions/download-artifact",
    "issues/list-comments",
    "issues/create-comment",
    "issues/update-comment",
)
PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--postgres", action="store_true", help="PostgreSQL + Redis instead of the embedded default"
    )
    parser.add_argument("--quiet-cycles", type=int, default=5, help="poll cycles to watch after the story")
    parser.add_argument("--time-scale", type=float, default=0.001)
    args = parser.parse_args()

    from sqlalchemy import create_engine, func, select, text

    from app.db import dispose_engines, session_factory
    from app.models.sweeps import SweepJob
    from app.settings import Settings, reset_settings_cache
    from devstack.demo import play_story
    from devstack.launcher import SIM_CADENCE, stack
    from sim.scenario import SeedScenario
    from sim.server import SimServer, free_port
    from sim.world import SimSettings

    tmp = Path(tempfile.mkdtemp(prefix="sweepbot-bench-story-"))
    db_name = f"sweepbot_story_{uuid.uuid4().hex[:8]}"
    admin = None
    if args.postgres:
        admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{db_name}"'))
        db_url, broker = PG_ADMIN.rsplit("/", 1)[0] + "/" + db_name, "redis://127.0.0.1:6379/13"
    else:
        db_url, broker = f"sqlite:///{tmp / 'sweepbot.sqlite3'}", f"sqla+sqlite:///{tmp / 'broker.sqlite3'}"
    import os

    os.environ.update(
        {"SWEEPBOT_DATA_DIR": str(tmp), "SWEEPBOT_DATABASE_URL": db_url, "SWEEPBOT_BROKER_URL": broker}
    )
    reset_settings_cache()
    poll = float(SIM_CADENCE["SWEEPBOT_POLL_INTERVAL"])
    extra = {"SWEEPBOT_QUEUE_NAME": f"bench-{uuid.uuid4().hex[:8]}"}
    try:
        with SimServer(settings=SimSettings(time_scale=args.time_scale, seed=3)) as sim:
            scenario = SeedScenario(sim.world, variant="both-merge")
            with stack(port=free_port(), sim=sim, settings=Settings(), extra_env=extra):
                run = play_story(
                    sim.world, scenario, session_factory(), say=lambda _: None, poll_interval=poll
                )
                story_calls = sim.world.call_summary()
                with session_factory()() as session:  # the sweep jobs the story ran (reused ones too)
                    jobs = int(session.scalar(select(func.count(SweepJob.id))) or 0)
                    ran = int(
                        session.scalar(select(func.count(SweepJob.id)).where(SweepJob.run_id.is_not(None)))
                        or 0
                    )
                time.sleep(poll)  # let the last report flush land
                before = sim.world.call_summary()
                time.sleep(args.quiet_cycles * poll)
                after = sim.world.call_summary()
    finally:
        dispose_engines()
        if admin is not None:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)'))
            admin.dispose()

    marks = run.marks
    resolved = marks.get("last_dependency_resolved")
    to_bump = (
        marks["bump_committed"] - resolved if resolved is not None and "bump_committed" in marks else None
    )
    to_dispatch = (
        marks["first_dispatch"] - resolved if resolved is not None and "first_dispatch" in marks else None
    )
    quiet_limited = after["rate_limited"] - before["rate_limited"]
    quiet_total = after["total"] - before["total"]
    print(
        f"backend: {'PostgreSQL + Redis' if args.postgres else 'embedded (SQLite + SQLAlchemy broker)'}; "
        f"poll interval {poll:.0f} s; story checks {'all ok' if run.report.ok else 'FAILED'}"
    )
    print(
        f"story GitHub calls: total {story_calls['total']}, rate-limited {story_calls['rate_limited']}, "
        f"conditional 304 {story_calls['not_modified']}"
    )
    if ran:
        by_op = story_calls["by_operation"]
        job_calls = sum(
            n for op in JOB_OPS for status, n in by_op.get(op, {}).items() if status not in ("304", "404")
        )
        print(
            f"rate-limited calls per job: {story_calls['rate_limited'] / ran:.2f} for the whole story "
            f"(bump, commands, recovery included), {job_calls / ran:.2f} on the job path "
            f"(dispatch, run reads, artifacts, the report comment; aim <= 4); {ran} jobs dispatched of {jobs}"
        )
    for op, statuses in sorted(story_calls["by_operation"].items()):
        print(f"  {op:45s} {json.dumps(statuses)}")
    print(
        f"quiet window ({args.quiet_cycles} poll cycles): {quiet_total} calls, {quiet_limited} rate-limited "
        f"(aim 0)"
    )
    if to_bump is not None and to_dispatch is not None:
        print(
            f"nightly with the last dependency -> bump committed: {to_bump:.2f} s "
            f"({to_bump / poll:.2f} poll intervals; aim <= 1)"
        )
        print(f"nightly with the last dependency -> first job dispatched: {to_dispatch:.2f} s")
    if not run.report.ok:
        for check in run.report.checks:
            if not check.ok:
                print(f"FAILED {check.name}: {check.detail}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
