"""The schema comes only from the migrations, and they match the models exactly."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from app.db import engine_for
from app.models import Base


def _diff(url: str) -> list[object]:
    with engine_for(url).connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        return list(compare_metadata(ctx, Base.metadata))


def test_sqlite_schema_matches_the_models(sqlite_url: str) -> None:
    assert _diff(sqlite_url) == []


@pytest.mark.services
def test_postgres_schema_matches_the_models(pg_url: str) -> None:
    assert _diff(pg_url) == []


def test_downgrade_to_base_and_up_again(sqlite_url: str) -> None:
    from alembic import command

    from app.migrate import alembic_config, upgrade

    command.downgrade(alembic_config(sqlite_url), "base")
    engine = engine_for(sqlite_url)
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    upgrade(sqlite_url)
    assert set(Base.metadata.tables) <= set(inspect(engine).get_table_names())


def test_the_migrations_form_one_chain() -> None:
    """Two branches that each add a migration merge cleanly in git but leave two heads."""
    from pathlib import Path

    from alembic.config import Config
    from alembic.script import ScriptDirectory

    root = Path(__file__).resolve().parent.parent
    config = Config(str(root / "alembic.ini"))
    heads = ScriptDirectory.from_config(config).get_heads()
    assert len(heads) == 1, f"several migration heads {heads}: re-chain one revision's down_revision"
