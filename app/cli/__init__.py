"""The ``sweepbot`` command line: run the service, operate it, and the offline recipe tools."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

cli = typer.Typer(
    help="sweepbot: GitHub bot and sweep scheduler for an LLM-inference benchmark repository.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Database schema (Alembic migrations).", no_args_is_help=True)
deliveries_app = typer.Typer(help="Stored webhook deliveries.", no_args_is_help=True)
cli.add_typer(db_app, name="db")
cli.add_typer(deliveries_app, name="deliveries")

console = Console()
err = Console(stderr=True)


def _settings() -> Any:
    from app.settings import SettingsError, get_settings

    try:
        settings = get_settings()
        settings.check_production()
    except (SettingsError, ValueError) as exc:
        err.print(f"[red]configuration error:[/red] {exc}")
        raise typer.Exit(2) from exc
    return settings


# ---------------------------------------------------------------------- processes


@cli.command()
def api(host: str = "127.0.0.1", port: int = 8000, migrate: bool = True) -> None:
    """Run the HTTP API (webhooks, dashboard, /api, /healthz, /readyz, /metrics)."""
    import uvicorn

    settings = _settings()
    if migrate:
        from app.migrate import upgrade

        upgrade(settings.database_url)
    uvicorn.run(
        "app.main:create_app", factory=True, host=host, port=port, log_level="warning", access_log=False
    )


@cli.command()
def worker(
    concurrency: Annotated[int, typer.Option(help="Parallel tasks")] = 2,
    pool: Annotated[str, typer.Option(help="Celery pool: prefork, threads or solo")] = "",
) -> None:
    """Run a Celery worker."""
    settings = _settings()
    from workers.celery_app import celery_app

    chosen = pool or ("threads" if settings.is_embedded else "prefork")
    celery_app.worker_main(
        [
            "worker",
            "--loglevel",
            settings.log_level,
            "--pool",
            chosen,
            "--concurrency",
            str(concurrency),
            "--without-gossip",
            "--without-mingle",
            "--hostname",
            f"sweepbot-{os.getpid()}@%h",
        ]
    )


@cli.command()
def beat() -> None:
    """Run Celery beat (reaper, polling, scheduler ticks, report flushes). Run exactly one."""
    settings = _settings()
    from workers.celery_app import celery_app

    schedule = Path(settings.data_dir) / "celerybeat-schedule"
    celery_app.start(["beat", "--loglevel", settings.log_level, "--schedule", str(schedule)])


def use_data_dir(data_dir: Path | None) -> None:
    """``--data-dir`` wins over ``SWEEPBOT_DATA_DIR`` for this process and its children."""
    if data_dir is None:
        return
    from app.settings import reset_settings_cache

    os.environ["SWEEPBOT_DATA_DIR"] = str(data_dir.resolve())
    reset_settings_cache()


DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        metavar="DIR",
        help="Where the database, logs and secrets live (default: $SWEEPBOT_DATA_DIR or ./.sweepbot)",
    ),
]


@cli.command()
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
    _settings()
    from app.launcher import run_stack

    raise typer.Exit(run_stack(host=host, port=port, sim_port=sim_port, console=console))


@db_app.command("upgrade")
def db_upgrade(revision: str = "head") -> None:
    """Apply migrations up to REVISION (default: head)."""
    settings = _settings()
    from app.migrate import upgrade as run_upgrade

    run_upgrade(settings.database_url, revision)
    console.print(f"database at revision {revision}")


# ---------------------------------------------------------------------- deliveries


def _delivery_dict(d: Any, with_payload: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": d.id,
        "event": d.event,
        "action": d.action,
        "repo": d.repo,
        "status": d.status,
        "attempts": d.attempts,
        "error": d.error,
        "bytes": d.body_bytes,
        "received_at": d.received_at.isoformat() if d.received_at else None,
        "finished_at": d.finished_at.isoformat() if d.finished_at else None,
    }
    if with_payload:
        out["payload"] = json.loads(d.body)
    return out


@deliveries_app.command("list")
def deliveries_list(
    as_json: Annotated[bool, typer.Option("--json", help="JSON array output")] = False,
    status: Annotated[str | None, typer.Option(help="Filter by status")] = None,
    event: Annotated[str | None, typer.Option(help="Filter by event")] = None,
    limit: int = 100,
) -> None:
    """List stored deliveries, newest first."""
    _settings()
    from sqlalchemy import select

    from app.db import session_scope
    from app.models import Delivery

    with session_scope() as session:
        query = select(Delivery).order_by(Delivery.received_at.desc()).limit(limit)
        if status:
            query = query.where(Delivery.status == status)
        if event:
            query = query.where(Delivery.event == event)
        rows = [_delivery_dict(d) for d in session.execute(query).scalars()]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table("id", "event", "action", "repo", "status", "attempts", "error")
    for r in rows:
        table.add_row(
            r["id"],
            r["event"],
            r["action"] or "",
            r["repo"] or "",
            r["status"],
            str(r["attempts"]),
            (r["error"] or "")[:60],
        )
    console.print(table)


@deliveries_app.command("show")
def deliveries_show(delivery_id: str) -> None:
    """Show one delivery with its payload."""
    _settings()
    from app.db import session_scope
    from app.models import Delivery

    with session_scope() as session:
        d = session.get(Delivery, delivery_id)
        if d is None:
            err.print(f"no delivery with id {delivery_id!r}: see `sweepbot deliveries list`")
            raise typer.Exit(2)
        typer.echo(json.dumps(_delivery_dict(d, with_payload=True), indent=2))


@deliveries_app.command("replay")
def deliveries_replay(delivery_id: str, actor: str = "cli") -> None:
    """Process a stored delivery again (handlers converge, so this is safe)."""
    _settings()
    from app.db import session_scope
    from app.ingest import replay

    with session_scope() as session:
        try:
            replay(session, delivery_id, actor=actor)
        except (LookupError, ValueError) as exc:
            err.print(str(exc))
            raise typer.Exit(2) from exc
    console.print(f"delivery {delivery_id} queued again")


def _register_capabilities() -> None:
    from app.cli.deps import deps_app
    from app.cli.recipe import recipe_app
    from app.cli.report import gap_command, report_command
    from app.cli.sweep import queue_command, sweep_app
    from app.demo import demo_command
    from sim.cli import sim_app

    cli.add_typer(recipe_app, name="recipe", help="Benchmark-repo files: plan, bump, changelog.")
    cli.add_typer(deps_app, name="deps", help="Upstream dependencies and nightlies.")
    cli.add_typer(sweep_app, name="sweep", help="Sweeps: create, status, cancel.")
    cli.command("queue")(queue_command)
    cli.command("report")(report_command)
    cli.command("gap")(gap_command)
    cli.add_typer(sim_app, name="sim", help="The simulated GitHub, registry and runners.")
    cli.command("demo")(demo_command)


_register_capabilities()


def main() -> None:
    from app.logging import configure
    from app.settings import get_settings

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        settings = get_settings()
        configure(settings.log_level, settings.log_json)  # JSON lines on stderr; stdout is the command's
    except ValueError:
        pass  # a bad setting is reported by the command itself, with the fix
    from sqlalchemy.exc import OperationalError, ProgrammingError

    try:
        cli()
    except (OperationalError, ProgrammingError) as exc:
        text = str(exc.orig) if exc.orig is not None else str(exc)
        if "no such table" in text or "does not exist" in text:
            err.print(f"the database has no sweepbot schema yet ({text}): run `sweepbot db upgrade` first")
            raise SystemExit(2) from exc
        raise


__all__ = ["cli", "main"]
