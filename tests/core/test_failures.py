"""Failure classes and their policies (app.core.failures), and which class a failed job's
check-run annotations put it in (app.core.runmatch.classify_failure)."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.failures import POLICY, FailureClass, Policy
from app.core.runmatch import classify_failure


def test_every_class_has_exactly_one_policy() -> None:
    assert set(POLICY) == set(FailureClass)


@pytest.mark.parametrize(
    ("kind", "policy"),
    [
        (FailureClass.RUNNER_LOST, Policy.RETRY_ELSEWHERE),
        (FailureClass.RUNNER_WORKSPACE, Policy.RETRY_ELSEWHERE),
        (FailureClass.PROVISIONING, Policy.RETRY_ELSEWHERE),
        (FailureClass.BENCHMARK, Policy.REPORT),
        (FailureClass.EVAL, Policy.REPORT),
        (FailureClass.PROCESSING, Policy.REPORT),
        (FailureClass.DISPATCH, Policy.REPORT),
        (FailureClass.ETL, Policy.REPORT),
        (FailureClass.MAPPING, Policy.REPORT),
        (FailureClass.PUBLICATION, Policy.REPORT),
        (FailureClass.CANCELLED, Policy.LEAVE),
        (FailureClass.WORKFLOW_DEFECT, Policy.NEVER_RETRY),
    ],
)
def test_the_policy_of_each_class(kind: FailureClass, policy: Policy) -> None:
    assert POLICY[kind] is policy


def _ann(message: str, level: str = "failure") -> dict[str, Any]:
    return {"message": message, "annotation_level": level}


@pytest.mark.parametrize(
    ("annotations", "conclusion", "kind"),
    [
        ([_ann("The self-hosted runner: mi355x-amds_03 lost communication with the server.")], "failure",
         FailureClass.RUNNER_LOST),
        ([_ann("The runner has received a shutdown signal.")], "cancelled", FailureClass.RUNNER_LOST),
        ([_ann("EACCES: permission denied, rmdir '/home/runner/_work/InferenceX/InferenceX/benchmark_logs/"
               "logs/slurm_job-4242'")], "failure", FailureClass.RUNNER_WORKSPACE),
        ([_ann("EACCES: permission denied, open '/etc/hosts'")], "failure", FailureClass.BENCHMARK),
        ([_ann("pyxis: failed to import docker image: enroot-nsenter: failed to create user namespace")],
         "failure", FailureClass.PROVISIONING),
        ([_ann("Error when evaluating 'strategy' for job 'test-sweep-evals'. .github/workflows/e2e-tests.yml "
               "(Line: 92, Col: 15): Error parsing fromJson")], "failure", FailureClass.WORKFLOW_DEFECT),
        ([_ann("Process completed with exit code 1.")], "failure", FailureClass.BENCHMARK),
        ([], "failure", FailureClass.BENCHMARK),
        ([_ann("The operation was canceled.")], "cancelled", FailureClass.CANCELLED),
        ([_ann("The job has exceeded the maximum execution time of 6h0m0s")], "cancelled",
         FailureClass.BENCHMARK),
    ],
)  # fmt: skip
def test_annotations_decide_the_class(
    annotations: list[dict[str, Any]], conclusion: str, kind: FailureClass
) -> None:
    failure = classify_failure(annotations, conclusion=conclusion)
    assert failure.kind is kind, failure.message
    assert failure.infrastructure is (POLICY[kind] is Policy.RETRY_ELSEWHERE)
    assert failure.cancelled is (kind is FailureClass.CANCELLED)
    assert failure.workflow_defect is (kind is FailureClass.WORKFLOW_DEFECT)
