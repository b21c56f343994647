"""No traceback for any user error: a bad SWEEPBOT_* value on any command, `sweep create` without
credentials, a busy port on `api` are each one line naming what to change (exit 2); `api` says
where it listens; `sweepbot sim` alone serves, as docs/sim.md says."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from tests.cli.test_cli_errors import _one_clean_line
from tests.conftest import ROOT


def _env(**env: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SWEEPBOT_")}
    clean.update({"PYTHONPATH": str(ROOT), "COLUMNS": "200", **env})
    return clean


def _run(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=cwd,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["queue"],
        ["deps", "status"],
        ["sweep", "status", "1"],
        ["sweep", "create", "--repo", "o/r", "--pr", "1", "--key", "k"],
        ["report", "1"],
        ["db", "upgrade"],
        ["worker"],
        ["up"],
    ],
)
def test_a_bad_setting_is_one_line_naming_the_variable(tmp_path: Path, args: list[str]) -> None:
    line = _one_clean_line(_run(tmp_path, *args, SWEEPBOT_POLL_INTERVAL="soon"))
    assert line.startswith("configuration error: SWEEPBOT_POLL_INTERVAL"), line


def test_the_offline_tools_do_not_read_settings(tmp_path: Path) -> None:
    out = _run(tmp_path, "recipe", "--help", SWEEPBOT_POLL_INTERVAL="soon")
    assert out.returncode == 0 and "configuration error" not in out.stderr


def test_sweep_create_without_credentials_names_the_settings(tmp_path: Path) -> None:
    assert _run(tmp_path, "db", "upgrade").returncode == 0
    line = _one_clean_line(_run(tmp_path, "sweep", "create", "--repo", "o/r", "--pr", "1", "--key", "k"))
    assert "no GitHub credentials" in line and "SWEEPBOT_GITHUB_TOKEN" in line


def test_sweep_create_with_github_unreachable_is_one_clean_line(tmp_path: Path) -> None:
    assert _run(tmp_path, "db", "upgrade").returncode == 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    out = _run(
        tmp_path,
        "sweep",
        "create",
        "--repo",
        "o/r",
        "--pr",
        "1",
        "--key",
        "k",
        SWEEPBOT_GITHUB_TOKEN="t",
        SWEEPBOT_GITHUB_API_URL=f"http://127.0.0.1:{closed}",
        SWEEPBOT_GITHUB_MAX_RETRIES="0",
        SWEEPBOT_LOG_LEVEL="ERROR",
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert "GitHub could not be reached" in out.stderr and "SWEEPBOT_GITHUB_API_URL" in out.stderr


def test_api_on_a_busy_port_names_the_flag(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        line = _one_clean_line(_run(tmp_path, "api", "--port", str(port), "--no-migrate"))
    assert f"127.0.0.1:{port}" in line and "already in use" in line and "--port" in line


def test_api_prints_where_it_listens(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "api", "--port", "0"],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("sweepbot API listening on http://127.0.0.1:"), line
        url = line.split()[4].rstrip("/")
        # The socket listens before the line is printed: the request waits for the server to start.
        response = httpx.get(url + "/healthz", timeout=60)
        assert response.status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_sim_alone_serves_an_empty_sim(monkeypatch: pytest.MonkeyPatch) -> None:
    import sim.cli

    served: list[tuple[str, int]] = []
    monkeypatch.setattr(sim.cli, "_serve", lambda world, host, port: served.append((host, port)))
    result = CliRunner().invoke(sim.cli.sim_app, [])
    assert result.exit_code == 0, result.output
    assert served == [("127.0.0.1", 8765)] and "Usage" not in result.output
