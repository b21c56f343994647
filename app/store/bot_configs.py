"""The stored outcome of reading a repo's `.github/sweepbot.yml` (table ``bot_configs``)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.orm import Session

from app.core.bot_config import BotConfig
from app.models.tracking import BotConfigRecord


def stored_config(session: Session, repo: str) -> BotConfig | None:
    """The last good config read for ``repo`` (``None`` if never read); no GitHub call."""
    rec = session.get(BotConfigRecord, repo)
    if rec is None:
        return None
    if rec.ok and rec.config is not None:
        return BotConfig.model_validate(rec.config)
    return BotConfig()


def record_read(
    session: Session,
    repo: str,
    *,
    blob_sha: str | None,
    config: BotConfig | None,
    error: str | None,
) -> None:
    """Store one read: no file (``blob_sha`` None), a good file (``config``) or a bad one (``error``)."""
    rec = session.get(BotConfigRecord, repo)
    if rec is None:
        rec = BotConfigRecord(repo=repo, ok=True, present=False)
        session.add(rec)
    rec.read_at = datetime.now(UTC)
    rec.present, rec.blob_sha = blob_sha is not None, blob_sha
    rec.ok, rec.error = error is None, error
    rec.config = config.model_dump(mode="json", by_alias=True) if config is not None and blob_sha else None
