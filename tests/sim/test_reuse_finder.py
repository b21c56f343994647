"""The repo's reuse finder, pointed at the simulator's REST base, gets the answers GitHub would give.

``Finder`` is this test's own re-implementation of the requests ``utils/find_reusable_sweep_run.py``
documents (InferenceX): ``/commits/{sha}/pulls``, ``/issues/{n}/comments`` (``author_association``),
``/pulls/{n}``, ``/pulls/{n}/commits``, ``/actions/workflows/run-sweep.yml/runs?event=pull_request
&head_sha=&status=completed``, ``/actions/runs/{id}`` and ``/actions/runs/{id}/artifacts``, all
paginated at 100. The simulator decides the push-to-main run's reuse with its own code
(sim/reusegate.py); the two must agree, and the sim's REST answers must carry what the finder reads.
"""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from typing import Any

import pytest

from sim.server import SimServer
from tests.helpers.wait import wait_for

BENCH = "SemiAnalysisAI/InferenceX"
PR = 2104
WORKFLOW = "run-sweep.yml"
_CMD = re.compile(r"(?m)^\s*/reuse-sweep-run(?:\s+(\d+))?\s*$")


class Finder:
    def __init__(self, base: str, token: str = "sim-token") -> None:
        self.base, self.token = base, token

    def get(self, path: str, params: dict[str, str] | None = None) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        req = urllib.request.Request(
            f"{self.base}/repos/{BENCH}{path}{query}",
            headers={"Accept": "application/vnd.github+json", "Authorization": f"Bearer {self.token}"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def pages(self, path: str, key: str, params: dict[str, str] | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        page = 1
        while True:
            data = self.get(path, {"per_page": "100", "page": str(page), **(params or {})})
            items = data if isinstance(data, list) else data.get(key, [])
            out += items
            if len(items) < 100:
                return out
            page += 1

    def authorization(self, number: int) -> tuple[bool, int | None]:
        comments = sorted(self.pages(f"/issues/{number}/comments", ""), key=lambda c: str(c["created_at"]))
        for c in reversed(comments):
            if c["author_association"] not in ("OWNER", "MEMBER", "COLLABORATOR"):
                continue
            found = _CMD.findall(c["body"] or "")
            if found:
                return True, int(found[-1]) if found[-1] else None
        return False, None

    def decide(self, sha: str) -> dict[str, Any]:
        pulls = self.get(f"/commits/{sha}/pulls")
        if len(pulls) != 1:
            return {"enabled": False, "reason": f"{len(pulls)} associated pull requests"}
        number = int(pulls[0]["number"])
        ok, pinned = self.authorization(number)
        if not ok:
            return {"enabled": False, "reason": "no authorization"}
        pr = self.get(f"/pulls/{number}")
        labels = {lb["name"] for lb in pr["labels"]}
        assert labels & {"full-sweep-enabled", "full-sweep-fail-fast"} and pr["merged_at"]
        commits = [c["sha"] for c in self.pages(f"/pulls/{number}/commits", "")]
        if pinned is None:
            runs = self.pages(
                f"/actions/workflows/{WORKFLOW}/runs",
                "workflow_runs",
                {"event": "pull_request", "head_sha": pr["head"]["sha"], "status": "completed"},
            )
            run = next(r for r in runs if r["conclusion"] == "success" and r["head_sha"] in commits)
        else:
            run = self.get(f"/actions/runs/{pinned}")
        assert run["event"] == "pull_request" and run["status"] == "completed"
        assert run["path"] == f".github/workflows/{WORKFLOW}"
        assert number in {p["number"] for p in run["pull_requests"]}
        assert run["head_sha"] in commits
        names = {a["name"] for a in self.pages(f"/actions/runs/{run['id']}/artifacts", "artifacts")}
        assert names & {"results_bmk", "eval_results_all"}
        return {"enabled": True, "source-run-id": run["id"]}


def _sweep_the_pr(sim: SimServer) -> Any:
    world = sim.world
    branch = world.pull(BENCH, PR).head_ref
    world.add_labels(BENCH, PR, ["full-sweep-fail-fast"], "alice-admin")
    text = (world.read_file(BENCH, "perf-changelog.yaml", branch) or b"").decode()
    entry = "- config-keys:\n    - minimaxm3-fp4-mi355x-vllm\n  description:\n    - bump\n  pr-link: XXX\n"
    world.commit_files(BENCH, branch, {"perf-changelog.yaml": text + entry}, "Bump it", author="alice-admin")
    run = max((r for r in world.runs.values() if r.event == "pull_request"), key=lambda r: r.id)
    wait_for(lambda: run.status == "completed", "the PR's run-sweep.yml run", timeout=60)
    return run


@pytest.mark.parametrize("who", ["maintainer-pinned", "maintainer-unpinned", "bot-only", "outsider"])
def test_the_finder_and_the_sims_push_run_agree(seeded: SimServer, who: str) -> None:
    world, finder = seeded.world, Finder(seeded.github_api_url)
    run = _sweep_the_pr(seeded)
    assert run.conclusion == "success"
    jobs = [world.jobs[j].name for j in run.jobs]
    assert jobs[1].startswith("canary / ") and any(n.startswith("eval / ") for n in jobs)
    # the PR run carries what the finder validates, as GitHub answers it
    rest = finder.get(f"/actions/runs/{run.id}")
    assert [p["number"] for p in rest["pull_requests"]] == [PR]
    assert rest["head_sha"] in [c["sha"] for c in finder.pages(f"/pulls/{PR}/commits", "")]
    runs = finder.pages(
        f"/actions/workflows/{WORKFLOW}/runs",
        "workflow_runs",
        {"event": "pull_request", "status": "completed"},
    )
    assert run.id in {r["id"] for r in runs}
    assert not finder.pages(f"/actions/workflows/{WORKFLOW}/runs", "workflow_runs", {"event": "push"})
    body = {
        "maintainer-pinned": ("alice-admin", f"/reuse-sweep-run {run.id}"),
        "maintainer-unpinned": ("alice-admin", "/reuse-sweep-run"),
        "bot-only": (world.settings.default_token_user, f"/reuse-sweep-run {run.id}"),
        "outsider": ("mallory", f"/reuse-sweep-run {run.id}"),
    }[who]
    world.add_comment(BENCH, PR, body[0], body[1])
    merge_sha = world.merge_pull(BENCH, PR, "alice-admin")
    push = next(r for r in world.runs.values() if r.event == "push")
    assert finder.pages(
        f"/actions/workflows/{WORKFLOW}/runs", "workflow_runs", {"event": "push", "branch": "main"}
    )
    expected = finder.decide(merge_sha)
    sims = push.inputs["reuse"]
    assert sims["enabled"] == expected["enabled"], (sims, expected)
    # GitHub: a bot's comment has no maintainer association, nor has a read-only user's
    assert expected["enabled"] is who.startswith("maintainer")
    if expected["enabled"]:
        assert sims["source-run-id"] == expected["source-run-id"] == run.id
        assert push.conclusion == "success"
        assert not [j for j in push.jobs if world.jobs[j].point]  # no GPU job on main
        assert world.ingests == [{"repo": BENCH, "source-run-id": run.id, "merge-run-id": push.id}]
    else:
        assert who in ("bot-only", "outsider")
        assert [j for j in push.jobs if world.jobs[j].point]  # main sweeps the whole key again


def test_a_later_push_after_authorization_skips_the_prs_sweep(seeded: SimServer) -> None:
    """reuse-sweep-gate: "Later commits skip a new sweep after changelog/matrix validation"."""
    world = seeded.world
    run = _sweep_the_pr(seeded)
    world.add_comment(BENCH, PR, "alice-admin", f"/reuse-sweep-run {run.id}")
    branch = world.pull(BENCH, PR).head_ref
    text = (world.read_file(BENCH, "perf-changelog.yaml", branch) or b"").decode()
    world.commit_files(BENCH, branch, {"perf-changelog.yaml": text + "\n"}, "sync main", author="alice-admin")
    assert world.sweep_decisions[-1]["decision"].startswith("reuse-sweep-gate")
    assert max(r.id for r in world.runs.values() if r.event == "pull_request") == run.id
