"""`sweepbot sweep create|status|cancel` and `sweepbot queue` (registered by app/cli/__init__.py)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from rich.progress_bar import ProgressBar
from rich.table import Table

if TYPE_CHECKING:  # types only: the CLI loads the gateway when a command runs (start-up)
    from sqlalchemy.orm import Session

    from app.adapters.github.gateway import GitHubGateway

sweep_app = typer.Typer(help="Create, inspect and cancel benchmark sweeps.", no_args_is_help=True)
console = Console()
OPERATOR = "cli"


def _out() -> Console:
    """The terminal's console; piped output gets a wide one so ids, repos and keys are not cut."""
    return console if console.is_terminal else Console(width=max(console.width, 200))


def _parse_conc(value: str | None) -> tuple[tuple[int, ...] | None, tuple[int, int] | None]:
    if not value:
        return None, None
    try:
        if ".." in value:
            lo, hi = value.split("..", 1)
            return None, (int(lo), int(hi))
        return tuple(int(v) for v in value.split(",") if v.strip()), None
    except ValueError:
        raise typer.BadParameter(f"--conc {value!r}: use a list (32,64) or a range (4..256)") from None


NO_CREDENTIALS = (
    "no GitHub credentials: `sweepbot sweep {verb}` reads the PR and writes to GitHub; set "
    "SWEEPBOT_GITHUB_TOKEN (or SWEEPBOT_GITHUB_APP_ID with SWEEPBOT_GITHUB_APP_PRIVATE_KEY_PATH), "
    "or run `sweepbot up` for the simulated GitHub and comment `/sweep` on its PR"
)


def _require_credentials(verb: str) -> None:
    """Refuse in one line, before any request, a command that must talk to GitHub without a way to."""
    from app.settings import get_settings  # lazy: loaded when the command runs (start-up)

    if not get_settings().has_github_credentials:
        _fail(NO_CREDENTIALS.format(verb=verb))


def _gateway(session: Session) -> GitHubGateway:
    from app.adapters.github.gateway import session_gateway  # lazy: loaded when the command runs (start-up)

    return session_gateway(session, actor=OPERATOR)


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _ring_tick() -> None:
    """Ask a worker for a scheduler tick now, after the commit (beat would get there too, later)."""
    from app.flows.sweeps.ring import tick_later  # lazy: loaded when the command runs (start-up)

    tick_later()


@sweep_app.command("create")
def create(
    repo: Annotated[str, typer.Option(help="OWNER/NAME of the benchmark repo")],
    pr: Annotated[int, typer.Option(help="pull request number")],
    key: Annotated[str, typer.Option(help="config key to sweep")],
    conc: Annotated[str | None, typer.Option(help="32,64 or 4..256")] = None,
    seq: Annotated[str | None, typer.Option(help="1k1k, 8k1k or <isl>_<osl>")] = None,
    tp: Annotated[int | None, typer.Option(help="only this tensor parallelism")] = None,
    priority: Annotated[str, typer.Option(help="high, normal or low")] = "normal",
) -> None:
    """Queue one job per point of KEY at the PR's head."""
    from app.adapters.github.errors import (  # lazy: loaded when the command runs (start-up)
        GitHubError,
        NotFound,
    )
    from app.core.routing import TransientError  # lazy: loaded when the command runs (start-up)
    from app.core.sweepspec import REPO_RE, SweepError, SweepFilters  # lazy: start-up
    from app.db import session_scope  # lazy: loaded when the command runs (start-up)
    from app.flows.sweeps.request import request_sweep  # lazy: loaded when the command runs (start-up)

    if not REPO_RE.match(repo):
        _fail(f"--repo {repo!r}: write it as OWNER/NAME, e.g. SemiAnalysisAI/InferenceX")
    _require_credentials("create")
    conc_list, conc_range = _parse_conc(conc)
    try:
        with session_scope() as session:
            req = request_sweep(
                session,
                _gateway(session),
                repo=repo,
                pr_number=pr,
                config_key=key,
                requested_by=OPERATOR,
                reason="api",
                priority=priority,
                filters=SweepFilters(seq=seq, conc=conc_list, conc_range=conc_range, tp=tp),
            )
            reply = req.reply
    except SweepError as exc:
        _fail(str(exc))
    except NotFound:
        _fail(f"{repo}#{pr} was not found: check --repo and --pr (and that the token can read the repo)")
    except GitHubError as exc:
        _fail(f"GitHub refused a request while planning {repo}#{pr}: {exc}")
    except TransientError as exc:
        _fail(
            f"GitHub could not be reached while planning {repo}#{pr} ({exc}): check SWEEPBOT_GITHUB_API_URL"
        )
    typer.echo(reply)
    _ring_tick()


@sweep_app.command("status")
def status(
    sweep_id: int, as_json: Annotated[bool, typer.Option("--json", help="machine-readable")] = False
) -> None:
    """Show a sweep and its jobs."""
    from app.core.sweepspec import SweepError  # lazy: loaded when the command runs (start-up)
    from app.db import session_scope  # lazy: loaded when the command runs (start-up)
    from app.flows.sweeps.views import sweep_summary  # lazy: loaded when the command runs (start-up)

    try:
        with session_scope() as session:
            summary = sweep_summary(session, sweep_id)
    except SweepError as exc:
        _fail(str(exc))
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    out = _out()
    out.print(
        f"[bold]sweep {summary['id']}[/] {summary['repo']}#{summary['pr']} `{summary['config_key']}` "
        f"at {summary['head_sha'][:7]}: [bold]{summary['state']}[/] "
        f"({summary['done']}/{summary['total']} done)"
    )
    if summary["state_reason"]:
        out.print(f"  {summary['state_reason']}")
    # Rows read as a curve (ascending conc); "order" is when the scheduler releases each point.
    table = Table("job", "seq", "tp", "conc", "order", "state", "tries", "run / result", "reason")
    for job in summary["jobs"]:
        table.add_row(
            str(job["id"]),
            job["seq"],
            str(job["tp"]),
            str(job["conc"]),
            str(job["position"] + 1),
            job["state"],
            str(job["attempts"]),
            job["result_url"] or job["run_url"] or "",
            job["reason"] or "",
        )
    out.print(table)


@sweep_app.command("cancel")
def cancel(
    sweep_id: int,
    reason: Annotated[str, typer.Option(help="why, for the audit log")] = "cancelled from the CLI",
) -> None:
    """Cancel queued jobs and running runs of a sweep."""
    from app.core.sweepspec import SweepError  # lazy: loaded when the command runs (start-up)
    from app.db import session_scope  # lazy: loaded when the command runs (start-up)
    from app.flows.sweeps.cancel import cancel_sweep  # lazy: loaded when the command runs (start-up)

    try:
        with session_scope() as session:
            sweep = cancel_sweep(session, _gateway(session), sweep_id, actor=OPERATOR, reason=reason)
            line = f"sweep {sweep.id}: {sweep.state}"
    except SweepError as exc:
        _fail(str(exc))
    typer.echo(line)
    _ring_tick()  # the freed runners can take other sweeps' jobs now


def queue_command(as_json: Annotated[bool, typer.Option("--json", help="machine-readable")] = False) -> None:
    """Per runner label: busy / free / queued, with each open sweep's progress."""
    from app.db import session_scope  # lazy: loaded when the command runs (start-up)
    from app.flows.sweeps.views import queue_snapshot  # lazy: loaded when the command runs (start-up)

    with session_scope() as session:
        snapshot = queue_snapshot(session, _gateway(session))
    if as_json:
        typer.echo(json.dumps(snapshot, indent=2))
        return
    out = _out()
    if not snapshot:
        out.print("No runner label has work.")
        return
    for label in snapshot:
        paused = " [red]paused[/]" if label["paused"] else ""
        out.print(
            f"[bold]{label['label']}[/]{paused}: {label['busy']} busy / {label['free']} free / "
            f"{label['queued']} queued (capacity {label['capacity']}, {label['capacity_source']})"
        )
        table = Table("sweep", "PR", "key", "state", "progress", "done", "running", "queued", box=None)
        for sw in label["sweeps"]:
            table.add_row(
                str(sw["id"]),
                f"{sw['repo']}#{sw['pr']}",
                sw["config_key"],
                sw["state"],
                ProgressBar(total=max(1, sw["total"]), completed=sw["done"], width=24),
                f"{sw['done']}/{sw['total']}",
                str(sw["running"]),
                str(sw["queued"]),
            )
        out.print(table)
