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

By number of sweeps (issue 29), at fixed reachable work: ``--sweeps 50,500,5000`` active sweeps of
two concs each (2 dispatches of 4 runners, 8 jobs), as many finished ones, the same 9 runners (a
tick releases three dispatches, or two with ``--overcommit 0``). ``main`` is main's reader before
the sweeps were read a page at a time (every sweep's first groups read, every sweep's head looked
up, the plan over all of them, ending only once a release left no room: main's rule), copied here;
``paged`` is this code (a page of sweeps, the plan ending once nothing queued fits the room left).
Both must plan the same dispatches.

    .venv/bin/python bench/tick.py --sizes '' --sweeps 50,500,5000 --repeat 5 [--overcommit 0]
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
    from app.core import release_plan

    rule, release_plan._nothing_fits = release_plan._nothing_fits, main_rule  # main's stop, too
    try:
        plan, _known = _baseline_plan(session, label, rows, capacity, in_flight)
    finally:
        release_plan._nothing_fits = rule
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


# ------------------------------------------------------------ main's reader (before paging sweeps), copied


def _main_plan(
    session: Any, label: str, queue: Any, capacity: int, in_flight: int, overcommit: Any = 0
) -> tuple[list[Any], dict[int, Any]]:
    from app.core.release_plan import plan_release
    from app.flows.scheduler.tick import _canary_hours, _look_up, _queue
    from app.models.sweeps import CANARY_REASON

    rows, sweeps = queue.rows, queue.sweeps
    by_id = {row.job_id: row for row in rows}
    hours = {s.repo: _canary_hours(session, s.repo) for s in sweeps.values() if s.reason == CANARY_REASON}
    known: dict[int, Any] = {}
    per_sweep: dict[int, list[Any]] = {}
    for row in rows:
        per_sweep.setdefault(row.sweep_id, []).append(row)
    _look_up(session, [queued[0] for queued in per_sweep.values()], sweeps, known)
    queues = {sid: _queue(sweeps[sid], queued, known) for sid, queued in per_sweep.items()}
    while True:
        plan = plan_release(
            list(queues.values()), capacity, in_flight, label=label, canary_hours=hours, overcommit=overcommit
        )
        if not plan or plan[-1].action != "check":
            return plan, known
        asked = by_id[plan[-1].job_ids[0]]
        _look_up(session, [asked], sweeps, known)
        queues[asked.sweep_id] = _queue(sweeps[asked.sweep_id], per_sweep[asked.sweep_id], known)


def main_planned(session: Any, label: str, capacity: int, in_flight: int, overcommit: Any = 0) -> Any:
    """app.flows.scheduler.tick._planned of main before this change: every sweep's first groups,
    all planned."""
    from app.core.release_policy import AUTO, LabelView
    from app.flows.scheduler.tick import _reached_unread
    from app.models.sweeps import CANARY_REASON
    from app.store.jobs import queued_on_label

    view = LabelView(label, capacity, in_flight, overcommit=overcommit)
    queue = queued_on_label(session, label, free=view.room, auto_overcommit=overcommit == AUTO)
    canary = any(s.reason == CANARY_REASON for s in queue.sweeps.values())
    if not (queue.unread and canary):
        plan, known = _main_plan(session, label, queue, capacity, in_flight, overcommit)
        if not _reached_unread(plan, queue):
            return queue, plan, known
    queue = queued_on_label(session, label)
    return queue, *_main_plan(session, label, queue, capacity, in_flight, overcommit)


def main_rule(state: Any, narrowest: int) -> str | None:
    """app.core.release_plan._nothing_fits of main before issue 29's rule: the plan ended only once
    a release left no room (it went on holding every sweep while no queued job fitted the room)."""
    if state.out and state.out[-1].action == "dispatch" and state.view().room <= 0:
        return "no free slot left"
    return None


def main_newest_reusable(session: Any, keys: Any, *, evals: bool = False) -> dict[Any, Any]:
    """app.store.results.newest_reusable of main: the row-value IN alone (SQLite scans every result)."""
    from sqlalchemy import select, tuple_

    from app.models.results import EvalResult, Result
    from app.store.results import REUSE_CHUNK

    model: Any = EvalResult if evals else Result
    wanted = sorted(set(keys))
    found: dict[Any, Any] = {}
    for start in range(0, len(wanted), REUSE_CHUNK):
        chunk = wanted[start : start + REUSE_CHUNK]
        rows = session.scalars(
            select(model)
            .where(tuple_(model.image, model.fingerprint, model.result_name).in_(chunk))
            .order_by(model.id.desc())
        ).all()
        for row in rows:
            found.setdefault((row.image, row.fingerprint, row.result_name), row)
    return found


def main_claim_label(session: Any, gw: Any, label: str, repo: str, result: Any) -> list[Any]:
    """This code's app.flows.scheduler.tick._claim_label with main's reader (``main_planned``) and reuse
    lookup (``main_newest_reusable``) and plan rule (``main_rule``); the claims are the same code.
    (The sweeps' serving index of migration 0025 is there for both: main's queries do not use it.)"""
    from app.core import release_plan
    from app.flows.scheduler import tick
    from app.store import reuse

    paged, lookup, rule = tick._planned, reuse.newest_reusable, release_plan._nothing_fits
    tick._planned, reuse.newest_reusable = main_planned, main_newest_reusable
    release_plan._nothing_fits = main_rule
    try:
        return tick._claim_label(session, gw, label, repo, result)
    finally:
        tick._planned, reuse.newest_reusable, release_plan._nothing_fits = paged, lookup, rule


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
    fill_sweeps(factory, max(1, queued // (len(CONCS) * len(SPACES))), CONCS)


def fill_sweeps(factory: Any, active: int, concs: tuple[int, ...]) -> None:
    """``active`` sweeps of ``concs`` x SPACES queued jobs (a dispatch per conc), as many finished
    ones (their jobs succeeded, their results stored: every reuse lookup searches and misses).
    Bulk inserts: 5,000 sweeps' worth in seconds."""
    from sqlalchemy import insert

    from app.models.results import Result
    from app.models.sweeps import JobState, Sweep, SweepJob, SweepState

    sweeps, jobs, results = [], [], []
    for n in range(2 * active):
        is_active = n % 2 == 0  # every other sweep is history: done, its jobs succeeded
        sweeps.append(
            {
                "id": n + 1,
                "repo": REPO,
                "pr_number": 1000 + n,
                "head_sha": f"{n:040x}",
                "head_ref": f"bench-{n}",
                "base_ref": "main",
                "config_key": "minimaxm3-fp4-mi355x-vllm",
                "image": f"vllm/vllm-openai-rocm:nightly-{n}",
                "fingerprint": f"{n:016x}",
                "points_digest": f"{n:064x}",
                "requested_by": "bench",
                "reason": "api",
                "priority": 3 if n % 10 == 8 else 5,
                "state": SweepState.ACTIVE if is_active else SweepState.DONE,
            }
        )
        pos = 0
        for conc in concs:
            for seq, tp in SPACES:
                point = _point(n, seq, tp, conc)
                jobs.append(
                    {
                        "sweep_id": n + 1,
                        "position": pos,
                        "point": point,
                        "result_name": point["result-name"],
                        "runner_label": LABEL,
                        "seq": seq,
                        "conc": conc,
                        "tp": tp,
                        "group_key": f"conc={conc}",
                        "slots": len(SPACES),
                        "state": JobState.QUEUED if is_active else JobState.SUCCEEDED,
                    }
                )
                if not is_active:
                    results.append(
                        {
                            "result_name": point["result-name"],
                            "config_key": point["config-key"],
                            "image": f"vllm/vllm-openai-rocm:nightly-{n}",
                            "fingerprint": f"{n:016x}",
                            "conc": conc,
                            "tp": tp,
                            "pp": 1,
                            "ep": 1,
                            "schema": "raw",
                        }
                    )
                pos += 1
    with factory() as s:
        s.execute(insert(Sweep), sweeps)
        s.execute(insert(SweepJob), jobs)
        s.execute(insert(Result), results)
        s.commit()


class NoContract:
    """The tick's gateway here: the repo has no priority-scheduler contract (a plain label), and
    the capacity comes from SWEEPBOT_RUNNER_CAPACITY; nothing else is asked of GitHub."""

    def get_repo_variable(self, repo: str, name: str) -> str | None:
        return None


def timed(factory: Any, claim: Any, repeat: int) -> tuple[float, list[str]]:
    from app.flows.scheduler.dispatch import TickResult

    times, names = [], []
    for _ in range(repeat):
        with factory() as s:
            started = time.perf_counter()
            claims = claim(s, NoContract(), LABEL, REPO, TickResult())
            times.append(time.perf_counter() - started)
            names = [c.run_name for c in claims]
            s.rollback()
    return statistics.median(times), names


def measure(
    populate: Any, claims: dict[str, Any], repeat: int, what: str
) -> tuple[dict[str, float], list[str]]:
    """Median ms of each ``claims`` (name -> a _claim_label) on a database ``populate`` filled;
    every one must release the same runs. Their runs interleave (one of each in turn)."""
    from app import db
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
        populate(factory)
        ensure_label(factory, LABEL)
        samples: dict[str, list[float]] = {name: [] for name in claims}
        released: dict[str, list[str]] = {}
        for _ in range(repeat):
            for name, claim in claims.items():
                took, released[name] = timed(factory, claim, 1)
                samples[name].append(took)
        first = next(iter(released.values()))
        if any(names != first for names in released.values()):
            raise SystemExit(f"{what}: the plans differ: {released}")
        return {name: statistics.median(v) * 1000 for name, v in samples.items()}, first
    finally:
        db.dispose_engines()
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    import logging

    import structlog

    from app.flows.scheduler import tick

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000", help="queued jobs, comma-separated ('' none)")
    parser.add_argument("--sweeps", default="", help="active sweeps of 2 concs each, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--overcommit", default="auto", help="SWEEPBOT_RUNNER_OVERCOMMIT (auto, 0, N)")
    args = parser.parse_args(argv)
    os.environ.update(
        {
            "SWEEPBOT_LOG_LEVEL": "WARNING",
            "SWEEPBOT_RUNNER_CAPACITY": f"{LABEL}=9",
            "SWEEPBOT_RUNNER_OVERCOMMIT": args.overcommit,
        }
    )
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; overcommit {args.overcommit}")
    sizes = [int(x) for x in args.sizes.split(",") if x]
    if sizes:
        print(f"{'queued jobs':>12s}{'baseline ms':>14s}{'batched ms':>13s}{'ratio':>8s}  released")
    for size in sizes:
        ms, names = measure(
            lambda f, n=size: fill(f, n),
            {"baseline": baseline_claim_label, "batched": tick._claim_label},
            args.repeat,
            f"queue {size}",
        )
        old, new = ms["baseline"], ms["batched"]
        print(f"{size:>12,d}{old:>14.1f}{new:>13.1f}{new / old:>8.3f}  {', '.join(names)}", flush=True)
    counts = [int(x) for x in args.sweeps.split(",") if x]
    if counts:
        print(f"{'sweeps':>8s}{'queued':>9s}{'main ms':>10s}{'paged ms':>10s}{'ratio':>8s}  released")
    for count in counts:
        concs = CONCS[:2]
        ms, names = measure(
            lambda f, n=count, c=concs: fill_sweeps(f, n, c),
            {"main": main_claim_label, "paged": tick._claim_label},
            args.repeat,
            f"{count} sweeps",
        )
        old, new = ms["main"], ms["paged"]
        queued = count * len(concs) * len(SPACES)
        print(
            f"{count:>8,d}{queued:>9,d}{old:>10.1f}{new:>10.1f}{new / old:>8.3f}  {', '.join(names)}",
            flush=True,
        )
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
