"""Issue 25, the image door, played whole against the simulator (in-process SimServer, SQLite).

Every webhook the simulated GitHub renders goes through the bot's real ingest (stored, then
``process_delivery`` with every composed handler and the real gateway); the beat's poll and the
scheduler's tick run as the worker would run them.

The attack: a user with read permission forks the benchmark repo, points a config key at
``ghcr.io/attacker/evil-vllm`` and writes ``requires vllm-project/vllm#47269`` in the PR body.
#47269 merges; the attacker pushes ``nightly-<merge sha>`` to their image. In the same world a
maintainer's recipe PR (the seed's #2104, same two dependencies) is the control: it must be
bumped and swept as usual, so a bot that does nothing cannot pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import orjson
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.approval import CLOCK_MARGIN
from app.core.clock import utcnow
from app.core.recipes import set_image
from app.flows.repo.bench_repo import clear_capacity_cache
from app.flows.sweeps import ring
from sim.scenario import BENCH_REPO, BOT, IMAGE, MASTER_PATH, OUTSIDER, RECIPE_BRANCH, VLLM_REPO, SeedScenario
from sim.server import SimServer
from sim.world import SimSettings

ATTACK_KEY = "minimaxm3-fp4-mi355x-vllm-mtp"  # pinned to vllm/vllm-openai-rocm on main
CONTROL_KEY = "minimaxm3-fp4-mi355x-vllm"
EVIL = "ghcr.io/attacker/evil-vllm"
EVIL_NAME = "attacker/evil-vllm"  # the repository on the simulated ghcr.io
MAINTAINER = "bob-maintainer"
STATUS = "<!-- sweepbot:status -->"
CONFIG = f"version: 1\nimages:\n  - name: {IMAGE}\n    source-repo: {VLLM_REPO}\n"


@pytest.fixture
def env(db_session: Session, settings_env: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    from app.adapters.permissions import clear_cache
    from app.settings import reset_settings_cache

    with SimServer(settings=SimSettings(time_scale=0.05, seed=5)) as server:
        scenario = SeedScenario(server.world, variant="both-merge")
        scenario.load()
        server.world.commit_files(
            BENCH_REPO,
            "main",
            {".github/sweepbot.yml": CONFIG},
            "sweepbot config",
            author="alice-admin",
        )
        for name, value in {
            "SWEEPBOT_GITHUB_API_URL": server.github_api_url,
            "SWEEPBOT_GITHUB_TOKEN": "sim-token",
            "SWEEPBOT_GITHUB_SECONDS_BETWEEN_REQUESTS": "0",
            "SWEEPBOT_GITHUB_SECONDS_BETWEEN_WRITES": "0",
            "SWEEPBOT_BOT_LOGIN": BOT,
            # The operator maps both registries to the simulator, so a request for the attacker's
            # image would reach it (and be logged) if the bot ever made one.
            "SWEEPBOT_REGISTRY_URLS": f"docker.io={server.url}/hub,ghcr.io={server.url}",
        }.items():
            settings_env.setenv(name, value)
        reset_settings_cache()
        clear_capacity_cache()
        clear_cache()
        settings_env.setattr(ring, "enqueue", lambda task, *args: None)
        settings_env.setattr("app.adapters.queue.enqueue", lambda task, *args, **kw: True)
        yield {"world": server.world, "scenario": scenario, "seen": set()}
        clear_cache()


def _gw(session: Session) -> Any:
    from app.adapters.github.gateway import gateway
    from app.settings import get_settings

    return gateway(get_settings(), session)


def _pump(env: dict[str, Any]) -> None:
    """Every delivery the simulated GitHub rendered since the last pump, through the real ingest."""
    from app.core.delivery import IncomingDelivery
    from app.flows.ingest.deliveries import process_delivery, store_delivery

    world, seen = env["world"], env["seen"]
    for d in list(world.deliveries):
        if d.guid in seen or d.duplicate_of:
            continue
        seen.add(d.guid)
        repo = (d.payload.get("repository") or {}).get("full_name")
        store_delivery(IncomingDelivery(d.guid, d.event, d.action, repo, orjson.dumps(d.payload)))
        process_delivery(d.guid)


def _poll(env: dict[str, Any], session: Session) -> None:
    from app.flows.tracking.watches import poll_watches

    _pump(env)
    poll_watches(session, _gw(session), commit=True)
    _pump(env)


def _tick() -> None:
    from app.db import session_factory
    from app.flows.scheduler.tick import tick

    tick(session_factory(), _gw)


def _open_fork_pr(world: Any, author: str, key: str, image: str, body: str) -> int:
    """``author``'s fork PR pinning ``key`` to ``image``, with ``body``."""
    fork = f"{author}/InferenceX"
    world.add_repo(fork)
    world.repo(fork).objects = world.repo(BENCH_REPO).objects
    world.set_ref(fork, "refs/heads/work", world.repo(BENCH_REPO).refs["refs/heads/main"], pusher=author)
    master = world.read_file(BENCH_REPO, MASTER_PATH, "main").decode()
    world.commit_files(fork, "work", {MASTER_PATH: set_image(master, key, image)}, "pin", author=author)
    pr = world.open_pull(BENCH_REPO, f"{author}:work", "main", "pin", body, user=author, head_repo=fork)
    return int(pr.number)


def _open_attack(world: Any) -> int:
    """The read-only fork author's PR: the key now pins the attacker's image; the body asks the bot
    to wait for #47269 (the objects are shared, as GitHub lets a base repo read a fork's head)."""
    body = f"Needs the INT4 all-reduce fix.\n\nrequires {VLLM_REPO}#47269\n"
    return _open_fork_pr(world, OUTSIDER, ATTACK_KEY, f"{EVIL}:nightly-{'0' * 40}", body)


def _comment(env: dict[str, Any], login: str, number: int, body: str) -> str:
    """A PR comment, processed through ingest; the bot's reply to it."""
    world = env["world"]
    c = world.add_comment(BENCH_REPO, number, login, body)
    _pump(env)
    marker = f"<!-- sweepbot:reply comment={c.id} -->"
    (reply,) = [x for x in world.repo(BENCH_REPO).comments.values() if marker in x.body]
    return str(reply.body)


def _status(world: Any, number: int) -> str:
    found = [
        c.body
        for c in world.repo(BENCH_REPO).comments.values()
        if c.issue_number == number and STATUS in c.body
    ]
    return found[0] if found else ""


def _evil_everywhere(world: Any) -> list[str]:
    """Where the attacker's image or host shows up in what the bot wrote or asked for."""
    bench = world.repo(BENCH_REPO)
    found = []
    for ref, sha in bench.refs.items():
        if ref.startswith("refs/pull/"):
            continue  # GitHub's own ref of the fork PR's head, not a branch anyone wrote
        text = world.read_file(BENCH_REPO, MASTER_PATH, sha)
        if text is not None and b"evil-vllm" in text:
            found.append(f"branch {ref}")
    for commit_sha, commit in bench.objects.commits.items():
        if "evil-vllm" in str(commit.message) or "attacker" in str(commit.message):
            found.append(f"commit {commit_sha}")
    for pr in bench.pulls.values():
        if pr.user == BOT and ("evil-vllm" in pr.body or "evil-vllm" in pr.title):
            found.append(f"PR #{pr.number}")
    for run in world.runs.values():
        if (
            "evil-vllm" in orjson.dumps(run.inputs).decode()
            or "attacker" in orjson.dumps(run.inputs).decode()
        ):
            found.append(f"run {run.id}")
    for req in world.registry_requests:
        if "attacker" in req["path"] + req["query"] + req["image"]:
            found.append(f"registry request {req['path']}")
    return found


def test_a_read_only_fork_cannot_get_its_image_pinned_while_a_maintainers_recipe_is_bumped(
    env: dict[str, Any], db_session: Session
) -> None:
    from app.models.sweeps import Sweep
    from app.models.tracking import Bump, Watch

    world, scenario = env["world"], env["scenario"]
    attack = _open_attack(world)
    _poll(env, db_session)

    # The fork author has read permission: nothing is polled for their watch, and it says so.
    status = _status(world, attack)
    assert "waits for a maintainer" in status and status.count("\n- ") == 1, status
    (evil_watch,) = db_session.scalars(select(Watch).where(Watch.pr_number == attack)).all()
    assert evil_watch.state == "unapproved" and all(d.state == "unknown" for d in evil_watch.dependencies)

    # What the attacker can try themselves: a command, and an edit of their own PR's body.
    refused = _comment(env, OUTSIDER, attack, f"/depends-on {VLLM_REPO}#47269\n/bump")
    assert "has `read` permission" in refused
    world.edit_pull_body(BENCH_REPO, attack, f"Please hurry.\n\nrequires {VLLM_REPO}#47269\n", OUTSIDER)

    # #47269 merges, the attacker tags their image with its merge commit, the nightlies land.
    for name in ("nightly-before-merge", "merge-47269"):
        assert scenario.step()["step"] == name
        _poll(env, db_session)
    world.push_tag(EVIL_NAME, f"nightly-{scenario.facts['merge_47269']}")
    for name in ("nightly-after-47269", "merge-47270", "nightly-contains-both"):
        assert scenario.step()["step"] == name
        _poll(env, db_session)
    _tick()
    _pump(env)

    # The control: the maintainer's recipe PR was bumped onto its branch and its sweep dispatched.
    db_session.expire_all()
    (control,) = db_session.scalars(select(Watch).where(Watch.pr_number == 2104)).all()
    bumps = db_session.scalars(
        select(Bump).where(Bump.watch_id == control.id, Bump.state == "committed")
    ).all()
    assert len(bumps) == 1 and bumps[0].image.startswith(f"{IMAGE}:nightly-"), control.reason
    recipe = world.read_file(BENCH_REPO, MASTER_PATH, RECIPE_BRANCH).decode()
    assert bumps[0].image in recipe
    assert db_session.scalars(select(Sweep).where(Sweep.pr_number == 2104)).all()
    assert world.runs, "the control's sweep reached the runners"
    assert any(IMAGE in r["image"] for r in world.registry_requests), "the bot listed the real image"

    # The attack: no branch, commit, PR, run or registry request carries the attacker's image.
    assert _evil_everywhere(world) == []
    db_session.refresh(evil_watch)
    assert evil_watch.state == "unapproved"
    assert not db_session.scalars(select(Bump).where(Bump.watch_id == evil_watch.id)).all()

    # A maintainer approves the watch (for the head, named in full): its dependency lines now
    # count, but the image a bump pins still comes only from the default branch.
    head = world.pull_head_sha(world.pull(BENCH_REPO, attack))
    # The maintainer reads the edited body for a while before approving: the edit is dated past the
    # approval's clock margin (an injected clock; no wall-clock wait). On an idle machine the whole
    # story runs inside the margin, and the approval would rightly be refused as "changed after".
    evil_watch.body_changed_at = (
        (evil_watch.body_changed_at or utcnow()) - CLOCK_MARGIN - timedelta(seconds=1)
    )
    db_session.commit()
    reply = _comment(env, MAINTAINER, attack, f"/depends-on approve {head}")
    assert f"Approved by @{MAINTAINER}" in reply and "changes its image repository" in reply, reply
    _poll(env, db_session)
    _tick()
    _pump(env)
    status = _status(world, attack)
    assert f"from `{IMAGE}` to `{EVIL}`" in status, status
    assert _evil_everywhere(world) == []
    db_session.refresh(evil_watch)
    assert evil_watch.state == "refused" and evil_watch.admitted_by == MAINTAINER
    assert not db_session.scalars(select(Bump).where(Bump.watch_id == evil_watch.id)).all()

    # After the approval, the author's edit of the body changes nothing of the approved watch.
    world.edit_pull_body(BENCH_REPO, attack, f"requires {VLLM_REPO}#47270\n", OUTSIDER)
    _pump(env)
    db_session.refresh(evil_watch)
    assert [(d.ref, d.dropped) for d in evil_watch.dependencies] == [(f"{VLLM_REPO}#47269", False)]

    # A push voids the approval, as for /sweep approve: the watch waits for a maintainer again.
    world.commit_files(f"{OUTSIDER}/InferenceX", "work", {"NOTES.md": "more\n"}, "more", author=OUTSIDER)
    _poll(env, db_session)
    db_session.refresh(evil_watch)
    assert evil_watch.state == "unapproved" and evil_watch.admitted_by is None
    assert "waits for a maintainer" in _status(world, attack)
    assert _evil_everywhere(world) == []


# ------------------------------------------------------------------------------------ the SSRF door


@pytest.fixture
def trap() -> Iterator[Any]:
    """A listener on loopback nothing may reach (tests/adapters/test_registry_egress.py)."""
    from tests.adapters.test_registry_egress import _serve, _tags

    yield from _serve(lambda path: _tags({"name": "x", "tags": ["nightly-" + "c" * 40]}))


def test_ssrf_zero_connections_outside_the_allow_list(
    env: dict[str, Any], db_session: Session, trap: Any
) -> None:
    """A writer's PR points three keys at internal registries a maintainer even listed under
    ``images:`` (so only egress stands in the way): the trap on loopback, a private address, and
    an allowed registry (the simulator's ghcr.io) that redirects to the trap. None is contacted
    but the allowed one, and the trap counts zero connections."""
    from app.models.tracking import Watch

    world = env["world"]
    loopback = f"127.0.0.1:{trap.server_address[1]}/evil/x"
    private = "10.0.0.7:5000/evil/y"
    redirected = "ghcr.io/rocm/vllm-dev"  # on the operator-configured simulator, which redirects
    world.push_tag("rocm/vllm-dev", "nightly-" + "d" * 40)
    world.registry_redirects["rocm/vllm-dev"] = f"{trap.url}/v2/rocm/vllm-dev/tags/list"
    images = "".join(f"  - name: {name}\n    registry: oci\n" for name in (loopback, private, redirected))
    world.commit_files(
        BENCH_REPO,
        "main",
        {".github/sweepbot.yml": CONFIG + images},
        "sweepbot config: more registries",
        author="alice-admin",
    )
    keys = {ATTACK_KEY: loopback, "dsr1-fp4-mi355x-sglang": private, "minimaxm3-fp4-mi355x-atom": redirected}
    master = world.read_file(BENCH_REPO, MASTER_PATH, "main").decode()
    for key, image in keys.items():
        master = set_image(master, key, f"{image}:nightly-{'0' * 40}")
    main = world.repo(BENCH_REPO).refs["refs/heads/main"]
    world.set_ref(BENCH_REPO, "refs/heads/registries", main, pusher="carol-writer")
    world.commit_files(
        BENCH_REPO, "registries", {MASTER_PATH: master}, "new registries", author="carol-writer"
    )
    pr = world.open_pull(
        BENCH_REPO,
        "registries",
        "main",
        "new registries",
        f"requires {VLLM_REPO}#47269\n",
        user="carol-writer",
    )
    _poll(env, db_session)
    _poll(env, db_session)

    watches = {w.config_key: w for w in db_session.scalars(select(Watch).where(Watch.pr_number == pr.number))}
    assert set(watches) == set(keys)
    assert all(w.admitted_by == "carol-writer" and w.image_repo for w in watches.values())  # egress alone
    assert trap.accepted == 0
    asked = {r["image"] for r in world.registry_requests}
    assert "rocm/vllm-dev" in asked, "the allowed registry was asked (and redirected elsewhere)"
    assert not any("evil" in r["path"] for r in world.registry_requests)


def test_a_bump_never_writes_an_image_the_default_branch_does_not_pin(
    env: dict[str, Any], db_session: Session
) -> None:
    """Defence in depth at the write: even handed the attacker's image, the bump refuses."""
    from app.flows.repo.bot_config import bot_config
    from app.flows.tracking.bump import bump_watch
    from app.models.tracking import Watch

    world = env["world"]
    _pump(env)  # the seed recipe PR's opened event: the maintainer's watch
    (watch,) = db_session.scalars(select(Watch).where(Watch.pr_number == 2104)).all()
    gw = _gw(db_session)
    before = world.repo(BENCH_REPO).refs[f"refs/heads/{RECIPE_BRANCH}"]
    out = bump_watch(
        db_session,
        gw,
        watch,
        image=f"{EVIL}:nightly-{'1' * 40}",
        deps=[],
        config=bot_config(db_session, gw, BENCH_REPO),
        pull=gw.get_pull(BENCH_REPO, 2104),
    )
    assert out.state == "blocked" and "refused to pin" in out.message
    assert world.repo(BENCH_REPO).refs[f"refs/heads/{RECIPE_BRANCH}"] == before
    assert _evil_everywhere(world) == []


def test_custom_roles_count_as_the_base_role_they_carry(env: dict[str, Any], db_session: Session) -> None:
    """An organisation's custom repository roles, resolved as for /sweep (app.core.roles): one
    built on triage leaves the watch waiting for a maintainer, one built on maintain admits it."""
    from app.models.tracking import Watch

    world = env["world"]
    world.add_custom_role("ci-triager", "triage")
    world.add_custom_role("release-captain", "maintain")
    for login, role in (("tina-triager", "ci-triager"), ("rory-captain", "release-captain")):
        world.add_user(login)
        world.set_permission(BENCH_REPO, login, role)
    body = f"requires {VLLM_REPO}#47269\n"
    tag = f"{IMAGE}:nightly-{'2' * 40}"  # the key's own image repository, another tag
    triager = _open_fork_pr(world, "tina-triager", ATTACK_KEY, tag, body)
    captain = _open_fork_pr(world, "rory-captain", "kimik2.5-fp4-mi355x-vllm-agentic", tag, body)
    _poll(env, db_session)
    (held,) = db_session.scalars(select(Watch).where(Watch.pr_number == triager)).all()
    (admitted,) = db_session.scalars(select(Watch).where(Watch.pr_number == captain)).all()
    assert held.state == "unapproved" and "`tina-triager` has triage permission" in (held.reason or "")
    assert admitted.admitted_by == "rory-captain" and admitted.image_repo == IMAGE
    assert admitted.state == "waiting" and admitted.dependencies[0].state == "open"  # polled
