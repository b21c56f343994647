"""One instance, one truth: the CLI run in a data dir where `up` runs reads that instance's
database (with the simulator: the world's own under <data dir>/sim/), not the default file."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from app.instance import adopt_running_instance, recordable, running_instance
from app.migrate import upgrade
from app.settings import Settings
from devstack.launcher import instance_lock
from tests.conftest import ROOT


def _cli(data_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SWEEPBOT_")}
    clean.update({"PYTHONPATH": str(ROOT), "COLUMNS": "200", "SWEEPBOT_DATA_DIR": str(data_dir), **env})
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=data_dir.parent,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _world_db(data_dir: Path) -> Settings:
    """A migrated database under <data dir>/sim/ holding one delivery, as `up` with the sim has."""
    world = data_dir / "sim"
    world.mkdir(parents=True)
    settings = Settings(
        data_dir=data_dir,
        database_url=f"sqlite:///{world / 'sweepbot.sqlite3'}",
        broker_url=f"sqla+sqlite:///{world / 'broker.sqlite3'}",
    )
    upgrade(settings.database_url)
    with sqlite3.connect(world / "sweepbot.sqlite3") as conn:
        conn.execute(
            "INSERT INTO deliveries (id, event, action, repo, status, attempts, body, body_bytes,"
            " received_at) VALUES ('sim-delivery-1', 'push', NULL, 'o/r', 'done', 1, x'7b7d', 2,"
            " '2026-01-01 00:00:00')"
        )
    return settings


def test_cli_reads_the_running_sim_instances_database(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    settings = _world_db(data_dir)
    with instance_lock(data_dir, "up", "http://127.0.0.1:8000/") as record:
        record(settings)
        listed = _cli(data_dir, "deliveries", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert [row["id"] for row in json.loads(listed.stdout)] == ["sim-delivery-1"]
        deps = _cli(data_dir, "deps", "status", "--json")
        assert deps.returncode == 0 and "db upgrade" not in deps.stderr, deps.stderr
        # An explicit URL still wins over the instance's.
        other = tmp_path / "other.sqlite3"
        explicit = _cli(data_dir, "deliveries", "list", "--json", SWEEPBOT_DATABASE_URL=f"sqlite:///{other}")
        assert explicit.returncode == 2 and "sim-delivery-1" not in explicit.stdout
    # Stopped: the lock file is left behind but not held, and the defaults stand again.
    assert (data_dir / "up.lock").exists() and running_instance(data_dir) is None
    stopped = _cli(data_dir, "deliveries", "list", "--json")
    assert stopped.returncode == 2 and "sim-delivery-1" not in stopped.stdout


def test_service_commands_and_explicit_urls_never_adopt(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    settings = _world_db(data_dir)
    with instance_lock(data_dir, "up", "http://127.0.0.1:8000/") as record:
        record(settings)
        env = {"SWEEPBOT_DATA_DIR": str(data_dir)}
        assert adopt_running_instance(dict(env), "worker") is None
        assert adopt_running_instance({**env, "SWEEPBOT_DATABASE_URL": "sqlite:///x"}, "queue") is None
        adopted = dict(env)
        assert adopt_running_instance(adopted, "queue") is not None
        assert adopted["SWEEPBOT_DATABASE_URL"] == settings.database_url
        assert adopted["SWEEPBOT_BROKER_URL"] == settings.broker_url


def test_a_url_with_a_password_is_never_written_into_the_lock() -> None:
    assert recordable("postgresql+psycopg://bot:s3cret@db/sweepbot") is None
    assert recordable("redis://:s3cret@redis:6379/0") is None
    assert recordable("sqlite:////data/sim/sweepbot.sqlite3") == "sqlite:////data/sim/sweepbot.sqlite3"
