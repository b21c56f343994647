"""Why a job failed (app.core.runmatch.classify_failure): the class, the exact message the report
quotes, and the one log line each decision writes. The annotation texts are GitHub's (the runner
loss and timeout texts as InferenceX's runs show them; the evaluation error as GitHub words it)."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import pytest
from structlog.testing import capture_logs

from app.core.failures import Failure, FailureClass
from app.core.runmatch import MAX_QUOTE, _quote, classify_failure

LOST = "The self-hosted runner: mi355x-amds_03 lost communication with the server."
WORKSPACE = "EACCES: permission denied, rmdir '/home/runner/_work/InferenceX/InferenceX/benchmark_logs/dsr1'"
PROVISIONING = "pyxis: failed to create user namespace: enroot-nsenter: operation not permitted"
DEFECT = (
    "Error when evaluating 'strategy' for job 'benchmark'. .github/workflows/e2e-tests.yml (Line: 80, "
    "Col: 17): Error parsing fromJson"
)
TIMEOUT = "The job running on runner mi355x-amds_01 has exceeded the maximum execution time of 360 minutes."
EXIT = "Process completed with exit code 1."
STEPS = [
    {"name": "Checkout", "conclusion": "success"},
    {"conclusion": "failure"},  # a nameless step is not named
    {"name": "Run benchmark", "conclusion": "failure"},
    {"name": "Upload", "conclusion": "failure"},
]


def note(message: str | None, level: str | None = "failure") -> dict[str, Any]:
    out: dict[str, Any] = {"path": ".github", "message": message}
    return out if level is None else out | {"annotation_level": level}


def classified(
    annotations: list[dict[str, Any]], **kw: Any
) -> tuple[Failure, list[MutableMapping[str, Any]]]:
    with capture_logs() as logs:
        got = classify_failure(annotations, **kw)
    return got, logs


def line(**fields: Any) -> dict[str, Any]:
    return {"event": "failure_classified", "log_level": "info", **fields}


@pytest.mark.parametrize(
    ("text", "marker"),
    [
        (LOST, "lost communication with the server"),
        ("The runner has received a shutdown signal.", "runner has received a shutdown signal"),
        ("The runner has been lost.", "the runner has been lost"),
        ("The job was not acquired by Runner of type self-hosted", "was not acquired by runner"),
        ("The job was cancelled by the system.", "cancelled by the system"),
        ("The job was CANCELED by the system.", "canceled by the system"),
    ],
)
def test_a_runner_loss(text: str, marker: str) -> None:
    got, logs = classified([note(EXIT), note(text)], conclusion="failure", steps=STEPS)
    assert got == Failure(FailureClass.RUNNER_LOST, text)
    assert logs == [line(kind="runner lost", marker=marker)]


def test_the_first_annotation_with_a_sign_decides() -> None:
    got, _ = classified([note(PROVISIONING), note(LOST)], conclusion="failure")
    assert got == Failure(FailureClass.PROVISIONING, PROVISIONING)
    got, _ = classified([note(DEFECT), note(LOST)], conclusion="failure")
    assert got == Failure(FailureClass.RUNNER_LOST, LOST)  # infrastructure before a defect


def test_a_runner_workspace_needs_both_markers() -> None:
    got, logs = classified([note(WORKSPACE)], conclusion="failure")
    assert got == Failure(FailureClass.RUNNER_WORKSPACE, WORKSPACE)
    assert logs == [line(kind="runner workspace")]
    got, _ = classified([note("EACCES: permission denied, open '/tmp/x'")], conclusion="failure")
    assert got.kind is FailureClass.BENCHMARK


def test_provisioning() -> None:
    got, logs = classified([note(PROVISIONING)], conclusion="failure")
    assert got == Failure(FailureClass.PROVISIONING, PROVISIONING)
    assert logs == [line(kind="provisioning")]


def test_a_workflow_defect() -> None:
    got, logs = classified([note(EXIT), note(DEFECT)], conclusion="failure")
    assert got == Failure(FailureClass.WORKFLOW_DEFECT, DEFECT)
    assert logs == [line(kind="workflow_defect")]


def test_the_benchmarks_failure_quotes_every_annotation_and_the_failed_step() -> None:
    got, logs = classified([note(EXIT), note("OOM", "warning")], conclusion="failure", steps=STEPS)
    assert got == Failure(FailureClass.BENCHMARK, f"failed in step 'Run benchmark': {EXIT} / OOM")
    assert logs == [line(kind="benchmark", step="Run benchmark")]


def test_the_benchmarks_failure_without_a_failed_step() -> None:
    steps = [{"name": "Checkout", "conclusion": "success"}, {"conclusion": "failure"}]
    got, logs = classified([note(EXIT)], conclusion="failure", steps=steps)
    assert got == Failure(FailureClass.BENCHMARK, f"failed: {EXIT}")
    assert logs == [line(kind="benchmark", step=None)]


@pytest.mark.parametrize(
    ("conclusion", "steps", "message", "step"),
    [
        ("failure", STEPS, "failure in step 'Run benchmark' (GitHub gave no annotation)", "Run benchmark"),
        ("failure", (), "failure (GitHub gave no annotation)", None),
        (None, (), "failed (GitHub gave no annotation)", None),
        ("timed_out", (), "timed_out (GitHub gave no annotation)", None),
    ],
)
def test_no_annotation(conclusion: str | None, steps: Any, message: str, step: str | None) -> None:
    got, logs = classified([], conclusion=conclusion, steps=steps)
    assert got == Failure(FailureClass.BENCHMARK, message)
    assert logs == [line(kind="benchmark", step=step, annotations=0)]


@pytest.mark.parametrize(
    ("annotation", "read"),
    [
        (note(EXIT, "failure"), True),
        (note(EXIT, "warning"), True),
        (note(EXIT, None), True),  # no level: a failure
        (note(EXIT, "notice"), False),
        (note(EXIT, "FAILURE"), False),
        (note("", "failure"), False),
        (note(None, "failure"), False),
    ],
)
def test_which_annotations_are_read(annotation: dict[str, Any], read: bool) -> None:
    got, _ = classified([annotation], conclusion="failure")
    assert got.message == (f"failed: {EXIT}" if read else "failure (GitHub gave no annotation)")


# --------------------------------------------------------------------------- cancelled


def test_a_timeout_is_the_benchmarks_failure() -> None:
    got, logs = classified([note(EXIT), note(TIMEOUT.upper())], conclusion="cancelled")
    assert got == Failure(FailureClass.BENCHMARK, f"timed out: {TIMEOUT.upper()}")
    assert logs == [line(kind="benchmark", marker="timeout")]


def test_a_cancel_on_github_quotes_what_github_said() -> None:
    got, logs = classified([note("The operation was canceled."), note(EXIT)], conclusion="cancelled")
    assert got == Failure(
        FailureClass.CANCELLED, f"cancelled on GitHub (The operation was canceled. / {EXIT})"
    )
    assert logs == [line(kind="cancelled", annotations=2)]
    got, logs = classified([], conclusion="cancelled", steps=STEPS)
    assert got == Failure(FailureClass.CANCELLED, "cancelled on GitHub (no annotation)")
    assert logs == [line(kind="cancelled", annotations=0)]


def test_a_workflow_defect_wins_over_the_cancel() -> None:
    got, _ = classified([note(DEFECT)], conclusion="cancelled")
    assert got.kind is FailureClass.WORKFLOW_DEFECT


def test_only_cancelled_is_a_cancel() -> None:
    got, _ = classified([note("The operation was canceled.")], conclusion="CANCELLED")
    assert got == Failure(FailureClass.BENCHMARK, "failed: The operation was canceled.")


# --------------------------------------------------------------------------- quoting


def test_quote_folds_whitespace() -> None:
    assert _quote("  a\n\tb   c  ") == "a b c"


def test_quote_keeps_up_to_max_quote_characters() -> None:
    exact = "x" * MAX_QUOTE
    assert MAX_QUOTE == 300 and _quote(exact) == exact
    longer = "y" * (MAX_QUOTE + 1)
    assert _quote(longer) == "y" * (MAX_QUOTE - 1) + "…"
    assert len(_quote(longer)) == MAX_QUOTE


def test_every_message_is_quoted_short() -> None:
    long = "Process completed with exit code 1. " + "z" * 400
    for got in (
        classify_failure([note(long)], conclusion="failure"),
        classify_failure([note(LOST + " " + long)], conclusion="failure"),
        classify_failure([note(WORKSPACE + " " + long)], conclusion="failure"),
        classify_failure([note(PROVISIONING + " " + long)], conclusion="failure"),
        classify_failure([note(DEFECT + " " + long)], conclusion="failure"),
        classify_failure([note(long)], conclusion="cancelled"),
        classify_failure([note(TIMEOUT + " " + long)], conclusion="cancelled"),
    ):
        assert len(got.message) == MAX_QUOTE and got.message.endswith("…"), got
