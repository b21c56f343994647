"""`.github/sweepbot.yml`: good, bad YAML, bad schema; a bad file is stored, never a crash."""

from __future__ import annotations

import pytest

from app.core.bot_config import BotConfig, BotConfigError, parse_bot_config

GOOD = """\
version: 1
images:
  - name: vllm/vllm-openai-rocm
    registry: dockerhub
    tag-pattern: 'nightly-(?P<sha>[0-9a-f]{40})'
    source-repo: vllm-project/vllm
watches:
  - config-key: minimaxm3-fp4-mi355x-vllm
    depends-on: [vllm-project/vllm#47269]
bump:
  mode: pr
"""


def test_good_config() -> None:
    cfg = parse_bot_config(GOOD)
    source = cfg.image_source("vllm/vllm-openai-rocm")
    assert source is not None and source.source_repo == "vllm-project/vllm"
    assert cfg.watches[0].depends_on == ["vllm-project/vllm#47269"]
    assert cfg.bump.mode == "pr" and cfg.bump.config_dirs == [".github/configs", "configs"]
    assert parse_bot_config("") == BotConfig()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("images: [\n", "not valid YAML"),
        ("- a\n- b\n", "must be a mapping"),
        ("version: 2\n", "version"),
        ("images:\n  - name: x\n    tag-pattern: 'nightly-.*'\n", "(?P<sha>"),
        ("images:\n  - name: x\n    tag-pattern: '(['\n", "not a valid regular expression"),
        ("watches:\n  - config-key: k\n    depends-on: [vllm#1]\n", "owner/repo#NUMBER"),
        ("bump:\n  mode: sometimes\n", "bump.mode"),
        ("colour: blue\n", "colour"),
        ("references:\n  k: atom-table-that-does-not-exist\n", "not a shipped reference table"),
        ("references:\n  k: [sibling]\n", "references.k"),
        ("references: [k]\n", "references"),
    ],
)
def test_bad_configs_say_what_to_fix(text: str, words: str) -> None:
    with pytest.raises(BotConfigError) as info:
        parse_bot_config(text)
    assert words in str(info.value) and ".github/sweepbot.yml" in str(info.value)


# ------------------------------------------------------------------------------------- references

ATOM_TABLE = "atom-minimaxm3-mxfp4-mi355x-tp4-8k1k"


def test_references_schema() -> None:
    cfg = parse_bot_config(
        f"references:\n  minimaxm3-fp4-mi355x-vllm: {ATOM_TABLE}\n  a-key: sibling\n  other: none\n"
    )
    assert cfg.references == {"minimaxm3-fp4-mi355x-vllm": ATOM_TABLE, "a-key": "sibling", "other": "none"}
    assert parse_bot_config("version: 1\n").references == {}
    with pytest.raises(BotConfigError) as info:
        parse_bot_config("references:\n  k: atom\n")
    assert f"choose one of: {ATOM_TABLE}, sibling, none" in str(info.value)
