"""Fields of a job name that tell two points apart, and the annotation levels a failure reads
(app.core.runmatch). Every real fixture has pp = 1 and failure-level annotations only, so these
rows make the otherwise-unseen fields decide (issue 30's surviving mutants)."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.runmatch import classify_failure, job_matches_point, parse_job_name

POINT: dict[str, Any] = {
    "model-prefix": "minimaxm3",
    "precision": "fp4",
    "runner": "mi355x",
    "framework": "vllm",
    "tp": 4,
    "pp": 1,
    "ep": 1,
    "dp-attn": False,
    "spec-decoding": "none",
    "conc": 64,
}


@pytest.mark.parametrize(
    ("name", "point", "matches"),
    [
        ("p0 | minimaxm3 fp4 mi355x vllm TP4 c64", POINT, True),
        ("p0 | minimaxm3 fp4 mi355x vllm TP4/PP2 c64", POINT, False),
        ("p0 | minimaxm3 fp4 mi355x vllm TP4/PP2 c64", {**POINT, "pp": 2}, True),
        ("p0 | minimaxm3 fp4 mi355x vllm TP4 c64", {**POINT, "pp": 2}, False),
        ("p0 | minimaxm3 fp4 mi355x vllm TP4/DCP2 c64", POINT, False),
        ("p0 | minimaxm3 fp4 mi355x vllm TP4/DCP2 c64", {**POINT, "dcp-size": 2}, True),
        ("p0 | minimaxm3 fp4 mi355x vllm TP4/PCP2 c64", POINT, False),
        ("p0 | minimaxm3 fp4 mi355x vllm TP4/PCP2 c64", {**POINT, "pcp-size": 2}, True),
        ("p0 | minimaxm3 fp4 mi355x vllm TP4/EP4 c64", POINT, False),
        ("p0 | minimaxm3 fp4 mi355x vllm TP4/EP4 c64", {**POINT, "ep": 4}, True),
        ("p0 | minimaxm3 fp4 mi355x vllm TP4/DPA c64", POINT, False),
        ("p0 | minimaxm3 fp4 mi355x vllm TP4/DPA c64", {**POINT, "dp-attn": True}, True),
    ],
)
def test_each_parallelism_field_of_the_name_must_equal_the_points(
    name: str, point: dict[str, Any], matches: bool
) -> None:
    job = parse_job_name(name)
    assert job is not None
    assert job_matches_point(job, point) is matches


LOST = "The self-hosted runner: mi355x-amds_01 lost communication with the server."


@pytest.mark.parametrize(
    ("level", "infrastructure"),
    [("failure", True), ("warning", True), (None, True), ("notice", False)],
)
def test_a_runner_loss_counts_at_failure_and_warning_level_not_as_a_notice(
    level: str | None, infrastructure: bool
) -> None:
    annotation: dict[str, Any] = {"message": LOST}
    if level is not None:
        annotation["annotation_level"] = level
    failure = classify_failure([annotation], conclusion="failure")
    assert failure.infrastructure is infrastructure
