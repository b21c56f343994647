"""``sweepbot demo``: the whole story against the simulator, with no one touching it.

Starts the simulated GitHub and the bot (API + worker + beat as separate processes), loads the seed
world, plays it step by step — #47269 merges, nightlies appear, #47270 is closed, a maintainer
drops it — and prints what happens as it happens: webhooks the sim sends, what the bot writes
(from its audit log), and the sweep's progress. Then the nightly regression story
(``sim/nightly_scenario.py``): nightlies one by one and in a burst, a slowdown injected upstream,
the watch's canaries, the bisection, the issue, the fix and the issue closed (``play_nightly``).
The same seed driver (``play_story``) runs the end-to-end test and ``bench/story.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db import session_factory
from app.models.nightly import CanaryState, NightlyCanary, NightlyRegression, RegressionState
from app.models.sweeps import JobState, Sweep, SweepJob
from app.preflight import PortUse
from app.settings import Settings, reset_settings_cache
from devstack.launcher import SIM_CADENCE, Stack, StartRefused, check_ports, instance_lock, stack
from devstack.mergestory import SWEEP_MODES, merge_with_reuse, observe_merge, sweep_mode_setup
from devstack.story import (
    REPORT_MARKER_PREFIX,
    STATUS_MARKER,
    StoryReport,
    bot_comments,
    nightly_issues,
    observe,
    observe_nightly,
    report_final,
)
from devstack.storytext import ending, fit, sweep_activity
from devstack.storytimeline import Say, Timeline, wait_until
from sim.nightly_scenario import NightlyRegressionStory
from sim.scenario import SEED_KEY, STORY_KEYS, SeedScenario
from sim.server import SimServer
from sim.world import SimSettings

# The step after which nothing blocks the bump: the maintainer's drop of #47270 (seed), or the
# nightly containing both merge commits (both-merge).
LAST_DEPENDENCY_STEPS = ("drop-47270", "nightly-contains-both")


def _branch_head(world: Any, repo: str, branch: str) -> str:
    with world.lock:
        return str(world.repo(repo).refs[f"refs/heads/{branch}"])


def _sweep_states(factory: sessionmaker[Session], repo: str, pr: int) -> list[str]:
    with factory() as session:
        return list(
            session.execute(
                select(SweepJob.state)
                .join(Sweep, Sweep.id == SweepJob.sweep_id)
                .where(Sweep.repo == repo, Sweep.pr_number == pr)
            )
            .scalars()
            .all()
        )


def _sweep_progress(factory: sessionmaker[Session], repo: str, pr: int) -> tuple[int, int]:
    jobs = _sweep_states(factory, repo, pr)
    return sum(1 for s in jobs if s in JobState.FINAL), len(jobs)


def _report_complete(world: Any, repo: str, pr: int, key: str) -> bool:
    reports = bot_comments(world, repo, pr, REPORT_MARKER_PREFIX)
    return len(reports) == 1 and report_final(reports[0].body, key)


@dataclass
class StoryRun:
    report: StoryReport
    marks: dict[str, float]
    wall_seconds: float
    timeline: Timeline | None = None  # for the story told after it: one clock, nothing told twice


@dataclass
class _SeedPlay:
    """The seed story being played: where it happens and how long each wait may take."""

    world: Any
    factory: sessionmaker[Session]
    timeline: Timeline
    repo: str
    pr: int
    key: str
    branch: str
    base_sha: str
    timeout: float
    poll_interval: float

    def wait(self, predicate: Callable[[], bool], what: str, activity: Callable[[], str]) -> None:
        wait_until(predicate, self.timeline, self.timeout, what, activity)

    def idle(self, seconds: float, activity: str) -> None:
        """Let the bot's polls run for ``seconds`` while the timeline shows what happens."""
        self.timeline.activity = lambda: activity
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.timeline.pump()
            time.sleep(0.25)


def play_story(
    world: Any,
    scenario: Any,
    factory: sessionmaker[Session],
    *,
    say: Say,
    poll_interval: float,
    timeout: float = 300.0,
    on_sweep_started: Callable[[], None] | None = None,
    before_step: Callable[[str], None] | None = None,
    progress: Progress | None = None,
    setup: Callable[[], None] | None = None,
    width: int = 0,
    debounce_seconds: float = 1.0,
    to_the_merge: bool = False,
) -> StoryRun:
    """Load and play the seed scenario, waiting for the bot's reaction to each step; then observe.

    ``setup`` runs right after the scenario is loaded (a variant's bot config, labels, faults).
    ``to_the_merge`` (label mode): the story goes on to the end of the PR's life (mergestory).
    """
    started = time.monotonic()
    timeline = Timeline(world, factory, say, width=width, bot_login=world.settings.default_token_user)
    play = _load_seed(world, scenario, factory, timeline, setup, timeout=timeout, poll_interval=poll_interval)
    for step in list(scenario.steps):
        if before_step is not None:
            timeline.pump()
            before_step(step.name)
        _play_step(play, scenario.step())
    _follow_sweep(play, on_sweep_started, progress, debounce_seconds)
    offered = merge_with_reuse(world, timeline, play.repo, play.pr, timeout) if to_the_merge else None
    # A few more poll cycles: replays and steady-state polls must not add anything.
    play.idle(2 * poll_interval, "checking that steady-state polls and replays change nothing more")
    timeline.close()
    with factory() as session:
        report = observe(world, scenario, session, recipe_base_sha=play.base_sha)
    if to_the_merge:
        observe_merge(world, play.repo, play.pr, report, offered)
    return StoryRun(
        report=report,
        marks=timeline.marks,
        wall_seconds=time.monotonic() - started,
        timeline=timeline,
    )


def _load_seed(
    world: Any,
    scenario: Any,
    factory: sessionmaker[Session],
    timeline: Timeline,
    setup: Callable[[], None] | None,
    *,
    timeout: float,
    poll_interval: float,
) -> _SeedPlay:
    """Load the seed world (then ``setup``) and wait for the bot's first status comment."""
    facts = scenario.load()["facts"]
    if setup is not None:
        setup()
    repo, pr, branch = facts["bench_repo"], facts["recipe_pr"], facts["recipe_branch"]
    base_sha = _branch_head(world, repo, branch)
    key = str(facts["config_key"])
    play = _SeedPlay(world, factory, timeline, repo, pr, key, branch, base_sha, timeout, poll_interval)
    deps = ", ".join(f"{facts['vllm_repo']}#{n}" for n in facts["deps"])
    timeline.note("sim", f"seed world loaded: {repo}#{pr} waits on {deps}")
    play.wait(
        lambda: bool(bot_comments(world, repo, pr, STATUS_MARKER)),
        "the status comment on the recipe PR",
        lambda: "reading the recipe PR's dependencies and posting its status comment",
    )
    return play


def _play_step(play: _SeedPlay, entry: dict[str, Any]) -> None:
    """Note one scenario step and wait for the bot's reaction to it."""
    world, repo, pr = play.world, play.repo, play.pr
    play.timeline.note("sim", f"step {entry['position']}: {entry['description']}")
    if entry["step"] in LAST_DEPENDENCY_STEPS:
        # From here on every dependency is merged-and-contained (or dropped): the bump may happen.
        play.timeline.mark("last_dependency_resolved")
        play.wait(
            lambda: _branch_head(world, repo, play.branch) != play.base_sha,
            "the bump commit on the recipe branch",
            lambda: "looking for the newest nightly that contains every merge commit, to bump the pin",
        )
    elif entry["step"] == "close-47270":
        play.wait(
            lambda: "closed without merg" in bot_comments(world, repo, pr, STATUS_MARKER)[0].body,
            "the status comment to show #47270 closed without merge",
            lambda: "polling the upstream PRs; #47270 was closed, the status comment will say so",
        )
    else:
        # Let one poll cycle see the change before the next one happens.
        play.idle(
            1.5 * play.poll_interval,
            f"polling upstream PRs and the registry's nightlies (every {play.poll_interval:g}s)",
        )


def _follow_sweep(
    play: _SeedPlay,
    on_sweep_started: Callable[[], None] | None,
    progress: Progress | None,
    debounce_seconds: float,
) -> None:
    """Wait for the sweep to be queued (and dispatched, for ``on_sweep_started``), then for every
    job to finish and the report to show the gap, updating ``progress``."""
    world, factory, repo, pr = play.world, play.factory, play.repo, play.pr

    def activity() -> str:
        states = _sweep_states(factory, repo, pr)
        done = bool(states) and _report_complete(world, repo, pr, play.key)
        return sweep_activity(states, done, debounce_seconds)

    play.wait(lambda: _sweep_progress(factory, repo, pr)[1] > 0, "the sweep to be queued", activity)
    if on_sweep_started is not None:
        play.wait(lambda: "first_dispatch" in play.timeline.marks, "the first dispatch", activity)
        on_sweep_started()
    task = progress.add_task("sweep", total=_sweep_progress(factory, repo, pr)[1]) if progress else None

    def finished() -> bool:
        done, total = _sweep_progress(factory, repo, pr)
        if progress is not None and task is not None:
            progress.update(task, completed=done, total=total)
        return total > 0 and done == total and _report_complete(world, repo, pr, play.key)

    play.wait(finished, "every job to finish and the report to show the gap", activity)


def _canary_done(factory: sessionmaker[Session], tag: str) -> bool:
    with factory() as session:
        row = session.scalars(select(NightlyCanary).where(NightlyCanary.tag == tag)).first()
        return row is not None and row.state in (CanaryState.MEASURED, CanaryState.FAILED)


def _canary_of(factory: sessionmaker[Session], tag: str) -> Callable[[], bool]:
    return lambda: _canary_done(factory, tag)


def _regression(factory: sessionmaker[Session]) -> tuple[str | None, int | None]:
    with factory() as session:
        reg = session.scalars(select(NightlyRegression).order_by(NightlyRegression.id)).first()
        return (reg.state, reg.issue_number) if reg is not None else (None, None)


def _nightly_activity(factory: sessionmaker[Session]) -> str:
    with factory() as session:
        rows = list(session.scalars(select(NightlyCanary)))
    queued = sum(r.state in CanaryState.OPEN for r in rows)
    measured = sum(r.state == CanaryState.MEASURED for r in rows)
    return f"nightly watch: {measured} nightlies measured, {queued} canary(ies) queued or running"


def play_nightly(
    world: Any,
    story: Any,
    factory: sessionmaker[Session],
    *,
    say: Say,
    timeout: float,
    width: int = 0,
    after: StoryRun | None = None,
) -> None:
    """The nightly regression story after the seed's: each nightly's canary is waited for; the
    regression's issue must be open (bisection done) before the fix lands, and closed after.
    ``after``: the seed story told before it, whose clock this one goes on with."""
    timeline = Timeline(world, factory, say, width=width, bot_login=world.settings.default_token_user)
    if after is not None and after.timeline is not None:
        timeline.follow(after.timeline)
    story.load()
    timeline.note("sim", f"nightly regression story loaded: the watch is on for {story.facts['key']}")

    def activity() -> str:
        return _nightly_activity(factory)

    for step in list(story.steps):
        if step.name == "fix":
            wait_until(
                lambda: (
                    _regression(factory)[0] == RegressionState.OPEN and _regression(factory)[1] is not None
                ),
                timeline,
                timeout,
                "the regression issue (bisection over the burst's nightlies first)",
                activity,
            )
        entry = story.step()
        timeline.note("sim", f"nightly step {entry['position']}: {entry['description']}")
        result = entry["result"]
        newest = str(result.get("tag") or result["tags"][-1])
        wait_until(
            _canary_of(factory, newest),
            timeline,
            timeout,
            f"the canary of {newest[:18]}",
            activity,
        )
    repo = world.scenario.facts["bench_repo"]
    wait_until(
        lambda: (
            _regression(factory)[0] == RegressionState.RECOVERED
            and all(i.state == "closed" for i in nightly_issues(world, repo))
        ),
        timeline,
        timeout,
        "the regression issue to be closed once the fix's nightlies recovered",
        activity,
    )
    timeline.close()


def demo_command(
    until_done: Annotated[
        bool, typer.Option("--until-done", help="Exit when the story has finished")
    ] = False,
    port: Annotated[int, typer.Option(metavar="PORT", help="Port of the bot's API and dashboard")] = 8000,
    sim_port: Annotated[int, typer.Option(metavar="PORT", help="Port of the simulated GitHub")] = 8001,
    variant: Annotated[
        str, typer.Option(metavar="NAME", help="seed (#47270 closed, then dropped) or both-merge")
    ] = "seed",
    time_scale: Annotated[
        float, typer.Option(metavar="SECONDS", help="Real seconds per simulated runner second")
    ] = 0.002,
    sweep_mode: Annotated[
        str,
        typer.Option(
            "--sweep-mode",
            metavar="MODE",
            help="label (InferenceX's way: its run-sweep.yml, reused at merge) or dispatch (e2e-tests.yml)",
        ),
    ] = "label",
    timeout: Annotated[
        float, typer.Option(metavar="SECONDS", help="Give up after this many seconds")
    ] = 420.0,
    key: Annotated[
        str,
        typer.Option(
            "--key",
            metavar="KEY",
            help="The recipe PR's config key: " + ", ".join(STORY_KEYS) + " (multi-node, agentic)",
        ),
    ] = SEED_KEY,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            metavar="DIR",
            help="The demo runs in DIR/demo (default: $SWEEPBOT_DATA_DIR or ./.sweepbot)",
        ),
    ] = None,
    json_only: Annotated[
        bool,
        typer.Option("--json", help="Print only the JSON summary (one line) and exit when done"),
    ] = False,
) -> None:
    """Play the whole story against the simulator: deps land, the pin is bumped, the sweep runs,
    the gap is posted. Without --until-done the dashboard stays up afterwards until Ctrl-C."""
    err = Console(stderr=True)
    refused = _refused(variant, sweep_mode, key)
    if refused:
        err.print(refused, markup=False)
        raise typer.Exit(2)
    if data_dir is not None:
        os.environ["SWEEPBOT_DATA_DIR"] = str(data_dir.resolve())
    base_dir = Path(Settings().data_dir).resolve()
    try:
        with instance_lock(base_dir, "demo", f"http://127.0.0.1:{port}/"):
            check_ports(
                [
                    PortUse("127.0.0.1", port, "the API and dashboard", "--port"),
                    PortUse("127.0.0.1", sim_port, "the simulated GitHub", "--sim-port"),
                ]
            )
            code = _run_demo(
                base_dir / "demo",
                until_done or json_only,
                port,
                sim_port,
                variant,
                time_scale,
                timeout,
                sweep_mode,
                json_only=json_only,
                key=key,
            )
    except StartRefused as exc:
        err.print(str(exc), markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(exc.exit_code) from exc
    raise typer.Exit(code)


def _refused(variant: str, sweep_mode: str, key: str) -> str | None:
    """Why ``demo``'s options cannot be played, or None."""
    if variant not in ("seed", "both-merge"):
        return f"unknown --variant {variant!r}: use seed or both-merge"
    if sweep_mode not in SWEEP_MODES:
        return f"unknown --sweep-mode {sweep_mode!r}: use label or dispatch"
    if key not in STORY_KEYS:
        return f"unknown --key {key!r}: use one of {', '.join(STORY_KEYS)}"
    if key != SEED_KEY and sweep_mode == "label":
        return (
            f"--key {key} runs with --sweep-mode dispatch: the simulator plays run-sweep.yml's "
            "single-node and multi-node fixed-seq-len jobs only, and the merge story is the seed key's"
        )
    return None


def _run_demo(
    data_dir: Path,
    until_done: bool,
    port: int,
    sim_port: int,
    variant: str,
    time_scale: float,
    timeout: float,
    sweep_mode: str = "label",
    *,
    json_only: bool = False,
    key: str = SEED_KEY,
) -> int:
    console = Console(quiet=json_only)
    settings = _fresh_data_dir(data_dir)
    started = time.monotonic()
    sim: Any = None
    try:
        sim = SimServer(settings=SimSettings(time_scale=time_scale, seed=7), port=sim_port).start()
        scenario = SeedScenario(sim.world, variant=variant, key=key)
        with stack(port=port, sim=sim, settings=settings) as running:
            for line in (
                f"sweepbot demo: dashboard {running.dashboard_url}",
                f"  simulated GitHub {sim.url}",
                f"  logs {running.log_dir}",
            ):
                console.print(fit(line, line_width(console)), markup=False, highlight=False, soft_wrap=True)
            report, marks = _play_both_stories(console, sim, scenario, timeout, sweep_mode)
            if until_done:
                summary = {
                    **report.as_dict(),
                    "wall_seconds": round(time.monotonic() - started, 1),
                    "marks": {k: round(v, 2) for k, v in marks.items()},
                }
                _say_lines(console, outcome_lines(report, summary))
                console.print(
                    "The dashboard stops with the demo; to keep it up afterwards, run "
                    "`.venv/bin/sweepbot demo` (without --until-done).",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
                console.file.flush()
                typer.echo(json.dumps(summary, default=str))
                return 0 if report.ok else 1
            _serve_until_stopped(console, running)
            return 0
    except StartRefused:
        raise
    except RuntimeError as exc:  # StoryTimeout, a child that died
        console.print(str(exc), markup=False, highlight=False)
        if until_done:
            typer.echo(
                json.dumps(
                    {"ok": False, "error": str(exc), "wall_seconds": round(time.monotonic() - started, 1)}
                )
            )
        return 1
    finally:
        if sim is not None:
            sim.stop()


def _fresh_data_dir(data_dir: Path) -> Settings:
    """Every demo starts from an empty world: an emptied ``data_dir``, and settings that use it
    (an empty database or broker URL in the environment means the default, under ``data_dir``)."""
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    os.environ["SWEEPBOT_DATA_DIR"] = str(data_dir)
    for key in ("SWEEPBOT_DATABASE_URL", "SWEEPBOT_BROKER_URL"):
        if not os.environ.get(key):
            os.environ.pop(key, None)
    reset_settings_cache()
    return Settings()


def _play_both_stories(
    console: Console, sim: Any, scenario: Any, timeout: float, sweep_mode: str = "label"
) -> tuple[StoryReport, dict[str, float]]:
    """The seed story under a progress bar, then the nightly regression story; every check of
    both in one report, with the seed story's timeline marks."""
    factory = session_factory()
    width = line_width(console)
    with Progress(
        TextColumn("sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal,  # a file gets the story's lines, not a bar's redraws
    ) as progress:

        def say(line: str) -> None:
            progress.console.print(line, markup=False, highlight=False, soft_wrap=True)

        run = play_story(
            sim.world,
            scenario,
            factory,
            say=say,
            poll_interval=float(SIM_CADENCE["SWEEPBOT_POLL_INTERVAL"]),
            timeout=timeout,
            progress=progress,
            width=width,
            debounce_seconds=float(SIM_CADENCE["SWEEPBOT_REPORT_DEBOUNCE_SECONDS"]),
            setup=lambda: sweep_mode_setup(sim.world, scenario, sweep_mode),
            to_the_merge=sweep_mode == "label",
        )
        # Four bad nightlies after the burst (the story's default is three): with 5 + 4
        # measured nightlies the detector's permutation test cannot get below p = 0.0156 for
        # a clean 5% step (too few distinct splits), with 5 + 5 it finds it every time.
        story = NightlyRegressionStory(sim.world, registry_url=f"{sim.url}/hub", bad_after=4)
        play_nightly(sim.world, story, factory, say=say, timeout=timeout, width=width, after=run)
    with factory() as session:
        observe_nightly(sim.world, story, session, run.report)
    return run.report, run.marks


def outcome_lines(report: StoryReport, summary: dict[str, Any]) -> list[str]:
    """The end of the story in plain text: each check, the gap and accuracy tables, the links."""
    checks = [f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.detail}" for c in report.checks]
    return ["", *checks, *ending(summary), ""]


def _say_lines(console: Console, lines: list[str]) -> None:
    width = line_width(console)
    for line in lines:
        console.print(fit(line, width), markup=False, highlight=False, soft_wrap=True)


def line_width(console: Console) -> int:
    """How wide the story's lines may be: the terminal's width, or 0 (full lines) when the output
    goes to a file or a pipe."""
    return console.width if console.is_terminal else 0


def _serve_until_stopped(console: Console, running: Stack) -> None:
    """Without --until-done the dashboard stays up until Ctrl-C (or a process of the stack dies)."""
    console.print(f"\nThe story is done. Dashboard: {running.dashboard_url}", markup=False)
    if running.operator_token:
        console.print(f"  operator token: {running.operator_token}", markup=False)
    console.print("Ctrl-C stops everything.")
    stop = {"now": False}
    signal.signal(signal.SIGINT, lambda *_: stop.update(now=True))
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    while not stop["now"] and not running.dead():
        time.sleep(0.5)
