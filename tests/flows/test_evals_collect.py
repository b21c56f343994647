"""Collecting a job's eval artifact beside its bmk_ artifact: both stored, or nothing and a reason."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.artifacts import eval_artifact_name
from app.models.results import EvalResult, Result
from tests.evals_helpers import eval_zip, gsm8k_results, meta_env
from tests.flows.test_results import MEMBER, RESULT_FILENAME, RUN_URL, _job, _raw, recorded

NODE = RESULT_FILENAME.rsplit("_conc32_", 1)[1]


class FakeRun:
    """list_run_artifacts / download_artifact for run 777, serving named artifacts."""

    def __init__(self, blobs: dict[str, bytes]) -> None:
        self.blobs = list(blobs.items())

    def list_run_artifacts(self, repo: str, run_id: int) -> list[dict[str, Any]]:
        return [
            {"id": i + 1, "name": n, "size_in_bytes": len(b), "expired": False}
            for i, (n, b) in enumerate(self.blobs)
        ]

    def download_artifact(self, repo: str, artifact_id: int, max_bytes: int) -> bytes:
        return self.blobs[artifact_id - 1][1]


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, body in members.items():
            zf.writestr(name, body)
    return buf.getvalue()


def _mark(session: Session, job_id: int, **marks: Any) -> dict[str, Any]:
    from app.models.sweeps import SweepJob

    job = session.get(SweepJob, job_id)
    assert job is not None
    job.point = {**job.point, **marks}
    session.flush()
    return dict(job.point)


def test_a_run_eval_job_stores_its_result_and_its_scores(db_session: Session) -> None:
    from app.flows.results.collect import collect_job

    job_id = _job(db_session)
    point = _mark(db_session, job_id, **{"run-eval": True, "eval-only": False})
    run = FakeRun(
        {
            f"bmk_{RESULT_FILENAME}": _zip({MEMBER: _raw()}),
            eval_artifact_name(point, NODE): eval_zip(gsm8k_results(0.95), meta_env(point)),
            f"server_logs_{RESULT_FILENAME}": _zip({"server.log": b"x"}),
        }
    )
    out = collect_job(db_session, run, job_id)
    assert out.state == "succeeded" and out.result_id is not None and len(out.eval_ids) == 2
    assert recorded(db_session, job_id) == ("succeeded", None, RUN_URL, "done")
    rows = db_session.scalars(select(EvalResult).where(EvalResult.job_id == job_id)).all()
    by = {r.filter: r for r in rows}
    assert by["flexible-extract"].score == 0.95 and by["flexible-extract"].n == 100
    assert by["flexible-extract"].limit == 100 and by["strict-match"].stderr == pytest.approx(
        0.0219, abs=1e-4
    )
    assert {r.meta_model for r in rows} == {"amd/MiniMax-M3-MXFP4"} and {r.meta_framework for r in rows} == {
        "vllm"
    }
    assert {r.artifact_name for r in rows} == {eval_artifact_name(point, NODE)} and rows[
        0
    ].lm_eval_version == "0.4.9.1"
    # a second delivery converges
    assert collect_job(db_session, run, job_id).state == "skipped"


@pytest.mark.parametrize(
    ("eval_blob", "reason"),
    [
        (None, "no artifact eval_minimaxm3_8k1k_"),
        (eval_zip(gsm8k_results(0.95), meta_env(conc=64)), "conc is 64 but the job's point has 32"),
        (
            eval_zip(json.loads('{"results": {"gsm8k": {"exact_match,strict-match": "x"}}}'), meta_env()),
            "expected a finite number",
        ),
    ],
)
def test_a_bad_eval_fails_the_job_and_nothing_is_half_stored(
    db_session: Session, eval_blob: bytes | None, reason: str
) -> None:
    from app.flows.results.collect import collect_job

    job_id = _job(db_session)
    point = _mark(db_session, job_id, **{"run-eval": True, "eval-only": False})
    blobs = {f"bmk_{RESULT_FILENAME}": _zip({MEMBER: _raw()})}
    if eval_blob is not None:
        blobs[eval_artifact_name(point, NODE)] = eval_blob
    out = collect_job(db_session, FakeRun(blobs), job_id)
    assert out.state == "failed" and reason in str(out.reason)
    assert recorded(db_session, job_id) == ("failed", out.reason, RUN_URL, "done")
    assert db_session.scalars(select(Result).where(Result.job_id == job_id)).first() is None
    assert db_session.scalars(select(EvalResult).where(EvalResult.job_id == job_id)).first() is None


def test_in_label_mode_a_run_without_an_eval_artifact_keeps_its_throughput_result(
    db_session: Session,
) -> None:
    """The repo's run-sweep.yml run picks its own eval points; the bot's marks are not a demand."""
    from app.flows.results.collect import collect_job
    from app.models.sweeps import Sweep, SweepJob

    job_id = _job(db_session)
    _mark(db_session, job_id, **{"run-eval": True, "eval-only": False})
    job = db_session.get(SweepJob, job_id)
    assert job is not None
    sweep = db_session.get(Sweep, job.sweep_id)
    assert sweep is not None
    sweep.filters = {**(sweep.filters or {}), "mode": "label"}
    db_session.flush()
    out = collect_job(db_session, FakeRun({f"bmk_{RESULT_FILENAME}": _zip({MEMBER: _raw()})}), job_id)
    assert out.state == "succeeded" and out.result_id is not None and out.eval_ids == []
    assert recorded(db_session, job_id) == ("succeeded", None, RUN_URL, "done")
    assert db_session.scalars(select(EvalResult).where(EvalResult.job_id == job_id)).first() is None


def test_an_eval_only_job_needs_no_bmk_artifact(db_session: Session) -> None:
    from app.flows.results.collect import collect_job

    job_id = _job(db_session)
    point = _mark(db_session, job_id, **{"run-eval": True, "eval-only": True})
    run = FakeRun({eval_artifact_name(point, NODE): eval_zip(gsm8k_results(0.80), meta_env(point))})
    out = collect_job(db_session, run, job_id)
    assert out.state == "succeeded" and out.result_id is None and len(out.eval_ids) == 2
    assert recorded(db_session, job_id) == ("succeeded", None, RUN_URL, "done")
    assert db_session.scalars(select(Result).where(Result.job_id == job_id)).first() is None


@pytest.mark.parametrize(
    ("results", "verdict", "shown"),
    [
        (gsm8k_results(0.95), "accuracy: not worse on gsm8k", "0.9500 ± 0.0219 (n=100, limit 100)"),
        (gsm8k_results(0.80), "accuracy: worse on gsm8k", "0.8000 ± 0.0402 (n=100, limit 100)"),
        (
            gsm8k_results(0.95, stderr=False),
            "accuracy: not enough data on gsm8k",
            "0.9500 (n=100, limit 100)",
        ),
    ],
)
def test_the_seed_case_end_to_end_in_the_sticky_report(
    db_session: Session, results: dict[str, Any], verdict: str, shown: str
) -> None:
    """vLLM GSM8K at limit 100 against ATOM's published 0.9363, from the artifact to the comment."""
    from app.flows.results.collect import collect_job
    from app.flows.results.reports import render_report
    from app.models.sweeps import SweepJob

    job_id = _job(db_session)
    point = _mark(db_session, job_id, **{"run-eval": True, "eval-only": False})
    run = FakeRun(
        {
            f"bmk_{RESULT_FILENAME}": _zip({MEMBER: _raw()}),
            eval_artifact_name(point, NODE): eval_zip(results, meta_env(point)),
        }
    )
    assert collect_job(db_session, run, job_id).state == "succeeded"
    job = db_session.get(SweepJob, job_id)
    assert job is not None
    body = render_report(db_session, job.sweep_id)
    assert f"**Verdict** — latency: behind at conc 32; {verdict}" in body
    assert "#### Accuracy" in body and f"| gsm8k | flexible-extract | 32 | {shown} | 0.9363 |" in body
    assert "| gsm8k | strict-match | 32 |" in body and "| 0.9371 |" in body
    assert (
        "Reference accuracy: [atom-minimaxm3-mxfp4-mi355x-tp4-8k1k](https://github.com/ROCm/ATOM/blob/d72060af"
        in body
    )
    if "± 0.0219" in shown:
        assert "wide interval: ±4.3 points at 95%" in body
    if "not enough" in verdict:
        assert "no standard error or sample count" in body


def _collected_sweep(db_session: Session, results: dict[str, Any], **marks: Any) -> int:
    """One eval point collected from its artifacts (bmk_ and eval_); the id of its sweep."""
    from app.flows.results.collect import collect_job
    from app.models.sweeps import SweepJob

    job_id = _job(db_session)
    point = _mark(db_session, job_id, **{"run-eval": True, "eval-only": False, **marks})
    run = FakeRun(
        {
            f"bmk_{RESULT_FILENAME}": _zip({MEMBER: _raw()}),
            eval_artifact_name(point, NODE): eval_zip(results, meta_env(point)),
        }
    )
    assert collect_job(db_session, run, job_id).state == "succeeded"
    job = db_session.get(SweepJob, job_id)
    assert job is not None
    return job.sweep_id


@pytest.mark.parametrize(
    ("flexible", "gate_line", "summary"),
    [
        (0.95, "threshold 0.9 (default.gsm8k): **pass**", "repo threshold: pass on gsm8k"),
        (
            0.89,
            "threshold 0.9 (default.gsm8k): **fail** — 0.8900 < 0.9 (default)",
            "repo threshold: fail on gsm8k",
        ),
    ],
)
def test_the_report_gives_both_verdicts_reference_and_repo_threshold(
    db_session: Session, flexible: float, gate_line: str, summary: str
) -> None:
    """The seed's gsm8k against ATOM's 0.9363 with its interval, and against the repo's own
    thresholds.yaml (minimaxm3 has no per-model entry: default.gsm8k 0.90)."""
    from pathlib import Path

    from app.core.thresholds import parse_thresholds
    from app.flows.results.reports import render_report
    from app.models.sweeps import Sweep

    # strict-match above the threshold: the lowest gated score (flexible-extract) decides
    sweep_id = _collected_sweep(
        db_session, gsm8k_results(flexible, strict=0.96), **{"model-prefix": "minimaxm3"}
    )
    sweep = db_session.get(Sweep, sweep_id)
    assert sweep is not None
    text = (Path(__file__).resolve().parents[1] / "fixtures/inferencex/evals/thresholds.yaml").read_text()
    sweep.eval_thresholds = parse_thresholds(text, ref="843c6254ff69").as_json()
    db_session.flush()
    body = render_report(db_session, sweep_id)
    task_line = next(line for line in body.splitlines() if line.startswith("- **gsm8k**:"))
    assert f"{flexible:.4f} ±" in task_line and "vs ATOM" in task_line and "0.9363" in task_line
    assert task_line.endswith(gate_line)
    verdict = next(line for line in body.splitlines() if line.startswith("**Verdict**"))
    assert verdict.endswith(f"; {summary}")
    assert "`utils/evals/thresholds.yaml` at `843c625`" in body and "model prefix `minimaxm3`" in body


def test_without_the_repo_thresholds_the_report_says_so(db_session: Session) -> None:
    from app.flows.results.reports import render_report
    from app.models.sweeps import Sweep

    sweep_id = _collected_sweep(db_session, gsm8k_results(0.95))
    body = render_report(db_session, sweep_id)
    assert "Repo threshold: not read for this sweep" in body and "repo threshold:" not in body
    sweep = db_session.get(Sweep, sweep_id)
    assert sweep is not None
    sweep.eval_thresholds = {"missing": "utils/evals/thresholds.yaml", "ref": "abc"}
    db_session.flush()
    body = render_report(db_session, sweep_id)
    assert "Repo threshold: the repo has no `utils/evals/thresholds.yaml`; no threshold verdict." in body
