"""``resync`` against the simulator: a world with open PRs and commands the bot never saw."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app.adapters.github.gateway import session_gateway
from app.cli import cli
from app.core.watchstatus import STATUS_MARKER
from app.db import session_factory
from app.flows.ingest.resync import ADOPTED, adopt_once, resync_repo
from app.flows.scheduler.tick import tick
from app.models.core import AuditEntry
from app.models.sweeps import Sweep, SweepJob
from app.models.tracking import Dependency, Watch, WatchState
from sim.scenario import BENCH_REPO, OUTSIDER, RECIPE_BODY, RECIPE_BRANCH
from tests.flows.test_commands_sim import _comment, _gw, world  # noqa: F401  (the simulator fixture)

FORK_PR = 2200


def _resync(session: Session) -> tuple[Any, list[str]]:
    lines: list[str] = []
    summary = resync_repo(session, session_gateway(session), BENCH_REPO, progress=lines.append)
    return summary, lines


def _state(session: Session, sim_world: Any) -> dict[str, Any]:
    session.expire_all()
    watches = session.scalars(select(Watch).order_by(Watch.id)).all()
    return {
        "watches": [(w.pr_number, w.config_key, w.state, w.admitted_by) for w in watches],
        "deps": sorted((d.watch_id, d.ref, d.source, d.dropped) for d in session.scalars(select(Dependency))),
        "sweeps": session.scalar(select(func.count()).select_from(Sweep)),
        "writes": session.scalar(
            select(func.count()).select_from(AuditEntry).where(AuditEntry.action.startswith("github."))
        ),
        "comments": sorted((c.id, c.body) for c in sim_world.repo(BENCH_REPO).comments.values()),
    }


def test_resync_adopts_open_prs_commands_and_trust_then_changes_nothing(
    world: Any,  # noqa: F811
    db_session: Session,
) -> None:
    # An outsider's PR with the same dependency lines: they count only from a writer.
    head = world.repo(BENCH_REPO).refs[f"refs/heads/{RECIPE_BRANCH}"]
    world.set_ref(BENCH_REPO, "refs/heads/outsider-copy", head, pusher="carol-writer", create=True)
    world.open_pull(
        BENCH_REPO, "outsider-copy", "main", "outsider copy", RECIPE_BODY, user=OUTSIDER, number=FORK_PR
    )
    sweep_cmd = world.add_comment(BENCH_REPO, 2104, "bob-maintainer", "/sweep conc=32")
    refused_cmd = world.add_comment(BENCH_REPO, 2104, OUTSIDER, "/sweep conc=64")
    world.add_comment(BENCH_REPO, 2104, "carol-writer", "thanks, no command here")

    summary, lines = _resync(db_session)

    assert summary.errors == [] and summary.pulls == 2 and summary.comments == 2
    assert lines[0] == f"{BENCH_REPO}: 2 open PR(s)"
    assert any(line.startswith(f"{BENCH_REPO}#2104: ") for line in lines)
    assert any(line.startswith(f"{BENCH_REPO}#{FORK_PR}: ") for line in lines)
    by_pr = {w.pr_number: w for w in db_session.scalars(select(Watch))}
    assert by_pr[2104].admitted_by == "carol-writer"
    assert sorted(d.ref for d in by_pr[2104].dependencies if not d.dropped) == [
        "vllm-project/vllm#47269",
        "vllm-project/vllm#47270",
    ]
    assert by_pr[FORK_PR].admitted_by is None and by_pr[FORK_PR].state == WatchState.UNAPPROVED
    # The maintainer's unanswered /sweep became a sweep; the outsider's was refused, both answered.
    assert db_session.scalar(select(func.count()).select_from(Sweep).where(Sweep.pr_number == 2104)) == 1
    bodies = [c.body for c in world.repo(BENCH_REPO).comments.values()]
    assert sum(f"comment={sweep_cmd.id} " in b for b in bodies) == 1
    assert any(f"comment={refused_cmd.id} " in b and "needs write" in b for b in bodies)
    assert sum(STATUS_MARKER in b for b in bodies) >= 1

    before = _state(db_session, world)
    again, _ = _resync(db_session)
    assert again.errors == [] and again.comments == 0  # every command already has its reply
    assert _state(db_session, world) == before


def test_resync_with_a_lost_database_finds_the_bot_markers(
    world: Any,  # noqa: F811
    db_session: Session,
) -> None:
    """The bot answered a command earlier (its reply marker is on the thread) and then lost its
    database: resync does not run that command a second time."""
    cmd = world.add_comment(BENCH_REPO, 2104, "bob-maintainer", "/sweep conc=32")
    world.add_comment(BENCH_REPO, 2104, "sweepbot[bot]", f"done\n\n<!-- sweepbot:reply comment={cmd.id} -->")
    summary, _ = _resync(db_session)
    assert summary.errors == [] and summary.comments == 0
    assert db_session.scalar(select(func.count()).select_from(Sweep)) == 0
    statuses = [c for c in world.repo(BENCH_REPO).comments.values() if STATUS_MARKER in c.body]
    assert len(statuses) == 1


def test_first_start_adopts_a_repo_once_per_database(
    world: Any,  # noqa: F811
    db_session: Session,
) -> None:
    first = adopt_once(db_session, session_gateway(db_session), BENCH_REPO)
    assert first is not None and first.pulls == 1 and first.errors == []
    assert db_session.scalars(select(Watch).where(Watch.pr_number == 2104)).first() is not None
    (row,) = db_session.scalars(select(AuditEntry).where(AuditEntry.action == ADOPTED)).all()
    assert (row.target, row.outcome) == (BENCH_REPO, "ok")
    assert adopt_once(db_session, session_gateway(db_session), BENCH_REPO) is None


def test_cli_resync_prints_one_line_per_pr_and_refuses_a_bad_repo(
    world: Any,  # noqa: F811
    db_session: Session,
) -> None:
    runner = CliRunner()
    out = runner.invoke(cli, ["resync", "--repo", BENCH_REPO])
    assert out.exit_code == 0, out.output
    lines = [x for x in out.output.splitlines() if x.startswith(BENCH_REPO)]  # not the log lines
    assert lines[0] == f"{BENCH_REPO}: 1 open PR(s)"
    assert lines[1].startswith(f"{BENCH_REPO}#2104: ") and "event(s) acted on" in lines[1]
    assert lines[-1].startswith(f"{BENCH_REPO}: 1 PR(s), 0 unanswered command comment(s)")
    assert lines[-1].endswith("0 failed")
    bad = runner.invoke(cli, ["resync", "--repo", "not-a-repo"])
    assert bad.exit_code == 2 and "'not-a-repo' is not OWNER/REPO" in bad.output


def test_runs_that_finished_while_the_bot_was_down_are_folded_in(
    world: Any,  # noqa: F811
    db_session: Session,
) -> None:
    """The bot dispatched, then missed every workflow_run delivery: resync reads the runs."""
    assert _comment(db_session, world, "bob-maintainer", "/sweep conc=32").results == [("/sweep", "ok")]
    tick(session_factory(), _gw)
    deadline = time.monotonic() + 20
    while not world.runs or any(r.status != "completed" for r in world.runs.values()):
        assert time.monotonic() < deadline, "sim runs did not finish"
        world.tick()
        time.sleep(0.01)
    db_session.expire_all()
    assert {j.run_conclusion for j in db_session.scalars(select(SweepJob))} == {None}
    summary, lines = _resync(db_session)
    assert summary.errors == [] and summary.runs == len(world.runs) >= 1
    assert lines[-1].startswith(f"{BENCH_REPO}: {summary.runs} recent run(s), ")
    db_session.expire_all()
    assert {j.run_conclusion for j in db_session.scalars(select(SweepJob))} == {"success"}
