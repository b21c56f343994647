"""After merge: each of the runbook's cases, classified from main's run (app.core.publication)."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.publication import PublicationFacts, classify_publication

REPO = "SemiAnalysisAI/InferenceX"
GPU = "single-node 8k1k / p50 | minimaxm3 fp4 mi355x vllm TP4    c4"
SKIPPED = [{"name": n, "conclusion": "skipped"} for n in ("canary /", "single-node 8k1k /", "eval /")]


def _facts(jobs: list[dict[str, Any]], **kw: Any) -> PublicationFacts:
    args: dict[str, Any] = {
        "repo": REPO,
        "pr_number": 2104,
        "run": {"id": 900, "status": "completed", "conclusion": "success"},
        "jobs": jobs,
        "merge_artifacts": ["changelog-metadata"],
        "expected_source": 500,
        "source_artifacts": ["results_bmk", "eval_results_all"],
        "recovery_source": 500,
        "recovery_source_sha": "f" * 40,
    }
    return PublicationFacts(**(args | kw))


def _ok(name: str, conclusion: str = "success") -> dict[str, Any]:
    return {"name": name, "conclusion": conclusion}


def test_reuse_taken_and_published_with_artifact_identity() -> None:
    p = classify_publication(_facts([_ok("setup"), *SKIPPED, _ok("trigger-ingest")]))
    assert (p.kind, p.reuse_taken, p.published, p.source_run, p.merge_run) == (
        "published",
        True,
        True,
        500,
        900,
    )
    assert not p.needs_human


def test_main_swept_again_and_published_its_own_run() -> None:
    p = classify_publication(
        _facts([_ok("setup"), _ok(GPU), _ok("trigger-ingest")], source_artifacts=["results_bmk"])
    )
    assert (p.kind, p.reuse_taken, p.source_run) == ("published", False, 900)
    assert "reuse of run 500 was expected but main swept again" in p.why


def test_case_a_the_ingest_failed_with_the_right_pair() -> None:
    p = classify_publication(_facts([_ok("setup"), *SKIPPED, _ok("trigger-ingest", "failure")]))
    assert p.kind == "case_a" and p.needs_human
    assert p.recovery.startswith(f"gh run rerun 900 --repo {REPO} --failed")
    assert "Source run: 500" in p.recovery and "Merge run:  900" in p.recovery


@pytest.mark.parametrize(
    ("jobs", "kw", "why"),
    [
        ([_ok("setup", "failure")], {}, "reuse failed closed"),
        ([_ok("setup"), *SKIPPED], {}, "never handed its results"),
        ([_ok("setup"), _ok(GPU, "cancelled"), _ok("trigger-ingest")], {}, "bogus publication"),
        ([_ok("setup"), *SKIPPED, _ok("trigger-ingest")], {"merge_artifacts": []}, "not a verified recovery"),
        (
            [_ok("setup"), *SKIPPED, _ok("trigger-ingest")],
            {"source_artifacts": ["bmk_x"]},
            "without artifact identity",
        ),
    ],
)
def test_case_b_missing_skipped_bogus_or_unverified(
    jobs: list[dict[str, Any]], kw: dict[str, Any], why: str
) -> None:
    p = classify_publication(_facts(jobs, **kw))
    assert p.kind == "case_b" and why in p.why and p.needs_human and not p.published
    assert "--add-label full-sweep-fail-fast" in p.recovery
    assert '--body "/reuse-sweep-run 500"' in p.recovery
    assert "append a recovery entry to the end of perf-changelog.yaml" in p.recovery
    assert "-p " + "f" * 40 in p.recovery


def test_case_b_without_a_reusable_source_needs_a_new_sweep() -> None:
    p = classify_publication(_facts([_ok("setup", "failure")], recovery_source=None))
    assert p.kind == "needs_sweep" and "must run again" in p.why and p.recovery == ""


def test_a_running_or_absent_main_run_is_pending() -> None:
    assert classify_publication(_facts([], run=None)).kind == "pending"
    assert classify_publication(_facts([], run={"id": 9, "status": "in_progress"})).kind == "pending"


def test_hosted_called_workflow_jobs_are_not_gpu_jobs() -> None:
    jobs = [_ok("setup"), *SKIPPED, _ok("collect-results / collect-results"), _ok("trigger-ingest")]
    assert classify_publication(_facts(jobs)).reuse_taken
