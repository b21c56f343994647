"""The launcher notices a dead child and says so: a worker (or beat) that exits is restarted, up to
MAX_RESTARTS times, with why it exited; a dead API, or a child past its restarts, stops the stack.
And the embedded broker's queues exist before any child starts (no UNIQUE race between them)."""

from __future__ import annotations

import io
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from devstack.launcher import MAX_RESTARTS, Stack, supervise

# A child that counts its starts in a file, says why it fails, and exits until its Nth start.
CHILD = """
import pathlib, sys, time
count, survive_from = pathlib.Path(sys.argv[1]), int(sys.argv[2])
n = int(count.read_text()) if count.exists() else 0
count.write_text(str(n + 1))
print(f"error: boom on start {n + 1}", flush=True)
if n + 1 < survive_from:
    sys.exit(3)
time.sleep(120)
"""


def _stack(tmp_path: Path) -> Stack:
    logs = tmp_path / "logs"
    logs.mkdir()
    return Stack(api_url="http://127.0.0.1:1", env={}, log_dir=logs, command=(sys.executable, "-c", CHILD))


def _watch(running: Stack, stopping: object = lambda: False) -> tuple[int, str]:
    out = io.StringIO()
    try:
        code = supervise(running, stopping, Console(file=out, width=300), poll=0.01)  # type: ignore[arg-type]
    finally:
        running.stop()
    return code, out.getvalue()


def test_a_worker_that_keeps_dying_is_restarted_then_stops_the_stack(tmp_path: Path) -> None:
    running = _stack(tmp_path)
    running.start_process("worker", str(tmp_path / "n"), "99")
    code, said = _watch(running)
    assert code == 1
    for i in range(1, MAX_RESTARTS + 1):
        assert f"restarting it ({i}/{MAX_RESTARTS})" in said
    assert "the worker process exited: error: boom" in said and "stopping everything" in said
    assert (tmp_path / "n").read_text() == str(MAX_RESTARTS + 1)


def test_a_worker_lost_once_is_back_and_the_stack_keeps_running(tmp_path: Path) -> None:
    running = _stack(tmp_path)
    running.start_process("worker", str(tmp_path / "n"), "2")

    def back() -> bool:  # stop once the restarted worker has said its line (it is alive then)
        return (tmp_path / "n").exists() and (tmp_path / "n").read_text() == "2" and not running.dead()

    code, said = _watch(running, back)
    assert code == 0 and f"restarting it (1/{MAX_RESTARTS})" in said and "stopping" not in said


def test_a_dead_api_stops_the_stack_at_once(tmp_path: Path) -> None:
    running = _stack(tmp_path)
    running.start_process("api", str(tmp_path / "n"), "99")
    code, said = _watch(running)
    assert code == 1 and "the api process exited" in said and "restarting" not in said
    assert (tmp_path / "n").read_text() == "1"


def test_db_upgrade_creates_the_embedded_brokers_queues(tmp_path: Path) -> None:
    import os

    from tests.conftest import ROOT

    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEEPBOT_")}
    env.update({"PYTHONPATH": str(ROOT), "SWEEPBOT_DATA_DIR": str(tmp_path / "d")})
    done = subprocess.run(
        [sys.executable, "-m", "app", "db", "upgrade"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(tmp_path / "d" / "broker.sqlite3") as conn:
        names = {row[0] for row in conn.execute("SELECT name FROM kombu_queue")}
    assert names == {"sweepbot", "sweepbot.periodic"}


def test_the_embedded_broker_polls_well_under_a_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kombu.transport import sqlalchemy as kombu_sqla

    from app.adapters.broker import make_celery
    from app.settings import reset_settings_cache

    monkeypatch.setenv("SWEEPBOT_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("SWEEPBOT_BROKER_URL", raising=False)
    monkeypatch.setattr(kombu_sqla.Transport, "polling_interval", 1.0)  # kombu's own default
    reset_settings_cache()
    try:
        with make_celery().connection_for_write() as conn:
            assert conn.transport.polling_interval <= 0.25
    finally:
        reset_settings_cache()
