"""The sim's run-sweep.yml fans a labelled changelog PR out as the real file does: multi-node and
single-node throughput jobs per seq-len, then the eval-only jobs (`eval /`, `multi-node eval /`),
widened or narrowed by the PR's `all-evals` / `evals-only` labels."""

from __future__ import annotations

import re

import pytest

from sim.scenario import MASTER_PATH, SeedScenario
from sim.world import SimSettings, World
from tests.recipe_helpers import fixture_text

MULTI_KEY = "qwen3.5-fp8-mi355x-sglang-disagg"  # the repo's own disaggregated key (843c6254)
BODY = "p50 | qwen3.5 fp8 mi355x-disagg sgl-disagg 1P (TP4) x 1D (TP8)    c8x16x32x64x128"


def _sweep_jobs(labels: list[str], key: str = MULTI_KEY) -> list[str]:
    world = World(SimSettings(time_scale=0.0))
    facts = SeedScenario(world).load()["facts"]
    repo, branch, pr = facts["bench_repo"], facts["recipe_branch"], facts["recipe_pr"]
    master = (world.read_file(repo, MASTER_PATH, branch) or b"").decode()
    found = re.search(
        rf"^{re.escape(MULTI_KEY)}:\n(?:[ #\n].*\n|\n)*", fixture_text("amd-master.head.yaml"), re.M
    )
    assert found is not None
    changelog = (world.read_file(repo, "perf-changelog.yaml", branch) or b"").decode()
    entry = f"- config-keys:\n    - {key}\n  description:\n    - a change\n  pr-link: XXX\n"
    world.add_labels(repo, pr, labels, "alice-admin")
    world.commit_files(
        repo,
        branch,
        {MASTER_PATH: master + "\n" + found.group(0), "perf-changelog.yaml": changelog + entry},
        "Add the disagg key",
        author="alice-admin",
    )
    run = max((r for r in world.runs.values() if r.event == "pull_request"), key=lambda r: r.id)
    return [world.jobs[j].name for j in run.jobs if world.jobs[j].point]


def test_multi_node_rows_and_their_evals() -> None:
    names = [n for n in _sweep_jobs(["non-canary-full-sweep-enabled"]) if "qwen3.5" in n]
    assert names == [f"multi-node 8k1k / {BODY}", f"multi-node eval / {BODY} | eval-only"]


@pytest.mark.parametrize(
    ("labels", "throughput", "evals"),
    [([], 10, 2), (["all-evals"], 10, 10), (["evals-only"], 0, 2), (["all-evals", "evals-only"], 0, 10)],
    ids=["default", "all-evals-widens", "evals-only-narrows", "both-every-eval-only"],
)
def test_modifier_labels(labels: list[str], throughput: int, evals: int) -> None:
    # the seed key's changelog entry: 10 single-node 8k1k points (conc 1..512), default evals at
    # the highest and the median conc
    names = _sweep_jobs(["non-canary-full-sweep-enabled", *labels], key="minimaxm3-fp4-mi355x-vllm")
    assert sum(1 for n in names if not n.endswith(" | eval-only")) == throughput
    assert sum(1 for n in names if n.endswith(" | eval-only")) == evals
