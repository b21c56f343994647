"""`sweepbot up`, the README's first command: starts everything, prints the URLs, stops on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from sim.server import free_port
from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_up_serves_the_dashboard_on_the_embedded_default_and_stops_cleanly(tmp_path: Path) -> None:
    port, sim_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEEPBOT_")}
    env.update({"SWEEPBOT_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(ROOT)})
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "up", "--port", str(port), "--sim-port", str(sim_port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    output = b""
    try:
        deadline = time.monotonic() + 90
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        while b"Ctrl-C stops everything" not in output:
            assert time.monotonic() < deadline, output.decode(errors="replace")
            assert proc.poll() is None, output.decode(errors="replace")
            output += proc.stdout.read() or b""
            time.sleep(0.2)
        text = output.decode()
        assert f"http://127.0.0.1:{port}/" in text and "operator token" in text
        ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).json()
        assert ready["ready"] is True
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=10).status_code == 200
        # the simulated GitHub is wired in: the bot heard the seed PR open and made a watch
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            watches = httpx.get(f"http://127.0.0.1:{port}/api/watches", timeout=5).json()["watches"]
            if watches["items"]:
                break
            time.sleep(0.5)
        assert watches["items"][0]["config_key"] == "minimaxm3-fp4-mi355x-vllm"
        assert (tmp_path / "data" / "sweepbot.sqlite3").exists()
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
    # nothing of the process tree is left running
    leftover = subprocess.run(
        ["pgrep", "-f", f"--port {port}"], capture_output=True, text=True
    ).stdout.strip()
    assert leftover == ""
