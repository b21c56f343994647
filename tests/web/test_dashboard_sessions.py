"""Dashboard sessions live on the server: sign-out revokes the cookie everywhere it was saved; and
failed sign-ins are limited per client address and per account (429 with Retry-After)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.core.signinlimit import ACCOUNT_LIMIT, ADDRESS_LIMIT, FailureLog, Limit, sign_in_keys
from app.models.sessions import DashboardSession
from app.settings import get_settings, reset_settings_cache
from app.web.dashboard import auth

TOKEN = "op-token-for-session-tests"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.services)])
def app(request: pytest.FixtureRequest, settings_env: pytest.MonkeyPatch) -> Iterator[FastAPI]:
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_clean_url")
    settings_env.setenv("SWEEPBOT_DATABASE_URL", url)
    settings_env.setenv("SWEEPBOT_OPERATOR_TOKENS", TOKEN)
    settings_env.setenv("SWEEPBOT_OPERATOR_BASIC", "alice:s3cret,bob:hunter2")
    settings_env.setenv("SWEEPBOT_GITHUB_API_URL", "http://127.0.0.1:9/api/v3")
    reset_settings_cache()
    from app.web.main import create_app

    application = create_app()
    with TestClient(application):  # the lifespan, once
        yield application


def _browser(app: FastAPI, address: str = "198.51.100.7") -> TestClient:
    return TestClient(app, client=(address, 40000))


def _csrf(client: TestClient) -> str:
    return str(client.get("/api/me").json()["csrf_token"])


def _sign_in(client: TestClient, **form: str) -> int:
    data = form or {"token": TOKEN}
    resp = client.post("/login", data={**data, "csrf_token": _csrf(client)}, follow_redirects=False)
    return resp.status_code


def _me(client: TestClient) -> object:
    return client.get("/api/me").json()["identity"]


def _replay(app: FastAPI, cookie: str) -> TestClient:
    """Another browser presenting a saved copy of a session cookie."""
    other = _browser(app, "203.0.113.9")
    other.cookies.set(auth.COOKIE, cookie)
    return other


def _revoke_by_sign_out(app: FastAPI, client: TestClient) -> None:
    resp = client.post("/logout", data={"csrf_token": _csrf(client)}, follow_redirects=False)
    assert resp.status_code == 303


def _expire_rows(app: FastAPI, client: TestClient) -> None:
    with Session(auth.engine_for(get_settings().database_url)) as db:
        db.execute(update(DashboardSession).values(expires_at=datetime.now(UTC) - timedelta(seconds=1)))
        db.commit()


@pytest.mark.parametrize(
    ("ending", "alive"),
    [
        (None, True),  # the control: a saved copy of a live session authenticates
        (_revoke_by_sign_out, False),
        (_expire_rows, False),
    ],
    ids=["live", "signed-out", "expired"],
)
def test_a_saved_session_cookie_authenticates_only_while_the_server_keeps_the_session(
    app: FastAPI, ending: Callable[[FastAPI, TestClient], None] | None, alive: bool
) -> None:
    browser = _browser(app)
    assert _sign_in(browser) == 303
    saved = browser.cookies.get(auth.COOKIE)
    assert saved
    if ending is not None:
        ending(app, browser)
    replay = _replay(app, saved)
    me = _me(replay)
    assert (me is not None) == alive, me
    # An action with the saved cookie (and the CSRF token it carried) is refused when it is dead.
    csrf = replay.get("/api/me").json()["csrf_token"]
    resp = replay.post("/api/sweeps/1/cancel", headers={"X-CSRF-Token": csrf})
    assert (resp.status_code == 401) == (not alive), resp.text


def test_signing_out_ends_one_session_and_leaves_the_others(app: FastAPI) -> None:
    laptop, phone = _browser(app), _browser(app, "192.0.2.44")
    assert _sign_in(laptop) == 303 and _sign_in(phone) == 303
    _revoke_by_sign_out(app, laptop)
    assert _me(laptop) is None
    assert _me(phone) == {
        "name": auth._token_name(TOKEN),
        "via": "session",
        "actor": f"operator:{auth._token_name(TOKEN)}",
    }
    with Session(auth.engine_for(get_settings().database_url)) as db:
        assert len(db.scalars(select(DashboardSession)).all()) == 1  # the phone's


def test_a_signed_cookie_naming_no_server_session_authenticates_nothing(app: FastAPI) -> None:
    # What cookies held before sessions lived on the server: a name and a kind, validly signed.
    forged = auth._serializer(get_settings()).dumps({"csrf": "c" * 32, "user": "alice", "via": "session"})
    assert _me(_replay(app, forged)) is None
    bogus = auth._serializer(get_settings()).dumps({"csrf": "c" * 32, "sid": "not-a-session"})
    assert _me(_replay(app, bogus)) is None


# ---------------------------------------------------------------------- sign-in limits


def test_an_account_is_locked_after_its_failures_even_with_the_right_password(app: FastAPI) -> None:
    attacker = _browser(app, "198.51.100.66")
    for _ in range(ACCOUNT_LIMIT.failures):
        assert _sign_in(attacker, username="alice", password="guess") == 200  # the form, "wrong"
    resp = attacker.post(
        "/login",
        data={"username": "alice", "password": "s3cret", "csrf_token": _csrf(attacker)},
        follow_redirects=False,
    )
    assert resp.status_code == 429
    retry = int(resp.headers["retry-after"])
    assert 0 < retry <= ACCOUNT_LIMIT.window_seconds
    assert f"try again in {retry} seconds" in resp.text and "account alice" in resp.text
    assert _me(attacker) is None
    # The account is locked from every address; another account from a fresh address is not.
    assert _sign_in(_browser(app, "192.0.2.1"), username="alice", password="s3cret") == 429
    assert _sign_in(_browser(app, "192.0.2.2"), username="bob", password="hunter2") == 303


def test_an_address_is_limited_across_accounts_and_tokens(app: FastAPI) -> None:
    sprayer = _browser(app, "198.51.100.99")
    for i in range(ADDRESS_LIMIT.failures):
        # Few tries per name, so no account reaches its own limit: only the address does.
        assert _sign_in(sprayer, username=f"user{i}", password="guess") == 200
    assert _sign_in(sprayer, token=TOKEN) == 429  # the right token too, from this address
    resp = sprayer.get("/api/me", headers={"Authorization": f"Bearer {TOKEN}"})
    assert resp.status_code == 429 and int(resp.headers["retry-after"]) > 0
    assert _sign_in(_browser(app, "198.51.100.100"), token=TOKEN) == 303  # another address


def test_basic_header_guesses_count_like_the_form(app: FastAPI) -> None:
    import base64

    guesser = _browser(app, "198.51.100.5")
    wrong = {"Authorization": "Basic " + base64.b64encode(b"bob:nope").decode()}
    for _ in range(ACCOUNT_LIMIT.failures):
        assert guesser.get("/api/me", headers=wrong).status_code == 401
    right = {"Authorization": "Basic " + base64.b64encode(b"bob:hunter2").decode()}
    assert guesser.get("/api/me", headers=right).status_code == 429


LIMIT = Limit(failures=3, window_seconds=60)


@pytest.mark.parametrize(
    ("failures_at", "now", "allowed", "retry_after"),
    [
        ([], 0.0, True, 0),
        ([0.0, 1.0], 2.0, True, 0),  # under the limit
        ([0.0, 1.0, 2.0], 3.0, False, 57),  # the oldest leaves the window at 60
        ([0.0, 1.0, 2.0], 59.5, False, 1),  # rounded up, never 0 while refused
        ([0.0, 1.0, 2.0], 60.0, True, 0),  # the oldest has left
        ([0.0, 10.0, 20.0, 30.0], 65.0, False, 5),  # three still inside: 10 leaves at 70
    ],
)
def test_failure_window(failures_at: list[float], now: float, allowed: bool, retry_after: int) -> None:
    log = FailureLog()
    keys = [("address 10.0.0.1", LIMIT)]
    for t in failures_at:
        log.failed(keys, t)
    verdict = log.verdict(keys, now)
    assert (verdict.allowed, verdict.retry_after) == (allowed, retry_after), verdict.why


def test_a_success_clears_the_account_not_the_address() -> None:
    log = FailureLog()
    keys = [("address 10.0.0.1", LIMIT), ("account alice", LIMIT)]
    for t in (0.0, 1.0):
        log.failed(keys, t)
    log.succeeded("account alice")
    log.failed(keys, 2.0)
    assert not log.verdict(keys[:1], 3.0).allowed  # the address: three failures
    assert log.verdict(keys[1:], 3.0).allowed  # the account: one since the success


def test_the_keys_are_bounded_under_a_spray() -> None:
    log = FailureLog(max_keys=100)
    for i in range(1_000):
        log.failed(sign_in_keys(f"10.0.{i // 250}.{i % 250}", f"name{i}"), float(i))
    assert len(log._failures) <= 100


def test_while_the_database_is_down_no_session_starts_ends_or_authenticates(
    app: FastAPI, settings_env: pytest.MonkeyPatch
) -> None:
    browser = _browser(app)
    assert _sign_in(browser) == 303
    csrf = _csrf(browser)
    good = get_settings().database_url
    settings_env.setenv(
        "SWEEPBOT_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:1/none?connect_timeout=2"
    )
    reset_settings_cache()
    assert _me(browser) is None  # fails closed: the session cannot be checked
    resp = browser.post("/logout", data={"csrf_token": csrf}, follow_redirects=False)
    assert resp.status_code == 503 and "could not end the session" in resp.json()["detail"]
    assert _sign_in(_browser(app, "192.0.2.8")) == 503
    settings_env.setenv("SWEEPBOT_DATABASE_URL", good)
    reset_settings_cache()
    assert _me(browser) is not None  # the cookie was kept: the session is back with the database
