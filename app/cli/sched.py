"""`sweepbot sched plan SNAPSHOT.json [--json]`: the priority controller's plan over a snapshot.

The same ``app.core.schedplan.plan`` the live controller calls, over a file: for operators to try a
policy and for checks. ``--json`` prints the answer (assignments, then clean-ups) on stdout and the
jobs that cannot be prioritised on stderr; without it, tables with every decision's why.
Exit status 2 with one line on stderr when the snapshot is unreadable.
"""

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from app.core.schedplan import Plan, Policy, plan
from app.core.schedsnapshot import SnapshotError, parse_snapshot

MAX_SNAPSHOT_BYTES = 32 * 1024 * 1024
DEFAULT = Policy()  # the options' defaults: the live controller's policy

sched_app = typer.Typer(help="The priority controller of the repo's GPU runners.", no_args_is_help=True)
out = Console(width=200)
err = Console(stderr=True)


def _fail(line: str) -> typer.Exit:
    err.print(line, markup=False, highlight=False, soft_wrap=True)
    return typer.Exit(2)


def _read(path: Path) -> object:
    try:
        if path.stat().st_size > MAX_SNAPSHOT_BYTES:
            raise _fail(f"{path}: larger than {MAX_SNAPSHOT_BYTES // 2**20} MiB; trim the snapshot")
        return json.loads(path.read_bytes())
    except OSError as exc:
        raise _fail(f"{path}: cannot read it ({exc.strerror}); give the path of a snapshot file") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _fail(f"{path}: not JSON ({exc}); the snapshot is one JSON object") from exc


def _avoid(pairs: list[str]) -> dict[str, frozenset[str]]:
    out_: dict[str, set[str]] = {}
    for pair in pairs:
        token, sep, runner = pair.partition("=")
        if not sep or not token or not runner:
            raise _fail(f"--avoid {pair!r}: give TOKEN=RUNNER_NAME (the job's 32-hex queue token)")
        out_.setdefault(token.lower(), set()).add(runner.lower())
    return {k: frozenset(v) for k, v in out_.items()}


def _tables(result: Plan) -> None:
    t = Table("runner", "job", "add labels", "lease", "why", title="assignments")
    for a in result.assignments:
        t.add_row(
            f"{a.runner_name} ({a.runner_id})",
            str(a.job_id),
            " ".join(a.add_labels) or "-",
            a.lease or "-",
            a.why,
        )
    out.print(t)
    c = Table("runner", "remove labels", "why", title="clean-ups")
    for x in result.cleanups:
        c.add_row(f"{x.runner_name} ({x.runner_id})", " ".join(x.remove_labels), x.why)
    out.print(c)
    q = Table("job", "PR", "effective", "parts", "runner", "why", title="queue (effective priority order)")
    for e in result.queue:
        q.add_row(
            str(e.job_id),
            str(e.pr or "-"),
            f"{e.priority.total:.2f}",
            e.priority.parts(),
            str(e.runner_id or "-"),
            e.why,
        )
    out.print(q)
    for n in result.notices:
        out.print(f"job {n.job_id} (run {n.run_id}): {n.text} ({n.why})", markup=False, highlight=False)


@sched_app.command("plan")
def plan_command(
    snapshot: Annotated[Path, typer.Argument(help="JSON: {now, jobs: [...], runners: [...]}")],
    as_json: Annotated[bool, typer.Option("--json", help="print the answer as JSON")] = False,
    aging_per_hour: Annotated[
        float, typer.Option(help="priority gained per hour queued")
    ] = DEFAULT.aging_per_hour,
    fair_share_weight: Annotated[
        float, typer.Option(help="priority lost per runner-hour a PR used recently; 0 turns it off")
    ] = DEFAULT.fair_share_weight,
    starve_after_hours: Annotated[
        float, typer.Option(help="a job queued longer goes first, oldest first; 0 turns it off")
    ] = DEFAULT.starve_after_hours or 0.0,
    canary_run: Annotated[list[int] | None, typer.Option(help="a canary's run id (repeat)")] = None,
    skip_queue_pr: Annotated[
        list[int] | None, typer.Option(help="a PR whose skip_queue is authorised")
    ] = None,
    avoid: Annotated[list[str] | None, typer.Option(help="TOKEN=RUNNER: an infra failure's runner")] = None,
) -> None:
    """Plan which idle runner gets which queued job's labels, and the stale labels to remove."""
    try:
        snap = parse_snapshot(_read(snapshot))
    except SnapshotError as exc:
        raise _fail(f"{snapshot}: {exc}") from exc
    policy = Policy(
        aging_per_hour=aging_per_hour,
        fair_share_weight=fair_share_weight,
        starve_after_hours=starve_after_hours or None,
        canary_runs=frozenset(canary_run or ()),
        skip_queue_prs=frozenset(skip_queue_pr or ()),
        avoid=_avoid(avoid or []),
    )
    result = plan(snap, policy)
    if as_json:
        typer.echo(json.dumps(result.as_json(), indent=2))
        for n in result.notices:
            err.print(f"job {n.job_id} (run {n.run_id}): {n.text} ({n.why})", markup=False, highlight=False)
        return
    _tables(result)
