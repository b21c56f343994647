"""``sweepbot deps status [--json]``: every watch with its dependencies and chosen nightly."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from app.db import session_scope
from app.flows.tracking.watches import deps_status

deps_app = typer.Typer(
    help="Upstream dependencies of recipe PRs (watches, nightlies, bumps).", no_args_is_help=True
)


@deps_app.callback()
def _group() -> None:
    """Upstream dependencies of recipe PRs (a group, so `deps status` works alone or mounted)."""


@deps_app.command("status")
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Every watch: its config key, dependencies (state, merge commit), chosen nightly, and next step."""
    with session_scope() as session:
        rows = deps_status(session)
    if as_json:
        typer.echo(json.dumps(rows, indent=2, default=str))
        return
    if not rows:
        typer.echo("no watches")
        return
    for row in rows:
        where = f"{row['repo']}#{row['pr']}" if row["pr"] else f"{row['repo']} (bot config)"
        typer.echo(f"{where}  {row['config_key']}  [{row['state']}]")
        pinned = row["pinned_image"] or "-"
        if row["pinned_deleted"]:
            pinned += "  (DELETED from the registry)"
        typer.echo(f"  pinned:  {pinned}")
        chosen = row["chosen_nightly"] or "none yet"
        typer.echo(
            f"  nightly: {chosen}" + ("  (chosen and pinned by the bump)" if row.get("bumped") else "")
        )
        if row.get("newest_containing"):
            typer.echo(
                f"  newer:   {row['newest_containing']}  (also contains every dependency; not bumped to, "
                "a bump happens once)"
            )
        for dep in row["dependencies"]:
            sha = f" @ {dep['merge_sha'][:7]}" if dep["merge_sha"] else ""
            dropped = "  (dropped)" if dep["dropped"] else ""
            typer.echo(f"  - {dep['ref']}: {dep['state']}{sha}{dropped}")
        if row["reason"]:
            typer.echo(f"  next:    {row['reason']}")
