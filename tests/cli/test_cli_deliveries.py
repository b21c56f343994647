"""`sweepbot deliveries list|show|replay` and `sweepbot db upgrade` through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.core.delivery import IncomingDelivery
from app.flows.ingest.deliveries import process_delivery, store_delivery


@pytest.fixture
def stored(db_session: object, settings_env: pytest.MonkeyPatch, fixtures_dir: Path) -> list[str]:
    import app.adapters.queue

    settings_env.setattr(app.adapters.queue, "enqueue", lambda *a, **k: True)  # no broker in this test
    ids = []
    for event, name in (
        ("push", "push/payload.json"),
        ("issue_comment", "issue_comment/created.payload.json"),
    ):
        body = (fixtures_dir / "github/webhooks" / name).read_bytes()
        payload = json.loads(body)
        delivery_id = f"cli-{event}"
        store_delivery(IncomingDelivery(delivery_id, event, payload.get("action"), "o/r", body))
        ids.append(delivery_id)
    process_delivery("cli-push")
    return ids


def test_list_json_has_the_documented_fields(stored: list[str]) -> None:
    result = CliRunner().invoke(cli, ["deliveries", "list", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert {r["id"] for r in rows} == set(stored)
    for row in rows:
        assert {"id", "event", "action", "status", "attempts", "error"} <= set(row)
    by_id = {r["id"]: r for r in rows}
    assert by_id["cli-push"]["status"] in ("done", "ignored") and by_id["cli-push"]["attempts"] == 1
    assert by_id["cli-issue_comment"]["status"] == "received"


def test_list_filters_and_table(stored: list[str]) -> None:
    result = CliRunner().invoke(cli, ["deliveries", "list", "--json", "--event", "issue_comment"])
    assert [r["id"] for r in json.loads(result.stdout)] == ["cli-issue_comment"]
    table = CliRunner().invoke(cli, ["deliveries", "list"])
    assert table.exit_code == 0 and "cli-push" in table.stdout


def test_show_and_replay(stored: list[str]) -> None:
    shown = CliRunner().invoke(cli, ["deliveries", "show", "cli-push"])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["payload"]["ref"]
    replayed = CliRunner().invoke(cli, ["deliveries", "replay", "cli-push", "--actor", "ops"])
    assert replayed.exit_code == 0, replayed.output
    assert process_delivery("cli-push") in ("done", "ignored")
    rows = {r["id"]: r for r in json.loads(CliRunner().invoke(cli, ["deliveries", "list", "--json"]).stdout)}
    assert rows["cli-push"]["attempts"] == 1  # a replay starts a fresh retry budget
    from app.db import session_scope
    from app.models import AuditEntry

    with session_scope() as session:
        entry = session.query(AuditEntry).filter_by(action="delivery.replay").one()
        assert entry.actor == "ops" and entry.detail is not None and entry.detail["previous"]["attempts"] == 1


def test_unknown_delivery_exits_2_with_the_fix(stored: list[str]) -> None:
    for args in (["deliveries", "show", "nope"], ["deliveries", "replay", "nope"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2
        assert "nope" in result.output
