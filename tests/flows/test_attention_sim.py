"""What is wrong is said where people look, against the simulator: a ``/depends-on`` of a PR that
does not exist is refused at the command; a body line naming one marks it ``missing`` (the watch
blocks, "Needs a human" lists it); a registry the bot cannot reach is recorded on the watch."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.adapters.github.gateway import session_gateway
from app.flows.ingest.resync import resync_repo
from app.models.tracking import Dependency, DepState, Watch, WatchState
from app.settings import reset_settings_cache
from app.web.dashboard.data.overview import failures
from sim.scenario import BENCH_REPO, RECIPE_BODY
from tests.flows.test_commands_sim import _comment, world  # noqa: F401  (the simulator fixture)

PR = 2104
NOWHERE = "vllm-project/vllm#99999"


def _adopt(session: Session) -> Watch:
    summary = resync_repo(session, session_gateway(session), BENCH_REPO)
    assert summary.errors == []
    session.expire_all()
    return session.scalars(select(Watch).where(Watch.pr_number == PR)).one()


def test_depends_on_a_pr_that_does_not_exist_is_refused(
    world: Any,  # noqa: F811
    db_session: Session,
) -> None:
    out = _comment(db_session, world, "bob-maintainer", f"/depends-on {NOWHERE}")
    assert out.results == [("/depends-on", "failed")]
    assert f"{NOWHERE}: no such pull request (GitHub answers 404 Not Found)" in (out.reply or "")
    assert "nothing was added" in (out.reply or "")
    assert db_session.scalars(select(Dependency).where(Dependency.dep_number == 99999)).first() is None
    # An existing one is still accepted.
    ok = _comment(db_session, world, "bob-maintainer", "/depends-on vllm-project/vllm#47269")
    assert ok.results == [("/depends-on", "ok")]


def test_a_body_line_that_404s_is_marked_missing_and_needs_a_human(
    world: Any,  # noqa: F811
    db_session: Session,
) -> None:
    world.edit_pull_body(BENCH_REPO, PR, RECIPE_BODY + f"Depends-On: {NOWHERE}\n", user="carol-writer")
    watch = _adopt(db_session)
    states = {d.ref: d.state for d in watch.dependencies}
    assert states[NOWHERE] == DepState.MISSING
    assert states["vllm-project/vllm#47269"] == DepState.OPEN
    assert watch.state == WatchState.BLOCKED and f"{NOWHERE} does not exist" in (watch.reason or "")
    listed = [f for f in failures(db_session) if f.kind == "dependency"]
    assert len(listed) == 1 and NOWHERE in listed[0].summary


def test_an_unreachable_registry_is_recorded_on_the_watch(
    world: Any,  # noqa: F811
    db_session: Session,
    settings_env: pytest.MonkeyPatch,
) -> None:
    reachable = _adopt(db_session)
    assert reachable.registry_error is None and reachable.image_repo
    # Nothing listens on port 9: every tag listing fails.
    settings_env.setenv(
        "SWEEPBOT_REGISTRY_URLS", "docker.io=http://127.0.0.1:9/hub,ghcr.io=http://127.0.0.1:9"
    )
    reset_settings_cache()
    down = _adopt(db_session)
    assert down.registry_error and down.registry_error_since is not None
    (listed,) = [f for f in failures(db_session) if f.kind == "registry"]
    assert str(down.image_repo) in listed.summary and "cannot be read" in listed.summary
