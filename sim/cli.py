"""`sweepbot sim ...`: serve the simulator, or build and play the seed scenario."""

from __future__ import annotations

import json
import threading
import time

import typer
import uvicorn

from sim.app import create_sim_app
from sim.nightly_scenario import NightlyRegressionStory
from sim.scenario import SeedScenario
from sim.world import SimSettings, World

# Not no_args_is_help: `sweepbot sim` alone serves an empty sim (the callback below, docs/sim.md).
sim_app = typer.Typer(help="Simulated GitHub + container registry + MI355X runner fleet.")
scenario_app = typer.Typer(help="Build and play scenarios.", no_args_is_help=True)
sim_app.add_typer(scenario_app, name="scenario")


def _serve(world: World, host: str, port: int) -> None:
    world.settings.base_url = f"http://{host}:{port}"
    base = world.settings.base_url
    typer.echo(f"sim GitHub API:  {base}/api/v3   (SWEEPBOT_GITHUB_API_URL)")
    typer.echo(f"sim registry:    {base}/v2/  (OCI)   {base}/hub/v2/  (Docker Hub)")
    typer.echo(f"sim admin API:   {base}/_admin/docs")
    typer.echo(f"default token:   {world.settings.default_token}")
    uvicorn.run(create_sim_app(world), host=host, port=port, log_level="warning")


@sim_app.callback(invoke_without_command=True)
def default(ctx: typer.Context) -> None:
    """With no subcommand, `sweepbot sim` serves an empty sim on 127.0.0.1:8765."""
    if ctx.invoked_subcommand is None:
        _serve(World(SimSettings(time_scale=0.01)), "127.0.0.1", 8765)


@sim_app.command("serve")
def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    port: int = typer.Option(8765, help="Port to bind."),
    seed: int = typer.Option(0, help="Seed of the performance model's noise."),
    time_scale: float = typer.Option(0.01, help="Real seconds per simulated second for runner jobs."),
    webhook_url: str | None = typer.Option(None, help="Where to POST webhook deliveries."),
    webhook_secret: str = typer.Option("sim-webhook-secret", help="HMAC secret for X-Hub-Signature-256."),
    token: str = typer.Option("sim-token", help="Default API token (acts as sweepbot[bot])."),
) -> None:
    """Serve an empty sim (drive it with the admin API)."""
    settings = SimSettings(
        seed=seed,
        time_scale=time_scale,
        webhook_url=webhook_url,
        webhook_secret=webhook_secret,
        default_token=token,
    )
    _serve(World(settings), host, port)


@scenario_app.command("seed")
def seed_scenario(
    variant: str = typer.Option("seed", help="'seed' (#47270 closed unmerged) or 'both-merge'."),
    nightly: bool = typer.Option(
        False, "--nightly", help="Also load the nightly regression story (played after the seed's steps)."
    ),
    evals_assigned: bool = typer.Option(
        False,
        "--evals-assigned",
        help="Seed a fixed e2e-tests.yml whose get-jobs assigns EVALS (the real one never does, so "
        "its `eval /` job fails unexpanded).",
    ),
    play: bool = typer.Option(False, "--play", help="Play every step, one per --interval."),
    interval: float = typer.Option(2.0, help="Seconds between steps with --play."),
    serve_: bool = typer.Option(True, "--serve/--no-serve", help="Serve the world afterwards."),
    host: str = typer.Option("127.0.0.1"),
    port: int = typer.Option(8765),
    seed: int = typer.Option(0),
    time_scale: float = typer.Option(0.01),
    webhook_url: str | None = typer.Option(None),
    webhook_secret: str = typer.Option("sim-webhook-secret"),
) -> None:
    """Build the seed story's world (and optionally play it), then serve it."""
    if variant not in ("seed", "both-merge"):
        typer.echo(f"unknown variant {variant!r}: use 'seed' or 'both-merge'", err=True)
        raise typer.Exit(2)
    settings = SimSettings(
        seed=seed, time_scale=time_scale, webhook_url=webhook_url, webhook_secret=webhook_secret
    )
    world = World(settings)
    sc = SeedScenario(world, variant, evals_assigned=evals_assigned)
    status = sc.load()
    typer.echo(json.dumps({"loaded": status["facts"], "steps": [s["name"] for s in status["steps"]]}))
    story = None
    if nightly:
        story = NightlyRegressionStory(world, registry_url=f"http://{host}:{port}/hub")
        world.nightly_story = story
        typer.echo(json.dumps({"nightly": [s["name"] for s in story.load()["steps"]]}))
    if play and not serve_:
        for entry in sc.play():
            typer.echo(json.dumps(entry))
        while story is not None and story.position < len(story.steps):
            typer.echo(json.dumps(story.step()))
        return
    if play:

        def player() -> None:
            while sc.position < len(sc.steps):
                time.sleep(interval)
                typer.echo(json.dumps(sc.step()))
            while story is not None and story.position < len(story.steps):
                time.sleep(interval)
                typer.echo(json.dumps(story.step()))

        threading.Thread(target=player, daemon=True).start()
    if serve_:
        _serve(world, host, port)
