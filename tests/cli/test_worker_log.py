"""A worker's log, from a real worker process: JSON events, one a line."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

SECRET = "backlog-secret"
T = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
GRACE, STALL = timedelta(seconds=20), timedelta(seconds=120)


def test_worker_log_is_json_events(tmp_path: Path, sqlite_url: str) -> None:
    """A worker's log is the API's JSON log: no banner, one event per line, worker_ready first."""
    import os
    import signal
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = {
        **os.environ,
        "SWEEPBOT_DATABASE_URL": sqlite_url,
        "SWEEPBOT_BROKER_URL": f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}",
        "SWEEPBOT_DATA_DIR": str(tmp_path),
        "PYTHONPATH": str(ROOT),
    }
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "worker", "--pool", "solo", "--concurrency", "1"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while b"worker_ready" not in log.read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    lines = [x for x in log.read_text().splitlines() if x.strip()]
    # Every line is one JSON event, except the shutdown notice Celery prints itself on SIGTERM.
    assert [x for x in lines if not x.startswith("{")] in ([], ["worker: Warm shutdown (MainProcess)"])
    events = [json.loads(line) for line in lines if line.startswith("{")]
    ready = next(e for e in events if e["event"] == "worker_ready")
    assert ready["queues"] == ["sweepbot", "sweepbot.periodic"]
    assert not any("-------------- " in x for x in lines)  # no banner
