"""The repair poll's pure decision: one listing, then only the runs ahead of our jobs."""

from __future__ import annotations

from datetime import UTC, datetime

from app.core.runpoll import JobView, created_cutoff, plan_poll, run_is_ahead

D = JobView("dispatched")
R = JobView("running")
OK = JobView("running", "success")


def run(run_id: int, status: str, conclusion: str | None = None, name: str = "") -> dict:
    title = f"e2e Test - {name}" if name else f"e2e Test - sweepbot-1-{run_id}"
    return {"id": run_id, "status": status, "conclusion": conclusion, "display_title": title}


def test_cutoff_is_stable_within_the_quantum_and_covers_the_oldest_dispatch() -> None:
    a = created_cutoff(datetime(2026, 12, 1, 12, 15, tzinfo=UTC))
    b = created_cutoff(datetime(2026, 12, 1, 12, 59, tzinfo=UTC))
    assert a == b == ">=2026-12-01T12:00:00Z"
    # ten minutes of slack for clock skew cross the hour boundary
    assert created_cutoff(datetime(2026, 12, 1, 12, 5)) == ">=2026-12-01T11:00:00Z"


def test_only_runs_ahead_of_our_jobs_are_applied() -> None:
    listing = [
        run(1, "queued"),  # dispatched, still queued: nothing new
        run(2, "in_progress"),  # our job still thinks dispatched: apply
        run(3, "in_progress"),  # already running: nothing new
        run(4, "completed", "failure"),  # apply
        run(5, "completed", "success"),  # collection pending: the poll has nothing to add
        run(99, "completed", "success"),  # not ours
    ]
    tracked = {1: [D], 2: [D], 3: [R], 4: [R], 5: [OK]}
    plan = plan_poll(listing, total_count=6, tracked=tracked)
    assert [r["id"] for r in plan.apply] == [2, 4]
    assert plan.unchanged == 3 and plan.fetch == () and plan.more_pages == 0
    assert "2 ahead" in plan.reason


def test_a_job_without_run_id_is_adopted_by_its_run_name() -> None:
    listing = [run(7, "queued", name="sweepbot-3-9"), run(8, "queued", name="sweepbot-3-10")]
    plan = plan_poll(listing, total_count=2, tracked={}, waiting_names={"sweepbot-3-10"})
    assert [r["id"] for r in plan.apply] == [8]


def test_tracked_runs_not_listed_are_fetched_or_paged_whichever_is_cheaper() -> None:
    listing = [run(i, "queued") for i in range(100, 0, -1)]
    tracked = {i: [D] for i in range(1, 101)} | {500: [D], 501: [D], 502: [D]}
    # 250 runs match: two more pages cost 2 calls, fetching the 3 missing runs costs 3
    paged = plan_poll(listing, total_count=250, tracked=tracked)
    assert paged.more_pages == 2 and paged.fetch == ()
    # one missing run: one fetch beats two pages
    one = plan_poll(listing, total_count=250, tracked={**{i: [D] for i in range(1, 101)}, 500: [D]})
    assert one.fetch == (500,) and one.more_pages == 0
    # complete listing and a run still missing (deleted, or not yet visible): fetch it
    gone = plan_poll([run(1, "queued")], total_count=1, tracked={1: [D], 2: [D]})
    assert gone.fetch == (2,)


def test_run_is_ahead_edges() -> None:
    assert not run_is_ahead(run(1, "completed", "success"), [OK])
    assert run_is_ahead(run(1, "completed", "cancelled"), [R, OK])
    assert not run_is_ahead(run(1, "waiting"), [D])
    assert not run_is_ahead({"id": "x"}, [])
    # malformed ids in a listing are skipped, not fatal
    assert plan_poll([{"id": None}, {"status": "queued"}], total_count=2, tracked={}).apply == ()
