"""A multi-node srt-slurm key's recipes and the one-line `model.container` pin edit, on real recipe
files and master entries of InferenceX (tests/fixtures/inferencex/srt-slurm-recipes/)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.core.recipes import RecipeError, parse_master
from app.core.recipes.srtrecipe import RECIPES_DIR, current_container, recipe_refs, set_container

FIX = Path(__file__).resolve().parents[1] / "fixtures/inferencex"
GLM = FIX / "srt-slurm-recipes/trtllm/glm5.2/gb300-fp4/agentic/dynamo-agg-gb300-tp8-c1-b2-mtp8.yaml"
VLLM = FIX / "srt-slurm-recipes/vllm/deepseek-v4/8k1k/disagg-b200-low-latency-c1.yaml"


def _read(path: Path) -> str:
    return path.read_bytes().decode()


def test_a_key_names_its_recipes_by_repo_path_or_launcher_path() -> None:
    glm = parse_master(_read(FIX / "nvidia-master.glm52-gb300-trt-agentic-agg-mtp.head.yaml"))
    [ref] = recipe_refs(glm["glm5.2-fp4-gb300-dynamo-trt-agentic-agg-mtp"])
    assert ref.path == f"{RECIPES_DIR}/trtllm/glm5.2/gb300-fp4/agentic/dynamo-agg-gb300-tp8-c1-b2-mtp8.yaml"
    assert ref.in_repo_path
    dsv4 = parse_master(_read(FIX / "nvidia-master.dsv4-b200-dynamo-vllm.head.yaml"))
    refs = recipe_refs(dsv4["dsv4-fp4-b200-dynamo-vllm"])
    assert [r.path for r in refs][0] == f"{RECIPES_DIR}/vllm/deepseek-v4/8k1k/disagg-b200-low-latency-c1.yaml"
    assert len(refs) == 5 and not any(r.in_repo_path for r in refs)


@pytest.mark.parametrize(
    ("setting", "path"),
    [
        ("CONFIG_FILE=recipes/b200-fp4/8k1k.yaml:override_stp_tp4", f"{RECIPES_DIR}/b200-fp4/8k1k.yaml"),
        ("EVAL_CONFIG_FILE=recipes/x/y.yaml", f"{RECIPES_DIR}/x/y.yaml"),
        ("CONFIG_FILE=recipes/../../.github/workflows/x.yaml", None),  # traversal: not followed
        ("CONFIG_FILE=/etc/x.yaml", None),
        ("PREFILL_NODES=2", None),
    ],
)
def test_settings_and_selectors(setting: str, path: str | None) -> None:
    entry = {"multinode": True, "scenarios": {"fixed-seq-len": [{"search-space": [{"prefill": {
        "additional-settings": [setting]}}]}]}}  # fmt: skip
    assert [r.path for r in recipe_refs(entry)] == ([path] if path else [])
    assert recipe_refs({**entry, "multinode": False}) == []


TRT = "nvcr.io/nvidia/tensorrt-llm/release"


@pytest.mark.parametrize(
    ("fixture", "old", "new", "line"),
    [
        (GLM, f"{TRT}:1.3.0rc22.post1", f"{TRT}:1.3.0rc23", f"  container: {TRT}:1.3.0rc23"),
        (
            VLLM,
            "vllm/vllm-openai:v0.23.0",
            "vllm/vllm-openai:v0.25.1",
            '  container: "vllm/vllm-openai:v0.25.1"',
        ),
        (  # an enroot pin, as the master config writes it
            GLM,
            f"{TRT}:1.3.0rc22.post1",
            "nvcr.io#nvidia/tensorrt-llm/release:1.3.0rc24",
            "  container: nvcr.io#nvidia/tensorrt-llm/release:1.3.0rc24",
        ),
    ],
)
def test_the_container_edit_changes_one_line_only(fixture: Path, old: str, new: str, line: str) -> None:
    text = _read(fixture)
    assert current_container(text) == old
    edited = set_container(text, new)
    before, after = text.splitlines(keepends=True), edited.splitlines(keepends=True)
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert len(changed) == 1 and changed[0][1].rstrip("\n") == line
    data = yaml.safe_load(edited)
    assert data["model"]["container"] == new and {**data, "model": None} == {
        **yaml.safe_load(text),
        "model": None,
    }
    # the identity block keeps its own record (only model.container is the pin the repo checks)
    assert set_container(edited, new) == edited


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("name: x\nmodel:\n  path: p\n", "no `container:`"),
        ("name: x\n", "no `model:` mapping"),
        ("model:\n  container: &c img:1\n", "alias, anchor or tag"),
        ("model:\n  container: 3\n", "not a one-line string"),
        ("model: [\n", "srt-slurm recipe is not valid YAML"),
    ],
)
def test_a_recipe_that_cannot_take_the_pin_says_why(text: str, said: str) -> None:
    with pytest.raises(RecipeError) as err:
        set_container(text, "img:2")
    assert said in str(err.value)
