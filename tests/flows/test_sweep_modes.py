"""Sweep modes (.github/sweepbot.yml `sweep.mode`): dispatch (the bot's queue) or label (the repo's run).

Never both: in dispatch mode the bot's commits carry `[skip-sweep]`, so run-sweep.yml (whose
conditions the simulator plays from the real file) skips the PR; in label mode the bot applies the
sweep label and follows the run the repo starts, and never dispatches or re-queues anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.bot_config import BotConfig, BotConfigError, parse_bot_config
from app.core.routing import Event, HandlerContext, HandlerSkipped, TransientError
from app.core.sweepspec import SweepFilters
from app.flows.repo.bench_repo import clear_capacity_cache
from app.flows.scheduler.repair import repair_jobs
from app.flows.scheduler.run_tracking import on_workflow_run
from app.flows.scheduler.tick import tick
from app.flows.sweeps import label_runs as labelruns
from app.flows.sweeps import ring
from app.flows.sweeps.request import request_sweep
from app.flows.sweeps.views import sweep_summary
from app.flows.tracking.bump import commit_message
from app.models.sweeps import JobState, Sweep, SweepJob
from sim.runs import changelog_keys, sweep_run_wanted
from tests.sweep_fakes import (
    FIXTURES,
    KEY,
    REPO,
    SHA1,
    FakeGitHub,
    FakeLabels,
    FakeRepair,
    FakeRequest,
    FakeRunTracking,
    FakeTick,
)


def test_config_sweep_section() -> None:
    # label mode is InferenceX's own way and the default; the repo recommends full-sweep-fail-fast
    assert (BotConfig().sweep.mode, BotConfig().sweep.label) == ("label", "full-sweep-fail-fast")
    cfg = parse_bot_config("sweep:\n  mode: dispatch\n")
    assert (cfg.sweep.mode, cfg.sweep.label, cfg.sweep.workflow) == (
        "dispatch",
        "full-sweep-fail-fast",
        "run-sweep.yml",
    )
    with pytest.raises(BotConfigError, match="minimum concurrency"):
        parse_bot_config("sweep:\n  mode: label\n  label: sweep-enabled\n")
    with pytest.raises(BotConfigError, match="sweep.mode"):
        parse_bot_config("sweep:\n  mode: both\n")


def test_dispatch_mode_commits_say_skip_sweep() -> None:
    msg = commit_message("k", "img:tag", ["new nightly"], None, skip_sweep=True)
    assert msg.splitlines()[0] == "Bump k image to img:tag [skip-sweep]"
    assert "[skip-sweep]" not in commit_message("k", "img:tag", ["x"], None)


@pytest.mark.parametrize(
    ("kw", "want"),
    [
        ({}, "run"),
        ({"head_message": "Bump k image [skip-sweep]"}, "[skip-sweep]"),
        ({"labels": []}, "no primary sweep label"),
        ({"labels": ["sweep-enabled", "full-sweep-enabled"]}, "conflicting"),
        ({"changelog_changed": False}, "unchanged"),
        ({"same_repo": False}, "fork"),
        ({"action": "labeled", "label": "bug"}, "does not trigger"),
        ({"action": "opened"}, "not a run-sweep.yml trigger"),
    ],
)
def test_run_sweep_conditions_from_the_real_workflow(kw: dict[str, Any], want: str) -> None:
    args: dict[str, Any] = {
        "action": "synchronize",
        "label": None,
        "labels": ["full-sweep-enabled"],
        "same_repo": True,
        "changelog_changed": True,
        "head_message": "Bump k image to img",
    }
    assert want in sweep_run_wanted(**(args | kw))


def test_changelog_keys_are_the_added_entries() -> None:
    base = "- config-keys: [a]\n  description: [x]\n"
    head = base + "- config-keys: [b, c]\n  description: [y]\n"
    assert changelog_keys(base, head) == ["b", "c"]


# ------------------------------------------------------------------------------------- label mode


@pytest.fixture
def label_env(db_session: Session, settings_env: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    from app.db import session_factory
    from app.models.tracking import BotConfigRecord
    from app.settings import reset_settings_cache

    settings_env.setenv("SWEEPBOT_RUNNER_CAPACITY", "mi355x=4")
    reset_settings_cache()
    clear_capacity_cache()
    enqueued: list[tuple[str, tuple[Any, ...]]] = []
    settings_env.setattr(ring, "enqueue", lambda task, *args: enqueued.append((task, args)))
    factory = session_factory()
    with factory() as s:
        cfg = parse_bot_config("sweep:\n  mode: label\n  label: full-sweep-enabled\n")
        s.add(
            BotConfigRecord(
                repo=REPO, ok=True, present=True, config=cfg.model_dump(mode="json", by_alias=True)
            )
        )
        s.commit()
    gh = FakeGitHub()
    # label mode needs the repo's label workflow (without it a sweep is dispatched)
    gh.files[".github/workflows/run-sweep.yml"] = (
        FIXTURES / "inferencex" / "workflows" / "run-sweep.yml"
    ).read_text()
    settings_env.setattr(HandlerContext, "gateway", lambda self, actor="sweepbot": FakeRunTracking(gh))
    yield {"factory": factory, "gh": gh, "enqueued": enqueued}


def _repo_run(
    gh: FakeGitHub,
    run_id: int,
    status: str,
    conclusion: str | None = None,
    *,
    created_at: str | None = None,
    bench_jobs: list[SweepJob] | None = None,
) -> dict[str, Any]:
    """A run-sweep.yml run; ``bench_jobs``: the benchmark jobs it ran (else only check-changelog)."""
    from sim.runs import job_name

    gh.run_jobs[run_id] = [{"id": run_id * 10, "name": "check-changelog", "status": "completed"}] + [
        {"id": run_id * 10 + 1 + i, "name": job_name(f"single-node {j.seq} /", j.point), "status": status}
        for i, j in enumerate(bench_jobs or [])
    ]
    run = {
        "id": run_id,
        "created_at": created_at or datetime.now(UTC).isoformat(),
        "name": "Run Sweep",
        "display_title": "Run Sweep - minimaxm3: INT4 quick reduce",
        "event": "pull_request",
        "path": ".github/workflows/run-sweep.yml",
        "head_sha": SHA1,
        "status": status,
        "conclusion": conclusion,
        "html_url": f"https://github.test/{REPO}/actions/runs/{run_id}",
    }
    gh.runs[run_id] = run
    return run


def _label_sweep(env: dict[str, Any]) -> list[SweepJob]:
    with env["factory"]() as s:
        req = request_sweep(
            s,
            FakeRequest(env["gh"]),
            repo=REPO,
            pr_number=7,
            config_key=KEY,
            requested_by="sweepbot",
            reason="bump",
        )
        s.commit()
        return list(s.scalars(select(SweepJob).where(SweepJob.sweep_id == req.sweep.id)).all())


def test_label_mode_applies_the_label_and_never_dispatches(label_env: dict[str, Any]) -> None:
    jobs = _label_sweep(label_env)
    gh: FakeGitHub = label_env["gh"]
    assert gh.labels == [(7, ["full-sweep-enabled"])]
    assert jobs and {j.state for j in jobs} == {JobState.DISPATCHED} and all(j.run_id is None for j in jobs)
    assert tick(label_env["factory"], lambda s: FakeTick(gh)).dispatched_runs == 0 and gh.dispatches == []
    with label_env["factory"]() as s:
        # a targeted sweep is what a label cannot say: it is dispatched, and says it is not reusable
        targeted = request_sweep(
            s,
            FakeRequest(gh),
            repo=REPO,
            pr_number=7,
            config_key=KEY,
            requested_by="maint",
            reason="command",
            filters=SweepFilters(conc=(64,)),
        ).sweep
        assert (targeted.filters or {})["mode"] == "dispatch" and "conc=64" in (targeted.filters or {})["way"]
        assert (targeted.filters or {})["publishable"] is False
        assert gh.labels == [(7, ["full-sweep-enabled"])]  # no label for it
        summary = sweep_summary(s, jobs[0].sweep_id)
    assert summary["jobs"]


def test_label_mode_follows_the_repos_run_and_collects(label_env: dict[str, Any]) -> None:
    jobs = _label_sweep(label_env)
    gh: FakeGitHub = label_env["gh"]
    # No run yet: the repair poll waits (never re-queues: that would be a second way to the runners).
    assert repair_jobs(label_env["factory"], lambda s: FakeRepair(gh)).requeued == 0
    # The repo's run-sweep.yml run arrives as a workflow_run delivery: adopted by its head commit.
    run = _repo_run(gh, 9001, "in_progress")
    with label_env["factory"]() as s:
        ctx: HandlerContext[Session, FakeRunTracking] = HandlerContext(
            session=s, event=Event("d1", "workflow_run", "in_progress", {"workflow_run": run})
        )
        on_workflow_run(ctx)
        s.commit()
        adopted = s.scalars(select(SweepJob).where(SweepJob.sweep_id == jobs[0].sweep_id)).all()
    assert {j.run_id for j in adopted} == {9001} and {j.state for j in adopted} == {JobState.RUNNING}
    _repo_run(gh, 9001, "completed", "success", bench_jobs=jobs)
    repair_jobs(label_env["factory"], lambda s: FakeRepair(gh))
    collected = {args[0] for task, args in label_env["enqueued"] if task == "sweepbot.collect_job"}
    assert collected == {j.id for j in jobs}


def test_label_mode_infra_failure_is_reported_not_redispatched(label_env: dict[str, Any]) -> None:
    from sim.runs import job_name

    jobs = _label_sweep(label_env)
    gh: FakeGitHub = label_env["gh"]
    _repo_run(gh, 9002, "completed", "failure")
    job = jobs[0]
    gh.run_jobs[9002] += [
        {
            "id": 77,
            "name": job_name(f"single-node {job.seq} /", job.point),
            "status": "completed",
            "conclusion": "failure",
            "runner_name": "mi355x-amds_04",
            "steps": [],
        }
    ]
    gh.annotations[77] = [
        {
            "annotation_level": "failure",
            "message": "The self-hosted runner: mi355x-amds_04 lost communication with the server.",
        }
    ]
    with label_env["factory"]() as s:
        found = labelruns.find_label_run(s, FakeLabels(gh), s.get(Sweep, job.sweep_id))
        assert found is not None and found["id"] == 9002
        s.commit()
    repair_jobs(label_env["factory"], lambda s: FakeRepair(gh))
    with label_env["factory"]() as s:
        got = s.get(SweepJob, job.id)
        assert got is not None and got.state == JobState.FAILED
        assert "label mode does not re-run it" in (got.reason or "") and "lost communication" in (
            got.reason or ""
        )
    assert gh.dispatches == []


def _command_sweep(env: dict[str, Any]) -> list[SweepJob]:
    with env["factory"]() as s:
        req = request_sweep(
            s,
            FakeRequest(env["gh"]),
            repo=REPO,
            pr_number=7,
            config_key=KEY,
            requested_by="maint",
            reason="command",
        )
        s.commit()
        return list(s.scalars(select(SweepJob).where(SweepJob.sweep_id == req.sweep.id)).all())


def _sweep_jobs(env: dict[str, Any], sweep_id: int) -> list[SweepJob]:
    with env["factory"]() as s:
        return list(s.scalars(select(SweepJob).where(SweepJob.sweep_id == sweep_id)).all())


def _deliver_run(env: dict[str, Any], run: dict[str, Any]) -> None:
    with env["factory"]() as s:
        ctx: HandlerContext[Session, FakeRunTracking] = HandlerContext(
            session=s, event=Event("d", "workflow_run", "completed", {"workflow_run": run})
        )
        on_workflow_run(ctx)
        s.commit()


def test_label_mode_follows_the_run_the_label_started_not_a_push_run(label_env: dict[str, Any]) -> None:
    """Issue 12a: a push to the unlabelled PR started a run-sweep.yml run (check-changelog only);
    the bot's label starts the run that benchmarks. Only that one is followed."""
    gh: FakeGitHub = label_env["gh"]
    before = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
    push_run = _repo_run(gh, 8000, "completed", "success", created_at=before)
    jobs = _command_sweep(label_env)
    sweep_id = jobs[0].sweep_id
    assert gh.labels == [(7, ["full-sweep-enabled"])] and gh.removed == []
    # The push's run is older than the label: neither the poll nor its delivery adopts it.
    assert repair_jobs(label_env["factory"], lambda s: FakeRepair(gh)).updated == 0
    with pytest.raises(HandlerSkipped):
        _deliver_run(label_env, push_run)
    assert {j.run_id for j in _sweep_jobs(label_env, sweep_id)} == {None}
    # A run created with the label that ran no benchmark job (e.g. the `unlabeled` one of a
    # re-label) is let go of and never followed again.
    _deliver_run(label_env, _repo_run(gh, 8001, "completed", "success"))
    waiting = _sweep_jobs(label_env, sweep_id)
    assert {j.run_id for j in waiting} == {None} and {j.state for j in waiting} == {JobState.DISPATCHED}
    assert all("run 8001 ran no benchmark job" in (j.reason or "") for j in waiting)
    assert label_env["enqueued"] == []
    assert repair_jobs(label_env["factory"], lambda s: FakeRepair(gh)).updated == 0
    # The label's own run benchmarks the points: followed, and every job collected.
    _repo_run(gh, 8002, "completed", "success", bench_jobs=jobs)
    assert repair_jobs(label_env["factory"], lambda s: FakeRepair(gh)).updated == 1
    assert {j.run_id for j in _sweep_jobs(label_env, sweep_id)} == {8002}
    collected = {args[0] for task, args in label_env["enqueued"] if task == "sweepbot.collect_job"}
    assert collected == {j.id for j in jobs}


def test_sweep_on_a_labelled_pr_takes_the_label_off_and_puts_it_back(label_env: dict[str, Any]) -> None:
    """Issue 12b: adding a label the PR has starts nothing (GitHub sends no event), so `/sweep`
    on a labelled PR re-applies it, once per sweep; a replay does not again."""
    gh: FakeGitHub = label_env["gh"]
    gh.pr_labels = {"full-sweep-enabled"}
    jobs = _command_sweep(label_env)
    assert gh.removed == [(7, "full-sweep-enabled")] and gh.labels == [(7, ["full-sweep-enabled"])]
    assert gh.pr_labels == {"full-sweep-enabled"}
    again = _command_sweep(label_env)  # the same command delivered twice
    assert [j.id for j in again] == [j.id for j in jobs]
    assert gh.removed == [(7, "full-sweep-enabled")] and gh.labels == [(7, ["full-sweep-enabled"])]


def test_a_crash_between_taking_the_label_off_and_back_on_is_healed_by_the_replay(
    label_env: dict[str, Any],
) -> None:
    gh: FakeGitHub = label_env["gh"]
    gh.pr_labels = {"full-sweep-enabled"}
    gh.fail_add = 1
    with pytest.raises(TransientError):
        _command_sweep(label_env)
    assert gh.pr_labels == set()  # the label came off; the sweep was rolled back with the error
    _command_sweep(label_env)  # the retry of the delivery
    assert gh.pr_labels == {"full-sweep-enabled"}
    assert gh.removed == [(7, "full-sweep-enabled")] and gh.labels == [(7, ["full-sweep-enabled"])]


def test_a_bump_on_a_labelled_pr_leaves_the_label_alone(label_env: dict[str, Any]) -> None:
    """The bump's push (synchronize) starts the run of a labelled PR: no re-label, any run counts."""
    gh: FakeGitHub = label_env["gh"]
    gh.pr_labels = {"full-sweep-enabled"}
    jobs = _label_sweep(label_env)
    assert gh.removed == [] and gh.labels == []
    _repo_run(gh, 8100, "in_progress", created_at=(datetime.now(UTC) - timedelta(minutes=5)).isoformat())
    assert repair_jobs(label_env["factory"], lambda s: FakeRepair(gh)).updated == 1
    assert {j.run_id for j in _sweep_jobs(label_env, jobs[0].sweep_id)} == {8100}


# ------------------------------------------------------------------------------ the sim's run-sweep.yml


def _seeded() -> Any:
    from sim.scenario import SeedScenario
    from sim.world import SimSettings, World

    world = World(SimSettings(time_scale=0.0))
    facts = SeedScenario(world).load()["facts"]
    return world, facts


def _touch_changelog(world: Any, facts: dict[str, Any], message: str) -> None:
    repo, branch = facts["bench_repo"], facts["recipe_branch"]
    text = (world.read_file(repo, "perf-changelog.yaml", branch) or b"").decode()
    entry = f"- config-keys:\n    - {facts['config_key']}\n  description:\n    - bump\n  pr-link: XXX\n"
    world.commit_files(repo, branch, {"perf-changelog.yaml": text + entry}, message, author="sweepbot[bot]")


def test_sim_run_sweep_runs_once_for_a_labelled_changelog_pr_and_honours_skip_sweep() -> None:
    world, facts = _seeded()
    repo, pr = facts["bench_repo"], facts["recipe_pr"]
    world.add_labels(repo, pr, ["full-sweep-enabled"], "alice-admin")
    assert not [r for r in world.runs.values() if r.event == "pull_request"]  # changelog untouched yet
    _touch_changelog(world, facts, "Bump it [skip-sweep]")
    assert world.sweep_decisions[-1]["decision"] == "head commit says [skip-sweep]"
    assert not [r for r in world.runs.values() if r.event == "pull_request"]
    _touch_changelog(world, facts, "Bump it")
    runs = [r for r in world.runs.values() if r.event == "pull_request"]
    assert len(runs) == 1 and runs[0].name.startswith("Run Sweep - ")
    names = [world.jobs[j].name for j in runs[0].jobs if world.jobs[j].point]
    # full-sweep-enabled: canary-select runs the lowest-conc single-node throughput row first ...
    assert names == ["canary / p50 | minimaxm3 fp4 mi355x vllm TP4    c1"]
    canary = next(world.jobs[j] for j in runs[0].jobs if world.jobs[j].point)
    world._finish_job(canary, "success")
    world._maybe_finish_run(runs[0])
    # ... then the remaining space: the 9 other throughput points under `single-node 8k1k /`, then
    # the default selection's evals (the highest and the median conc of 16..512) as eval-only jobs
    # under `eval /`
    names = [world.jobs[j].name for j in runs[0].jobs if world.jobs[j].point][1:]
    assert len(names) == 11 and all(n.startswith("single-node 8k1k / p") for n in names[:9])
    assert [n.split(" c", 1)[1] for n in names[9:]] == ["128 | eval-only", "512 | eval-only"]
    assert all(n.startswith("eval / p") for n in names[9:])


def test_sim_a_failed_canary_runs_nothing_else() -> None:
    world, facts = _seeded()
    world.add_labels(facts["bench_repo"], facts["recipe_pr"], ["full-sweep-fail-fast"], "alice-admin")
    _touch_changelog(world, facts, "Bump it")
    run = next(r for r in world.runs.values() if r.event == "pull_request")
    canary = next(world.jobs[j] for j in run.jobs if world.jobs[j].point)
    world._finish_job(canary, "failure")
    world._maybe_finish_run(run)
    assert run.conclusion == "failure" and [world.jobs[j].name for j in run.jobs if world.jobs[j].point] == [
        canary.name
    ]


def test_sim_dispatch_answers_422_like_github() -> None:
    from sim.world import SimError

    world, facts = _seeded()
    repo = facts["bench_repo"]
    with pytest.raises(SimError) as no_trigger:
        world.dispatch(repo, "run-sweep.yml", "main", {}, "carol-writer")
    assert (no_trigger.value.status, no_trigger.value.message) == (
        422,
        "Workflow does not have 'workflow_dispatch' trigger",
    )
    with pytest.raises(SimError) as unknown:
        world.dispatch(repo, "e2e-tests.yml", "main", {"test-name": "x", "tp": "4"}, "carol-writer")
    assert (unknown.value.status, unknown.value.message) == (422, 'Unexpected inputs provided: ["tp"]')
    world.commit_files(
        repo,
        "main",
        {
            ".github/workflows/needs.yml": "name: Needs\non:\n  workflow_dispatch:\n"
            "    inputs:\n      key:\n        required: true\n"
        },
        "a workflow with a required input",
        author="alice-admin",
    )
    world.add_workflow(repo, ".github/workflows/needs.yml", "Needs")
    with pytest.raises(SimError) as missing:
        world.dispatch(repo, "needs.yml", "main", {}, "carol-writer")
    assert (missing.value.status, missing.value.message) == (422, "Required input 'key' not provided")
    ok = world.dispatch(repo, "needs.yml", "main", {"key": "k"}, "carol-writer")
    assert ok.name == "Needs"  # no run-name: the workflow's name is the title


@pytest.mark.parametrize(
    ("workflow", "inputs", "why"),
    [
        ("run-sweep.yml", None, "has no workflow_dispatch trigger"),
        (
            "e2e-tests.yml",
            '{"generate-cli-command": "test-config --config-files {config_file} --config-keys {key} '
            '--conc {conc}", "tp": "{tp}"}',
            "input(s) tp not declared",
        ),
        ("missing.yml", None, "has no .github/workflows/missing.yml"),
    ],
    ids=["no-workflow_dispatch", "unknown-input", "no-such-workflow"],
)
def test_a_dispatch_the_workflow_would_refuse_fails_before_any_runner_time(
    db_session: Session, settings_env: pytest.MonkeyPatch, workflow: str, inputs: str | None, why: str
) -> None:
    from app.db import session_factory
    from app.settings import reset_settings_cache
    from tests.conftest import FIXTURES

    settings_env.setenv("SWEEPBOT_RUNNER_CAPACITY", "mi355x=4")
    settings_env.setenv("SWEEPBOT_DISPATCH_WORKFLOW", workflow)
    if inputs is not None:
        settings_env.setenv("SWEEPBOT_DISPATCH_INPUTS", inputs)
    reset_settings_cache()
    clear_capacity_cache()
    settings_env.setattr(ring, "enqueue", lambda task, *args: None)
    factory = session_factory()
    gh = FakeGitHub()
    gh.files[".github/workflows/run-sweep.yml"] = (
        FIXTURES / "inferencex/workflows/run-sweep.yml"
    ).read_text()
    with factory() as s:
        req = request_sweep(
            s,
            FakeRequest(gh),
            repo=REPO,
            pr_number=7,
            config_key=KEY,
            requested_by="maint",
            reason="command",
            filters=SweepFilters(seq="8k1k", conc=(64,)),
        )
        s.commit()
    failed = sum(tick(factory, lambda s: FakeTick(gh)).failed for _ in range(4))  # one group per claim
    assert gh.dispatches == [] and failed >= 1
    with factory() as s:
        jobs = s.scalars(select(SweepJob).where(SweepJob.sweep_id == req.sweep.id)).all()
        assert {j.state for j in jobs} == {JobState.FAILED}
        assert all(why in (j.reason or "") and "cannot dispatch" in (j.reason or "") for j in jobs)


def test_eval_modifiers_go_on_while_the_primary_label_is_off(label_env: dict[str, Any]) -> None:
    """`/sweep evals=only` on a labelled PR: the primary label comes off, `evals-only` goes on,
    then the primary label again: only that last `labeled` event has a primary label to sweep."""
    gh: FakeGitHub = label_env["gh"]
    gh.pr_labels = {"full-sweep-enabled", "all-evals"}
    with label_env["factory"]() as s:
        sweep = request_sweep(
            s,
            FakeRequest(gh),
            repo=REPO,
            pr_number=7,
            config_key=KEY,
            requested_by="maint",
            reason="command",
            filters=SweepFilters(evals="only"),
        ).sweep
        s.commit()
        assert (sweep.filters or {})["mode"] == "label" and (sweep.filters or {})["publishable"] is False
        assert "evals-only" in (sweep.filters or {})["publishable_why"]
    assert gh.removed == [(7, "full-sweep-enabled"), (7, "all-evals")]
    assert gh.labels == [(7, ["evals-only"]), (7, ["full-sweep-enabled"])]
    assert gh.pr_labels == {"full-sweep-enabled", "evals-only"}
