"""The GitHub gateway against the simulator: precise exceptions, retries, free conditional polls."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import SecretStr
from sqlalchemy.orm import Session

from app.adapters.github.credentials import FixedCredentials
from app.adapters.github.errors import Conflict, Gone, NotFound
from app.adapters.github.gateway import GitHubGateway, gateway
from app.core.routing import TransientError
from app.models import AuditEntry
from app.settings import Settings
from sim.app import admin_action
from sim.scenario import SeedScenario
from sim.server import SimServer
from sim.world import SimSettings

REPO = "SemiAnalysisAI/InferenceX"


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(settings=SimSettings(time_scale=0.0002, seed=5)) as server:
        SeedScenario(server.world).load()
        yield server


def _settings(sim: SimServer, retries: int = 0) -> Settings:
    return Settings(
        github_api_url=sim.github_api_url,
        github_token=SecretStr("sim-token"),
        github_max_retries=retries,
        github_seconds_between_requests=0,
        github_seconds_between_writes=0,
    )


@pytest.fixture
def gw(sim: SimServer, db_session: Session) -> GitHubGateway:
    return gateway(_settings(sim), db_session, actor="test")


def test_not_found_and_conflict_are_precise(gw: GitHubGateway) -> None:
    with pytest.raises(NotFound):
        gw.get_pull(REPO, 999999)
    assert gw.get_file(REPO, "no/such/file.yaml") is None
    head = gw.get_ref(REPO, "heads/main")
    assert head is not None
    old_sha = head["object"]["sha"]
    blob = gw.create_blob(REPO, "x\n")
    tree = gw.create_tree(REPO, gw.get_commit(REPO, old_sha)["tree"]["sha"], {"x.txt": blob})
    detached = gw.create_commit(REPO, "not on main", tree, [])  # no parent: not a fast-forward
    with pytest.raises(Conflict):
        gw.update_ref(REPO, "heads/main", detached["sha"])


def test_server_errors_and_rate_limits_become_transient(sim: SimServer, gw: GitHubGateway) -> None:
    admin_action(sim.world, "faults", {"operation": "pulls/get", "fail_next": 1, "status": 502})
    with pytest.raises(TransientError):
        gw.get_pull(REPO, 2104)
    admin_action(
        sim.world, "faults", {"operation": "pulls/get", "fail_next": 1, "status": 429, "retry_after": 7}
    )
    with pytest.raises(TransientError) as info:
        gw.get_pull(REPO, 2104)
    assert info.value.retry_after == 7
    assert gw.get_pull(REPO, 2104)["number"] == 2104  # the fault is spent: the work goes through


def test_idempotent_reads_are_retried_in_place(sim: SimServer, db_session: Session) -> None:
    retrying = gateway(_settings(sim, retries=3), db_session)
    admin_action(sim.world, "faults", {"operation": "pulls/get", "fail_next": 2, "status": 503})
    assert retrying.get_pull(REPO, 2104)["number"] == 2104


def test_conditional_get_is_free_when_unchanged(sim: SimServer, gw: GitHubGateway) -> None:
    first = gw.get_pull_conditional(REPO, 2104)
    before = sim.world.call_summary()
    second = gw.get_pull_conditional(REPO, 2104)
    after = sim.world.call_summary()
    assert first.changed and not second.changed and second.data["number"] == 2104
    assert after["rate_limited"] == before["rate_limited"]
    assert after["not_modified"] == before["not_modified"] + 1


def test_writes_are_audited_and_sticky_comments_converge(
    gw: GitHubGateway, db_session: Session, sim: SimServer
) -> None:
    marker = "<!-- sweepbot:test -->"
    first = gw.upsert_comment(REPO, 2104, marker, "hello")
    again = gw.upsert_comment(REPO, 2104, marker, "hello")  # no change: no write
    edited = gw.upsert_comment(REPO, 2104, marker, "hello again")
    assert first["id"] == again["id"] == edited["id"]
    bodies = [c.body for c in sim.world.repo(REPO).comments.values() if marker in c.body]
    assert bodies == ["hello again\n\n" + marker]
    db_session.flush()
    rows = [(a.action, a.outcome) for a in db_session.query(AuditEntry).order_by(AuditEntry.id)]
    assert rows == [("github.issues/create-comment", "ok"), ("github.issues/update-comment", "ok")]


def test_a_write_github_refuses_is_audited_as_refused_with_its_status(
    gw: GitHubGateway, db_session: Session
) -> None:
    with pytest.raises(NotFound):
        gw.update_comment(REPO, 987654321, "gone")
    db_session.flush()
    (row,) = db_session.query(AuditEntry).all()
    assert (row.action, row.outcome, row.target) == (
        "github.issues/update-comment",
        "refused",
        f"{REPO} comment 987654321",
    )
    assert row.detail is not None and row.detail["status"] == 404 and "404" in row.detail["error"]


def _issue_writes(sim: SimServer) -> dict[str, int]:
    return {
        op: n
        for (op, status, _), n in sim.world.calls.items()
        if op in ("issues/create", "issues/update") and status < 300
    }


def test_a_remembered_issue_a_maintainer_deleted_is_looked_up_by_its_marker_then_opened_again(
    gw: GitHubGateway, sim: SimServer
) -> None:
    marker = "<!-- sweepbot:nightly-regression:test -->"
    first = gw.upsert_issue(REPO, marker, title="Regression", body="slower")
    admin_action(sim.world, "delete-issue", {"repo": REPO, "number": first["number"]})
    with pytest.raises(Gone) as info:  # what GitHub answers for it (sim/world_issues.py)
        gw.get_issue(REPO, first["number"])
    assert info.value.status == 410 and "This issue was deleted" in str(info.value)
    sim.world.reset_calls()
    again = gw.upsert_issue(REPO, marker, title="Regression", body="slower", number=first["number"])
    assert again["number"] != first["number"] and marker in again["body"]
    assert _issue_writes(sim) == {"issues/create": 1}
    # the new number, remembered, is edited in place from then on
    edited = gw.upsert_issue(REPO, marker, title="Regression", body="slower still", number=again["number"])
    assert edited["number"] == again["number"]
    assert _issue_writes(sim) == {"issues/create": 1, "issues/update": 1}


def test_a_remembered_issue_gone_while_another_holds_the_marker_is_not_opened_again(
    gw: GitHubGateway, sim: SimServer
) -> None:
    marker = "<!-- sweepbot:nightly-regression:test -->"
    holder = gw.create_issue(REPO, title="Regression", body=f"{marker}\nslower")
    other = gw.create_issue(REPO, title="unrelated", body="")
    admin_action(sim.world, "delete-issue", {"repo": REPO, "number": other["number"]})
    sim.world.reset_calls()
    got = gw.upsert_issue(REPO, marker, title="Regression", body="slower still", number=other["number"])
    assert got["number"] == holder["number"] and "slower still" in got["body"]
    assert _issue_writes(sim) == {"issues/update": 1}


def test_a_remembered_issue_that_is_closed_is_not_gone(gw: GitHubGateway, sim: SimServer) -> None:
    marker = "<!-- sweepbot:nightly-regression:test -->"
    first = gw.upsert_issue(REPO, marker, title="Regression", body="slower")
    gw.update_issue(REPO, first["number"], state="closed")
    got = gw.upsert_issue(REPO, marker, title="Regression", body="slower still", number=first["number"])
    assert got["number"] == first["number"] and got["state"] == "closed" and "slower still" in got["body"]
    assert len(sim.world.repo(REPO).issues) == 1


@pytest.mark.parametrize("explicit_installation", [True, False])
def test_github_app_auth_through_settings(
    sim: SimServer, db_session: Session, tmp_path: object, explicit_installation: bool
) -> None:
    from pathlib import Path

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    sim.world.add_app(4242, "sweepbot", public, owner="SemiAnalysisAI")
    installation = sim.world.add_installation(4242, "SemiAnalysisAI", [REPO])
    key_file = Path(str(tmp_path)) / "app.pem"
    key_file.write_text(pem)
    settings = Settings(
        github_api_url=sim.github_api_url,
        github_app_id=4242,
        github_app_private_key_path=key_file,
        github_installation_id=installation.id if explicit_installation else None,
        github_seconds_between_requests=0,
        github_seconds_between_writes=0,
    )
    gw = gateway(settings, db_session)
    assert gw.get_pull(REPO, 2104)["number"] == 2104
    comment = gw.create_comment(REPO, 2104, "hello from the app")
    assert sim.world.comment(REPO, int(comment["id"])).user.endswith("[bot]")


# What PyGithub's requestJson answers: status, headers, the body's text; or what it raises.
Answer = tuple[int, dict[str, str], str] | BaseException


class _StubRequester:
    """Answers ``requestJson`` from a list of canned results (a tuple, or an exception to raise)."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, str]] = []

    def requestJson(self, verb: str, path: str, **_: object) -> object:  # noqa: N802 - PyGithub's name
        self.calls.append((verb, path))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def test_a_permanent_refusal_raised_by_the_retry_layer_is_not_transient() -> None:
    from github import GithubException
    from github.GithubException import RateLimitExceededExceedsMaxWait

    from app.adapters.github.errors import GitHubError

    # PyGithub's retry layer raises (instead of answering) for a 403 on a GET that is no rate limit.
    refused = GithubException(403, {"message": "Resource not accessible by integration"}, {})
    gw = GitHubGateway(FixedCredentials(_StubRequester(refused)))
    with pytest.raises(GitHubError) as info:
        gw.get_pull(REPO, 1)
    assert not isinstance(info.value, TransientError) and info.value.status == 403
    # ... while a rate limit it will not wait for stays transient, with the wait it computed.
    limited = RateLimitExceededExceedsMaxWait(403, {"message": "API rate limit exceeded"}, {}, wait=120.0)
    gw = GitHubGateway(FixedCredentials(_StubRequester(limited)))
    with pytest.raises(TransientError) as transient:
        gw.get_pull(REPO, 1)
    assert transient.value.retry_after == 120.0


def test_a_dropped_connection_before_an_artifact_download_is_transient() -> None:
    gw = GitHubGateway(FixedCredentials(_StubRequester(ConnectionResetError("reset by peer"))))
    with pytest.raises(TransientError):
        gw.download_artifact(REPO, 7)


def test_files_over_one_megabyte_are_read_from_their_blob() -> None:
    import base64
    import json

    text = "x: 1\n" * 10
    encoded = base64.b64encode(text.encode()).decode()
    # The contents API answers files over 1 MB with an empty content and encoding "none".
    meta = {"type": "file", "size": 2_000_000, "encoding": "none", "content": "", "sha": "b1"}
    blob = {"sha": "b1", "encoding": "base64", "content": encoded, "size": 2_000_000}
    stub = _StubRequester((200, {}, json.dumps(meta)), (200, {}, json.dumps(blob)))
    gw = GitHubGateway(FixedCredentials(stub))
    assert gw.get_file(REPO, "configs/amd-master.yaml", ref="main") == (text, "b1")
    assert stub.calls[1] == ("GET", f"/repos/{REPO}/git/blobs/b1")


@pytest.mark.parametrize("status", [403, 429])
def test_a_long_retry_after_is_not_slept_on(sim: SimServer, db_session: Session, status: int) -> None:
    import time

    retrying = gateway(_settings(sim, retries=3), db_session)
    admin_action(
        sim.world, "faults", {"operation": "pulls/get", "fail_next": 1, "status": status, "retry_after": 120}
    )
    started = time.monotonic()
    with pytest.raises(TransientError) as info:
        retrying.get_pull(REPO, 2104)
    assert time.monotonic() - started < 5  # the worker is not held for two minutes
    assert info.value.retry_after == 120


def test_a_secondary_limit_without_retry_after_waits_a_minute_not_until_the_reset() -> None:
    import json
    import time

    body = json.dumps({"message": "You have exceeded a secondary rate limit. Please wait a few minutes."})
    headers = {"x-ratelimit-remaining": "4000", "x-ratelimit-reset": str(int(time.time()) + 3000)}
    gw = GitHubGateway(FixedCredentials(_StubRequester((403, headers, body))))
    with pytest.raises(TransientError) as info:
        gw.get_pull(REPO, 1)
    exc = info.value
    assert exc.rate_limited and exc.exponential and exc.retry_after == 60.0
    assert [exc.delay(n, default=1.0) for n in (1, 2, 3)] == [60.0, 120.0, 240.0]


def test_a_403_on_the_permission_call_means_no_permission() -> None:
    import json

    refused: Answer = (
        403,
        {},
        json.dumps({"message": "Must have push access to view repository collaborators."}),
    )
    custom = {
        "permission": "write",
        "role_name": "release-captain",
        "user": {"login": "carol", "permissions": {"admin": False, "maintain": True, "push": True}},
    }
    gw = GitHubGateway(FixedCredentials(_StubRequester(refused, (200, {}, json.dumps(custom)))))
    assert gw.permission(REPO, "mallory") == "none"
    assert gw.permission(REPO, "carol") == "maintain"


def test_pr_creation_right_after_the_branch_push_is_retried_briefly() -> None:
    import json

    lag: Answer = (
        422,
        {},
        json.dumps(
            {
                "message": "Validation Failed",
                "errors": [{"resource": "PullRequest", "field": "head", "code": "invalid"}],
            }
        ),
    )
    created: Answer = (201, {}, json.dumps({"number": 7}))
    stub = _StubRequester(lag, lag, created)
    gw = GitHubGateway(FixedCredentials(stub), consistency_delays=(0.0, 0.0, 0.0))
    assert gw.create_pull(REPO, title="t", head="b", base="main", body="")["number"] == 7
    assert len(stub.calls) == 3
    exists: Answer = (
        422,
        {},
        json.dumps(
            {
                "message": "Validation Failed",
                "errors": [{"message": "A pull request already exists for o:b."}],
            }
        ),
    )
    gw = GitHubGateway(FixedCredentials(_StubRequester(exists)), consistency_delays=(0.0,))
    with pytest.raises(Conflict):
        gw.create_pull(REPO, title="t", head="b", base="main", body="")


def test_a_wrong_configured_token_is_an_error_not_a_retry() -> None:
    import json

    from app.adapters.github.errors import GitHubError

    bad: Answer = (401, {}, json.dumps({"message": "Bad credentials"}))
    gw = GitHubGateway(FixedCredentials(_StubRequester(bad)))
    with pytest.raises(GitHubError) as info:
        gw.get_pull(REPO, 1)
    assert info.value.status == 401 and not isinstance(info.value, TransientError)
