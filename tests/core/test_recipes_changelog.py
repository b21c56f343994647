"""perf-changelog appends: exact prefix, the repo's format, one blank line, parses back."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.recipes import (
    ChangelogError,
    RecipeError,
    append_changelog,
    changelog_description_for_bump,
    yaml_double_quoted,
)
from tests.recipe_helpers import BUMPED_IMAGE, SEED_KEY, fixture_text

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
LINK = "https://github.com/SemiAnalysisAI/InferenceX/pull/2104"


def _blank_lines_before_new_entry(new: str) -> int:
    """Empty lines (zero characters; a whitespace-only line is not empty) right before the entry."""
    lines = new.splitlines()
    start = max(i for i, line in enumerate(lines) if line == "- config-keys:")
    count = 0
    for line in reversed(lines[:start]):
        if line != "":
            break
        count += 1
    return count


def _check(old: str, new: str, entry: dict) -> list:
    assert new.startswith(old)
    assert new.endswith("\n")
    data = yaml.load(new, Loader=_LOADER)
    assert isinstance(data, list) and data[-1] == entry
    old_data = yaml.load(old, Loader=_LOADER) or []
    assert data[:-1] == old_data
    return data


def test_real_tail_gets_an_entry_in_the_repos_format() -> None:
    old = fixture_text("perf-changelog.tail.yaml")
    description = changelog_description_for_bump(
        BUMPED_IMAGE, ["vllm-project/vllm#47269@0123456789abcdef0123456789abcdef01234567"]
    )
    new = append_changelog(old, config_keys=[SEED_KEY], description=description, pr_link=LINK)
    data = _check(old, new, {"config-keys": [SEED_KEY], "description": description, "pr-link": LINK})
    assert len(data) == 36
    assert new[len(old) :] == (
        "\n"
        "- config-keys:\n"
        "    - minimaxm3-fp4-mi355x-vllm\n"
        "  description:\n"
        f'    - "Bump image to {BUMPED_IMAGE}"\n'
        '    - "Brings vllm-project/vllm#47269 (0123456)"\n'
        f"  pr-link: {LINK}\n"
    )
    assert _blank_lines_before_new_entry(new) == 1


def test_without_a_pr_link_the_entry_says_xxx_and_a_second_append_stacks() -> None:
    old = fixture_text("perf-changelog.tail.yaml")
    once = append_changelog(old, config_keys=["a-b", "c.d-e"], description=["one"], pr_link=None)
    assert once.endswith("  pr-link: XXX\n")
    twice = append_changelog(once, config_keys=["x"], description=["two"], pr_link=LINK)
    data = _check(once, twice, {"config-keys": ["x"], "description": ["two"], "pr-link": LINK})
    assert data[-2] == {"config-keys": ["a-b", "c.d-e"], "description": ["one"], "pr-link": "XXX"}
    assert _blank_lines_before_new_entry(twice) == 1


ENTRY = '- config-keys:\n    - a\n  description:\n    - "x"\n  pr-link: XXX'


@pytest.mark.parametrize(
    ("old", "separator"),
    [
        (ENTRY + "\n", "\n"),  # normal: one blank line added
        (ENTRY, "\n\n"),  # no final newline: only a newline, then the blank line
        (ENTRY + "\n  ", "\n\n"),  # whitespace-only last line without newline: ended, then one empty line
        (ENTRY + "\n  \n", "\n"),  # whitespace-only last line: kept, and one *empty* line follows it
        (ENTRY + "\n\n", ""),  # already ends with a blank line
        (ENTRY + "  \n", "\n"),  # trailing whitespace after the link
        ("", ""),  # empty file
        ("# perf changelog\n", "\n"),  # comment-only file
    ],
)
def test_separator_edge_cases_keep_the_old_text_as_prefix(old: str, separator: str) -> None:
    new = append_changelog(old, config_keys=["k"], description=["d"], pr_link=None)
    assert new == old + separator + '- config-keys:\n    - k\n  description:\n    - "d"\n  pr-link: XXX\n'
    _check(old, new, {"config-keys": ["k"], "description": ["d"], "pr-link": "XXX"})
    if old.strip() and not old.startswith("#"):
        assert _blank_lines_before_new_entry(new) == 1


def test_more_than_one_trailing_blank_line_is_kept_not_deleted() -> None:
    old = ENTRY + "\n\n\n"
    new = append_changelog(old, config_keys=["k"], description=["d"], pr_link=None)
    assert new.startswith(old) and new[len(old) :].startswith("- config-keys:")


def test_crlf_files_stay_crlf() -> None:
    old = ENTRY.replace("\n", "\r\n") + "\r\n"
    new = append_changelog(old, config_keys=["k"], description=["d"], pr_link=LINK)
    assert new.startswith(old)
    assert "\n" not in new.replace("\r\n", "")
    _check(old, new, {"config-keys": ["k"], "description": ["d"], "pr-link": LINK})


def test_quotes_backslashes_and_controls_in_descriptions_round_trip() -> None:
    tricky = ['He said "hi" \\o/ C:\\path', "tab\there", "line\nbreak", "# not a comment", "a: b", "ü — ✓ 🚀"]
    new = append_changelog("", config_keys=["k"], description=tricky, pr_link=None)
    assert yaml.safe_load(new)[-1]["description"] == tricky
    assert '"He said \\"hi\\" \\\\o/ C:\\\\path"' in new
    assert len(new.splitlines()) == 4 + len(tricky)  # one line per description


@settings(max_examples=150, deadline=None)
@given(st.text(min_size=1, max_size=40).filter(lambda s: s.strip() != ""))
def test_property_any_text_is_a_one_line_double_quoted_scalar(text: str) -> None:
    rendered = yaml_double_quoted(text)
    assert "\n" not in rendered and "\r" not in rendered
    assert yaml.safe_load("- " + rendered) == [text]


@pytest.mark.parametrize(
    ("old", "kwargs", "message"),
    [
        ("a: 1\n", {}, "not a YAML list"),
        ("- [\n", {}, "not valid YAML"),
        (ENTRY + "\n", {"config_keys": []}, "at least one config key"),
        (ENTRY + "\n", {"config_keys": ["has space"]}, "not a config key"),
        (ENTRY + "\n", {"description": []}, "at least one description"),
        (ENTRY + "\n", {"description": ["  "]}, "non-empty"),
        (ENTRY + "\n", {"pr_link": "pull 12"}, "not a PR link"),
        ("- config-keys:\n    - a\n  description: |+\n    x\n", {}, "change earlier entries"),
        ("  - config-keys: [a]\n    pr-link: XXX\n", {}, "break the file|change earlier"),
    ],
)
def test_refusals(old: str, kwargs: dict, message: str) -> None:
    args = {"config_keys": ["k"], "description": ["d"], "pr_link": None, **kwargs}
    with pytest.raises(ChangelogError, match=message) as info:
        append_changelog(old, **args)
    assert isinstance(info.value, RecipeError) and "\n" not in str(info.value)


def test_description_for_bump_names_the_image_and_each_dependency() -> None:
    lines = changelog_description_for_bump(
        "vllm/vllm-openai-rocm:nightly-abc",
        [
            "vllm-project/vllm#47269@AABBCCDDEEFF00112233445566778899aabbccdd",
            "vllm-project/vllm#47270 (1234567890)",
            "https://github.com/vllm-project/vllm/pull/47300",
        ],
    )
    assert lines == [
        "Bump image to vllm/vllm-openai-rocm:nightly-abc",
        "Brings vllm-project/vllm#47269 (aabbccd)",
        "Brings vllm-project/vllm#47270 (1234567)",
        "Brings vllm-project/vllm#47300",
    ]
    assert changelog_description_for_bump("a/b:c", []) == ["Bump image to a/b:c"]
    with pytest.raises(ChangelogError, match="not a dependency reference"):
        changelog_description_for_bump("a/b:c", ["vllm#1"])
