"""Sweep planning (expand_points) and the other master-config helpers, against the real configs."""

from __future__ import annotations

import json

import pytest

from app.core.recipes import (
    AmbiguousKeyError,
    EmptyPlanError,
    InvalidRecipeError,
    InvalidYamlError,
    KeyLocation,
    Point,
    RecipeError,
    UnknownKeyError,
    UnsupportedScenarioError,
    expand_points,
    is_master_config_path,
    keys_changed,
    keys_for_paths,
    locate_key,
    parse_master,
    recipe_fingerprint,
    runner_capacity,
    sibling_key,
)
from tests.recipe_helpers import (
    BUMPED_IMAGE,
    MASTER_FILES,
    SEED_KEY,
    fixture_text,
    is_single_node_fixed,
    reference_points,
)

POINT_KEYS = [
    "config-key",
    "image",
    "model",
    "model-prefix",
    "precision",
    "framework",
    "runner",
    "isl",
    "osl",
    "tp",
    "pp",
    "dcp-size",
    "pcp-size",
    "ep",
    "dp-attn",
    "spec-decoding",
    "conc",
    "max-model-len",
    "exp-name",
    "disagg",
    "result-name",
]


KEY = "k-fp4-mi355x-vllm"


def _doc(search_space: str, *, extra: str = "", scenario_extra: str = "") -> dict:
    return parse_master(
        "k-fp4-mi355x-vllm:\n"
        "  image: repo/img:tag\n  model: org/model\n  model-prefix: k\n  runner: mi355x\n"
        "  precision: fp4\n  framework: vllm\n  multinode: false\n"
        + extra
        + "  scenarios:\n    fixed-seq-len:\n    - isl: 1024\n      osl: 1024\n"
        + scenario_extra
        + "      search-space:\n"
        + search_space
    )


@pytest.mark.parametrize("name", MASTER_FILES)
def test_every_single_node_key_matches_the_reference_expansion(name: str) -> None:
    master = parse_master(fixture_text(name))
    checked = 0
    for key, entry in master.items():
        if not is_single_node_fixed(entry):
            continue
        got = [p.to_json() for p in expand_points(master, key)]
        assert got == reference_points(key, entry), key
        assert all(list(row) == POINT_KEYS for row in got)
        checked += 1
    assert checked >= (10 if name.startswith("amd-") else 0)


@pytest.mark.parametrize("name", MASTER_FILES)
def test_multinode_and_agentic_keys_are_planned_not_refused(name: str) -> None:
    # Their rules and the reference comparison: tests/core/test_recipes_topology.py.
    master = parse_master(fixture_text(name))
    for key, entry in master.items():
        if not is_single_node_fixed(entry):
            assert expand_points(master, key), key


def test_seed_key_8k1k_is_ten_points_conc_1_to_512_tp4() -> None:
    master = parse_master(fixture_text("amd-master.b4cec7f.yaml"))
    points = expand_points(master, SEED_KEY, seq="8k1k")
    assert [p.conc for p in points] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert {p.tp for p in points} == {4}
    first = points[0]
    assert first.image == BUMPED_IMAGE
    assert first.max_model_len == 8192 + 1024 + 256
    assert first.exp_name == "minimaxm3_8k1k" and first.seq == "8k1k"
    assert points[5].result_name == (
        "minimaxm3_8k1k_fp4_vllm_tp4-pp1-dcp1-pcp1-ep1-dpafalse_disagg-false_spec-none_conc32_mi355x"
    )


def test_seed_key_before_the_bump_has_both_seq_lens_in_file_order() -> None:
    master = parse_master(fixture_text("amd-master.f8f9b66.yaml"))
    points = expand_points(master, SEED_KEY)
    assert [p.seq for p in points][:1] == ["1k1k"] and points[-1].seq == "8k1k"
    dpa = [p for p in points if p.dp_attn]
    assert [p.conc for p in dpa if p.seq == "1k1k"] == [256, 512, 1024]
    assert all(p.ep == 8 and "-ep8-dpatrue_" in p.result_name for p in dpa)
    tp4 = expand_points(master, SEED_KEY, seq="8k1k", tp=4)
    assert [p.conc for p in tp4] == [1, 2, 4, 8, 16, 32, 64, 128]


def test_conc_range_clamps_the_last_value_to_conc_end() -> None:
    master = _doc(
        "      - { tp: 4, conc-start: 1, conc-end: 48 }\n      - { tp: 8, conc-start: 64, conc-end: 512 }\n"
    )
    points = expand_points(master, "k-fp4-mi355x-vllm")
    assert [p.conc for p in points if p.tp == 4] == [1, 2, 4, 8, 16, 32, 48]
    assert [p.conc for p in points if p.tp == 8] == [64, 128, 256, 512]
    single = _doc("      - { tp: 4, conc-start: 16, conc-end: 16 }\n")
    assert [p.conc for p in expand_points(single, "k-fp4-mi355x-vllm")] == [16]


def test_conc_list_is_used_as_given_and_real_conc_list_key_matches() -> None:
    master = _doc("      - { tp: 4, conc-list: [8, 3, 100] }\n")
    assert [p.conc for p in expand_points(master, "k-fp4-mi355x-vllm")] == [8, 3, 100]
    real = parse_master(fixture_text("amd-master.f8f9b66.yaml"))
    points = expand_points(real, "dsv4-fp4-mi355x-atom", seq="8k1k")
    assert [(p.tp, p.conc) for p in points if p.tp == 4] == [(4, 8), (4, 16), (4, 32), (4, 64)]


def test_defaults_and_explicit_parallelism_fields() -> None:
    master = _doc(
        "      - { tp: 4, pp: 2, dcp-size: 4, pcp-size: 2, ep: 4, dp-attn: true,"
        " spec-decoding: mtp, conc-list: [16] }\n",
        extra="  disagg: true\n",
    )
    (point,) = expand_points(master, "k-fp4-mi355x-vllm")
    assert (point.pp, point.dcp_size, point.pcp_size, point.ep, point.dp_attn) == (2, 4, 2, 4, True)
    assert point.result_name == (
        "k_1k1k_fp4_vllm_tp4-pp2-dcp4-pcp2-ep4-dpatrue_disagg-true_spec-mtp_conc16_mi355x"
    )
    assert Point.from_json(point.to_json(), disagg=True) == point
    assert json.loads(json.dumps(point.to_json()))["dp-attn"] is True


def test_other_seq_lens_are_named_isl_osl() -> None:
    master = parse_master(
        "k:\n  image: a/b:c\n  model: m\n  model-prefix: k\n  runner: mi355x\n  precision: fp8\n"
        "  framework: sglang\n  scenarios:\n    fixed-seq-len:\n"
        "    - {isl: 1024, osl: 8192, search-space: [{tp: 8, conc-list: [4]}]}\n"
    )
    (point,) = expand_points(master, "k", seq="1024_8192")
    assert point.seq == "1024_8192" and point.exp_name == "k_1024_8192"
    assert point.max_model_len == 1024 + 8192 + 256


def test_filters_combine_and_typos_are_reported() -> None:
    master = parse_master(fixture_text("amd-master.f8f9b66.yaml"))
    pts = expand_points(master, SEED_KEY, seq="8k1k", conc=[32, 64], tp=8)
    assert {(p.tp, p.conc) for p in pts} == {(8, 32), (8, 64)}
    assert len(pts) == 4  # tp8 (plain) and tp8/ep8 both have 32 and 64
    with pytest.raises(EmptyPlanError, match="conc 1000"):
        expand_points(master, SEED_KEY, seq="8k1k", conc=[1000])
    with pytest.raises(EmptyPlanError, match="tp=3"):
        expand_points(master, SEED_KEY, tp=3)
    with pytest.raises(EmptyPlanError, match="1k1k, 8k1k"):
        expand_points(master, SEED_KEY, seq="2k")
    bumped = parse_master(fixture_text("amd-master.b4cec7f.yaml"))
    with pytest.raises(EmptyPlanError, match="no 1k1k"):
        expand_points(bumped, SEED_KEY, seq="1024_1024")


def test_unknown_key_suggests_close_matches() -> None:
    master = parse_master(fixture_text("amd-master.b4cec7f.yaml"))
    with pytest.raises(UnknownKeyError, match="did you mean minimaxm3-fp4-mi355x-vllm"):
        expand_points(master, "minimaxm3-fp4-mi355x-vlm")
    assert isinstance(UnknownKeyError("x"), RecipeError) and isinstance(RecipeError("x"), ValueError)


def test_malformed_entries_are_explained() -> None:
    with pytest.raises(InvalidRecipeError, match="both `conc-list`"):
        expand_points(_doc("      - { tp: 4, conc-list: [1], conc-start: 1, conc-end: 4 }\n"), KEY)
    with pytest.raises(InvalidRecipeError, match="greater than conc-end"):
        expand_points(_doc("      - { tp: 4, conc-start: 8, conc-end: 4 }\n"), "k-fp4-mi355x-vllm")
    with pytest.raises(InvalidRecipeError, match="spec-decoding"):
        expand_points(_doc("      - { tp: 4, conc-list: [1], spec-decoding: eagle }\n"), "k-fp4-mi355x-vllm")
    with pytest.raises(UnsupportedScenarioError, match="kv-offloading"):
        expand_points(_doc("      - { tp: 4, conc-list: [1], kv-offloading: dram }\n"), "k-fp4-mi355x-vllm")
    with pytest.raises(InvalidYamlError, match="not a mapping"):
        parse_master("- a\n- b\n")
    with pytest.raises(InvalidYamlError, match="line 2"):
        parse_master("a: [1,\nb: }\n")


def test_runner_capacity_counts_nodes_per_label() -> None:
    capacity = runner_capacity(fixture_text("runners.yaml"))
    assert capacity["mi355x"] == 9
    assert all(n >= 1 for n in capacity.values())
    with pytest.raises(InvalidYamlError, match="labels"):
        runner_capacity("hardware: {}\n")


def test_recipe_fingerprint_ignores_the_image_but_not_the_recipe() -> None:
    old = parse_master(fixture_text("amd-master.f8f9b66.yaml"))[SEED_KEY]
    new = parse_master(fixture_text("amd-master.b4cec7f.yaml"))[SEED_KEY]
    bumped = {**old, "image": new["image"]}
    assert recipe_fingerprint(old) == recipe_fingerprint(bumped)
    assert recipe_fingerprint(old) != recipe_fingerprint(new)  # search space changed
    assert recipe_fingerprint(old, "vllm serve --x") != recipe_fingerprint(old, "vllm serve --y")
    assert recipe_fingerprint(old, "") != recipe_fingerprint(old)
    reordered = dict(reversed(list(old.items())))
    assert recipe_fingerprint(reordered) == recipe_fingerprint(old)
    assert len(recipe_fingerprint(old)) == 64


def test_sibling_key_is_the_reference_engine_config() -> None:
    master = parse_master(fixture_text("amd-master.b4cec7f.yaml"))
    assert sibling_key(master, SEED_KEY) == "minimaxm3-fp4-mi355x-atom"
    assert sibling_key(master, "minimaxm3-fp4-mi355x-vllm-mtp") == "minimaxm3-fp4-mi355x-atom-mtp"
    assert sibling_key(master, "minimaxm3-fp4-mi355x-atom") is None
    # Disagg keys name their framework `<engine>-disagg`: no plain-atom sibling, but the disagg one.
    assert sibling_key(master, "minimaxm3-fp4-mi355x-vllm-disagg") is None
    disagg = sibling_key(master, "minimaxm3-fp4-mi355x-vllm-disagg", framework="atom-disagg")
    assert disagg == "minimaxm3-fp4-mi355x-atom-disagg"
    assert sibling_key(master, "minimaxm3-fp4-mi355x-vllm-agentic") is None
    assert sibling_key(master, SEED_KEY, framework="sglang") is None


def test_keys_for_paths_follows_the_launcher_script_names() -> None:
    master = parse_master(fixture_text("amd-master.b4cec7f.yaml"))
    base = "benchmarks/single_node/fixed_seq_len/"
    assert keys_for_paths([base + "minimaxm3_fp4_mi355x_vllm.sh"], master) == {SEED_KEY}
    mtp = keys_for_paths([base + "minimaxm3_fp4_mi355x_vllm_mtp.sh"], master)
    assert mtp == {"minimaxm3-fp4-mi355x-vllm-mtp"}
    atom = keys_for_paths(["./" + base + "minimaxm3_fp4_mi355x_atom.sh"], master)
    assert atom == {"minimaxm3-fp4-mi355x-atom"}
    assert keys_for_paths(["benchmarks/single_node/agentic/minimaxm3_fp4_mi355x_vllm.sh"], master) == {
        "minimaxm3-fp4-mi355x-vllm-agentic"
    }
    assert keys_for_paths(["README.md", base + "nothing_fp4_mi355x_vllm.sh"], master) == set()
    # Legacy untagged script: the launcher runs it only when the tagged one is missing.
    legacy = base + "dsr1_fp4_mi355x.sh"
    assert keys_for_paths([legacy], master) == {"dsr1-fp4-mi355x-sglang"}
    tagged = base + "dsr1_fp4_mi355x_sglang.sh"
    assert keys_for_paths([legacy], master, existing_paths=[legacy, tagged]) == set()
    assert keys_for_paths([legacy], master, existing_paths=[legacy]) == {"dsr1-fp4-mi355x-sglang"}
    assert keys_for_paths([base + "dsr1_fp4_mi355x_mtp.sh"], master) == {"dsr1-fp4-mi355x-sglang-mtp"}


@pytest.mark.parametrize("name", MASTER_FILES)
def test_key_names_and_script_names_agree_with_the_fields(name: str) -> None:
    # Checked on the real files: every key is `<prefix>-<precision>-<hw>-<framework>[-suffix]`,
    # and each single-node key's framework-tagged script maps back to it.
    master = parse_master(fixture_text(name))
    for key, entry in master.items():
        hw = entry["runner"].removeprefix("cluster:").split("-", 1)[0]
        base = f"{entry['model-prefix']}-{entry['precision']}-{hw}-{entry['framework']}"
        assert key == base or key.startswith(base + "-"), key
        if entry.get("multinode"):
            continue
        kinds = set(entry["scenarios"])
        subdir = "agentic" if kinds == {"agentic-coding"} else "fixed_seq_len"
        items = [i for s in entry["scenarios"].values() for i in s[0]["search-space"]]
        modes = {i.get("spec-decoding", "none") for i in items}
        spec = "_mtp" if "mtp" in modes else ""
        script = (
            f"benchmarks/single_node/{subdir}/{entry['model-prefix']}_{entry['precision']}_{hw}"
            f"_{entry['framework']}{spec}.sh"
        )
        assert key in keys_for_paths([script], master), (key, script)


def test_keys_changed_between_the_real_commits() -> None:
    old = fixture_text("amd-master.f8f9b66.yaml")
    new = fixture_text("amd-master.b4cec7f.yaml")
    changed = keys_changed(old, new)
    assert SEED_KEY in changed
    assert "dsr1-fp4-mi355x-sglang" in changed  # its 1k1k scenario was dropped
    assert "dsv4-fp8-mi300x-vllm" in changed  # added
    assert keys_changed(old, old) == set()
    assert keys_changed("", "a: {image: x}\n") == {"a"}


def test_locate_key_found_archived_missing_and_ambiguous() -> None:
    old = fixture_text("amd-master.f8f9b66.yaml")
    head = fixture_text("amd-master.head.yaml")
    archived = fixture_text("amd-minimaxm3-8k1k-master.deprecated.head.yaml")
    before_move = locate_key({".github/configs/amd-master.yaml": old}, SEED_KEY)
    path = ".github/configs/amd-master.yaml"
    assert before_move == KeyLocation(SEED_KEY, "found", path, before_move.reason)
    assert before_move.found
    now = locate_key(
        {"configs/amd-master.yaml": head, "configs/deprecated/amd-minimaxm3-8k1k-master.yaml": archived},
        SEED_KEY,
    )
    assert now.archived and now.path == "configs/deprecated/amd-minimaxm3-8k1k-master.yaml"
    assert "no longer reads" in now.reason
    gone = locate_key({"configs/amd-master.yaml": head, "configs/bad-master.yaml": ": : :"}, "nope-key")
    assert gone.missing and gone.path is None
    assert "configs/amd-master.yaml" in gone.reason and "unreadable" in gone.reason
    with pytest.raises(AmbiguousKeyError):
        locate_key({"configs/amd-master.yaml": old, ".github/configs/amd-master.yaml": old}, SEED_KEY)
    assert is_master_config_path("configs/amd-master.yaml")
    assert is_master_config_path(".github/configs/nvidia-master.yaml")
    assert is_master_config_path("configs/deprecated/amd-minimaxm3-8k1k-master.yaml")
    assert not is_master_config_path("configs/runners.yaml")
