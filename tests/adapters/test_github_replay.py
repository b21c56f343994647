"""Contract: real recorded GitHub exchanges replayed through the gateway, for the operations the
bot calls (recordings from PyGithub's tests/ReplayData, see tests/fixtures/github/README.md), and,
for the operations no recording covers, GitHub's own documented example answer of the operation
(``components/examples`` of the OpenAPI subset, served with the documented status).

A loopback server answers each recorded request (method + path) with the recorded status,
headers and body; the gateway must send that request and read that answer as real GitHub gave it.
"""

from __future__ import annotations

import ast
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from app.adapters.github.errors import Conflict, GitHubError
from app.adapters.github.gateway import GitHubGateway
from app.adapters.github.transport import request
from app.core.installations import parse_expires_at
from app.settings import Settings
from tests.conftest import FIXTURES

REPLAY = FIXTURES / "github" / "replay"
_DROP = {"content-encoding", "transfer-encoding", "content-length", "connection", "status"}


@dataclass
class Exchange:
    verb: str
    url: str
    body: str | None
    status: int
    headers: list[tuple[str, str]]
    response: str


def parse(path: Path) -> list[Exchange]:
    """PyGithub's ReplayData format: per exchange, lines protocol, verb, host, port, url, request
    headers, request body, status, response headers, response body, then a blank line."""
    lines = path.read_text().split("\n")
    out, i = [], 0
    while i + 9 < len(lines) and lines[i] in ("https", "http"):
        verb, url, body = lines[i + 1], lines[i + 4], lines[i + 6]
        status, headers, response = int(lines[i + 7]), ast.literal_eval(lines[i + 8]), lines[i + 9]
        out.append(Exchange(verb, url, None if body == "None" else body, status, headers, response))
        i += 11 if i + 10 < len(lines) and lines[i + 10] == "" else 10
    return out


SPEC = json.loads((FIXTURES / "github" / "openapi-subset.json").read_text())


def documented(verb: str, url: str, op_id: str, status: int, example: str | None = None) -> Exchange:
    """The answer GitHub documents for ``op_id`` (its example ``example``, or no body), at ``url``."""
    ops = [o for ps in SPEC["paths"].values() for o in ps.values() if o.get("operationId") == op_id]
    assert len(ops) == 1 and str(status) in ops[0]["responses"], (op_id, status)
    body = "" if example is None else json.dumps(SPEC["components"]["examples"][example]["value"])
    headers = [("Content-Type", "application/json; charset=utf-8")] if example is not None else []
    return Exchange(verb, url, None, status, headers, body)


class Replay:
    def __init__(self, *sources: str | Exchange) -> None:
        self.exchanges = [x for n in sources for x in ([n] if isinstance(n, Exchange) else parse(REPLAY / n))]
        self.seen: list[tuple[str, str, str | None]] = []
        replay = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else None
                replay.seen.append((self.command, self.path, body))
                # A recording without a query string matches the path whatever the query
                # (the bot asks per_page=100 where PyGithub's test asked the default).
                bare = self.path.split("?", 1)[0]
                match = next(
                    (
                        x
                        for x in replay.exchanges
                        if x.verb == self.command and x.url in (self.path, bare if "?" not in x.url else None)
                    ),
                    None,
                )
                if match is None:
                    self.send_response(599)
                    self.end_headers()
                    return
                payload = match.response.encode()
                self.send_response(match.status)
                for k, v in match.headers:
                    if k.lower() not in _DROP:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def replay() -> Iterator[Any]:
    servers: list[Replay] = []

    def start(*names: str | Exchange) -> tuple[Replay, GitHubGateway]:
        r = Replay(*names)
        servers.append(r)
        settings = Settings(
            github_api_url=r.url,
            github_token="replay-token",
            github_max_retries=0,
            github_seconds_between_requests=0,
            github_seconds_between_writes=0,
        )
        from app.adapters.github.transport import make_requester

        return r, GitHubGateway(make_requester(settings), consistency_delays=(0.0, 0.0, 0.0))

    yield start
    for r in servers:
        r.close()


def test_every_recording_parses() -> None:
    names = sorted(p.name for p in REPLAY.glob("*.txt"))
    assert len(names) >= 10
    for name in names:
        exchanges = parse(REPLAY / name)
        assert exchanges and all(x.url.startswith("/") and 200 <= x.status < 600 for x in exchanges), name


def test_collaborator_permission_without_role_name(replay: Any) -> None:
    # A 2020 answer: no role_name yet, only the legacy permission — read as the base role.
    _, gw = replay("Repository.testCollaboratorPermission.txt")
    assert gw.permission("ahmad88me/PyGithub", "jacquev6") == "read"


def test_comment_create_edit_and_reaction(replay: Any) -> None:
    r, gw = replay(
        "Issue.testCreateComment.txt", "IssueComment.testEdit.txt", "IssueComment.testCreateReaction.txt"
    )
    created = gw.create_comment("PyGithub/PyGithub", 28, "Comment created by PyGithub")
    assert created["id"] == 5808311 and created["body"] == "Comment created by PyGithub"
    edited = gw.update_comment("PyGithub/PyGithub", 20227753, "Comment edited by PyGithub")
    assert edited["body"] == "Comment edited by PyGithub"
    assert gw.add_reaction("PyGithub/PyGithub", 20227753, "hooray")["content"] == "hooray"
    assert [(v, p) for v, p, _ in r.seen] == [
        ("POST", "/repos/PyGithub/PyGithub/issues/28/comments"),
        ("PATCH", "/repos/PyGithub/PyGithub/issues/comments/20227753"),
        ("POST", "/repos/PyGithub/PyGithub/issues/comments/20227753/reactions"),
    ]


def test_git_data_writes(replay: Any) -> None:
    r, gw = replay(
        "Repository.testCreateGitBlob.txt", "Repository.testCreateGitRef.txt", "Repository.testGetGitRef.txt"
    )
    head = gw.get_ref("PyGithub/PyGithub", "heads/master")
    assert head is not None and head["object"]["sha"] == "31110327ec45f3138e58ed247b2cf420fee481ec"
    assert (
        gw.create_blob("ahmad88me/PyGithub", "Blob created by PyGithub")
        == "5dd930f591cd5188e9ea7200e308ad355182a1d8"
    )
    ref = gw.create_ref(
        "ahmad88me/PyGithub", "heads/BranchCreatedByPyGithub", "4303c5b90e2216d927155e9609436ccb8984c495"
    )
    assert ref["object"]["sha"] == "4303c5b90e2216d927155e9609436ccb8984c495"
    sent = json.loads(r.seen[2][2] or "{}")
    assert sent == {
        "ref": "refs/heads/BranchCreatedByPyGithub",
        "sha": "4303c5b90e2216d927155e9609436ccb8984c495",
    }


def test_tree_and_commit_creation(replay: Any) -> None:
    _, gw = replay("Repository.testCreateGitTree.txt", "Repository.testCreateGitCommit.txt")
    tree = gw.create_tree(
        "ahmad88me/PyGithub", "", {"Foobar.txt": "73a1c7f17aa0ad5d7cbb5a8ca033ce47d3d23197"}
    )
    assert tree == "41cf8c178c636a018d537cb20daae09391efd70b"
    commit = gw.create_commit(
        "ahmad88me/PyGithub", "Commit created by PyGithub", "107139a922f33bab6fbeb9f9eb8787e7f19e0528", []
    )
    assert commit["sha"] == "40dc47c114c30c816ae28355ec34b380916b39aa" and commit["parents"] == []


def test_pull_creation_refused_for_invalid_head_and_base(replay: Any) -> None:
    # GitHub's real 422 for a head/base it does not know: possibly visibility lag right after a
    # push, so it is retried a few times (here without delay), then believed.
    r, gw = replay("Repository.testCreatePull.txt")
    with pytest.raises(Conflict) as info:
        gw.create_pull(
            "ahmad88me/PyGithub",
            title="t",
            head="BeaverSoftware:master",
            base="topic/RewriteWithGeneratedCode",
            body="",
        )
    assert info.value.status == 422 and len(r.seen) == 4


def test_rate_limit_and_hook_deliveries(replay: Any) -> None:
    from app.core.redelivery import judge_page, parse_item

    _, gw = replay("RateLimiting.testGetRateLimit.txt", "Repository.testGetHookDeliveries.txt")
    assert gw.rate_limit()["resources"]["core"]["remaining"] == 4904
    raw, cursor = gw.list_hook_deliveries("PyGithub/PyGithub:257993")
    assert cursor is None and len(raw) == 1
    item = parse_item(raw[0])
    assert item is not None and item.guid == "abcde-12345" and not item.failed
    assert judge_page([item], stored=set(), asked=set(), floor=None, horizon=0).wanted == []


def test_installation_lookup_and_tokens_cached_per_installation() -> None:
    from app.adapters.github.credentials import AppCredentials

    r = Replay("GithubIntegration.testGetRepoInstallation.txt", "GithubIntegration.testGetAccessToken.txt")
    try:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
        settings = Settings(
            github_api_url=r.url,
            github_app_id=243473,
            github_app_private_key=pem,
            github_seconds_between_requests=0,
            github_seconds_between_writes=0,
        )
        creds = AppCredentials(settings, pem)
        assert creds.installation_for_repo("ammarmallik/test-runner") == 30614431
        assert creds.installation_for_repo("ammarmallik/test-runner") == 30614431  # remembered
        at = parse_expires_at("2024-11-25T00:00:02Z")  # an hour before the recorded expires_at
        assert at is not None
        first = creds.tokens.get(30614431, at, creds._mint)
        other = creds.tokens.get(30614487, at, creds._mint)
        again = creds.tokens.get(30614431, at + 600, creds._mint)
        assert first == again == "ghs_1llwuELtXN5HDOB99XhpcTXdJxbOuF0ZlSmj"
        assert other == "ghs_V0xygF8yACXSDz5FM65QWV1BT2vtxw0cbgPw"
        minted = [p for v, p, _ in r.seen if p.endswith("/access_tokens")]
        assert minted == [
            "/app/installations/30614431/access_tokens",
            "/app/installations/30614487/access_tokens",
        ]
        lookups = [p for v, p, _ in r.seen if p.endswith("/installation")]
        assert lookups == ["/repos/ammarmallik/test-runner/installation"]
        # the JWT, not a token, authenticates the App's own calls
        _, _, data = request(
            creds._jwt, "apps/get-repo-installation", "GET", "/repos/ammarmallik/test-runner/installation"
        )
        assert data["app_slug"] == "gh-actions-test-ammar"
    finally:
        r.close()


# ------------------------------------------------------------------ documented answers

R = "octocat/Hello-World"


def test_comments_listed_and_the_sticky_one_found(replay: Any) -> None:
    # A real 2012 recording: the answer carries only the fields GitHub sent then.
    _, gw = replay("Issue.testGetComments.txt")
    comments = gw.list_comments("PyGithub/PyGithub", 28)
    assert [c["id"] for c in comments] == [5449237, 5518272]
    found = gw.find_comment("PyGithub/PyGithub", 28, "tratihubis")
    assert found is not None and found["id"] == 5518272
    assert gw.find_comment("PyGithub/PyGithub", 28, "<!-- sweepbot:report -->") is None


def test_pulls_read_one_and_listed(replay: Any) -> None:
    r, gw = replay(
        documented("GET", f"/repos/{R}/pulls/1347", "pulls/get", 200, "pull-request"),
        documented("GET", f"/repos/{R}/pulls", "pulls/list", 200, "pull-request-simple-items"),
    )
    pull = gw.get_pull(R, 1347)
    assert pull["number"] == 1347 and pull["head"]["repo"]["full_name"] == R and pull["mergeable"] is True
    listed = gw.list_pulls(R, head="octocat:new-topic", base="master")
    assert [p["number"] for p in listed] == [1347]
    path, _, query = r.seen[1][1].partition("?")
    assert path == f"/repos/{R}/pulls"
    assert parse_qs(query) == {
        "state": ["open"],
        "head": ["octocat:new-topic"],
        "base": ["master"],
        "per_page": ["100"],
        "page": ["1"],
    }


def test_a_file_and_a_directory_read_through_the_contents_api(replay: Any) -> None:
    example = SPEC["components"]["examples"]["content-file-response-if-content-is-a-file"]["value"]
    r, gw = replay(
        documented(
            "GET",
            f"/repos/{R}/contents/README.md?ref=main",
            "repos/get-content",
            200,
            "content-file-response-if-content-is-a-file",
        ),
        documented(
            "GET",
            f"/repos/{R}/contents/lib/octokit?ref=main",
            "repos/get-content",
            200,
            "content-file-response-if-content-is-a-directory",
        ),
        documented("GET", f"/repos/{R}/contents/missing.yaml?ref=main", "repos/get-content", 404),
    )
    # GitHub's documented example of a file is a placeholder whose content is not valid base64:
    # the gateway refuses it with a GitHubError naming the file, not a crash deep in a handler.
    with pytest.raises(GitHubError, match="README.md: the content GitHub sent is not base64"):
        gw.get_file(R, "README.md", ref="main")
    assert example["encoding"] == "base64" and example["type"] == "file"
    listing = gw.list_dir(R, "lib/octokit", ref="main")
    assert [e["name"] for e in listing] == ["octokit.rb", "octokit"]
    assert gw.get_file(R, "missing.yaml", ref="main") is None


def test_compare_read_to_the_end_of_its_range(replay: Any) -> None:
    r, gw = replay(
        documented(
            "GET", f"/repos/{R}/compare/master...topic", "repos/compare-commits", 200, "commit-comparison"
        )
    )
    got = gw.compare_range(R, "master", "topic")
    assert got["total_commits"] == 1 and [c["sha"] for c in got["commits"]] == [
        "6dcb09b5b57875f334f61aebed695e2e4193db5e"
    ]
    assert [(p.partition("?")[0], parse_qs(p.partition("?")[2])) for _, p, _ in r.seen] == [
        (f"/repos/{R}/compare/master...topic", {"per_page": ["100"], "page": ["1"]})
    ]
    assert gw.compare(R, "master", "topic")["status"] == "behind"


def test_a_ref_moved_and_a_commit_read(replay: Any) -> None:
    r, gw = replay(
        documented("PATCH", f"/repos/{R}/git/refs/heads/featureA", "git/update-ref", 200, "git-ref"),
        documented(
            "GET",
            f"/repos/{R}/git/commits/7638417db6d59f3c431d3e1f261cc637155684cd",
            "git/get-commit",
            200,
            "git-commit-2",
        ),
    )
    ref = gw.update_ref(R, "heads/featureA", "aa218f56b14c9653891f9e74264a383fa43fefbd")
    assert ref["object"]["sha"] == "aa218f56b14c9653891f9e74264a383fa43fefbd"
    assert json.loads(r.seen[0][2] or "{}") == {
        "sha": "aa218f56b14c9653891f9e74264a383fa43fefbd",
        "force": False,
    }
    commit = gw.get_commit(R, "7638417db6d59f3c431d3e1f261cc637155684cd")
    assert commit["tree"]["sha"] == "691272480426f78a0138979dd3ce63b77f706feb"


def test_actions_dispatch_runs_jobs_and_artifacts(replay: Any) -> None:
    wf = "e2e-tests.yml"
    r, gw = replay(
        documented(
            "POST",
            f"/repos/{R}/actions/workflows/{wf}/dispatches",
            "actions/create-workflow-dispatch",
            200,
            "workflow-dispatch-response",
        ),
        documented(
            "GET",
            f"/repos/{R}/actions/workflows/{wf}/runs",
            "actions/list-workflow-runs",
            200,
            "workflow-run-paginated",
        ),
        documented(
            "GET", f"/repos/{R}/actions/runs/30433642", "actions/get-workflow-run", 200, "workflow-run"
        ),
        documented(
            "GET",
            f"/repos/{R}/actions/runs/30433642/jobs",
            "actions/list-jobs-for-workflow-run",
            200,
            "job-paginated",
        ),
        documented(
            "GET",
            f"/repos/{R}/actions/runs/30433642/artifacts",
            "actions/list-workflow-run-artifacts",
            200,
            "artifact-paginated",
        ),
    )
    got = gw.dispatch_workflow(R, wf, "main", {"generate-cli-command": "x"})
    assert got == SPEC["components"]["examples"]["workflow-dispatch-response"]["value"]
    assert json.loads(r.seen[0][2] or "{}")["return_run_details"] is True
    runs = gw.list_workflow_runs(R, wf, event="workflow_dispatch")
    assert [x["id"] for x in runs] == [30433642] and runs[0]["display_title"] == "Update README.md"
    assert gw.get_run(R, 30433642)["run_number"] == 562
    jobs = gw.list_run_jobs(R, 30433642)
    assert len(jobs) == 1 and jobs[0]["run_id"] == 29679449 and jobs[0]["steps"]
    arts = gw.list_run_artifacts(R, 30433642)
    assert [a["name"] for a in arts] == ["Rails", "Test output"]


def test_a_dispatch_answered_204_has_no_run_details(replay: Any) -> None:
    # Before return_run_details existed (and on GHES) the dispatch answers 204 with no body.
    _, gw = replay(
        documented(
            "POST",
            f"/repos/{R}/actions/workflows/e2e-tests.yml/dispatches",
            "actions/create-workflow-dispatch",
            204,
        )
    )
    assert gw.dispatch_workflow(R, "e2e-tests.yml", "main", {}) is None


def test_redelivery_asked_for_on_the_app_and_on_a_repository_hook(replay: Any) -> None:
    r, gw = replay(
        documented("POST", "/app/hook/deliveries/12345678/attempts", "apps/redeliver-webhook-delivery", 202),
        documented(
            "POST",
            f"/repos/{R}/hooks/424242/deliveries/12345678/attempts",
            "repos/redeliver-webhook-delivery",
            202,
        ),
    )
    gw.redeliver("app", 12345678)
    gw.redeliver(f"{R}:424242", 12345678)
    assert [(v, p) for v, p, _ in r.seen] == [
        ("POST", "/app/hook/deliveries/12345678/attempts"),
        ("POST", f"/repos/{R}/hooks/424242/deliveries/12345678/attempts"),
    ]


def test_the_pulls_that_brought_a_commit(replay: Any) -> None:
    sha = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
    _, gw = replay(
        documented(
            "GET",
            f"/repos/{R}/commits/{sha}/pulls",
            "repos/list-pull-requests-associated-with-commit",
            200,
            "pull-request-simple-items",
        )
    )
    assert [p["number"] for p in gw.commit_pulls(R, sha)] == [1347]


def test_the_app_s_installations_give_the_default_one() -> None:
    from app.adapters.github.credentials import AppCredentials

    r = Replay(
        documented("GET", "/app/installations", "apps/list-installations", 200, "base-installation-items")
    )
    try:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
        settings = Settings(
            github_api_url=r.url,
            github_app_id=1,
            github_app_private_key=pem,
            github_seconds_between_requests=0,
            github_seconds_between_writes=0,
        )
        assert AppCredentials(settings, pem).default_installation() == 1
        assert [p for _, p, _ in r.seen] == ["/app/installations"]
    finally:
        r.close()


def test_a_repository_a_pull_s_files_an_edit_and_a_job_s_annotations(replay: Any) -> None:
    r, gw = replay(
        documented("GET", f"/repos/{R}", "repos/get", 200, "full-repository-default-response"),
        documented("GET", f"/repos/{R}/pulls/1347/files", "pulls/list-files", 200, "diff-entry-items"),
        documented("PATCH", f"/repos/{R}/pulls/1347", "pulls/update", 200, "pull-request"),
        documented(
            "GET",
            f"/repos/{R}/check-runs/4/annotations",
            "checks/list-annotations",
            200,
            "check-annotation-items",
        ),
    )
    assert gw.get_repo(R)["default_branch"] == "master"
    files = gw.list_pull_files(R, 1347)
    assert [(f["filename"], f["status"]) for f in files] == [("file1.txt", "added")]
    assert gw.update_pull(R, 1347, body="new body")["number"] == 1347
    assert json.loads(r.seen[2][2] or "{}") == {"body": "new body"}
    notes = gw.list_check_run_annotations(R, 4)
    assert [(a["path"], a["annotation_level"]) for a in notes] == [("README.md", "warning")]
