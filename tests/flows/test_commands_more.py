"""Every comment command end to end against the simulator (in-process SimServer, SQLite), through
``app.flows.commands.comments.handle_comment`` and the registered ``issue_comment`` handler.

tests/flows/test_commands_sim.py covers ``/sweep`` (runs, one report, a second sweep edits it), refusal of
an outsider, a malformed command, a quoted command and a redelivery. This file covers the rest:
``/help``, ``/sweep status``, ``/sweep cancel``, ``/sweep approve`` on a fork PR, ``/depends-on``,
``/depends-on drop`` and ``/bump``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.flows.repo.bench_repo import clear_capacity_cache
from app.flows.scheduler.repair import repair_jobs
from app.flows.scheduler.tick import tick
from app.flows.sweeps import ring
from app.flows.sweeps.cancel import on_pull_request_synchronize
from app.flows.sweeps.job_finish import finish_job
from sim.scenario import BENCH_REPO, BOT, IMAGE, MASTER_PATH, OUTSIDER, RECIPE_BRANCH, VLLM_REPO, SeedScenario
from sim.server import SimServer
from sim.world import SimSettings, iso
from tests.helpers.wait import wait_for

PR = 2104
KEY = "minimaxm3-fp4-mi355x-vllm"
MAINTAINER = "bob-maintainer"
FORK = f"{OUTSIDER}/InferenceX"
DEP_A, DEP_B = f"{VLLM_REPO}#47269", f"{VLLM_REPO}#47270"


@pytest.fixture
def sim(db_session: Session, settings_env: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Seed story on a sim whose benchmark jobs take tens of seconds (runs stay in flight)."""
    from app.adapters.permissions import clear_cache
    from app.settings import reset_settings_cache

    with SimServer(settings=SimSettings(time_scale=0.05, seed=5)) as server:
        scenario = SeedScenario(server.world)
        scenario.load()
        # The bot's config lives on the default branch; it points the image at the sim's Docker Hub.
        server.world.commit_files(
            BENCH_REPO,
            "main",
            {
                ".github/sweepbot.yml": (
                    "version: 1\nimages:\n"
                    f"  - name: {IMAGE}\n    registry: dockerhub\n    url: {server.url}/hub\n"
                    f"    source-repo: {VLLM_REPO}\n"
                )
            },
            "sweepbot config",
            author="alice-admin",
        )
        settings_env.setenv("SWEEPBOT_GITHUB_API_URL", server.github_api_url)
        # The simulator's registry is on loopback: only an operator-configured origin may be.
        settings_env.setenv("SWEEPBOT_REGISTRY_URLS", f"docker.io={server.url}/hub,ghcr.io={server.url}")
        settings_env.setenv("SWEEPBOT_GITHUB_TOKEN", "sim-token")
        settings_env.setenv("SWEEPBOT_GITHUB_SECONDS_BETWEEN_REQUESTS", "0")
        settings_env.setenv("SWEEPBOT_GITHUB_SECONDS_BETWEEN_WRITES", "0")
        settings_env.setenv("SWEEPBOT_BOT_LOGIN", BOT)
        reset_settings_cache()
        clear_capacity_cache()
        clear_cache()
        rung: list[str] = []
        settings_env.setattr(ring, "enqueue", lambda task, *args: rung.append(task))

        def sent(task: str, *args: Any, **kw: Any) -> bool:
            rung.append(task)
            return True  # the broker took it

        settings_env.setattr("app.adapters.queue.enqueue", sent)
        yield {"world": server.world, "scenario": scenario, "rung": rung}
        clear_cache()


def _gw(session: Session) -> Any:
    from app.adapters.github.gateway import gateway
    from app.settings import get_settings

    return gateway(get_settings(), session)


def _factory() -> Any:
    from app.db import session_factory

    return session_factory()


def _payload(world: Any, login: str, body: str, pr: int = PR) -> dict[str, Any]:
    c = world.add_comment(BENCH_REPO, pr, login, body)
    user = {"login": login, "type": "User"}
    return {
        "action": "created",
        "issue": {"number": pr, "pull_request": {"url": "x"}},
        "comment": {"id": c.id, "body": body, "user": user, "created_at": iso(c.created_at)},
        "repository": {"full_name": BENCH_REPO},
        "sender": user,
    }


def _saw_head(session: Session, pr: int, sha: str, *, seconds_ago: float) -> None:
    """What the bot records from a pull_request opened/synchronize event, dated explicitly."""
    from datetime import UTC, datetime, timedelta

    from app.store.heads import record_head

    at = datetime.now(UTC) - timedelta(seconds=seconds_ago)
    record_head(session, repo=BENCH_REPO, pr_number=pr, sha=sha, at=at, source="test")
    session.commit()


def _comment(session: Session, world: Any, login: str, body: str, pr: int = PR) -> Any:
    from app.flows.commands.comments import handle_comment

    payload = _payload(world, login, body, pr)
    out = handle_comment(
        session, _gw(session), payload, bot_login=BOT, delivery_id=f"d-{payload['comment']['id']}"
    )
    session.commit()
    return out


def _reply_of(world: Any, comment_id: int) -> str:
    marker = f"<!-- sweepbot:reply comment={comment_id} -->"
    (reply,) = [c for c in world.repo(BENCH_REPO).comments.values() if marker in c.body]
    assert reply.user == BOT
    return str(reply.body)


def _audit(session: Session, action: str) -> list[tuple[str, str]]:
    from app.models.core import AuditEntry

    rows = session.scalars(select(AuditEntry).where(AuditEntry.action == action).order_by(AuditEntry.id))
    return [(a.actor, a.outcome) for a in rows]


def _sim_open_jobs(world: Any) -> list[Any]:
    with world.lock:
        return [j for j in world.jobs.values() if j.status != "completed"]


def _job_states(session: Session, sweep_id: int | None = None) -> list[str]:
    from app.models.sweeps import SweepJob

    session.expire_all()
    q = select(SweepJob.state).order_by(SweepJob.conc)
    if sweep_id is not None:
        q = q.where(SweepJob.sweep_id == sweep_id)
    return list(session.scalars(q))


# ------------------------------------------------------------------------------------------- /help


def test_help_through_the_registered_handler(sim: dict[str, Any], db_session: Session) -> None:
    from app.core.commands import help_text
    from app.core.routing import Event, HandlerContext, HandlerSkipped
    from app.flows.ingest.deliveries import delivery_gateways
    from app.flows.ingest.handlers import composed

    world = sim["world"]
    payload = _payload(world, OUTSIDER, "What can you do?\n/help")
    handlers = composed().handlers_for("issue_comment", "created")
    event = Event("d-help", "issue_comment", "created", payload)
    ctx = HandlerContext(session=db_session, event=event, gateways=delivery_gateways(db_session, event))
    for handler in handlers:
        with contextlib.suppress(HandlerSkipped):  # as ingest does: nothing for that handler to do
            handler(ctx)
    db_session.commit()
    for callback in ctx.after_commit:
        callback()
    comment_id = payload["comment"]["id"]
    body = _reply_of(world, comment_id)
    assert help_text() in body  # anyone may ask for help: it spends nothing
    reactions = world.comment(BENCH_REPO, comment_id).reactions
    assert [(r.user, r.content) for r in reactions] == [(BOT, "eyes")]
    assert _audit(db_session, "command.help") == [(OUTSIDER, "ok")]
    assert sim["rung"] == []  # /help changes nothing the scheduler cares about

    # A /sweep through the same handler rings the scheduler once its work has committed.
    payload = _payload(world, MAINTAINER, "/sweep conc=32")
    event = Event("d-sweep", "issue_comment", "created", payload)
    ctx = HandlerContext(session=db_session, event=event, gateways=delivery_gateways(db_session, event))
    for handler in handlers:
        with contextlib.suppress(HandlerSkipped):  # as ingest does: nothing for that handler to do
            handler(ctx)
    db_session.commit()
    for callback in ctx.after_commit:
        callback()
    assert sim["rung"] == ["sweepbot.scheduler_tick"]


# ----------------------------------------------------------------------------------- /sweep status


def test_sweep_status_replies_with_progress(sim: dict[str, Any], db_session: Session) -> None:
    from app.models.sweeps import SweepJob

    world = sim["world"]
    none = _comment(db_session, world, OUTSIDER, "/sweep status")
    assert none.results == [("/sweep status", "ok")]
    assert "No sweep has been requested on this PR yet" in (none.reply or "")

    assert _comment(db_session, world, MAINTAINER, "/sweep conc=32,64").results == [("/sweep", "ok")]
    tick(_factory(), _gw)
    running = _comment(db_session, world, OUTSIDER, "/sweep status")  # read-only: anyone may ask
    assert running.results == [("/sweep status", "ok")]
    assert f"| `{KEY}` | #1 | active | `░░░░░░░░░░` 0/2 |" in (running.reply or "")

    with _factory()() as s:
        for job_id in s.scalars(select(SweepJob.id).order_by(SweepJob.conc)).all()[:1]:
            finish_job(s, job_id, "succeeded")
        s.commit()
    half = _comment(db_session, world, OUTSIDER, "/sweep status")
    assert f"| `{KEY}` | #1 | active | `█████░░░░░` 1/2 |" in (half.reply or "")
    assert _audit(db_session, "command.sweep.status") == [(OUTSIDER, "ok")] * 3


# ----------------------------------------------------------------------------------- /sweep cancel


def test_sweep_cancel_cancels_queued_jobs_and_running_runs(sim: dict[str, Any], db_session: Session) -> None:

    world = sim["world"]
    assert _comment(db_session, world, MAINTAINER, "/sweep seq=8k1k").results == [("/sweep", "ok")]
    tick(_factory(), _gw)
    wait_for(lambda: sum(j.status == "in_progress" for j in _sim_open_jobs(world)) == 9, "nine running jobs")
    repair_jobs(_factory(), _gw)
    # by conc: the two evaluated points' eval-only jobs would be e2e-tests.yml's `eval /`, whose
    # matrix the real file never expands (tests/sim/test_eval_matrix.py), so their dispatches count
    # no runner for them (app.core.dispatchjobs): 9 runs fill the 9 runners and the lowest conc
    # waits in the bot's queue, not in GitHub's
    states = ["queued"] * 1 + ["running"] * 9
    assert _job_states(db_session) == states

    refused = _comment(db_session, world, OUTSIDER, "/sweep cancel")
    assert refused.results == [("/sweep cancel", "refused")]
    assert "needs write, maintain or admin" in _reply_of(
        world, int(refused.reply.split("comment=")[1].split()[0])
    )
    assert _job_states(db_session) == states

    done = _comment(db_session, world, MAINTAINER, "/sweep cancel")
    assert done.results == [("/sweep cancel", "ok")] and "Cancelled sweep(s) #1." in (done.reply or "")
    assert set(_job_states(db_session)) == {"cancelled"}
    wait_for(lambda: not _sim_open_jobs(world), "the sim to stop the cancelled runs", 5)
    with world.lock:
        assert len(world.runs) == 9 and {r.conclusion for r in world.runs.values()} == {"cancelled"}
    assert tick(_factory(), _gw).dispatched_runs == 0
    again = _comment(db_session, world, MAINTAINER, "/sweep cancel")
    assert "No open sweep on this PR: nothing to cancel." in (again.reply or "")
    assert _audit(db_session, "command.sweep.cancel") == [
        (OUTSIDER, "refused"),
        (MAINTAINER, "ok"),
        (MAINTAINER, "ok"),
    ]


# ---------------------------------------------------------------------------------- /sweep approve


def _open_fork_pr(world: Any) -> int:
    """dave-outside's fork of the benchmark repo, with a recipe change, as a PR against main."""
    world.add_repo(FORK)
    # A fork shares the object network of its parent (as on GitHub, where the base repo can read a
    # fork PR's head commit): give the sim's fork the parent's object store.
    world.repo(FORK).objects = world.repo(BENCH_REPO).objects
    recipe_head = world.repo(BENCH_REPO).refs[f"refs/heads/{RECIPE_BRANCH}"]
    world.set_ref(FORK, "refs/heads/main", recipe_head, pusher=OUTSIDER)
    world.commit_files(FORK, "main", {"NOTES.md": "fork tweak\n"}, "tweak", author=OUTSIDER)
    pr = world.open_pull(BENCH_REPO, f"{OUTSIDER}:main", "main", "fork recipe", user=OUTSIDER, head_repo=FORK)
    return int(pr.number)


def test_fork_pr_waits_for_approval_and_a_new_push_voids_it(sim: dict[str, Any], db_session: Session) -> None:
    from app.core.routing import Event, HandlerContext
    from app.flows.ingest.deliveries import delivery_gateways
    from app.models.sweeps import Sweep

    world = sim["world"]
    number = _open_fork_pr(world)
    head1 = world.pull_head_sha(world.pull(BENCH_REPO, number))
    _saw_head(db_session, number, head1, seconds_ago=60)  # the bot got the PR's "opened" event

    asked = _comment(db_session, world, MAINTAINER, "/sweep conc=32", pr=number)
    assert asked.results == [("/sweep", "ok")]
    assert "comes from a fork" in (asked.reply or "") and "/sweep approve" in (asked.reply or "")
    sweep = db_session.scalars(select(Sweep)).one()
    assert sweep.is_fork and sweep.state == "awaiting_approval" and sweep.head_sha == head1
    tick(_factory(), _gw)
    assert world.runs == {}  # nothing reaches a runner before a maintainer approves

    refused = _comment(db_session, world, OUTSIDER, "/sweep approve", pr=number)
    assert refused.results == [("/sweep approve", "refused")]
    approved = _comment(db_session, world, MAINTAINER, "/sweep approve", pr=number)
    assert approved.results == [("/sweep approve", "ok")]
    assert f"Approved by @{MAINTAINER} for `{head1[:7]}`" in (approved.reply or "")
    db_session.refresh(sweep)
    assert sweep.state == "active" and sweep.approved_sha == head1

    # The fork pushes before the tick: the approval was for head1 only.
    head2 = world.commit_files(FORK, "main", {"NOTES.md": "sneaky\n"}, "more", author=OUTSIDER)
    tick(_factory(), _gw)
    assert world.runs == {}
    db_session.refresh(sweep)
    assert sweep.state == "awaiting_approval" and sweep.approved_sha is None
    assert "approval voided" in (sweep.state_reason or "")
    assert _audit(db_session, "sweep.approval_voided") == [("sweepbot", "ok")]
    # Its "synchronize" event has not arrived: the head the maintainer saw was head1, not head2.
    stale = _comment(db_session, world, MAINTAINER, "/sweep approve", pr=number)
    assert f"it was `{head1[:12]}` when you wrote it and is `{head2[:12]}` now" in (stale.reply or "")
    assert f"/sweep approve {head2[:12]}" in (stale.reply or "")
    _saw_head(db_session, number, head2, seconds_ago=10)
    stale = _comment(db_session, world, MAINTAINER, "/sweep approve", pr=number)
    assert f"no open sweep of {BENCH_REPO}#{number} is at `{head2[:7]}`" in (stale.reply or "")

    # The push's webhook supersedes the old sweep; a new sweep needs (and gets) a new approval.
    pull = _gw(db_session).get_pull(BENCH_REPO, number)
    payload = {"action": "synchronize", "pull_request": pull, "repository": {"full_name": BENCH_REPO}}
    event = Event("d-sync", "pull_request", "synchronize", payload)
    on_pull_request_synchronize(
        HandlerContext(session=db_session, event=event, gateways=delivery_gateways(db_session, event))
    )
    db_session.commit()
    db_session.refresh(sweep)
    assert sweep.state == "superseded"
    assert _comment(db_session, world, MAINTAINER, "/sweep conc=32", pr=number).results == [("/sweep", "ok")]
    tick(_factory(), _gw)
    assert world.runs == {}
    ok = _comment(db_session, world, "alice-admin", "/sweep approve", pr=number)
    assert f"for `{head2[:7]}`" in (ok.reply or "")
    tick(_factory(), _gw)
    with world.lock:
        (run,) = world.runs.values()
        assert run.inputs["ref"] == head2 and "--conc 32" in run.inputs["generate-cli-command"]
    assert _audit(db_session, "command.sweep.approve") == [
        (OUTSIDER, "refused"),
        (MAINTAINER, "ok"),
        (MAINTAINER, "failed"),
        (MAINTAINER, "ok"),
        ("alice-admin", "ok"),
    ]


# ---------------------------------------------------------------------- /depends-on, drop, /bump


def _recipe_commits(world: Any) -> list[str]:
    repo = world.repo(BENCH_REPO)
    head = repo.refs[f"refs/heads/{RECIPE_BRANCH}"]
    return [head, *repo.objects.ancestors(head)]


def test_depends_on_drop_and_bump(sim: dict[str, Any], db_session: Session) -> None:
    from app.models.tracking import Bump, Watch

    world, scenario = sim["world"], sim["scenario"]
    added = _comment(db_session, world, MAINTAINER, f"/depends-on {DEP_A} https://github.com/{DEP_B}")
    assert added.results == [("/depends-on", "ok")]
    assert f"Added {DEP_A}, {DEP_B}." in (added.reply or "")
    watch = db_session.scalars(select(Watch)).one()
    assert watch.config_key == KEY and watch.decision == "wait"
    assert sorted(d.ref for d in watch.dependencies if not d.dropped) == [DEP_A, DEP_B]
    status = [c for c in world.repo(BENCH_REPO).comments.values() if "<!-- sweepbot:status -->" in c.body]
    assert len(status) == 1 and DEP_A in status[0].body

    again = _comment(db_session, world, MAINTAINER, f"/depends-on {DEP_A}")
    assert f"Already tracked: {DEP_A}." in (again.reply or "")
    refused = _comment(db_session, world, OUTSIDER, f"/depends-on drop {DEP_B}")
    assert refused.results == [("/depends-on drop", "refused")]
    missing = _comment(db_session, world, MAINTAINER, f"/depends-on drop {VLLM_REPO}#1")
    assert "is not a tracked dependency of this PR; nothing dropped" in (missing.reply or "")

    dropped = _comment(db_session, world, MAINTAINER, f"/depends-on drop {DEP_B}")
    assert dropped.results == [("/depends-on drop", "ok")] and f"Dropped {DEP_B}." in (dropped.reply or "")
    db_session.refresh(watch)
    assert [d.ref for d in watch.dependencies if not d.dropped] == [DEP_A]

    before = _recipe_commits(world)
    early = _comment(db_session, world, MAINTAINER, "/bump")
    assert early.results == [("/bump", "ok")] and "bumped" not in (early.reply or "")
    assert _recipe_commits(world) == before and db_session.scalars(select(Bump)).all() == []

    # #47269 merges and a nightly contains it; nobody polls: /bump checks now and bumps.
    for name in ("nightly-before-merge", "merge-47269", "nightly-after-47269"):
        assert scenario.step()["step"] == name
    master_before = world.read_file(BENCH_REPO, MASTER_PATH, RECIPE_BRANCH).decode()
    # Everything is ready now, but a reader may not make the bot write to the repository.
    outsider = _comment(db_session, world, OUTSIDER, "/bump")
    assert outsider.results == [("/bump", "refused")] and "write" in (outsider.reply or "")
    assert _recipe_commits(world) == before and db_session.scalars(select(Bump)).all() == []
    bumped = _comment(db_session, world, "carol-writer", "/bump")
    assert bumped.results == [("/bump", "ok")] and "bumped" in (bumped.reply or "")
    after = _recipe_commits(world)
    assert len(after) == len(before) + 1
    chosen = f"{IMAGE}:nightly-{scenario.vllm_main[-1]}"
    master_after = world.read_file(BENCH_REPO, MASTER_PATH, RECIPE_BRANCH).decode()
    assert chosen not in master_before and chosen in master_after
    assert db_session.scalars(select(Bump)).one().state == "committed"

    # A second /bump converges: no new commit.
    _comment(db_session, world, "carol-writer", "/bump")
    assert _recipe_commits(world) == after and len(db_session.scalars(select(Bump)).all()) == 1
    outcomes = _audit(db_session, "command.depends-on") + _audit(db_session, "command.depends-on.drop")
    assert outcomes == [(MAINTAINER, "ok")] * 2 + [
        (OUTSIDER, "refused"),
        (MAINTAINER, "ok"),
        (MAINTAINER, "ok"),
    ]
    assert _audit(db_session, "command.bump") == [
        (MAINTAINER, "ok"),
        (OUTSIDER, "refused"),
        ("carol-writer", "ok"),
        ("carol-writer", "ok"),
    ]


# ------------------------------------------------------------------------------------------- docs


def test_docs_commands_md_holds_the_generated_help() -> None:
    """docs/commands.md embeds help_text() verbatim between markers, so the docs cannot drift."""
    from app.core.commands import GRAMMAR, help_text
    from tests.conftest import ROOT

    text = (ROOT / "docs" / "commands.md").read_text()
    begin, end = "<!-- help:begin -->\n", "\n<!-- help:end -->"
    assert begin in text and end in text, "docs/commands.md lost its help markers"
    embedded = text.split(begin, 1)[1].split(end, 1)[0]
    assert embedded == help_text(), (
        "docs/commands.md is out of date: paste the output of "
        '`.venv/bin/python -c "from app.core.commands import help_text; print(help_text())"` '
        "between the markers"
    )
    for spec in GRAMMAR:  # every command is also explained below the generated block
        assert f"`{spec.words}`" in text.split(end, 1)[1] or spec.words == "/help", spec.words


def test_a_push_between_the_approve_comment_and_its_handling_is_not_approved(
    sim: dict[str, Any], db_session: Session
) -> None:
    """The approval race: the maintainer reviewed head1 and wrote /sweep approve; the fork pushed
    head2 before the bot handled the comment. Binding to the head at handling time approved head2."""
    from app.flows.commands.comments import handle_comment
    from app.models.sweeps import Sweep

    world = sim["world"]
    number = _open_fork_pr(world)
    head1 = world.pull_head_sha(world.pull(BENCH_REPO, number))
    _saw_head(db_session, number, head1, seconds_ago=60)
    assert _comment(db_session, world, MAINTAINER, "/sweep conc=32", pr=number).results == [("/sweep", "ok")]
    sweep = db_session.scalars(select(Sweep)).one()
    assert sweep.state == "awaiting_approval" and sweep.head_sha == head1

    payload = _payload(world, MAINTAINER, "/sweep approve", pr=number)  # written now, about head1
    head2 = world.commit_files(FORK, "main", {"NOTES.md": "unreviewed\n"}, "sneak", author=OUTSIDER)
    # The push's synchronize event even arrives before the comment is handled.
    _saw_head(db_session, number, head2, seconds_ago=-5)
    out = handle_comment(db_session, _gw(db_session), payload, bot_login=BOT, delivery_id="d-race")
    db_session.commit()
    assert out.results == [("/sweep approve", "failed")]
    assert f"it was `{head1[:12]}` when you wrote it and is `{head2[:12]}` now" in (out.reply or "")
    assert f"`/sweep approve {head2}`" in (out.reply or "")  # all 40 digits: a prefix can collide
    db_session.refresh(sweep)
    assert sweep.state == "awaiting_approval" and sweep.approved_sha is None
    tick(_factory(), _gw)
    assert world.runs == {}  # nothing dispatched

    # Naming a commit that is not the head is refused too; naming the head approves exactly it.
    wrong = _comment(db_session, world, MAINTAINER, f"/sweep approve {head1[:12]}", pr=number)
    assert wrong.results == [("/sweep approve", "failed")]
    assert "is not the PR's head" in (wrong.reply or "")
    # (all 40 digits: by the bot's record head1 was the head when this comment was written, so a
    # prefix of head2 would stand for nothing it saw; issue 25)
    named = _comment(db_session, world, MAINTAINER, f"/sweep approve {head2}", pr=number)
    assert named.results == [("/sweep approve", "ok")]
    assert f"no open sweep of {BENCH_REPO}#{number} is at `{head2[:7]}`" in (named.reply or "")
    db_session.refresh(sweep)
    assert sweep.approved_sha is None  # the head1 sweep stays unapproved


def test_approve_without_any_record_of_the_head_asks_for_the_sha(
    sim: dict[str, Any], db_session: Session
) -> None:
    world = sim["world"]
    number = _open_fork_pr(world)
    head = world.pull_head_sha(world.pull(BENCH_REPO, number))
    assert _comment(db_session, world, MAINTAINER, "/sweep conc=32", pr=number).results == [("/sweep", "ok")]
    out = _comment(db_session, world, MAINTAINER, "/sweep approve", pr=number)
    assert out.results == [("/sweep approve", "failed")]
    assert "no record of this PR's head" in (out.reply or "")
    ok = _comment(db_session, world, MAINTAINER, f"/sweep approve {head}", pr=number)
    assert ok.results == [("/sweep approve", "ok")]
    assert f"Approved by @{MAINTAINER} for `{head[:7]}`" in (ok.reply or "")
