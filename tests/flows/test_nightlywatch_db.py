"""The nightly watch's series on SQLite: measured nightlies in order, one recipe per series, the budget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from app.core.recipes import expand_points, parse_master
from app.flows.nightly.watch import _canaries, _series
from app.flows.scheduler.canary_budget import canary_budget, week_start
from app.flows.sweeps.create import create_sweep
from app.models.nightly import CanaryState, NightlyCanary
from app.models.results import Result
from app.models.sweeps import CANARY_PRIORITY, CANARY_REASON, JobState, SweepJob
from tests.sweep_fakes import KEY, REPO, FakeCancel, FakeGitHub, bench_files

T0 = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday


def _measured(s: Session, gh: FakeGitHub, i: int, fingerprint: str, tpot: float) -> None:
    tag = f"nightly-{i:040x}"
    image = f"vllm/vllm-openai-rocm:{tag}"
    master = parse_master(bench_files()[".github/configs/amd-master.yaml"])
    points = [p.to_json() for p in expand_points(master, KEY, seq="8k1k", conc=[64], tp=4)]
    sweep, _, _ = create_sweep(
        s, FakeCancel(gh), repo=REPO, pr_number=0, head_sha="c" * 40, head_ref=f"b{i}", base_ref="main",
        head_repo=REPO, is_fork=False, config_key=KEY, config_path=None, image=image,
        fingerprint=fingerprint, points=points, requested_by="sweepbot", reason=CANARY_REASON,
        priority=CANARY_PRIORITY, supersede=False,
    )  # fmt: skip
    job = s.query(SweepJob).filter_by(sweep_id=sweep.id).one()
    job.state, job.dispatched_at, job.finished_at = JobState.SUCCEEDED, T0, T0 + timedelta(minutes=30)
    s.add(
        Result(
            result_name=job.result_name, config_key=KEY, image=image, fingerprint=fingerprint, conc=64,
            tp=4, pp=1, ep=1, schema="raw", mean_tpot_ms=tpot, mean_ttft_ms=800.0, tput_per_gpu=5000.0,
        )
    )  # fmt: skip
    s.add(
        NightlyCanary(
            repo=REPO, config_key=KEY, image_repo="vllm/vllm-openai-rocm", tag=tag, image=image,
            pushed_at=T0 + timedelta(days=i), tag_seq=i, purpose="new", state=CanaryState.MEASURED,
            sweep_id=sweep.id, preempted_hours=0.0, measured_at=T0 + timedelta(days=i),
        )
    )  # fmt: skip
    s.flush()


def test_series_follow_nightly_order_and_restart_when_the_recipe_changes(db_session: Session) -> None:
    gh = FakeGitHub()
    for i in range(4):
        _measured(db_session, gh, i, "old-recipe", 25.0 + i)
    rows = _canaries(db_session, REPO, KEY)
    series = _series(db_session, rows)
    tpot = next(v for (name, metric), v in series.items() if metric == "mean_tpot_ms")
    assert [v for _, v in tpot] == [25.0, 26.0, 27.0, 28.0]
    for i in range(4, 6):
        _measured(db_session, gh, i, "new-recipe", 30.0 + i)
    series = _series(db_session, _canaries(db_session, REPO, KEY))
    tpot = next(v for (name, metric), v in series.items() if metric == "mean_tpot_ms")
    assert [v for _, v in tpot] == [34.0, 35.0]  # only the newest recipe's nightlies


def test_the_budget_counts_this_weeks_canary_runner_hours(db_session: Session) -> None:
    gh = FakeGitHub()
    for i in range(3):
        _measured(db_session, gh, i, "r", 25.0)
    got = canary_budget(db_session, REPO, now=T0 + timedelta(days=1))
    assert got.week_start == week_start(T0) == T0
    assert got.jobs == 3 and abs(got.used_hours - 1.5) < 1e-9 and abs(got.expected_job_hours - 0.5) < 1e-9
    assert got.budget_hours == 20.0  # the default without a config
    later = canary_budget(db_session, REPO, now=T0 + timedelta(days=8))  # the next week
    assert later.used_hours == 0 and later.jobs == 0
