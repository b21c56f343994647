"""The reuse comment handler: a bot's comment (the report's own offer) reads nothing; a person's
`/reuse-sweep-run` is audited and judged again."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.routing import Event, HandlerContext, HandlerSkipped
from app.flows.results import merge_reuse as mergereuse
from app.models import AuditEntry

REPO = "SemiAnalysisAI/InferenceX"


def _event(user: dict[str, Any], body: str = "/reuse-sweep-run 11") -> Event:
    payload = {
        "repository": {"full_name": REPO},
        "sender": user,
        "issue": {"number": 7, "pull_request": {"url": "x"}},
        "comment": {"id": 5, "body": body, "user": user},
    }
    return Event("d1", "issue_comment", "created", payload)


class NoGitHub:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"no GitHub call expected, got {name}")


def _ctx(session: Session, event: Event) -> HandlerContext[Session, Any]:
    return HandlerContext(session=session, event=event, gateways=lambda actor: NoGitHub())


@pytest.mark.parametrize(
    "user", [{"login": "sweepbot[bot]", "type": "Bot"}, {"login": "other-app[bot]", "type": "Bot"}]
)
def test_a_bots_comment_is_not_read(db_session: Session, user: dict[str, Any]) -> None:
    with pytest.raises(HandlerSkipped, match="authorizes nothing"):
        mergereuse.on_reuse_comment(_ctx(db_session, _event(user, "Post: `/reuse-sweep-run 11`")))


def test_a_persons_comment_is_audited_then_judged(db_session: Session) -> None:
    with pytest.raises(HandlerSkipped, match="no label sweep"):  # no sweep: no GitHub call either
        mergereuse.on_reuse_comment(_ctx(db_session, _event({"login": "alice-admin", "type": "User"})))
    audit = db_session.scalars(select(AuditEntry).where(AuditEntry.action == "command.reuse-sweep-run")).one()
    assert (audit.actor, audit.target) == ("alice-admin", f"{REPO}#7")


def test_other_comments_are_not_read(db_session: Session) -> None:
    with pytest.raises(HandlerSkipped, match="no /reuse-sweep-run"):
        mergereuse.on_reuse_comment(_ctx(db_session, _event({"login": "a", "type": "User"}, "/sweep")))
