"""The release plan (app.core.release_plan.plan_release), table by table: every path of the decision."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import structlog

from app.core import release_plan
from app.core.release_plan import (
    CanaryHours,
    DispatchSlots,
    QueuedJob,
    Release,
    RunSlots,
    SweepQueue,
    narrowest_queued,
    plan_release,
    plan_release_prefix,
    run_slots_in_use,
    slots_in_use,
)
from app.core.release_policy import Candidate, LabelView, release_decision


def q(sid: int, *jobs: QueuedJob, prio: int = 1, canary: bool = False, repo: str = "o/r") -> SweepQueue:
    return SweepQueue(sweep_id=sid, priority=prio, jobs=jobs, canary=canary, repo=repo)


def j(jid: int, group: str | None = None, slots: int = 1, reusable: bool | None = False) -> QueuedJob:
    return QueuedJob(job_id=jid, group_key=group or f"g{jid}", slots=slots, reusable=reusable)


def steps(plan: list[Release]) -> list[tuple[str, int, tuple[int, ...]]]:
    return [(r.action, r.sweep_id, r.job_ids) for r in plan]


CASES: list[tuple[str, list[SweepQueue], int, int, list[tuple[str, int, tuple[int, ...]]]]] = [
    ("nothing queued", [], 4, 0, []),
    ("one job, free slot", [q(1, j(10))], 1, 0, [("dispatch", 1, (10,))]),
    (
        "label full: no sweep is reached (nothing could go; its turn waits for room)",
        [q(1, j(10))],
        2,
        2,
        [],
    ),
    (
        "a head that does not fit is held with the reason while a narrower job is queued",
        [q(1, j(10, slots=2)), q(2, j(20))],
        2,
        1,
        [("hold", 1, (10,)), ("dispatch", 2, (20,))],
    ),
    (
        "a group goes out as one dispatch (same group key, not adjacent)",
        [q(1, j(10, "a", 2), j(11, "b"), j(12, "a", 2))],
        2,
        0,
        [("dispatch", 1, (10, 12))],
    ),
    (
        "round-robin: one dispatch per sweep per round, in the order given",
        [q(1, j(10), j(11)), q(2, j(20), j(21))],
        3,
        0,
        [("dispatch", 1, (10,)), ("dispatch", 2, (20,)), ("dispatch", 1, (11,))],
    ),
    (
        "priority class first: the lower number is served before any other class",
        [q(2, j(20), prio=0), q(1, j(10), prio=1)],
        1,
        0,
        [("dispatch", 2, (20,))],
    ),
    (
        "a wider dispatch than the free slots waits; a narrower one of another sweep goes",
        [q(1, j(10, slots=3)), q(2, j(20))],
        4,
        2,
        [("hold", 1, (10,)), ("dispatch", 2, (20,))],
    ),
    (
        "a dispatch wider than the whole label runs alone on an idle label",
        [q(1, j(10, slots=6))],
        4,
        0,
        [("dispatch", 1, (10,))],
    ),
    (
        "reusable heads are reused, then the next job goes",
        [q(1, j(10, reusable=True), j(11, reusable=True), j(12))],
        1,
        0,
        [("reuse", 1, (10,)), ("reuse", 1, (11,)), ("dispatch", 1, (12,))],
    ),
    (
        "a sweep whose every job is reusable only reuses (no slot used)",
        [q(1, j(10, reusable=True)), q(2, j(20))],
        1,
        0,
        [("reuse", 1, (10,)), ("dispatch", 2, (20,))],
    ),
    (
        "an unknown head asks for a lookup and the plan stops there",
        [q(1, j(10), j(11, reusable=None)), q(2, j(20))],
        4,
        0,
        [("dispatch", 1, (10,)), ("dispatch", 2, (20,)), ("check", 1, (11,))],
    ),
    (
        "the plan stops when the last slot is taken (later heads are not looked at)",
        [q(1, j(10)), q(2, j(20, reusable=None))],
        1,
        0,
        [("dispatch", 1, (10,))],
    ),
    (
        "a full label reaches no sweep: a reusable head waits for the tick that reaches it",
        [q(1, j(10, reusable=True), j(11))],
        1,
        1,
        [],
    ),
    (
        "a reached sweep's reusable heads are reused even when its next head does not fit",
        [q(1, j(10, reusable=True), j(11, slots=2)), q(2, j(20))],
        2,
        1,
        [("reuse", 1, (10,)), ("hold", 1, (11,)), ("dispatch", 2, (20,))],
    ),
    (
        "nothing queued fits the room left: the plan ends there, no sweep after is reached",
        [q(1, j(10, "a", 4)), q(2, j(20, "b", 4)), q(3, j(30, "c", 4, reusable=True))],
        9,
        0,
        [("dispatch", 1, (10,)), ("dispatch", 2, (20,))],
    ),
    (
        "a narrower job queued further on keeps the plan going (here a backfill takes it)",
        [q(1, j(10, "a", 4)), q(2, j(20, "b", 4)), q(3, j(30, "c", 4), j(31, "d", 1))],
        9,
        0,
        [("dispatch", 1, (10,)), ("dispatch", 2, (20,)), ("dispatch", 3, (31,))],
    ),
    (
        "backfill: a sweep's head that does not fit waits; a narrower group of the sweep goes",
        [q(1, j(10, "a", 3), j(11, "a", 3), j(12, "b", 1), j(13, "c", 2))],
        4,
        2,
        [("dispatch", 1, (12,)), ("hold", 1, (10,))],
    ),
    (
        "backfill: one group per sweep and plan (the tick reads what a plan can reach)",
        [q(1, j(10, "a", 4), j(11, "b", 2), j(12, "c", 1), j(13, "d", 1))],
        4,
        1,
        [("dispatch", 1, (11,)), ("hold", 1, (10,))],
    ),
    (
        "backfill: each sweep may backfill once",
        [q(1, j(10, "a", 4), j(11, "b", 1)), q(2, j(20, "x", 4), j(21, "y", 1))],
        4,
        1,
        [("dispatch", 1, (11,)), ("dispatch", 2, (21,)), ("hold", 1, (10,)), ("hold", 2, (20,))],
    ),
    (
        "backfill: only the first group of each width (a later one of that width waits its turn)",
        [q(1, j(10, "a", 4), j(11, "b", 3), j(12, "c", 2), j(13, "d", 3))],
        4,
        2,
        [("dispatch", 1, (12,))],
    ),
    (
        "no backfill past a head wider than the whole label (it waits for an idle label)",
        [q(1, j(10, "a", 6), j(11, "b", 1))],
        4,
        1,
        [("hold", 1, (10,))],
    ),
    (
        "a backfill candidate not looked up yet asks for the lookup first",
        [q(1, j(10, "a", 3), j(11, "b", 1, reusable=None))],
        4,
        2,
        [("check", 1, (11,))],
    ),
    (
        "a backfill candidate a stored result answers is left to be reused at its turn (and its width)",
        [q(1, j(10, "a", 3), j(11, "b", 1, reusable=True), j(12, "c", 1), j(13, "d", 2))],
        4,
        2,
        [("dispatch", 1, (13,))],
    ),
    (
        "backfill keeps the classes' order: a higher class's narrower head goes first",
        [q(1, j(10, "a", 3), j(11, "b", 1), prio=1), q(2, j(20, "x", 2), prio=0)],
        4,
        2,
        [("dispatch", 2, (20,))],
    ),
    (
        "canary: held while real work waits on the label",
        [q(1, j(10, slots=2)), q(9, j(90), canary=True, prio=9)],
        2,
        1,
        [("hold", 1, (10,)), ("hold", 9, (90,))],
    ),
    (
        "canary: released onto an idle runner when no real work waits",
        [q(9, j(90), canary=True, prio=9)],
        2,
        1,
        [("dispatch", 9, (90,))],
    ),
]


@pytest.mark.parametrize(
    ("name", "queues", "capacity", "in_flight", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_plan_release(
    name: str, queues: list[SweepQueue], capacity: int, in_flight: int, expected: list[Any]
) -> None:
    assert steps(plan_release(queues, capacity, in_flight, label="mi355x")) == expected


OVERCOMMIT_CASES: list[tuple[str, list[SweepQueue], int, int, int | str, list[Any]]] = [
    (
        "auto: a 6-wide group goes out at one free slot",
        [q(1, j(10, "a", 6))],
        9,
        8,
        "auto",
        [("dispatch", 1, (10,))],
    ),
    ("auto: no free slot, no sweep reached", [q(1, j(10, "a", 6))], 9, 9, "auto", []),
    (
        "auto: nothing goes while in flight is at or over the runners, not even a 1-wide group",
        [q(1, j(10)), q(2, j(20, "x", 6))],
        9,
        10,
        "auto",
        [],
    ),
    (
        "auto: groups go out while a slot is free, then the plan stops (one group over, never two)",
        [q(1, j(10, "a", 4), j(11, "b", 4), j(12, "c", 4), j(13, "d", 4))],
        9,
        0,
        "auto",
        [("dispatch", 1, (10,)), ("dispatch", 1, (11,)), ("dispatch", 1, (12,))],
    ),
    (
        "0: the same queue stops at the group the free slots do not fit whole (none is narrower)",
        [q(1, j(10, "a", 4), j(11, "b", 4), j(12, "c", 4), j(13, "d", 4))],
        9,
        0,
        0,
        [("dispatch", 1, (10,)), ("dispatch", 1, (11,))],
    ),
    (
        "0: ... and holds it while a narrower job is queued (a canary's: it waits for real work)",
        [
            q(1, j(10, "a", 4), j(11, "b", 4), j(12, "c", 4)),
            q(2, j(20, "x", 4)),
            q(9, j(90), canary=True, prio=9),
        ],
        9,
        0,
        0,
        [("dispatch", 1, (10,)), ("dispatch", 2, (20,)), ("hold", 1, (11,)), ("hold", 9, (90,))],
    ),
    (
        "auto: round-robin across sweeps and classes is kept",
        [q(1, j(10, "a", 6), j(11, "b", 6)), q(2, j(20, "x", 6)), q(3, j(30, "y", 2), prio=0)],
        9,
        0,
        "auto",
        [("dispatch", 3, (30,)), ("dispatch", 1, (10,)), ("dispatch", 2, (20,))],
    ),
    (
        "auto: a group wider than the label goes out once one slot is free",
        [q(1, j(10, "a", 12))],
        9,
        1,
        "auto",
        [("dispatch", 1, (10,))],
    ),
    ("0: a 6-wide group waits for its whole width", [q(1, j(10, "a", 6))], 9, 8, 0, []),
    (
        "0: ... held by name while a narrower job is queued",
        [q(1, j(10, "a", 6)), q(2, j(20))],
        9,
        8,
        0,
        [("hold", 1, (10,)), ("dispatch", 2, (20,))],
    ),
    ("N: planned as runners + N (5 wait)", [q(1, j(10, "a", 6))], 9, 8, 5, [("dispatch", 1, (10,))]),
    ("N: one short of room", [q(1, j(10, "a", 6))], 9, 8, 4, []),
    (
        "N: backfill by the planned capacity (then no room is left)",
        [q(1, j(10, "a", 6), j(11, "b", 1))],
        9,
        9,
        1,
        [("dispatch", 1, (11,))],
    ),
    (
        "auto: the head goes out itself, no backfill past it",
        [q(1, j(10, "a", 6), j(11, "b", 1))],
        9,
        8,
        "auto",
        [("dispatch", 1, (10,))],
    ),
    (
        "auto: a canary on a full label is not reached",
        [q(9, j(90), canary=True, prio=9)],
        9,
        9,
        "auto",
        [],
    ),
    (
        "N: a canary is held on a full label (the N jobs that may wait are real work's)",
        [q(9, j(90), canary=True, prio=9)],
        9,
        9,
        5,
        [("hold", 9, (90,))],
    ),
    (
        "auto: a canary takes an idle runner",
        [q(9, j(90), canary=True, prio=9)],
        9,
        8,
        "auto",
        [("dispatch", 9, (90,))],
    ),
    (
        "auto: real work over the runners first; the canary is not reached",
        [q(1, j(10, "a", 6)), q(9, j(90), canary=True, prio=9)],
        9,
        4,
        "auto",
        [("dispatch", 1, (10,))],
    ),
]


@pytest.mark.parametrize(
    ("name", "queues", "capacity", "in_flight", "overcommit", "expected"),
    OVERCOMMIT_CASES,
    ids=[c[0] for c in OVERCOMMIT_CASES],
)
def test_plan_release_by_overcommit(
    name: str, queues: list[SweepQueue], capacity: int, in_flight: int, overcommit: Any, expected: list[Any]
) -> None:
    plan = plan_release(queues, capacity, in_flight, label="mi355x", overcommit=overcommit)
    assert steps(plan) == expected


def test_reasons_name_the_slots_and_the_run_name_is_deterministic() -> None:
    plan = plan_release(
        [q(7, j(31, "a", 3), j(30, "a", 3)), q(8, j(40, slots=2)), q(9, j(50))], 4, 0, label="mi355x"
    )
    go, held, _ = plan
    assert (go.action, go.reason, go.slots, go.run_name) == (
        "dispatch",
        "3 slot(s) free on mi355x",
        3,
        "sweepbot-7-30",
    )
    assert (held.action, held.reason) == ("hold", "2 slot(s) needed, 1 free on mi355x")


def test_canary_budget_is_spent_within_the_plan() -> None:
    """Two canaries of one repo, room in the weekly budget for one: the second is held, saying why."""
    hours = {"o/r": CanaryHours(used=9.0, budget=10.0, expected=1.0)}
    queues = [q(1, j(10), canary=True, prio=9), q(2, j(20), canary=True, prio=9)]
    plan = plan_release(queues, 4, 0, label="mi355x", canary_hours=hours)
    assert steps(plan) == [("dispatch", 1, (10,)), ("hold", 2, (20,))]
    assert plan[1].canary and plan[1].reason == (
        "canary budget: 10.0 of 10.0 runner-hours used this week, the next canary needs about 1.0"
    )


def test_every_path_logs_why() -> None:
    with structlog.testing.capture_logs() as logs:
        plan_release([q(1, j(10))], 1, 0, label="a")
        plan_release([q(1, j(10, reusable=None))], 1, 0, label="b")
        plan_release([], 1, 0, label="c")
    lines = [(e["label"], e["why"]) for e in logs if e["event"] == "release_plan"]
    assert lines == [
        ("a", "no free slot left"),
        ("b", "is job 10 answered by a stored result?"),
        ("c", "nothing more queued that may go"),
    ]


def test_an_auto_release_says_how_many_jobs_wait_on_github_and_the_plan_logs_them() -> None:
    with structlog.testing.capture_logs() as logs:
        plan = plan_release([q(1, j(10, "a", 6))], 9, 8, label="mi355x", overcommit="auto")
        full = plan_release([q(1, j(10, "a", 6))], 9, 9, label="mi355x", overcommit="auto")
    held = release_decision(Candidate(6), LabelView("mi355x", 9, 9, overcommit="auto"))
    assert full == []  # a full label: no sweep reached, nothing held
    assert plan[0].reason == (
        "auto overcommit: 1 slot(s) free on mi355x, 6 needed; 5 job(s) wait in GitHub's queue for a runner"
    )
    assert held.reason == (
        "6 slot(s) needed, none free on mi355x "
        "(auto overcommit: a group goes out once one of its jobs can start)"
    )
    lines = [
        (e["overcommit"], e["waiting_on_github"], e["held"], e["why"])
        for e in logs
        if e["event"] == "release_plan"
    ]
    assert lines == [
        ("auto", 5, [], "no free slot left"),
        ("auto", 0, [], "no free slot left"),
    ]


SLOT_CASES = [
    ("nothing in flight", [], 0),
    ("a dispatch nothing of which finished holds all its slots", [DispatchSlots(5, 5, 0)], 5),
    ("each finished job frees its runner (collected or not)", [DispatchSlots(5, 1, 4)], 1),
    ("every job of ours finished: the dispatch holds nothing", [DispatchSlots(5, 0, 5)], 0),
    (
        "points the sweep filtered out still run while ours do",
        [DispatchSlots(6, 3, 0), DispatchSlots(6, 2, 1)],
        11,
    ),
    ("a label-mode job holds its one runner until GitHub says it finished", [DispatchSlots(1, 1, 0)], 1),
]


@pytest.mark.parametrize(("name", "dispatches", "expected"), SLOT_CASES, ids=[c[0] for c in SLOT_CASES])
def test_slots_in_use(name: str, dispatches: list[DispatchSlots], expected: int) -> None:
    assert slots_in_use(dispatches) == expected


RUN_CASES = [
    ("no run of ours going", [], 0),
    ("a run nothing of which GitHub reported yet holds its planned slots", [RunSlots(4, 0, 0)], 4),
    ("each job GitHub says completed frees its runner", [RunSlots(4, 4, 3)], 1),
    (
        "a retry's run: the retried job finished, its three re-run siblings (results we have) still run",
        [RunSlots(4, 4, 1)],
        3,
    ),
    ("every job completed but the run not yet: nothing held", [RunSlots(4, 4, 4)], 0),
    (
        "the run completed: nothing held, whatever was heard of its jobs",
        [RunSlots(4, 2, 1, completed=True)],
        0,
    ),
    (
        "more jobs on the label than planned (an eval job the generator added): each holds a runner",
        [RunSlots(4, 5, 1)],
        4,
    ),
    (
        "our jobs known finished count when their events were lost; a sibling's never does",
        [RunSlots(4, 1, 0, ours_done=1)],
        3,
    ),
    (
        "what GitHub said and what our jobs say: the larger count of finished jobs",
        [RunSlots(4, 4, 3, ours_done=1)],
        1,
    ),
    ("several runs add up", [RunSlots(4, 4, 1), RunSlots(4, 0, 0), RunSlots(1, 1, 0)], 8),
]


@pytest.mark.parametrize(("name", "runs", "expected"), RUN_CASES, ids=[c[0] for c in RUN_CASES])
def test_run_slots_in_use(name: str, runs: list[RunSlots], expected: int) -> None:
    assert run_slots_in_use(runs) == expected


def test_a_plan_over_the_first_sweeps_that_ends_among_them_is_the_plan_over_all() -> None:
    # plan_release_prefix's flag: False only when the sweeps after the ones given change nothing
    import random

    ended_early = 0
    for seed in range(60):
        rng = random.Random(seed)
        queues = sorted(
            (
                q(
                    sid,
                    *(
                        j(
                            100 * sid + k,
                            f"g{rng.randint(0, 2)}",
                            rng.randint(1, 5),
                            reusable=rng.random() < 0.2,
                        )
                        for k in range(rng.randint(1, 5))
                    ),
                    prio=rng.choice((1, 2, 2)),
                )
                for sid in range(1, rng.randint(2, 12))
            ),
            key=lambda x: x.priority,  # serving order: by class, then as given
        )
        for overcommit in (0, 1, "auto"):
            for capacity, in_flight in ((9, 0), (4, 1), (2, 0), (1, 1)):
                whole = plan_release(queues, capacity, in_flight, overcommit=overcommit)
                narrowest = narrowest_queued(queues)  # of the whole list, as the tick reads it
                for n in range(len(queues) + 1):
                    part, more = plan_release_prefix(
                        queues[:n], capacity, in_flight, overcommit=overcommit, narrowest=narrowest
                    )
                    if not more:
                        assert part == whole, (seed, n, overcommit, capacity, in_flight)
                        ended_early += n < len(queues)
                assert plan_release_prefix(queues, capacity, in_flight, overcommit=overcommit)[0] == whole
    assert ended_early > 100  # the flag lets a caller stop early, often


def _main_rule(state: Any, narrowest: int) -> str | None:
    """main's stop before issue 29's: only once a release left no room (a full label, or one with
    room no queued job fits, still served every sweep: reusing the heads stored results answer)."""
    if state.out and state.out[-1].action == "dispatch" and state.view().room <= 0:
        return "no free slot left"
    return None


def _random_queues(rng: Any, canary: bool = False) -> list[SweepQueue]:
    """Up to 10 sweeps of up to 6 jobs in up to 3 groups of 1-5 slots (a group's jobs share their
    slots, as the repo's matrix gives them), a fifth of the jobs answered by stored results."""
    out = []
    for sid in range(1, rng.randint(2, 11)):
        widths = {g: rng.choice((1, 2, 4, 4, 5)) for g in range(3)}
        groups = [rng.randint(0, 2) for _ in range(rng.randint(1, 6))]
        jobs = [
            j(100 * sid + k, f"g{g}", widths[g], reusable=rng.random() < 0.2) for k, g in enumerate(groups)
        ]
        is_canary = canary and sid == 1
        out.append(q(sid, *jobs, prio=9 if is_canary else rng.choice((1, 2, 2)), canary=is_canary))
    return sorted(out, key=lambda x: x.priority)


PLACES = ((9, 0), (9, 5), (9, 8), (9, 9), (9, 11), (4, 1), (2, 0), (1, 1))


def test_the_plan_is_main_s_plan_up_to_where_nothing_queued_fits_the_room_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The rule that ends the plan there changes no dispatch: main's plan (which went on serving every
    # sweep) has this plan as its prefix, and past it only reuses and holds (the reuses are left to
    # the tick that reaches those sweeps: test_every_job_goes_out_once_tick_after_tick).
    import random

    tails = {"any": 0, "reuse": 0}
    for seed in range(80):
        rng = random.Random(seed)
        queues = _random_queues(rng, canary=seed % 4 == 0)
        for overcommit in (0, 1, 3, "auto"):
            for capacity, in_flight in PLACES:
                plan = plan_release(queues, capacity, in_flight, overcommit=overcommit)
                with monkeypatch.context() as m:
                    m.setattr(release_plan, "_nothing_fits", _main_rule)
                    main = plan_release(queues, capacity, in_flight, overcommit=overcommit)
                where = (seed, overcommit, capacity, in_flight)
                assert main[: len(plan)] == plan, where
                tail = main[len(plan) :]
                assert all(step.action in ("reuse", "hold") for step in tail), where
                tails["any"] += bool(tail)
                tails["reuse"] += any(step.action == "reuse" for step in tail)
    assert tails["any"] > 600 and tails["reuse"] > 350  # the rule bites, often (733 and 440 of 2,560)


def _ticks(queues: list[SweepQueue], overcommit: Any, seed: int) -> tuple[list[int], int]:
    """Tick after tick on 9 runners until the queue is empty, runs finishing at random between
    ticks, sweeps served least recently first (a dispatch marks its sweep served, a reuse does
    not): the jobs every tick released (dispatched or reused), in order, and how many ticks."""
    import random

    rng = random.Random(seed)
    jobs = {x.sweep_id: list(x.jobs) for x in queues}
    served = {x.sweep_id: 0 for x in queues}
    by_id = {x.sweep_id: x for x in queues}
    running: list[int] = []
    released: list[int] = []
    for n in range(1, 500):
        order = sorted(
            (sid for sid in jobs if jobs[sid]), key=lambda sid: (by_id[sid].priority, served[sid], sid)
        )
        if not order:
            return released, n
        now = [replace(by_id[sid], jobs=tuple(jobs[sid])) for sid in order]
        for step in plan_release(now, 9, sum(running), overcommit=overcommit):
            if step.action in ("dispatch", "reuse"):
                released += step.job_ids
                jobs[step.sweep_id] = [x for x in jobs[step.sweep_id] if x.job_id not in step.job_ids]
            if step.action == "dispatch":
                running.append(step.slots)
                served[step.sweep_id] = n * 100 + len(released)
        running = [r for r in running if rng.random() < 0.5]
    raise AssertionError("the queue never emptied")


def test_every_job_goes_out_once_tick_after_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    # A reuse the plan no longer reaches on a full label (or one no queued job fits) is not lost:
    # a later tick reaches the sweep and reuses it; no job goes out twice, none is left queued.
    import random

    later = 0
    for seed in range(40):
        queues = _random_queues(random.Random(seed), canary=seed % 4 == 0)
        every = sorted(x.job_id for queue in queues for x in queue.jobs)
        for overcommit in (0, 3, "auto"):
            released, ticks = _ticks(queues, overcommit, seed)
            assert sorted(released) == every, (seed, overcommit)  # each once, all of them
            with monkeypatch.context() as m:
                m.setattr(release_plan, "_nothing_fits", _main_rule)
                main, main_ticks = _ticks(queues, overcommit, seed)
            assert sorted(main) == every
            later += released != main
    assert later > 10  # the order differs (reuses deferred), the jobs released do not
