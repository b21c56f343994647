"""Webhook deliveries: signed, headers as GitHub sends them, payloads valid against octokit schemas."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from jsonschema import Draft7Validator

from sim.scenario import SeedScenario
from sim.server import SimServer
from sim.world import SimSettings
from tests.conftest import FIXTURES
from tests.helpers.wait import wait_for
from tests.sim.conftest import FAST, client

BUNDLE = FIXTURES / "github" / "schema" / "webhooks-subset.bundle.schema.json"


class Receiver:
    def __init__(self) -> None:
        self.got: list[tuple[dict[str, str], bytes]] = []
        received = self.got

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(202)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/webhooks/github"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def _validator(definitions: dict[str, Any], name: str) -> Draft7Validator:
    return Draft7Validator({"$ref": f"#/definitions/{name}", "definitions": definitions})


@pytest.fixture(scope="module")
def definitions() -> dict[str, Any]:
    return dict(json.loads(BUNDLE.read_text())["definitions"])


def _play_everything(sim: SimServer) -> None:
    sc = SeedScenario(sim.world)
    sc.load()
    g = client(sim, "token-carol-writer")
    repo = g.get_repo("SemiAnalysisAI/InferenceX")
    pr = repo.get_pull(2104)
    c = pr.create_issue_comment("/sweep conc=32")
    c.edit("/sweep conc=64")
    wf = repo.get_workflow("e2e-tests.yml")
    run = wf.create_dispatch(
        pr.head.ref,
        {
            "generate-cli-command": "test-config --config-files .github/configs/amd-master.yaml "
            "--config-keys minimaxm3-fp4-mi355x-vllm --conc 32 64"
        },
        throw=True,
        return_run_details=True,
    )
    sim.world.faults.benchmark_fail_next = 1
    wait_for(lambda: sim.world.runs[run.id].status == "completed", what="run")
    sc.play()
    repo.create_file("x.txt", "push to the PR branch", "x\n", branch=pr.head.ref)  # synchronize


def test_every_payload_validates_against_its_schema(definitions: dict[str, Any]) -> None:
    with SimServer(settings=SimSettings(time_scale=FAST)) as sim:
        _play_everything(sim)
        wait_for(
            lambda: any(
                d.event == "pull_request" and d.action == "synchronize" for d in sim.world.deliveries
            ),
            what="synchronize delivery",
        )
        seen = set()
        for d in sim.world.deliveries:
            name = f"{d.event}$event" if d.action is None else f"{d.event}${d.action}"
            errors = sorted(_validator(definitions, name).iter_errors(d.payload), key=str)
            assert not errors, f"{name}: {[e.message for e in errors[:5]]}"
            seen.add(name)
    # the validator is strict: an unknown key is an error, so a pass means something
    bad = dict(next(d.payload for d in sim.world.deliveries if d.event == "push"), surprise=1)
    assert list(_validator(definitions, "push$event").iter_errors(bad))
    assert {
        "pull_request$opened",
        "pull_request$synchronize",
        "pull_request$closed",
        "issue_comment$created",
        "issue_comment$edited",
        "push$event",
        "workflow_run$requested",
        "workflow_run$in_progress",
        "workflow_run$completed",
        "workflow_job$queued",
        "workflow_job$in_progress",
        "workflow_job$completed",
    } <= seen


def test_deliveries_are_signed_with_github_headers(receiver: Receiver) -> None:
    settings = SimSettings(time_scale=FAST, webhook_url=receiver.url, webhook_secret="s3cret")
    with SimServer(settings=settings) as sim:
        sim.world.add_repo("o/r")
        sim.world.commit_files("o/r", "main", {"a": "1"}, "init")
        wait_for(lambda: len(receiver.got) == 1, what="push delivery")
        headers, body = receiver.got[0]
        assert headers["x-github-event"] == "push"
        assert headers["user-agent"].startswith("GitHub-Hookshot/")
        assert headers["content-type"] == "application/json"
        assert headers["x-github-hook-id"]
        expected = "sha256=" + hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(headers["x-hub-signature-256"], expected)
        guid = headers["x-github-delivery"]
        assert json.loads(body)["ref"] == "refs/heads/main"
        wait_for(lambda: sim.world.deliveries[0].status == "delivered", what="delivery status")

        # redelivery: same delivery id, same body
        sim.world.redeliver(guid)
        wait_for(lambda: len(receiver.got) == 2, what="redelivery")
        assert receiver.got[1][0]["x-github-delivery"] == guid and receiver.got[1][1] == body

        # duplicate knob: every delivery sent twice with the same id
        sim.world.duplicate_deliveries = True
        sim.world.commit_files("o/r", "main", {"a": "2"}, "two")
        wait_for(lambda: len(receiver.got) == 4, what="duplicated delivery")
        assert receiver.got[2][0]["x-github-delivery"] == receiver.got[3][0]["x-github-delivery"]

        # drop knob: the next delivery is recorded as dropped and never sent
        sim.world.duplicate_deliveries = False
        sim.world.drop_next_deliveries = 1
        sim.world.commit_files("o/r", "main", {"a": "3"}, "three")
        sim.world.commit_files("o/r", "main", {"a": "4"}, "four")
        wait_for(lambda: len(receiver.got) == 5, what="delivery after the dropped one")
        wait_for(
            lambda: [d.status for d in sim.world.deliveries][-2:] == ["dropped", "delivered"],
            what="dropped then delivered",
        )
        assert json.loads(receiver.got[4][1])["head_commit"]["message"] == "four"
