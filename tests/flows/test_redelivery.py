"""Deliveries GitHub failed to send are asked for again, exactly once each (app/core/redelivery.py,
app/flows/ingest/redelivery.py), against the simulator's hook-deliveries API."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.redelivery import Item, judge_page, next_cursor, parse_item
from sim.scenario import BENCH_REPO, SeedScenario
from sim.server import SimServer, free_port
from sim.world import SimSettings
from tests.helpers.wait import wait_for

PR = 2104


def _item(i: int, guid: str, status: str = "OK", when: float = 2e9) -> Item:
    return Item(i, guid, status, 0 if status != "OK" else 202, "push", None, when, False)


def test_a_page_is_judged_by_status_guid_memory_watermark_and_horizon() -> None:
    items = [
        _item(9, "new-failed", "failed to connect to host"),
        _item(8, "ok", "OK"),
        _item(7, "stored", "Invalid HTTP Response: 503"),
        _item(6, "asked", "failed to connect to host"),
        _item(5, "new-failed", "failed to connect to host"),  # an older attempt of the same GUID
        _item(4, "below-floor", "failed to connect to host"),
    ]
    v = judge_page(items, stored={"stored"}, asked={"asked"}, floor=4, horizon=0)
    assert [i.guid for i in v.wanted] == ["new-failed"] and v.stop
    assert v.reasons == {"ok": 1, "stored": 1, "asked": 2}
    old = judge_page(
        [_item(3, "ancient", "failed", when=10.0)], stored=set(), asked=set(), floor=None, horizon=100
    )
    assert old.wanted == [] and old.stop


def test_the_real_documented_list_parses_and_links_give_the_cursor(fixtures_dir: Path) -> None:
    import json

    spec = json.loads((fixtures_dir / "github" / "openapi-subset.json").read_text())
    example = spec["components"]["examples"]["hook-delivery-items"]["value"]
    items = [parse_item(x) for x in example]
    assert all(items) and items[0] is not None and items[0].guid == example[0]["guid"]
    link = '<https://api.github.com/app/hook/deliveries?per_page=2&cursor=v1_12077215967>; rel="next"'
    assert next_cursor(link) == "v1_12077215967" and next_cursor(None) is None
    assert next_cursor('<https://x/y?cursor=a>; rel="prev"') is None
    assert parse_item({"id": "x"}) is None


# ------------------------------------------------------------------ against the simulator


def _app_key() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return pem, public


class _Api:
    """The bot's API (webhook receiver, /metrics, dashboard) served on loopback in a thread."""

    def __init__(self, port: int) -> None:
        import uvicorn

        from app.web.main import create_app

        config = uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = f"http://127.0.0.1:{port}"

    def __enter__(self) -> _Api:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            assert time.monotonic() < deadline, "bot API did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def app_world(db_session: Session, settings_env: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    from app.settings import reset_settings_cache

    pem, public = _app_key()
    key_file = tmp_path / "app.pem"
    key_file.write_text(pem)
    port = free_port()
    with SimServer(settings=SimSettings(time_scale=0.0002, seed=3)) as sim:
        SeedScenario(sim.world).load()
        sim.world.add_app(4711, "sweepbot", public, owner="SemiAnalysisAI")
        sim.world.add_installation(4711, "SemiAnalysisAI", [BENCH_REPO])
        sim.world.settings.webhook_url = f"http://127.0.0.1:{port}/webhooks/github"  # nobody there yet
        for key, value in {
            "SWEEPBOT_GITHUB_API_URL": sim.github_api_url,
            "SWEEPBOT_GITHUB_APP_ID": "4711",
            "SWEEPBOT_GITHUB_APP_PRIVATE_KEY_PATH": str(key_file),
            "SWEEPBOT_GITHUB_SECONDS_BETWEEN_REQUESTS": "0",
            "SWEEPBOT_GITHUB_SECONDS_BETWEEN_WRITES": "0",
            "SWEEPBOT_WEBHOOK_SECRETS": sim.world.settings.webhook_secret,
            "SWEEPBOT_BOT_LOGIN": "sweepbot[bot]",
        }.items():
            settings_env.setenv(key, value)
        reset_settings_cache()
        yield sim, port


def test_webhooks_dropped_while_the_bot_is_down_are_recovered_once_each(
    app_world: Any, db_session: Session
) -> None:
    from app.adapters.github.gateway import session_gateway
    from app.flows.ingest import deliveries as ingest
    from app.flows.ingest.redelivery import counts, recover_hook
    from app.models import Delivery
    from app.models.redelivery import RedeliveryRequest
    from app.settings import get_settings

    sim, port = app_world
    world = sim.world
    # The bot is down: three commands are posted and GitHub fails to deliver each of them.
    comments = [world.add_comment(BENCH_REPO, PR, "bob-maintainer", f"/help\n\nask {n}") for n in range(3)]
    wait_for(
        lambda: sum(d.event == "issue_comment" and d.status == "failed" for d in world.deliveries) == 3,
        "failures",
    )
    lost = [d.guid for d in world.deliveries if d.event == "issue_comment"]
    assert db_session.scalar(select(Delivery.id).where(Delivery.id.in_(lost))) is None

    with _Api(port) as api:
        settings = get_settings()
        assert settings.effective_redelivery_hooks == ["app"]
        gw = session_gateway(db_session)
        # per_page=2: the scan pages with GitHub's cursor across several pages
        report = recover_hook(
            db_session, gw, "app", max_pages=20, max_requests=10, horizon_seconds=3 * 86400, per_page=2
        )
        assert report.requested == 3 and report.complete and report.pages > 1
        wait_for(
            lambda: len(db_session.scalars(select(Delivery.id).where(Delivery.id.in_(lost))).all()) == 3,
            "the redelivered webhooks stored",
        )
        # Next cycles ask for nothing: the GUIDs are stored, and were asked for once.
        again = recover_hook(
            db_session, gw, "app", max_pages=20, max_requests=10, horizon_seconds=3 * 86400, per_page=2
        )
        assert again.requested == 0
        db_session.execute(select(RedeliveryRequest)).all()
        with world.lock:
            redelivered = [d.guid for d in world.deliveries if d.redelivery]
        assert sorted(redelivered) == sorted(lost)  # exactly one redelivery per lost GUID

        # Processing them answers each command exactly once.
        for guid in lost:
            ingest.process_delivery(guid)
            ingest.process_delivery(guid)  # a second run finds nothing to claim
        for c in comments:
            marker = f"<!-- sweepbot:reply comment={c.id} -->"
            replies = [x for x in world.repo(BENCH_REPO).comments.values() if marker in x.body]
            assert len(replies) == 1, c.id

        db_session.expire_all()
        assert counts(db_session) == {"requested": 3, "recovered": 3, "refused": 0, "waiting": 0}
        metrics = httpx.get(f"{api.url}/metrics").text
        assert 'sweepbot_redeliveries{state="recovered"} 3.0' in metrics
        page = httpx.get(f"{api.url}/deliveries").text
        assert "<strong>3</strong> asked" in page and "<strong>3</strong> received since" in page


def test_a_bounded_cycle_resumes_where_it_stopped(app_world: Any, db_session: Session) -> None:
    from app.adapters.github.gateway import session_gateway
    from app.flows.ingest.redelivery import recover_hook
    from app.models.redelivery import RedeliveryScan

    sim, _port = app_world
    world = sim.world
    for n in range(5):
        world.add_comment(BENCH_REPO, PR, "bob-maintainer", f"note {n}")
    wait_for(
        lambda: sum(d.event == "issue_comment" and d.status == "failed" for d in world.deliveries) == 5,
        "failures",
    )
    gw = session_gateway(db_session)
    recover = partial(
        recover_hook, db_session, gw, "app", max_requests=10, horizon_seconds=3 * 86400.0, per_page=2
    )
    first = recover(max_pages=1)
    assert not first.complete and first.requested == 2
    paused = db_session.get(RedeliveryScan, "app")
    assert paused is not None and paused.resume_cursor
    rest = recover(max_pages=10)
    assert rest.complete and rest.requested == 3
    scan = db_session.get(RedeliveryScan, "app")
    assert scan is not None and scan.resume_cursor is None and scan.watermark
    with world.lock:
        asked = [d.guid for d in world.deliveries if d.redelivery]
    assert len(asked) == len(set(asked)) == 5
