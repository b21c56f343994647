"""Tracking and the bump against the simulator's seed story (in-process SimServer, SQLite)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from sim.scenario import BENCH_REPO, IMAGE, MASTER_PATH, RECIPE_BRANCH, VLLM_REPO, SeedScenario
from sim.server import SimServer

KEY = "minimaxm3-fp4-mi355x-vllm"


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer() as server:
        yield server


@pytest.fixture
def story(sim: SimServer, db_session: Session, settings_env: pytest.MonkeyPatch) -> dict[str, Any]:
    from app.settings import reset_settings_cache

    settings_env.setenv("SWEEPBOT_GITHUB_API_URL", sim.github_api_url)
    # The simulator's registry is on loopback: only an operator-configured origin may be.
    settings_env.setenv("SWEEPBOT_REGISTRY_URLS", f"docker.io={sim.url}/hub,ghcr.io={sim.url}")
    settings_env.setenv("SWEEPBOT_GITHUB_TOKEN", "sim-token")
    reset_settings_cache()
    scenario = SeedScenario(sim.world)
    scenario.load()
    # The bot config lives on the default branch; it points the image at the sim's Docker Hub API.
    sim.world.commit_files(
        BENCH_REPO,
        "main",
        {
            ".github/sweepbot.yml": (
                "version: 1\nimages:\n"
                f"  - name: {IMAGE}\n    registry: dockerhub\n    url: {sim.url}/hub\n"
                f"    source-repo: {VLLM_REPO}\n"
            )
        },
        "sweepbot config",
        author="alice-admin",
    )
    return {"scenario": scenario, "world": sim.world}


def _gw(session: Session) -> Any:
    """The real gateway, minus PyGithub's client-side throttle (0.25 s per read, 1 s per write)."""
    from github import Auth, Github

    from app.adapters.github.gateway import GitHubGateway, SessionAudit
    from app.settings import get_settings

    settings = get_settings()
    gh = Github(
        auth=Auth.Token("sim-token"),
        base_url=settings.github_api_url,
        seconds_between_requests=0,
        seconds_between_writes=0,
    )

    audit = SessionAudit(session, actor="sweepbot", delivery_id=None, settings=get_settings())
    return GitHubGateway(gh.requester, cache_session=session, audit=audit)


def _open_pr(session: Session) -> None:
    from app.flows.tracking.watches import handle_pull_request

    gw = _gw(session)
    handle_pull_request(session, gw, BENCH_REPO, "opened", gw.get_pull(BENCH_REPO, 2104), "carol-writer")
    session.commit()


def _poll(session: Session) -> dict[str, int]:
    from app.flows.tracking.watches import poll_watches

    out = poll_watches(session, _gw(session))
    session.commit()
    return out


def _status_comments(world: Any) -> list[Any]:
    repo = world.repo(BENCH_REPO)
    return [c for c in repo.comments.values() if "<!-- sweepbot:status -->" in c.body]


def _branch_commits(world: Any) -> list[str]:
    repo = world.repo(BENCH_REPO)
    head = repo.refs[f"refs/heads/{RECIPE_BRANCH}"]
    return [head, *repo.objects.ancestors(head)]


def test_seed_story_bumps_once_after_the_drop(story: dict[str, Any], db_session: Session) -> None:
    from app.flows.tracking.watches import DepRef, drop_dependencies, handle_pull_request
    from app.models.tracking import Bump, Watch

    world, scenario = story["world"], story["scenario"]
    master_before = world.read_file(BENCH_REPO, MASTER_PATH, RECIPE_BRANCH).decode()
    _open_pr(db_session)
    watch = db_session.scalars(select(Watch)).one()
    assert watch.config_key == KEY
    assert sorted(d.ref for d in watch.dependencies) == [f"{VLLM_REPO}#47269", f"{VLLM_REPO}#47270"]
    assert watch.decision == "wait"
    assert len(_status_comments(world)) == 1

    for name in ("nightly-before-merge", "merge-47269", "nightly-after-47269", "close-47270"):
        assert scenario.step()["step"] == name
        _poll(db_session)
        assert db_session.scalars(select(Bump)).all() == [], f"no bump may happen after {name}"
    db_session.refresh(watch)
    assert watch.decision == "blocked"
    body = _status_comments(world)[0].body
    assert "closed without merge" in body and f"/depends-on drop {VLLM_REPO}#47270" in body
    assert "merged at" in body

    # The maintainer drops the closed dependency; the bump happens in the same processing.
    before = _branch_commits(world)
    reply = drop_dependencies(
        db_session,
        _gw(db_session),
        repo=BENCH_REPO,
        pr_number=2104,
        refs=[DepRef(VLLM_REPO, 47270)],
        actor="bob-maintainer",
    )
    db_session.commit()
    assert "Dropped" in reply and "bumped" in reply
    after = _branch_commits(world)
    assert len(after) == len(before) + 1
    chosen = f"nightly-{scenario.vllm_main[-1]}"  # the nightly after #47269: newest containing it
    master_after = world.read_file(BENCH_REPO, MASTER_PATH, RECIPE_BRANCH).decode()
    diff = [
        ln
        for ln in difflib.unified_diff(
            master_before.splitlines(), master_after.splitlines(), lineterm="", n=0
        )
        if ln[:1] in "+-" and not ln.startswith(("+++", "---"))
    ]
    assert diff == [
        f"-  image: {IMAGE}:nightly-4559c43a9526597c00cbcc4f59979496500268d1",
        f"+  image: {IMAGE}:{chosen}",
    ]
    changelog = world.read_file(BENCH_REPO, "perf-changelog.yaml", RECIPE_BRANCH).decode()
    old_changelog = world.read_file(BENCH_REPO, "perf-changelog.yaml", before[0]).decode()
    assert changelog.startswith(old_changelog)
    entry = changelog[len(old_changelog) :]
    assert f"- {KEY}" in entry and f"{IMAGE}:{chosen}" in entry and f"{VLLM_REPO}#47269" in entry
    html_url = _gw(db_session).get_pull(BENCH_REPO, 2104)["html_url"]
    assert entry.rstrip().endswith(f"pr-link: {html_url}")
    bump = db_session.scalars(select(Bump)).one()
    assert bump.state == "committed" and bump.mode == "pr_branch" and bump.commit_sha == after[0]

    # Replay every event and re-poll, also after a newer nightly: no second commit, PR or comment.
    scenario.step()  # nightly-contains-rest
    gw = _gw(db_session)
    for action in ("opened", "synchronize", "edited", "reopened"):
        handle_pull_request(db_session, gw, BENCH_REPO, action, gw.get_pull(BENCH_REPO, 2104), "carol-writer")
        db_session.commit()
    drop_dependencies(
        db_session,
        gw,
        repo=BENCH_REPO,
        pr_number=2104,
        refs=[DepRef(VLLM_REPO, 47270)],
        actor="bob-maintainer",
    )
    for _ in range(2):
        _poll(db_session)
    assert _branch_commits(world) == after
    assert len(db_session.scalars(select(Bump)).all()) == 1
    assert len(_status_comments(world)) == 1
    assert len([p for p in world.repo(BENCH_REPO).pulls.values()]) == 1
    assert "bumped" in _status_comments(world)[0].body


def test_steady_state_poll_costs_no_rate_limited_call(story: dict[str, Any], db_session: Session) -> None:
    world, scenario = story["world"], story["scenario"]
    _open_pr(db_session)
    scenario.step()
    scenario.step()  # merge-47269
    _poll(db_session)
    _poll(db_session)
    world.reset_calls()
    _poll(db_session)
    summary = world.call_summary()
    assert summary["rate_limited"] == 0, summary
    assert summary["not_modified"] >= 2  # recipe PR and the open dependency, asked conditionally


def test_binary_search_uses_logarithmic_compares(story: dict[str, Any], db_session: Session) -> None:
    world, scenario = story["world"], story["scenario"]
    _open_pr(db_session)
    for _ in range(3):  # nightly-before-merge, merge-47269, nightly-after-47269
        scenario.step()
    for i in range(10):  # ten more nightlies of main, all after the merge
        sha = world.commit_files(
            VLLM_REPO, "main", {f"more/{i}.txt": "x\n"}, f"more {i}", author="vllm-maintainer"
        )
        world.push_tag(IMAGE, f"nightly-{sha}")
    from app.models.tracking import Dependency

    for dep in db_session.scalars(select(Dependency).where(Dependency.dep_number == 47270)):
        dep.dropped = True
    db_session.commit()
    world.reset_calls()
    _poll(db_session)
    compares = sum(n for (op, _s, _k), n in world.calls.items() if op == "repos/compare-commits")
    from app.models.tracking import Watch

    watch = db_session.scalars(select(Watch)).one()
    assert watch.chosen_tag == f"nightly-{world.repo(VLLM_REPO).refs['refs/heads/main']}"
    # 14 nightlies are kept: 1 probe of the newest + ceil(log2 14) = 5 for the first containing one,
    # plus one for the pinned tag.
    assert compares <= 1 + 4 + 1, compares


def test_deleted_pinned_nightly_is_flagged(story: dict[str, Any], db_session: Session) -> None:
    from app.models.tracking import Watch

    world = story["world"]
    world.delete_tag(IMAGE, "nightly-4559c43a9526597c00cbcc4f59979496500268d1")
    _open_pr(db_session)
    watch = db_session.scalars(select(Watch)).one()
    assert watch.pinned_missing_since is not None
    body = _status_comments(world)[0].body
    assert "deleted from the registry" in body and "nightly-4559c43a" in body
    from app.flows.tracking.watches import deps_status

    assert deps_status(db_session)[0]["pinned_deleted"] is True
