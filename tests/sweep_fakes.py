"""In-memory GitHub for the sweep flows: one fake per gateway Protocol, over one shared state.

``FakeGitHub`` is the state a test sets and reads (the bench repo's files, the PR's head, who may
write, the repo's Actions runs); it has no gateway method. Each flow is handed the fake of the
Protocol it declares (``FakeRequest`` for ``request_sweep``, ``FakeTick`` for a tick, ...), which
implements only that Protocol's methods; mypy checks each fake against its Protocol
(``_each_fake_is_its_protocol``; this module is in mypy's ``files``).
"""

from __future__ import annotations

import itertools
import json
import threading
from typing import Any

from sqlalchemy import select

from app.adapters.github.base import Conditional
from app.core.routing import TransientError
from app.core.sweepspec import SweepFilters
from app.flows.repo.bench_repo import RepoFiles
from app.flows.scheduler.dispatch import DispatchGateway
from app.flows.scheduler.repair import RepairGateway
from app.flows.scheduler.run_poll import PollGateway, RunListing
from app.flows.scheduler.run_tracking import TrackingGateway, apply_workflow_run
from app.flows.scheduler.tick import TickGateway
from app.flows.sweeps.cancel import CancelGateway
from app.flows.sweeps.fork_approval import ApprovalGateway
from app.flows.sweeps.label_runs import LabelGateway
from app.flows.sweeps.request import RequestGateway, request_sweep
from app.models.sweeps import SweepJob
from tests.conftest import FIXTURES

REPO = "SemiAnalysisAI/InferenceX"
KEY = "minimaxm3-fp4-mi355x-vllm"
SHA1 = "a" * 40
SHA2 = "b" * 40


def bench_files() -> dict[str, str]:
    return {
        ".github/configs/amd-master.yaml": (FIXTURES / "inferencex" / "amd-master.f8f9b66.yaml").read_text(),
        ".github/configs/runners.yaml": (FIXTURES / "inferencex" / "runners.yaml").read_text(),
        # the real workflow: dispatches are checked against its declared inputs
        ".github/workflows/e2e-tests.yml": (
            FIXTURES / "inferencex" / "workflows" / "e2e-tests.yml"
        ).read_text(),
    }


class FakeGitHub:
    """What the fakes share: set it up, hand flows its fakes, read what they did."""

    def __init__(self, *, fork: bool = False, return_details: bool = True) -> None:
        self.files = bench_files()
        self.head_sha = SHA1
        self.fork = fork
        self.return_details = return_details  # dispatches answer with the run's id
        self.perms = {"maint": "maintain", "outsider": "read"}
        self.runs: dict[int, dict[str, Any]] = {}
        self.run_jobs: dict[int, list[dict[str, Any]]] = {}
        self.annotations: dict[int, list[dict[str, Any]]] = {}
        self.job_lists: list[int] = []  # list_run_jobs calls, by run id
        self.annotation_reads: list[int] = []  # list_check_run_annotations calls, by check run id
        self.dispatches: list[dict[str, Any]] = []
        self.cancelled: list[int] = []  # cancels that took
        self.cancel_posts: list[int] = []  # every cancel asked for (POST .../cancel), taken or not
        self.cancel_errors: list[Exception] = []  # each POST raises the first of these, if any
        self.pr_labels: set[str] = set()  # the PR's labels, kept as GitHub would
        self.labels: list[tuple[int, list[str]]] = []  # add_labels calls
        self.removed: list[tuple[int, str]] = []  # remove_label calls
        self.fail_add = 0  # the next N add_labels calls raise (a crash between remove and add)
        self.ids = itertools.count(1000)
        self.lock = threading.Lock()
        self.run_reads = 0
        self.listings: list[tuple[str, str, dict[str, Any], bool]] = []
        self.etags: dict[str, str] = {}
        self.variables: dict[str, str] = {}  # the repo's Actions variables


class _Fake:
    def __init__(self, gh: FakeGitHub) -> None:
        self.gh = gh


class _File(_Fake):
    def get_file(self, repo: str, path: str, ref: str | None = None) -> tuple[str, str] | None:
        text = self.gh.files.get(path)
        return None if text is None else (text, "blobsha")


class FakeRepoFiles(_File):
    """RepoFiles: the repo, its files and directories (``gh.files``)."""

    def get_repo(self, repo: str) -> dict[str, Any]:
        return {"full_name": repo, "default_branch": "main"}

    def list_dir(self, repo: str, path: str, ref: str | None = None) -> list[dict[str, Any]]:
        return [
            {"type": "file", "path": p, "name": p.rsplit("/", 1)[-1]}
            for p in self.gh.files
            if p.rsplit("/", 1)[0] == path
        ]


class FakePulls(_Fake):
    """get_pull: the PR at ``gh.head_sha`` (from a fork when ``gh.fork``), with ``gh.pr_labels``."""

    def get_pull(self, repo: str, number: int) -> dict[str, Any]:
        head_repo = "someone/InferenceX" if self.gh.fork else repo
        return {
            "number": number,
            "state": "open",
            "head": {"sha": self.gh.head_sha, "ref": "recipe-branch", "repo": {"full_name": head_repo}},
            "base": {"ref": "main", "repo": {"full_name": repo}},
            "labels": [{"name": n} for n in sorted(self.gh.pr_labels)],
        }


class FakeCancel(_Fake):
    """CancelGateway: a cancelled run completes as cancelled (unless it had completed); each POST
    is counted in ``gh.cancel_posts``, and raises the next of ``gh.cancel_errors`` if any."""

    def cancel_run(self, repo: str, run_id: int) -> None:
        with self.gh.lock:
            self.gh.cancel_posts.append(run_id)
            if self.gh.cancel_errors:
                raise self.gh.cancel_errors.pop(0)
            self.gh.cancelled.append(run_id)
            run = self.gh.runs[run_id]
            if run["status"] != "completed":
                run["status"], run["conclusion"] = "completed", "cancelled"


class _RunList(_Fake):
    def list_workflow_runs(
        self, repo: str, workflow: str | None = None, **params: Any
    ) -> list[dict[str, Any]]:
        with self.gh.lock:
            return [dict(r) for r in self.gh.runs.values()]


class FakeLabels(_RunList):
    """LabelGateway: the PR's labels (calls recorded) and the repo's runs."""

    def add_labels(self, repo: str, number: int, labels: list[str]) -> list[dict[str, Any]]:
        if self.gh.fail_add:
            self.gh.fail_add -= 1
            raise TransientError("connection reset")
        self.gh.labels.append((number, labels))
        self.gh.pr_labels |= set(labels)
        return [{"name": n} for n in labels]

    def remove_label(self, repo: str, number: int, label: str) -> None:
        self.gh.removed.append((number, label))
        self.gh.pr_labels.discard(label)


class FakeRequest(FakeRepoFiles, FakeLabels, FakeCancel, FakePulls):
    """RequestGateway: requesting a sweep."""


class FakeApproval(FakePulls):
    """ApprovalGateway: approving a fork PR (``gh.perms``)."""

    def permission(self, repo: str, username: str) -> str:
        return self.gh.perms.get(username, "none")


class FakeDispatch(_File, FakeApproval, _RunList):
    """DispatchGateway: the workflow file, the dispatch (a queued run), the run lookup."""

    def dispatch_workflow(
        self, repo: str, workflow: str, ref: str, inputs: dict[str, str]
    ) -> dict[str, Any] | None:
        gh = self.gh
        with gh.lock:
            run_id = next(gh.ids)
            run = {
                "id": run_id,
                "name": "End-to-End Tests",
                # e2e-tests.yml's run-name: `e2e Test - ${{ inputs.test-name || ... }}`
                "display_title": f"e2e Test - {inputs['test-name']}",
                "status": "queued",
                "conclusion": None,
                "html_url": f"https://github.test/{repo}/actions/runs/{run_id}",
            }
            gh.runs[run_id] = run
            gh.dispatches.append({"workflow": workflow, "ref": ref, "inputs": dict(inputs), "run_id": run_id})
        if not gh.return_details:
            return None
        return {"workflow_run_id": run_id, "run_url": f"api/{run_id}", "html_url": run["html_url"]}


class FakeTick(FakeRepoFiles, FakeDispatch, FakeCancel):
    """TickGateway: runner capacity, the dispatch, cancelling preempted canaries' runs, variables."""

    def get_repo_variable(self, repo: str, name: str) -> str | None:
        return self.gh.variables.get(name)


class FakeRunTracking(FakeCancel):
    """runtracking's TrackingGateway: a run's jobs (``gh.run_jobs``), a job's annotations."""

    def list_run_jobs(self, repo: str, run_id: int) -> list[dict[str, Any]]:
        self.gh.job_lists.append(run_id)
        return list(self.gh.run_jobs.get(run_id, []))

    def list_check_run_annotations(self, repo: str, check_run_id: int) -> list[dict[str, Any]]:
        self.gh.annotation_reads.append(check_run_id)
        return list(self.gh.annotations.get(check_run_id, []))


class FakeRunListing(_Fake):
    """RunListing: the runs listing (the repair poll's one read), 304-like when nothing changed."""

    def get_conditional(self, op: str, path: str, params: dict[str, Any] | None = None) -> Conditional:
        gh = self.gh
        with gh.lock:
            runs = sorted((dict(r) for r in gh.runs.values()), key=lambda r: -int(r["id"]))
        body = {"total_count": len(runs), "workflow_runs": runs}
        etag = json.dumps(body, sort_keys=True)
        key = f"{path}?{sorted((params or {}).items())}"
        changed = gh.etags.get(key) != etag
        gh.etags[key] = etag
        gh.listings.append((op, path, dict(params or {}), changed))
        return Conditional(body, changed, str(hash(etag)))


class FakePoll(FakeRunListing, FakeRunTracking):
    """PollGateway: the listing, single runs (counted in ``gh.run_reads``), folding runs in."""

    def get_run(self, repo: str, run_id: int) -> dict[str, Any]:
        self.gh.run_reads += 1
        return dict(self.gh.runs[run_id])


class FakeRepair(FakePoll, FakeLabels):
    """RepairGateway: the poll's, and finding a label-mode sweep's run."""


def _each_fake_is_its_protocol(
    gh: FakeGitHub,
) -> tuple[
    RepoFiles,
    CancelGateway,
    LabelGateway,
    RequestGateway,
    ApprovalGateway,
    DispatchGateway,
    TickGateway,
    TrackingGateway,
    RunListing,
    PollGateway,
    RepairGateway,
]:
    """Never called: mypy checks each fake against the Protocol in the same place of the tuple."""
    return (
        FakeRepoFiles(gh),
        FakeCancel(gh),
        FakeLabels(gh),
        FakeRequest(gh),
        FakeApproval(gh),
        FakeDispatch(gh),
        FakeTick(gh),
        FakeRunTracking(gh),
        FakeRunListing(gh),
        FakePoll(gh),
        FakeRepair(gh),
    )


def request_8k1k(factory: Any, gh: FakeGitHub, *conc: int, pr: int = 7) -> None:
    """A maintainer's ``/sweep`` of KEY at 8k1k and ``conc`` on PR ``pr``, committed."""
    with factory() as s:
        request_sweep(
            s,
            FakeRequest(gh),
            repo=REPO,
            pr_number=pr,
            config_key=KEY,
            requested_by="maint",
            reason="command",
            filters=SweepFilters(seq="8k1k", conc=conc),
        )
        s.commit()


def runs_complete(factory: Any, gh: FakeGitHub, sweep_id: int, conclusion: str = "success") -> None:
    """GitHub says the runs of ``sweep_id``'s jobs completed (their ``workflow_run`` event): the
    bot counts a run's runners until then, siblings of ours included (app/store/dispatchruns.py)."""
    with factory() as s:
        run_ids = {
            int(r) for r in s.scalars(select(SweepJob.run_id).where(SweepJob.sweep_id == sweep_id)) if r
        }
        for run_id in sorted(run_ids):
            run = gh.runs[run_id]
            if run["status"] != "completed":
                run["status"], run["conclusion"] = "completed", conclusion
            apply_workflow_run(s, FakeRunTracking(gh), dict(run), after_commit=[])
        s.commit()
