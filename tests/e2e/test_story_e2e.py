"""The whole story end to end on PostgreSQL + Redis, with separate API, worker and beat processes.

The simulated GitHub plays the seed scenario; nobody touches the bot. Every observable effect is
asserted in the sim's GitHub state (devstack/story.py). Both sweep modes run, each on a recipe PR that
carries (or gets) the repo's sweep label, so the repo's own run-sweep.yml is live too:

- dispatch mode (the bot's queue through e2e-tests.yml): dispatch answers without a run id, so
  runs are found by their display_title; the first job loses its runner mid-job and is retried
  once; the bump commit's `[skip-sweep]` keeps the repo from running the same sweep again;
- label mode, the default (the bot applies the sweep label and follows the repo's run-sweep.yml
  run), with every webhook delivered twice and the worker SIGKILLed once mid-run, then on to the
  end of the PR's life: the report offers `/reuse-sweep-run <id>`, a maintainer posts it and
  merges, and the push to main reuses that run instead of sweeping again.

Same effects in both, none duplicated, exactly one sweep each.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.demo import play_story
from devstack.mergestory import sweep_mode_setup
from devstack.story import STATUS_MARKER, StoryReport, bot_comments
from sim.scenario import SEED_KEY

pytestmark = [pytest.mark.services, pytest.mark.slow]


def _crawl_the_dashboard(dashboard_url: str, sim_url: str) -> None:
    """Every dashboard page renders and every outbound link (PRs, commits, the bump diff, runs)
    answers 200 from the simulator; nothing reaches for another origin."""
    from playwright.sync_api import sync_playwright

    from tests.browser.crawl import crawl
    from tests.browser.test_dashboard_browser import ARGS, CHROMIUM, _need_chromium

    _need_chromium()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            result = crawl(browser, dashboard_url, [sim_url])
        finally:
            browser.close()
    assert result.problems == [] and result.blocked == [], (result.problems, result.blocked)
    # the only links leaving the simulator are the reference's published source (rel=external)
    assert all(u.startswith("https://github.com/ROCm/ATOM/") for u in result.external), result.external
    paths = {p.removeprefix(dashboard_url.rstrip("/")).split("?")[0] for p in result.pages}
    assert {"/", "/watches", "/sweeps", "/results", "/deliveries", "/audit"} <= paths, paths
    assert any(p.startswith("/sweeps/") for p in paths) and any(p.startswith("/deliveries/") for p in paths)
    links = list(result.outbound)
    assert all(status == 200 for status in result.outbound.values())
    for kind in ("/pull/", "/actions/runs/"):
        assert any(kind in u for u in links), (kind, links)
    # The bump diff: the story bumps on the recipe PR's branch, so it is a commit (a bump PR's
    # diff would be its `/files` page).
    assert any("/commit/" in u for u in links), links


def _run(
    tmp_path: Path,
    pg_url: str,
    redis_url: str,
    *,
    chaos: bool,
    mode: str,
    crawl_dashboard: bool = False,
    key: str = SEED_KEY,
    timeout: float = 240,
    contract: Callable[[Any], None] | None = None,
    inside: Callable[[Any, Any], None] | None = None,
    extra_env: dict[str, str] | None = None,
) -> StoryReport:
    """``contract`` runs on the sim's world right after the scenario loads (the variable on, the
    recorders installed); ``inside`` runs with the stack still up (running, sim) after the story."""
    from app.db import session_factory
    from app.settings import Settings, reset_settings_cache
    from devstack.launcher import SIM_CADENCE, stack
    from sim.scenario import SeedScenario
    from sim.server import SimServer, free_port
    from sim.world import SimSettings

    reset_settings_cache()
    settings = Settings(data_dir=tmp_path / "data", database_url=pg_url, broker_url=redis_url)
    extra = {
        "SWEEPBOT_QUEUE_NAME": f"e2e-{uuid.uuid4().hex[:8]}",
        "SWEEPBOT_DELIVERY_LEASE_SECONDS": "5",
        "SWEEPBOT_LOG_LEVEL": "INFO",
        **(extra_env or {}),
    }
    statuses: dict[str, str] = {}
    with SimServer(settings=SimSettings(time_scale=0.001, seed=11)) as sim:
        if chaos:
            sim.world.duplicate_deliveries = True
        scenario = SeedScenario(sim.world, key=key)

        def setup() -> None:
            world = sim.world
            repo, pr = scenario.facts["bench_repo"], scenario.facts["recipe_pr"]
            sweep_mode_setup(world, scenario, mode)  # label mode is the default: no bot config
            if mode == "dispatch" and key == SEED_KEY:
                # a maintainer already labelled the PR: only [skip-sweep] stops a second sweep
                world.add_labels(repo, pr, ["full-sweep-enabled"], "alice-admin")
                world.faults.dispatch_ignore_run_details = True  # no run id: find runs by title
                world.faults.runner_lost_next = 1  # the first job's runner dies mid-job
            if contract is not None:
                contract(world)

        with stack(port=free_port(), sim=sim, settings=settings, extra_env=extra) as running:

            def before(step: str) -> None:
                if step == "drop-47270":
                    statuses["before-drop"] = bot_comments(
                        sim.world, "SemiAnalysisAI/InferenceX", 2104, STATUS_MARKER
                    )[0].body

            def kill_worker() -> None:
                running.kill("worker", signal.SIGKILL)  # returns once the worker has exited
                running.start_process("worker", "worker")

            run = play_story(
                sim.world,
                scenario,
                session_factory(),
                say=lambda line: None,
                poll_interval=float(SIM_CADENCE["SWEEPBOT_POLL_INTERVAL"]),
                timeout=timeout,
                on_sweep_started=kill_worker if chaos else None,
                before_step=before,
                setup=setup,
                to_the_merge=mode == "label",
            )
            assert not running.dead(), f"processes died: {running.dead()} (logs in {running.log_dir})"
            if crawl_dashboard:
                _crawl_the_dashboard(running.dashboard_url, sim.url)
            if inside is not None:
                inside(running, sim)
    if chaos:
        with sim.world.lock:
            duplicated = [d for d in sim.world.deliveries if d.duplicate_of]
        assert duplicated, "the sim did not duplicate deliveries"
    body = statuses["before-drop"]
    assert "#47269" in body and "merged" in body
    assert "#47270" in body and "closed without merg" in body
    assert "/depends-on drop vllm-project/vllm#47270" in body
    return run.report


@pytest.fixture
def story_env(
    pg_clean_url: str, redis_url: str, settings_env: pytest.MonkeyPatch
) -> Iterator[tuple[str, str]]:
    settings_env.setenv("SWEEPBOT_DATABASE_URL", pg_clean_url)
    settings_env.setenv("SWEEPBOT_BROKER_URL", redis_url)
    from app.settings import reset_settings_cache

    reset_settings_cache()
    yield pg_clean_url, redis_url


def _assert_story(report: StoryReport, mode: str) -> None:
    failed = [f"{c.name}: {c.detail}" for c in report.checks if not c.ok]
    assert not failed, "\n".join(failed)
    assert report.summary["jobs"] == {"succeeded": 10}
    assert report.summary["mode"] == mode


def test_the_whole_story(story_env: tuple[str, str], tmp_path: Path) -> None:
    """...and then the dashboard, true in simulator mode: crawled in Chromium, every link answers."""
    report = _run(tmp_path, *story_env, chaos=False, mode="dispatch", crawl_dashboard=True)
    _assert_story(report, "dispatch")
    assert report.summary["runner_lost"] == 1  # lost once, retried once, then measured


def test_the_whole_story_in_label_mode_with_duplicate_webhooks_and_a_killed_worker(
    story_env: tuple[str, str], tmp_path: Path
) -> None:
    report = _run(tmp_path, *story_env, chaos=True, mode="label")
    _assert_story(report, "label")
    # to the end of the PR's life: the report offered `/reuse-sweep-run <id>` for the run the label
    # started, a maintainer posted it and merged, and the push to main reused that run
    checks = {c.name: c for c in report.checks}
    assert checks["the report offers /reuse-sweep-run <id> for the label-driven run"].ok
    assert checks["after the maintainer's comment and the merge, the push to main reuses that run"].ok
    assert checks["the bot reports main's outcome: reuse taken, results published"].ok
    assert isinstance(report.summary["reused_run"], int)


@pytest.mark.parametrize(
    "key",
    ["dsv4-fp4-mi355x-atom-disagg", "kimik2.5-fp4-mi355x-vllm-agentic"],
    ids=["multi-node", "agentic"],
)
def test_the_story_on_a_multinode_and_on_an_agentic_key(
    story_env: tuple[str, str], tmp_path: Path, key: str
) -> None:
    """The recipe PR moves ``key`` to vLLM's nightly channel behind the same two upstream PRs: its
    dependencies play out, the pin is bumped, the whole key is swept (dispatch mode) and every
    point's result is collected from the artifact its template names (multi-node: `bmk_<RF>` with
    one `agg_` file per conc; agentic: `bmk_agentic_<RF>`), and the report is posted, final."""
    report = _run(tmp_path, *story_env, chaos=False, mode="dispatch", key=key, timeout=80)
    failed = [f"{c.name}: {c.detail}" for c in report.checks if not c.ok]
    assert not failed, "\n".join(failed)
    checks = {c.name for c in report.checks}
    assert {
        "every point's result collected under its real artifact name",
        "one report comment, final",
    } <= checks
    assert report.summary["mode"] == "dispatch" and set(report.summary["jobs"]) == {"succeeded"}
