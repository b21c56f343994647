"""Run Alembic migrations programmatically (``sweepbot db upgrade`` and every process start)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent


def alembic_config(database_url: str) -> Config:
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(ROOT / "migrations"))
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return cfg


def upgrade(database_url: str, revision: str = "head") -> None:
    _sqlite_parent(database_url)
    command.upgrade(alembic_config(database_url), revision)


def _sqlite_parent(database_url: str) -> None:
    """Creating the schema creates an embedded database: its folder first (SQLite will not)."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        Path(url.database).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)


def _script() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config("sqlite://"))


def current_revision(database_url: str) -> str | None:
    """The revision the database is at (None: no schema yet). Reads only; creates nothing."""
    from app.db import engine_for  # lazy: the engine with the project's SQLite pragmas

    with engine_for(database_url).connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str:
    head = _script().get_current_head()
    assert head is not None, "the migrations folder has no head revision"
    return head


def history() -> list[tuple[str, str | None, str]]:
    """(revision, the one it follows, its title) of every migration, newest first."""
    out = []
    for rev in _script().walk_revisions():
        down = rev.down_revision if isinstance(rev.down_revision, str) or rev.down_revision is None else None
        out.append((rev.revision, down, (rev.doc or "").strip().splitlines()[0] if rev.doc else ""))
    return out
