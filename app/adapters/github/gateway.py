"""The one gateway to GitHub, and how handlers, tasks and the CLI get one.

``GitHubGateway`` is every resource family's calls over the shared plumbing
(``app.adapters.github.base``); ``gateway``/``session_gateway`` give it process-wide credentials
and audit its writes in the caller's session.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.adapters.github.actions import ActionsGateway, RunnersGateway
from app.adapters.github.credentials import AppCredentials, credentials
from app.adapters.github.gitdata import GitDataGateway
from app.adapters.github.hooks import HooksGateway
from app.adapters.github.issues import IssuesGateway
from app.adapters.github.repos import ReposGateway
from app.settings import Settings, get_settings
from app.store.audit import Mark, record_outside, settle_outside
from app.store.auditspool import AuditSpool


class GitHubGateway(
    ReposGateway, GitDataGateway, IssuesGateway, ActionsGateway, RunnersGateway, HooksGateway
):
    """Plain-``dict`` calls to every GitHub resource the bot uses; errors as ``errors`` says."""


# The audit actor of every GitHub write: the bot's own credentials make it.
BOT_ACTOR = "sweepbot"


class SessionAudit:
    """GitHub writes audited in the database (``app/store/audit.py``): a ``pending`` row committed
    ahead of the write, then its outcome. Every write goes out with the bot's credentials, so
    the row's actor is the bot; ``actor`` is whose action caused it (``caused_by``)."""

    def __init__(self, session: Session, *, actor: str, delivery_id: str | None, settings: Settings) -> None:
        self._session, self._actor, self._delivery_id = session, actor, delivery_id
        self._spool = AuditSpool(settings.data_dir / "audit-spool")

    def before(self, action: str, target: str) -> Mark:
        return record_outside(
            self._session,
            actor=BOT_ACTOR,
            caused_by=self._actor,
            action=action,
            target=target,
            outcome="pending",
            detail={},
            delivery_id=self._delivery_id,
            spool=self._spool,
        )

    def after(self, mark: object, outcome: str, detail: dict[str, Any]) -> None:
        assert isinstance(mark, Mark)
        settle_outside(self._session, mark, outcome=outcome, detail=detail, spool=self._spool)


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
    audit = (
        None
        if session is None
        else SessionAudit(session, actor=actor, delivery_id=delivery_id, settings=settings)
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
