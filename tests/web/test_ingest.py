"""Ingest on the embedded default: every real payload accepted and processed, nothing lost or doubled."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.db import session_scope
from app.flows.ingest.deliveries import process_delivery, reap
from app.models import Delivery
from app.settings import reset_settings_cache
from tests.helpers.signing import fixture_payloads, headers_for
from tests.helpers.wait import wait_for

SECRET = "it's a secret to everybody"
OLD_SECRET = "rotated-out-soon"


@pytest.fixture
def client(sqlite_url: str, settings_env: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[TestClient]:
    from app.web.main import create_app

    settings_env.setenv("SWEEPBOT_DATABASE_URL", sqlite_url)
    settings_env.setenv("SWEEPBOT_WEBHOOK_SECRETS", f"{SECRET}, {OLD_SECRET}")
    # No broker runs in these tests: enqueueing must fail fast and harmlessly (the reaper catches up).
    settings_env.setenv("SWEEPBOT_BROKER_URL", "redis://127.0.0.1:1/0")
    settings_env.setenv("SWEEPBOT_GITHUB_API_URL", "http://127.0.0.1:9/api/v3")
    settings_env.setenv("SWEEPBOT_MAX_WEBHOOK_BYTES", str(64 * 1024))
    reset_settings_cache()
    with TestClient(create_app()) as c:
        yield c


@pytest.fixture
def extra_handlers(client: TestClient, settings_env: pytest.MonkeyPatch) -> None:
    """Load tests/slow_handler.py's handlers (test-only events) next to the real ones."""
    settings_env.setenv("SWEEPBOT_EXTRA_HANDLER_MODULES", "tests.slow_handler")
    reset_settings_cache()


def _count() -> int:
    with session_scope() as s:
        return int(s.execute(select(func.count()).select_from(Delivery)).scalar_one())


def _post(
    client: TestClient,
    event: str,
    body: bytes,
    secret: str | None = SECRET,
    delivery_id: str | None = None,
    **kw: str,
) -> httpx.Response:
    return client.post(
        "/webhooks/github", content=body, headers=headers_for(event, body, secret, delivery_id, **kw)
    )


def test_every_fixture_payload_is_accepted_and_ends_done_or_ignored(
    client: TestClient, fixtures_dir: Path
) -> None:
    payloads = fixture_payloads(fixtures_dir)
    assert len(payloads) >= 20
    ids = []
    for event, path in payloads:
        body = path.read_bytes()
        resp = _post(client, event, body, delivery_id=f"fx-{event}-{path.stem}".replace(".", "-"))
        assert resp.status_code == (200 if event == "ping" else 202), (path, resp.text)
        ids.append((event, resp.json()["delivery"]))
    for event, delivery_id in ids:
        if event != "ping":
            assert process_delivery(delivery_id) in ("done", "ignored"), delivery_id
    with session_scope() as s:
        rows = s.execute(select(Delivery)).scalars().all()
        assert len(rows) == len(payloads)
        bad = [(r.id, r.status, r.error) for r in rows if r.status not in ("done", "ignored")]
        assert not bad


def test_same_delivery_id_twice_is_processed_once(client: TestClient, fixtures_dir: Path) -> None:
    body = (fixtures_dir / "github/webhooks/push/payload.json").read_bytes()
    first = _post(client, "push", body, delivery_id="dup-1")
    second = _post(client, "push", body, delivery_id="dup-1")
    assert first.status_code == 202
    assert second.status_code == 200 and second.json()["status"] == "duplicate"
    assert _count() == 1
    assert process_delivery("dup-1") in ("done", "ignored")
    assert process_delivery("dup-1") == "skipped"  # a second doorbell for the same delivery does nothing
    with session_scope() as s:
        assert s.get_one(Delivery, "dup-1").attempts == 1


def test_secret_rotation_accepts_both_secrets(client: TestClient) -> None:
    body = json.dumps({"zen": "x", "hook_id": 1}).encode()
    assert _post(client, "ping", body, secret=SECRET).status_code == 200
    assert _post(client, "ping", body, secret=OLD_SECRET).status_code == 200
    assert _count() == 2


@pytest.mark.parametrize("case", ["wrong_secret", "missing_signature", "truncated", "non_json", "not_object"])
def test_bad_deliveries_store_nothing(client: TestClient, fixtures_dir: Path, case: str) -> None:
    body = (fixtures_dir / "github/webhooks/issue_comment/created.payload.json").read_bytes()
    headers = headers_for("issue_comment", body, SECRET)
    expected = 401
    if case == "wrong_secret":
        headers = headers_for("issue_comment", body, "not the secret")
    elif case == "missing_signature":
        headers = headers_for("issue_comment", body, None)
    elif case == "truncated":
        body = body[: len(body) // 2]
    elif case == "non_json":
        body = b"<xml>hello</xml>"
        headers = headers_for("issue_comment", body, SECRET)
        expected = 400
    elif case == "not_object":
        body = b'"just a string"'
        headers = headers_for("issue_comment", body, SECRET)
        expected = 400
    resp = client.post("/webhooks/github", content=body, headers=headers)
    assert resp.status_code == expected
    assert set(resp.json()) == {"error", "message"} and resp.json()["message"]
    assert _count() == 0


def test_missing_headers_are_400(client: TestClient) -> None:
    resp = client.post("/webhooks/github", content=b"{}", headers={"Content-Type": "application/json"})
    assert resp.status_code == 400
    assert "X-GitHub-Delivery" in resp.json()["message"]
    assert _count() == 0


def test_oversize_body_is_413_and_stores_nothing(client: TestClient) -> None:
    big = json.dumps({"action": "x", "blob": "a" * (70 * 1024)}).encode()
    assert _post(client, "push", big).status_code == 413

    # Without Content-Length (chunked), the cap still holds while streaming.
    def chunks() -> Iterator[bytes]:
        for i in range(0, len(big), 8192):
            yield big[i : i + 8192]

    resp = client.post("/webhooks/github", content=chunks(), headers=headers_for("push", big, SECRET))
    assert resp.status_code == 413
    assert _count() == 0


def test_form_encoded_delivery_is_accepted(client: TestClient, fixtures_dir: Path) -> None:
    import urllib.parse

    raw = (fixtures_dir / "github/webhooks/push/payload.json").read_text()
    form = urllib.parse.urlencode({"payload": raw}).encode()
    resp = _post(client, "push", form, delivery_id="form-1", content_type="application/x-www-form-urlencoded")
    assert resp.status_code == 202
    with session_scope() as s:
        assert json.loads(s.get_one(Delivery, "form-1").body) == json.loads(raw)


def _wait_unrung(delivery_id: str) -> None:
    import time

    deadline = time.monotonic() + 10
    while True:
        with session_scope() as s:
            if s.get_one(Delivery, delivery_id).enqueued_at is None:
                return
        assert time.monotonic() < deadline, "the doorbell never recorded its failure"
        time.sleep(0.05)


def test_broker_down_delivery_is_stored_then_reaped(
    client: TestClient, fixtures_dir: Path, settings_env: pytest.MonkeyPatch
) -> None:
    body = (fixtures_dir / "github/webhooks/push/payload.json").read_bytes()
    assert _post(client, "push", body, delivery_id="lost-1").status_code == 202
    with session_scope() as s:
        assert s.get_one(Delivery, "lost-1").status == "received"
    sent: list[str] = []
    import app.adapters.queue

    def fake_enqueue(name: str, *args: object, **kw: object) -> bool:
        if name == "sweepbot.process_deliveries":  # the reaper's batch
            batch = args[0]
            assert isinstance(batch, list)  # the delivery ids of the batch
            sent.extend(str(i) for i in batch)
        return True

    _wait_unrung("lost-1")  # the doorbell failed (no broker) and said so
    settings_env.setattr(app.adapters.queue, "enqueue", fake_enqueue)
    assert reap(grace_seconds=0) == ["lost-1"]
    assert reap(grace_seconds=60) == []  # just re-enqueued: not again within the grace period
    assert sent == ["lost-1"]
    assert process_delivery(sent[0]) in ("done", "ignored")


def test_health_endpoints_and_metrics(client: TestClient, fixtures_dir: Path) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 503 and ready.json()["database"]["ok"] and not ready.json()["broker"]["ok"]
    body = (fixtures_dir / "github/webhooks/push/payload.json").read_bytes()
    _post(client, "push", body, delivery_id="m-1")
    process_delivery("m-1")
    text = client.get("/metrics").text
    assert 'sweepbot_deliveries_stored{event="push"' in text
    assert "sweepbot_delivery_ingest_to_done_seconds_bucket" in text


def test_transient_failure_is_retried_then_done_once(
    client: TestClient, tmp_path: Path, settings_env: pytest.MonkeyPatch, extra_handlers: None
) -> None:
    effects = tmp_path / "flaky.txt"
    body = json.dumps({"effects": str(effects), "failures": 2}).encode()
    assert _post(client, "sweepbot_flaky", body, delivery_id="flaky-1").status_code == 202
    assert process_delivery("flaky-1") == "retry"
    with session_scope() as s:
        row = s.get(Delivery, "flaky-1")
        assert row is not None and row.status == "retry" and "502" in (row.error or "")
    assert process_delivery("flaky-1") == "retry"
    assert process_delivery("flaky-1") == "done"
    assert process_delivery("flaky-1") == "skipped"
    assert effects.read_text().splitlines() == ["flaky-1"]
    with session_scope() as s:
        assert s.get_one(Delivery, "flaky-1").attempts == 3


def test_gives_up_after_max_attempts_with_the_error(
    client: TestClient, tmp_path: Path, settings_env: pytest.MonkeyPatch, extra_handlers: None
) -> None:
    settings_env.setenv("SWEEPBOT_DELIVERY_MAX_ATTEMPTS", "2")
    reset_settings_cache()
    body = json.dumps({"effects": str(tmp_path / "never.txt"), "failures": 99}).encode()
    _post(client, "sweepbot_flaky", body, delivery_id="flaky-2")
    assert process_delivery("flaky-2") == "retry"
    assert process_delivery("flaky-2") == "failed"
    with session_scope() as s:
        row = s.get(Delivery, "flaky-2")
        assert row is not None and "gave up after 2 attempts" in (row.error or "")


def test_a_lost_database_race_is_retried_not_failed(
    client: TestClient, tmp_path: Path, settings_env: pytest.MonkeyPatch, extra_handlers: None
) -> None:
    effects = tmp_path / "race.txt"
    body = json.dumps({"effects": str(effects), "failures": 1}).encode()
    assert _post(client, "sweepbot_dbrace", body, delivery_id="race-1").status_code == 202
    assert process_delivery("race-1") == "retry"
    with session_scope() as s:
        row = s.get(Delivery, "race-1")
        assert row is not None and row.status == "retry" and "IntegrityError" in (row.error or "")
        row.next_attempt_at = None  # skip the backoff
    assert process_delivery("race-1") == "done"
    assert effects.read_text().splitlines() == ["race-1"]


def test_an_attempt_that_outlived_its_lease_does_not_overwrite_the_newer_one(
    client: TestClient, tmp_path: Path, settings_env: pytest.MonkeyPatch, extra_handlers: None
) -> None:
    import threading
    from datetime import timedelta

    from app.flows.ingest import deliveries as ingest

    settings_env.setenv("SWEEPBOT_DELIVERY_LEASE_SECONDS", "60")
    reset_settings_cache()
    effects, gate = tmp_path / "gate.txt", tmp_path / "open"
    body = json.dumps({"effects": str(effects), "gate": str(gate)}).encode()
    assert _post(client, "sweepbot_gate", body, delivery_id="gate-1").status_code == 202
    first: list[str] = []
    slow = threading.Thread(target=lambda: first.append(process_delivery("gate-1")))
    slow.start()
    wait_for(lambda: Path(str(effects) + ".first").exists(), "the first attempt to start", 20)
    # The first attempt is still waiting at its gate; the clock moves past its 60-second lease
    # (an injected clock: no wall-clock wait for the lease to run out).
    real_now = ingest.now
    settings_env.setattr(ingest, "now", lambda: real_now() + timedelta(seconds=61))
    assert process_delivery("gate-1") == "done"  # a second worker takes it and finishes
    gate.write_text("open")
    slow.join(timeout=30)
    assert first == ["superseded"]
    with session_scope() as s:
        row = s.get(Delivery, "gate-1")
        assert row is not None and row.status == "done" and row.attempts == 2


def test_an_older_attempt_finishing_first_leaves_the_newer_attempts_claim_alone(
    client: TestClient, tmp_path: Path, settings_env: pytest.MonkeyPatch, extra_handlers: None
) -> None:
    """The lease-expired attempt ends while the newer one is still running: the older one must not
    settle the delivery (it is the newer attempt's to settle), only the newer one may."""
    import threading
    from datetime import timedelta

    from app.flows.ingest import deliveries as ingest

    settings_env.setenv("SWEEPBOT_DELIVERY_LEASE_SECONDS", "60")
    reset_settings_cache()
    effects, gate = tmp_path / "gates.txt", tmp_path / "gate"
    body = json.dumps({"effects": str(effects), "gate": str(gate)}).encode()
    assert _post(client, "sweepbot_gates", body, delivery_id="gates-1").status_code == 202
    results: dict[int, str] = {}
    first = threading.Thread(target=lambda: results.__setitem__(1, process_delivery("gates-1")))
    first.start()
    wait_for(lambda: Path(f"{effects}.started.1").exists(), "the first attempt to start", 20)
    real_now = ingest.now
    settings_env.setattr(ingest, "now", lambda: real_now() + timedelta(seconds=61))
    second = threading.Thread(target=lambda: results.__setitem__(2, process_delivery("gates-1")))
    second.start()
    wait_for(lambda: Path(f"{effects}.started.2").exists(), "the second attempt to start", 20)
    Path(f"{gate}.1").write_text("open")  # the older attempt finishes first
    first.join(timeout=30)
    assert results.get(1) == "superseded"
    with session_scope() as s:
        row = s.get(Delivery, "gates-1")
        assert row is not None and row.status == "processing" and row.attempts == 2
    Path(f"{gate}.2").write_text("open")
    second.join(timeout=30)
    assert results.get(2) == "done"
    with session_scope() as s:
        row = s.get(Delivery, "gates-1")
        assert row is not None and row.status == "done" and row.attempts == 2


def _failures(kind: str = "transient") -> float:
    from prometheus_client import REGISTRY

    value = REGISTRY.get_sample_value(
        "sweepbot_task_failures_total", {"task": "process_delivery", "kind": kind}
    )
    return value or 0.0


def test_a_retry_waits_its_backoff_and_is_enqueued_for_then(
    client: TestClient, tmp_path: Path, settings_env: pytest.MonkeyPatch, extra_handlers: None
) -> None:
    """GitHub's hint (10 s, doubling) sets when the retry is due and when its message fires; the
    retry is counted as a transient task failure and logged; only the final attempt finishes it."""
    from datetime import UTC, datetime, timedelta

    from structlog.testing import capture_logs

    from app.adapters import queue
    from app.core.clock import aware
    from app.flows.ingest import deliveries as ingest

    frozen = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
    settings_env.setattr(ingest, "now", lambda: frozen)
    sent: list[tuple[tuple[object, ...], dict[str, object]]] = []

    def enqueue(*args: object, **kw: object) -> bool:
        sent.append((args, kw))
        return True

    settings_env.setattr(queue, "enqueue", enqueue)
    body = json.dumps(
        {"effects": str(tmp_path / "hint.txt"), "failures": 2, "retry_after": 10, "exponential": True}
    ).encode()
    _post(client, "sweepbot_flaky", body, delivery_id="hint-1")
    # The ingest's own doorbell (`process_deliveries`, a batch) leaves from a background thread
    # whenever it drains, maybe mid-loop: only the retry's own message is compared.

    def retries_sent() -> list[tuple[tuple[object, ...], dict[str, object]]]:
        return [m for m in sent if m[0][0] == "sweepbot.process_delivery"]

    for attempt, wait in ((1, 10.0), (2, 20.0)):
        failures = _failures()
        with capture_logs() as logs:
            assert process_delivery("hint-1") == "retry"
        assert _failures() == failures + 1
        assert retries_sent() == [(("sweepbot.process_delivery", "hint-1"), {"countdown": wait})]
        retries = [e for e in logs if e["event"] == "delivery_retry"]
        assert [(e["error"], e["wait_seconds"]) for e in retries] == [("GitHub answered 502", wait)]
        with session_scope() as s:
            row = s.get_one(Delivery, "hint-1")
            assert (row.status, row.attempts, row.error) == ("retry", attempt, "GitHub answered 502")
            due = frozen + timedelta(seconds=wait)
            assert (aware(row.next_attempt_at), aware(row.enqueued_at)) == (due, due)
            assert (row.finished_at, row.lease_until) == (None, None)  # a retry is not finished
            row.next_attempt_at = None  # skip the backoff
        sent.clear()
    assert process_delivery("hint-1") == "done"
    with session_scope() as s:
        row = s.get_one(Delivery, "hint-1")
        assert (row.status, aware(row.finished_at), row.lease_until) == ("done", frozen, None)


def test_a_rate_limit_at_the_last_attempt_is_still_retried(
    client: TestClient, tmp_path: Path, settings_env: pytest.MonkeyPatch, extra_handlers: None
) -> None:
    settings_env.setenv("SWEEPBOT_DELIVERY_MAX_ATTEMPTS", "1")
    reset_settings_cache()
    body = json.dumps({"effects": str(tmp_path / "rl.txt"), "failures": 1, "rate_limited": True}).encode()
    _post(client, "sweepbot_flaky", body, delivery_id="rl-1")
    assert process_delivery("rl-1") == "retry"
    with session_scope() as s:
        s.get_one(Delivery, "rl-1").next_attempt_at = None
    assert process_delivery("rl-1") == "done"


def _processing(client: TestClient, delivery_id: str, attempts: int, status: str = "processing") -> None:
    _post(client, "push", b'{"ref": "refs/heads/main"}', delivery_id=delivery_id)
    with session_scope() as s:
        row = s.get_one(Delivery, delivery_id)
        row.status, row.attempts = status, attempts


def test_a_settle_writes_only_the_attempt_that_holds_its_own_delivery(client: TestClient) -> None:
    from app.db import session_factory
    from app.flows.ingest.deliveries import _settle

    _processing(client, "mine", 1)
    _processing(client, "other", 1)  # another delivery at the same attempt
    _processing(client, "ended", 1, status="done")  # the same attempt, already settled
    with session_factory()() as s:
        assert _settle(s, "mine", 2, status="failed", error="late") is False  # attempts moved on
        assert _settle(s, "ended", 1, status="failed", error="late") is False
        assert _settle(s, "mine", 1, status="done", error=None) is True
        s.commit()
    with session_scope() as s:
        got = {
            d: (s.get_one(Delivery, d).status, s.get_one(Delivery, d).error)
            for d in ("mine", "other", "ended")
        }
    assert got == {"mine": ("done", None), "other": ("processing", None), "ended": ("done", None)}


def test_a_retry_of_an_attempt_that_lost_its_delivery_is_superseded_and_not_enqueued(
    client: TestClient, settings_env: pytest.MonkeyPatch
) -> None:
    from app.adapters import queue
    from app.core.routing import TransientError
    from app.db import session_factory
    from app.flows.ingest.deliveries import _retry_later

    sent: list[tuple[object, ...]] = []

    def enqueue(*args: object, **kw: object) -> bool:
        sent.append(args)
        return True

    _processing(client, "moved-on", 2)
    settings_env.setattr(queue, "enqueue", enqueue)
    assert (
        _retry_later(session_factory(), "moved-on", 1, TransientError("502", retry_after=5), 5)
        == "superseded"
    )
    assert sent == []
    with session_scope() as s:
        row = s.get_one(Delivery, "moved-on")
        assert (row.status, row.attempts, row.next_attempt_at) == ("processing", 2, None)
