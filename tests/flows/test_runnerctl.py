"""The live controller (app/flows/scheduler/runner_control.py) against a fake runners API: facts
from workflow_job
deliveries, idempotent label writes, clean-up, leases verified before the job label, missed
deliveries recovered, unprioritisable jobs reported once, the contract variable."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from app.flows.scheduler.runner_control import (
    ControllerConfig,
    MemoryFacts,
    apply_workflow_job,
    contract_on,
    reconcile,
)

T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
REPO = "o/r"
TOKEN = "0" * 31 + "1"
JOB = ["self-hosted", "mi355x", f"ci-job-2.000-{TOKEN}", "ci-attempt-1"]


class FakeRunners:
    def __init__(self, *runners: tuple[int, str, list[str]]) -> None:
        self.r: dict[int, dict[str, Any]] = {
            rid: {"id": rid, "name": n, "status": "online", "busy": False, "labels": list(ls)}
            for rid, n, ls in runners
        }
        self.calls: list[tuple[str, int | None, Any]] = []
        self.busy_on_read: set[int] = set()
        self.variables: dict[str, str] = {}

    def list_runners(self, repo: str) -> list[dict[str, Any]]:
        self.calls.append(("list", None, None))
        return [dict(x, labels=list(x["labels"])) for x in self.r.values()]

    def get_runner(self, repo: str, runner_id: int) -> dict[str, Any]:
        self.calls.append(("get", runner_id, None))
        row = dict(self.r[runner_id], labels=list(self.r[runner_id]["labels"]))
        return dict(row, busy=True) if runner_id in self.busy_on_read else row

    def add_runner_labels(self, repo: str, runner_id: int, labels: list[str]) -> list[str]:
        self.calls.append(("add", runner_id, sorted(labels)))
        self.r[runner_id]["labels"] += [x for x in labels if x not in self.r[runner_id]["labels"]]
        return list(self.r[runner_id]["labels"])

    def remove_runner_label(self, repo: str, runner_id: int, name: str) -> list[str] | None:
        self.calls.append(("remove", runner_id, name))
        if name not in self.r[runner_id]["labels"]:
            return None
        self.r[runner_id]["labels"].remove(name)
        return list(self.r[runner_id]["labels"])

    def queued_jobs(self, repo: str) -> list[dict[str, Any]] | None:
        return None

    def get_repo_variable(self, repo: str, name: str) -> str | None:
        return self.variables.get(name)

    def writes(self) -> list[tuple[str, int | None, Any]]:
        return [c for c in self.calls if c[0] in ("add", "remove")]


class Listing(FakeRunners):
    """The runners API and the fallback listing of queued jobs (``listed``, set by the test)."""

    listed: list[dict[str, Any]]

    def queued_jobs(self, repo: str) -> list[dict[str, Any]] | None:
        return list(self.listed)


def hook(
    action: str,
    job_id: int,
    labels: list[str],
    runner: tuple[int, str] | None = None,
    conclusion: str | None = None,
) -> dict[str, Any]:
    return {
        "action": action,
        "workflow_job": {
            "id": job_id,
            "run_id": 7,
            "labels": labels,
            "conclusion": conclusion,
            "runner_id": runner[0] if runner else None,
            "runner_name": runner[1] if runner else None,
        },
    }


def test_a_queued_job_gets_one_runner_then_nothing_more_is_written() -> None:
    gw = FakeRunners((1, "a", ["self-hosted", "mi355x"]), (2, "b", ["self-hosted", "b200"]))
    facts, cfg = MemoryFacts(), ControllerConfig(REPO)
    apply_workflow_job(facts, hook("queued", 11, JOB), T0, pr=5)
    reconcile(facts, gw, cfg, T0)
    assert gw.writes() == [("add", 1, sorted(JOB[2:]))]
    reconcile(facts, gw, cfg, T0 + timedelta(seconds=5))  # GitHub has not handed it over yet
    assert len(gw.writes()) == 1, "look before write: the labels are there already"


def test_completed_job_labels_are_cleaned_and_the_runner_reused() -> None:
    gw = FakeRunners((1, "a", ["self-hosted", "mi355x"]))
    facts, cfg = MemoryFacts(), ControllerConfig(REPO)
    apply_workflow_job(facts, hook("queued", 11, JOB), T0, pr=5)
    reconcile(facts, gw, cfg, T0)
    apply_workflow_job(facts, hook("in_progress", 11, JOB, (1, "a")), T0 + timedelta(seconds=3))
    other = ["self-hosted", "mi355x", f"ci-job-1.000-{'2' * 32}", "ci-attempt-1"]
    apply_workflow_job(facts, hook("queued", 12, other), T0 + timedelta(seconds=4), pr=6)
    reconcile(facts, gw, cfg, T0 + timedelta(seconds=5))
    assert len(gw.writes()) == 1, "a busy runner is never touched"
    apply_workflow_job(facts, hook("completed", 11, JOB, (1, "a"), "success"), T0 + timedelta(hours=1))
    reconcile(facts, gw, cfg, T0 + timedelta(hours=1))
    assert gw.writes()[1:] == [("remove", 1, JOB[2]), ("add", 1, [other[2]])]  # ci-attempt-1 stays
    assert facts.usage_hours(T0 + timedelta(hours=1))[5] > 0.9


def test_a_lease_is_published_only_once_every_runner_verified() -> None:
    pool = [(i, f"n{i}", ["self-hosted", "cluster:b200", "b200"]) for i in (1, 2)]
    multi = ["self-hosted", "cluster:b200", f"ci-job-3.250-{TOKEN}", "ci-attempt-1", "nodes:2"]
    gw = FakeRunners(*pool)
    facts, cfg = MemoryFacts(), ControllerConfig(REPO)
    apply_workflow_job(facts, hook("queued", 11, multi), T0, pr=5)
    reconcile(facts, gw, cfg, T0)
    lease = f"ci-lease-{TOKEN}-1"
    adds = [c for c in gw.writes() if c[0] == "add"]
    assert adds[:2] == [("add", 1, [lease]), ("add", 2, [lease])]
    assert adds[2][1] == 1 and f"ci-job-3.250-{TOKEN}" in adds[2][2] and "nodes:2" in adds[2][2]
    assert [c[0] for c in gw.calls].index("get") < len(gw.calls) - 1, "read back before the job label"


def test_a_lease_that_does_not_verify_is_released_without_the_job_label() -> None:
    pool = [(i, f"n{i}", ["self-hosted", "cluster:b200", "b200"]) for i in (1, 2)]
    multi = ["self-hosted", "cluster:b200", f"ci-job-3.250-{TOKEN}", "ci-attempt-1", "nodes:2"]
    gw = FakeRunners(*pool)
    gw.busy_on_read = {2}  # a FIFO job took it between the list and the lease
    facts, cfg = MemoryFacts(), ControllerConfig(REPO)
    apply_workflow_job(facts, hook("queued", 11, multi), T0, pr=5)
    reconcile(facts, gw, cfg, T0)
    assert not any(c[0] == "add" and any(x.startswith("ci-job-") for x in c[2]) for c in gw.writes())
    assert all(not any(x.startswith("ci-lease-") for x in r["labels"]) for r in gw.r.values())
    gw.r[2]["busy"] = True
    lists = sum(1 for c in gw.calls if c[0] == "list")
    reconcile(facts, gw, cfg, T0 + timedelta(seconds=1))
    assert sum(1 for c in gw.calls if c[0] == "list") == lists + 1, "the runners are listed again"
    assert sum(1 for c in gw.calls if c[0] == "get") == 2, "not the same failing lease again"


def test_a_missed_in_progress_is_found_by_listing_after_the_timeout() -> None:
    gw = FakeRunners((1, "a", ["self-hosted", "mi355x"]))
    facts, cfg = MemoryFacts(), ControllerConfig(REPO, assign_timeout_s=60)
    apply_workflow_job(facts, hook("queued", 11, JOB), T0, pr=5)
    reconcile(facts, gw, cfg, T0)
    gw.r[1]["busy"] = True  # GitHub started it; the in_progress delivery never came
    lists = sum(1 for c in gw.calls if c[0] == "list")
    reconcile(facts, gw, cfg, T0 + timedelta(seconds=120))
    assert sum(1 for c in gw.calls if c[0] == "list") == lists + 1
    assert facts.jobs[11].status == "in_progress"


def test_an_unprioritisable_job_is_reported_once() -> None:
    gw = FakeRunners((1, "a", ["self-hosted", "mi355x"]))
    facts, cfg = MemoryFacts(), ControllerConfig(REPO)
    apply_workflow_job(facts, hook("queued", 11, ["mi355x"]), T0)
    first = reconcile(facts, gw, cfg, T0)
    again = reconcile(facts, gw, cfg, T0 + timedelta(seconds=5))
    assert [n.job_id for n in first.notices] == [11] and again.notices == []
    assert "re-dispatch" in first.notices[0].text and gw.writes() == []


def test_an_infra_failure_sends_the_rerun_elsewhere() -> None:
    gw = FakeRunners((1, "a", ["self-hosted", "mi355x"]), (2, "b", ["self-hosted", "mi355x"]))
    facts, cfg = MemoryFacts(), ControllerConfig(REPO)
    apply_workflow_job(facts, hook("queued", 11, JOB), T0, pr=5)
    apply_workflow_job(facts, hook("in_progress", 11, JOB, (1, "a")), T0)
    apply_workflow_job(facts, hook("completed", 11, JOB, (1, "a"), "runner_lost"), T0 + timedelta(minutes=5))
    rerun = [*JOB[:3], "ci-attempt-2"]
    apply_workflow_job(facts, hook("queued", 12, rerun), T0 + timedelta(minutes=6), pr=5)
    reconcile(facts, gw, cfg, T0 + timedelta(minutes=6))
    assert [c[1] for c in gw.writes() if c[0] == "add"] == [2]


def test_the_contract_variable() -> None:
    gw = FakeRunners()
    assert not contract_on(gw, REPO)
    gw.variables["PRIORITY_SCHEDULER_ENABLED"] = "True"
    assert contract_on(gw, REPO)
    gw.variables["PRIORITY_SCHEDULER_ENABLED"] = "false"
    assert not contract_on(gw, REPO)


def test_a_job_github_no_longer_lists_goes_and_late_listings_do_not_starve_the_fallback() -> None:
    gw = Listing((1, "a", ["self-hosted", "mi355x"]))
    facts, cfg = MemoryFacts(), ControllerConfig(REPO, assign_timeout_s=60, runner_refresh_s=900)
    apply_workflow_job(facts, hook("queued", 11, JOB), T0, pr=5)  # cancelled later, delivery lost
    gw.listed = [{"id": 11, "run_id": 7, "labels": JOB, "created_at": T0.isoformat()}]
    reconcile(facts, gw, cfg, T0)
    assert any(TOKEN in x for x in gw.r[1]["labels"]), "job 11 labelled for the runner"
    other = ["self-hosted", "mi355x", f"ci-job-1.000-{'3' * 32}", "ci-attempt-1"]
    gw.listed = [{"id": 12, "run_id": 8, "labels": other, "created_at": T0.isoformat()}]  # queued: lost
    # job 11 labelled and never taken: the runners are listed again every minute (late), and still
    # the fallback listing comes every runner_refresh_s
    for minute in range(1, 17):
        reconcile(facts, gw, cfg, T0 + timedelta(minutes=minute))
    assert 11 not in facts.jobs, "GitHub no longer lists it: it goes"
    assert 12 in facts.jobs and any(f"ci-job-1.000-{'3' * 32}" in x for x in gw.r[1]["labels"])


def test_a_job_that_left_the_queue_listing_keeps_its_labels_on_the_runner_that_took_it() -> None:
    """GitHub handed job 11 to the runner the bot labelled, and the fallback listing (no longer
    listing it) comes before the in_progress delivery: the runners are listed before planning, so
    the busy runner's labels are not taken for stale ones."""

    gw = Listing((1, "a", ["self-hosted", "mi355x"]))
    facts = MemoryFacts()
    # no faster listing while a job waits: only the fallback listing may cause this one
    cfg = ControllerConfig(REPO, runner_refresh_s=900, assign_timeout_s=3600, waiting_refresh_s=None)
    apply_workflow_job(facts, hook("queued", 11, JOB), T0, pr=5)
    gw.listed = [{"id": 11, "run_id": 7, "labels": JOB, "created_at": T0.isoformat()}]
    reconcile(facts, gw, cfg, T0)
    assert gw.writes() == [("add", 1, sorted(JOB[2:]))]
    # the runners were listed again since (a lease that failed its read-back, say): that listing
    # is not due when the fallback listing of queued jobs is, each on its own clock
    facts.listed_at = T0 + timedelta(seconds=500)
    gw.r[1]["busy"], gw.listed = True, []  # it started; its in_progress delivery is not here yet
    lists = sum(1 for c in gw.calls if c[0] == "list")
    reconcile(facts, gw, cfg, T0 + timedelta(seconds=901))  # the fallback listing is due
    assert 11 not in facts.jobs
    assert sum(1 for c in gw.calls if c[0] == "list") == lists + 1, "the runners are listed again"
    assert gw.writes() == [("add", 1, sorted(JOB[2:]))], "a running job's runner is never touched"


def test_a_completed_delivery_frees_its_runner_though_in_progress_was_lost() -> None:
    gw = FakeRunners((1, "a", ["self-hosted", "mi355x"]))
    facts, cfg = MemoryFacts(), ControllerConfig(REPO)
    apply_workflow_job(facts, hook("queued", 11, JOB), T0, pr=5)
    reconcile(facts, gw, cfg, T0)
    gw.r[1]["busy"] = True  # GitHub started it; the in_progress delivery never came
    facts.set_runners(gw.list_runners(REPO), T0 + timedelta(seconds=30))  # a listing saw it busy
    assert facts.runners[1].busy
    gw.r[1]["busy"] = False
    apply_workflow_job(facts, hook("completed", 11, JOB, (1, "a"), "success"), T0 + timedelta(minutes=5))
    assert not facts.runners[1].busy, "the runner the delivery names is idle again"


def test_a_multi_node_completed_frees_every_runner_of_its_lease() -> None:
    pool = [(i, f"n{i}", ["self-hosted", "cluster:b200", "b200"]) for i in (1, 2, 3)]
    multi = ["self-hosted", "cluster:b200", f"ci-job-3.250-{TOKEN}", "ci-attempt-1", "nodes:3"]
    gw = FakeRunners(*pool)
    facts, cfg = MemoryFacts(), ControllerConfig(REPO)
    apply_workflow_job(facts, hook("queued", 11, multi), T0, pr=5)
    reconcile(facts, gw, cfg, T0)
    apply_workflow_job(facts, hook("in_progress", 11, multi, (1, "n1")), T0 + timedelta(seconds=3))
    for r in gw.r.values():
        r["busy"] = True
    facts.set_runners(gw.list_runners(REPO), T0 + timedelta(minutes=1))  # every node busy
    for r in gw.r.values():
        r["busy"] = False
    apply_workflow_job(facts, hook("completed", 11, multi, (1, "n1"), "success"), T0 + timedelta(minutes=20))
    assert not any(r.busy for r in facts.runners.values()), "no delivery names the other nodes"


def test_runners_are_listed_more_often_while_a_job_waits() -> None:
    gw = FakeRunners((1, "a", ["self-hosted", "mi355x"]))
    facts, cfg = MemoryFacts(), ControllerConfig(REPO, runner_refresh_s=900, waiting_refresh_s=120)
    gw.r[1]["busy"] = True
    reconcile(facts, gw, cfg, T0)
    lists = sum(1 for c in gw.calls if c[0] == "list")
    reconcile(facts, gw, cfg, T0 + timedelta(seconds=150))
    assert sum(1 for c in gw.calls if c[0] == "list") == lists, "nothing waits: the 15-minute listing"
    apply_workflow_job(facts, hook("queued", 11, JOB), T0 + timedelta(seconds=160), pr=5)
    reconcile(facts, gw, cfg, T0 + timedelta(seconds=170))
    assert sum(1 for c in gw.calls if c[0] == "list") == lists + 1, "a job waits: listed after 2 minutes"
    reconcile(facts, gw, cfg, T0 + timedelta(seconds=200))
    assert sum(1 for c in gw.calls if c[0] == "list") == lists + 1, "not before 2 minutes again"


def test_the_fallback_listing_clock_survives_the_stored_facts() -> None:
    from app.flows.scheduler.runner_hook import facts_from_json, facts_to_json

    facts = MemoryFacts()
    facts.queued_listed_at = T0
    # lost, every delivery in the service (a fresh MemoryFacts each) listed the queued runs again
    assert facts_from_json(facts_to_json(facts)).queued_listed_at == T0


def test_a_labelled_runner_seen_busy_has_started_its_job_and_it_is_not_placed_again() -> None:
    gw = FakeRunners((1, "a", ["self-hosted", "mi355x"]), (2, "b", ["self-hosted", "mi355x"]))
    facts, cfg = MemoryFacts(), ControllerConfig(REPO, waiting_refresh_s=60, assign_timeout_s=600)
    apply_workflow_job(facts, hook("queued", 11, JOB), T0, pr=5)
    other = ["self-hosted", "mi355x", f"ci-job-1.000-{'2' * 32}", "ci-attempt-1"]
    apply_workflow_job(facts, hook("queued", 12, other), T0, pr=6)
    reconcile(facts, gw, cfg, T0)
    first = {c[1]: c[2] for c in gw.writes() if c[0] == "add"}
    gw.r[1]["busy"] = True  # GitHub started runner 1's job; its in_progress never came
    apply_workflow_job(facts, hook("in_progress", 12, other, (2, "b")), T0 + timedelta(seconds=5))
    gw.r[2]["busy"] = True
    reconcile(facts, gw, cfg, T0 + timedelta(seconds=90))  # listed (a job waits), before the timeout
    assert any(TOKEN in x for x in first[1]), "job 11 (score 2.0) on runner a, job 12 on b"
    assert facts.jobs[11].status == "in_progress", "seen busy while labelled: it started"
    gw.r[2]["busy"] = False
    apply_workflow_job(facts, hook("completed", 12, other, (2, "b"), "success"), T0 + timedelta(seconds=100))
    writes = len(gw.writes())
    reconcile(facts, gw, cfg, T0 + timedelta(seconds=101))
    assert not any(c[0] == "add" and any(TOKEN in x for x in c[2]) for c in gw.writes()[writes:]), (
        "the running job is not labelled onto another runner"
    )
