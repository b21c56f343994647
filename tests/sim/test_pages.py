"""The simulator's HTML pages: every html_url it hands out (PR, files, commit, run, job) answers
with a readable page; unknown objects are 404; user text is rendered inert."""

from __future__ import annotations

import re

import httpx

from sim.server import SimServer
from tests.helpers.wait import wait_for

BENCH = "SemiAnalysisAI/InferenceX"


def test_every_html_url_the_api_hands_out_is_a_readable_page(seeded: SimServer) -> None:
    world = seeded.world
    api, base = seeded.github_api_url, seeded.url
    pull = httpx.get(f"{api}/repos/{BENCH}/pulls/2104", headers={"Authorization": "token sim-token"}).json()
    page = httpx.get(pull["html_url"])
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert pull["title"] in page.text and "Conversation" in page.text
    files = httpx.get(pull["html_url"] + "/files")
    assert files.status_code == 200 and "amd-master.yaml" in files.text

    head = world.pull_head_sha(world.repo(BENCH).pulls[2104])
    commit = httpx.get(
        f"{api}/repos/{BENCH}/commits/{head}", headers={"Authorization": "token sim-token"}
    ).json()
    shown = httpx.get(commit["html_url"])
    assert shown.status_code == 200 and head in shown.text
    assert httpx.get(f"{base}/{BENCH}/commit/{head[:10]}").status_code == 200  # short sha, as GitHub

    run = world.dispatch(
        BENCH,
        "e2e-tests.yml",
        "main",
        {
            "generate-cli-command": "test-config --config-keys minimaxm3-fp4-mi355x-vllm "
            "--seq-lens 8k1k --conc 4"
        },
        "sweepbot[bot]",
    )
    wait_for(lambda: world.runs[run.id].status == "completed", timeout=20, what="the run to finish")
    got = httpx.get(
        f"{api}/repos/{BENCH}/actions/runs/{run.id}", headers={"Authorization": "token sim-token"}
    )
    run_page = httpx.get(got.json()["html_url"])
    assert run_page.status_code == 200 and "Jobs" in run_page.text and "Artifacts" in run_page.text
    jobs = httpx.get(
        f"{api}/repos/{BENCH}/actions/runs/{run.id}/jobs", headers={"Authorization": "token sim-token"}
    ).json()["jobs"]
    assert jobs
    for job in jobs:
        job_page = httpx.get(job["html_url"])
        assert job_page.status_code == 200 and job["name"] in job_page.text
    # every link on the run page resolves too
    for href in re.findall(r'href="([^"]+)"', run_page.text):
        assert httpx.get(base + href if href.startswith("/") else href).status_code == 200, href

    assert httpx.get(f"{base}/{BENCH}").status_code == 200


def test_unknown_objects_are_404_and_user_text_is_inert(seeded: SimServer) -> None:
    base = seeded.url
    for path in (
        f"/{BENCH}/pull/99999",
        f"/{BENCH}/pull/99999/files",
        f"/{BENCH}/commit/{'0' * 40}",
        f"/{BENCH}/actions/runs/123456789",
        "/nobody/nothing",
    ):
        assert httpx.get(base + path).status_code == 404, path
    seeded.world.add_comment(BENCH, 2104, "mallory", "<script>alert(1)</script> <img src=x onerror=alert(2)>")
    page = httpx.get(f"{base}/{BENCH}/pull/2104").text
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page
