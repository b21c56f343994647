"""The pinned nightly labelled on the dashboard's timeline, the API and deps status after a bump."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from tests.browser.seed import KEY, NEW_IMAGE, SHAS, seed

NEWER = f"nightly-{SHAS[5]}"
PINNED = f"nightly-{SHAS[4]}"


@pytest.fixture
def newer_nightly(db_session: Session, settings_env: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The seeded bumped watch, after a newer nightly that also contains everything appeared."""
    from app.models.tracking import ImageTag, Watch
    from app.settings import reset_settings_cache

    settings_env.setenv("SWEEPBOT_GITHUB_API_URL", "http://127.0.0.1:9/api/v3")
    reset_settings_cache()
    seeded = seed(db_session)
    watch = db_session.get(Watch, seeded.watch)
    assert watch is not None and watch.pinned_image == NEW_IMAGE
    watch.chosen_tag = NEWER  # what the evaluation reports: the newest containing every dependency
    assert db_session.scalar(select(ImageTag).where(ImageTag.tag == NEWER)) is not None
    db_session.commit()
    from app.web.main import create_app

    with TestClient(create_app()) as client:
        yield client


def test_timeline_and_api_mark_the_pinned_nightly_chosen_after_a_bump(newer_nightly: TestClient) -> None:
    body = newer_nightly.get("/api/watches").json()
    bumped = next(w for w in body["watches"]["items"] if w["config_key"] == KEY)
    assert bumped["chosen_tag"] == PINNED and bumped["newest_containing_tag"] == NEWER
    tags = {t["tag"]: t for t in body["timelines"][0]["tags"]}
    assert tags[PINNED]["chosen"] and tags[PINNED]["pinned"]
    assert not tags[NEWER]["chosen"] and tags[NEWER]["newest_containing"]
    page = newer_nightly.get("/watches").text
    assert f"chosen nightly: <code>{PINNED}</code>" in page
    assert f"newer nightly with every dependency: <code>{NEWER}</code>" in page and "not bumped to" in page


def test_deps_status_shows_both_labelled(newer_nightly: TestClient) -> None:
    from app.cli import cli

    rows = json.loads(CliRunner().invoke(cli, ["deps", "status", "--json"]).stdout)
    row = next(r for r in rows if r["config_key"] == KEY and r["bumped"])
    assert row["chosen_nightly"] == PINNED and row["newest_containing"] == NEWER
    text = CliRunner().invoke(cli, ["deps", "status"]).stdout
    assert f"nightly: {PINNED}  (chosen and pinned by the bump)" in text
    assert f"newer:   {NEWER}  (also contains every dependency; not bumped to" in text
