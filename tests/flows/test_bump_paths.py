"""The bump's other paths, against the simulator: bump PRs (fork, `bump.mode: pr`, a refused push),
in-place updates and superseded bump PRs, branches a human pushed to, and where the config lives
(`configs/` instead of `.github/configs/`, keys archived to `configs/deprecated/`)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from sim.scenario import (
    BENCH_REPO,
    IMAGE,
    MASTER_PATH,
    RECIPE_BRANCH,
    SCRIPT_PATH,
    VLLM_REPO,
    SeedScenario,
    recipe_script,
)
from sim.server import SimServer
from sim.world import World

KEY = "minimaxm3-fp4-mi355x-vllm"
BUMP_BRANCH = f"sweepbot/bump/{KEY}"
FORK = "carol-writer/InferenceX"
FORK_PR = 2200
OLD_PIN = f"{IMAGE}:nightly-4559c43a9526597c00cbcc4f59979496500268d1"
STATUS = "<!-- sweepbot:status -->"


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer() as server:
        yield server


def _bot_config(sim: SimServer, extra: str = "") -> str:
    return (
        "version: 1\nimages:\n"
        f"  - name: {IMAGE}\n    registry: dockerhub\n    url: {sim.url}/hub\n"
        f"    source-repo: {VLLM_REPO}\n" + extra
    )


def _start(sim: SimServer, settings_env: pytest.MonkeyPatch, extra_config: str = "") -> SeedScenario:
    from app.settings import reset_settings_cache

    settings_env.setenv("SWEEPBOT_GITHUB_API_URL", sim.github_api_url)
    # The simulator's registry is on loopback: only an operator-configured origin may be.
    settings_env.setenv("SWEEPBOT_REGISTRY_URLS", f"docker.io={sim.url}/hub,ghcr.io={sim.url}")
    settings_env.setenv("SWEEPBOT_GITHUB_TOKEN", "sim-token")
    reset_settings_cache()
    scenario = SeedScenario(sim.world)
    scenario.load()
    sim.world.commit_files(
        BENCH_REPO,
        "main",
        {".github/sweepbot.yml": _bot_config(sim, extra_config)},
        "sweepbot config",
        author="alice-admin",
    )
    return scenario


def _gw(session: Session, **github_kwargs: Any) -> Any:
    """The real gateway, minus PyGithub's client-side throttle."""
    from github import Auth, Github

    from app.adapters.github.gateway import GitHubGateway, SessionAudit
    from app.settings import get_settings

    gh = Github(
        auth=Auth.Token("sim-token"),
        base_url=get_settings().github_api_url,
        seconds_between_requests=0,
        seconds_between_writes=0,
        **github_kwargs,
    )

    audit = SessionAudit(session, actor="sweepbot", delivery_id=None, settings=get_settings())
    return GitHubGateway(gh.requester, cache_session=session, audit=audit)


# ------------------------------------------------------------------------------------------- helpers


def _open(session: Session, number: int, action: str = "opened", gw: Any = None) -> None:
    from app.flows.tracking.watches import handle_pull_request

    gw = gw or _gw(session)
    handle_pull_request(session, gw, BENCH_REPO, action, gw.get_pull(BENCH_REPO, number), "carol-writer")
    session.commit()


def _poll(session: Session, gw: Any = None) -> dict[str, int]:
    from app.flows.tracking.watches import poll_watches

    out = poll_watches(session, gw or _gw(session))
    session.commit()
    return out


def _head(world: World, branch: str, repo: str = BENCH_REPO) -> str | None:
    return world.repo(repo).refs.get(f"refs/heads/{branch}")


def _read(world: World, path: str, ref: str) -> str:
    data = world.read_file(BENCH_REPO, path, ref)
    assert data is not None, f"{path} missing at {ref}"
    return data.decode()


def _changed_lines(before: str, after: str) -> list[str]:
    return [
        ln
        for ln in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if ln[:1] in "+-" and not ln.startswith(("+++", "---"))
    ]


def _comments(world: World, number: int, marker: str) -> list[Any]:
    repo = world.repo(BENCH_REPO)
    return [c for c in repo.comments.values() if c.issue_number == number and marker in c.body]


def _bump_prs(world: World) -> list[Any]:
    return [p for p in world.repo(BENCH_REPO).pulls.values() if p.head_ref == BUMP_BRANCH]


def _nightly(world: World, scenario: SeedScenario, msg: str) -> str:
    """A new vLLM main commit and its nightly tag."""
    sha = world.commit_files(
        VLLM_REPO,
        "main",
        {f"vllm/changes/{len(scenario.vllm_main):03d}.txt": msg + "\n"},
        msg,
        author="vllm-maintainer",
    )
    scenario.vllm_main.append(sha)
    world.push_tag(IMAGE, f"nightly-{sha}")
    return f"{IMAGE}:nightly-{sha}"


def _upstream_pr(world: World, scenario: SeedScenario, number: int) -> None:
    branch = f"feature-{number}"
    world.set_ref(VLLM_REPO, f"refs/heads/{branch}", scenario.vllm_main[-1], pusher="rocm-dev")
    world.commit_files(VLLM_REPO, branch, {f"vllm/feature_{number}.py": "X = 1\n"}, f"feature {number}")
    world.open_pull(VLLM_REPO, branch, "main", f"[ROCm] feature {number}", "", user="rocm-dev", number=number)


def _fork_pr(world: World, body: str) -> None:
    """A recipe PR from carol's fork (the bot can never push there)."""
    world.add_repo(FORK)
    files = {
        MASTER_PATH: _read(world, MASTER_PATH, "main"),
        SCRIPT_PATH: recipe_script(_read(world, SCRIPT_PATH, "main")),
    }
    world.commit_files(FORK, "int4-qr", files, "INT4 quick reduce", author="carol-writer")
    world.open_pull(
        BENCH_REPO, "int4-qr", "main", f"{KEY}: INT4 quick reduce", body,
        user="carol-writer", number=FORK_PR, head_repo=FORK,
    )  # fmt: skip


def _to_first_nightly_with_47269(scenario: SeedScenario, session: Session) -> str:
    for name in ("nightly-before-merge", "merge-47269", "nightly-after-47269"):
        assert scenario.step()["step"] == name
        _poll(session)
    return f"{IMAGE}:nightly-{scenario.vllm_main[-1]}"


def _until_47270_closed(scenario: SeedScenario, session: Session) -> None:
    """Play the seed story up to `close-47270`, polling after every step."""
    for _ in range(4):
        scenario.step()
        _poll(session)


def _drop_47270(session: Session, gw: Any = None) -> str:
    """A maintainer's `/depends-on drop vllm-project/vllm#47270`."""
    from app.flows.tracking.watches import DepRef, drop_dependencies

    return drop_dependencies(
        session, gw or _gw(session), repo=BENCH_REPO, pr_number=2104,
        refs=[DepRef(VLLM_REPO, 47270)], actor="bob-maintainer",
    )  # fmt: skip


def _bumps(session: Session) -> list[Any]:
    from app.models.tracking import Bump

    session.expire_all()
    return list(session.scalars(select(Bump).order_by(Bump.id)))


# --------------------------------------------------------------------------------------------- tests


def test_fork_pr_gets_one_bump_pr_updated_in_place_then_superseded(
    sim: SimServer, db_session: Session, settings_env: pytest.MonkeyPatch
) -> None:
    from app.flows.tracking.bump import BUMP_PR_MARKER
    from app.flows.tracking.watches import DepRef, add_dependencies

    scenario = _start(sim, settings_env)
    world = sim.world
    _fork_pr(world, f"Config-Key: {KEY}\nrequires {VLLM_REPO}#47269\n")
    fork_head = _head(world, "int4-qr", FORK)
    main_head = _head(world, "main")
    _open(db_session, FORK_PR)
    assert _bumps(db_session) == []
    image = _to_first_nightly_with_47269(scenario, db_session)

    # One bump PR on the deterministic branch, cut from main; the fork is untouched.
    (bump,) = _bumps(db_session)
    assert (bump.mode, bump.branch, bump.state, bump.image) == ("bump_pr", BUMP_BRANCH, "committed", image)
    assert _head(world, "int4-qr", FORK) == fork_head
    first = _head(world, BUMP_BRANCH)
    commits = world.repo(BENCH_REPO).objects.commits
    # Two commits: the bump (its entry says XXX: the PR had no number yet), then the link fix.
    (bump_commit,) = commits[first or ""].parents
    assert first == bump.commit_sha and commits[bump_commit].parents == (main_head,)
    (pr,) = _bump_prs(world)
    assert pr.number == bump.bump_pr_number and pr.state == "open" and pr.base_ref == "main"
    assert pr.title == f"Bump {KEY} image to {image} / 将 {KEY} 的镜像升级到 {image}"
    assert BUMP_PR_MARKER in pr.body
    master_main = _read(world, MASTER_PATH, "main")
    assert _changed_lines(master_main, _read(world, MASTER_PATH, BUMP_BRANCH)) == [
        f"-  image: {OLD_PIN}",
        f"+  image: {image}",
    ]
    log_main = _read(world, "perf-changelog.yaml", "main")
    entry = _read(world, "perf-changelog.yaml", BUMP_BRANCH)[len(log_main) :]
    fork_url = _gw(db_session).get_pull(BENCH_REPO, FORK_PR)["html_url"]
    own_link = f"https://github.com/{BENCH_REPO}/pull/{pr.number}"
    assert f"- {KEY}" in entry and image in entry and entry.rstrip().endswith(f"pr-link: {own_link}")
    pending = _read(world, "perf-changelog.yaml", bump_commit)[len(log_main) :]
    assert pending == entry.replace(own_link, "XXX")  # only the pr-link line changed
    assert f"Recipe PR: {fork_url}" in pr.body
    status = _comments(world, FORK_PR, STATUS)
    assert len(status) == 1 and f"PR #{pr.number}" in status[0].body

    # Replays (every PR event, polls) create nothing new.
    for action in ("opened", "synchronize", "edited", "reopened"):
        _open(db_session, FORK_PR, action)
    _poll(db_session)
    _poll(db_session)
    assert _head(world, BUMP_BRANCH) == first and len(_bump_prs(world)) == 1 and len(_bumps(db_session)) == 1
    assert len(_comments(world, FORK_PR, STATUS)) == 1

    # A dependency added later: the bumped image lacks it, so the next bump waits, then lands on
    # the same branch (fast-forward) and the same PR, whose single changelog entry is replaced.
    _upstream_pr(world, scenario, 47301)
    add_dependencies(
        db_session, _gw(db_session), repo=BENCH_REPO, pr_number=FORK_PR,
        refs=[DepRef(VLLM_REPO, 47301)], actor="carol-writer",
    )  # fmt: skip
    db_session.commit()
    _poll(db_session)
    assert _head(world, BUMP_BRANCH) == first
    assert "waiting for vllm-project/vllm#47301" in _comments(world, FORK_PR, STATUS)[0].body
    world.merge_pull(VLLM_REPO, 47301, merger="vllm-maintainer")
    scenario.vllm_main.append(_head(world, "main", VLLM_REPO) or "")
    newer = _nightly(world, scenario, "[Kernel] after 47301")
    _poll(db_session)
    second = _head(world, BUMP_BRANCH)
    (second_bump,) = commits[second or ""].parents  # the second bump, then its link fix
    assert second != first and commits[second_bump].parents == (first,)
    (pr2,) = _bump_prs(world)
    assert pr2.number == pr.number and pr2.state == "open"
    assert pr2.title.startswith(f"Bump {KEY} image to {newer} / ")
    assert _changed_lines(master_main, _read(world, MASTER_PATH, BUMP_BRANCH)) == [
        f"-  image: {OLD_PIN}",
        f"+  image: {newer}",
    ]
    log_branch = _read(world, "perf-changelog.yaml", BUMP_BRANCH)
    assert log_branch.startswith(log_main)
    entry2 = log_branch[len(log_main) :]
    assert entry2.count("- config-keys:") == 1 and newer in entry2 and f"{VLLM_REPO}#47301" in entry2
    assert entry2.rstrip().endswith(f"pr-link: {own_link}")
    for _ in range(2):
        _poll(db_session)
        _open(db_session, FORK_PR, "synchronize")
    assert _head(world, BUMP_BRANCH) == second and len(_bump_prs(world)) == 1 and len(_bumps(db_session)) == 2

    # The same-repo recipe PR #2104 later bumps the key on its own branch: the bump PR is
    # superseded, closed with a comment, and never reopened by later polls.
    _open(db_session, 2104)
    scenario.step()  # close-47270
    _poll(db_session)
    _drop_47270(db_session)
    db_session.commit()
    recipe = [b for b in _bumps(db_session) if b.mode == "pr_branch"]
    assert len(recipe) == 1 and recipe[0].branch == RECIPE_BRANCH
    (closed,) = _bump_prs(world)
    assert closed.state == "closed"
    notes = [c.body for c in world.repo(BENCH_REPO).comments.values() if c.issue_number == closed.number]
    assert any(n.startswith(f"Superseded by `{RECIPE_BRANCH}`") for n in notes)
    _poll(db_session)
    _poll(db_session)
    assert len(_bump_prs(world)) == 1 and _head(world, BUMP_BRANCH) == second
    assert "superseded" in _comments(world, FORK_PR, STATUS)[0].body


def test_mode_pr_and_a_human_push_on_the_bump_branch(
    sim: SimServer, db_session: Session, settings_env: pytest.MonkeyPatch
) -> None:
    from app.flows.tracking.bump import BUMP_BLOCKED_MARKER
    from app.flows.tracking.watches import DepRef, add_dependencies

    # `bump.mode: pr`: the bot may not push to recipe branches, even same-repo ones.
    scenario = _start(sim, settings_env, "bump:\n  mode: pr\n")
    world = sim.world
    recipe_head = _head(world, RECIPE_BRANCH)
    _open(db_session, 2104)
    _until_47270_closed(scenario, db_session)
    _drop_47270(db_session)
    db_session.commit()
    (bump,) = _bumps(db_session)
    assert bump.mode == "bump_pr" and _head(world, RECIPE_BRANCH) == recipe_head
    (pr,) = _bump_prs(world)

    # A maintainer pushes a fix onto the bump branch; then a next bump becomes due.
    human = world.commit_files(
        BENCH_REPO, BUMP_BRANCH, {"NOTES.md": "tuned by hand\n"}, "hand fix", author="bob-maintainer"
    )
    _upstream_pr(world, scenario, 47301)
    add_dependencies(
        db_session, _gw(db_session), repo=BENCH_REPO, pr_number=2104,
        refs=[DepRef(VLLM_REPO, 47301)], actor="carol-writer",
    )  # fmt: skip
    db_session.commit()
    world.merge_pull(VLLM_REPO, 47301, merger="vllm-maintainer")
    _nightly(world, scenario, "[Kernel] after 47301")
    _poll(db_session)

    assert _head(world, BUMP_BRANCH) == human, "a human commit must never be overwritten"
    assert [b.state for b in _bumps(db_session)] == ["committed", "blocked"]
    status = _comments(world, 2104, STATUS)[0].body
    assert f"someone pushed to `{BUMP_BRANCH}` since sweepbot's last commit" in status
    (note,) = _comments(world, pr.number, BUMP_BLOCKED_MARKER)
    assert "will not overwrite it" in note.body

    # Steady state: nothing more is written, and a poll costs no rate-limited call.
    _poll(db_session)
    world.reset_calls()
    _poll(db_session)
    assert world.call_summary()["rate_limited"] == 0, world.call_summary()
    assert _head(world, BUMP_BRANCH) == human and len(_comments(world, pr.number, BUMP_BLOCKED_MARKER)) == 1
    assert len(_comments(world, 2104, STATUS)) == 1 and len(_bump_prs(world)) == 1


def test_recipe_branch_that_moves_during_the_bump_is_not_forced(
    sim: SimServer, db_session: Session, settings_env: pytest.MonkeyPatch
) -> None:
    scenario = _start(sim, settings_env, "")
    world = sim.world
    _open(db_session, 2104)
    _until_47270_closed(scenario, db_session)
    gw = _gw(db_session)
    real_create_commit = gw.create_commit
    pushed: list[str] = []

    def racing_create_commit(repo: str, message: str, tree: str, parents: list[str]) -> dict[str, Any]:
        # The author pushes between sweepbot's read of the branch and its ref update.
        pushed.append(
            world.commit_files(
                BENCH_REPO, RECIPE_BRANCH, {"README.md": "wip\n"}, "wip", author="carol-writer"
            )
        )
        return dict(real_create_commit(repo, message, tree, parents))

    gw.create_commit = racing_create_commit

    _drop_47270(db_session, gw)
    db_session.commit()
    assert _head(world, RECIPE_BRANCH) == pushed[0]
    assert [b.state for b in _bumps(db_session)] == ["blocked"]
    status = _comments(world, 2104, STATUS)[0].body
    assert f"`{RECIPE_BRANCH}` moved while sweepbot was committing" in status and "did not force" in status

    # At the next check, the bump lands on top of the author's commit (nothing of theirs is lost).
    _poll(db_session)
    (bump,) = _bumps(db_session)
    assert bump.state == "committed" and _head(world, RECIPE_BRANCH) == bump.commit_sha
    assert world.repo(BENCH_REPO).objects.commits[bump.commit_sha or ""].parents == (pushed[0],)
    assert _read(world, "README.md", RECIPE_BRANCH) == "wip\n"


def test_refused_push_to_the_recipe_branch_falls_back_to_a_bump_pr(
    sim: SimServer, db_session: Session, settings_env: pytest.MonkeyPatch
) -> None:
    from app.adapters.github.errors import GitHubError

    scenario = _start(sim, settings_env, "")
    world = sim.world
    recipe_head = _head(world, RECIPE_BRANCH)
    _open(db_session, 2104)
    _until_47270_closed(scenario, db_session)
    gw = _gw(db_session)
    real_update_ref = gw.update_ref

    def protected(repo: str, ref: str, sha: str, *, force: bool = False) -> dict[str, Any]:
        if ref == f"heads/{RECIPE_BRANCH}":  # what GitHub answers for a protected branch
            raise GitHubError(403, "git/update-ref: Protected branch update failed")
        return dict(real_update_ref(repo, ref, sha, force=force))

    gw.update_ref = protected
    reply = _drop_47270(db_session, gw)
    db_session.commit()
    assert "refused sweepbot's push" in reply and "bump PR #" in reply
    assert _head(world, RECIPE_BRANCH) == recipe_head
    (bump,) = _bumps(db_session)
    assert bump.mode == "bump_pr" and _head(world, BUMP_BRANCH) == bump.commit_sha
    assert [p.number for p in _bump_prs(world)] == [bump.bump_pr_number]


ARCHIVE = "configs/deprecated/amd-minimaxm3-8k1k-master.yaml"


def _move_master(world: World, drop_key: bool) -> None:
    """The real repo's layout: `configs/amd-master.yaml`; optionally `KEY` archived."""
    text = _read(world, MASTER_PATH, "main")
    files: dict[str, str | None] = {MASTER_PATH: None}
    if drop_key:
        lines = text.splitlines(keepends=True)
        start = lines.index(f"{KEY}:\n")
        end = next(i for i in range(start + 1, len(lines)) if lines[i][:1] not in (" ", "\n", "#"))
        files["configs/amd-master.yaml"] = "".join(lines[:start] + lines[end:])
        # Where the real repo moved it when its 8k1k scenario was deprecated (#2493).
        files[ARCHIVE] = "".join(lines[start:end])
    else:
        files["configs/amd-master.yaml"] = text
    world.commit_files(BENCH_REPO, "main", files, "move configs", author="alice-admin")
    main = _head(world, "main") or ""
    world.set_ref(BENCH_REPO, "refs/heads/recipe-moved", main, pusher="carol-writer")
    script = recipe_script(_read(world, SCRIPT_PATH, "main"))
    world.commit_files(BENCH_REPO, "recipe-moved", {SCRIPT_PATH: script}, "knobs", author="carol-writer")
    world.open_pull(
        BENCH_REPO, "recipe-moved", "main", f"{KEY}: knobs", f"requires {VLLM_REPO}#47269\n",
        user="carol-writer", number=2300,
    )  # fmt: skip


def test_bump_finds_the_config_under_configs(
    sim: SimServer, db_session: Session, settings_env: pytest.MonkeyPatch
) -> None:
    from app.models.tracking import Watch

    scenario = _start(sim, settings_env)
    world = sim.world
    _move_master(world, drop_key=False)
    before = _read(world, "configs/amd-master.yaml", "recipe-moved")
    _open(db_session, 2300)
    (watch,) = db_session.scalars(select(Watch))
    assert watch.config_key == KEY and watch.config_path == "configs/amd-master.yaml"
    image = _to_first_nightly_with_47269(scenario, db_session)
    (bump,) = _bumps(db_session)
    assert bump.state == "committed" and bump.config_path == "configs/amd-master.yaml"
    assert _head(world, "recipe-moved") == bump.commit_sha
    after = _read(world, "configs/amd-master.yaml", "recipe-moved")
    assert _changed_lines(before, after) == [f"-  image: {OLD_PIN}", f"+  image: {image}"]
    assert world.read_file(BENCH_REPO, MASTER_PATH, "recipe-moved") is None


def test_a_watch_on_an_archived_key_says_where_it_moved_and_stops(
    sim: SimServer, db_session: Session, settings_env: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient

    from app.models.tracking import Watch, WatchState
    from app.web.main import create_app

    scenario = _start(sim, settings_env)
    world = sim.world
    _move_master(world, drop_key=True)
    head = _head(world, "recipe-moved")
    _open(db_session, 2300)
    (watch,) = db_session.scalars(select(Watch))
    assert watch.config_key == KEY
    db_session.refresh(watch)
    # Stopped at the first check: not blocked forever on a file sweep generation no longer reads.
    assert (watch.state, watch.decision, watch.config_path) == (WatchState.ARCHIVED, "stopped", ARCHIVE)
    (status,) = _comments(world, 2300, STATUS)
    assert f"config key {KEY} moved to `{ARCHIVE}`" in status.body
    assert "stopped watching" in status.body and "a push to this PR re-checks it" in status.body
    world.reset_calls()
    for _ in range(3):  # nightlies appear, #47269 merges: an archived key is not polled at all
        scenario.step()
        _poll(db_session)
    assert world.call_summary()["rate_limited"] == 0, world.call_summary()
    assert _bumps(db_session) == [] and _head(world, "recipe-moved") == head
    assert _head(world, BUMP_BRANCH) is None and len(_comments(world, 2300, STATUS)) == 1
    settings_env.setenv("SWEEPBOT_OPERATOR_TOKENS", "op-token")
    with TestClient(create_app()) as client:
        html = " ".join(client.get("/watches").text.split())
        api = client.get("/api/watches").json()
    assert "Stopped:" in html and ARCHIVE in html
    (item,) = api["watches"]["items"]
    assert item["state"] == "archived" and ARCHIVE in item["why_no_bump"]


def test_dashboard_shows_a_deleted_pinned_nightly(
    sim: SimServer, db_session: Session, settings_env: pytest.MonkeyPatch
) -> None:
    """The Watches page: the pin the registry deleted is on the nightly timeline as pinned and
    deleted (even if sweepbot never listed it), and the watch says it can no longer be pulled."""
    from fastapi.testclient import TestClient

    from app.web.main import create_app

    scenario = _start(sim, settings_env)
    world = sim.world
    world.delete_tag(IMAGE, OLD_PIN.rsplit(":", 1)[-1])
    _open(db_session, 2104)
    scenario.step()  # nightly-before-merge
    _poll(db_session)
    settings_env.setenv("SWEEPBOT_OPERATOR_TOKENS", "op-token")
    with TestClient(create_app()) as client:
        data = client.get("/api/watches").json()
        html = client.get("/watches").text
    (timeline,) = data["timelines"]
    tags = {t["tag"]: t for t in timeline["tags"]}
    old = tags[OLD_PIN.rsplit(":", 1)[-1]]
    assert old["pinned"] and old["deleted"]
    live = [t for t in timeline["tags"] if not t["deleted"]]
    assert len(live) == 4 and not any(t["pinned"] for t in live)
    assert "deleted from the registry: this image can no longer be pulled" in html
    assert "★✖" in html and "· pinned · deleted" in " ".join(html.split())


def test_a_bump_pr_whose_creation_failed_is_finished_on_retry_not_blocked(
    sim: SimServer, db_session: Session, settings_env: pytest.MonkeyPatch
) -> None:
    from app.core.routing import TransientError
    from app.flows.tracking.bump import BUMP_BLOCKED_MARKER
    from sim.app import admin_action

    scenario = _start(sim, settings_env, "bump:\n  mode: pr\n")
    world = sim.world
    _open(db_session, 2104)
    _until_47270_closed(scenario, db_session)
    # The commit lands on sweepbot/bump/<key>, then opening the PR answers 502: the task fails and
    # its database work (the bump's record) is rolled back, as in a real worker.
    admin_action(world, "faults", {"operation": "pulls/create", "fail_next": 1, "status": 502})
    with pytest.raises(TransientError):
        _drop_47270(db_session, _gw(db_session, retry=None))
    db_session.rollback()
    ours = _head(world, BUMP_BRANCH)
    assert ours is not None and _bump_prs(world) == [] and _bumps(db_session) == []
    # The retried task adopts sweepbot's own commit and opens the PR; nothing is "blocked".
    _drop_47270(db_session)
    db_session.commit()
    (bump,) = _bumps(db_session)
    head = _head(world, BUMP_BRANCH)
    # Adopted, then the entry's XXX fixed to the new PR's link in one more commit on top.
    assert bump.state == "committed" and bump.commit_sha == head
    assert world.repo(BENCH_REPO).objects.commits[head or ""].parents == (ours,)
    (pr,) = _bump_prs(world)
    assert bump.bump_pr_number == pr.number
    assert f"pr-link: https://github.com/{BENCH_REPO}/pull/{pr.number}\n" in _read(
        world, "perf-changelog.yaml", head or ""
    )
    # the link fix never starts a sweep of its own (utils/merge_with_reuse.sh: [skip-sweep])
    assert "[skip-sweep]" in world.repo(BENCH_REPO).objects.commits[head or ""].message.splitlines()[0]
    assert _comments(world, pr.number, BUMP_BLOCKED_MARKER) == []
    assert "someone pushed" not in _comments(world, 2104, STATUS)[0].body


def test_the_bump_prs_entry_links_that_pr_even_when_the_link_fix_fails_once(
    sim: SimServer, db_session: Session, settings_env: pytest.MonkeyPatch
) -> None:
    from sim.app import admin_action

    scenario = _start(sim, settings_env, "bump:\n  mode: pr\n")
    world = sim.world
    _open(db_session, 2104)
    _until_47270_closed(scenario, db_session)
    # The bump commit and the PR land; writing the PR's link into the entry answers 502 once.
    admin_action(world, "faults", {"operation": "git/update-ref", "fail_next": 1, "status": 502})
    with pytest.raises(Exception):  # noqa: B017 - the task fails; a worker retries it
        _drop_47270(db_session, _gw(db_session, retry=None))
    db_session.rollback()
    (pr,) = _bump_prs(world)
    log_main = _read(world, "perf-changelog.yaml", "main")
    assert _read(world, "perf-changelog.yaml", BUMP_BRANCH)[len(log_main) :].rstrip().endswith("pr-link: XXX")
    # The retry finds its own commit and PR, and fixes the link before anything else.
    _drop_47270(db_session)
    db_session.commit()
    entry = _read(world, "perf-changelog.yaml", BUMP_BRANCH)[len(log_main) :]
    assert entry.rstrip().endswith(f"pr-link: https://github.com/{BENCH_REPO}/pull/{pr.number}")
    assert entry.count("- config-keys:") == 1 and len(_bump_prs(world)) == 1
    (bump,) = _bumps(db_session)
    assert bump.commit_sha == _head(world, BUMP_BRANCH) and not (bump.detail or {}).get("link_pending")
    _poll(db_session)  # idempotent: nothing more is committed
    assert bump.commit_sha == _head(world, BUMP_BRANCH)


def test_short_sha_nightlies_match_a_configured_pattern_and_resolve_to_full_commits(
    sim: SimServer, db_session: Session, settings_env: pytest.MonkeyPatch
) -> None:
    from app.models.tracking import CompareResult, ImageTag

    # The tag spelling vLLM's dev nightlies use at InferenceX HEAD (nightly-dev-arm64-cu13.0.1-75c2eef);
    # the same pattern still reads the 40-hex nightly the key pins today.
    pattern = r"nightly-(?:dev-arm64-cu13\.0\.1-)?(?P<sha>[0-9a-f]{7,40})"
    config = _bot_config(sim).replace("    source-repo:", f"    tag-pattern: '{pattern}'\n    source-repo:")
    scenario = _start(sim, settings_env)
    world = sim.world
    world.commit_files(
        BENCH_REPO, "main", {".github/sweepbot.yml": config}, "short-sha nightlies", author="alice-admin"
    )
    _fork_pr(world, f"Config-Key: {KEY}\nrequires {VLLM_REPO}#47269\n")
    _open(db_session, FORK_PR)
    for name in ("nightly-before-merge", "merge-47269"):
        assert scenario.step()["step"] == name
        _poll(db_session)
    sha = world.commit_files(
        VLLM_REPO, "main", {"vllm/changes/short.txt": "x\n"}, "[Kernel] after 47269", author="vllm-maintainer"
    )
    scenario.vllm_main.append(sha)
    tag = f"nightly-dev-arm64-cu13.0.1-{sha[:7]}"
    world.push_tag(IMAGE, tag)
    world.reset_calls()
    _poll(db_session)
    assert "repos/get-commit" in world.call_summary()["by_operation"]
    (bump,) = _bumps(db_session)
    assert bump.image == f"{IMAGE}:{tag}" and bump.state == "committed"
    row = db_session.scalar(select(ImageTag).where(ImageTag.tag == tag))
    assert row is not None and row.commit_sha == sha  # resolved once through vllm-project/vllm
    heads = {c.head for c in db_session.scalars(select(CompareResult))}
    assert sha in heads and sha[:7] not in heads  # containment was asked with the full commit
    world.reset_calls()
    _poll(db_session)
    assert "repos/get-commit" not in world.call_summary()["by_operation"]  # never resolved twice


def test_a_bump_pr_created_during_the_visibility_lag_succeeds(
    sim: SimServer, db_session: Session, settings_env: pytest.MonkeyPatch
) -> None:
    # GitHub may not show a branch pushed a moment ago: `POST /pulls` answers 422 "head invalid".
    scenario = _start(sim, settings_env, "bump:\n  mode: pr\n")
    world = sim.world
    world.faults.ref_lag_s = 1.2  # simulated seconds = real seconds here (time_scale 1)
    _open(db_session, 2104)
    _until_47270_closed(scenario, db_session)
    _drop_47270(db_session)
    db_session.commit()
    (bump,) = _bumps(db_session)
    assert bump.mode == "bump_pr" and bump.state == "committed"
    (pr,) = _bump_prs(world)
    assert pr.number == bump.bump_pr_number and pr.head_ref == BUMP_BRANCH
    creates = world.call_summary()["by_operation"]["pulls/create"]
    assert creates.get("422", 0) >= 1 and creates["201"] == 1  # refused while lagging, then made once


def test_a_multi_node_srt_slurm_keys_recipe_gets_the_pin_in_the_same_commit(
    sim: SimServer, db_session: Session, settings_env: pytest.MonkeyPatch
) -> None:
    """AGENTS.md: for image bumps the recipe's `model.container` must equal `image`; the bump's one
    commit carries the master line and the recipe line (the recipe a real InferenceX file)."""
    from pathlib import Path

    recipe_path = (
        "benchmarks/multi_node/srt-slurm-recipes/vllm/deepseek-v4/8k1k/disagg-b200-low-latency-c1.yaml"
    )
    real = (
        Path(__file__).resolve().parents[1]
        / "fixtures/inferencex/srt-slurm-recipes/vllm/deepseek-v4/8k1k/disagg-b200-low-latency-c1.yaml"
    ).read_text()
    recipe = real.replace('container: "vllm/vllm-openai:v0.23.0"', f'container: "{OLD_PIN}"')
    # the seed key made multi-node only for its recipe: no sweep (its search space is single-node)
    scenario = _start(sim, settings_env, "bump:\n  request-sweep: false\n")
    world = sim.world
    master = _read(world, MASTER_PATH, "main")
    lines = master.splitlines(keepends=True)
    at = lines.index(f"{KEY}:\n")
    flag = next(i for i in range(at, len(lines)) if lines[i].startswith("  multinode:"))
    lines[flag] = (
        "  multinode: true\n"
        f'  additional-settings: ["CONFIG_FILE=recipes/{recipe_path.split("srt-slurm-recipes/", 1)[1]}"]\n'
    )
    world.commit_files(
        BENCH_REPO, RECIPE_BRANCH, {MASTER_PATH: "".join(lines), recipe_path: recipe}, "srt recipe",
        author="carol-writer",
    )  # fmt: skip
    before = _read(world, recipe_path, RECIPE_BRANCH)
    _open(db_session, 2104)
    _until_47270_closed(scenario, db_session)
    _drop_47270(db_session)
    db_session.commit()
    (bump,) = _bumps(db_session)
    assert bump.state == "committed" and bump.commit_sha
    image = bump.image
    after = _read(world, recipe_path, bump.commit_sha)
    assert _changed_lines(before, after) == [f'-  container: "{OLD_PIN}"', f'+  container: "{image}"']
    parent = world.repo(BENCH_REPO).objects.commits[bump.commit_sha].parents[0]
    assert _read(world, recipe_path, parent) == before  # the same commit as the master line
    assert f"  image: {image}\n" in _read(world, MASTER_PATH, bump.commit_sha)
