"""A dispatch holds the runners of every job its run really has, and only its own jobs are ours.

e2e-tests.yml runs `generate_sweep_configs.py test-config ... --conc C`, which selects by key and
conc only and marks its evals on the rows it generated: a dispatch at conc C runs every point of
the key at C (the seq-lens and tps a sweep's filters left out too) and, unless it says
`--no-evals`, an eval job for every row the selection picks in that slice, where C is the highest
conc (so every 8k1k TP group at C, not only the TPs whose own highest or median conc is C). The
sim runs the file that way (``sim.runs.e2e_jobs``); it is the oracle here.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import select

from app.core.artifacts import result_stem
from app.core.routing import HandlerContext
from app.core.sweepspec import SweepFilters
from app.flows.scheduler.tick import tick
from app.flows.sweeps.request import request_sweep
from app.models.dispatchruns import DispatchRun
from app.models.sweeps import JobState
from sim.getjobs import assign_evals, matrix_failures
from sim.runs import e2e_jobs
from tests.flows.test_scheduler import _jobs, _request, deliver, env
from tests.recipe_helpers import fixture_text
from tests.sweep_fakes import REPO, FakeGitHub, FakeRequest, FakeRunTracking, FakeTick
from tests.test_bot_vs_sim import same_point

__all__ = ["env"]


class _Files:
    """The bench repo's files as the sim's get-jobs reads them (``World.read_file``)."""

    def __init__(self, gh: FakeGitHub) -> None:
        self.gh = gh

    def read_file(self, repo: str, path: str, sha: str) -> bytes | None:
        text = self.gh.files.get(path)
        return None if text is None else text.encode()


WORKFLOW = ".github/workflows/e2e-tests.yml"


def _run_jobs(gh: FakeGitHub, dispatch: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The jobs e2e-tests.yml runs for one of the bot's dispatches (none of a matrix job GitHub
    cannot expand: at 843c6254 `eval /`, sim.getjobs)."""
    run = SimpleNamespace(repo=REPO, head_sha=gh.head_sha, inputs=dispatch["inputs"])
    unexpanded = {f.caller for f in matrix_failures(gh.files[WORKFLOW], WORKFLOW)}
    return e2e_jobs(_Files(gh), run, unexpanded)  # type: ignore[arg-type]  # only read_file, inputs


PICKS = "issue 28: the bot counts its own eval picks; the generator marks others (tests/test_bot_vs_sim.py)"


@pytest.mark.parametrize(
    "fixed",
    [False, True],
    ids=["e2e-tests.yml at 843c6254", "EVALS assigned"],
)
@pytest.mark.parametrize(
    "filters",
    [SweepFilters(), SweepFilters(tp=4), SweepFilters(seq="8k1k", conc=(16, 32, 128))],
    ids=["whole-key", "tp=4", "8k1k-some-concs"],
)
def test_a_dispatch_counts_every_job_its_run_has(
    env: dict[str, Any], filters: SweepFilters, fixed: bool
) -> None:
    """At 843c6254 GitHub never creates the `eval /` jobs (get-jobs never assigns EVALS): they hold
    no runner; with a workflow that assigns it, every eval job does."""
    from app.settings import reset_settings_cache

    env["mp"].setenv("SWEEPBOT_RUNNER_CAPACITY", "mi355x=1000")
    reset_settings_cache()
    gh = FakeGitHub()
    if fixed:
        gh.files[WORKFLOW] = assign_evals(gh.files[WORKFLOW])
    req = _request(env["factory"], gh, filters=filters)
    tick(env["factory"], lambda s: FakeTick(gh))
    assert gh.dispatches
    with env["factory"]() as s:
        held = {r.run_id: r.slots for r in s.scalars(select(DispatchRun))}
    real = {d["run_id"]: len(_run_jobs(gh, d)) for d in gh.dispatches}
    assert held == real
    slots = {j.run_id: j.slots for j in _jobs(env["factory"], req.sweep.id) if j.run_id}
    assert slots == real


_ids = iter(range(70_000, 80_000))


def _rn(row: dict[str, Any]) -> str:
    """The bot's `result-name` of a single-node generator row: its RESULT_FILENAME stem and label."""
    return f"{result_stem(row)}_{row['runner']}"


def _wf_jobs(gh: FakeGitHub, dispatch: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's jobs as GitHub lists them (matrix order), each with its row, all queued."""
    out = []
    for name, row in _run_jobs(gh, dispatch):
        out.append(
            {
                "id": next(_ids),
                "run_id": dispatch["run_id"],
                "name": name,
                "status": "queued",
                "conclusion": None,
                "steps": [],
                "runner_name": "mi355x-amds_02",
                "html_url": "https://github.test/job",
                "row": row,
            }
        )
    return out


def _finished(gh: FakeGitHub, wf: dict[str, Any], conclusion: str) -> dict[str, Any]:
    if conclusion == "failure":
        gh.annotations[wf["id"]] = [
            {
                "annotation_level": "failure",
                "message": "Process completed with exit code 1.",
                "path": ".github",
            }
        ]
    steps = [{"name": "Launch job script", "conclusion": conclusion}]
    return {**wf, "status": "completed", "conclusion": conclusion, "steps": steps}


def test_the_points_a_sweep_filtered_out_are_not_taken_for_its_own(env: dict[str, Any]) -> None:
    """An 8k1k sweep's run at conc 1 also runs the key's 1k1k points, first in matrix order and
    under the same names: their outcomes are not our points' (by webhook or by the completed run)."""
    gh = FakeGitHub()
    env["mp"].setattr(HandlerContext, "gateway", lambda self, actor="sweepbot": FakeRunTracking(gh))
    req = _request(env["factory"], gh, filters=SweepFilters(seq="8k1k", conc=(1,)))
    tick(env["factory"], lambda s: FakeTick(gh))
    (dispatch,) = gh.dispatches
    run_id = dispatch["run_id"]
    listed = _wf_jobs(gh, dispatch)
    gh.run_jobs[run_id] = listed
    jobs = {j.result_name: j for j in _jobs(env["factory"], req.sweep.id)}
    extras = [w for w in listed if _rn(w["row"]) not in jobs]
    own = {_rn(w["row"]): w for w in listed if _rn(w["row"]) in jobs}
    assert len(extras) == 3 and len(own) == 3 and all(w["row"]["isl"] == 1024 for w in extras)
    assert listed.index(extras[0]) < min(listed.index(w) for w in own.values())  # 1k1k first
    # the filtered-out 1k1k twin of a point fails first: not ours
    first, second, third = sorted(jobs.values(), key=lambda j: j.id)
    twin = next(w for w in extras if w["name"] == own[first.result_name]["name"])
    deliver(
        env["factory"],
        "workflow_job",
        {"action": "completed", "workflow_job": _finished(gh, twin, "failure")},
    )
    after = {j.id: j for j in _jobs(env["factory"], req.sweep.id)}
    assert after[first.id].state == JobState.DISPATCHED and after[first.id].run_conclusion is None
    # its own job succeeds: that is ours
    mine = _finished(gh, own[first.result_name], "success")
    deliver(env["factory"], "workflow_job", {"action": "completed", "workflow_job": mine})
    after = {j.id: j for j in _jobs(env["factory"], req.sweep.id)}
    assert (after[first.id].state, after[first.id].run_conclusion) == (JobState.RUNNING, "success")
    # the run completes, its other events lost: the 1k1k twins failed, our 8k1k points succeeded
    gh.run_jobs[run_id] = [_finished(gh, w, "failure" if w in extras else "success") for w in listed]
    gh.runs[run_id].update(status="completed", conclusion="failure")
    deliver(env["factory"], "workflow_run", {"action": "completed", "workflow_run": dict(gh.runs[run_id])})
    after = {j.id: j for j in _jobs(env["factory"], req.sweep.id)}
    for job in (second, third):
        assert (after[job.id].state, after[job.id].run_conclusion) == (JobState.RUNNING, "success"), job.id


DRAM_KEY = "dsv4-fp4-mi355x-sglang-agentic-mtp"  # amd-master at 843c6254: a `kv-offloading: dram` item


def test_a_dram_offload_point_is_planned_with_the_budget_its_run_gets(env: dict[str, Any]) -> None:
    """The generator sizes a DRAM-offload row's `total-cpu-dram-gb` from runners.yaml's `hardware:`
    (expected-plans: 2399 GB for dsv4's tp8 hicache row on cluster:mi355x-amds at conc 16): the
    sweep's point is that row, so its run's job (the sim's get-jobs reads the same runners.yaml) is
    the point's own."""
    gh = FakeGitHub()
    gh.files = {
        "configs/amd-master.yaml": fixture_text("amd-master.head.yaml"),
        "configs/runners.yaml": fixture_text("runners.yaml"),
        WORKFLOW: gh.files[WORKFLOW],
    }
    with env["factory"]() as s:
        req = request_sweep(
            s,
            FakeRequest(gh),
            repo=REPO,
            pr_number=7,
            config_key=DRAM_KEY,
            requested_by="maint",
            reason="command",
            filters=SweepFilters(evals="none", conc=(16,)),
        )
        s.commit()
    expected = json.loads(fixture_text("expected-plans/amd-master.no-evals.json"))[DRAM_KEY]
    want = {r["exp-name"]: r["total-cpu-dram-gb"] for r in expected if r["conc"] == 16}
    jobs = _jobs(env["factory"], req.sweep.id)
    got = {j.point["exp-name"]: j.point["total-cpu-dram-gb"] for j in jobs}
    assert got == want and sorted(want.values()) == [0, 2399]
    # the dispatch's run: each job's row is a planned point, field for field
    tick(env["factory"], lambda s: FakeTick(gh))
    (dispatch,) = gh.dispatches
    rows = [row for _, row in _run_jobs(gh, dispatch)]
    assert sorted(str(r["exp-name"]) for r in rows) == sorted(want)
    for row in rows:
        point = next(j.point for j in jobs if j.point["exp-name"] == row["exp-name"])
        assert same_point(row, point), row["exp-name"]
