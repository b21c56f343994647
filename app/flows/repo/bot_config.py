"""Reading `.github/sweepbot.yml` from the default branch only, and storing the outcome.

The schema and its validation are pure (``app.core.bot_config``), the stored read is
``app.store.bot_configs``; neither is re-exported here. A bad file means the defaults, with the
error stored (``bot_configs.error``) and logged.
"""

from __future__ import annotations

from typing import Any, Protocol

import structlog
from sqlalchemy.orm import Session

from app.core.bot_config import (
    CONFIG_PATH,
    BotConfig,
    BotConfigError,
    parse_bot_config,
)
from app.store.bot_configs import record_read, stored_config

log = structlog.get_logger(__name__)


class ConfigReader(Protocol):
    """The gateway calls reading the config needs."""

    def get_repo(self, repo: str) -> dict[str, Any]: ...

    def get_file(self, repo: str, path: str, ref: str | None = None) -> tuple[str, str] | None: ...


def read_bot_config(
    session: Session, gw: ConfigReader, repo: str, *, default_branch: str | None = None
) -> BotConfig:
    """Read the config from the default branch (never from a PR), store the outcome, return it.

    A missing file means the defaults; a bad file means the defaults too, with the error stored
    (``bot_configs.error``) and logged.
    """
    if default_branch is None:
        default_branch = str(gw.get_repo(repo).get("default_branch") or "main")
    found = gw.get_file(repo, CONFIG_PATH, ref=default_branch)
    if found is None:
        record_read(session, repo, blob_sha=None, config=None, error=None)
        log.info("bot_config_absent", repo=repo, branch=default_branch, why="no file: the defaults apply")
        return BotConfig()
    text, blob_sha = found
    try:
        config = parse_bot_config(text)
    except BotConfigError as exc:
        record_read(session, repo, blob_sha=blob_sha, config=None, error=str(exc))
        log.error("bot_config_invalid", repo=repo, branch=default_branch, error=str(exc))
        return BotConfig()
    record_read(session, repo, blob_sha=blob_sha, config=config, error=None)
    log.info(
        "bot_config_loaded",
        repo=repo,
        branch=default_branch,
        watches=len(config.watches),
        images=len(config.images),
    )
    return config


def bot_config(session: Session, gw: ConfigReader, repo: str) -> BotConfig:
    """The stored config, read from the default branch once when never read (pushes refresh it)."""
    cfg = stored_config(session, repo)
    if cfg is None:
        cfg = read_bot_config(session, gw, repo)
    return cfg
