"""The simulator's issues endpoints and its injected performance regressions."""

from __future__ import annotations

import httpx

from sim import perf
from sim.server import SimServer


def test_issues_are_created_listed_updated_and_closed() -> None:
    with SimServer() as sim:
        sim.world.add_repo("o/bench")
        sim.world.set_permission("o/bench", "sweepbot[bot]", "write")
        h = {"Authorization": "token sim-token"}
        base = f"{sim.github_api_url}/repos/o/bench/issues"
        made = httpx.post(base, json={"title": "Nightly regression", "body": "<!-- m -->\nslower"}, headers=h)
        assert made.status_code == 201, made.text
        issue = made.json()
        assert issue["number"] == 1 and issue["state"] == "open" and "pull_request" not in issue
        assert httpx.post(base, json={"title": ""}, headers=h).status_code == 422
        listed = httpx.get(base, params={"state": "all"}, headers=h).json()
        assert [i["number"] for i in listed] == [1]
        patched = httpx.patch(f"{base}/1", json={"state": "closed", "body": "fixed"}, headers=h).json()
        assert (
            patched["state"] == "closed" and patched["state_reason"] == "completed" and patched["closed_at"]
        )
        assert httpx.get(base, headers=h).json() == []  # the default lists open issues only
        assert httpx.get(f"{base}/1", headers=h).json()["body"] == "fixed"
        assert httpx.get(f"{base}/9", headers=h).status_code == 404


def test_a_deleted_issue_is_answered_410_gone_as_github_answers_it() -> None:
    """GitHub's "Get an issue": 410 Gone for an issue deleted from a repository the caller may
    read (body ``{"message": "This issue was deleted"}``), 404 for a caller who may not."""
    from sim.app import admin_action

    with SimServer() as sim:
        sim.world.add_repo("o/bench")
        sim.world.set_permission("o/bench", "sweepbot[bot]", "write")
        h = {"Authorization": "token sim-token"}
        base = f"{sim.github_api_url}/repos/o/bench/issues"
        for title in ("first", "second"):
            assert httpx.post(base, json={"title": title, "body": ""}, headers=h).status_code == 201
        admin_action(sim.world, "delete-issue", {"repo": "o/bench", "number": 1})
        got = httpx.get(f"{base}/1", headers=h)
        assert got.status_code == 410 and got.json()["message"] == "This issue was deleted"
        assert httpx.patch(f"{base}/1", json={"body": "x"}, headers=h).status_code == 410
        assert [i["number"] for i in httpx.get(base, params={"state": "all"}, headers=h).json()] == [2]
        assert httpx.post(base, json={"title": "third", "body": ""}, headers=h).json()["number"] == 3
        sim.world.add_repo("o/private", private=True)
        sim.world.open_issue("o/private", "hidden", "", "someone")
        sim.world.delete_issue("o/private", 1)
        assert httpx.get(f"{sim.github_api_url}/repos/o/private/issues/1", headers=h).status_code == 404


def test_a_regression_slows_the_images_that_contain_its_commit_until_the_fix() -> None:
    with SimServer() as sim:
        w = sim.world
        w.add_repo("up/vllm")
        shas = [w.commit_files("up/vllm", "main", {f"f{i}": str(i)}, f"c{i}") for i in range(4)]
        reg = w.inject_regression("up/vllm", shas[1], 0.05)
        assert w.image_slowdown(f"img:nightly-{shas[0]}") == {}
        assert w.image_slowdown(f"img:nightly-{shas[1]}") == {"tpot": 0.05}
        assert w.image_slowdown(f"img:nightly-{shas[2]}") == {"tpot": 0.05}
        w.fix_regression(reg, shas[3])
        assert w.image_slowdown(f"img:nightly-{shas[2]}") == {"tpot": 0.05}
        assert w.image_slowdown(f"img:nightly-{shas[3]}") == {}
        assert w.image_slowdown("img:latest") == {}
    fast = perf.benchmark_result(perf.PerfInput("vllm", 64), seed=1)
    slow = perf.benchmark_result(perf.PerfInput("vllm", 64, slowdown_by={"tpot": 0.05}), seed=1)
    slow_tpot, fast_tpot = slow["mean_tpot_ms"], fast["mean_tpot_ms"]
    slow_tput, fast_tput = slow["output_throughput"], fast["output_throughput"]
    assert isinstance(slow_tpot, float) and isinstance(fast_tpot, float)
    assert isinstance(slow_tput, float) and isinstance(fast_tput, float)
    assert abs(slow_tpot / fast_tpot - 1.05) < 1e-9
    assert slow_tput < fast_tput


def test_the_nightly_story_plays_on_the_seed_world_through_the_admin_api() -> None:
    from sim.app import admin_action
    from sim.scenario import BENCH_REPO, IMAGE, SeedScenario
    from sim.world import SimError, World

    world = World()
    try:
        admin_action(world, "nightly/load", {})
        raise AssertionError("the story needs the seed world")
    except SimError as exc:
        assert exc.status == 409
    SeedScenario(world).load()
    status = admin_action(world, "nightly/load", {"registry_url": "http://127.0.0.1:1/hub"})
    names = [s["name"] for s in status["steps"]]
    assert (
        names[0] == "good-nightly-0" and "burst-with-regression" in names and names[-1] == "fixed-nightly-1"
    )
    config = world.read_file(BENCH_REPO, ".github/sweepbot.yml")
    assert config is not None and b"watch-nightlies:" in config
    before = len(world.images[IMAGE].tags)
    while not admin_action(world, "nightly/step", {})["done"]:
        pass
    story = world.nightly_story
    assert len(world.images[IMAGE].tags) == min(14, before + len(names) - 1 + 5)  # retention keeps 14
    bad = story.facts["bad_commit"]
    first_bad = story.facts["first_bad_tag"].removeprefix("nightly-")
    last_good = story.facts["last_good_tag"].removeprefix("nightly-")
    assert world.image_slowdown(f"{IMAGE}:nightly-{last_good}") == {}
    assert world.image_slowdown(f"{IMAGE}:nightly-{first_bad}") == {"tpot": 0.05}
    assert world.image_slowdown(f"{IMAGE}:nightly-{story.facts['fix_commit']}") == {}
    assert bad != first_bad
