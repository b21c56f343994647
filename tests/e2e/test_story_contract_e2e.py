"""The story end to end with the repo variable ``PRIORITY_SCHEDULER_ENABLED=true`` (issue 27).

Every GPU job the workflows queue asks for ``self-hosted``, its runner label, ``ci-job-<score>-<token>``
and ``ci-attempt-<n>`` (the real templates' ``runs-on``, sim/world_runners.py), so no runner takes one
until sweepbot, the controller (``SWEEPBOT_RUNNER_CONTROLLER_REPOS``, fed the sim's ``workflow_job``
webhooks), adds those labels to an idle runner. The story runs from the PR to the posted report, as
``test_story_e2e`` plays it in dispatch mode, and beyond its checks this one asserts, from the sim's
own records: each GPU job started on a runner the bot had labelled for it; the bot's dispatches were
not held at dispatch time (they went out at once and queued at GitHub); no job or lease label is left
on a runner; the dashboard's fleet page lists the runners.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.core.schedlabels import is_identifying
from tests.e2e.test_story_e2e import _assert_story, _run, story_env

pytestmark = [pytest.mark.services, pytest.mark.slow]
__all__ = ["story_env"]  # the fixture, shared with the plain stories

REPO = "SemiAnalysisAI/InferenceX"
LABEL, ONLINE = "mi355x", 3  # the seed key's runner label; runners of it left online


@dataclass
class ContractWatch:
    """Wraps the sim world's label writes and dispatches to record them with the fleet's state."""

    labelled: list[tuple[str, list[str]]] = field(default_factory=list)  # (runner name, labels added)
    # per bot dispatch, just before it: (GPU jobs in flight, online runners) of the story's label
    at_dispatch: list[tuple[int, int]] = field(default_factory=list)
    runners: set[str] = field(default_factory=set)
    world: Any = None

    def install(self, world: Any) -> None:
        self.world = world
        world.set_variable(REPO, "PRIORITY_SCHEDULER_ENABLED", "true")
        with world.lock:  # a small fleet: the sweep's jobs outnumber the runners that can take them
            for runner in [r for r in world.all_runners() if r.label == LABEL][ONLINE:]:
                runner.status = "offline"
        add, dispatch = world.add_runner_labels, world.dispatch

        def add_runner_labels(runner_id: int, names: list[str]) -> Any:
            runner = add(runner_id, names)
            with world.lock:
                self.labelled.append((runner.name, list(names)))
            return runner

        def recorded_dispatch(full_name: str, *args: Any, **kwargs: Any) -> Any:
            if full_name == REPO:
                with world.lock:
                    busy = [
                        j for j in world.jobs.values() if j.status != "completed" and _job_label(j.labels)
                    ]
                    online = [r for r in world.all_runners() if r.label == LABEL and r.status == "online"]
                    self.at_dispatch.append((len(busy), len(online)))
            return dispatch(full_name, *args, **kwargs)

        world.add_runner_labels, world.dispatch = add_runner_labels, recorded_dispatch
        with world.lock:
            self.runners = {r.name for r in world.all_runners()}


def _job_label(labels: list[str]) -> str | None:
    return next((x for x in labels if x.startswith("ci-job-")), None)


def _fleet_page(running: Any, sim: Any, watch: ContractWatch) -> str:
    """The dashboard's fleet view, fetched while the stack is up."""
    response = httpx.get(running.dashboard_url.rstrip("/") + "/fleet", timeout=10)
    assert response.status_code == 200, response.status_code
    return response.text


@pytest.mark.timeout(180)
def test_the_story_with_the_priority_scheduler_contract_on(
    story_env: tuple[str, str], tmp_path: Path
) -> None:
    watch = ContractWatch()
    pages: list[str] = []
    started = time.monotonic()
    report = _run(
        tmp_path,
        *story_env,
        chaos=False,
        mode="dispatch",
        timeout=120,
        contract=watch.install,
        inside=lambda running, sim: pages.append(_fleet_page(running, sim, watch)),
        extra_env={
            "SWEEPBOT_RUNNER_CONTROLLER_REPOS": REPO,
            "SWEEPBOT_RUNNER_OVERCOMMIT": "0",
            # the hold's capacity, as an operator declares it: the runners left online
            "SWEEPBOT_RUNNER_CAPACITY": f"{LABEL}={ONLINE}",
        },
    )
    elapsed = time.monotonic() - started
    _assert_story(report, "dispatch")  # report posted with its tables, a result for every job
    print(f"contract story: {elapsed:.1f} s; at dispatch {watch.at_dispatch}")  # noqa: T201 - the run time, for the record

    world = watch.world
    with world.lock:
        started_jobs = [
            d.payload["workflow_job"]
            for d in world.deliveries
            if d.event == "workflow_job" and d.action == "in_progress"
        ]
        leftover = {
            r.name: r.custom_labels for r in world.all_runners() if any(map(is_identifying, r.custom_labels))
        }
    gpu = [j for j in started_jobs if _job_label(j["labels"])]
    assert gpu, "with the variable on, the templates' runs-on asks for ci-job- labels"
    pairs = {(name, x) for name, labels in watch.labelled for x in labels}
    for job in gpu:
        label = _job_label(job["labels"])
        assert (job["runner_name"], label) in pairs, f"job {job['id']} ran on {job['runner_name']} unlabelled"
    # with the contract on the bot's dispatches go out when asked, not held for a free runner: one
    # went out while the label's in-flight jobs already took every online runner (with the hold and
    # SWEEPBOT_RUNNER_OVERCOMMIT=0 none would, app/core/release_policy.py)
    assert any(busy >= online for busy, online in watch.at_dispatch), watch.at_dispatch
    assert not leftover, f"scheduling labels left on runners: {leftover}"
    assert pages and all(name in pages[0] for name in watch.runners), "the fleet page lacks runners"
