"""Fuzzed comments through the comment handler: every reply is inert and nothing crashes
(the pure rendering rules are in tests/core/test_inert.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from app.flows.commands.comments import handle_comment
from tests.core.test_inert import assert_inert

_md = MarkdownIt("commonmark")


# ----------------------------------------------------------------------------- replies under fuzz


HOSTILE_WORDS = st.sampled_from(
    [
        "/sweep",
        "/sweep status",
        "/sweep approve",
        "/swep",
        "/depends-on",
        "/bump",
        "/help",
        "conc=",
        "config=",
        "seq=",
        "tp=",
        "@everyone",
        "@org/team",
        "![i](http://x/i.png)",
        "<img src=x>",
        "<script>",
        "`",
        "```",
        "[l](javascript:x)",
        "9" * 60,
        "\u202e",
        "\n",
        "> ",
        "#1",
        "*",
        "_",
        "|",
    ]
)
COMMENT = st.lists(st.one_of(HOSTILE_WORDS, st.text(max_size=12)), max_size=12).map(
    lambda parts: "/sweep " + " ".join(parts)
)


class FakeGitHub:
    """Just enough of the gateway for handle_comment; anything else is a clear LookupError."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.posted: list[str] = []

    def add_reaction(self, repo: str, comment_id: int, content: str) -> None:
        return None

    def find_comment(self, repo: str, number: int, marker: str) -> None:
        return None

    def upsert_comment(self, repo: str, number: int, marker: str, body: str) -> dict[str, Any]:
        self.posted.append(body)
        return {"id": 1}

    def permission(self, repo: str, login: str) -> str:
        return self.role

    def __getattr__(self, name: str) -> Any:
        def unavailable(*args: Any, **kwargs: Any) -> Any:
            raise LookupError(f"{name} is not available in this test")

        return unavailable


@pytest.mark.parametrize("role", ["read", "write"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=COMMENT)
def test_fuzzed_comments_get_inert_replies_and_never_crash(db_session: Any, role: str, body: str) -> None:
    from app.adapters.permissions import clear_cache

    clear_cache()
    gw = FakeGitHub(role)
    payload = {
        "action": "created",
        "issue": {"number": 7, "pull_request": {"url": "x"}},
        "comment": {"id": 99, "body": body, "user": {"login": "alice", "type": "User"}},
        "repository": {"full_name": "acme/bench"},
        "sender": {"login": "alice", "type": "User"},
    }
    out = handle_comment(db_session, gw, payload, bot_login="sweepbot[bot]", delivery_id="d-fuzz")
    db_session.rollback()
    if out.reply is None:
        return
    assert_inert(out.reply, {"alice"})
    if role == "read" and all(state in ("rejected", "refused") for _, state in out.results):
        assert len(out.reply) < 400  # a read-only user's rejected commands get one short line
