"""Shared test fixtures: real fixture files, migrated databases, and the real services.

Tests marked ``services`` need PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379). Without
them they skip locally, but under ``CI=true`` a missing service is a failure, never a skip.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"  # data copied into the repo; provenance in its README.md
PG_ADMIN_URL = os.environ.get("SWEEPBOT_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("SWEEPBOT_TEST_REDIS_URL", "redis://127.0.0.1:6379")
IN_CI = os.environ.get("CI", "").lower() == "true"


def _unavailable(what: str, exc: Exception) -> None:
    message = f"{what} is not reachable: {exc.__class__.__name__}: {exc}"
    if IN_CI:
        pytest.fail(f"{message} (CI=true: a missing service is a failure)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


def _migrate(url: str) -> None:
    from app.migrate import upgrade

    upgrade(url)


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One SQLite file migrated to head per test process, in a single file (no WAL beside it):
    copying it costs a millisecond where migrating costs ~0.2 s of CPU, and ~390 tests take one."""
    from app.db import engine_for

    path = tmp_path_factory.mktemp("sqlite-template") / "head.sqlite3"
    url = f"sqlite:///{path}"
    _migrate(url)
    engine_for(url).dispose()
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode=DELETE")  # the file alone is the whole database
    finally:
        conn.close()
    return path


@pytest.fixture
def sqlite_url(tmp_path: Path, _sqlite_template: Path) -> str:
    """A fresh SQLite database file at head (a copy of the migrated template)."""
    path = tmp_path / "test.sqlite3"
    shutil.copyfile(_sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, migrated to head, dropped at the end."""
    name = f"sweepbot_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:
        admin.dispose()
        _unavailable("PostgreSQL at 127.0.0.1:5432", exc)
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    _migrate(url)
    yield url
    from app.db import dispose_engines

    dispose_engines()
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def truncate_all(url: str) -> None:
    from app.db import engine_for
    from app.models import Base

    engine = engine_for(url)
    tables = [t.name for t in Base.metadata.sorted_tables]
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(
                text("TRUNCATE " + ", ".join(f'"{t}"' for t in tables) + " RESTART IDENTITY CASCADE")
            )
        else:
            for table in reversed(tables):
                conn.execute(text(f'DELETE FROM "{table}"'))


@pytest.fixture
def pg_clean_url(pg_url: str) -> str:
    """The session's PostgreSQL database, emptied before this test."""
    truncate_all(pg_url)
    return pg_url


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A Redis database index of its own, flushed before and after the test."""
    import redis

    # SWEEPBOT_TEST_REDIS_DB keeps concurrent suites (several checkouts on one machine) apart;
    # pytest-xdist's workers (gw0, gw1, ...) each take the next index after it.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    offset = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    base = os.environ.get("SWEEPBOT_TEST_REDIS_DB")
    index = (int(base) if base else 9 + (0 if worker else os.getpid() % 6)) + offset
    url = f"{REDIS_URL}/{index % 16}"
    client = redis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        client.flushdb()
    except Exception as exc:
        _unavailable("Redis at 127.0.0.1:6379", exc)
    yield url
    client.flushdb()
    client.close()


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[pytest.MonkeyPatch]:
    """Isolate SWEEPBOT_* settings for one test; callers set what they need with ``setenv``."""
    from app.db import dispose_engines
    from app.settings import reset_settings_cache

    for key in list(os.environ):
        if key.startswith("SWEEPBOT_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("SWEEPBOT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SWEEPBOT_LOG_JSON", "true")
    # PyGithub's own spacing of calls (0.25 s between requests, 1 s between writes) is for
    # github.com's secondary limits; against the loopback simulator it only sleeps (23 of a
    # test's 36 s). A test of the spacing sets its own.
    monkeypatch.setenv("SWEEPBOT_GITHUB_SECONDS_BETWEEN_REQUESTS", "0")
    monkeypatch.setenv("SWEEPBOT_GITHUB_SECONDS_BETWEEN_WRITES", "0")
    reset_settings_cache()
    yield monkeypatch
    reset_settings_cache()
    dispose_engines()


@pytest.fixture
def db_session(sqlite_url: str, settings_env: pytest.MonkeyPatch) -> Iterator[Session]:
    """A session on a fresh migrated SQLite database that is also the configured database."""
    from app.db import session_factory
    from app.settings import reset_settings_cache

    settings_env.setenv("SWEEPBOT_DATABASE_URL", sqlite_url)
    reset_settings_cache()
    session = session_factory()()
    yield session
    session.close()
