"""Multi-node and agentic-coding keys plan to the points the generator's rules give (every key of
every fixture master file, head and historical, AMD and NVIDIA; the exact rows of every HEAD key:
tests/core/test_generator_parity.py)."""

from __future__ import annotations

import pytest

from app.core.recipes import EmptyPlanError, UnsupportedScenarioError, expand_points, parse_master
from app.core.recipes.evals import plan_with_evals
from app.core.recipes.master import is_single_node_fixed
from tests.recipe_helpers import MASTER_FILES, fixture_text, reference_rows, summarize_rows


@pytest.mark.parametrize("name", MASTER_FILES)
def test_every_multinode_and_agentic_key_plans_to_its_documented_points(name: str) -> None:
    master = parse_master(fixture_text(name))
    planned = 0
    for key, entry in master.items():
        if is_single_node_fixed(entry):
            continue
        rows = [p.to_json() for p in expand_points(master, key)]
        assert summarize_rows(rows) == reference_rows(key, entry), key
        names = [r["result-name"] for r in rows]
        assert len(set(names)) == len(names), key  # every job of the key is trackable by its name
        assert all(r["config-key"] == key and r["image"] == entry["image"] for r in rows)
        planned += 1
    assert planned >= (1 if "deprecated" not in name else 4)


def test_multinode_rows_carry_the_whole_conc_list_and_filters_narrow_it() -> None:
    master = parse_master(fixture_text("amd-master.head.yaml"))
    key = "qwen3.5-fp8-mi355x-sglang-disagg"
    (row,) = [p.to_json() for p in expand_points(master, key)]
    assert row["conc"] == [8, 16, 32, 64, 128]
    assert row["prefill"]["tp"] == 4 and row["decode"]["tp"] == 8 and row["disagg"] is True
    assert row["max-model-len"] == 8192 + 1024 + 256 and row["exp-name"] == "qwen3.5_8k1k"
    (narrow,) = [p.to_json() for p in expand_points(master, key, conc=[16, 64])]
    assert narrow["conc"] == [16, 64]
    with pytest.raises(EmptyPlanError, match="conc 3 not in its search space"):
        expand_points(master, key, conc=[3])
    with pytest.raises(EmptyPlanError, match="has no 1k1k"):
        expand_points(master, key, seq="1k1k")


def test_agentic_single_node_points_one_per_conc_with_offload_and_duration() -> None:
    master = parse_master(fixture_text("amd-master.head.yaml"))
    key = "qwen3.5-fp8-mi300x-sglang-agentic-mtp"
    rows = [p.to_json() for p in expand_points(master, key)]
    assert [(r["tp"], r["ep"], r["conc"]) for r in rows] == [(8, 1, c) for c in (4, 16, 20, 24, 32)] + [
        (8, 8, c) for c in (4, 16, 20, 24, 32)
    ]
    assert {r["scenario-type"] for r in rows} == {"agentic-coding"}
    assert {(r["duration"], r["total-cpu-dram-gb"], r["kv-offloading"]) for r in rows} == {(3600, 0, "none")}
    assert rows[0]["exp-name"] == "qwen3.5_tp8_conc4_kvnone_spec-mtp"  # the generator's agentic exp-name
    with pytest.raises(EmptyPlanError, match="agentic-coding rows have no seq-len"):
        expand_points(master, key, seq="8k1k")


def test_agentic_multinode_rows_keep_pp_dcp_and_aggregate_decode() -> None:
    master = parse_master(fixture_text("nvidia-master.tail.head.yaml"))
    rows = [p.to_json() for p in expand_points(master, "kimik3-fp4-b200-dynamo-vllm-agentic")]
    # one row per concurrency (the repo's one-concurrency-per-allocation limit)
    assert [r["conc"] for r in rows] == [[1], [2], [4], [8], [16], [32]]
    assert [r["exp-name"] for r in rows][:2] == ["kimik3_p1x8_d0x8_conc1", "kimik3_p1x8_d0x8_conc2"]
    assert rows[0]["prefill"]["pp"] == 2 and rows[0]["decode"]["num-worker"] == 0
    assert rows[0]["kv-offloading"] == "none" and rows[0]["scenario-type"] == "agentic-coding"
    dcp = [
        p.to_json() for p in expand_points(master, "kimik3-fp4-gb300-dynamo-vllm-agentic-mooncake-dcp8-agg")
    ]
    assert dcp[0]["prefill"]["dcp-size"] == 8 and dcp[0]["kv-offload-backend"]["name"] == "mooncake"


def test_eval_selection_works_on_the_planned_rows() -> None:
    # i13's pure eval selection takes these rows as they are: one eval per multi-node topology.
    master = parse_master(fixture_text("nvidia-master.dsv4-gb300-trt-mtp.head.yaml"))
    rows = plan_with_evals(master, "dsv4-fp4-gb300-dynamo-trt-mtp")
    assert len(rows) == 13 and all("run-eval" in r for r in rows)
    assert sum(r["run-eval"] for r in rows) >= 1


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ("  - { tp: 4, conc-list: [1], kv-offloading: none, warp-drive: true }\n", "`warp-drive`"),
        ("  - { tp: 4, conc-list: [1], kv-offloading: none, prefill: {} }\n", "`prefill`"),
    ],
)
def test_an_unexpandable_field_is_one_clear_error_naming_it(item: str, field: str) -> None:
    text = (
        "k-fp4-mi355x-vllm-agentic:\n  image: a/b:1\n  model: m\n  model-prefix: k\n  runner: cluster:x\n"
        "  precision: fp4\n  framework: vllm\n  multinode: false\n  scenarios:\n    agentic-coding:\n"
        "    - search-space:\n    " + item
    )
    with pytest.raises(UnsupportedScenarioError, match=field) as info:
        expand_points(parse_master(text), "k-fp4-mi355x-vllm-agentic")
    assert "\n" not in str(info.value)
    master = parse_master(text.replace("agentic-coding:", "weird-scenario:"))
    with pytest.raises(UnsupportedScenarioError, match="weird-scenario"):
        expand_points(master, "k-fp4-mi355x-vllm-agentic")
