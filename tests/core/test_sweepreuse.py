"""Reuse at merge: app.core.sweepreuse judges a PR's runs as the repo's reuse finder does."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.sweepreuse import ReuseFacts, authorization, decide_reuse

PATH = ".github/workflows/run-sweep.yml"
HEAD, OLD, GONE = "a" * 40, "b" * 40, "c" * 40


def _run(rid: int, **kw: Any) -> dict[str, Any]:
    base = {
        "id": rid,
        "event": "pull_request",
        "path": PATH,
        "status": "completed",
        "conclusion": "success",
        "head_sha": HEAD,
        "created_at": f"2026-08-01T00:00:{rid % 60:02d}Z",
    }
    return base | kw


def _comment(
    body: str, assoc: str = "MEMBER", at: str = "2026-08-02T00:00:00Z", login: str = "alice"
) -> dict[str, Any]:
    return {"body": body, "author_association": assoc, "created_at": at, "user": {"login": login}}


def _facts(**kw: Any) -> ReuseFacts:
    args: dict[str, Any] = {
        "workflow_path": PATH,
        "labels": ["full-sweep-fail-fast"],
        "commits": [OLD, HEAD],
        "runs": [_run(11)],
        "artifacts": {11: ["results_bmk", "eval_results_all", "bmk_x"]},
        "comments": [],
        "bot_login": "sweepbot[bot]",
    }
    return ReuseFacts(**(args | kw))


def test_an_eligible_run_is_offered_with_the_line_to_post() -> None:
    d = decide_reuse(_facts())
    assert (d.kind, d.run_id, d.line) == ("offer", 11, "/reuse-sweep-run 11")
    assert "runs the whole sweep again" in d.main_will


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"runs": [_run(11, event="workflow_dispatch")]}, "only pull_request runs"),
        ({"runs": [_run(11, path=".github/workflows/e2e-tests.yml")]}, "not .github/workflows/run-sweep.yml"),
        ({"runs": [_run(11, head_sha=GONE)]}, "no longer in the PR's commits"),
        ({"artifacts": {11: ["bmk_x"]}}, "neither aggregate artifact"),
        ({"runs": [_run(11, conclusion="failure")]}, "only a pinned run may have failed"),
        ({"labels": ["sweep-enabled"]}, "no full-sweep label"),
        ({"labels": ["full-sweep-fail-fast", "evals-only"]}, "evals-only"),
        ({"labels": ["full-sweep-enabled", "agentx-fast"]}, "agentx-fast"),
    ],
)
def test_each_finder_rule_makes_a_run_ineligible(kw: dict[str, Any], why: str) -> None:
    d = decide_reuse(_facts(**kw))
    assert d.kind == "ineligible" and why in d.why and d.run_id is None


def test_all_evals_full_sweeps_are_reusable() -> None:
    assert decide_reuse(_facts(labels=["full-sweep-fail-fast", "all-evals"])).kind == "offer"


def test_a_running_sweep_is_pending() -> None:
    assert decide_reuse(_facts(runs=[_run(11, status="in_progress", conclusion=None)])).kind == "pending"


def test_a_maintainers_pinned_comment_authorizes_and_says_what_main_does() -> None:
    d = decide_reuse(_facts(comments=[_comment("LGTM\n/reuse-sweep-run 11\n")]))
    assert (d.kind, d.run_id, d.pinned) == ("authorized", 11, 11)
    assert "reuses run 11" in d.main_will and "no GPU job" in d.main_will


def test_an_unpinned_comment_takes_the_latest_reusable_run() -> None:
    runs = [_run(11), _run(12), _run(13, head_sha=GONE)]
    arts = {11: ["results_bmk"], 12: ["eval_results_all"], 13: ["results_bmk"]}
    d = decide_reuse(_facts(runs=runs, artifacts=arts, comments=[_comment("/reuse-sweep-run")]))
    assert (d.kind, d.run_id, d.pinned) == ("authorized", 12, None)


def test_a_pinned_failed_run_is_accepted_but_never_offered() -> None:
    facts = _facts(runs=[_run(11, conclusion="failure")], comments=[_comment("/reuse-sweep-run 11")])
    assert decide_reuse(facts).kind == "authorized"


@pytest.mark.parametrize(
    ("comment", "assoc", "login"),
    [
        ("/reuse-sweep-run 11", "CONTRIBUTOR", "mallory"),
        ("/reuse-sweep-run 11", "NONE", "mallory"),
        ("Post: `/reuse-sweep-run 11`", "MEMBER", "alice"),  # not a line of its own
        ("/reuse-sweep-run 11", "MEMBER", "sweepbot[bot]"),  # the bot's own comment
    ],
)
def test_who_and_what_authorizes(comment: str, assoc: str, login: str) -> None:
    assert authorization([_comment(comment, assoc, login=login)], "sweepbot[bot]") == (False, None)


def test_the_latest_authorized_comment_wins_and_its_last_line() -> None:
    comments = [
        _comment("/reuse-sweep-run 12\n/reuse-sweep-run 11", at="2026-08-03T00:00:00Z"),
        _comment("/reuse-sweep-run 99", at="2026-08-02T00:00:00Z"),
        _comment("/reuse-sweep-run 98", "NONE", at="2026-08-04T00:00:00Z"),
    ]
    assert authorization(comments) == (True, 11)


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"comments": [_comment("/reuse-sweep-run 77")]}, "not a run-sweep.yml pull_request run"),
        ({"comments": [_comment("/reuse-sweep-run 11")], "artifacts": {11: []}}, "neither aggregate"),
        (
            {"comments": [_comment("/reuse-sweep-run 11")], "labels": ["full-sweep-enabled", "evals-only"]},
            "evals-only",
        ),
        (
            {"comments": [_comment("/reuse-sweep-run")], "runs": [_run(11, conclusion="failure")]},
            "no successful",
        ),
    ],
)
def test_authorized_but_ineligible_fails_closed(kw: dict[str, Any], why: str) -> None:
    d = decide_reuse(_facts(**kw))
    assert d.kind == "fails_closed" and why in d.why and "fails closed" in d.main_will
