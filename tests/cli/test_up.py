"""`sweepbot up`, the README's first command: starts everything, prints the URLs, stops on Ctrl-C;
refuses a second copy on the same data dir and a busy port in one line; restarts consistently."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
import pytest

from sim.server import free_port
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

REPO, PR = "SemiAnalysisAI/InferenceX", 2104


def _env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEEPBOT_")}
    env.update({"SWEEPBOT_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT), "COLUMNS": "100", **extra})
    return env


def _sweepbot(
    cwd: Path, env: dict[str, str], *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextmanager
def _up(cwd: Path, env: dict[str, str], port: int, sim_port: int) -> Iterator[str]:
    """`sweepbot up` until it says it is up; yields what it printed; SIGINT at the end, exit 0."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "up", "--port", str(port), "--sim-port", str(sim_port)],
        cwd=cwd,
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
        yield output.decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
        try:
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
    leftover = subprocess.run(
        ["pgrep", "-f", f"--port {port}"], capture_output=True, text=True
    ).stdout.strip()
    assert leftover == "", "part of the process tree is still running"


def _beat_seen_twice(data_dir: Path, timeout: float = 30) -> None:
    """The beat schedule fires: the heartbeat task only beat sends is run, and run again."""
    deadline, seen = time.monotonic() + timeout, set[str]()  # SQLite gives the timestamps as text
    while time.monotonic() < deadline and len(seen) < 2:
        db = sqlite3.connect(data_dir / "sim" / "sweepbot.sqlite3")
        try:
            seen |= {row[0] for row in db.execute("SELECT seen_at FROM heartbeats WHERE name = 'beat'")}
        finally:
            db.close()
        time.sleep(0.5)
    assert len(seen) >= 2, f"beat's heartbeat task did not run twice within {timeout:.0f}s: {seen}"


_CELERY_TITLE = re.compile(r"^\[celeryd: \S+:MainProcess\] .*\((worker[^)]*)\)")


def _service_processes(data_dir: Path) -> list[list[str]]:
    """The `python -m app <command>` processes running for this data dir (no pool children).

    With setproctitle installed, Celery retitles its main process (the command moves into the
    title's parentheses) and the new title overwrites the environment it was started with: such a
    process counts when its parent is one of this data dir's processes."""
    ours: set[int] = set()
    found = []
    titled = []
    for proc in psutil.process_iter(["cmdline", "environ", "ppid"]):
        env, cmd = proc.info["environ"] or {}, proc.info["cmdline"] or []
        if env.get("SWEEPBOT_DATA_DIR") == str(data_dir):
            ours.add(proc.pid)
            if cmd[1:3] == ["-m", "app"]:
                found.append(cmd[3:])
        elif cmd and (title := _CELERY_TITLE.match(" ".join(cmd))):
            titled.append((proc.info["ppid"], title.group(1).split()))
    return found + [cmd for ppid, cmd in titled if ppid in ours]


def _wait_for_status_comment(port: int, sim_port: int) -> None:
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        comments = httpx.get(f"http://127.0.0.1:{sim_port}/_admin/comments/{REPO}/{PR}", timeout=5).json()
        if any("sweepbot:status" in c["body"] for c in comments):
            return
        time.sleep(0.5)
    raise AssertionError("the bot never posted its status comment on the simulated recipe PR")


def _database_facts(data_dir: Path) -> tuple[list[int], list[str]]:
    """The status comment ids the bot's database knows for the recipe PR, and its delivery ids."""
    db = sqlite3.connect(data_dir / "sim" / "sweepbot.sqlite3")
    try:
        ids = [
            row[0] for row in db.execute("SELECT comment_id FROM status_comments WHERE pr_number = ?", (PR,))
        ]
        deliveries = [row[0] for row in db.execute("SELECT id FROM deliveries WHERE event != 'ping'")]
    finally:
        db.close()
    return ids, deliveries


def test_up_serves_refuses_a_second_copy_and_restarts_consistently(tmp_path: Path) -> None:
    port, sim_port = free_port(), free_port()
    data = tmp_path / "data"
    env = _env(data, SWEEPBOT_WEBHOOK_SECRETS="operator-secret-1")
    for run in (1, 2):
        with _up(tmp_path, env, port, sim_port) as text:
            assert f"http://127.0.0.1:{port}/" in text and "operator token" in text
            ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).json()
            assert ready["ready"] is True
            assert httpx.get(f"http://127.0.0.1:{port}/", timeout=10).status_code == 200
            # The embedded stack is three processes: beat is a thread of the worker, and fires.
            commands = sorted(cmd[0] for cmd in _service_processes(data))
            assert commands == ["api", "up", "worker"], _service_processes(data)
            assert ["worker", "--beat"] in _service_processes(data)
            _beat_seen_twice(data)
            _wait_for_status_comment(port, sim_port)
            watches = httpx.get(f"http://127.0.0.1:{port}/api/watches", timeout=5).json()["watches"]
            assert watches["items"][0]["config_key"] == "minimaxm3-fp4-mi355x-vllm"
            # Restart consistency: the status comment the database knows exists in this world's PR,
            # and the seed deliveries are this world's only (no pile-up from the previous run).
            known, deliveries = _database_facts(data)
            sim_comments = httpx.get(
                f"http://127.0.0.1:{sim_port}/_admin/comments/{REPO}/{PR}", timeout=5
            ).json()
            assert known and set(known) <= {c["id"] for c in sim_comments}, (run, known, sim_comments)
            sent = httpx.get(f"http://127.0.0.1:{sim_port}/_admin/deliveries", timeout=5).json()
            assert deliveries and set(deliveries) <= {d["guid"] for d in sent}, (run, deliveries, sent)
            assert any(d["event"] == "pull_request" and d["action"] == "opened" for d in sent)
            # The operator's webhook secret is kept beside the simulator's.
            body = b'{"zen": "kept"}'
            sig = "sha256=" + hmac.new(b"operator-secret-1", body, hashlib.sha256).hexdigest()
            hook = httpx.post(
                f"http://127.0.0.1:{port}/webhooks/github",
                content=body,
                headers={
                    "X-GitHub-Event": "ping",
                    "X-GitHub-Delivery": f"kept-secret-{run}",
                    "X-Hub-Signature-256": sig,
                    "Content-Type": "application/json",
                },
                timeout=10,
            )
            assert hook.status_code in (200, 202), hook.text
            if run == 1:
                # A second copy on the same data dir: one line saying where the first one is.
                second = _sweepbot(
                    tmp_path, env, "up", "--port", str(free_port()), "--sim-port", str(free_port())
                )
                assert second.returncode == 2, second
                assert "Traceback" not in second.stderr + second.stdout
                line = second.stderr.strip()
                assert "\n" not in line, line
                assert "already running" in line and f"dashboard at http://127.0.0.1:{port}/" in line
                assert "--data-dir" in line
                # Another data dir, but the same ports: each refusal names the port and its flag.
                other = _env(tmp_path / "other")
                busy_api = _sweepbot(
                    tmp_path, other, "up", "--port", str(port), "--sim-port", str(free_port())
                )
                assert busy_api.returncode == 2 and "Traceback" not in busy_api.stderr
                assert busy_api.stderr.strip() == (
                    f"port {port} on 127.0.0.1 (the API and dashboard) is already in use: stop what listens "
                    "there, or choose another port with --port"
                )
                busy_sim = _sweepbot(
                    tmp_path, other, "up", "--port", str(free_port()), "--sim-port", str(sim_port)
                )
                assert busy_sim.returncode == 2 and "Traceback" not in busy_sim.stderr
                assert f"port {sim_port}" in busy_sim.stderr and "--sim-port" in busy_sim.stderr
                assert "\n" not in busy_sim.stderr.strip()
    # the embedded database of a real deployment in this data dir was never created by the sim
    assert not (data / "sweepbot.sqlite3").exists()


def test_an_explicit_database_with_the_simulator_is_refused_with_the_fix(tmp_path: Path) -> None:
    env = _env(tmp_path / "data", SWEEPBOT_DATABASE_URL=f"sqlite:///{tmp_path / 'mine.sqlite3'}")
    out = _sweepbot(tmp_path, env, "up", "--port", str(free_port()), "--sim-port", str(free_port()))
    assert out.returncode == 2, out
    assert "SWEEPBOT_DATABASE_URL is set" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "mine.sqlite3").exists()


def test_the_apis_own_port_error_is_printed_not_only_logged(tmp_path: Path) -> None:
    """The race the pre-check cannot close: the port is taken between the check and the API's bind."""
    from devstack.launcher import Stack, StartRefused, wait_healthy

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = _env(tmp_path, SWEEPBOT_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}")
        running = Stack(api_url=f"http://127.0.0.1:{port}", env=env, log_dir=tmp_path)
        running.start_process("api", "api", "--host", "127.0.0.1", "--port", str(port), "--no-migrate")
        try:
            with pytest.raises(StartRefused) as refused:
                # the listening socket answers nothing on /healthz: only the API's exit ends this
                wait_healthy(running.api_url, running, timeout=60)
        finally:
            running.stop()
    message = str(refused.value)
    assert "address already in use" in message.lower() and "--port" in message


def test_demo_refuses_a_busy_port_and_a_second_copy_in_one_line(tmp_path: Path) -> None:
    from devstack.launcher import instance_lock

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        out = _sweepbot(
            tmp_path, _env(tmp_path / "data"), "demo", "--port", str(busy), "--sim-port", str(free_port())
        )
    assert out.returncode == 2 and "Traceback" not in out.stderr, out
    assert out.stderr.strip() == (
        f"port {busy} on 127.0.0.1 (the API and dashboard) is already in use: stop what listens there, "
        "or choose another port with --port"
    )
    # a demo already running on this data dir (its lock held): refused before anything is wiped
    with instance_lock((tmp_path / "data").resolve(), "demo", "http://127.0.0.1:8000/"):
        (tmp_path / "data" / "demo").mkdir()
        (tmp_path / "data" / "demo" / "keep").write_text("the running demo's")
        second = _sweepbot(tmp_path, _env(tmp_path / "data"), "demo", "--port", str(free_port()))
    assert (
        second.returncode == 2
        and "already running" in second.stderr
        and "http://127.0.0.1:8000/" in second.stderr
    )
    assert (tmp_path / "data" / "demo" / "keep").exists()


def test_demo_refuses_an_unknown_sweep_mode(tmp_path: Path) -> None:
    out = _sweepbot(tmp_path, _env(tmp_path / "data"), "demo", "--sweep-mode", "both")
    assert out.returncode == 2 and "Traceback" not in out.stderr, out
    assert out.stderr.strip() == "unknown --sweep-mode 'both': use label or dispatch"
    assert not (tmp_path / "data" / "demo").exists()  # refused before anything starts
