"""A hostile `.github/sweepbot.yml` (an alias bomb, deep nesting, an over-size file) is a reported
configuration error — stored in ``bot_configs.error`` and logged, the defaults applying — like any
other bad file, never a minutes-long parse or a ``RecursionError`` (caps: app/core/safeyaml.py)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.orm import Session

from app.core.bot_config import CONFIG_PATH, BotConfig
from app.flows.repo.bot_config import read_bot_config
from app.models.tracking import BotConfigRecord

BILLION_LAUGHS = "\n".join(
    [
        'a0: &a0 "lol"',
        *(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)),
        "watches: *a8",
    ]
)


class _DefaultBranch:
    """The two gateway calls reading the config makes, serving one file."""

    def __init__(self, text: str) -> None:
        self.text = text

    def get_repo(self, repo: str) -> dict[str, Any]:
        return {"default_branch": "main"}

    def get_file(self, repo: str, path: str, ref: str | None = None) -> tuple[str, str] | None:
        return (self.text, "blob-1") if path == CONFIG_PATH else None


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (BILLION_LAUGHS, "once its aliases are expanded"),
        ("watches: " + "[" * 5_000 + "]" * 5_000, "nests deeper than 32 levels"),
        ("version: 1\n" + "# padding\n" * 20_000, "over the 65536-byte cap"),
    ],
    ids=["billion-laughs", "deep-nesting", "over-size"],
)
def test_a_hostile_config_is_a_reported_configuration_error(
    db_session: Session, text: str, words: str
) -> None:
    assert read_bot_config(db_session, _DefaultBranch(text), "o/r") == BotConfig()  # the defaults
    rec = db_session.get(BotConfigRecord, "o/r")
    assert rec is not None and not rec.ok and rec.present
    assert f"{CONFIG_PATH} is refused" in (rec.error or "") and words in (rec.error or ""), rec.error
