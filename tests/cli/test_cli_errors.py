"""CLI errors are one clean line and exit 2: an unreachable or malformed database, bad settings,
an unknown --status, an ambiguous short id; read-only commands leave no data dir behind; help
shows Unix-style metavariables."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.cli.errors import database_error, redact_url, resolve_prefix, short_ids
from tests.conftest import ROOT


def _run(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SWEEPBOT_")}
    clean.update({"PYTHONPATH": str(ROOT), "COLUMNS": "200", **env})
    return subprocess.run(
        [sys.executable, "-m", "app", *args], cwd=cwd, env=clean, capture_output=True, text=True, timeout=60
    )


def _one_clean_line(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr + out.stdout
    line = out.stderr.strip()
    assert line and "\n" not in line, out.stderr
    return line


@pytest.fixture(autouse=True)
def _as_main_runs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """CliRunner builds the click command itself: give it the one `main` runs (build_command)."""
    import typer.main
    import typer.testing

    from app.cli import _with_metavars

    monkeypatch.setattr(
        typer.testing, "_get_command", lambda app: _with_metavars(typer.main.get_command(app))
    )


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_and_malformed_databases_are_one_line(tmp_path: Path) -> None:
    down = f"postgresql+psycopg://sweepbot:hunter2@127.0.0.1:{_closed_port()}/sweepbot"
    for args in (["deliveries", "list"], ["deps", "status"]):
        line = _one_clean_line(_run(tmp_path, *args, SWEEPBOT_DATABASE_URL=down))
        assert "cannot use the database" in line and "SWEEPBOT_DATABASE_URL" in line
        assert "hunter2" not in line  # the password is never printed
    for args, bad in ((["deliveries", "list"], "notaurl"), (["deps", "status"], "nosuchdialect://x/y")):
        line = _one_clean_line(_run(tmp_path, *args, SWEEPBOT_DATABASE_URL=bad))
        assert line.startswith("SWEEPBOT_DATABASE_URL") and "postgresql+psycopg://" in line
    line = _one_clean_line(_run(tmp_path, "deliveries", "list", SWEEPBOT_RUNNER_CAPACITY="mi355x"))
    assert line.startswith("configuration error: SWEEPBOT_RUNNER_CAPACITY")


def test_read_only_commands_leave_no_data_dir_behind(tmp_path: Path) -> None:
    for args in (["deliveries", "list"], ["deps", "status"]):
        line = _one_clean_line(_run(tmp_path, *args))
        assert "no sweepbot database" in line and "sweepbot db upgrade" in line
    assert list(tmp_path.iterdir()) == []
    upgraded = _run(tmp_path, "db", "upgrade")  # a command that writes creates it
    assert upgraded.returncode == 0, upgraded.stderr
    assert (tmp_path / ".sweepbot" / "sweepbot.sqlite3").is_file()


@pytest.fixture
def deliveries(db_session: object, settings_env: pytest.MonkeyPatch) -> list[str]:
    import app.adapters.queue
    from app.flows.ingest.deliveries import store_delivery

    settings_env.setattr(app.adapters.queue, "enqueue", lambda *a, **k: True)  # no broker in this test
    from app.core.delivery import IncomingDelivery

    ids = ["7a1f0c2e-0000-4000-8000-000000000001", "7a1f0c2e-0000-4000-8000-000000000002", "c0ffee00-aaaa"]
    for delivery_id in ids:
        body = json.dumps({"zen": delivery_id}).encode()
        store_delivery(IncomingDelivery(delivery_id, "ping", None, "o/r", body))
    return ids


def test_show_takes_the_short_ids_that_list_prints(deliveries: list[str]) -> None:
    runner = CliRunner()
    table = runner.invoke(cli, ["deliveries", "list"], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    shown_ids = sorted(line.split("│")[1].strip() for line in table.stdout.splitlines() if "ping" in line)
    # ids sharing a long prefix are shown whole; the others by their first 8 characters
    assert shown_ids == [*deliveries[:2], "c0ffee00"]
    shown = runner.invoke(cli, ["deliveries", "show", "c0ffee00"])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["id"] == "c0ffee00-aaaa"
    for short in shown_ids:  # every id the table prints is accepted back
        assert runner.invoke(cli, ["deliveries", "show", short]).exit_code == 0, short
    ambiguous = runner.invoke(cli, ["deliveries", "show", "7a1f"])
    assert ambiguous.exit_code == 2
    assert "matches 2 delivery ids" in ambiguous.output and "give more characters" in ambiguous.output
    missing = runner.invoke(cli, ["deliveries", "replay", "zzz"])
    assert missing.exit_code == 2 and "no delivery with id 'zzz'" in missing.output


def test_a_bad_status_is_refused_with_the_valid_ones(deliveries: list[str]) -> None:
    out = CliRunner().invoke(cli, ["deliveries", "list", "--status", "bogus"], env={"COLUMNS": "200"})
    assert out.exit_code == 2
    text = " ".join(out.output.split())
    assert "'bogus' is not one of" in text
    for status in ("received", "queued", "processing", "retry", "done", "ignored", "failed"):
        assert f"'{status}'" in text
    ok = CliRunner().invoke(cli, ["deliveries", "list", "--json", "--status", "done"])
    assert ok.exit_code == 0 and {r["id"] for r in json.loads(ok.stdout)} == set(deliveries)


def test_help_shows_unix_style_metavariables() -> None:
    runner = CliRunner()
    plan = runner.invoke(cli, ["recipe", "plan", "--help"], env={"COLUMNS": "120"})
    assert "recipe plan [OPTIONS] FILE [KEY]" in plan.stdout  # KEY, or --all-keys
    assert "--seq" in plan.stdout and "SEQ" in plan.stdout
    for noise in ("<str>", "<path>", "<bool>", "{file}", "{key}"):
        assert noise not in plan.stdout, noise
    show = runner.invoke(cli, ["deliveries", "show", "--help"], env={"COLUMNS": "120"})
    assert "[OPTIONS] ID" in show.stdout


def test_error_lines_are_pure_and_redacted() -> None:
    assert redact_url("postgresql://u:secret@h/db") == "postgresql://u:***@h/db"
    assert "unable" not in database_error(RuntimeError("no such table: deliveries"), "sqlite:///x")
    assert resolve_prefix("ab", ["abc", "xyz"], "delivery", "list") == "abc"
    with pytest.raises(LookupError, match="matches 2"):
        resolve_prefix("a", ["ab", "ac"], "delivery", "list")
    assert short_ids(["abcdefgh1", "abcdefgh2", "zz"]) == {
        "abcdefgh1": "abcdefgh1",
        "abcdefgh2": "abcdefgh2",
        "zz": "zz",
    }
    assert short_ids(["1234567890", "abcdefghij"]) == {"1234567890": "12345678", "abcdefghij": "abcdefgh"}
