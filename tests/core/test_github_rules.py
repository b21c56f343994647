"""Pure rules about real GitHub: rate limits, roles, installations and tokens, lag, payload gaps."""

from __future__ import annotations

import json

import pytest

from app.core import consistency, ratelimit
from app.core.installations import (
    InstallationMap,
    TokenCache,
    installation_of,
    parse_expires_at,
    repo_of_path,
)
from app.core.payloads import head_of, mergeable_of, organization_of
from app.core.roles import effective_role
from app.core.routing import TransientError
from tests.conftest import FIXTURES

NOW = 1_800_000_000.0


# ---------------------------------------------------------------- rate limits (GitHub's documented order)


def test_retry_after_wins_over_everything() -> None:
    got = ratelimit.classify(403, {"Retry-After": "30", "X-RateLimit-Remaining": "10"}, "", NOW)
    assert got == ratelimit.RateLimit("secondary", 30.0, False, "retry-after header")


def test_primary_limit_waits_for_the_reset() -> None:
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW + 900))}
    got = ratelimit.classify(403, headers, "API rate limit exceeded for installation ID 1.", NOW)
    assert got is not None and got.kind == "primary" and got.wait == 901.0 and not got.exponential


def test_secondary_limit_without_retry_after_waits_a_minute_then_doubles() -> None:
    message = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
    headers = {"X-RateLimit-Remaining": "4990", "X-RateLimit-Reset": str(int(NOW + 3000))}
    got = ratelimit.classify(403, headers, message, NOW)
    assert got is not None and got.kind == "secondary" and got.wait == 60.0 and got.exponential
    # not the reset time (50 minutes away): at least 60 s, then 120, 240 ...
    assert [ratelimit.backoff(got.wait, got.exponential, n) for n in (1, 2, 3)] == [60.0, 120.0, 240.0]
    assert ratelimit.backoff(60.0, True, 30) == ratelimit.MAX_WAIT
    exc = TransientError("x", retry_after=60.0, rate_limited=True, exponential=True)
    assert exc.delay(3, default=5.0) == 240.0
    assert TransientError("5xx").delay(3, default=5.0) == 5.0


def test_a_plain_403_is_not_a_rate_limit() -> None:
    assert (
        ratelimit.classify(
            403, {"X-RateLimit-Remaining": "4000"}, "Resource not accessible by integration", NOW
        )
        is None
    )
    assert ratelimit.classify(404, {"Retry-After": "5"}, "", NOW) is None
    assert ratelimit.classify(429, {}, "", NOW) == ratelimit.RateLimit(
        "secondary", 60.0, True, "secondary limit without retry-after"
    )


# ---------------------------------------------------------------- roles


def test_base_roles_are_taken_as_they_are() -> None:
    assert effective_role({"permission": "write", "role_name": "maintain"}) == "maintain"
    assert effective_role({"permission": "read", "role_name": "triage"}) == "triage"


def test_a_custom_role_falls_back_to_user_permissions_then_permission() -> None:
    flags = {"admin": False, "maintain": True, "push": True, "triage": True, "pull": True}
    answer = {
        "permission": "write",
        "role_name": "release-captain",
        "user": {"login": "c", "permissions": flags},
    }
    assert effective_role(answer) == "maintain"
    assert effective_role({"permission": "write", "role_name": "release-captain", "user": {}}) == "write"
    assert effective_role({"permission": "read", "role_name": "auditor"}) == "read"
    assert effective_role(None) == "none"


def test_the_documented_example_answer() -> None:
    spec = json.loads((FIXTURES / "github" / "openapi-subset.json").read_text())
    examples = spec["components"]["examples"]
    example = examples["repository-collaborator-permission-response-if-user-has-admin-permissions"]["value"]
    assert effective_role(example) == "admin"


# ---------------------------------------------------------------- installations and tokens


def test_tokens_are_reused_until_shortly_before_they_expire() -> None:
    minted: list[int] = []

    def mint(inst: int) -> tuple[str, float | None]:
        minted.append(inst)
        return f"tok-{inst}-{len(minted)}", NOW + 3600

    cache = TokenCache(margin=300)
    assert cache.get(1, NOW, mint) == "tok-1-1"
    assert cache.get(1, NOW + 3000, mint) == "tok-1-1"  # 10 minutes left: still good
    assert cache.get(2, NOW, mint) == "tok-2-2"  # each installation has its own
    assert cache.get(1, NOW + 3301, mint) == "tok-1-3"  # inside the margin: minted again
    cache.forget(2)
    assert cache.get(2, NOW, mint) == "tok-2-4"
    assert minted == [1, 2, 1, 2] and cache.minted == 4


def test_expires_at_and_paths_and_payload_installation() -> None:
    assert parse_expires_at("2016-07-11T22:14:10Z") == 1468275250.0
    assert parse_expires_at("not a date") is None and parse_expires_at(None) is None
    assert repo_of_path("/repos/Octo-Org/Repo/pulls/1") == "octo-org/repo"
    assert repo_of_path("/app/hook/deliveries") is None
    assert installation_of({"installation": {"id": 7, "node_id": "x"}}) == 7
    assert (
        installation_of({"repository": {}}) is None
        and installation_of({"installation": {"id": True}}) is None
    )
    m = InstallationMap()
    assert m.known("A/B") == (False, None)
    m.learn("A/B", None)
    assert m.known("a/b") == (True, None)


def test_real_payloads_with_and_without_installation_and_organization() -> None:
    hooks = FIXTURES / "github" / "webhooks"
    with_inst = json.loads((hooks / "push" / "with-installation.payload.json").read_text())
    with_org = json.loads((hooks / "pull_request" / "opened.with-organization.payload.json").read_text())
    plain = json.loads((hooks / "pull_request" / "opened.payload.json").read_text())
    assert installation_of(with_inst) == with_inst["installation"]["id"]
    assert organization_of(with_org) == with_org["organization"]["login"]
    assert organization_of(plain) is None


# ---------------------------------------------------------------- payload gaps


def test_mergeable_null_is_unknown_and_a_deleted_fork_is_an_unreadable_fork() -> None:
    plain = json.loads(
        (FIXTURES / "github" / "webhooks" / "pull_request" / "opened.payload.json").read_text()
    )
    pr = plain["pull_request"]
    assert pr["mergeable"] is None and mergeable_of(pr) is None  # GitHub had not computed it yet
    assert mergeable_of({"mergeable": None}) is None and mergeable_of({"mergeable": False}) is False
    same = head_of(pr, pr["base"]["repo"]["full_name"])
    assert same.readable and same.repo == pr["head"]["repo"]["full_name"]
    gone = head_of({**pr, "head": {**pr["head"], "repo": None}}, pr["base"]["repo"]["full_name"])
    assert gone.is_fork and not gone.readable and gone.repo is None and gone.sha == pr["head"]["sha"]


# ---------------------------------------------------------------- eventual consistency


@pytest.mark.parametrize(
    ("op", "status", "data", "lag"),
    [
        (
            "pulls/create",
            422,
            {
                "message": "Validation Failed",
                "errors": [{"resource": "PullRequest", "field": "head", "code": "invalid"}],
            },
            True,
        ),
        (
            "pulls/create",
            422,
            {
                "message": "Validation Failed",
                "errors": [{"message": "A pull request already exists for o:b."}],
            },
            False,
        ),
        (
            "pulls/create",
            422,
            {"message": "Validation Failed", "errors": [{"message": "No commits between main and b"}]},
            False,
        ),
        ("git/update-ref", 422, {"message": "Object does not exist"}, True),
        ("git/update-ref", 422, {"message": "Update is not a fast forward"}, False),
        ("git/create-ref", 422, {"message": "Reference already exists"}, False),
        ("git/get-ref", 404, {"message": "Not Found"}, True),
        ("issues/create-comment", 404, {"message": "Not Found"}, False),
    ],
)
def test_which_refusals_may_be_visibility_lag(op: str, status: int, data: object, lag: bool) -> None:
    assert consistency.is_visibility_lag(op, status, data) is lag


def test_concurrent_requests_per_installation_are_capped() -> None:
    import threading
    import time

    from app.adapters.ghslots import LocalSlots

    slots = LocalSlots(2)
    start = threading.Barrier(6)

    def work(key: str) -> None:
        start.wait()
        with slots(key):
            time.sleep(0.05)

    threads = [threading.Thread(target=work, args=(k,)) for k in ["inst:1"] * 4 + ["inst:2"] * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert slots.peak == {"inst:1": 2, "inst:2": 2}
