"""Commands, collection and the sticky report against the simulator (in-process SimServer, SQLite)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.flows.scheduler.run_tracking import apply_workflow_run
from app.flows.scheduler.tick import tick
from sim.scenario import BENCH_REPO, BOT, OUTSIDER, SeedScenario
from sim.server import SimServer
from sim.world import SimSettings

PR = 2104
KEY = "minimaxm3-fp4-mi355x-vllm"
REPORT_MARKER = f"<!-- sweepbot:report key={KEY} -->"


@pytest.fixture
def world(db_session: Session, settings_env: pytest.MonkeyPatch) -> Iterator[Any]:
    from app.adapters.permissions import clear_cache
    from app.settings import reset_settings_cache

    with SimServer(settings=SimSettings(time_scale=0.0002, seed=7)) as sim:
        settings_env.setenv("SWEEPBOT_GITHUB_API_URL", sim.github_api_url)
        # The simulator's registry is on loopback: only an operator-configured origin may be.
        settings_env.setenv("SWEEPBOT_REGISTRY_URLS", f"docker.io={sim.url}/hub,ghcr.io={sim.url}")
        settings_env.setenv("SWEEPBOT_GITHUB_TOKEN", "sim-token")
        settings_env.setenv("SWEEPBOT_BOT_LOGIN", BOT)
        reset_settings_cache()
        clear_cache()
        SeedScenario(sim.world).load()
        yield sim.world
        clear_cache()


def _gw(session: Session, caused_by: str = "sweepbot") -> Any:
    from app.adapters.github.gateway import gateway
    from app.settings import get_settings

    return gateway(get_settings(), session, actor=caused_by)


def _comment(session: Session, world: Any, login: str, body: str) -> Any:
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
    # the gateway the issue_comment handler builds: writes caused by the commenter
    out = handle_comment(session, _gw(session, login), payload, bot_login=BOT, delivery_id=f"d-{c.id}")
    session.commit()
    return out


def _replies(world: Any, comment_id: int) -> list[Any]:
    marker = f"<!-- sweepbot:reply comment={comment_id} -->"
    return [c for c in world.repo(BENCH_REPO).comments.values() if marker in c.body]


def _reports(world: Any) -> list[Any]:
    return [c for c in world.repo(BENCH_REPO).comments.values() if REPORT_MARKER in c.body]


def _run_to_completion(session: Session, world: Any) -> None:
    """Tick the scheduler, let the sim's runners finish, fold the runs in, collect, flush the report."""
    from app.db import session_factory
    from app.flows.results.collect import collect_job
    from app.flows.results.reports import flush_reports
    from app.models.sweeps import SweepJob

    tick(session_factory(), _gw)
    deadline = time.monotonic() + 20
    while any(r.status != "completed" for r in world.runs.values()):
        assert time.monotonic() < deadline, "sim runs did not finish"
        world.tick()
        time.sleep(0.01)
    session.expire_all()
    gw = _gw(session)
    after: list[Any] = []
    for run in list(world.runs.values()):
        apply_workflow_run(session, gw, gw.get_run(BENCH_REPO, run.id), after_commit=after)
    session.commit()
    for job in session.scalars(
        select(SweepJob).where(SweepJob.run_conclusion == "success", SweepJob.state == "running")
    ):
        collect_job(session, gw, job.id)
    session.commit()
    flush_reports(session_factory(), _gw, debounce_seconds=0)


def test_maintainer_sweep_runs_two_points_and_reports_once(world: Any, db_session: Session) -> None:
    from app.models.core import AuditEntry

    out = _comment(db_session, world, "bob-maintainer", "Looks good.\n/sweep conc=32,64")
    assert out.status == "answered" and out.results == [("/sweep", "ok")]
    assert len(world.runs) == 0  # dispatch happens on the scheduler tick
    _run_to_completion(db_session, world)
    assert len(world.runs) == 2
    reports = _reports(world)
    assert len(reports) == 1
    body = reports[0].body
    assert "| conc | vLLM | ATOM ref | gap | verdict |" in body
    assert "| 32 |" in body and "16.74 ms" in body and "| 64 |" in body and "25.00 ms" in body
    assert "xychart-beta" in body and "/actions/runs/" in body
    audit = db_session.scalars(select(AuditEntry).where(AuditEntry.action == "command.sweep")).all()
    assert [(a.actor, a.outcome) for a in audit] == [("bob-maintainer", "ok")]
    # The reply is the bot's write, caused by the maintainer's comment.
    writes = db_session.scalars(select(AuditEntry).where(AuditEntry.action.startswith("github."))).all()
    caused = [w for w in writes if w.caused_by == "bob-maintainer"]
    assert caused and {w.action for w in caused} >= {"github.issues/create-comment"}
    assert {w.actor for w in writes} == {"sweepbot"}

    # A second /sweep edits the same report instead of adding one.
    second = _comment(db_session, world, "alice-admin", "/sweep conc=32,64")
    assert second.status == "answered"
    _run_to_completion(db_session, world)
    assert len(_reports(world)) == 1
    assert _reports(world)[0].id == reports[0].id


def test_outsider_is_refused_and_audited(world: Any, db_session: Session) -> None:
    from app.models.core import AuditEntry

    out = _comment(db_session, world, OUTSIDER, "/sweep conc=32")
    assert out.results == [("/sweep", "refused")]
    (reply,) = _replies(world, int(out.reply.rsplit("comment=", 1)[1].split(" ")[0]))
    assert "needs write, maintain or admin" in reply.body and OUTSIDER in reply.body
    audit = db_session.scalars(select(AuditEntry).where(AuditEntry.action == "command.sweep")).one()
    assert (audit.actor, audit.outcome) == (OUTSIDER, "refused")
    assert len(world.runs) == 0


def test_malformed_gets_the_fix_and_quoted_does_nothing(world: Any, db_session: Session) -> None:
    bad = _comment(db_session, world, "bob-maintainer", "/sweep conc=32;64")
    assert bad.results == [("/sweep", "rejected")]
    assert "conc=32,64" in (bad.reply or "")
    before = len(world.repo(BENCH_REPO).comments)
    quoted = _comment(db_session, world, "bob-maintainer", "> /sweep conc=32\n\nno thanks")
    assert quoted.status == "ignored"
    assert len(world.repo(BENCH_REPO).comments) == before + 1  # only the user's own comment
    # A redelivery of the malformed command neither re-runs nor re-posts.
    from app.flows.commands.comments import handle_comment

    c = max(
        world.repo(BENCH_REPO).comments.values(), key=lambda c: c.id if c.body.startswith("/sweep") else -1
    )
    user = {"login": "bob-maintainer", "type": "User"}
    again = handle_comment(
        db_session,
        _gw(db_session),
        {
            "action": "created",
            "issue": {"number": PR, "pull_request": {"url": "x"}},
            "comment": {"id": c.id, "body": c.body, "user": user},
            "repository": {"full_name": BENCH_REPO},
            "sender": user,
        },
        bot_login=BOT,
    )
    assert again.status == "already-answered" and len(_replies(world, c.id)) == 1
