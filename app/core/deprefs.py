"""Dependency references in PR bodies and commands (pure): ``owner/repo#N``, PR URLs, config keys.

A line declares dependencies when it holds ``Depends-On:``, ``depends on``, ``requires`` or
``/depends-on``; quoted lines (``>``) and code are ignored. ``Config-Key: a, b`` names the keys a
recipe PR is about.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_REPO = r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+"
_REF_TOKEN = re.compile(
    rf"(?:https?://github\.com/(?P<url_repo>{_REPO})/pull/(?P<url_num>\d+)(?:[/?#][^\s,;)]*)?)"
    rf"|(?:(?<![\w/.-])(?P<repo>{_REPO})?#(?P<num>\d+)\b)"
)
_KEYWORD = re.compile(r"(?i)(?:^|(?<=[\s*_(\[]))(?:/?depends[- ]on|requires)\s*:?")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_CONFIG_KEY_LINE = re.compile(r"(?i)^\s*config[- ]keys?\s*:\s*(?P<keys>.+)$")


@dataclass(frozen=True, order=True)
class DepRef:
    """An upstream pull request, ``owner/repo#N``."""

    repo: str
    number: int

    def __str__(self) -> str:
        return f"{self.repo}#{self.number}"

    @classmethod
    def parse(cls, token: str, default_repo: str | None = None) -> DepRef:
        """One reference (``owner/repo#N``, ``#N`` with ``default_repo``, or a PR URL); ValueError if not."""
        m = _REF_TOKEN.fullmatch(token.strip())
        if m is None:
            raise ValueError(
                f"{token!r} is not a pull request reference; write owner/repo#N "
                "(e.g. vllm-project/vllm#47269) or the PR's URL"
            )
        if m.group("url_repo"):
            return cls(m.group("url_repo"), int(m.group("url_num")))
        repo = m.group("repo") or default_repo
        if not repo:
            raise ValueError(f"{token!r} names no repository; write owner/repo#N")
        return cls(repo, int(m.group("num")))


def _prose_lines(text: str, *, keep_code: bool = False) -> list[str]:
    """Lines outside fenced code blocks and ``>`` quotes, with inline code spans blanked."""
    out: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        if line.lstrip().startswith(">"):
            continue
        out.append(line if keep_code else re.sub(r"`[^`]*`", " ", line))
    return out


def parse_dependency_refs(text: str, *, default_repo: str | None = None) -> list[DepRef]:
    """Dependencies declared in a PR body or comment, in order, without duplicates.

    A line counts when it holds ``Depends-On:``, ``depends on``, ``requires`` or ``/depends-on``;
    every reference after that keyword on the line is taken (``owner/repo#N`` or a PR URL; a bare
    ``#N`` only with ``default_repo``). Quoted lines (``>``) and code are ignored.
    """
    seen: dict[DepRef, None] = {}
    for line in _prose_lines(text or ""):
        kw = _KEYWORD.search(line)
        if kw is None:
            continue
        rest = line[kw.end() :]
        if rest.lstrip().lower().startswith("drop"):
            continue  # "/depends-on drop X" removes; parse_drop_refs reads it
        for m in _REF_TOKEN.finditer(rest):
            if m.group("url_repo"):
                ref = DepRef(m.group("url_repo"), int(m.group("url_num")))
            elif m.group("repo") or default_repo:
                ref = DepRef(m.group("repo") or str(default_repo), int(m.group("num")))
            else:
                continue
            seen.setdefault(ref, None)
    return list(seen)


def parse_refs_list(text: str, *, default_repo: str | None = None) -> list[DepRef]:
    """Every reference in ``text`` (a command's arguments), no keyword needed."""
    return parse_dependency_refs("depends-on " + " ".join((text or "").split()), default_repo=default_repo)


def parse_config_keys(text: str) -> list[str]:
    """Config keys named explicitly in a PR body: ``Config-Key: a`` / ``Config-Keys: a, b``."""
    keys: list[str] = []
    for line in _prose_lines(text or "", keep_code=True):
        m = _CONFIG_KEY_LINE.match(line)
        if m:
            for part in re.split(r"[,\s]+", m.group("keys")):
                part = part.strip().strip("`")
                if part and part not in keys:
                    keys.append(part)
    return keys
