"""The development commands `sweepbot` gains when this package is installed (the
`sweepbot.commands` entry point; app.cli loads it): `up`, `demo` and `sim`.

`up` is registered for every command line (it is a service command); `demo` and `sim` only when
app.cli registers its tool commands too (``tools``), as before the move.
"""

from __future__ import annotations

from typing import Annotated

import typer

from app.cli import DataDirOption, _settings, console, use_data_dir


def up(
    host: Annotated[str, typer.Option(metavar="HOST", help="Interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(metavar="PORT", help="Port of the API and dashboard")] = 8000,
    sim_port: Annotated[
        int, typer.Option(metavar="PORT", help="Port of the simulated GitHub (no credentials set)")
    ] = 8001,
    data_dir: DataDirOption = None,
) -> None:
    """API + worker + beat in one process tree on the embedded default; prints the URLs.

    With no GitHub credentials set, a simulated GitHub (with the seed world) is started and wired in.
    """
    use_data_dir(data_dir)
    _settings(writes=True)
    from devstack.launcher import run_stack  # lazy: the stack's imports only when `up` runs (start-up)

    raise typer.Exit(run_stack(host=host, port=port, sim_port=sim_port, console=console))


def register(cli: typer.Typer, tools: bool) -> None:
    """Add the development commands to the product's CLI."""
    cli.command("up")(up)
    if tools:
        from devstack.demo import demo_command  # lazy: the demo's imports only for tool commands
        from sim.cli import sim_app  # lazy: the simulator's app only for tool commands (memory)

        cli.add_typer(sim_app, name="sim", help="The simulated GitHub, registry and runners.")
        cli.command("demo")(demo_command)
