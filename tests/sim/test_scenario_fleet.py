"""Scenario determinism, runner capacity, the perf model, registries, faults, OAuth, real fixtures."""

from __future__ import annotations

import httpx
import pytest
import yaml
from github import GithubException

from sim import perf
from sim.scenario import RECIPE_BRANCH, SeedScenario
from sim.server import SimServer
from sim.world import SimSettings, World
from tests.conftest import FIXTURES
from tests.helpers.wait import wait_for
from tests.sim.conftest import TEST_CONFIG, client, gh_as

KEY = "minimaxm3-fp4-mi355x-vllm"


def _story(seed: int, variant: str = "seed") -> tuple[list[tuple[str, str | None]], list[dict], dict]:
    w = World(SimSettings(seed=seed))
    sc = SeedScenario(w, variant)
    sc.load()
    history = sc.play()
    events = [(d.event, d.action) for d in w.deliveries]
    return events, history, {n: dict(r.refs) for n, r in w.repos.items()}


def test_scenario_is_deterministic_and_tells_the_story() -> None:
    a, b = _story(1), _story(1)
    assert a == b  # same events, same step results, same SHAs
    events, history, refs = a
    assert [h["step"] for h in history] == [
        "nightly-before-merge",
        "merge-47269",
        "nightly-after-47269",
        "close-47270",
        "drop-47270",
        "nightly-contains-rest",
    ]
    w = World()
    sc = SeedScenario(w)
    sc.load()
    sc.play()
    assert w.pull("vllm-project/vllm", 47269).merged
    p2 = w.pull("vllm-project/vllm", 47270)
    assert p2.state == "closed" and not p2.merged
    drop = [c.body for c in w.repo("SemiAnalysisAI/InferenceX").comments.values()]
    assert drop == ["/depends-on drop vllm-project/vllm#47270"]
    merge = sc.facts["merge_47269"]
    tags = w.images["vllm/vllm-openai-rocm"].tags
    containing = [
        t
        for t in tags
        if t.startswith("nightly-")
        and t[8:] in w.repo("vllm-project/vllm").objects.commits
        and merge in w.repo("vllm-project/vllm").objects.ancestors(t[8:])
    ]
    not_containing = [t for t in tags if t.startswith("nightly-") and t not in containing]
    assert len(containing) == 2 and len(not_containing) >= 3  # nightlies before and after the merge
    assert not_containing  # includes the old pin 4559c43a, which is not a commit of the sim's graph
    both = _story(1, "both-merge")[1]
    assert [h["step"] for h in both][-2:] == ["merge-47270", "nightly-contains-both"]


def test_scenario_over_admin_api(sim: SimServer) -> None:
    r = httpx.post(f"{sim.url}/_admin/scenario/seed/load", json={"variant": "both-merge"})
    assert r.status_code == 200 and r.json()["variant"] == "both-merge"
    steps = [httpx.post(f"{sim.url}/_admin/scenario/step").json()["step"] for _ in range(6)]
    assert steps[-1] is None and "merge-47270" in steps
    assert httpx.get(f"{sim.url}/_admin/scenario").json()["position"] == 5
    assert httpx.post(f"{sim.url}/_admin/scenario/other/load").status_code == 404


def test_runner_capacity_is_never_exceeded(seeded: SimServer) -> None:
    seeded.world.set_runners("mi355x", 3)
    g = client(seeded, "sim-token")
    wf = g.get_repo("SemiAnalysisAI/InferenceX").get_workflow("e2e-tests.yml")
    ids = [
        wf.create_dispatch(
            RECIPE_BRANCH,  # the recipe branch's key has 8k1k only: 10 points, 2 of them evaluated
            {"generate-cli-command": f"{TEST_CONFIG} {KEY}"},
            throw=True,
            return_run_details=True,
        ).id
        for _ in range(2)
    ]
    wait_for(lambda: all(seeded.world.runs[i].status == "completed" for i in ids), timeout=30, what="sweeps")
    busy, peak = 0, 0
    for d in seeded.world.deliveries:
        if d.event == "workflow_job" and d.action == "in_progress":
            busy += 1
        elif (
            d.event == "workflow_job" and d.action == "completed" and d.payload["workflow_job"]["runner_name"]
        ):
            busy -= 1
        peak = max(peak, busy)
    assert peak == 3
    # each run: 10 throughput jobs; the 2 eval-only jobs of the default eval selection are not
    # run (the real e2e-tests.yml's `eval /` matrix does not evaluate: tests/sim/test_eval_matrix.py)
    assert sum(len([j for j in seeded.world.runs[i].jobs if seeded.world.jobs[j].point]) for i in ids) == 20


def test_fleet_faults_runner_lost_and_failed_benchmark(seeded: SimServer) -> None:
    seeded.world.faults.runner_lost_next = 1
    seeded.world.faults.benchmark_fail_next = 1
    g = client(seeded, "sim-token")
    wf = g.get_repo("SemiAnalysisAI/InferenceX").get_workflow("e2e-tests.yml")
    run = wf.create_dispatch(
        RECIPE_BRANCH,
        {"generate-cli-command": f"{TEST_CONFIG} {KEY} --conc 1 2 4 --no-evals"},  # throughput jobs only
        throw=True,
        return_run_details=True,
    )
    wait_for(lambda: seeded.world.runs[run.id].status == "completed", what="run")
    jobs = [seeded.world.jobs[j] for j in seeded.world.runs[run.id].jobs if seeded.world.jobs[j].point]
    assert [j.conclusion for j in jobs] == ["failure", "failure", "success"]
    # as on GitHub: a lost runner is the check run's annotation; the steps are the template's own
    assert "lost communication with the server" in jobs[0].annotations[0]["message"]
    assert jobs[0].runner_name in jobs[0].annotations[0]["message"]
    assert jobs[0].steps[-1]["name"] == "Complete job"
    assert not any("lost" in st["name"] for st in jobs[0].steps)
    launch = next(st for st in jobs[1].steps if st["name"] == "Launch job script")
    assert launch["conclusion"] == "failure"
    assert jobs[1].annotations[0]["message"] == "Process completed with exit code 1."
    assert seeded.world.runs[run.id].conclusion == "failure"
    assert (
        len([a for a in seeded.world.artifacts.values() if a.run_id == run.id and a.name.startswith("bmk_")])
        == 1
    )


def test_bad_cli_command_fails_the_run(seeded: SimServer) -> None:
    run = seeded.world.dispatch(
        "SemiAnalysisAI/InferenceX",
        "e2e-tests.yml",
        "main",
        {"generate-cli-command": "test-config --config-keys no-such-key"},
        "sim",
    )
    # the repo CLI's grammar: --config-files is required
    assert run.conclusion == "failure" and "--config-files" in (run.error or "")
    run = seeded.world.dispatch(
        "SemiAnalysisAI/InferenceX",
        "e2e-tests.yml",
        "main",
        {"generate-cli-command": f"{TEST_CONFIG} no-such-*"},
        "sim",
    )
    assert run.conclusion == "failure" and "matched no config keys" in (run.error or "")
    tp = seeded.world.dispatch(
        "SemiAnalysisAI/InferenceX",
        "e2e-tests.yml",
        "main",
        {"generate-cli-command": f"{TEST_CONFIG} {KEY} --tp 4"},
        "sim",
    )
    assert tp.conclusion == "failure" and "unrecognized arguments: --tp 4" in (tp.error or "")


def test_perf_model_calibration_and_determinism() -> None:
    atom = yaml.safe_load((FIXTURES / "references" / "atom-minimaxm3-mxfp4-mi355x-tp4-8k1k.yaml").read_text())
    for p in atom["points"]:
        r = perf.benchmark_result(perf.PerfInput("atom", p["conc"]), seed=3)
        tpot, tput = r["mean_tpot_ms"], r["output_throughput"]
        assert isinstance(tpot, float) and isinstance(tput, float)
        assert abs(tpot / p["mean_tpot_ms"] - 1) < 0.01
        assert abs(tput / p["output_tok_s"] - 1) < 0.08
    v32 = perf.benchmark_result(perf.PerfInput("vllm", 32), seed=3)["mean_tpot_ms"]
    v64 = perf.benchmark_result(perf.PerfInput("vllm", 64), seed=3)["mean_tpot_ms"]
    assert isinstance(v32, float) and isinstance(v64, float)
    assert abs(v32 / 17.21 - 1) < 0.01 and abs(v64 / 25.13 - 1) < 0.01
    assert perf.expected_mean_tpot_ms("vllm", 4) / perf.expected_mean_tpot_ms("atom", 4) > 1.03
    curve = [perf.expected_mean_tpot_ms("vllm", c) for c in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)]
    assert curve == sorted(curve) and curve[0] > 4 and curve[-1] < 200
    durations = [perf.job_seconds(perf.benchmark_result(perf.PerfInput("vllm", c), 0)) for c in (1, 64, 512)]
    assert durations == sorted(durations)
    assert perf.benchmark_result(perf.PerfInput("vllm", 8), 5) == perf.benchmark_result(
        perf.PerfInput("vllm", 8), 5
    )
    assert perf.benchmark_result(perf.PerfInput("vllm", 8), 5) != perf.benchmark_result(
        perf.PerfInput("vllm", 8), 6
    )


def test_registries_oci_challenge_pagination_hub_and_retention(seeded: SimServer) -> None:
    url = seeded.url
    r = httpx.get(f"{url}/v2/vllm/vllm-openai-rocm/tags/list?n=2")
    assert r.status_code == 401
    challenge = r.headers["www-authenticate"]
    assert challenge.startswith('Bearer realm="') and "repository:vllm/vllm-openai-rocm:pull" in challenge
    realm = challenge.split('"')[1]
    tok = httpx.get(
        realm, params={"service": "sim-registry", "scope": "repository:vllm/vllm-openai-rocm:pull"}
    ).json()["token"]
    h = {"Authorization": f"Bearer {tok}"}
    tags: list[str] = []
    nxt: str | None = "/v2/vllm/vllm-openai-rocm/tags/list?n=2"
    while nxt:
        page = httpx.get(url + nxt, headers=h)
        tags += page.json()["tags"]
        link = page.headers.get("link")
        nxt = link.split(">")[0].lstrip("<") if link else None
    assert tags == sorted(tags) and len(tags) == 4
    assert httpx.get(f"{url}/v2/nope/x/tags/list", headers=h).json()["errors"][0]["code"] == "NAME_UNKNOWN"
    assert httpx.get(f"{url}/v2/vllm/vllm-openai-rocm/tags/list?n=0", headers=h).json()["tags"] == []

    hub = httpx.get(
        f"{url}/hub/v2/namespaces/vllm/repositories/vllm-openai-rocm/tags?page=1&page_size=3"
    ).json()
    assert hub["count"] == 4 and hub["next"] and hub["previous"] is None and len(hub["results"]) == 3
    page2 = httpx.get(hub["next"]).json()
    assert len(page2["results"]) == 1 and page2["next"] is None

    for i in range(20):
        seeded.world.push_tag("vllm/vllm-openai-rocm", f"nightly-{i:040x}")
    seeded.world.push_tag("vllm/vllm-openai-rocm", "latest")
    kept = seeded.world.images["vllm/vllm-openai-rocm"].tags
    assert sum(t.startswith("nightly-") for t in kept) == 14 and "latest" in kept
    assert f"nightly-{19:040x}" in kept and f"nightly-{5:040x}" not in kept


def test_api_faults_5xx_secondary_limit_and_latency(seeded: SimServer) -> None:
    api = seeded.github_api_url
    h = {"Authorization": "token sim-token"}
    admin = httpx.post(
        f"{seeded.url}/_admin/faults", json={"operation": "pulls/get", "fail_next": 2, "status": 502}
    )
    assert admin.status_code == 200
    url = f"{api}/repos/vllm-project/vllm/pulls/47269"
    assert [httpx.get(url, headers=h).status_code for _ in range(3)] == [502, 502, 200]
    httpx.post(
        f"{seeded.url}/_admin/faults",
        json={"operation": "pulls/get", "fail_next": 1, "status": 429, "retry_after": 7},
    )
    limited = httpx.get(url, headers=h)
    assert limited.status_code == 429 and limited.headers["retry-after"] == "7"
    assert "secondary rate limit" in limited.json()["message"]
    calls = httpx.get(f"{seeded.url}/_admin/calls").json()
    assert calls["by_operation"]["pulls/get"] == {"502": 2, "200": 1, "429": 1}
    assert calls["rate_limited"] == 1  # faults spend no budget
    httpx.post(f"{seeded.url}/_admin/calls/reset")
    assert httpx.get(f"{seeded.url}/_admin/calls").json()["total"] == 0


def test_oauth_web_flow_and_membership(seeded: SimServer) -> None:
    r = httpx.get(
        f"{seeded.url}/login/oauth/authorize",
        params={"client_id": "c", "redirect_uri": "http://app/cb", "state": "xyz", "login": "bob-maintainer"},
    )
    assert r.status_code == 302
    loc = httpx.URL(r.headers["location"])
    assert loc.params["state"] == "xyz"
    tok = httpx.post(
        f"{seeded.url}/login/oauth/access_token",
        data={"code": loc.params["code"], "client_id": "c"},
        headers={"Accept": "application/json"},
    ).json()["access_token"]
    me = httpx.get(f"{seeded.github_api_url}/user", headers={"Authorization": f"Bearer {tok}"}).json()
    assert me["login"] == "bob-maintainer"
    org = f"{seeded.github_api_url}/orgs/SemiAnalysisAI"
    assert (
        httpx.get(f"{org}/members/bob-maintainer", headers={"Authorization": f"token {tok}"}).status_code
        == 204
    )
    assert (
        httpx.get(f"{org}/members/dave-outside", headers={"Authorization": f"token {tok}"}).status_code == 404
    )
    team = httpx.get(
        f"{org}/teams/inferencex-maintainers/memberships/bob-maintainer",
        headers={"Authorization": f"token {tok}"},
    )
    assert team.status_code == 200 and team.json()["state"] == "active"
    # a code is single-use
    again = httpx.post(
        f"{seeded.url}/login/oauth/access_token",
        data={"code": loc.params["code"]},
        headers={"Accept": "application/json"},
    ).json()
    assert again["error"] == "bad_verification_code"


def test_real_fixture_files_load_through_admin_api(sim: SimServer) -> None:
    files = {
        ".github/configs/amd-master.yaml": (FIXTURES / "inferencex" / "amd-master.f8f9b66.yaml").read_text(),
        "configs/runners.yaml": (FIXTURES / "inferencex" / "runners.yaml").read_text(),
        "perf-changelog.yaml": (FIXTURES / "inferencex" / "perf-changelog.tail.yaml").read_text(),
        ".github/workflows/e2e-tests.yml": (
            FIXTURES / "inferencex" / "workflows" / "e2e-tests.yml"
        ).read_text(),
    }
    r = httpx.post(f"{sim.url}/_admin/repos", json={"full_name": "SemiAnalysisAI/InferenceX", "files": files})
    assert r.status_code == 200
    sim.world.add_workflow("SemiAnalysisAI/InferenceX", ".github/workflows/e2e-tests.yml", "End-to-End Tests")
    sim.world.set_runners("mi355x", 9)
    repo = client(sim, "sim-token").get_repo("SemiAnalysisAI/InferenceX")
    got = repo.get_contents(".github/configs/amd-master.yaml")
    assert not isinstance(got, list)
    assert got.decoded_content.decode() == files[".github/configs/amd-master.yaml"]  # byte for byte
    run = sim.world.dispatch(
        "SemiAnalysisAI/InferenceX",
        "e2e-tests.yml",
        "main",
        {"generate-cli-command": f"{TEST_CONFIG} {KEY} --conc 64"},
        "sim",
    )
    assert run.error is None and len(run.jobs) >= 3  # several tp/ep items at conc 64 in the real file
    with pytest.raises(GithubException):
        gh_as(sim, "nobody").get_repo("SemiAnalysisAI/InferenceX")


def test_slow_queue_fault_delays_job_start(seeded: SimServer) -> None:
    g = client(seeded, "sim-token")
    wf = g.get_repo("SemiAnalysisAI/InferenceX").get_workflow("e2e-tests.yml")

    def queue_wait() -> float:
        run = wf.create_dispatch(
            RECIPE_BRANCH,
            {"generate-cli-command": f"{TEST_CONFIG} {KEY} --conc 1"},
            throw=True,
            return_run_details=True,
        )
        wait_for(lambda: seeded.world.runs[run.id].status == "completed", what="run")
        job = next(seeded.world.jobs[j] for j in seeded.world.runs[run.id].jobs if seeded.world.jobs[j].point)
        assert job.conclusion == "success" and job.started_at is not None
        return job.started_at - job.created_at

    assert queue_wait() < 0.15  # free runners: the job starts at once
    seeded.world.faults.queue_delay_s = 1500.0  # simulated seconds; 0.3 s at this time scale
    assert queue_wait() >= 1500.0 * seeded.world.settings.time_scale


def test_webhooks_are_retried_on_5xx_with_the_same_delivery_id() -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    seen: list[str] = []

    class Flaky(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.headers["X-GitHub-Delivery"])
            self.send_response(502 if len(seen) < 3 else 202)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/webhooks/github"
        with SimServer(settings=SimSettings(time_scale=0.0002, webhook_url=url, webhook_retries=3)) as sim:
            sim.world.add_user("octo")
            sim.world.add_repo("octo/hooks")
            sim.world.commit_files("octo/hooks", "main", {"a.txt": "1\n"}, "first", author="octo")
            wait_for(lambda: any(d.status == "delivered" for d in sim.world.deliveries), what="delivery")
            delivered = next(d for d in sim.world.deliveries if d.status == "delivered")
        assert delivered.attempts == 3 and delivered.response_status == 202
        assert seen[:3] == [delivered.guid] * 3
    finally:
        server.shutdown()
        server.server_close()
