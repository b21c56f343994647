"""How soon a worker picks a delivery up on the embedded stack (SQLite + the SQLAlchemy broker).

Starts `python -m app up` (the simulator and its seed world) on free loopback ports in a temporary
data dir, waits until at least `--deliveries` deliveries have been started by the worker (bounded
by `--timeout`), then prints the median and p90 of started_at - enqueued_at (the doorbell rung to
the worker starting on it), and stops `up` by its pid (SIGINT, as Ctrl-C does). The aim is well
under a second (the broker's poll interval, app.adapters.broker.EMBEDDED_POLL_SECONDS).

    .venv/bin/python bench/pickup.py [--deliveries 12] [--timeout 120]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pickups(db: Path) -> list[float]:
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db) as conn:
            rows = conn.execute(
                "SELECT enqueued_at, started_at FROM deliveries"
                " WHERE enqueued_at IS NOT NULL AND started_at IS NOT NULL"
            ).fetchall()
    except sqlite3.Error:
        return []  # not migrated yet
    return sorted((datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds() for a, b in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deliveries", type=int, default=12)
    parser.add_argument("--timeout", type=float, default=120.0)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SWEEPBOT_")}
        env["PYTHONPATH"] = str(ROOT)
        args = ["up", "--data-dir", tmp, "--port", str(free_port()), "--sim-port", str(free_port())]
        up = subprocess.Popen(
            [sys.executable, "-m", "app", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        db = Path(tmp) / "sim" / "sweepbot.sqlite3"
        try:
            deadline = time.monotonic() + opts.timeout
            seen: list[float] = []
            while time.monotonic() < deadline and len(seen) < opts.deliveries and up.poll() is None:
                time.sleep(1)  # a benchmark polling a file, not a test
                seen = pickups(db)
        finally:
            up.send_signal(signal.SIGINT)
            up.wait(timeout=60)
    if not seen:
        print("no delivery was picked up")
        return 1
    p90 = seen[max(0, int(round(0.9 * len(seen))) - 1)]
    median = statistics.median(seen)
    print(f"{len(seen)} deliveries: pickup median {median:.3f} s, p90 {p90:.3f} s (aim: well under 1 s)")
    return 0 if median < 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
