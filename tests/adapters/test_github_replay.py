"""Contract: real recorded GitHub exchanges replayed through the gateway, for the operations the
bot calls (recordings from PyGithub's tests/ReplayData, see tests/fixtures/github/README.md), and,
for the operations no recording covers, GitHub's own documented example answer of the operation
(``components/examples`` of the OpenAPI subset, served with the documented status).

A loopback server answers each recorded request (method + path) with the recorded status,
headers and body; the gateway must send that request and read that answer as real GitHub gave it.
"""

from __future__ import annotations

import ast
import io
import json
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from pydantic import SecretStr

from app.adapters.github.errors import Conflict, Forbidden, GitHubError
from app.adapters.github.gateway import GitHubGateway
from app.adapters.github.transport import request
from app.core.installations import parse_expires_at
from app.core.routing import TransientError
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
    raw: bytes | None = None  # a binary body (an archive) instead of ``response``
    length: bool = True  # False: no Content-Length, the body ends when the connection closes


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
        self.headers_seen: list[dict[str, str]] = []  # the request headers, in the order of ``seen``
        replay = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else None
                replay.seen.append((self.command, self.path, body))
                replay.headers_seen.append({k.lower(): v for k, v in self.headers.items()})
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
                payload = match.raw if match.raw is not None else match.response.encode()
                self.send_response(match.status)
                for k, v in match.headers:
                    if k.lower() not in _DROP:
                        self.send_header(k, v)
                if match.length:
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
            github_token=SecretStr("replay-token"),
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


def _app_settings(url: str, *, app_id: int) -> tuple[Settings, str]:
    """A GitHub App's settings against the replay server, with a fresh private key (its PEM)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    settings = Settings(
        github_api_url=url,
        github_app_id=app_id,
        github_app_private_key=SecretStr(pem),
        github_seconds_between_requests=0,
        github_seconds_between_writes=0,
    )
    return settings, pem


def test_installation_lookup_and_tokens_cached_per_installation() -> None:
    from app.adapters.github.credentials import AppCredentials

    r = Replay("GithubIntegration.testGetRepoInstallation.txt", "GithubIntegration.testGetAccessToken.txt")
    try:
        settings, pem = _app_settings(r.url, app_id=243473)
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
        settings, pem = _app_settings(r.url, app_id=1)
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


# ------------------------------------------------------------------ issues, labels, runs, artifacts


def test_an_issue_read_then_edited_in_place(replay: Any) -> None:
    # A 2025 answer for issue 28 (modern fields: type, sub_issues_summary, no pull_request key),
    # then GitHub's real answer to a PATCH of the same issue.
    r, gw = replay("Issue.setUp.txt", "Issue.testEditWithAllParameters.txt")
    repo, marker = "PyGithub/PyGithub", "Body edited by PyGithub"
    issue = gw.get_issue(repo, 28)
    assert (issue["number"], issue["title"], issue["state"]) == (28, "Issue created by PyGithub", "closed")
    assert issue["body"] == "Body edited by PyGithub\n" and "pull_request" not in issue
    assert [label["name"] for label in issue["labels"]] == ["bug", "question"]
    # Nothing changed: read, compared, not written.
    same = gw.upsert_issue(repo, marker, title="Issue created by PyGithub", body=issue["body"], number=28)
    assert same["id"] == 4653757 and [v for v, _, _ in r.seen] == ["GET", "GET"]
    # A new title and body: one PATCH with exactly those fields, GitHub's answer returned.
    edited = gw.upsert_issue(repo, marker, title="Title edited by PyGithub", body=marker, number=28)
    assert (edited["title"], edited["body"]) == ("Title edited by PyGithub", "Body edited by PyGithub")
    verb, path, sent = r.seen[-1]
    assert (verb, path) == ("PATCH", "/repos/PyGithub/PyGithub/issues/28")
    assert json.loads(sent or "{}") == {"title": "Title edited by PyGithub", "body": marker}
    # Closing it once recovered, as the nightly watch does: the fields GitHub's recording shows.
    closed = gw.update_issue(repo, 28, state="closed", state_reason="completed")
    assert closed["state"] == "closed"
    assert json.loads(r.seen[-1][2] or "{}") == {"state": "closed", "state_reason": "completed"}


def test_issues_listed_and_the_marked_one_found(replay: Any) -> None:
    # GitHub's real 2012 list: every plain issue carries "pull_request" with null links. A key
    # alone does not make a pull request, or no issue would ever be found and each pass would
    # create a duplicate.
    r, gw = replay("Repository.testGetIssues.txt")
    found = gw.find_issue("PyGithub/PyGithub", "Body created by PyGithub", creator="jacquev6")
    assert found is not None and (found["number"], found["title"]) == (30, "Issue also created by PyGithub")
    path, _, query = r.seen[0][1].partition("?")
    assert path == "/repos/PyGithub/PyGithub/issues"
    assert parse_qs(query) == {"state": ["all"], "creator": ["jacquev6"], "per_page": ["100"], "page": ["1"]}
    # A marker no issue holds: one page read (16 < per_page, the last), nothing found.
    assert gw.find_issue("PyGithub/PyGithub", "<!-- sweepbot:nightly:none -->") is None
    assert len(r.seen) == 2


def test_an_issue_created_with_labels_and_one_refused_where_issues_are_off(replay: Any) -> None:
    label = "Label with spaces and strange characters (&*#$)"
    r, gw = replay("Issue50.testCreateIssueWithLabel.txt", "Repository.testCreateIssue.txt")
    title = "Issue created by PyGithub to test issue #50"
    created = gw.create_issue("jacquev6/PyGithub", title=title, body="", labels=[label])
    assert created["number"] == 52 and [x["name"] for x in created["labels"]] == [label]
    assert r.seen[0][:2] == ("POST", "/repos/jacquev6/PyGithub/issues")
    assert json.loads(r.seen[0][2] or "{}") == {"title": title, "body": "", "labels": [label]}
    # GitHub's real 410 for a repository with issues turned off: a plain refusal, asked once.
    with pytest.raises(GitHubError, match="Issues are disabled for this repo") as info:
        gw.create_issue("ahmad88me/PyGithub", title="Issue created by PyGithub", body="b")
    assert info.value.status == 410 and not isinstance(info.value, TransientError)
    assert len(r.seen) == 2


def test_a_label_with_strange_characters_added_and_removed(replay: Any) -> None:
    label = "Label with spaces and strange characters (&*#$)"
    r, gw = replay("Issue50.testAddLabelToIssue.txt", "Issue50.testRemoveLabelFromIssue.txt")
    now = gw.add_labels("jacquev6/PyGithub", 50, [label])
    assert [x["name"] for x in now] == ["Bug", label, "RequestedByUser"]
    # PyGithub sent the bare array; the gateway sends the documented object form.
    assert json.loads(r.seen[0][2] or "{}") == {"labels": [label]}
    gw.remove_label("jacquev6/PyGithub", 50, label)
    # The label is quoted as GitHub's recording shows it (a different path would not be answered).
    assert r.seen[1][:2] == (
        "DELETE",
        "/repos/jacquev6/PyGithub/issues/50/labels/"
        "Label%20with%20spaces%20and%20strange%20characters%20%28%26%2A%23%24%29",
    )


def test_a_cancel_refused_for_want_of_admin_rights_is_a_clear_permission_error(replay: Any) -> None:
    # GitHub's real answer to a cancel by a token that may not: 403 with the rate limit far from
    # spent. Not a rate limit (no retry later), not a cancel (not suppressed like a 409).
    from app.flows.sweeps.cancel import cancel_runs

    r, gw = replay("WorkflowRun.test_cancel.txt")
    repo, run_id = "PyGithub/PyGithub", 3911660493
    assert gw.get_run(repo, run_id)["status"] == "in_progress"
    with pytest.raises(Forbidden) as info:
        gw.cancel_run(repo, run_id)
    assert info.value.status == 403 and not isinstance(info.value, TransientError)
    assert str(info.value) == (
        "GitHub answered 403: actions/cancel-workflow-run: run 3911660493 of PyGithub/PyGithub was not "
        "cancelled (Must have admin rights to Repository.): the bot's credentials need write access "
        "to Actions there"
    )
    assert [(v, p) for v, p, _ in r.seen] == [
        ("GET", f"/repos/{repo}/actions/runs/{run_id}"),
        ("POST", f"/repos/{repo}/actions/runs/{run_id}/cancel"),
    ]
    # The caller reports it per run (one POST each time, no retry inside the call).
    errors = cancel_runs(gw, repo, [run_id])
    assert len(errors) == 1 and errors[0].startswith("run 3911660493: ") and "admin rights" in errors[0]
    assert len(r.seen) == 3


ARCHIVE_HOST = "https://pipelines.actions.githubusercontent.com"


def _archive_replay(replay: Any, archive: Exchange) -> tuple[Replay, GitHubGateway]:
    """GitHub's real 302 of an artifact's zip; its Location's path and query served on loopback."""
    r, gw = replay("Artifact.test_get_redirect_url.txt")
    redirect = r.exchanges[0]
    location = dict(redirect.headers)["Location"]
    assert location.startswith(ARCHIVE_HOST + "/")
    redirect.headers = [
        (k, v.replace(ARCHIVE_HOST, r.url) if k == "Location" else v) for k, v in redirect.headers
    ]
    archive.url = location.removeprefix(ARCHIVE_HOST)
    r.exchanges.append(archive)
    return r, gw


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("results.json", json.dumps({"rows": list(range(2000))}))
    return buf.getvalue()


def test_an_artifact_fetched_from_its_redirect_without_our_token(replay: Any) -> None:
    body = _zip()
    r, gw = _archive_replay(
        replay, Exchange("GET", "", None, 200, [("Content-Type", "application/zip")], "", body)
    )
    assert gw.download_artifact("PyGithub/PyGithub", 71384263) == body
    (api, api_path, _), (fetch, fetch_path, _) = r.seen
    assert (api, api_path) == ("GET", "/repos/PyGithub/PyGithub/actions/artifacts/71384263/zip")
    assert fetch == "GET" and fetch_path.startswith(
        "/vVJrNqNDqm6ysMIhP6YVnHS7J3XmqpVj7W6p4jmwYjdlXCLT8T/_apis/"
    )
    assert "urlSignature=aHKUB4uqBSHptPLIbzTfJNjgPVBP2QIXvayJpUl8GNQ%3D" in fetch_path
    # The API call carries the token; the pre-signed archive URL must not get it.
    assert r.headers_seen[0]["authorization"] == "token replay-token"
    assert "authorization" not in r.headers_seen[1]


def test_an_artifact_over_the_cap_is_refused_before_it_is_read_whole(replay: Any) -> None:
    body = _zip()
    declared = Exchange("GET", "", None, 200, [], "", body)
    _, gw = _archive_replay(replay, declared)
    # The declared size decides before any byte of the body is read.
    with pytest.raises(GitHubError, match=f"is {len(body)} bytes, over the {len(body) - 1} cap") as info:
        gw.download_artifact("PyGithub/PyGithub", 71384263, max_bytes=len(body) - 1)
    assert info.value.status == 413
    # No Content-Length (the body ends with the connection): counted while streaming, cut at the cap.
    declared.length = False
    with pytest.raises(GitHubError, match=f"over the {len(body) - 1}-byte cap"):
        gw.download_artifact("PyGithub/PyGithub", 71384263, max_bytes=len(body) - 1)
    assert gw.download_artifact("PyGithub/PyGithub", 71384263, max_bytes=len(body)) == body


def test_a_cancel_accepted_or_finding_the_run_finished(replay: Any) -> None:
    # No recording of a cancel that took: GitHub documents 202, and 409 when the run is no longer
    # cancellable (finished): both are the state the bot wants, neither raises.
    r, gw = replay(
        documented("POST", f"/repos/{R}/actions/runs/30433642/cancel", "actions/cancel-workflow-run", 202),
        documented("POST", f"/repos/{R}/actions/runs/30433643/cancel", "actions/cancel-workflow-run", 409),
    )
    assert gw.cancel_run(R, 30433642) is None
    assert gw.cancel_run(R, 30433643) is None
    assert [(v, p, b) for v, p, b in r.seen] == [
        ("POST", f"/repos/{R}/actions/runs/30433642/cancel", None),
        ("POST", f"/repos/{R}/actions/runs/30433643/cancel", None),
    ]


def test_a_label_already_gone_and_a_pull_request_among_the_issues(replay: Any) -> None:
    r, gw = replay(
        documented("DELETE", f"/repos/{R}/issues/1347/labels/sweep%3Arunning", "issues/remove-label", 404),
        documented("GET", f"/repos/{R}/issues", "issues/list-for-repo", 200, "issue-items"),
    )
    # Removing a label that is not there: GitHub's documented 404 is the state wanted.
    gw.remove_label(R, 1347, "sweep:running")
    assert r.seen[0][:2] == ("DELETE", f"/repos/{R}/issues/1347/labels/sweep%3Arunning")
    # GitHub's documented list holds #1347 with its pull_request links: a pull request is never
    # taken for the marked issue, whatever its body says.
    listed = SPEC["components"]["examples"]["issue-items"]["value"]
    assert listed[0]["pull_request"]["url"] and listed[0]["body"]
    assert gw.find_issue(R, listed[0]["body"]) is None
