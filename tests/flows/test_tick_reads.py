"""The tick reads only the part of the queue its plan can reach, and plans exactly as over all of it.

``app.flows.scheduler.tick._planned`` reads each sweep's first dispatch groups (``queued_on_label(free=...)``)
and falls back to the whole queue when that part did not suffice; reuse is looked up for many
points at once (``app.store.reuse.reusable_for_points``). Each is checked here against the plain
version it replaces: the plan over the whole queue, and one lookup per point.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from sqlalchemy.orm import Session

from app.core import release_plan
from app.core.release_policy import Overcommit
from app.flows.scheduler import tick
from app.models.results import EvalResult, Result
from app.models.sweeps import CANARY_REASON, JobState, Sweep, SweepJob, SweepState
from app.store import reuse
from app.store.jobs import narrowest_queued, queued_on_label, sweeps_in_serving_order
from app.store.results import find_reusable, find_reusable_eval

LABEL = "mi355x"


def _sweep(s: Session, n: int, *, priority: int = 5, reason: str = "api", last_release: int = 0) -> Sweep:
    sweep = Sweep(
        repo="o/r",
        pr_number=n,
        head_sha=f"{n:040x}",
        head_ref=f"b{n}",
        base_ref="main",
        config_key="k",
        image=f"img:{n}",
        fingerprint=f"{n:016x}",
        points_digest=f"{n:064x}",
        requested_by="t",
        reason=reason,
        priority=priority,
        last_release=last_release,
        state=SweepState.ACTIVE,
    )
    s.add(sweep)
    s.flush()
    return sweep


def _job(s: Session, sweep: Sweep, pos: int, group: str, slots: int, **point: Any) -> SweepJob:
    job = SweepJob(
        sweep_id=sweep.id,
        position=pos,
        point={"result-name": f"p{pos}", **point},
        result_name=f"p{pos}",
        runner_label=LABEL,
        seq="1k1k",
        conc=1,
        tp=1,
        group_key=group,
        slots=slots,
        state=JobState.QUEUED,
    )
    s.add(job)
    return job


def _result(s: Session, sweep: Sweep, name: str) -> None:
    s.add(
        Result(
            result_name=name,
            config_key="k",
            image=sweep.image,
            fingerprint=sweep.fingerprint,
            conc=1,
            tp=1,
            pp=1,
            ep=1,
            schema="raw",
        )
    )


def _eval(s: Session, sweep: Sweep, name: str) -> None:
    s.add(
        EvalResult(
            result_name=name,
            config_key="k",
            image=sweep.image,
            fingerprint=sweep.fingerprint,
            conc=1,
            tp=1,
            task="gsm8k",
            metric="exact_match",
            filter="strict-match",
            score=0.9,
        )
    )


def _whole(s: Session, capacity: int, in_flight: int, overcommit: Overcommit = 0) -> list[Any]:
    plan, _, _ = tick._plan(s, LABEL, queued_on_label(s, LABEL), capacity, in_flight, overcommit)
    return plan


def _main_rule(state: Any, narrowest: int) -> str | None:
    """main's stop before issue 29's: only once a release left no room (it went on serving every
    sweep while no queued job fitted the room left, reusing and holding)."""
    if state.out and state.out[-1].action == "dispatch" and state.view().room <= 0:
        return "no free slot left"
    return None


def _main_whole(
    s: Session, mp: pytest.MonkeyPatch, capacity: int, in_flight: int, overcommit: Overcommit
) -> list[Any]:
    with mp.context() as m:
        m.setattr(release_plan, "_nothing_fits", _main_rule)
        return _whole(s, capacity, in_flight, overcommit)


def _same_dispatches_as_main(plan: list[Any], main: list[Any], where: Any) -> bool:
    """``plan`` is main's whole-queue plan up to where nothing queued fits the room left; past that
    main only reused and held (reuses left to the tick that reaches those sweeps). Whether it cut."""
    assert main[: len(plan)] == plan, where
    assert all(step.action in ("reuse", "hold") for step in main[len(plan) :]), where
    return len(main) > len(plan)


def _random_queue(s: Session, rng: random.Random, canary: bool) -> None:
    for n in range(rng.randint(1, 6)):
        sweep = _sweep(
            s,
            n,
            priority=rng.choice((3, 5)),
            reason=CANARY_REASON if canary and n == 0 else "api",
            last_release=rng.randint(0, 3),
        )
        groups = [f"g{g}" for g in range(rng.randint(1, 8))]
        slots = {g: rng.randint(1, 5) for g in groups}
        for pos in range(rng.randint(1, 16)):
            group = rng.choice(groups)  # a group's jobs need not be next to each other
            _job(s, sweep, pos, group, slots[group])
            if rng.random() < 0.3:  # a stored result answers this point: reused when reached
                _result(s, sweep, f"p{pos}")
    s.flush()


@pytest.mark.parametrize("seed", range(40))
def test_the_plan_over_what_is_read_is_the_plan_over_the_whole_queue(db_session: Session, seed: int) -> None:
    rng = random.Random(seed)
    _random_queue(db_session, rng, canary=seed % 5 == 0)
    for overcommit in (0, 3, "auto"):
        for capacity, in_flight in ((9, 0), (9, 5), (4, 4), (12, 3), (3, 0), (1, 0), (9, 8), (9, 11)):
            _, plan, _ = tick._planned(db_session, LABEL, capacity, in_flight, overcommit)
            assert plan == _whole(db_session, capacity, in_flight, overcommit), (
                seed,
                overcommit,
                capacity,
                in_flight,
            )


def test_a_sweep_is_read_only_as_far_as_the_free_slots_reach(db_session: Session) -> None:
    sweep = _sweep(db_session, 1)
    for conc in range(10):  # 10 dispatch groups of 4 slots, 4 jobs each
        for k in range(4):
            _job(db_session, sweep, conc * 4 + k, f"conc={conc}", 4)
    db_session.flush()
    read = queued_on_label(db_session, LABEL, free=9)
    # groups 1-3 (0, 4 and 8 slots before them fit in 9), the third is where the plan holds it
    assert [r.group_key for r in read.rows] == [f"conc={c}" for c in range(3) for _ in range(4)]
    assert read.unread == {sweep.id: 12}  # the first job of group 4
    assert len(queued_on_label(db_session, LABEL, free=0).rows) == 8  # always the first two
    assert queued_on_label(db_session, LABEL).unread == {}
    # auto overcommit: groups go out while a slot is free (0, 4 and 8 before them), the fourth is held
    auto = queued_on_label(db_session, LABEL, free=9, auto_overcommit=True)
    assert [r.group_key for r in auto.rows] == [f"conc={c}" for c in range(4) for _ in range(4)]
    assert auto.unread == {sweep.id: 16}
    queue, plan, _ = tick._planned(db_session, LABEL, 9, 0, "auto")
    assert [s.action for s in plan] == ["dispatch"] * 3
    assert queue.unread == {sweep.id: 16}  # that read sufficed: the whole queue was not read


def test_stored_results_past_what_was_read_make_the_tick_read_the_whole_queue(db_session: Session) -> None:
    sweep = _sweep(db_session, 1)
    for pos in range(12):
        _job(db_session, sweep, pos, f"g{pos}", 4)
        if pos < 6:  # the first six heads are answered by stored results: reused, one by one
            _result(db_session, sweep, f"p{pos}")
    db_session.flush()
    queue, plan, _ = tick._planned(db_session, LABEL, 4, 0)
    assert queue.unread == {}  # read again, whole
    assert [s.action for s in plan] == ["reuse"] * 6 + ["dispatch"]
    assert plan == _whole(db_session, 4, 0)


def test_batched_reuse_lookups_answer_as_one_lookup_per_point(db_session: Session) -> None:
    sweep = _sweep(db_session, 1)
    other = _sweep(db_session, 2)
    _result(db_session, sweep, "both")
    _eval(db_session, sweep, "both")
    _result(db_session, sweep, "result-only")
    _eval(db_session, sweep, "eval-only")
    _result(db_session, other, "elsewhere")
    _result(db_session, sweep, "both")  # a newer row of the same point: that one is the answer
    db_session.flush()
    marks: tuple[dict[str, bool] | None, ...] = ({}, {"run-eval": True}, {"eval-only": True}, None)
    lookups = [
        reuse.PointLookup(s.image, s.fingerprint, name, m)
        for s in (sweep, other)
        for name in ("both", "result-only", "eval-only", "elsewhere", "missing")
        for m in marks
    ]
    batched = reuse.reusable_for_points(db_session, lookups)

    def one(p: reuse.PointLookup) -> Any:  # main's reusable_for_point, one point at a time
        marks = p.point or {}
        eval_only = bool(marks.get("eval-only"))
        key = {"image": p.image, "fingerprint": p.fingerprint, "result_name": p.result_name}
        hit = None if eval_only else find_reusable(db_session, **key)
        if hit is None and not eval_only:
            return None
        if marks.get("run-eval") or eval_only:
            evaluated = find_reusable_eval(db_session, **key)
            return None if evaluated is None else hit or evaluated
        return hit

    assert batched == [one(p) for p in lookups]
    answered = [(p.result_name, type(r).__name__) for p, r in zip(lookups, batched, strict=True) if r]
    assert len(answered) == 9 and ("eval-only", "EvalResult") in answered


def _many_sweeps(s: Session, rng: random.Random, canary: bool) -> int:
    """Up to 30 sweeps of a few groups (ties of priority and last release included); some empty
    of queued work on the label (done, or all dispatched). Returns how many have work queued."""
    with_work = 0
    for n in range(rng.randint(1, 30)):
        sweep = _sweep(
            s,
            n,
            priority=rng.choice((3, 5, 5)),
            reason=CANARY_REASON if canary and n == 3 else "api",
            last_release=rng.randint(0, 4),
        )
        if rng.random() < 0.1:
            sweep.state = SweepState.DONE  # not served: its jobs are not read
        groups = [f"g{g}" for g in range(rng.randint(1, 4))]
        slots = {g: rng.randint(1, 5) for g in groups}
        queued = False
        for pos in range(rng.randint(1, 6)):
            job = _job(s, sweep, pos, rng.choice(groups), 0)
            job.slots = slots[job.group_key]
            if rng.random() < 0.1:
                job.state = JobState.DISPATCHED  # in flight already: not queued
            else:
                queued = True
            if rng.random() < 0.2:
                _result(s, sweep, f"p{pos}")
        with_work += queued and sweep.state == SweepState.ACTIVE
    s.flush()
    return with_work


@pytest.mark.parametrize("seed", range(30))
def test_the_plan_over_the_sweeps_read_is_the_plan_over_all_of_them(
    db_session: Session, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tick reads a page of sweeps in serving order and keeps the plan when it ends among them;
    # small pages here, so that half the plans end before the last sweep and the rest go past it.
    rng = random.Random(1000 + seed)
    with_work = _many_sweeps(db_session, rng, canary=seed % 6 == 0)
    monkeypatch.setattr(tick, "FIRST_SWEEPS", 1 + seed % 3)
    whole = queued_on_label(db_session, LABEL)
    # the order sweeps are read in is the order the whole queue serves them in
    served = list(dict.fromkeys(row.sweep_id for row in whole.rows))
    assert sweeps_in_serving_order(db_session, LABEL, offset=0, limit=100) == served
    assert sweeps_in_serving_order(db_session, LABEL, offset=2, limit=3) == served[2:5]
    # the narrowest job queued, read by one index row, is the whole queue's
    queues = [
        tick._queue(whole.sweeps[sid], [r for r in whole.rows if r.sweep_id == sid], {}) for sid in served
    ]
    assert narrowest_queued(db_session, LABEL) == (release_plan.narrowest_queued(queues) if queues else None)
    cut = 0
    for overcommit in (0, 2, "auto"):
        for capacity, in_flight in ((9, 0), (9, 5), (4, 4), (3, 0), (1, 0), (9, 8), (2, 3), (9, 7)):
            where = (seed, overcommit, capacity, in_flight)
            queue, plan, _ = tick._planned(db_session, LABEL, capacity, in_flight, overcommit)
            assert plan == _whole(db_session, capacity, in_flight, overcommit), where
            assert len(queue.sweeps) <= with_work
            cut += _same_dispatches_as_main(
                plan, _main_whole(db_session, monkeypatch, capacity, in_flight, overcommit), where
            )
    assert cut or with_work < 3, seed  # the rule bites on most queues


def test_the_tick_reads_only_the_sweeps_its_plan_reaches(db_session: Session) -> None:
    # 40 sweeps of one 4-slot dispatch each and 9 free runners: three go out (auto overcommit), the
    # plan ends with no room left in the first page of sweeps; the rest are not read.
    for n in range(40):
        sweep = _sweep(db_session, n, last_release=n % 3)
        for k in range(4):
            _job(db_session, sweep, k, "conc=8", 4)
    db_session.flush()
    queue, plan, known = tick._planned(db_session, LABEL, 9, 0, "auto")
    assert [s.action for s in plan] == ["dispatch"] * 3
    assert plan == _whole(db_session, 9, 0, "auto")
    assert len(queue.sweeps) == tick.FIRST_SWEEPS + 9 < 40
    assert len(known) == len(queue.sweeps)  # a reuse lookup per sweep read, not per sweep queued
    # with no overcommit two go out and the one slot left fits no queued job (all are 4 wide): the
    # plan ends there too, in the first page (main's went on to hold the 38 others, reading all)
    queue, plan, known = tick._planned(db_session, LABEL, 9, 0, 0)
    assert [s.action for s in plan] == ["dispatch"] * 2
    assert plan == _whole(db_session, 9, 0, 0)
    assert len(queue.sweeps) == len(known) == tick.FIRST_SWEEPS + 9
    # a full label: nothing fits, no sweep is read nor looked up
    for overcommit in (0, 3, "auto"):
        queue, plan, known = tick._planned(db_session, LABEL, 9, 9 + (overcommit == 3) * 3, overcommit)
        assert (plan, queue.rows, known) == ([], [], {})


def test_a_narrow_job_anywhere_in_the_queue_keeps_the_plan_going(db_session: Session) -> None:
    # The same 40 sweeps, the last served of them with a 1-runner group besides: the slot the two
    # dispatches leave fits it, so the plan goes on to it (a backfill), past every page.
    sweeps = []
    for n in range(40):
        sweeps.append(_sweep(db_session, n, last_release=n))
        for k in range(4):
            _job(db_session, sweeps[-1], k, "conc=8", 4)
    _job(db_session, sweeps[-1], 4, "conc=1", 1)
    db_session.flush()
    assert narrowest_queued(db_session, LABEL) == 1
    queue, plan, _ = tick._planned(db_session, LABEL, 9, 0, 0)
    assert [s.action for s in plan] == ["dispatch"] * 2 + ["hold"] * 37 + ["dispatch"]
    assert plan[-1].backfill and plan[-1].sweep_id == sweeps[-1].id
    assert len(queue.sweeps) == 40 and plan == _whole(db_session, 9, 0, 0)


def test_a_reuse_the_plan_does_not_reach_waits_for_the_tick_that_reaches_it(db_session: Session) -> None:
    # Two 4-runner sweeps served first, then one whose head a stored result answers: on 9 runners
    # with no overcommit the two go out and the slot left fits nothing, so the third is not reached
    # (main's plan reused its head in this tick). It stays queued, and the next tick with room
    # reaches it: reused then, once, and its next job goes.
    first = [_sweep(db_session, n, last_release=0) for n in range(2)]
    for sweep in first:
        for k in range(4):
            _job(db_session, sweep, k, "conc=8", 4)
    third = _sweep(db_session, 9, last_release=1)
    _job(db_session, third, 0, "conc=8", 4)
    _job(db_session, third, 1, "conc=4", 4)
    _result(db_session, third, "p0")
    db_session.flush()
    _, plan, _ = tick._planned(db_session, LABEL, 9, 0, 0)
    assert [(s.action, s.sweep_id) for s in plan] == [("dispatch", first[0].id), ("dispatch", first[1].id)]
    for step in plan:  # the tick's claims: those jobs leave the queue, their sweeps were served
        for job in db_session.query(SweepJob).filter(SweepJob.id.in_(step.job_ids)):
            job.state = JobState.DISPATCHED
        db_session.get(Sweep, step.sweep_id).last_release = 2  # type: ignore[union-attr]
    db_session.flush()
    _, plan, _ = tick._planned(db_session, LABEL, 9, 8, 0)  # one runner free: nothing fits yet
    assert plan == []
    _, plan, known = tick._planned(db_session, LABEL, 9, 4, 0)  # one run finished
    assert [(s.action, s.sweep_id) for s in plan] == [("reuse", third.id), ("dispatch", third.id)]
    assert known[plan[0].job_ids[0]] is not None
