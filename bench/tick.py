"""One scheduler tick's cost against the queue's length: main before issue 19 vs this code.

A SQLite database (on /dev/shm when there is one, as bench/scheduler_holds.py) holds N queued jobs: N / 40
sweeps of 40 points each (4 search spaces x 10 concs, a dispatch per conc holding 4 runners, the
workload of bench/scheduler_holds.py), as many finished jobs as history, and stored results of other
images (so every reuse lookup searches and misses). The label has 9 runners, none busy: a tick
releases three dispatches with the default ``SWEEPBOT_RUNNER_OVERCOMMIT=auto`` (the third's 3 jobs
wait on GitHub for a runner), two with ``=0``, and holds the rest. Timed: the label's part of the
tick under its lock (``app.flows.scheduler.tick._claim_label``: in-flight count, the queue, reuse lookups, the
plan, the claims), rolled back after each run so every run sees the same queue; the median of
``--repeat`` runs.

``baseline`` is main before this change: every queued job and its sweep loaded as ORM objects
(with the point's JSON), and one reuse lookup (two queries) per sweep head, per tick. ``batched``
is this code: the queue read as four columns, the sweeps once, every head's reuse lookup in two
queries, and only the jobs the plan acts on loaded whole. Both must plan the same releases.

    .venv/bin/python bench/tick.py                      # queues of 100, 1,000 and 5,000 jobs
    .venv/bin/python bench/tick.py --sizes 200,2000 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LABEL = "mi355x"
REPO = "bench/InferenceX"
CONCS = (512, 256, 128, 64, 32, 16, 8, 4, 2, 1)  # the sweep's point order: largest conc first
SPACES = (("1k1k", 8), ("1k1k", 4), ("8k1k", 4), ("8k1k", 8))


# ------------------------------------------------------------------ baseline: main's tick, copied


def _baseline_queued(session: Any, label: str) -> list[tuple[Any, Any]]:
    from sqlalchemy import select

    from app.models.sweeps import JobState, Sweep, SweepJob, SweepState

    rows = session.execute(
        select(SweepJob, Sweep)
        .join(Sweep, Sweep.id == SweepJob.sweep_id)
        .where(
            SweepJob.runner_label == label,
            SweepJob.state == JobState.QUEUED,
            Sweep.state == SweepState.ACTIVE,
        )
        .order_by(Sweep.priority, Sweep.last_release, Sweep.id, SweepJob.position)
    ).all()
    return [(job, sweep) for job, sweep in rows]


def _baseline_queues(rows: list[tuple[Any, Any]], known: dict[int, Any]) -> list[Any]:
    from app.core.release_plan import QueuedJob, SweepQueue
    from app.models.sweeps import CANARY_REASON

    jobs: dict[int, list[Any]] = {}
    sweeps: dict[int, Any] = {}
    for job, sweep in rows:
        jobs.setdefault(sweep.id, []).append(job)
        sweeps[sweep.id] = sweep
    return [
        SweepQueue(
            sweep_id=sid,
            priority=sweeps[sid].priority,
            jobs=tuple(
                QueuedJob(j.id, j.group_key, j.slots, (known[j.id] is not None) if j.id in known else None)
                for j in queued
            ),
            canary=sweeps[sid].reason == CANARY_REASON,
            repo=sweeps[sid].repo,
        )
        for sid, queued in jobs.items()
    ]


def _baseline_plan(
    session: Any, label: str, rows: list[tuple[Any, Any]], capacity: int, in_flight: int
) -> Any:
    from app.core.release_plan import plan_release
    from app.flows.scheduler.tick import _canary_hours
    from app.models.sweeps import CANARY_REASON
    from app.settings import get_settings
    from app.store import reuse

    by_id = {job.id: (job, sweep) for job, sweep in rows}
    hours = {s.repo: _canary_hours(session, s.repo) for _, s in rows if s.reason == CANARY_REASON}
    known: dict[int, Any] = {}

    def look_up(job: Any, sweep: Any) -> None:
        known[job.id] = reuse.reusable_for_point(
            session,
            image=sweep.image,
            fingerprint=sweep.fingerprint,
            result_name=job.result_name,
            point=job.point if isinstance(job.point, dict) else None,
        )

    heads: dict[int, tuple[Any, Any]] = {}
    for job, sweep in rows:
        heads.setdefault(sweep.id, (job, sweep))
    for job, sweep in heads.values():
        look_up(job, sweep)
    while True:
        # the release rule is the core's, shared (SWEEPBOT_RUNNER_OVERCOMMIT too): only the reads differ
        plan = plan_release(
            _baseline_queues(rows, known),
            capacity,
            in_flight,
            label=label,
            canary_hours=hours,
            overcommit=get_settings().runner_overcommit,
        )
        if not plan or plan[-1].action != "check":
            return plan, known
        look_up(*by_id[plan[-1].job_ids[0]])


def baseline_claim_label(session: Any, gw: Any, label: str, repo: str, result: Any) -> list[Any]:
    """app.flows.scheduler.tick._claim_label of main before issue 19 (reuse steps left out: none here)."""
    from app.flows.repo.bench_repo import label_capacity
    from app.flows.scheduler.tick import _claimed, _preempt_canaries
    from app.store.jobs import claim_group, inflight_slots
    from app.store.reports import mark_report_dirty
    from app.store.runnerlabels import lock_label

    row = lock_label(session, label)
    assert row is not None  # SQLite, ensure_label made it: no other tick holds it
    capacity, source = label_capacity(gw, label, repo)
    row.capacity, row.capacity_source = capacity, source
    in_flight = inflight_slots(session, label)
    if _preempt_canaries(session, label, capacity, in_flight, result):
        in_flight = inflight_slots(session, label)
    rows = _baseline_queued(session, label)
    plan, _known = _baseline_plan(session, label, rows, capacity, in_flight)
    by_id = {job.id: (job, sweep) for job, sweep in rows}
    claimed = []
    token = uuid.uuid4().hex
    for step in plan:
        job, sweep = by_id[step.job_ids[0]]
        if step.action == "dispatch":
            ids = list(step.job_ids)
            assert claim_group(session, ids, token=token, run_name=step.run_name) == len(ids)
            for jid in ids:
                session.expire(by_id[jid][0])
            row.release_seq += 1
            sweep.last_release = row.release_seq
            claimed.append(_claimed(sweep, job, step, token, step.run_name))
            mark_report_dirty(session, sweep.id)
    return claimed


# ------------------------------------------------------------------ the database


def _point(image_tag: int, seq: str, tp: int, conc: int) -> dict[str, Any]:
    isl = 1024 if seq == "1k1k" else 8192
    name = f"minimaxm3_{seq}_fp4_vllm_tp{tp}-pp1-dcp1-pcp1-ep1-dpafalse_disagg-false_spec-none_conc{conc}"
    return {
        "config-key": "minimaxm3-fp4-mi355x-vllm",
        "result-name": name,
        "image": f"vllm/vllm-openai-rocm:nightly-{image_tag}",
        "model": "MiniMaxAI/MiniMax-M3",
        "framework": "vllm",
        "precision": "fp4",
        "runner": LABEL,
        "isl": isl,
        "osl": 1024,
        "max-model-len": isl + 1024 + 256,
        "tp": tp,
        "ep": 1,
        "conc": conc,
        "dp-attn": False,
        "spec-decoding": "none",
        "disagg": False,
        "exp-name": f"minimaxm3_{seq}",
        "run-eval": conc == 32,
        "eval-only": False,
    }


def fill(factory: Any, queued: int) -> None:
    """``queued`` jobs in ``queued / 40`` active sweeps, as many finished, results of other images."""
    from app.models.results import Result
    from app.models.sweeps import JobState, Sweep, SweepJob, SweepState

    per_sweep = len(CONCS) * len(SPACES)
    with factory() as s:
        for n in range(2 * max(1, queued // per_sweep)):
            active = n % 2 == 0  # every other sweep is history: done, its jobs succeeded
            sweep = Sweep(
                repo=REPO,
                pr_number=1000 + n,
                head_sha=f"{n:040x}",
                head_ref=f"bench-{n}",
                base_ref="main",
                config_key="minimaxm3-fp4-mi355x-vllm",
                image=f"vllm/vllm-openai-rocm:nightly-{n}",
                fingerprint=f"{n:016x}",
                points_digest=f"{n:064x}",
                requested_by="bench",
                reason="api",
                priority=3 if n % 10 == 8 else 5,
                state=SweepState.ACTIVE if active else SweepState.DONE,
            )
            s.add(sweep)
            s.flush()
            pos = 0
            for conc in CONCS:
                for seq, tp in SPACES:
                    point = _point(n, seq, tp, conc)
                    s.add(
                        SweepJob(
                            sweep_id=sweep.id,
                            position=pos,
                            point=point,
                            result_name=point["result-name"],
                            runner_label=LABEL,
                            seq=seq,
                            conc=conc,
                            tp=tp,
                            group_key=f"conc={conc}",
                            slots=len(SPACES),
                            state=JobState.QUEUED if active else JobState.SUCCEEDED,
                        )
                    )
                    if not active:
                        s.add(
                            Result(
                                result_name=point["result-name"],
                                config_key=point["config-key"],
                                image=sweep.image,
                                fingerprint=sweep.fingerprint,
                                conc=conc,
                                tp=tp,
                                pp=1,
                                ep=1,
                                schema="raw",
                            )
                        )
                    pos += 1
        s.commit()


def timed(factory: Any, claim: Any, repeat: int) -> tuple[float, list[str]]:
    from app.flows.scheduler.dispatch import TickResult

    times, names = [], []
    for _ in range(repeat):
        with factory() as s:
            started = time.perf_counter()
            claims = claim(s, None, LABEL, REPO, TickResult())
            times.append(time.perf_counter() - started)
            names = [c.run_name for c in claims]
            s.rollback()
    return statistics.median(times), names


def measure(size: int, repeat: int) -> tuple[float, float, list[str]]:
    from app import db
    from app.flows.scheduler import tick
    from app.migrate import upgrade
    from app.settings import reset_settings_cache
    from app.store.runnerlabels import ensure_label

    shm = Path("/dev/shm")
    tmp = tempfile.mkdtemp(prefix="sweepbot-bench-tick-", dir=str(shm) if shm.is_dir() else None)
    try:
        os.environ["SWEEPBOT_DATABASE_URL"] = f"sqlite:///{tmp}/tick.sqlite3"
        db.dispose_engines()
        reset_settings_cache()
        upgrade(os.environ["SWEEPBOT_DATABASE_URL"])
        factory = db.session_factory()
        fill(factory, size)
        ensure_label(factory, LABEL)
        old, old_names = timed(factory, baseline_claim_label, repeat)
        new, new_names = timed(factory, tick._claim_label, repeat)
        if old_names != new_names:
            raise SystemExit(f"queue {size}: the plans differ: {old_names} vs {new_names}")
        return old, new, new_names
    finally:
        db.dispose_engines()
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    import logging

    import structlog

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000", help="queued jobs, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ.update({"SWEEPBOT_LOG_LEVEL": "WARNING", "SWEEPBOT_RUNNER_CAPACITY": f"{LABEL}=9"})
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(f"{'queued jobs':>12s}{'baseline ms':>14s}{'batched ms':>13s}{'ratio':>8s}  released")
    for size in (int(x) for x in args.sizes.split(",")):
        old, new, names = measure(size, args.repeat)
        print(
            f"{size:>12,d}{old * 1000:>14.1f}{new * 1000:>13.1f}{new / old:>8.3f}  {', '.join(names)}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
