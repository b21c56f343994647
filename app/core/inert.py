"""Render user text inert in GitHub Markdown (pure: str in, str out).

Anything the bot echoes from a comment, a branch name or a file goes through here, so it can
neither ping (``@someone``), embed (``![x](http://...)``), inject HTML, nor break out of its
quoting with a backtick. ``code`` is the default: inside a code span GitHub renders nothing
(no mentions, links, images, HTML or emoji); the fence is one backtick longer than the longest
run in the text, so no run inside can close it. ``text`` is for the rare echo that must stay
prose. Both cap the length, so a reply cannot be used to amplify a comment.
"""

from __future__ import annotations

import re
import unicodedata

MAX_ECHO = 80  # characters of user text in one echo; enough to recognise what was written
ELLIPSIS = "…"

_BACKTICKS = re.compile(r"`+")
_MENTION = re.compile(r"@(?=[A-Za-z0-9])")  # what GitHub would turn into a mention or team ping
_MARKDOWN_PUNCT = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~&:])")
WORD_JOINER = "\u2060"  # invisible; splits "@name" so GitHub sees no mention


def _visible_one_line(value: str, limit: int) -> str:
    """One line of printable text, at most ``limit`` characters (control and bidi marks dropped)."""
    flat = []
    for ch in value:
        if ch in "\r\n\t\v\f":
            flat.append(" ")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn"):
            continue  # NUL, bidi overrides, zero-width tricks: nothing a reader needs to see
        else:
            flat.append(ch)
    text = "".join(flat)
    if len(text) > limit:
        text = text[: max(limit - 1, 1)] + ELLIPSIS
    return text


def code(value: object, limit: int = MAX_ECHO) -> str:
    """``value`` as an inline code span that shows it literally, whatever it contains."""
    text = _visible_one_line(str(value), limit)
    if not text.strip():
        return "`(blank)`" if not text else f"`{text}`"
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    # CommonMark strips one space from each side when both ends have one, and a backtick at an
    # end would merge with the fence: pad with a space in those cases (the padding is stripped).
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    # Code spans already show mentions literally; the joiner also keeps plain-text renderings
    # (notification e-mails, API consumers) from reading one.
    return f"{fence}{pad}{_MENTION.sub('@' + WORD_JOINER, text)}{pad}{fence}"


def text(value: object, limit: int = MAX_ECHO) -> str:
    """``value`` as prose: Markdown punctuation escaped, mentions split, one line, capped."""
    flat = _visible_one_line(str(value), limit)
    escaped = _MARKDOWN_PUNCT.sub(r"\\\1", flat)
    return _MENTION.sub("@" + WORD_JOINER, escaped)
