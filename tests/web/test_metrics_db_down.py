"""``/metrics`` while the database is down: its figures are unknown, so the scrape carries none of
them and says ``sweepbot_db_up 0`` — never a 0 that reads as "nothing waits", never the last
value read. The same app, once the database is back, shows them again."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.db import dispose_engines
from app.settings import reset_settings_cache
from tests.helpers.signing import headers_for

SECRET = "metrics-secret"
# Read from the database at scrape time; each must vanish while it cannot be read.
DB_FIGURES = (
    "sweepbot_deliveries_stored{",
    "sweepbot_queue_depth{",
    "sweepbot_oldest_unprocessed_delivery_age_seconds ",
    "sweepbot_redeliveries{",
)
UNREACHABLE = "postgresql+psycopg://postgres@127.0.0.1:1/none?connect_timeout=2"  # nothing listens on 1


def _samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def _figures(samples: dict[str, float]) -> list[str]:
    return [name for name in samples if name.startswith(DB_FIGURES)]


def test_database_figures_are_absent_and_db_up_is_0_while_the_database_is_down(
    db_session: Session, sqlite_url: str, settings_env: pytest.MonkeyPatch
) -> None:
    settings_env.setenv("SWEEPBOT_WEBHOOK_SECRETS", SECRET)
    settings_env.setenv("SWEEPBOT_BROKER_URL", "redis://127.0.0.1:1/0")
    reset_settings_cache()
    from app.web import webhooks
    from app.web.main import create_app

    settings_env.setattr(webhooks.group_commit, "on_stored", lambda ids: None)
    with TestClient(create_app()) as client:
        body = json.dumps({"repository": {"full_name": "o/r"}}).encode()
        assert (
            client.post(
                "/webhooks/github", content=body, headers=headers_for("push", body, SECRET)
            ).status_code
            == 202
        )
        up = _samples(client.get("/metrics").text)
        assert up["sweepbot_db_up"] == 1.0
        assert up['sweepbot_queue_depth{status="received"}'] == 1.0  # the control: figures are read
        assert up["sweepbot_oldest_unprocessed_delivery_age_seconds"] >= 0.0
        assert len(_figures(up)) >= 4

        settings_env.setenv("SWEEPBOT_DATABASE_URL", UNREACHABLE)  # the database goes away
        reset_settings_cache()
        down = _samples(client.get("/metrics").text)
        assert down["sweepbot_db_up"] == 0.0
        assert _figures(down) == [], _figures(down)  # unknown: absent, neither 0 nor the last value
        assert any(
            name.startswith("sweepbot_delivery_ingest_to_done_seconds") for name in down
        )  # process figures stay

        settings_env.setenv("SWEEPBOT_DATABASE_URL", sqlite_url)  # and comes back
        reset_settings_cache()
        dispose_engines()
        back = _samples(client.get("/metrics").text)
        assert back["sweepbot_db_up"] == 1.0 and back['sweepbot_queue_depth{status="received"}'] == 1.0
