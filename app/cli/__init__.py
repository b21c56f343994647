"""The ``sweepbot`` command line: run the service, operate it, and the offline recipe tools."""

from __future__ import annotations

import copy
import errno
import json
import os
import signal
import socket
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperArgument, TyperOption

from app.cli.errors import (
    EXIT_USAGE,
    database_failure,
    resolve_prefix,
    settings_error,
    short_ids,
    url_error,
)

if TYPE_CHECKING:  # types only: the offline tools (recipe, gap) never load the settings (bench/cli.py)
    from rich.console import Console

    from app.settings import Settings

cli = typer.Typer(
    help="sweepbot: GitHub bot and sweep scheduler for an LLM-inference benchmark repository.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Database schema (Alembic migrations).", no_args_is_help=True)
deliveries_app = typer.Typer(help="Stored webhook deliveries.", no_args_is_help=True)
cli.add_typer(db_app, name="db")
cli.add_typer(deliveries_app, name="deliveries")


class _LazyConsole:
    """A rich Console made on first use: the offline tools print through typer and never pay for
    importing rich (bench/cli.py); typer loads it itself for help and usage errors."""

    def __init__(self, *, stderr: bool = False) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console  # lazy: not for the offline tools (start-up)

            self._console = Console(stderr=self._stderr)
        return getattr(self._console, name)


console: Any = _LazyConsole()
err: Any = _LazyConsole(stderr=True)


def _fail(line: str) -> typer.Exit:
    """Print one line on stderr (no markup: it may quote user input) and exit 2."""
    err.print(line, markup=False, highlight=False, soft_wrap=True)
    return typer.Exit(EXIT_USAGE)


def _settings(*, writes: bool = False) -> Any:
    """The settings, checked; ``writes``: this command writes into the data dir (create it)."""
    from sqlalchemy.engine import make_url  # lazy: loaded when the command runs (start-up)
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError  # lazy: start-up

    from app.settings import SettingsError, ensure_data_dir, get_settings  # lazy: start-up

    try:
        settings = get_settings()
        settings.check_production()
    except (SettingsError, ValueError) as exc:
        raise _fail(settings_error(exc)) from exc
    try:
        make_url(settings.database_url).get_dialect()
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        raise _fail(url_error(exc, settings.database_url)) from exc
    if writes:
        ensure_data_dir(settings)
    return settings


# ---------------------------------------------------------------------- processes


def listening_socket(host: str, port: int) -> socket.socket:
    """The API's socket, bound here (not by uvicorn) so that a busy port is one line naming the
    flag, and the address printed is the one actually bound (``--port 0`` picks a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise _fail(
                f"cannot listen on {host}:{port}: address already in use; stop what listens there, "
                "or choose another port with --port"
            ) from exc
        raise _fail(f"cannot listen on {host}:{port} ({exc.strerror}): choose another with --host") from exc
    sock.listen(2048)  # connections wait in the backlog until the server takes them (no refusal)
    return sock


@cli.command()
def api(host: str = "127.0.0.1", port: int = 8000, migrate: bool = True) -> None:
    """Run the HTTP API (webhooks, dashboard, /api, /healthz, /readyz, /metrics)."""
    import uvicorn  # lazy: loaded when this command runs (CLI start-up time and the up processes' memory)

    settings = _settings(writes=True)
    sock = listening_socket(host, port)
    if migrate:
        from app.migrate import upgrade  # lazy: loaded when the command runs (start-up)

        upgrade(settings.database_url)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    console.print(
        f"sweepbot API listening on http://{shown}:{bound}/ (webhooks /webhooks/github, "
        "health /healthz, metrics /metrics)",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    config = uvicorn.Config("app.web.main:create_app", factory=True, log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


@cli.command()
def worker(
    concurrency: Annotated[int, typer.Option(help="Parallel tasks")] = 2,
    pool: Annotated[str, typer.Option(help="Celery pool: prefork, threads or solo")] = "",
    beat: Annotated[
        bool, typer.Option("--beat", help="Also run beat, as a thread (only where no other beat runs)")
    ] = False,
) -> None:
    """Run a Celery worker."""
    settings = _settings(writes=True)
    from workers.celery_app import celery_app, periodic_queue  # lazy: loaded when the command runs (start-up)

    if beat:
        from workers.embedded_beat import embed_beat  # lazy: loaded when the command runs (start-up)

        embed_beat(celery_app, beat_schedule_path(settings))
    chosen = pool or ("threads" if settings.is_embedded else "prefork")
    celery_app.worker_main(
        [
            "--quiet",  # no banner: the log is JSON events (worker_ready says what the banner did)
            "worker",
            "--queues",
            f"{settings.queue_name},{periodic_queue(settings.queue_name)}",
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


def beat_schedule_path(settings: Settings) -> Path:
    """Where beat keeps when each periodic task last ran (separate or embedded, the same file)."""
    return Path(settings.data_dir) / "celerybeat-schedule"


@cli.command()
def beat() -> None:
    """Run Celery beat (reaper, polling, scheduler ticks, report flushes). Run exactly one."""
    settings = _settings(writes=True)
    from workers.celery_app import celery_app  # lazy: loaded when the command runs (start-up)

    schedule = beat_schedule_path(settings)
    # Beat sends its schedule by task name (Celery's send_task for a task it does not know), so it
    # needs none of the task modules: not importing them (the whole app) saves ~45 MB (bench/memory.py).
    celery_app.conf.include = []
    celery_app.start(["--quiet", "beat", "--loglevel", settings.log_level, "--schedule", str(schedule)])


def use_data_dir(data_dir: Path | None) -> None:
    """``--data-dir`` wins over ``SWEEPBOT_DATA_DIR`` for this process and its children."""
    from app.settings import reset_settings_cache  # lazy: the offline tools never load settings

    if data_dir is None:
        return
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


@db_app.command("upgrade")
def db_upgrade(revision: str = "head") -> None:
    """Apply migrations up to REVISION (default: head)."""
    settings = _settings(writes=True)
    from app.migrate import upgrade as run_upgrade  # lazy: loaded when the command runs (start-up)

    run_upgrade(settings.database_url, revision)
    console.print(f"database at revision {revision}")
    if settings.broker_url.startswith("sqla+"):
        from app.adapters.broker import declare_embedded_queues  # lazy: loaded when the command runs

        # Created here, once, before the API and the worker start (both would create them).
        declare_embedded_queues()


@db_app.command("current")
def db_current() -> None:
    """The revision the database is at, and whether migrations are pending (exit 1 if so)."""
    settings = _settings()
    from app.cli.errors import redact_url  # lazy: loaded when the command runs (start-up)
    from app.migrate import current_revision, head_revision  # lazy: loaded when the command runs

    at, head = current_revision(settings.database_url), head_revision()
    where = redact_url(settings.database_url)
    if at == head:
        console.print(f"{where}: at revision {at} (head)", markup=False, highlight=False, soft_wrap=True)
        return
    state = "has no sweepbot schema yet" if at is None else f"is at revision {at}"
    console.print(
        f"{where} {state}; the code's head is {head}: run `sweepbot db upgrade`",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    raise typer.Exit(1)


@db_app.command("history")
def db_history() -> None:
    """Every migration, newest first (the database's current one marked)."""
    settings = _settings()
    from app.migrate import current_revision, history  # lazy: loaded when the command runs (start-up)

    try:
        at = current_revision(settings.database_url)
    except Exception:  # no database yet: the list stands alone
        at = None
    for revision, down, title in history():
        mark = "  <- current" if revision == at else ""
        console.print(
            f"{revision}  (after {down or 'nothing'})  {title}{mark}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


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


class DeliveryStatusChoice(StrEnum):
    """The statuses a stored delivery can be in (app.models.core.DeliveryStatus)."""

    received = "received"
    queued = "queued"
    processing = "processing"
    retry = "retry"
    done = "done"
    ignored = "ignored"
    failed = "failed"


DELIVERY_STATUSES = tuple(s.value for s in DeliveryStatusChoice)


def _resolve_delivery(session: Any, delivery_id: str) -> str:
    """The full id of the delivery ``delivery_id`` names: an exact id, or a unique prefix of one
    (what `deliveries list` prints)."""
    from sqlalchemy import select  # lazy: loaded when the command runs (start-up)

    from app.models import Delivery  # lazy: loaded when the command runs (start-up)

    if session.get(Delivery, delivery_id) is not None:
        return delivery_id
    candidates = list(
        session.scalars(
            select(Delivery.id).where(Delivery.id.startswith(delivery_id, autoescape=True)).limit(6)
        )
    )
    try:
        return resolve_prefix(delivery_id, candidates, "delivery", "sweepbot deliveries list")
    except LookupError as exc:
        raise _fail(str(exc)) from exc


@deliveries_app.command("list")
def deliveries_list(
    as_json: Annotated[bool, typer.Option("--json", help="JSON array output (full ids)")] = False,
    status: Annotated[
        DeliveryStatusChoice | None,
        typer.Option(
            metavar="STATUS", help="Only deliveries in this status: " + ", ".join(DELIVERY_STATUSES)
        ),
    ] = None,
    event: Annotated[
        str | None, typer.Option(metavar="EVENT", help="Only this event, e.g. pull_request")
    ] = None,
    limit: Annotated[int, typer.Option(metavar="N", help="At most N deliveries")] = 100,
) -> None:
    """List stored deliveries, newest first. The ids shown are short: `show` and `replay` take
    any unique prefix."""
    _settings()
    from sqlalchemy import select  # lazy: loaded when the command runs (start-up)

    from app.db import session_scope  # lazy: loaded when the command runs (start-up)
    from app.models import Delivery  # lazy: loaded when the command runs (start-up)

    with session_scope() as session:
        query = select(Delivery).order_by(Delivery.received_at.desc()).limit(limit)
        if status:
            query = query.where(Delivery.status == status.value)
        if event:
            query = query.where(Delivery.event == event)
        rows = [_delivery_dict(d) for d in session.execute(query).scalars()]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    short = short_ids([r["id"] for r in rows])
    from rich.table import Table  # lazy: not for the offline tools (start-up)

    table = Table("id", "event", "action", "repo", "status", "attempts", "error")
    table.columns[0].no_wrap = True
    for r in rows:
        table.add_row(
            short[r["id"]],
            r["event"],
            r["action"] or "",
            r["repo"] or "",
            r["status"],
            str(r["attempts"]),
            (r["error"] or "")[:60],
        )
    console.print(table)


@deliveries_app.command("show")
def deliveries_show(
    delivery_id: Annotated[
        str, typer.Argument(metavar="ID", help="A delivery id, or a unique prefix of one")
    ],
) -> None:
    """Show one delivery with its payload."""
    _settings()
    from app.db import session_scope  # lazy: loaded when the command runs (start-up)
    from app.models import Delivery  # lazy: loaded when the command runs (start-up)

    with session_scope() as session:
        d = session.get(Delivery, _resolve_delivery(session, delivery_id))
        typer.echo(json.dumps(_delivery_dict(d, with_payload=True), indent=2))


@deliveries_app.command("replay")
def deliveries_replay(
    delivery_id: Annotated[
        str, typer.Argument(metavar="ID", help="A delivery id, or a unique prefix of one")
    ],
    actor: Annotated[str, typer.Option(metavar="NAME", help="Recorded in the audit log")] = "cli",
) -> None:
    """Process a stored delivery again (handlers converge, so this is safe)."""
    _settings()
    from app.db import session_scope  # lazy: loaded when the command runs (start-up)
    from app.flows.ingest.deliveries import replay  # lazy: loaded when the command runs (start-up)

    with session_scope() as session:
        full = _resolve_delivery(session, delivery_id)
        try:
            replay(session, full, actor=actor)
        except (LookupError, ValueError) as exc:
            raise _fail(str(exc)) from exc
    console.print(f"delivery {full} queued again", markup=False, highlight=False)


def _register_recipe() -> None:
    from app.cli.recipe import recipe_app  # lazy: registered only when the command runs (start-up)

    cli.add_typer(recipe_app, name="recipe", help="Benchmark-repo files: plan, bump, changelog.")


def _register_deps() -> None:
    from app.cli.deps import deps_app  # lazy: registered only when the command runs (start-up)

    cli.add_typer(deps_app, name="deps", help="Upstream dependencies and nightlies.")


def _register_sweep() -> None:
    from app.cli.sweep import queue_command, sweep_app  # lazy: registered only when it runs (start-up)

    cli.add_typer(sweep_app, name="sweep", help="Sweeps: create, status, cancel.")
    cli.command("queue")(queue_command)


def _register_sched() -> None:
    from app.cli.sched import sched_app  # lazy: registered only when the command runs (start-up)

    cli.add_typer(sched_app, name="sched", help="The priority controller of the repo's GPU runners.")


def _register_reports() -> None:
    from app.cli.report import gap_command, report_command  # lazy: registered only when it runs

    cli.command("report")(report_command)
    cli.command("gap")(gap_command)


def _register_resync() -> None:
    from app.cli.resync import resync_command  # lazy: registered only when the command runs (start-up)

    cli.command("resync")(resync_command)


# The tool subcommands by name, in --help order. A run of one of them registers (imports) only it:
# `sweepbot recipe ...` and `sweepbot gap` load no service code (no web framework, ORM, broker or
# simulator; bench/cli.py, tests/cli/test_cli_imports.py). The long-running processes (`up` and the
# api, worker and beat it starts) register none (bench/memory.py, docs/benchmarks.md "Memory").
CAPABILITIES = {
    "recipe": _register_recipe,
    "deps": _register_deps,
    "sweep": _register_sweep,
    "queue": _register_sweep,
    "sched": _register_sched,
    "report": _register_reports,
    "gap": _register_reports,
    "resync": _register_resync,
}
SERVICE_COMMANDS = ("up", "api", "worker", "beat")
# The offline tools read files only, never a setting: a bad SWEEPBOT_* value does not stop them.
OFFLINE_COMMANDS = ("recipe", "gap")
# Commands this module defines itself: a run of one registers no tool and loads no extension
# (`db current` went from 2.0 to about 0.8 s of CPU; scripts and the suite call these often).
OWN_COMMANDS = ("db", "deliveries")


def _register_capabilities(only: str | None = None) -> None:
    done: set[Any] = set()
    for name, register in CAPABILITIES.items():
        if (only is None or name == only) and register not in done:
            register()
            done.add(register)


_FIRST = sys.argv[1] if len(sys.argv) > 1 else None
TOOLS = False  # every tool command registered (help, or a command this module does not know)
if _FIRST in CAPABILITIES:
    _register_capabilities(_FIRST)
elif _FIRST in OWN_COMMANDS:
    pass
elif _FIRST not in SERVICE_COMMANDS or "--help" in sys.argv:
    _register_capabilities()
    TOOLS = True


# Commands from outside the product package: the `sweepbot.commands` entry points, each a
# `register(cli, tools)` (devstack.cli: `up`, `demo`, `sim`, which wire the product to the
# simulator; `demo` and `sim` only with ``tools``). A product command (`recipe`, `gap` ...) loads none.
# An install without that package (the Docker image) has none of them.
EXTENSIONS = "sweepbot.commands"
if _FIRST not in CAPABILITIES and _FIRST not in OWN_COMMANDS:
    from importlib.metadata import entry_points  # lazy: 15 ms the offline tools never need (start-up)

    for _ep in entry_points(group=EXTENSIONS):
        try:
            _ep.load()(cli, TOOLS)
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] != _ep.value.split(".")[0]:
                raise  # the package is there and broken: say so
            continue  # the entry point's package is not installed here


def _with_metavars(command: Any) -> Any:
    """Help in the usual Unix style: ``FILE KEY`` for arguments and ``--seq SEQ`` for options
    (a parameter's upper-cased name unless it names its own metavar), no ``<str>``/``{file}``."""

    def usage_pieces(param: Any) -> Any:
        return lambda ctx: [param.metavar if param.required else f"[{param.metavar}]"]

    def no_type(param: Any, ctx: Any) -> str:
        return ""

    for param in command.params:
        if isinstance(param, TyperArgument):
            if param.metavar is None:
                param.metavar = (param.name or "ARG").upper()
            setattr(param, "get_usage_pieces", usage_pieces(param))  # noqa: B010 (instance override)
            # The help's type column (`<path>`, `<str>`): none, the name column says it. Its own
            # copy of the type (click.STRING is shared), converting as before.
            param.type = copy.copy(param.type)
            setattr(param.type, "get_metavar", no_type)  # noqa: B010 (instance override)
        elif isinstance(param, TyperOption) and param.is_flag:
            param.metavar = ""  # a flag takes no value: show none
        elif isinstance(param, TyperOption) and param.metavar is None:
            param.metavar = (param.name or "VALUE").upper()
    help_option = command.get_help_option

    def quiet_help(ctx: Any) -> Any:
        option = help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option

    setattr(command, "get_help_option", quiet_help)  # noqa: B010
    for sub in getattr(command, "commands", {}).values():
        _with_metavars(sub)
    return command


def build_command() -> Any:
    """The click command ``sweepbot`` runs: the Typer app, with Unix-style metavariables."""
    return _with_metavars(typer.main.get_command(cli))


def main() -> None:

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    command = sys.argv[1] if len(sys.argv) > 1 else None
    if command in OFFLINE_COMMANDS:
        build_command()(prog_name="sweepbot")  # files in, text out: no settings, no database
        return
    _service_main(command)


def _service_main(command: str | None) -> None:
    """The commands that read settings (and maybe a database): one line for a bad setting or an
    unusable database, whatever the command."""
    from app.instance import adopt_running_instance  # lazy: not for the offline tools (start-up)
    from app.logging import configure  # lazy: not for the offline tools (start-up)
    from app.settings import get_settings, reset_settings_cache  # lazy: not for the offline tools

    # The operating commands read the database of the instance running in this data dir (with
    # the simulator: the world's own under <data dir>/sim/), as its dashboard does.
    adopt_running_instance(os.environ, command)
    reset_settings_cache()
    url = ""
    try:
        settings = get_settings()
        url = settings.database_url
        configure(settings.log_level, settings.log_json)  # JSON lines on stderr; stdout is the command's
        settings.check_key_file()
    except ValueError as exc:
        if "--help" not in sys.argv:
            err.print(settings_error(exc), markup=False, highlight=False, soft_wrap=True)
            raise SystemExit(EXIT_USAGE) from exc
    try:
        build_command()(prog_name="sweepbot")
    except Exception as exc:
        line = database_failure(exc, url)
        if line is None:
            raise
        # Unreachable server, wrong credentials, no schema yet: one line and the fix, no traceback.
        err.print(line, markup=False, highlight=False, soft_wrap=True)
        raise SystemExit(EXIT_USAGE) from exc


__all__ = ["cli", "main"]
