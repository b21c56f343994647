"""The runners and variables calls of the gateway (the priority controller's facts and effects)
replayed against GitHub's documented answers: the example bodies of the REST reference pages
"Self-hosted runners" and "Variables" (transcribed in tests/fixtures/github/runners/, see its
README), served with the documented status by the replay server of test_github_replay."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.adapters.test_github_replay import Exchange, replay  # noqa: F401  (the fixture)
from tests.conftest import FIXTURES

DOCS = FIXTURES / "github" / "runners"
R = "/repos/octo-org/octo-repo/actions"
JSON = [("Content-Type", "application/json; charset=utf-8")]


def doc(verb: str, url: str, name: str, status: int = 200) -> Exchange:
    body = "" if not name else (DOCS / name).read_text()
    return Exchange(verb, url, None, status, JSON if name else [], body)


def not_found(verb: str, url: str) -> Exchange:
    body = json.dumps(
        {"message": "Not Found", "documentation_url": "https://docs.github.com/rest", "status": "404"}
    )
    return Exchange(verb, url, None, 404, JSON, body)


def test_runners_listed_with_their_label_names(replay: Any) -> None:  # noqa: F811  (the fixture)
    r, gw = replay(doc("GET", f"{R}/runners", "list-self-hosted-runners-for-repo.json"))
    runners = gw.list_runners("octo-org/octo-repo")
    assert [(x["id"], x["name"], x["status"], x["busy"]) for x in runners] == [
        (23, "MBP", "online", True),
        (24, "iMac", "offline", False),
    ]
    assert runners[0]["labels"] == ["self-hosted", "X64", "macOS", "no-gpu"]
    assert r.seen[0][0] == "GET" and r.seen[0][1].startswith(f"{R}/runners")


def test_org_runners_use_the_organisation_endpoint(replay: Any) -> None:  # noqa: F811  (the fixture)
    r, gw = replay(doc("GET", "/orgs/octo-org/actions/runners", "list-self-hosted-runners-for-repo.json"))
    assert len(gw.list_runners("org:octo-org")) == 2
    assert r.seen[0][1].startswith("/orgs/octo-org/actions/runners")


def test_labels_added_and_removed_answer_the_runner_labels(replay: Any) -> None:  # noqa: F811  (the fixture)
    r, gw = replay(
        doc("POST", f"{R}/runners/42/labels", "add-custom-labels-to-self-hosted-runner-for-repo.json"),
        doc(
            "DELETE",
            f"{R}/runners/42/labels/no-gpu",
            "remove-custom-label-from-self-hosted-runner-for-repo.json",
        ),
        not_found("DELETE", f"{R}/runners/42/labels/ci-job-1.000-{'a' * 32}"),
    )
    after = gw.add_runner_labels("octo-org/octo-repo", 42, ["gpu", "accelerated"])
    assert after == ["self-hosted", "X64", "macOS", "no-gpu"]  # the runner's labels after the change
    assert r.seen[0][0] == "POST" and json.loads(r.seen[0][2]) == {"labels": ["gpu", "accelerated"]}
    assert "no-gpu" not in (gw.remove_runner_label("octo-org/octo-repo", 42, "no-gpu") or ["no-gpu"])
    # the label was already gone: the state we wanted, not an error
    assert gw.remove_runner_label("octo-org/octo-repo", 42, f"ci-job-1.000-{'a' * 32}") is None


def test_one_runner_read_back(replay: Any) -> None:  # noqa: F811  (the fixture)
    _, gw = replay(doc("GET", f"{R}/runners/23", "get-self-hosted-runner-for-repo.json"))
    got = gw.get_runner("octo-org/octo-repo", 23)
    assert got["id"] == 23 and got["busy"] is True and "no-gpu" in got["labels"]


@pytest.mark.parametrize(
    ("exchange", "want"),
    [
        (doc("GET", f"{R}/variables/PRIORITY_SCHEDULER_ENABLED", "get-repo-variable.json"), "octocat"),
        (not_found("GET", f"{R}/variables/PRIORITY_SCHEDULER_ENABLED"), None),
    ],
)
def test_the_contract_variable_read(replay: Any, exchange: Exchange, want: str | None) -> None:  # noqa: F811  (the fixture)
    _, gw = replay(exchange)
    assert gw.get_repo_variable("octo-org/octo-repo", "PRIORITY_SCHEDULER_ENABLED") == want
