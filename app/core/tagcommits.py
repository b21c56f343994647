"""Mapping nightly tags to the full upstream commit they were built from (pure).

A tag pattern's ``sha`` group may capture a short SHA (vLLM's ``nightly-dev-arm64-cu13.0.1-75c2eef``
at InferenceX HEAD). Containment is asked of GitHub's compare API with full commits, and ancestry
answers are cached by commit, so a short SHA is first resolved through the upstream repo
(``GET /repos/{upstream}/commits/{short}``) and the full SHA is what the bot stores and compares.
The caller does the I/O; this module decides what needs resolving and what to keep.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import structlog

log = structlog.get_logger(__name__)

FULL_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
SHORT_SHA_RE = re.compile(r"^[0-9a-f]{7,39}$")


def is_full_sha(value: str | None) -> bool:
    return bool(value) and FULL_SHA_RE.match(str(value).lower()) is not None


def needs_resolution(value: str | None) -> bool:
    """A captured commit that is a short SHA (7..39 hex) and must be resolved before comparing."""
    return bool(value) and SHORT_SHA_RE.match(str(value).lower()) is not None


def resolve_tag_commits(
    pairs: Sequence[tuple[str, str]], resolve: Callable[[str, str], str | None]
) -> list[tuple[str, str]]:
    """(tag, full commit) for each (tag, captured commit), in order.

    ``resolve(tag, short)`` returns the full SHA or None (unknown or ambiguous in the upstream repo).
    A tag whose commit cannot be resolved is left out, with a log line saying why: comparing a
    guess could pick a nightly that does not contain the fix. A full SHA from the resolver that
    does not start with the short one is refused the same way.
    """
    out: list[tuple[str, str]] = []
    for tag, commit in pairs:
        sha = commit.lower()
        if is_full_sha(sha):
            out.append((tag, sha))
            continue
        if not needs_resolution(sha):
            log.info("tag_commit_skipped", tag=tag, commit=commit, why="not a commit SHA")
            continue
        full = resolve(tag, sha)
        if full is None or not is_full_sha(full) or not full.lower().startswith(sha):
            log.info(
                "tag_commit_unresolved", tag=tag, commit=commit, got=full, why="no unique upstream commit"
            )
            continue
        out.append((tag, full.lower()))
    return out
