"""Contract: real recorded GitHub exchanges replayed through the gateway, for the operations the
bot calls (recordings from PyGithub's tests/ReplayData, see tests/fixtures/github/README.md).

A loopback server answers each recorded request (method + path) with the recorded status,
headers and body; the gateway must send that request and read that answer as real GitHub gave it.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from app.adapters.github import Conflict, GitHubGateway, request
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


class Replay:
    def __init__(self, *names: str) -> None:
        self.exchanges = [x for n in names for x in parse(REPLAY / n)]
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

    def start(*names: str) -> tuple[Replay, GitHubGateway]:
        r = Replay(*names)
        servers.append(r)
        settings = Settings(
            github_api_url=r.url,
            github_token="replay-token",
            github_max_retries=0,
            github_seconds_between_requests=0,
            github_seconds_between_writes=0,
        )
        from app.adapters.github import make_requester

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
    import json

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
    from app.adapters.github import AppCredentials

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
