"""The repo's authoring policy (InferenceX AGENTS.md, docs/documentation-procedures.md): every PR and
issue the bot opens has its title as `<English> / <中文>` and its body in English with the whole
Simplified Chinese translation in one collapsed `<details><summary>中文</summary>` block at the end;
commit subjects stay English, the Chinese in the body; user text stays inert in both languages."""

from __future__ import annotations

import re

import pytest

from app.core.bumpplan import BUMP_PR_MARKER, bump_subject, commit_message
from app.core.githubtext import (
    TITLE_LIMIT,
    bilingual_title,
    bump_pr_text,
    link_fix_commit_message,
    recovery_pr_text,
)
from app.core.nightly_watch import IssueView, issue_title, render_issue
from tests.core.test_nightly_logic import sample_view

CJK = re.compile(r"[\u4e00-\u9fff]")
ENGLISH = re.compile(r"\b(the|sweepbot|image|bumps?|regression|nightly|recover|ingest)\b", re.I)
RAW_HTML = re.compile(r"(?<!\\)<img")  # an unescaped tag (`\<img` renders as text)
RAW_LINK = re.compile(r"(?<!\\)\]\(http://evil")  # a link GitHub would render
KEY = "minimaxm3-fp4-mi355x-vllm"
IMAGE = "vllm/vllm-openai-rocm:nightly-69715823df89b11ee684b84066390cbb9092d5c1"
HOSTILE = "@everyone ![x](http://evil/x.png) <img src=x onerror=alert(1)> [link](http://evil) `code`"


def _split(body: str) -> tuple[str, str]:
    """(English part, Chinese block): the translation is one collapsed block that ends the body."""
    opener = "<details>\n<summary>中文</summary>\n"
    assert body.count(opener) == 1, "exactly one 中文 block"
    english, chinese = body.split(opener)
    assert chinese.rstrip().endswith("</details>") and " open" not in opener
    return english, chinese


def _assert_bilingual(title: str, body: str) -> None:
    en_title, _, zh_title = title.partition(" / ")
    assert ENGLISH.search(en_title) and not CJK.search(en_title), title
    assert CJK.search(zh_title), title
    english, chinese = _split(body)
    assert ENGLISH.search(english) and not CJK.search(english.replace("<summary>中文</summary>", ""))
    assert CJK.search(chinese)


def _assert_inert(text: str) -> None:
    assert "@everyone" not in text  # split by a word joiner or inside a code span
    assert not RAW_HTML.search(text) and not RAW_LINK.search(text)


def _bump(description: list[str]) -> tuple[str, str]:
    text = bump_pr_text(
        marker=BUMP_PR_MARKER,
        subject=bump_subject(KEY, IMAGE),
        key=KEY,
        image=IMAGE,
        description=description,
        recipe_pr="https://github.com/SemiAnalysisAI/InferenceX/pull/2104",
        recipes=[
            "benchmarks/multi_node/srt-slurm-recipes/vllm/deepseek-v4/8k1k/disagg-b200-low-latency-c1.yaml"
        ],
    )
    return text.title, text.body


def test_a_bump_pr_has_both_languages() -> None:
    title, body = _bump([f"Bump image to {IMAGE}", "Brings vllm-project/vllm#47269 (6971582)"])
    _assert_bilingual(title, body)
    assert title == f"Bump {KEY} image to {IMAGE} / 将 {KEY} 的镜像升级到 {IMAGE}"
    assert body.startswith(BUMP_PR_MARKER)
    english, chinese = _split(body)
    assert f"sweepbot bumps `{KEY}` to `{IMAGE}`." in english
    assert f"sweepbot 将 `{KEY}` 的镜像升级到 `{IMAGE}`。" in chinese
    # the evidence (links, paths) is shown once above, and the translation keeps the same links
    assert "https://github.com/SemiAnalysisAI/InferenceX/pull/2104" in chinese
    assert "disagg-b200-low-latency-c1.yaml" in english and "disagg-b200-low-latency-c1.yaml" not in chinese


def test_user_text_in_a_bump_pr_stays_inert_in_both_languages() -> None:
    title, body = _bump([HOSTILE, "line\nwith a break\u202e"])
    _assert_inert(body)
    english, chinese = _split(body)
    assert "\u202e" not in body and "- line with a break" in english
    _assert_inert(chinese)
    hostile_link = bump_pr_text(
        marker=BUMP_PR_MARKER,
        subject=bump_subject(KEY, IMAGE),
        key=KEY,
        image=IMAGE,
        description=[],
        recipe_pr="javascript:alert(1) @everyone",
    )
    _assert_inert(hostile_link.body)
    assert "`javascript:alert(1) @\u2060everyone`" in hostile_link.body


def _view(**over: object) -> IssueView:
    return sample_view(config_key=KEY, commits=[{"sha": "c" * 40, "title": HOSTILE}], **over)


def test_a_regression_issue_has_both_languages_and_inert_commit_titles() -> None:
    view = _view()
    title, body = issue_title(view), render_issue(view)
    _assert_bilingual(title, body)
    assert title.startswith(f"Nightly regression: {KEY} TPOT +4.0% from ")
    assert f"夜间版本性能回退：{KEY}" in title
    english, chinese = _split(body)
    assert "first bad nightly" in english and "xychart-beta" in english
    assert "首个回退的夜间版本" in chinese and "`vllm/vllm-openai-rocm:nightly-" + "2" * 40 + "`" in chinese
    _assert_inert(body)
    recovered = render_issue(_view(recovered_tag="nightly-" + "3" * 40))
    assert "**已恢复**" in _split(recovered)[1] and "**Recovered**" in _split(recovered)[0]


def test_a_recovery_pr_has_both_languages() -> None:
    text = recovery_pr_text(
        marker="<!-- sweepbot:recovery pr=2104 -->",
        repo="SemiAnalysisAI/InferenceX",
        original_pr=2104,
        run_id=123456,
        config_keys=[KEY],
        why=f"main's run finished without results_bmk {HOSTILE}",
    )
    _assert_bilingual(text.title, text.body)
    assert text.title == "Recover PR #2104 ingest / 恢复 PR #2104 的结果导入"
    assert "```\n/reuse-sweep-run 123456\n```" in text.body
    _assert_inert(text.body)


def test_commit_subjects_stay_english_with_the_chinese_in_the_body() -> None:
    message = commit_message(
        KEY, IMAGE, [f"Bump image to {IMAGE}"], None, skip_sweep=True, recipes=["r.yaml"]
    )
    subject, _, body = message.partition("\n")
    assert subject == f"Bump {KEY} image to {IMAGE} [skip-sweep]" and not CJK.search(subject)
    assert f"中文：将 {KEY} 的镜像升级到 {IMAGE}" in body
    # the changelog fields stay the last paragraph (git trailers)
    assert message.rstrip("\n").split("\n\n")[-1] == f"config-keys: {KEY}\npr-link: XXX"
    fix = link_fix_commit_message(
        subject="Link it [skip-sweep]", key=KEY, image=IMAGE, link="https://x/pull/1"
    )
    assert fix.split("\n", 1)[0] == "Link it [skip-sweep]" and CJK.search(fix)
    assert fix.rstrip("\n").split("\n\n")[-1] == "pr-link: https://x/pull/1"
    hostile = commit_message(KEY, IMAGE, ["one\ntwo\x00\u202e"], None)
    assert "- one two\n" in hostile and "\x00" not in hostile and "\u202e" not in hostile


@pytest.mark.parametrize("english", ["short", "x" * 400, "line\nbreak"])
def test_titles_fit_githubs_limit_on_one_line(english: str) -> None:
    title = bilingual_title(english, "中文标题")
    assert len(title) <= TITLE_LIMIT and "\n" not in title and title.endswith(" / 中文标题")
