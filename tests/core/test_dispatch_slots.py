"""Runner slots of each dispatch group (app.core.sweepspec.dispatch_slots): the jobs the command creates."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.sweepspec import dispatch_slots


def pt(isl: int, tp: int, conc: int, **marks: Any) -> dict[str, Any]:
    return {"isl": isl, "osl": 1024, "tp": tp, "conc": conc, **marks}


FULL = [pt(isl, tp, conc) for conc in (4, 16) for isl in (1024, 8192) for tp in (4, 8)]  # 4 per conc

CASES: list[tuple[str, list[dict[str, Any]], dict[str, int]]] = [
    ("no eval: every point of the conc, at every seq-len and tp", FULL, {"conc=4": 4, "conc=16": 4}),
    (
        "each point that runs an eval adds its separate eval job",
        [*FULL[:4], pt(8192, 4, 16, **{"run-eval": True}), pt(8192, 8, 16, **{"run-eval": True})],
        {"conc=4": 4, "conc=16": 6},
    ),
    (
        "points the filters left out still count; planned ones only add their evals",
        [pt(8192, 4, 4, **{"run-eval": True})],
        {"conc=4": 5, "conc=16": 4},
    ),
    (
        "an eval-only point is its eval job alone: not counted twice",
        [pt(8192, 4, 16, **{"run-eval": True, "eval-only": True})],
        {"conc=4": 4, "conc=16": 4},
    ),
]


@pytest.mark.parametrize(("name", "planned", "expected"), CASES, ids=[c[0] for c in CASES])
def test_dispatch_slots(name: str, planned: list[dict[str, Any]], expected: dict[str, int]) -> None:
    assert dispatch_slots(FULL, planned, ("conc",)) == expected
