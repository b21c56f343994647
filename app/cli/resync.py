"""``sweepbot resync [--repo O/R]``: adopt a repository's open PRs, commands and runs
(app.flows.ingest.resync)."""

from __future__ import annotations

from typing import Annotated

import typer
from sqlalchemy import select

from app.db import session_scope
from app.models.sweeps import Sweep
from app.models.tracking import Watch


def _known_repos() -> list[str]:
    """The repositories the database already holds work of (watches, sweeps)."""
    with session_scope() as session:
        repos = set(session.scalars(select(Watch.repo).distinct())) | set(
            session.scalars(select(Sweep.repo).distinct())
        )
    return sorted(r for r in repos if r and "/" in r)


def resync_command(
    repo: Annotated[
        list[str] | None,
        typer.Option("--repo", metavar="OWNER/REPO", help="Repository to adopt (repeatable)."),
    ] = None,
) -> None:
    """Read a repository's open PRs (dependency lines, unanswered commands) and recent runs and
    converge the database to them, through the handlers a delivery runs. Safe to run again."""
    from app.adapters.github.gateway import session_gateway  # lazy: PyGithub only when it runs
    from app.flows.ingest.resync import record_adopted, resync_repo  # lazy: the handlers only when it runs

    repos = list(repo or []) or _known_repos()
    bad = [r for r in repos if r.count("/") != 1 or not all(r.split("/"))]
    if bad or not repos:
        typer.echo(
            f"{bad[0]!r} is not OWNER/REPO" if bad else "no repository known yet: pass --repo OWNER/REPO",
            err=True,
        )
        raise typer.Exit(2)
    failed = 0
    for name in repos:
        with session_scope() as session:
            summary = resync_repo(session, session_gateway(session, repo=name), name, progress=typer.echo)
            record_adopted(session, summary, "cli")
        failed += len(summary.errors)
        typer.echo(
            f"{name}: {summary.pulls} PR(s), {summary.comments} unanswered command comment(s), "
            f"{summary.runs} run(s); {summary.handled} event(s) acted on, {len(summary.errors)} failed"
        )
    if failed:
        raise typer.Exit(1)
