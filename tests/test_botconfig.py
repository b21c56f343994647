"""`.github/sweepbot.yml`: good, bad YAML, bad schema; a bad file is stored, never a crash."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.orm import Session

from app.botconfig import BotConfig, BotConfigError, parse_bot_config, read_bot_config, stored_config

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
    assert cfg.image_source("vllm/vllm-openai-rocm") is not None
    assert cfg.image_source("vllm/vllm-openai-rocm").source_repo == "vllm-project/vllm"  # type: ignore[union-attr]
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
    ],
)
def test_bad_configs_say_what_to_fix(text: str, words: str) -> None:
    with pytest.raises(BotConfigError) as info:
        parse_bot_config(text)
    assert words in str(info.value) and ".github/sweepbot.yml" in str(info.value)


class _Gw:
    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.refs: list[str | None] = []

    def get_repo(self, repo: str) -> dict[str, Any]:
        return {"default_branch": "trunk"}

    def get_file(self, repo: str, path: str, ref: str | None = None) -> tuple[str, str] | None:
        self.refs.append(ref)
        return (self.files[path], "blob") if path in self.files else None


def test_read_from_default_branch_and_store_errors(db_session: Session) -> None:
    from app.models.tracking import BotConfigRecord

    gw = _Gw({".github/sweepbot.yml": "version: [\n"})
    cfg = read_bot_config(db_session, gw, "o/r")
    assert cfg == BotConfig() and gw.refs == ["trunk"]
    rec = db_session.get(BotConfigRecord, "o/r")
    assert rec is not None and not rec.ok and rec.present and "not valid YAML" in (rec.error or "")
    assert stored_config(db_session, "o/r") == BotConfig()

    gw.files[".github/sweepbot.yml"] = GOOD
    cfg = read_bot_config(db_session, gw, "o/r")
    assert cfg.bump.mode == "pr"
    assert stored_config(db_session, "o/r") == cfg
    assert db_session.get(BotConfigRecord, "o/r").error is None  # type: ignore[union-attr]

    del gw.files[".github/sweepbot.yml"]
    assert read_bot_config(db_session, gw, "o/r") == BotConfig()
    assert db_session.get(BotConfigRecord, "o/r").present is False  # type: ignore[union-attr]
