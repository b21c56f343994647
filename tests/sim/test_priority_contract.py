"""The simulator's runner-label contract: its own scorer checked row by row against the rules of the
real configs/ci-priority.yaml, the real templates' runs-on expressions, the runners API and repo
variables, and GitHub's assignment rule (the oldest queued job whose labels a runner all carries)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import httpx
import pytest
import yaml

from sim.priority import queue_token, runs_on, score
from sim.server import SimServer
from sim.world_runners import DATA
from tests.conftest import FIXTURES
from tests.helpers.wait import wait_for
from tests.sim.conftest import TEST_CONFIG

POLICY_FILE = FIXTURES / "inferencex" / "configs" / "ci-priority.yaml"
POLICY = yaml.safe_load(POLICY_FILE.read_text())
BENCH = "SemiAnalysisAI/InferenceX"
H = {"Authorization": "token sim-token"}


def test_the_sim_carries_the_real_files() -> None:
    assert (DATA / "configs" / "ci-priority.yaml").read_bytes() == POLICY_FILE.read_bytes()
    for name in ("benchmark-tmpl.yml", "benchmark-multinode-tmpl.yml"):
        assert (DATA / "workflows" / name).read_bytes() == (
            FIXTURES / "inferencex" / "workflows" / name
        ).read_bytes()


BASE = {
    "runner": "mi355x",
    "framework": "atom",
    "precision": "fp8",
    "model-prefix": "gptoss",
    "spec-decoding": "none",
}


@pytest.mark.parametrize(
    ("entry", "event", "labels", "want"),
    [
        ({}, "", set(), "1.000"),  # base-score
        ({}, "push", set(), "3.000"),  # event.push +2.0
        ({}, "pull_request", set(), "1.000"),  # no adjustment for other events
        ({"prefill": {"num-worker": 1}}, "", set(), "2.250"),  # multi-node +1.25
        ({"scenario-type": "agentic-coding"}, "", set(), "2.000"),  # agentic +1.0
        ({"eval-only": True}, "", set(), "1.000"),  # eval-only +0.0
        ({"precision": "fp4"}, "", set(), "1.750"),  # precision.fp4
        ({"spec-decoding": "eagle3"}, "", set(), "1.750"),
        ({"framework": "vllm"}, "", set(), "1.500"),  # framework prefix, exact
        ({"framework": "sglang-disagg"}, "", set(), "1.500"),  # framework prefix + "-"
        ({"framework": "dynamo-vllm"}, "", set(), "1.500"),
        ({"framework": "vllmx"}, "", set(), "1.000"),  # not a prefix match
        ({"model-prefix": "kimik3"}, "", set(), "2.500"),
        ({"model-prefix": "glm5.1"}, "", set(), "1.750"),
        ({"model-prefix": "dsr1-long"}, "", set(), "1.000"),  # model prefix is an exact key
        ({}, "", {"ci-checklist-complete"}, "1.250"),
        ({"model-prefix": "kimik3"}, "push", {"ci-patchwork"}, "0.000"),  # patchwork forces 0
        ({}, "", {"engine-patch", "ci-patchwork-waived"}, "1.000"),  # ... unless waived
        (
            {
                "prefill": {},
                "precision": "fp4",
                "framework": "dynamo-sglang",
                "model-prefix": "dsv4",
                "spec-decoding": "mtp",
            },
            "push",
            {"ci-checklist-complete"},
            "7.250",
        ),
    ],
)
def test_score_follows_the_policy_file(
    entry: dict[str, Any], event: str, labels: set[str], want: str
) -> None:
    assert score({**BASE, **entry}, POLICY, event=event, pr_labels=frozenset(labels)) == want


def test_queue_token_is_32_hex_of_the_documented_material() -> None:
    entry = {"runner": "mi355x", "conc": 4, "framework": "vllm"}
    material = 'run:1:single:0:{"conc":4,"framework":"vllm","runner":"mi355x"}'
    assert queue_token(entry, "run:1:single", ("0",)) == hashlib.sha256(material.encode()).hexdigest()[:32]
    assert queue_token(entry, "run:1:single", ("1",)) != queue_token(entry, "run:1:single", ("0",))


def template_runs_on(name: str) -> str:
    return str(
        yaml.safe_load((FIXTURES / "inferencex" / "workflows" / name).read_text())["jobs"]["benchmark"][
            "runs-on"
        ]
    )


@pytest.mark.parametrize("name", ["benchmark-tmpl.yml", "benchmark-multinode-tmpl.yml"])
def test_runs_on_of_the_real_templates(name: str) -> None:
    expr = template_runs_on(name)
    inputs = {"runner": "mi355x", "priority": "2.250", "queue-token": "ab" * 16, "skip-queue-pr": ""}
    on = {"vars": {"PRIORITY_SCHEDULER_ENABLED": "true"}, "inputs": inputs, "github": {"run_attempt": "3"}}
    assert runs_on(expr, on) == ["self-hosted", "mi355x", f"ci-job-2.250-{'ab' * 16}", "ci-attempt-3"]
    skip = {**on, "inputs": {**inputs, "skip-queue-pr": "2104"}}
    assert runs_on(expr, skip)[-1] == "ci-skip-queue-pr-2104"
    assert (
        runs_on(expr, {**on, "vars": {"PRIORITY_SCHEDULER_ENABLED": "TRUE"}})[0] == "self-hosted"
    )  # == ignores case
    assert runs_on(expr, {**on, "vars": {}}) == ["mi355x"]
    assert runs_on(expr, {**on, "vars": {"PRIORITY_SCHEDULER_ENABLED": "false"}}) == ["mi355x"]


def api(sim: SimServer, method: str, path: str, body: Any = None) -> httpx.Response:
    return httpx.request(method, f"{sim.github_api_url}{path}", headers=H, json=body)


def dispatch(sim: SimServer, conc: str) -> Any:
    return sim.world.dispatch(
        BENCH,
        "e2e-tests.yml",
        "main",
        {"generate-cli-command": f"{TEST_CONFIG} minimaxm3-fp4-mi355x-vllm --conc {conc} --no-evals"},
        "sweepbot[bot]",
    )


def test_with_the_variable_on_github_hands_a_job_only_to_the_runner_given_its_labels(
    seeded: SimServer,
) -> None:
    world = seeded.world
    world.set_runners("mi355x", 2)
    seeded.world.set_variable(BENCH, "PRIORITY_SCHEDULER_ENABLED", "true")
    got = api(seeded, "GET", f"/repos/{BENCH}/actions/variables/PRIORITY_SCHEDULER_ENABLED").json()
    assert got["name"] == "PRIORITY_SCHEDULER_ENABLED" and got["value"] == "true"
    assert api(seeded, "GET", f"/repos/{BENCH}/actions/variables/NOPE").status_code == 404
    first, second = dispatch(seeded, "4"), dispatch(seeded, "8")
    every = [world.jobs[j] for r in (first, second) for j in r.jobs if world.jobs[j].labels]
    assert every and all(j.labels[2].startswith("ci-job-3.000-") for j in every)  # fp4 vllm minimaxm3
    assert len({j.labels[2] for j in every}) == len(every), "one queue token per job"
    jobs = [every[0], every[-1]]
    hook = next(
        d.payload
        for d in world.deliveries
        if d.event == "workflow_job"
        and d.action == "queued"
        and d.payload["workflow_job"]["id"] == jobs[1].id
    )
    assert hook["workflow_job"]["labels"] == jobs[1].labels
    world.tick()
    assert all(j.status == "queued" for j in jobs), "no runner carries a ci-job label: nothing starts"
    runners = api(seeded, "GET", f"/repos/{BENCH}/actions/runners").json()["runners"]
    target = next(r for r in runners if r["name"].startswith("mi355x"))
    # the newer job's labels on one runner: GitHub hands exactly that job to it, not the oldest
    added = api(
        seeded,
        "POST",
        f"/repos/{BENCH}/actions/runners/{target['id']}/labels",
        {"labels": jobs[1].labels[2:]},
    )
    assert added.status_code == 200 and {x["name"] for x in added.json()["labels"]} >= set(jobs[1].labels)
    wait_for(lambda: jobs[1].status != "queued", timeout=20, what="the labelled job to start")
    assert jobs[1].runner_id == target["id"]
    assert jobs[0].status == "queued"
    assert api(seeded, "GET", "/orgs/SemiAnalysisAI/actions/runners").json()["total_count"] == len(runners)
    gone = api(seeded, "DELETE", f"/repos/{BENCH}/actions/runners/{target['id']}/labels/{jobs[1].labels[2]}")
    assert gone.status_code == 200 and jobs[1].labels[2] not in {x["name"] for x in gone.json()["labels"]}
    again = api(seeded, "DELETE", f"/repos/{BENCH}/actions/runners/{target['id']}/labels/{jobs[1].labels[2]}")
    assert again.status_code == 404
    assert (
        api(seeded, "DELETE", f"/repos/{BENCH}/actions/runners/{target['id']}/labels/self-hosted").status_code
        == 422
    )
    assert api(seeded, "POST", f"/repos/{BENCH}/actions/runners/{target['id']}/labels", {}).status_code == 422


def test_without_the_variable_the_oldest_compatible_job_goes_first(seeded: SimServer) -> None:
    world = seeded.world
    world.set_runners("mi355x", 1)
    first, second = dispatch(seeded, "4"), dispatch(seeded, "8")
    every = [world.jobs[j] for r in (first, second) for j in r.jobs if world.jobs[j].labels]
    assert all(j.labels == ["mi355x"] for j in every)
    jobs = [every[0], every[-1]]
    wait_for(lambda: jobs[0].status != "queued", timeout=20, what="the oldest job to start")
    later = jobs[1].started_at
    assert later is None or later >= (jobs[0].started_at or 0.0), "the oldest compatible job goes first"
    assert json.loads(json.dumps(jobs[0].labels)) == ["mi355x"]
