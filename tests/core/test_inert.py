"""Inert echoes, the approval binding (pure), and a bounded fuzz of the comment grammar's replies."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta

import pytest
from markdown_it import MarkdownIt

from app.core import inert
from app.core.approval import HeadSeen, bind_approval
from app.core.commands import parse_commands

_md = MarkdownIt("commonmark")


def rendered(markdown: str) -> str:
    return str(_md.render(markdown))


def outside_code(page: str) -> str:
    """The rendered HTML with every <code>...</code> removed: what GitHub would linkify or ping."""
    return re.sub(r"<code>.*?</code>", "", page, flags=re.S)


def assert_inert(reply: str, allowed_mentions: set[str]) -> None:
    page = rendered(reply)
    assert "<img" not in page and "<a " not in page, page
    # Only the bot's own tags survive as raw HTML (the hidden reply marker); everything else is text.
    tags = set(re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", page))
    assert tags <= {"p", "code", "hr", "ul", "li", "strong", "em", "blockquote"}, (tags, page)
    for name in re.findall(r"@([A-Za-z0-9][A-Za-z0-9-]*)", html.unescape(outside_code(page))):
        assert name in allowed_mentions, (name, reply)


# ------------------------------------------------------------------------------------------ inert


@pytest.mark.parametrize(
    "value",
    [
        "@someone",
        "![x](https://evil.example/p.png)",
        "<img src=x onerror=alert(1)>",
        "a`b``c```d",
        "`",
        "``",
        " leading and trailing ",
        "line\nbreak\r\nand\ttab",
        "\u202eevil bidi\u202c and zero\u200bwidth",
        "x" * 500,
        "",
        "   ",
    ],
)
def test_code_span_shows_the_value_literally_and_inertly(value: str) -> None:
    span = inert.code(value)
    page = rendered(span)
    assert page.count("<code>") == 1 and page.startswith("<p><code>") and page.endswith("</code></p>\n")
    inner = html.unescape(page[len("<p><code>") : -len("</code></p>\n")])
    expected = re.sub(r"[\r\n\t]", " ", value)
    expected = "".join(ch for ch in expected if ch not in "\u202e\u202c\u200b")
    if len(expected) > inert.MAX_ECHO:
        expected = expected[: inert.MAX_ECHO - 1] + inert.ELLIPSIS
    if expected.strip():
        assert inner.replace(inert.WORD_JOINER, "") == expected
    assert "@s" not in inner  # the mention is split even inside the span
    assert len(inner) <= inert.MAX_ECHO + 1


def test_text_escapes_markdown_and_mentions() -> None:
    page = rendered(inert.text("hi @team ![img](http://x/y.png) <b>bold</b> **strong** `tick`"))
    assert "<img" not in page and "<b>" not in page and "<strong>" not in page and "<code>" not in page
    assert "@team" not in html.unescape(page)


# --------------------------------------------------------------------------------------- approval

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
A, B = "a" * 40, "b" * 40


def _at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


@pytest.mark.parametrize(
    ("seen", "comment_min", "current", "explicit", "bound", "says"),
    [
        ([(A, 0)], 5, A, None, A, ""),
        ([(A, 0), (B, 10)], 5, B, None, None, "moved since your comment"),  # pushed after the comment
        ([(A, 0)], 5, B, None, None, "moved since your comment"),  # pushed, event not yet received
        ([(A, 0), (B, 10), (A, 11)], 5, A, None, None, "changed after your comment"),
        ([], 5, A, None, None, "no record"),
        ([(A, 10)], 5, A, None, None, "no record"),  # the bot only learned of A after the comment
        ([(A, 0)], None, A, None, None, "cannot tell when"),
        ([], 5, B, B, B, ""),  # all 40 digits name the commit: no record needed
        ([], 5, B, "bbbbbbb", None, "no record of the PR's head"),  # a prefix needs one (issue 25)
        ([(A, 0)], 5, B, "aaaaaaa", None, "which is not the PR's head"),
        ([], 5, B, "b" * 41, None, "is not a commit SHA"),
    ],
)
def test_bind_approval(
    seen: list[tuple[str, float]],
    comment_min: float | None,
    current: str,
    explicit: str | None,
    bound: str | None,
    says: str,
) -> None:
    out = bind_approval(
        comment_at=_at(comment_min) if comment_min is not None else None,
        seen=[HeadSeen(sha, _at(m)) for sha, m in seen],
        current_head=current,
        explicit_sha=explicit,
    )
    assert out.sha == bound, out.reason
    assert says in out.reason
    if bound is None:
        assert f"/sweep approve {current[:12]}" in out.reason


def test_approve_takes_at_most_one_sha() -> None:
    (ok,) = parse_commands("/sweep approve 1A2B3C4D")
    assert ok.error is None and ok.options == {"sha": "1a2b3c4d"}
    (bad,) = parse_commands("/sweep approve @x `y`")
    assert bad.error is not None and "at most one commit SHA" in bad.error
    assert_inert(bad.error, set())
