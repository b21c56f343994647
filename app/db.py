"""The SQLAlchemy 2 engine and sessions. The schema itself is created only by Alembic migrations."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from sqlalchemy import MetaData, create_engine, event, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker

# The module, not the function: tests replace get_settings and reset its cache.
from app import settings as app_settings

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # WAL lets the API, the worker and beat (separate processes) share one SQLite file;
    # busy_timeout turns lock contention into a short wait instead of an error.
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


_engines: dict[str, Engine] = {}


def engine_for(url: str) -> Engine:
    engine = _engines.get(url)
    if engine is not None:
        return engine
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
    else:
        driver_url = url
        if url.startswith(("postgresql://", "postgres://")):
            driver_url = "postgresql+psycopg://" + url.split("://", 1)[1]
        engine = create_engine(driver_url, pool_pre_ping=True, pool_size=10, max_overflow=20)
    _engines[url] = engine
    return engine


def get_engine() -> Engine:
    return engine_for(app_settings.get_settings().database_url)


@lru_cache(maxsize=8)
def _factory(url: str) -> sessionmaker[Session]:
    return sessionmaker(bind=engine_for(url), expire_on_commit=False)


def session_factory() -> sessionmaker[Session]:
    return _factory(app_settings.get_settings().database_url)


@contextmanager
def session_scope() -> Iterator[Session]:
    """One unit of work: commit on success, roll back on error."""
    session = session_factory()()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def dispose_engines() -> None:
    """Drop pooled connections (after fork, between tests that switch databases)."""
    for engine in _engines.values():
        engine.dispose()
    _engines.clear()
    _factory.cache_clear()


_local_locks: dict[str, threading.Lock] = {}
_local_locks_guard = threading.Lock()


def transaction_lock(session: Session, name: str) -> None:
    """Wait until no other transaction holds ``name``; it is released when this one ends.

    PostgreSQL advisory lock. SQLite needs none: it runs one writing transaction at a time, and a
    transaction that read before another committed fails to write and is retried.
    """
    if session.get_bind().dialect.name == "postgresql":
        key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


@contextmanager
def serialized(session: Session | None, name: str) -> Iterator[None]:
    """Run a look-before-create against GitHub for ``name`` one at a time across workers: the
    transaction lock across processes, and a plain lock across the threads of one process."""
    if session is not None:
        transaction_lock(session, name)
    with _local_locks_guard:
        lock = _local_locks.setdefault(name, threading.Lock())
    with lock:
        yield
