"""The repo's accuracy gate is read from the benchmark repo when a sweep is planned, at the checkout
its eval jobs run `validate_scores.py` in, and stored on the sweep for the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

from app.core.routing import TransientError
from app.core.thresholds import THRESHOLDS_PATH
from app.flows.repo.bench_repo import clear_capacity_cache, eval_thresholds_at
from app.flows.sweeps.request import request_sweep
from tests.sweep_fakes import KEY, REPO, FakeGitHub, FakeRequest

REAL = (Path(__file__).resolve().parents[1] / "fixtures/inferencex/evals/thresholds.yaml").read_text()


class Reader:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str | None]] = []

    def get_file(self, repo: str, path: str, ref: str | None = None) -> tuple[str, str] | None:
        self.asked.append((path, ref))
        if isinstance(self.answer, Exception):
            raise self.answer
        return None if self.answer is None else (self.answer, "blob")


def test_the_file_at_the_ref_is_parsed_and_kept_with_where_it_came_from() -> None:
    reader = Reader(REAL)
    got = eval_thresholds_at(reader, REPO, "a" * 40)
    assert reader.asked == [(THRESHOLDS_PATH, "a" * 40)]
    assert got is not None and got["ref"] == "a" * 40 and got["path"] == THRESHOLDS_PATH
    assert got["default"]["gsm8k"] == 0.9 and got["models"]["glm5.1"] == {"gsm8k": 0.93}


@pytest.mark.parametrize(
    ("answer", "want"),
    [
        (None, {"missing": THRESHOLDS_PATH, "ref": "r"}),
        ("default: {gsm8k: high}\n", "error"),
        (RuntimeError("boom"), None),
    ],
)
def test_absent_invalid_or_unreadable(answer: Any, want: Any) -> None:
    got = eval_thresholds_at(Reader(answer), REPO, "r")
    if want == "error":
        assert got is not None and "a threshold is a number" in got["error"]
    else:
        assert got == want


def test_a_transient_error_is_retried_not_swallowed() -> None:
    with pytest.raises(TransientError):
        eval_thresholds_at(Reader(TransientError("rate limited")), REPO, "r")


def test_a_planned_sweep_stores_the_gate_read_at_the_prs_head(
    db_session: Session, settings_env: pytest.MonkeyPatch
) -> None:
    from app.settings import reset_settings_cache

    settings_env.setenv("SWEEPBOT_RUNNER_CAPACITY", "mi355x=4")
    reset_settings_cache()
    clear_capacity_cache()
    gh = FakeGitHub()
    gh.files[THRESHOLDS_PATH] = REAL
    req = request_sweep(
        db_session,
        FakeRequest(gh),
        repo=REPO,
        pr_number=7,
        config_key=KEY,
        requested_by="m",
        reason="command",
    )
    stored = req.sweep.eval_thresholds
    assert stored is not None and stored["ref"] == req.sweep.head_sha and stored["default"]["gsm8k"] == 0.9
