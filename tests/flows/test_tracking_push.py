"""A push to the default branch re-reads the bot config only when it (may have) changed."""

from __future__ import annotations

from typing import Any, cast

import pytest
from sqlalchemy.orm import Session

import app.flows.tracking.watches as tracking
from app.core.routing import HandlerSkipped
from app.flows.tracking.ports import TrackingGateway


def _push(ref: str, files: list[list[str]]) -> dict[str, Any]:
    return {
        "ref": ref,
        "repository": {"full_name": "o/r", "default_branch": "main"},
        "commits": [{"added": [], "modified": f, "removed": []} for f in files],
    }


class _Unused:
    """Stands in for the session and the gateway: handle_push only hands them to the config reads,
    which the fixture replaces; a use of its own fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"handle_push used {name} itself")


# Typed as what they stand in for (a cast: _Unused implements nothing, and needs not).
SESSION = cast(Session, _Unused())
GATEWAY = cast(TrackingGateway, _Unused())


@pytest.fixture
def reread(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    monkeypatch.setattr(
        tracking, "read_bot_config", lambda session, gw, repo, default_branch: calls.append(repo)
    )
    monkeypatch.setattr(tracking, "apply_config_watches", lambda session, gw, repo, cfg: [])
    return calls


def test_other_branches_and_untouched_config_are_skipped(reread: list[str]) -> None:
    with pytest.raises(HandlerSkipped):
        tracking.handle_push(SESSION, GATEWAY, _push("refs/heads/feature", [[".github/sweepbot.yml"]]))
    with pytest.raises(HandlerSkipped):
        tracking.handle_push(SESSION, GATEWAY, _push("refs/heads/main", [["README.md"]]))
    assert reread == []


def test_a_config_change_is_read(reread: list[str]) -> None:
    tracking.handle_push(SESSION, GATEWAY, _push("refs/heads/main", [["a.py"], [".github/sweepbot.yml"]]))
    assert reread == ["o/r"]


def test_a_push_with_twenty_or_more_commits_is_read_in_case(reread: list[str]) -> None:
    # GitHub lists at most 20 commits in a push payload: the config may be in one it left out.
    tracking.handle_push(SESSION, GATEWAY, _push("refs/heads/main", [["x.py"]] * 20))
    assert reread == ["o/r"]
