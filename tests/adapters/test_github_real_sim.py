"""Real GitHub behaviour the simulator now plays, end to end through the bot: several App
installations with their own tokens, custom repository roles, 403 on the permission call, and a
secondary rate limit without Retry-After."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy.orm import Session

from sim.scenario import BENCH_REPO, SeedScenario
from sim.server import SimServer
from sim.world import SimSettings, World

PR = 2104
APP_ID = 4711


def _key_pair() -> tuple[str, str]:
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


def _store(world: World, event: str, pick: Any) -> str:
    """Store the newest sim delivery of ``event`` matching ``pick`` as the bot's ingest would."""
    from app.core.delivery import IncomingDelivery
    from app.flows.ingest.deliveries import store_delivery

    with world.lock:
        d = next(x for x in reversed(world.deliveries) if x.event == event and pick(x.payload))
    repo = (d.payload.get("repository") or {}).get("full_name")
    store_delivery(IncomingDelivery(d.guid, d.event, d.action, repo, json.dumps(d.payload).encode()))
    return d.guid


def _replies(world: World, repo: str, comment_id: int) -> list[Any]:
    marker = f"<!-- sweepbot:reply comment={comment_id} -->"
    return [c for c in world.repo(repo).comments.values() if marker in c.body]


# ------------------------------------------------------------------ two installations, two organisations


@pytest.fixture
def two_orgs(db_session: Session, settings_env: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    from app.adapters.permissions import clear_cache
    from app.settings import reset_settings_cache

    pem, public = _key_pair()
    (tmp_path / "app.pem").write_text(pem)
    with SimServer(settings=SimSettings(time_scale=0.0002, seed=5)) as sim:
        w = sim.world
        w.add_app(APP_ID, "sweepbot", public, owner="org-a")
        installs = {}
        for org in ("org-a", "org-b"):
            w.add_org_member(org, f"{org}-dev")
            repo = f"{org}/bench"
            w.add_repo(repo)
            w.commit_files(repo, "main", {"README.md": "bench\n"}, "first", author=f"{org}-dev")
            w.commit_files(repo, "topic", {"notes.txt": "x\n"}, "topic", author=f"{org}-dev")
            w.open_pull(repo, "topic", "main", "A change", user=f"{org}-dev", number=1)
            installs[org] = w.add_installation(APP_ID, org, [repo]).id
        for key, value in {
            "SWEEPBOT_GITHUB_API_URL": sim.github_api_url,
            "SWEEPBOT_GITHUB_APP_ID": str(APP_ID),
            "SWEEPBOT_GITHUB_APP_PRIVATE_KEY_PATH": str(tmp_path / "app.pem"),
            "SWEEPBOT_GITHUB_SECONDS_BETWEEN_REQUESTS": "0",
            "SWEEPBOT_GITHUB_SECONDS_BETWEEN_WRITES": "0",
            "SWEEPBOT_BOT_LOGIN": "sweepbot[bot]",
        }.items():
            settings_env.setenv(key, value)
        reset_settings_cache()
        clear_cache()
        yield sim, installs


def test_two_installations_on_two_organisations_each_use_their_own_token(
    two_orgs: Any, db_session: Session
) -> None:
    from app.adapters.github.credentials import AppCredentials, credentials
    from app.adapters.github.gateway import session_gateway
    from app.flows.ingest.deliveries import process_delivery
    from app.settings import get_settings

    sim, installs = two_orgs
    w = sim.world
    comments = {}
    for org in ("org-a", "org-b"):
        c = w.add_comment(f"{org}/bench", 1, f"{org}-dev", "/help")
        comments[org] = c.id
        guid = _store(w, "issue_comment", lambda p, cid=c.id: p["comment"]["id"] == cid)
        with w.lock:
            payload = next(d.payload for d in w.deliveries if d.guid == guid)
        # the payload says which installation and organisation the event belongs to
        assert payload["installation"]["id"] == installs[org] and payload["organization"]["login"] == org
        assert process_delivery(guid) == "done"
    for org in ("org-a", "org-b"):
        (reply,) = _replies(w, f"{org}/bench", comments[org])
        assert reply.user == "sweepbot[bot]"

    # Scheduled work (no payload): the repository's installation, looked up once.
    for _ in range(3):
        for org in ("org-a", "org-b"):
            assert session_gateway(db_session).get_pull(f"{org}/bench", 1)["number"] == 1

    with w.lock:
        log = list(w.requests)
        tokens = {t.token: t.installation_id for t in w.tokens.values() if t.installation_id}
    repo_calls = [
        r for r in log if r["path"].startswith("/repos/") and not r["path"].endswith("/installation")
    ]
    by_repo: dict[str, set[tuple[int, str]]] = {}
    for r in repo_calls:
        org = r["path"].split("/")[2]
        by_repo.setdefault(org, set()).add((r["installation_id"], r["token_sha256"]))
    # every call on org-a's repo was made with org-a's installation token, and the same for org-b
    assert {inst for inst, _ in by_repo["org-a"]} == {installs["org-a"]}
    assert {inst for inst, _ in by_repo["org-b"]} == {installs["org-b"]}
    assert by_repo["org-a"].isdisjoint(by_repo["org-b"])
    # a token per installation, minted once for all those calls (cached until shortly before expiry)
    minted = [r for r in log if r["op"] == "apps/create-installation-access-token"]
    assert sorted(r["path"] for r in minted) == sorted(
        f"/app/installations/{i}/access_tokens" for i in installs.values()
    )
    assert len(tokens) == 2
    lookups = [r for r in log if r["op"] == "apps/get-repo-installation"]
    assert len(lookups) <= 2  # at most once per repository (deliveries taught the rest)
    app_credentials = credentials(get_settings())
    assert isinstance(app_credentials, AppCredentials) and app_credentials.tokens.minted == 2


def test_a_token_is_minted_again_shortly_before_it_expires(
    two_orgs: Any, db_session: Session, settings_env: pytest.MonkeyPatch
) -> None:
    from app.adapters.github.gateway import session_gateway
    from app.settings import reset_settings_cache

    sim, installs = two_orgs
    sim.world.settings.installation_token_ttl = 3.0  # seconds
    settings_env.setenv("SWEEPBOT_GITHUB_TOKEN_REFRESH_MARGIN_SECONDS", "2")
    reset_settings_cache()
    gw = session_gateway(db_session)
    gw.get_pull("org-a/bench", 1)
    gw.get_pull("org-a/bench", 1)  # 3 s of life, 2 s margin: still fresh
    time.sleep(1.2)
    gw.get_pull("org-a/bench", 1)  # now inside the margin: a new token, before GitHub refuses the old
    with sim.world.lock:
        minted = [r for r in sim.world.requests if r["op"] == "apps/create-installation-access-token"]
    assert len(minted) == 2
    assert set(sim.world.call_summary()["by_operation"]["pulls/get"]) == {"200"}  # never a 401


# ------------------------------------------------------------------ roles


@pytest.fixture
def seeded(db_session: Session, settings_env: pytest.MonkeyPatch) -> Iterator[World]:
    from app.adapters.permissions import clear_cache
    from app.settings import reset_settings_cache

    with SimServer(settings=SimSettings(time_scale=0.0002, seed=7)) as sim:
        settings_env.setenv("SWEEPBOT_GITHUB_API_URL", sim.github_api_url)
        settings_env.setenv("SWEEPBOT_GITHUB_TOKEN", "sim-token")
        settings_env.setenv("SWEEPBOT_BOT_LOGIN", "sweepbot[bot]")
        settings_env.setenv("SWEEPBOT_GITHUB_SECONDS_BETWEEN_REQUESTS", "0")
        settings_env.setenv("SWEEPBOT_GITHUB_SECONDS_BETWEEN_WRITES", "0")
        reset_settings_cache()
        clear_cache()
        SeedScenario(sim.world).load()
        yield sim.world
        clear_cache()


def _command(session: Session, world: World, login: str, body: str) -> Any:
    from app.adapters.github.gateway import session_gateway
    from app.flows.commands.comments import handle_comment

    c = world.add_comment(BENCH_REPO, PR, login, body)
    user = {"login": login, "type": "User"}
    payload = {
        "action": "created",
        "issue": {"number": PR, "pull_request": {"url": "x"}},
        "comment": {"id": c.id, "body": body, "user": user},
        "repository": {"full_name": BENCH_REPO},
        "sender": user,
    }
    out = handle_comment(
        session, session_gateway(session), payload, bot_login="sweepbot[bot]", delivery_id=f"d{c.id}"
    )
    session.commit()
    return out, c.id


def test_a_maintainer_with_a_custom_role_can_sweep(seeded: World, db_session: Session) -> None:
    seeded.add_custom_role("release-captain", "maintain")
    seeded.set_permission(BENCH_REPO, "erin-captain", "release-captain")
    out, _ = _command(db_session, seeded, "erin-captain", "/sweep conc=32")
    assert out.results == [("/sweep", "ok")]
    # and a custom role built on triage may not
    seeded.add_custom_role("labeller", "triage")
    seeded.set_permission(BENCH_REPO, "fred-labeller", "labeller")
    refused, cid = _command(db_session, seeded, "fred-labeller", "/sweep conc=32")
    assert refused.results == [("/sweep", "refused")]
    assert "`triage` permission" in _replies(seeded, BENCH_REPO, cid)[0].body


def test_a_403_on_the_permission_call_means_no_permission_with_a_clear_reply(
    seeded: World, db_session: Session
) -> None:
    seeded.faults.forbid_permission_check = True
    out, cid = _command(db_session, seeded, "bob-maintainer", "/sweep conc=32")
    assert out.results == [("/sweep", "refused")]
    (reply,) = _replies(seeded, BENCH_REPO, cid)
    assert "no permission on SemiAnalysisAI/InferenceX that GitHub reports" in reply.body
    assert "needs write, maintain or admin" in reply.body
    assert not seeded.runs


# ------------------------------------------------------------------ a secondary limit without Retry-After


def test_a_secondary_limit_without_retry_after_delays_the_delivery_a_minute_and_loses_nothing(
    seeded: World, db_session: Session
) -> None:
    from app.flows.ingest import deliveries as ingest
    from app.models import Delivery

    c = seeded.add_comment(BENCH_REPO, PR, "bob-maintainer", "/help")
    guid = _store(seeded, "issue_comment", lambda p: p["comment"]["id"] == c.id)
    seeded.faults.retry_after_header = False
    seeded.faults.fail_next["issues/create-comment"] = [403, 403]
    waits = []
    for _ in range(2):
        started = time.monotonic()
        assert ingest.process_delivery(guid) == "retry"
        assert time.monotonic() - started < 10  # the worker did not sleep on the limit
        db_session.expire_all()
        row = db_session.get(Delivery, guid)
        assert row is not None and row.next_attempt_at is not None
        due = row.next_attempt_at.replace(tzinfo=row.next_attempt_at.tzinfo or UTC)
        waits.append((due - datetime.now(UTC)).total_seconds())
        assert "secondary rate limit" in (row.error or "")
        # time passes (the task retry is due): make it due now
        row.next_attempt_at = datetime.now(UTC)
        db_session.commit()
    assert 59 <= waits[0] <= 61 and 119 <= waits[1] <= 121  # at least 60 s, then doubling
    assert ingest.process_delivery(guid) == "done"
    assert len(_replies(seeded, BENCH_REPO, c.id)) == 1  # nothing lost, nothing doubled
    with seeded.lock:
        limited = [r for r in seeded.requests if r["op"] == "issues/create-comment"]
    assert len(limited) == 3


def test_a_revoked_installation_token_is_minted_again_on_the_retry(
    two_orgs: Any, db_session: Session
) -> None:
    from app.adapters.github.gateway import session_gateway
    from app.core.routing import TransientError

    sim, installs = two_orgs
    gw = session_gateway(db_session)
    gw.get_pull("org-a/bench", 1)
    with sim.world.lock:  # GitHub revokes the token (or it expired early)
        for info in sim.world.tokens.values():
            if info.installation_id == installs["org-a"]:
                info.expires_at = 0.0
    with pytest.raises(TransientError):
        gw.get_pull("org-a/bench", 1)
    assert gw.get_pull("org-a/bench", 1)["number"] == 1  # the retry mints a new token
