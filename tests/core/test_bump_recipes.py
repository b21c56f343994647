"""A bump of a multi-node srt-slurm key sets its recipes' `model.container` to the pin in the same
commit as the master config line (InferenceX AGENTS.md: `model.container` must equal `image`), on
the real GLM-5.2 GB300 entry and its recipe at 843c6254."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml

from app.core.bumpplan import Blocked, BumpFacts, Commit, ConfigAt, plan_bump
from app.core.recipes.srtrecipe import current_container, set_container

FIX = Path(__file__).resolve().parents[1] / "fixtures/inferencex"
KEY = "glm5.2-fp4-gb300-dynamo-trt-agentic-agg-mtp"
MASTER = (FIX / "nvidia-master.glm52-gb300-trt-agentic-agg-mtp.head.yaml").read_bytes().decode()
RECIPE_REL = "trtllm/glm5.2/gb300-fp4/agentic/dynamo-agg-gb300-tp8-c1-b2-mtp8.yaml"
RECIPE_PATH = f"benchmarks/multi_node/srt-slurm-recipes/{RECIPE_REL}"
RECIPE = (FIX / "srt-slurm-recipes" / RECIPE_REL).read_bytes().decode()
NEW = "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc23"

FACTS = BumpFacts(
    repo="SemiAnalysisAI/InferenceX",
    key=KEY,
    image=NEW,
    mode="bump_pr",
    branch=f"sweepbot/bump/{KEY}",
    start_sha="a" * 40,
    exists=False,
    config=ConfigAt("configs/nvidia-master.yaml", MASTER),
    changelog=(FIX / "perf-changelog.head-tail.yaml").read_bytes().decode(),
    description=(f"Bump image to {NEW}",),
    recipes={RECIPE_PATH: RECIPE},
)


def test_the_commit_carries_the_recipe_with_the_same_pin() -> None:
    plan = plan_bump(FACTS)
    assert isinstance(plan, Commit)
    assert set(plan.files) == {"configs/nvidia-master.yaml", RECIPE_PATH, "perf-changelog.yaml"}
    assert yaml.safe_load(plan.files["configs/nvidia-master.yaml"])[KEY]["image"] == NEW
    assert current_container(plan.files[RECIPE_PATH]) == NEW
    changed = [
        a for a, b in zip(RECIPE.splitlines(), plan.files[RECIPE_PATH].splitlines(), strict=True) if a != b
    ]
    assert changed == ["  container: nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc22.post1"]


def test_a_recipe_already_at_the_pin_is_not_rewritten() -> None:
    plan = plan_bump(replace(FACTS, recipes={RECIPE_PATH: set_container(RECIPE, NEW)}))
    assert isinstance(plan, Commit) and RECIPE_PATH not in plan.files


def test_a_recipe_that_cannot_take_the_pin_blocks_the_bump() -> None:
    broken = RECIPE.replace("  container: nvcr.io", "  image: nvcr.io", 1)
    plan = plan_bump(replace(FACTS, recipes={RECIPE_PATH: broken}))
    assert isinstance(plan, Blocked) and RECIPE_PATH in plan.reason and "no `container:`" in plan.reason
    missing = plan_bump(replace(FACTS, recipes={}, missing_recipes=(RECIPE_PATH,)))
    assert isinstance(missing, Blocked) and "does not hold" in missing.reason
