"""The report's reuse lines: the offer a maintainer copies, never a line the repo's finder would read."""

from __future__ import annotations

import re
from dataclasses import asdict

from app.core.publication import PublicationFacts, classify_publication
from app.core.reusereport import reuse_section
from app.core.sweepreuse import ReuseFacts, decide_reuse

FINDER_LINE = re.compile(r"(?m)^\s*/reuse-sweep-run(?:\s+(\d+))?\s*$")
PATH = ".github/workflows/run-sweep.yml"
RUN = {
    "id": 77,
    "event": "pull_request",
    "path": PATH,
    "status": "completed",
    "conclusion": "success",
    "head_sha": "a" * 40,
}


def _decision(comments: list[dict[str, object]]) -> dict[str, object]:
    d = decide_reuse(
        ReuseFacts(PATH, ["full-sweep-fail-fast"], ["a" * 40], [RUN], {77: ["results_bmk"]}, comments)
    )
    return {**asdict(d), "per_run": {str(k): v for k, v in d.per_run.items()}}


def test_the_offer_names_the_line_inline_and_says_publishable() -> None:
    merge = {
        "publishable": True,
        "publishable_why": "a full-sweep-fail-fast run is reusable",
        "reuse": _decision([]),
    }
    body = "\n".join(reuse_section(merge))
    assert "Publishable at merge: **yes**" in body and "run 77: reusable" in body
    assert "`/reuse-sweep-run 77`" in body
    assert not FINDER_LINE.search(body)  # the bot's comment must never read as an authorization


def test_confirmation_and_main_outcome_with_its_recovery() -> None:
    merge = {
        "reuse": _decision(
            [{"body": "/reuse-sweep-run 77", "author_association": "MEMBER", "created_at": "1"}]
        ),
        "publication": {
            **asdict(
                classify_publication(
                    PublicationFacts(
                        "o/r",
                        5,
                        {"id": 90, "status": "completed"},
                        [{"name": "setup", "conclusion": "failure"}],
                        [],
                        77,
                        [],
                        recovery_source=77,
                        recovery_source_sha="a" * 40,
                    )
                )
            ),
            "run_url": "https://x/runs/90",
        },
    }
    body = "\n".join(reuse_section(merge))
    assert "Reuse authorized" in body and "reuses run 77" in body
    assert "runbook case B" in body and "reuse not taken" in body and "Recovery to run" in body
    assert not FINDER_LINE.search(body)


def test_nothing_kept_renders_nothing() -> None:
    assert reuse_section({}) == []
