"""The priority controller's plan: a table of snapshots through `sweepbot sched plan --json`, and
properties of random snapshots (hypothesis) checked against rules written here from the contract,
not from the planner's code."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from app.cli.sched import sched_app
from app.core.schedplan import Policy, needs_plan, plan
from app.core.schedsnapshot import SnapshotError, parse_snapshot

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
app = typer.Typer()
app.add_typer(sched_app, name="sched")


def tok(n: int) -> str:
    return f"{n:032x}"


def job(
    jid: int,
    *,
    hw: str = "mi355x",
    score: float = 1.0,
    pr: int | None = 1,
    age_min: float = 10,
    status: str = "queued",
    nodes: int | None = None,
    attempt: int = 1,
    skip: int | None = None,
    labels: list[str] | None = None,
    run_id: int | None = None,
) -> dict[str, Any]:
    ls = (
        labels
        if labels is not None
        else ["self-hosted", hw, f"ci-job-{score:.3f}-{tok(jid)}", f"ci-attempt-{attempt}"]
    )
    if skip is not None:
        ls.append(f"ci-skip-queue-pr-{skip}")
    if nodes is not None:
        ls.append(f"nodes:{nodes}")
    return {
        "id": jid,
        "run_id": run_id or 1000 + jid,
        "pr": pr,
        "labels": ls,
        "created_at": (NOW - timedelta(minutes=age_min)).isoformat(),
        "status": status,
    }


def runner(rid: int, *labels: str, busy: bool = False, status: str = "online") -> dict[str, Any]:
    return {
        "id": rid,
        "name": f"r{rid:02d}",
        "labels": ["self-hosted", *labels],
        "status": status,
        "busy": busy,
    }


def snap(jobs: list[dict[str, Any]], runners: list[dict[str, Any]]) -> dict[str, Any]:
    return {"now": NOW.isoformat(), "jobs": jobs, "runners": runners}


def run_cli(tmp_path: Path, data: dict[str, Any], *extra: str) -> list[dict[str, Any]]:
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(data))
    result = CliRunner().invoke(app, ["sched", "plan", str(path), "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def assignments(answer: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {a["runner_id"]: a for a in answer if "job_id" in a}


def cleanups(answer: list[dict[str, Any]]) -> dict[int, list[str]]:
    return {c["runner_id"]: c["remove_labels"] for c in answer if "remove_labels" in c}


# ------------------------------------------------------------------ the table


def test_highest_score_gets_the_one_idle_runner_with_its_labels(tmp_path: Path) -> None:
    answer = run_cli(
        tmp_path,
        snap([job(1, score=1.0), job(2, score=3.0)], [runner(1, "mi355x")]),
        "--fair-share-weight",
        "0",
    )
    a = assignments(answer)[1]
    assert a["job_id"] == 2
    assert sorted(a["add_labels"]) == ["ci-attempt-1", f"ci-job-3.000-{tok(2)}"]
    assert a["lease"] is None and "3.000" in a["why"]


def test_aging_lets_an_old_low_score_job_overtake(tmp_path: Path) -> None:
    answer = run_cli(
        tmp_path,
        snap([job(1, score=1.0, age_min=300), job(2, score=3.0, age_min=1)], [runner(1, "mi355x")]),
        "--fair-share-weight",
        "0",
    )
    assert assignments(answer)[1]["job_id"] == 1


def test_compatibility_ignores_scheduling_labels_and_needs_the_hardware(tmp_path: Path) -> None:
    answer = run_cli(
        tmp_path,
        snap([job(1, hw="b200", score=9), job(2, hw="mi355x")], [runner(1, "mi355x"), runner(2, "MI355X")]),
    )
    a = assignments(answer)
    assert {x["job_id"] for x in a.values()} == {2}, (
        "the b200 job fits no runner; labels are case-insensitive"
    )


def test_busy_and_offline_runners_and_running_jobs_are_never_touched(tmp_path: Path) -> None:
    stale = f"ci-job-1.000-{tok(77)}"
    answer = run_cli(
        tmp_path,
        snap(
            [job(1, status="in_progress"), job(2)],
            [runner(1, "mi355x", stale, busy=True), runner(2, "mi355x", stale, status="offline")],
        ),
    )
    assert answer == []


def test_stale_labels_come_off_an_idle_runner_but_sticky_attempt_stays(tmp_path: Path) -> None:
    answer = run_cli(
        tmp_path,
        snap([], [runner(1, "mi355x", f"ci-job-1.000-{tok(5)}", "ci-attempt-1", "ci-skip-queue-pr-3")]),
    )
    assert cleanups(answer) == {1: sorted([f"ci-job-1.000-{tok(5)}", "ci-skip-queue-pr-3"])}


def test_a_runner_already_labelled_for_a_queued_job_keeps_it(tmp_path: Path) -> None:
    labels = [f"ci-job-1.000-{tok(1)}", "ci-attempt-1"]
    answer = run_cli(tmp_path, snap([job(1, score=1.0), job(2, score=5.0)], [runner(1, "mi355x", *labels)]))
    assert assignments(answer)[1]["job_id"] == 1 and assignments(answer)[1]["add_labels"] == []
    assert cleanups(answer) == {}


def test_one_job_per_runner_and_one_runner_per_job(tmp_path: Path) -> None:
    answer = run_cli(
        tmp_path,
        snap([job(i, score=i) for i in range(1, 6)], [runner(i, "mi355x") for i in range(1, 4)]),
        "--fair-share-weight",
        "0",
    )
    a = assignments(answer)
    assert len(a) == 3 and len({x["job_id"] for x in a.values()}) == 3
    assert {x["job_id"] for x in a.values()} == {3, 4, 5}


def test_skip_queue_goes_first_only_when_authorised(tmp_path: Path) -> None:
    data = snap([job(1, score=5.0, pr=1), job(2, score=0.0, pr=2, skip=2)], [runner(1, "mi355x")])
    assert assignments(run_cli(tmp_path, data, "--fair-share-weight", "0"))[1]["job_id"] == 1
    a = assignments(run_cli(tmp_path, data, "--fair-share-weight", "0", "--skip-queue-pr", "2"))[1]
    assert a["job_id"] == 2 and "ci-skip-queue-pr-2" in a["add_labels"]


def test_canary_takes_only_a_runner_no_other_job_can_use(tmp_path: Path) -> None:
    data = snap([job(1, score=9.0, run_id=55), job(2, score=0.0)], [runner(1, "mi355x")])
    assert assignments(run_cli(tmp_path, data, "--canary-run", "55"))[1]["job_id"] == 2
    data = snap([job(1, score=9.0, run_id=55), job(2, hw="b200")], [runner(1, "mi355x")])
    assert assignments(run_cli(tmp_path, data, "--canary-run", "55"))[1]["job_id"] == 1


def test_infra_failure_goes_to_another_runner(tmp_path: Path) -> None:
    data = snap([job(1, attempt=2)], [runner(1, "mi355x"), runner(2, "mi355x")])
    a = assignments(run_cli(tmp_path, data, "--avoid", f"{tok(1)}=r01"))
    assert list(a) == [2]
    # the other runner is busy: the job waits for it rather than going back to r01
    data = snap([job(1, attempt=2)], [runner(1, "mi355x"), runner(2, "mi355x", busy=True)])
    assert assignments(run_cli(tmp_path, data, "--avoid", f"{tok(1)}=r01")) == {}
    # no other compatible runner at all: r01 it is
    data = snap([job(1, attempt=2)], [runner(1, "mi355x")])
    assert list(assignments(run_cli(tmp_path, data, "--avoid", f"{tok(1)}=r01"))) == [1]


def test_a_lease_is_whole_within_one_cluster_or_not_at_all(tmp_path: Path) -> None:
    pool = [runner(i, "b200-nv", "cluster:b200-nv") for i in range(1, 4)] + [
        runner(9, "b200-nv", "cluster:other")
    ]
    a = assignments(run_cli(tmp_path, snap([job(1, hw="b200-nv", nodes=3)], pool)))
    assert sorted(a) == [1, 2, 3]
    leases = {x["lease"] for x in a.values()}
    assert len(leases) == 1 and next(iter(leases)).startswith("ci-lease-")
    heads = [x for x in a.values() if any(lbl.startswith("ci-job-") for lbl in x["add_labels"])]
    assert len(heads) == 1 and "nodes:3" in heads[0]["add_labels"]
    assert all(next(iter(leases)) in x["add_labels"] for x in a.values())
    # four compatible runners but only three free in one pool: no partial lease
    short = [
        runner(1, "b200-nv", "cluster:b200-nv"),
        runner(2, "b200-nv", "cluster:b200-nv"),
        runner(9, "b200-nv", "cluster:other"),
        runner(3, "b200-nv", "cluster:b200-nv", busy=True),
    ]
    assert assignments(run_cli(tmp_path, snap([job(1, hw="b200-nv", nodes=3)], short))) == {}


def test_a_lease_with_a_runner_gone_busy_is_released(tmp_path: Path) -> None:
    lease = f"ci-lease-{tok(1)}-1"
    rs = [
        runner(1, "b200-nv", "cluster:x", lease, f"ci-job-1.000-{tok(1)}", "ci-attempt-1", "nodes:2"),
        runner(2, "b200-nv", "cluster:x", lease, busy=True),
    ]
    answer = run_cli(tmp_path, snap([job(1, hw="b200-nv", nodes=2)], rs))
    assert assignments(answer) == {}
    assert set(cleanups(answer)[1]) >= {lease, f"ci-job-1.000-{tok(1)}"}


def test_lease_runners_of_a_running_job_are_held(tmp_path: Path) -> None:
    lease = f"ci-lease-{tok(1)}-1"
    rs = [runner(1, "b200-nv", "cluster:x", lease, busy=True), runner(2, "b200-nv", "cluster:x", lease)]
    answer = run_cli(
        tmp_path, snap([job(1, hw="b200-nv", nodes=2, status="in_progress"), job(2, hw="b200-nv")], rs)
    )
    assert answer == []


def test_unprioritisable_jobs_are_reported_and_left_to_fifo(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(snap([job(1, labels=["self-hosted", "mi355x"])], [runner(1, "mi355x")])))
    result = CliRunner().invoke(app, ["sched", "plan", str(path), "--json"])
    assert json.loads(result.stdout) == []
    assert "this job cannot be prioritised: re-dispatch it" in result.stderr


@pytest.mark.parametrize(
    ("mutate", "says"),
    [
        (lambda d: d.pop("now"), "lacks now"),
        (lambda d: d["jobs"][0].update(status="done"), "jobs[0].status must be one of"),
        (lambda d: d["jobs"][0].update(created_at="yesterday"), "jobs[0].created_at"),
        (lambda d: d["runners"][0].update(busy="no"), "runners[0].busy"),
        (lambda d: d["jobs"].append(dict(d["jobs"][0])), "appears twice"),
    ],
)
def test_a_bad_snapshot_says_what_and_how(tmp_path: Path, mutate: Any, says: str) -> None:
    data = snap([job(1)], [runner(1, "mi355x")])
    mutate(data)
    with pytest.raises(SnapshotError, match=re.escape(says)):
        parse_snapshot(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    result = CliRunner().invoke(app, ["sched", "plan", str(path)])
    assert result.exit_code == 2 and says.split()[0] in result.stderr


# ------------------------------------------------------------------ properties


STARVE_AFTER_HOURS = 7.0  # Policy()'s starvation bound


def static_priority(j: dict[str, Any]) -> float:
    """score + 1.0/h aging, from the label itself (fair share off in these checks); a job queued
    past the starvation bound before every other, the oldest first."""
    label = next(x for x in j["labels"] if x.startswith("ci-job-"))
    age = (NOW - datetime.fromisoformat(j["created_at"])).total_seconds() / 3600
    if age > STARVE_AFTER_HOURS:
        return 1e9 + age
    return float(label.split("-")[2]) + age


def needs(j: dict[str, Any]) -> set[str]:
    return {x.lower() for x in j["labels"] if not x.lower().startswith(("ci-", "nodes:"))}


def check(data: dict[str, Any], answer: list[dict[str, Any]]) -> None:
    runners = {r["id"]: r for r in data["runners"]}
    jobs = {j["id"]: j for j in data["jobs"]}
    got = [a for a in answer if "job_id" in a]
    assert len({a["runner_id"] for a in got}) == len(got), "one job per runner"
    for a in got:
        r, j = runners[a["runner_id"]], jobs[a["job_id"]]
        assert r["status"] == "online" and not r["busy"], "only idle online runners get labels"
        assert j["status"] == "queued", "a running job is never assigned"
        assert needs(j) <= {x.lower() for x in r["labels"]}, "compatibility"
    for c in answer:
        if "remove_labels" in c:
            r = runners[c["runner_id"]]
            assert r["status"] == "online" and not r["busy"], "clean-up only on idle runners"
    by_job: dict[int, list[dict[str, Any]]] = {}
    for a in got:
        by_job.setdefault(a["job_id"], []).append(a)
    for jid, rows in by_job.items():
        nodes = next((int(x.split(":")[1]) for x in jobs[jid]["labels"] if x.startswith("nodes:")), 1)
        assert len(rows) == nodes, "a lease is whole or absent"
        if nodes > 1:
            pools = [{x for x in runners[a["runner_id"]]["labels"] if x.startswith("cluster:")} for a in rows]
            assert set.intersection(*pools), "one cluster pool"
            assert len({a["lease"] for a in rows}) == 1
    used = {a["runner_id"] for a in got}
    idle = [r for r in data["runners"] if r["status"] == "online" and not r["busy"] and r["id"] not in used]
    for j in data["jobs"]:
        if (
            j["status"] != "queued"
            or j["id"] in by_job
            or any(x.startswith("nodes:") and x != "nodes:1" for x in j["labels"])
        ):
            continue
        assert not any(needs(j) <= {x.lower() for x in r["labels"]} for r in idle), (
            "a job waits while a compatible runner idles"
        )
        for a in got:
            lower = jobs[a["job_id"]]
            if (
                needs(j) <= {x.lower() for x in runners[a["runner_id"]]["labels"]}
                and lower["labels"][-1] != "nodes:2"
            ):
                assert static_priority(j) <= static_priority(lower) + 1e-6, "a higher priority waited"


HW = ["mi355x", "b200-nv"]


@st.composite
def snapshots(draw: st.DrawFn) -> dict[str, Any]:
    runners = []
    for rid in range(1, draw(st.integers(1, 7)) + 1):
        hw = draw(st.sampled_from(HW))
        extra = [f"cluster:{draw(st.sampled_from(['a', 'b']))}"] if hw == "b200-nv" else []
        runners.append(
            runner(
                rid,
                hw,
                *extra,
                busy=draw(st.booleans()) and draw(st.booleans()),
                status=draw(st.sampled_from(["online", "online", "offline"])),
            )
        )
    jobs = []
    for jid in range(1, draw(st.integers(0, 10)) + 1):
        hw = draw(st.sampled_from(HW))
        nodes = draw(st.sampled_from([None, 1, 2])) if hw == "b200-nv" else None
        jobs.append(
            job(
                jid,
                hw=hw,
                score=draw(st.sampled_from([0.0, 1.0, 2.5])),
                pr=draw(st.integers(1, 3)),
                age_min=draw(st.integers(0, 600)),
                nodes=nodes,
                status=draw(st.sampled_from(["queued", "queued", "in_progress"])),
            )
        )
    return snap(jobs, runners)


@given(snapshots())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_snapshots_keep_every_rule(data: dict[str, Any]) -> None:
    result = plan(parse_snapshot(data), Policy(fair_share_weight=0.0, lease_hold_minutes=None))
    check(data, result.as_json())


@given(snapshots())
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_snapshots_with_fair_share_keep_the_hard_rules(data: dict[str, Any]) -> None:
    result = plan(parse_snapshot(data), Policy())
    answer = result.as_json()
    runners = {r["id"]: r for r in data["runners"]}
    got = [a for a in answer if "job_id" in a]
    assert len({a["runner_id"] for a in got}) == len(got)
    assert all(
        runners[a["runner_id"]]["status"] == "online" and not runners[a["runner_id"]]["busy"] for a in got
    )
    order = [e.priority.total for e in result.queue]
    assert order == sorted(order, reverse=True), "the queue is shown in effective-priority order"


def test_the_starvation_bound_is_policy_s() -> None:
    assert Policy().starve_after_hours == STARVE_AFTER_HOURS


def test_fair_share_dominates_the_score(tmp_path: Path) -> None:
    # PR 1 holds two runners (-8.0), PR 2 one (-4.0); PR 1's job's score is 3.5 higher than PR 2's
    running = [job(3, pr=1, status="in_progress"), job(4, pr=1, status="in_progress")]
    data = snap(
        [job(1, pr=1, score=4.5), job(2, pr=2, score=1.0), *running, job(5, pr=2, status="in_progress")],
        [runner(1, "mi355x")],
    )
    assert assignments(run_cli(tmp_path, data))[1]["job_id"] == 2, "the PR that used less first"
    got = assignments(run_cli(tmp_path, data, "--fair-share-weight", "1"))[1]
    assert got["job_id"] == 1, "a weak fair share lets the score win"


def test_a_job_past_the_starvation_bound_goes_first_oldest_first(tmp_path: Path) -> None:
    busy = [job(10 + i, pr=1, status="in_progress") for i in range(3)]  # PR 1: -12 of fair share
    old = job(1, pr=1, score=1.0, age_min=7.5 * 60)
    older = job(2, pr=1, score=0.0, age_min=8 * 60)
    strong = job(3, pr=2, score=5.0, age_min=10)
    held = job(4, pr=2, status="in_progress")  # PR 2 holds a runner too: its job is not its first
    data = snap([old, older, strong, held, *busy], [runner(1, "mi355x")])
    assert assignments(run_cli(tmp_path, data))[1]["job_id"] == 2, "overdue: the oldest first"
    got = run_cli(tmp_path, snap([old, strong, held, *busy], [runner(1, "mi355x")]))
    assert assignments(got)[1]["job_id"] == 1
    off = run_cli(
        tmp_path, snap([old, strong, held, *busy], [runner(1, "mi355x")]), "--starve-after-hours", "0"
    )
    assert assignments(off)[1]["job_id"] == 3, "without the bound the fair share and score win"


def test_a_pr_s_first_job_goes_before_overdue_jobs(tmp_path: Path) -> None:
    busy = [job(10 + i, pr=1, status="in_progress") for i in range(2)]
    overdue = job(1, pr=1, score=5.0, age_min=9 * 60)
    first = job(2, pr=3, score=1.0, age_min=1)  # PR 3: nothing run, nothing running
    data = snap([overdue, first, *busy], [runner(1, "mi355x")])
    answer = run_cli(tmp_path, data)
    assert assignments(answer)[1]["job_id"] == 2, "a new PR's first job is not kept behind the backlog"
    second = snap([overdue, first, job(3, pr=3, status="in_progress"), *busy], [runner(1, "mi355x")])
    assert assignments(run_cli(tmp_path, second))[1]["job_id"] == 1, "only its first: then the bound"


def test_fair_share_favours_the_pr_that_used_less(tmp_path: Path) -> None:
    data = snap(
        [
            job(1, pr=1, score=1.0, age_min=30),
            job(2, pr=2, score=1.0, age_min=5),
            job(3, pr=1, status="in_progress"),
            job(4, pr=1, status="in_progress"),
        ],
        [runner(1, "mi355x")],
    )
    assert assignments(run_cli(tmp_path, data))[1]["job_id"] == 2
    assert assignments(run_cli(tmp_path, data, "--fair-share-weight", "0"))[1]["job_id"] == 1


# ------------------------------------------------------------------ when a plan is needed at all


def applied(data: dict[str, Any], answer: list[dict[str, Any]]) -> dict[str, Any]:
    """The snapshot after the controller wrote a plan's labels (adds, then clean-ups)."""
    runners = {r["id"]: {**r, "labels": list(r["labels"])} for r in data["runners"]}
    for row in answer:
        r = runners[row["runner_id"]]
        r["labels"] += [x for x in row.get("add_labels", []) if x not in r["labels"]]
        r["labels"] = [x for x in r["labels"] if x not in row.get("remove_labels", [])]
    return {**data, "runners": list(runners.values())}


@given(snapshots())
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_skipped_plan_is_one_that_would_have_done_nothing(data: dict[str, Any]) -> None:
    first = plan(parse_snapshot(data), Policy()).as_json()
    for d in (data, applied(data, first)):
        s = parse_snapshot(d)
        if not needs_plan(s):
            again = plan(s, Policy())
            assert not any(a.add_labels for a in again.assignments), "a skipped plan would have placed a job"
            assert not again.cleanups, "a skipped plan would have cleaned a runner"


def test_a_plan_is_needed_only_while_an_idle_runner_is_free_or_stale() -> None:
    data = snap([job(1), job(2)], [runner(1, "mi355x"), runner(2, "b200-nv", busy=True)])
    assert needs_plan(parse_snapshot(data)), "an idle runner fits a queued job"
    after = applied(data, plan(parse_snapshot(data), Policy()).as_json())
    assert not needs_plan(parse_snapshot(after)), "the idle runner awaits the job it is labelled for"
    cancelled = {**after, "jobs": [job(2)]}  # job 1 gone: its label on the idle runner is stale
    assert needs_plan(parse_snapshot(cancelled))
    unprioritisable = snap([job(3, labels=["self-hosted", "mi355x"])], [runner(1, "b200-nv")])
    assert needs_plan(parse_snapshot(unprioritisable)) and not needs_plan(
        parse_snapshot(unprioritisable), reported={3}
    ), "an unreported job without labels needs its notice, once"


def test_a_rerun_needs_a_plan_though_its_runner_carries_its_token() -> None:
    # attempt 2 keeps the token, so its ci-job- label is attempt 1's; the runner lacks ci-attempt-2
    first = job(1)
    rerun = job(1, attempt=2)
    labelled = runner(1, "mi355x", *[x for x in first["labels"] if x.startswith("ci-")])
    assert not needs_plan(parse_snapshot(snap([first], [labelled])))
    assert needs_plan(parse_snapshot(snap([rerun], [labelled]))), "GitHub would never hand it over"
