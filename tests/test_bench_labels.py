"""bench/scheduler.py (the priority controller on the label contract) on a small workload: the
three strategies run, the figures are computed, and the rules the bench exists to show hold."""

from __future__ import annotations

from typing import Any

from bench.labelsim import Config, World, workload
from bench.scheduler import figures, jain, lower_bound, percentile


def test_small_run_of_the_three_strategies() -> None:
    cfg = Config(prs=6, jobs=120, multi_prs=1, mean_gap_s=600.0, seed=3)
    fifo = figures("fifo", cfg, None)
    sweep = figures("sweepbot", cfg, fifo.p95_high_first_wait_min * 60)
    assert fifo.calls_per_job == 0.0, "no controller, no calls"
    assert 0 < sweep.calls_per_job <= 4
    assert sweep.calls["add-labels"] > 0 and sweep.calls["remove-label"] > 0
    assert sweep.ratio >= 1.0 and fifo.ratio >= 1.0, "nothing beats the lower bound"
    assert sweep.p95_high_first_wait_min <= fifo.p95_high_first_wait_min


def test_every_job_runs_on_a_runner_carrying_its_labels() -> None:
    cfg = Config(prs=4, jobs=60, multi_prs=1, mean_gap_s=600.0, seed=5)
    w = World(cfg, "sweepbot")
    started: list[tuple[list[str], list[str]]] = []
    real = w.start

    def spy(job: Any, runner: Any) -> None:
        started.append((list(job.labels), runner.labels()))
        real(job, runner)

    w.start = spy  # type: ignore[method-assign]
    w.run(workload(cfg))
    assert started and all({x.lower() for x in j} <= {x.lower() for x in r} for j, r in started)
    assert all(any(x.startswith("ci-job-") for x in j) for j, _ in started), "the contract is on"
    fair, hours = jain(w)
    assert lower_bound(w, []) > 0
    assert (fair is None) == (hours == 0), "no contended hour, no index (not a made-up 1.0)"
    assert fair is None or 0 < fair <= 1.0
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0


def test_the_bounds_hold_and_the_idle_causes_add_up() -> None:
    from bench.labelbounds import wait_bound
    from bench.labelfair import fairest, jain_bound

    # 14 PRs with single-node work only, one with pool work too: it takes the pool, they share 9
    assert fairest(9.0, 5.0, 14, 0, 1) == [9.0 / 14] * 14 + [5.0]
    assert fairest(9.0, 0.0, 3, 0, 0) == [3.0, 3.0, 3.0]
    assert fairest(9.0, 5.0, 2, 0, 1) == [4.5, 4.5, 5.0]
    cfg = Config(prs=8, jobs=240, multi_prs=1, mean_gap_s=300.0, seed=3)
    for strategy in ("fifo", "sweepbot"):
        w = World(cfg, strategy)
        w.run(workload(cfg))
        waits = [j.start - j.created for j in w.jobs.values() if j.start is not None]
        assert 0 < wait_bound(w) <= max(waits), "no schedule waits less than the bound: this one neither"
        fair, hours = jain(w)
        best = jain_bound(w)
        assert fair is None or (best is not None and fair <= best + 1e-9)
        assert abs(sum(w.idle_by_cause.values()) - w.idle_wait) < 1e-6, "every idle second has one cause"
