"""Every PR, issue and commit text the bot writes, in the benchmark repo's authoring policy (pure:
values in, text out; the fixed templates are package data in ``app/core/texts/``).

InferenceX ``AGENTS.md`` and its ``docs/documentation-procedures.md``: PR and issue titles and
descriptions carry English and natural Simplified Chinese. Titles are ``<English> / <中文>`` on
one line; a body is English first, then the whole translation in one collapsed
``<details><summary>中文</summary>`` block at the end, which refers to the tables, code blocks and
links shown once above it. Commit subjects stay conventional English; the Chinese translation goes
in the commit body. Code, paths, image references and identifiers are never translated. There is no
translation service: the Chinese is fixed template text around the same values.

User text is inert in both languages: in Markdown bodies every value is escaped (``app.core.inert``)
unless a filter renders it as a code span (``|code``) or a checked https link (``|link``); in
titles and commit messages values are one visible line (no controls, no line breaks).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from app.core import inert

TITLE_LIMIT = 256  # GitHub's limit for PR and issue titles
TEXT_LIMIT = 300  # characters of one value echoed into a body
_SAFE_URL = re.compile(r"^https?://[A-Za-z0-9.-]+(?::\d+)?/[A-Za-z0-9._~/%#?=&+-]*$")


@dataclass(frozen=True)
class GitHubText:
    """A PR's or issue's title and body, both bilingual."""

    title: str
    body: str


def one_line(value: object, limit: int = TEXT_LIMIT) -> str:
    """``value`` as one visible line: line breaks become spaces, controls and bidi marks go."""
    out = []
    for ch in str(value):
        if ch in "\r\n\t\v\f\x85\u2028\u2029":
            out.append(" ")
        elif unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Cn"):
            out.append(ch)
    text = "".join(out)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _finalize_markdown(value: Any) -> str:
    if isinstance(value, Markup):
        return str(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return inert.text(value, TEXT_LIMIT)
    return str(value)


def _code(value: object, limit: int = inert.MAX_ECHO) -> Markup:
    return Markup(inert.code(value, limit))


def _link(value: object) -> Markup:
    """An http(s) URL of plain characters as itself (GitHub autolinks it); anything else is shown
    literally, as code."""
    text = str(value)
    return Markup(text) if _SAFE_URL.match(text) else _code(text, TEXT_LIMIT)


def _environment(finalize: Any) -> Environment:
    env = Environment(
        loader=PackageLoader("app.core", "texts"),
        autoescape=False,
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        finalize=finalize,
    )
    env.filters["code"] = _code
    env.filters["link"] = _link
    return env


_MARKDOWN = _environment(_finalize_markdown)
_PLAIN = _environment(lambda v: one_line(v))


def render_markdown(template: str, **values: Any) -> str:
    return _MARKDOWN.get_template(template).render(**values)


def render_plain(template: str, **values: Any) -> str:
    return _PLAIN.get_template(template).render(**values)


def bilingual_title(english: str, chinese: str, limit: int = TITLE_LIMIT) -> str:
    """``<English> / <中文>`` on one line, within GitHub's title limit (the English is shortened)."""
    en, zh = one_line(english, limit), one_line(chinese, limit // 2)
    room = limit - len(zh) - 3
    if len(en) > room:
        en = en[: max(room - 1, 1)] + "…"
    return f"{en} / {zh}"


# ------------------------------------------------------------------------------------ the bump


def bump_title(subject: str, key: str, image: str) -> str:
    return bilingual_title(subject, f"将 {key} 的镜像升级到 {image}")


def bump_pr_text(
    *,
    marker: str,
    subject: str,
    key: str,
    image: str,
    description: Sequence[str],
    recipe_pr: str | None,
    recipes: Sequence[str] = (),
    changelog: str = "perf-changelog.yaml",
) -> GitHubText:
    body = render_markdown(
        "bump_pr.md.j2",
        marker=Markup(marker),
        key=key,
        image=image,
        description=list(description),
        recipe_pr=recipe_pr,
        recipes=list(recipes),
        changelog=changelog,
    )
    return GitHubText(bump_title(subject, key, image), body.rstrip("\n"))


def bump_commit_message(
    *,
    subject: str,
    key: str,
    image: str,
    description: Sequence[str],
    pr_link: str,
    recipes: Sequence[str] = (),
) -> str:
    """English subject and body, the Chinese translation, then the changelog fields as trailers."""
    return render_plain(
        "bump_commit.txt.j2",
        subject=subject,
        key=key,
        image=image,
        description=list(description),
        pr_link=pr_link,
        recipes=list(recipes),
    )


def link_fix_commit_message(*, subject: str, key: str, image: str, link: str) -> str:
    return render_plain("link_fix_commit.txt.j2", subject=subject, key=key, image=image, link=link)


# --------------------------------------------------------------------------- recovery and issues


def recovery_pr_text(
    *,
    marker: str,
    repo: str,
    original_pr: int,
    run_id: int,
    config_keys: Sequence[str],
    why: str,
) -> GitHubText:
    """The case-B recovery PR of ``docs/recovery-results-procedures.md``: an appended changelog
    entry and the reuse of the original PR's sweep run ``run_id``."""
    original = f"https://github.com/{repo}/pull/{int(original_pr)}"
    run_url = f"https://github.com/{repo}/actions/runs/{int(run_id)}"
    body = render_markdown(
        "recovery_pr.md.j2",
        marker=Markup(marker),
        original=original,
        run_url=run_url,
        run_id=int(run_id),
        config_keys=list(config_keys),
        why=why,
    )
    title = bilingual_title(
        f"Recover PR #{int(original_pr)} ingest", f"恢复 PR #{int(original_pr)} 的结果导入"
    )
    return GitHubText(title, body.rstrip("\n"))


def regression_title(english: str, key: str, first_bad: str) -> str:
    return bilingual_title(english, f"夜间版本性能回退：{key}，自 {first_bad} 起")


def regression_chinese(
    *,
    key: str,
    image_repo: str,
    last_good: str,
    first_bad: str,
    recovered_tag: str | None,
    source_repo: str | None,
    watch_notes: bool,
) -> str:
    """The collapsed Chinese block that ends the regression issue's body."""
    return render_markdown(
        "regression_issue_zh.md.j2",
        key=key,
        image_repo=image_repo,
        last_good=f"{image_repo}:{last_good}",
        first_bad=f"{image_repo}:{first_bad}",
        recovered_tag=recovered_tag,
        recovered_image=f"{image_repo}:{recovered_tag}" if recovered_tag else "",
        source_repo=source_repo,
        watch_notes=watch_notes,
    ).rstrip("\n")
