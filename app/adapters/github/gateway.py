"""The one gateway to GitHub, and how handlers, tasks and the CLI get one.

``GitHubGateway`` is every resource family's calls over the shared plumbing
(``app.adapters.github.base``); ``gateway``/``session_gateway`` give it process-wide credentials
and audit its writes in the caller's session.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.adapters.github.actions import ActionsGateway
from app.adapters.github.base import AuditHook
from app.adapters.github.credentials import AppCredentials, credentials
from app.adapters.github.gitdata import GitDataGateway
from app.adapters.github.hooks import HooksGateway
from app.adapters.github.issues import IssuesGateway
from app.adapters.github.repos import ReposGateway
from app.settings import Settings, get_settings
from app.store.audit import record_outside
from app.store.auditspool import AuditSpool


class GitHubGateway(ReposGateway, GitDataGateway, IssuesGateway, ActionsGateway, HooksGateway):
    """Plain-``dict`` calls to every GitHub resource the bot uses; errors as ``errors`` says."""


# The audit actor of every GitHub write: the bot's own credentials make it.
BOT_ACTOR = "sweepbot"


def gateway(
    settings: Settings,
    session: Session | None = None,
    *,
    actor: str = "sweepbot",
    delivery_id: str | None = None,
    installation_id: int | None = None,
    repo: str | None = None,
) -> GitHubGateway:
    """A gateway whose writes are audited in ``session`` (when given) and whose GETs are cached there.

    Every write goes out with the bot's credentials, so the audit row's actor is the bot;
    ``actor`` is whose action caused the writes (a maintainer's command, an operator) and is
    recorded as ``caused_by``.

    ``installation_id``/``repo``: the installation a delivery's payload names and its repository
    (for a GitHub App, that installation acts for that repository and for non-repository calls).
    """
    audit: AuditHook | None = None
    if session is not None:
        spool = AuditSpool(settings.data_dir / "audit-spool")

        def audit(action: str, target: str, detail: dict[str, Any]) -> None:
            record_outside(
                session,
                actor=BOT_ACTOR,
                caused_by=actor,
                action=action,
                target=target,
                outcome="ok",
                detail=detail,
                delivery_id=delivery_id,
                spool=spool,
            )

    creds = credentials(settings)
    if isinstance(creds, AppCredentials):
        creds.learn(repo, installation_id)
    return GitHubGateway(
        creds,
        cache_session=session,
        audit=audit,
        installation_id=installation_id,
        consistency_delays=tuple(settings.github_consistency_delays),
    )


def session_gateway(
    session: Session,
    *,
    actor: str = "sweepbot",
    delivery_id: str | None = None,
    installation_id: int | None = None,
    repo: str | None = None,
) -> GitHubGateway:
    """``gateway`` with the settings in force: what handlers, tasks and the CLI use."""
    return gateway(
        get_settings(),
        session,
        actor=actor,
        delivery_id=delivery_id,
        installation_id=installation_id,
        repo=repo,
    )
