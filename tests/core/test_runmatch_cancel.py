"""A workflow job GitHub reports ``cancelled``: the system's (retried), a timeout (failed), or a cancel
through the API or the UI (cancelled, never read as the benchmark's failure)."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.runmatch import classify_failure


def note(message: str) -> dict[str, Any]:
    return {"annotation_level": "failure", "message": message, "path": ".github"}


# (name, annotations, conclusion, (infrastructure, cancelled), words in the message)
CASES: list[tuple[str, list[dict[str, Any]], str, tuple[bool, bool], str]] = [
    (
        "a running job cancelled through the API (what GitHub and the sim annotate)",
        [note("The operation was canceled.")],
        "cancelled",
        (False, True),
        "The operation was canceled.",
    ),
    (
        "a queued job of a cancelled run: no annotation at all",
        [],
        "cancelled",
        (False, True),
        "no annotation",
    ),
    (
        "GitHub's own cancel is infrastructure (retried)",
        [note("The job was canceled by the system.")],
        "cancelled",
        (True, False),
        "canceled by the system",
    ),
    (
        "a lost runner's job may end cancelled: still infrastructure",
        [note("The self-hosted runner: mi355x-amds_02 lost communication with the server.")],
        "cancelled",
        (True, False),
        "mi355x-amds_02",
    ),
    (
        "timeout-minutes exceeded ends cancelled: the benchmark's failure, not a cancel",
        [
            note(
                "The job running on runner mi355x-amds_01 has exceeded the maximum execution time of "
                "360 minutes."
            )
        ],
        "cancelled",
        (False, False),
        "maximum execution time",
    ),
    (
        "a failure stays the benchmark's",
        [note("Process completed with exit code 1.")],
        "failure",
        (False, False),
        "exit code 1",
    ),
]


@pytest.mark.parametrize(
    ("name", "annotations", "conclusion", "kind", "words"), CASES, ids=[c[0] for c in CASES]
)
def test_cancelled_jobs_are_told_apart(
    name: str, annotations: list[dict[str, Any]], conclusion: str, kind: tuple[bool, bool], words: str
) -> None:
    got = classify_failure(annotations, conclusion=conclusion)
    assert (got.infrastructure, got.cancelled) == kind
    assert words in got.message
