"""One bad delivery never sinks the others: a delivery whose fields the database cannot store (a
NUL character, an ``action`` or ``repository.full_name`` over its column) gets a 400 for itself
alone, and every delivery sharing its group commit is stored — on SQLite and on PostgreSQL.

Two layers hold the rule: the edge refuses what it knows no row can hold
(``app.core.delivery``), and the group commit isolates a row the database refuses anyway
(``app.web.groupcommit``: the batch is written again in halves), so an unforeseen data error
never answers 503 "database unavailable" for deliveries that were fine.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from sqlalchemy import String, select

from app.core.delivery import ACTION_MAX, REPO_MAX, IncomingDelivery
from app.db import session_scope
from app.flows.ingest.deliveries import RowsRefused, Stored, stored_outcomes
from app.models import Delivery
from app.settings import reset_settings_cache
from app.web import groupcommit, webhooks
from tests.helpers.signing import headers_for

SECRET = "poison-secret"

# (what is wrong, action, repository.full_name): each one a value some column cannot hold.
POISON = [
    ("NUL in action", "open\u0000ed", "o/r"),
    ("NUL in full_name", "opened", "o/\u0000r"),
    ("action one over", "x" * (ACTION_MAX + 1), "o/r"),
    ("full_name one over", "opened", "o/" + "r" * (REPO_MAX - 1)),
    ("lone NUL action", "\u0000", "o/r"),
]
# Valid values at the very edge: PostgreSQL's varchar(n) counts characters, not bytes.
EDGE = [("opened", "o/r"), ("é" * ACTION_MAX, "o/r"), ("opened", "o/" + "ü" * (REPO_MAX - 2))]


def _body(i: int, action: str, repo: str) -> bytes:
    return json.dumps({"action": action, "repository": {"full_name": repo}, "i": i}).encode()


def _batch() -> list[tuple[str, bytes]]:
    """200 valid deliveries with a poisoned one after every fourth, in one list."""
    out: list[tuple[str, bytes]] = []
    for i in range(200):
        action, repo = EDGE[i % len(EDGE)]
        out.append((f"ok-{i}", _body(i, action, repo)))
        if i % 4 == 0:
            _, action, repo = POISON[(i // 4) % len(POISON)]
            out.append((f"bad-{i}", _body(i, action, repo)))
    return out


async def _deliver(delivery_id: str, body: bytes) -> tuple[str, int, dict[str, object]]:
    """One request through the real edge (``receive_delivery``), as the ASGI server hands it over."""
    headers = headers_for("pull_request", body, SECRET, delivery_id)
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": body, "more_body": False}

    status, answer, _ = await webhooks.receive_delivery(raw, receive)
    return delivery_id, status, answer


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.services)])
def database(request: pytest.FixtureRequest, settings_env: pytest.MonkeyPatch) -> Iterator[str]:
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_clean_url")
    settings_env.setenv("SWEEPBOT_DATABASE_URL", url)
    settings_env.setenv("SWEEPBOT_WEBHOOK_SECRETS", SECRET)
    reset_settings_cache()
    yield request.param


def _stored_ids() -> set[str]:
    with session_scope() as s:
        return set(s.execute(select(Delivery.id)).scalars())


def test_a_poisoned_batch_stores_every_valid_delivery_and_refuses_each_poisoned_one(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rings: list[list[str]] = []
    monkeypatch.setattr(webhooks, "group_commit", groupcommit.GroupCommit(on_stored=rings.append))
    batch = _batch()

    async def burst() -> list[tuple[str, int, dict[str, object]]]:
        return list(await asyncio.gather(*(_deliver(d, b) for d, b in batch)))

    answers = asyncio.run(burst())
    valid = {d for d, _ in batch if d.startswith("ok-")}
    poisoned = {d for d, _ in batch if d.startswith("bad-")}
    assert len(valid) == 200 and len(poisoned) == 50
    assert {d: s for d, s, _ in answers if d in valid} == dict.fromkeys(valid, 202)
    for delivery_id, status, answer in answers:
        if delivery_id in poisoned:
            assert (status, answer["error"]) == (400, "unstorable_field"), (delivery_id, answer)
            message = str(answer["message"])
            assert "NUL" in message or "characters long" in message, message
    assert _stored_ids() == valid
    assert len(rings) < 10  # the 200 shared a few commits: the poison was in the same batches
    assert sorted(i for ids in rings for i in ids) == sorted(valid)


def test_the_edge_limits_are_the_columns_of_the_deliveries_table() -> None:
    columns = Delivery.__table__.c
    action, repo = columns.action.type, columns.repo.type
    assert isinstance(action, String) and isinstance(repo, String)
    assert (action.length, repo.length) == (ACTION_MAX, REPO_MAX)


def _items(n: int, bad_every: int) -> list[IncomingDelivery]:
    out = []
    for i in range(n):
        poisoned = i % bad_every == 0
        action = "op\u0000en" if poisoned and i % 2 == 0 else "x" * (ACTION_MAX + 5) if poisoned else "opened"
        out.append(
            IncomingDelivery(f"{'bad' if poisoned else 'ok'}-{i}", "pull_request", action, "o/r", b"{}")
        )
    return out


def _submit_all(
    commit: groupcommit.GroupCommit, items: list[IncomingDelivery]
) -> list[Stored | BaseException]:
    async def burst() -> list[Stored | BaseException]:
        return list(await asyncio.gather(*(commit.submit(i) for i in items), return_exceptions=True))

    return asyncio.run(burst())


@pytest.mark.services
def test_a_row_postgresql_refuses_past_the_edge_is_isolated_and_the_rest_stored(
    pg_clean_url: str, settings_env: pytest.MonkeyPatch
) -> None:
    # The edge's checks bypassed: rows go straight to the prepared insert, which PostgreSQL (and
    # psycopg, for the NUL) refuses. Only those rows' senders get the refusal.
    settings_env.setenv("SWEEPBOT_DATABASE_URL", pg_clean_url)
    reset_settings_cache()
    items = _items(120, bad_every=9)
    results = _submit_all(groupcommit.GroupCommit(), items)
    for item, result in zip(items, results, strict=True):
        if item.id.startswith("bad-"):
            assert isinstance(result, RowsRefused), (item.id, result)
        else:
            assert isinstance(result, Stored) and result.created, (item.id, result)
    assert _stored_ids() == {i.id for i in items if i.id.startswith("ok-")}


def test_the_group_commit_isolates_refused_rows_in_few_statements() -> None:
    # A store that refuses any batch holding a poisoned row, as a database does with a data error.
    writes: list[int] = []

    def store(batch: list[IncomingDelivery]) -> list[Stored]:
        writes.append(len(batch))
        if any(i.id.startswith("bad-") for i in batch):
            raise RowsRefused("value too long for type character varying(64)")
        return stored_outcomes(batch, {i.id for i in batch})

    items = _items(200, bad_every=50)  # 4 poisoned rows
    results = _submit_all(groupcommit.GroupCommit(store=store), items)
    refused = {i.id for i, r in zip(items, results, strict=True) if isinstance(r, RowsRefused)}
    assert refused == {i.id for i in items if i.id.startswith("bad-")}
    assert all(isinstance(r, Stored) for i, r in zip(items, results, strict=True) if i.id not in refused)
    assert len(writes) <= 2 * 4 * 8 + 1  # about 2k·log2(n) statements, not one per row
