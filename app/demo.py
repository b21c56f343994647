"""``sweepbot demo``: the whole story against the simulator, with no one touching it.

Starts the simulated GitHub and the bot (API + worker + beat as separate processes), loads the seed
world, plays it step by step — #47269 merges, nightlies appear, #47270 is closed, a maintainer
drops it — and prints what happens as it happens: webhooks the sim sends, what the bot writes
(from its audit log), and the sweep's progress. The same driver (``play_story``) runs the
end-to-end test and ``bench/story.py``.
"""

from __future__ import annotations

import json
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.story import STATUS_MARKER, StoryReport, bot_comments, observe

Say = Callable[[str], None]


# The step after which nothing blocks the bump: the maintainer's drop of #47270 (seed), or the
# nightly containing both merge commits (both-merge).
LAST_DEPENDENCY_STEPS = ("drop-47270", "nightly-contains-both")


class StoryTimeout(RuntimeError):
    pass


@dataclass
class Timeline:
    """Prints new sim deliveries and bot audit entries, once each, with the elapsed time."""

    world: Any
    factory: sessionmaker[Session]
    say: Say
    started: float = field(default_factory=time.time)  # wall clock: audit rows carry wall-clock times
    seen_deliveries: int = 0
    seen_audit: int = 0
    marks: dict[str, float] = field(default_factory=dict)

    def stamp(self) -> str:
        return f"[{time.time() - self.started:6.1f}s]"

    def mark(self, name: str, at: float | None = None) -> None:
        self.marks.setdefault(name, (at if at is not None else time.time()) - self.started)

    def pump(self) -> None:
        from app.models import AuditEntry

        with self.world.lock:
            fresh = self.world.deliveries[self.seen_deliveries :]
            self.seen_deliveries = len(self.world.deliveries)
        for d in fresh:
            repo = (d.payload.get("repository") or {}).get("full_name", "")
            self.say(f"{self.stamp()} github -> bot  {d.event}{'.' + d.action if d.action else ''} {repo}")
        with self.factory() as session:
            rows = (
                session.execute(
                    select(AuditEntry).where(AuditEntry.id > self.seen_audit).order_by(AuditEntry.id)
                )
                .scalars()
                .all()
            )
        for row in rows:
            self.seen_audit = max(self.seen_audit, row.id)
            at = row.at.replace(tzinfo=row.at.tzinfo or UTC).timestamp()
            if row.action in ("github.git/update-ref", "github.git/create-ref"):
                self.mark("bump_committed", at)
            if row.action in ("github.actions/create-workflow-dispatch", "sweep.follow_run"):
                self.mark("first_dispatch", at)  # label mode: the bot starts following the repo's run
            self.say(
                f"{self.stamp()} bot          {row.actor}: {row.action} {row.target or ''} [{row.outcome}]"
            )


def wait_until(predicate: Callable[[], bool], timeline: Timeline, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        timeline.pump()
        if predicate():
            return
        time.sleep(0.25)
    timeline.pump()
    raise StoryTimeout(f"timed out after {timeout:.0f}s waiting for {what}")


def _branch_head(world: Any, repo: str, branch: str) -> str:
    with world.lock:
        return str(world.repo(repo).refs[f"refs/heads/{branch}"])


def _sweep_progress(factory: sessionmaker[Session], repo: str, pr: int) -> tuple[int, int]:
    from app.models.sweeps import Sweep, SweepJob

    with factory() as session:
        jobs = (
            session.execute(
                select(SweepJob.state)
                .join(Sweep, Sweep.id == SweepJob.sweep_id)
                .where(Sweep.repo == repo, Sweep.pr_number == pr)
            )
            .scalars()
            .all()
        )
    done = sum(1 for s in jobs if s in ("succeeded", "failed", "cancelled", "reused"))
    return done, len(jobs)


def _report_complete(world: Any, repo: str, pr: int) -> bool:
    from app.story import ATOM_CONCS, REPORT_MARKER_PREFIX, report_table

    reports = bot_comments(world, repo, pr, REPORT_MARKER_PREFIX)
    if len(reports) != 1:
        return False
    table = "\n".join(report_table(reports[0].body))
    return all(f"| {c} |" in table for c in ATOM_CONCS) and "running" not in reports[0].body.lower()


@dataclass
class StoryRun:
    report: StoryReport
    marks: dict[str, float]
    wall_seconds: float


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
) -> StoryRun:
    """Load and play the seed scenario, waiting for the bot's reaction to each step; then observe.

    ``setup`` runs right after the scenario is loaded (a variant's bot config, labels, faults).
    """
    started = time.monotonic()
    timeline = Timeline(world, factory, say)
    facts_load = scenario.load()
    if setup is not None:
        setup()
    facts = facts_load["facts"]
    repo, pr, branch = facts["bench_repo"], facts["recipe_pr"], facts["recipe_branch"]
    base_sha = _branch_head(world, repo, branch)
    deps = ", ".join(f"{facts['vllm_repo']}#{n}" for n in facts["deps"])
    say(f"{timeline.stamp()} sim          seed world loaded: {repo}#{pr} waits on {deps}")
    wait_until(
        lambda: bool(bot_comments(world, repo, pr, STATUS_MARKER)),
        timeline,
        timeout,
        "the status comment on the recipe PR",
    )
    for step in list(scenario.steps):
        if before_step is not None:
            timeline.pump()
            before_step(step.name)
        entry = scenario.step()
        say(f"{timeline.stamp()} sim          step {entry['position']}: {entry['description']}")
        if entry["step"] in LAST_DEPENDENCY_STEPS:
            # From here on every dependency is merged-and-contained (or dropped): the bump may happen.
            timeline.mark("last_dependency_resolved")
            wait_until(
                lambda: _branch_head(world, repo, branch) != base_sha,
                timeline,
                timeout,
                "the bump commit on the recipe branch",
            )
        elif entry["step"] == "close-47270":
            wait_until(
                lambda: "closed without merg" in bot_comments(world, repo, pr, STATUS_MARKER)[0].body,
                timeline,
                timeout,
                "the status comment to show #47270 closed without merge",
            )
        else:
            # Let one poll cycle see the change before the next one happens.
            end = time.monotonic() + 1.5 * poll_interval
            while time.monotonic() < end:
                timeline.pump()
                time.sleep(0.25)
    wait_until(lambda: _sweep_progress(factory, repo, pr)[1] > 0, timeline, timeout, "the sweep to be queued")
    if on_sweep_started is not None:
        wait_until(lambda: "first_dispatch" in timeline.marks, timeline, timeout, "the first dispatch")
        on_sweep_started()
    task = progress.add_task("sweep", total=_sweep_progress(factory, repo, pr)[1]) if progress else None

    def finished() -> bool:
        done, total = _sweep_progress(factory, repo, pr)
        if progress is not None and task is not None:
            progress.update(task, completed=done, total=total)
        return total > 0 and done == total and _report_complete(world, repo, pr)

    wait_until(finished, timeline, timeout, "every job to finish and the report to show the gap")
    # A few more poll cycles: replays and steady-state polls must not add anything.
    end = time.monotonic() + 2 * poll_interval
    while time.monotonic() < end:
        timeline.pump()
        time.sleep(0.25)
    with factory() as session:
        report = observe(world, scenario, session, recipe_base_sha=base_sha)
    return StoryRun(report=report, marks=timeline.marks, wall_seconds=time.monotonic() - started)


def demo_command(
    until_done: Annotated[
        bool, typer.Option("--until-done", help="Exit when the story has finished")
    ] = False,
    port: Annotated[int, typer.Option(help="Port of the bot's API and dashboard")] = 8000,
    sim_port: Annotated[int, typer.Option(help="Port of the simulated GitHub")] = 8001,
    variant: Annotated[str, typer.Option(help="seed (#47270 closed, then dropped) or both-merge")] = "seed",
    time_scale: Annotated[float, typer.Option(help="Real seconds per simulated runner second")] = 0.002,
    timeout: Annotated[float, typer.Option(help="Give up after this many seconds")] = 420.0,
) -> None:
    """Play the whole story against the simulator: deps land, the pin is bumped, the sweep runs,
    the gap is posted."""
    from app.db import session_factory
    from app.launcher import SIM_CADENCE, stack
    from app.settings import Settings, reset_settings_cache
    from sim.scenario import SeedScenario
    from sim.server import SimServer
    from sim.world import SimSettings

    console = Console()
    base = Settings()
    data_dir = Path(base.data_dir).resolve() / "demo"
    shutil.rmtree(data_dir, ignore_errors=True)  # every demo starts from an empty world
    data_dir.mkdir(parents=True)
    import os

    os.environ["SWEEPBOT_DATA_DIR"] = str(data_dir)
    for key in ("SWEEPBOT_DATABASE_URL", "SWEEPBOT_BROKER_URL"):
        if not os.environ.get(key):
            os.environ.pop(key, None)
    reset_settings_cache()
    settings = Settings()
    started = time.monotonic()
    sim = SimServer(settings=SimSettings(time_scale=time_scale, seed=7), port=sim_port).start()
    scenario = SeedScenario(sim.world, variant=variant)
    try:
        with stack(port=port, sim=sim, settings=settings) as running:
            console.print(
                f"[bold]sweepbot demo[/bold]: dashboard {running.dashboard_url}  "
                f"simulated GitHub {sim.url}  logs {running.log_dir}"
            )
            factory = session_factory()
            with Progress(
                TextColumn("sweep"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=False,
            ) as progress:
                run = play_story(
                    sim.world,
                    scenario,
                    factory,
                    say=progress.console.print,
                    poll_interval=float(SIM_CADENCE["SWEEPBOT_POLL_INTERVAL"]),
                    timeout=timeout,
                    progress=progress,
                )
            for check in run.report.checks:
                mark = "[green]ok[/green]  " if check.ok else "[red]FAIL[/red]"
                console.print(f"{mark} {check.name}: {check.detail}")
            summary = {
                **run.report.as_dict(),
                "wall_seconds": round(time.monotonic() - started, 1),
                "marks": {k: round(v, 2) for k, v in run.marks.items()},
            }
            if until_done:
                typer.echo(json.dumps(summary, default=str))
                raise typer.Exit(0 if run.report.ok else 1)
            console.print(
                f"\nThe story is done. Dashboard: {running.dashboard_url}"
                + (f"  (operator token: {running.operator_token})" if running.operator_token else "")
            )
            console.print("Ctrl-C stops everything.")
            stop = {"now": False}
            signal.signal(signal.SIGINT, lambda *_: stop.update(now=True))
            while not stop["now"] and not running.dead():
                time.sleep(0.5)
    except typer.Exit:
        raise
    except RuntimeError as exc:  # StoryTimeout, a child that died
        console.print(f"[red]{exc}[/red]")
        if until_done:
            typer.echo(
                json.dumps(
                    {"ok": False, "error": str(exc), "wall_seconds": round(time.monotonic() - started, 1)}
                )
            )
        raise typer.Exit(1) from exc
    finally:
        sim.stop()
