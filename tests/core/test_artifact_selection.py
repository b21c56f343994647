"""Choosing a point's result and eval artifacts: the whole selection (artifact, parsed name, reason,
what was ignored, what was logged) for every way a run's artifact list can look (issue 30)."""

from __future__ import annotations

from typing import Any

from structlog.testing import capture_logs

from app.core.artifacts import (
    BmkName,
    EvalName,
    EvalSelection,
    Selection,
    bmk_artifact_name,
    eval_artifact_name,
    eval_head,
    eval_stems,
    is_agentic,
    is_multinode,
    parse_bmk_name,
    result_filename,
    result_member_names,
    select_bmk_artifact,
    select_eval_artifact,
)

POINT: dict[str, Any] = {"exp-name": "mm3_8k1k", "precision": "fp4", "framework": "vllm", "tp": 4, "conc": 8}
STEM = "mm3_8k1k_fp4_vllm_tp4-pp1-dcp1-pcp1-ep1-dpafalse_disagg-false_spec-none_conc8"
AGENTIC: dict[str, Any] = {**POINT, "scenario-type": "agentic-coding", "pp": 2}
AGENTIC_STEM = STEM.replace("-pp1-", "-pp2-")
MULTI: dict[str, Any] = {
    **POINT,
    "prefill": {"tp": 4, "num-worker": 1},
    "decode": {"tp": 8, "num-worker": 2},
    "conc": [4, 8],
}
MULTI_STEM = (
    "mm3_8k1k_fp4_vllm_prefill-tp4-pp1-dcp1-pcp1-ep1-dpfalse-nw1_decode-tp8-pp1-dcp1-pcp1-ep1-dpfalse-nw2"
    "_disagg-false_spec-none_conc4x8"
)
FP = "0123456789abcdef"


def art(name: str, id_: int | None = 1, created: str | None = None, **kw: Any) -> dict[str, Any]:
    a: dict[str, Any] = {"name": name, **kw}
    if id_ is not None:
        a["id"] = id_
    if created is not None:
        a["created_at"] = created
    return a


# ------------------------------------------------------------------------------------ families


def test_what_makes_a_point_multinode_or_agentic() -> None:
    assert is_multinode({"prefill": {}})
    assert is_multinode({"prefill": {}, "multinode": False})
    assert is_multinode({"multinode": True})
    assert not is_multinode({"multinode": False})
    assert not is_multinode({})
    assert not is_multinode({"decode": {}})
    assert is_agentic({"scenario-type": "agentic-coding"})
    assert not is_agentic({"scenario-type": "fixed-seq-len"})
    assert not is_agentic({})


def test_result_member_names_per_family() -> None:
    assert result_member_names(POINT, "RF") == ("agg_RF.json", "")
    assert result_member_names(AGENTIC, "RF") == ("RF.json", "")
    assert result_member_names(MULTI, "RF") == ("agg_RF_", ".json")
    assert result_member_names({**MULTI, "scenario-type": "agentic-coding"}, "RF") == ("RF_conc", ".json")


def test_names_with_and_without_a_recipe_fingerprint() -> None:
    assert result_filename(POINT, "node-a") == f"{STEM}_node-a"
    assert result_filename(POINT, "node-a", FP + "ffff") == f"{STEM}_node-a_recipe-{FP}"
    assert bmk_artifact_name(POINT, "node-a") == f"bmk_{STEM}_node-a"
    assert bmk_artifact_name(AGENTIC, "node-a", FP + "ff") == f"bmk_agentic_{AGENTIC_STEM}_node-a_recipe-{FP}"
    assert eval_artifact_name(POINT, "node-a") == f"eval_mm3_8k1k_{STEM}_node-a"
    assert eval_artifact_name(MULTI, "n1", FP) == f"eval_{MULTI_STEM}_n1_recipe-{FP}"


def test_members_are_read_by_their_base_name() -> None:
    multi = BmkName("bmk_RF", "RF", "S", "n", None, MULTI)
    names = [
        "out/dir x/agg_RF_conc8.json",  # a blank in a folder name
        "a/b/agg_RF_conc4.json",
        "agg_RF_conc2.json",
        "agg_RF_conc2.json.bak",
        "RF_conc2.json",
        "power_audit/raw_RF_conc2.json",
    ]
    assert multi.members(names) == [
        "a/b/agg_RF_conc4.json",
        "agg_RF_conc2.json",
        "out/dir x/agg_RF_conc8.json",
    ]
    single = BmkName("bmk_RF", "RF", "S", "n", None, POINT)
    assert single.member == "agg_RF.json"
    assert single.members(["x/agg_RF.json", "agg_RF.json.1", "agg_RF_conc1.json", "d/RF.json"]) == [
        "x/agg_RF.json"
    ]
    assert BmkName("bmk_RF", "RF", "S", "n", None).member == "agg_RF.json"  # no point: single-node


def test_a_name_must_start_with_the_prefix_and_end_in_a_bare_node() -> None:
    assert parse_bmk_name(f"abcd{STEM}_node-a", STEM) is None  # as long as "bmk_", but not it
    assert parse_bmk_name(f"bmk_agentic_{STEM}_node-a", STEM) is None
    assert parse_bmk_name(f"bmk_{STEM}_x_conc64_node-a", STEM) is None  # a longer stem's
    assert parse_bmk_name(f"bmk_{STEM}_x_CONC64_node-a", STEM) == BmkName(
        f"bmk_{STEM}_x_CONC64_node-a", f"{STEM}_x_CONC64_node-a", STEM, "x_CONC64_node-a", None
    )


def test_eval_stems_add_the_default_parallelism_only_for_single_node_agentic() -> None:
    assert eval_stems({**POINT, "pp": 2}) == [STEM.replace("-pp1-", "-pp2-")]
    assert eval_stems({**AGENTIC, "pp": 1}) == [STEM]
    odd = {**AGENTIC, "pp": 2, "dcp-size": 2, "pcp-size": 2}
    assert eval_stems(odd) == [STEM.replace("-pp1-dcp1-pcp1-", "-pp2-dcp2-pcp2-"), STEM]
    assert eval_stems({**MULTI, "scenario-type": "agentic-coding"}) == [MULTI_STEM]


# ---------------------------------------------------------------------------------- bmk_ artifact


def test_the_points_artifact_among_everything_else_whole() -> None:
    mine = art(f"bmk_{STEM}_mi355x-amds_03_recipe-{FP}", 7, "2026-07-01T10:00:00Z")
    arts = [
        art(f"server_logs_{STEM}_mi355x-amds_03", 2),
        mine,
        art(f"bmk_{STEM.replace('conc8', 'conc16')}_mi355x-amds_03", 3),
        art("results_all", 4),
        {"id": 5},  # no name at all
    ]
    with capture_logs() as logs:
        sel = select_bmk_artifact(arts, POINT)
    name = BmkName(mine["name"], f"{STEM}_mi355x-amds_03_recipe-{FP}", STEM, "mi355x-amds_03", FP, POINT)
    assert sel == Selection(
        mine,
        name,
        f"artifact {mine['name']} (node mi355x-amds_03)",
        (arts[0]["name"], arts[2]["name"], "results_all", ""),
    )
    assert sel.found
    assert logs == [
        {"event": "bmk_artifact_chosen", "log_level": "info", "stem": STEM, "artifact": mine["name"],
         "node": "mi355x-amds_03"}
    ]  # fmt: skip


def test_no_artifact_names_the_runs_bmk_artifacts_sorted() -> None:
    arts = [
        art(f"bmk_{STEM}_node-b", 1),
        art(f"bmk_{STEM}_node-a", 2),
        art(f"eval_x_{STEM}_node-a", 3),
        art("bmk_agentic_other_conc1_n", 4),
    ]
    with capture_logs() as logs:
        sel = select_bmk_artifact(arts, POINT, nodes=["node-c"])
    names = tuple(a["name"] for a in arts)
    assert sel == Selection(
        None,
        None,
        f"no artifact bmk_{STEM}_<node>[_recipe-<16 hex>] in the run (its bmk_ artifacts: "
        f"bmk_agentic_other_conc1_n, bmk_{STEM}_node-a, bmk_{STEM}_node-b)",
        names,
    )
    assert not sel.found
    assert logs == [{"event": "bmk_artifact_missing", "log_level": "info", "stem": STEM, "artifacts": 4}]


def test_no_bmk_artifact_at_all_says_none() -> None:
    sel = select_bmk_artifact([art("results_all")], AGENTIC)
    assert sel.reason == (
        f"no artifact bmk_agentic_{AGENTIC_STEM}_<node>[_recipe-<16 hex>] in the run"
        " (its bmk_ artifacts: none)"
    )
    assert select_bmk_artifact([], POINT).reason.endswith("(its bmk_ artifacts: none)")


def test_the_allowed_nodes_narrow_the_choice() -> None:
    a, b = art(f"bmk_{STEM}_node-a", 1, "2026-07-02"), art(f"bmk_{STEM}_node-b", 2, "2026-07-01")
    sel = select_bmk_artifact([a, b], POINT, nodes=("node-b",))
    assert sel.artifact is b
    assert sel.ignored == (a["name"],)
    assert sel.reason == f"artifact {b['name']} (node node-b)"
    assert select_bmk_artifact([a, b], POINT).artifact is a


def test_expired_uploads_are_skipped_and_all_expired_is_said() -> None:
    old = art(f"bmk_{STEM}_node-a", 1, "2026-07-01")
    new = art(f"bmk_{STEM}_node-b", 2, "2026-07-02", expired=True)
    sel = select_bmk_artifact([old, new], POINT)
    assert sel.artifact is old
    with capture_logs() as logs:
        gone = select_bmk_artifact([{**new, "id": 3}, {**old, "expired": True}, art("x", 9)], POINT)
    assert gone == Selection(
        None,
        BmkName(new["name"], f"{STEM}_node-b", STEM, "node-b", None, POINT),
        f"artifact {new['name']} has expired",
        ("x",),
    )
    assert logs == []


def test_the_newest_upload_wins_by_time_then_id() -> None:
    name = f"bmk_{STEM}_node-a"
    early, late = art(name, 9, "2026-07-01T00:00:00Z"), art(name, 1, "2026-07-02T00:00:00Z")
    assert select_bmk_artifact([early, late], POINT).artifact is late
    assert select_bmk_artifact([late, early], POINT).artifact is late
    low, high = art(name, 1, "2026-07-01"), art(name, 2, "2026-07-01")
    assert select_bmk_artifact([low, high], POINT).artifact is high
    assert select_bmk_artifact([high, low], POINT).artifact is high
    undated = art(name, 50)
    assert select_bmk_artifact([undated, early], POINT).artifact is early
    assert select_bmk_artifact([early, undated], POINT).artifact is early
    one, no_id = art(name, 1, "2026-07-01"), art(name, None, "2026-07-01")
    assert select_bmk_artifact([no_id, one], POINT).artifact is one  # no id counts as 0
    assert select_bmk_artifact([one, no_id], POINT).artifact is one
    zero = art(name, 0, "2026-07-01")
    assert select_bmk_artifact([zero, no_id], POINT).artifact is zero  # equal keys: listed order
    assert select_bmk_artifact([no_id, zero], POINT).artifact is no_id


def test_two_nodes_uploading_one_point_is_logged() -> None:
    a, b = art(f"bmk_{STEM}_node-a", 1, "2026-07-01"), art(f"bmk_{STEM}_node-b", 2, "2026-07-02")
    with capture_logs() as logs:
        sel = select_bmk_artifact([a, b], POINT)
    assert sel.artifact is b
    assert logs == [
        {"event": "bmk_artifact_several", "log_level": "info", "stem": STEM, "chosen": b["name"], "count": 2},
        {"event": "bmk_artifact_chosen", "log_level": "info", "stem": STEM, "artifact": b["name"],
         "node": "node-b"},
    ]  # fmt: skip
    with capture_logs() as logs:
        select_bmk_artifact([a, {**a, "id": 5}], POINT)
    assert [e["event"] for e in logs] == ["bmk_artifact_chosen"]  # one name twice: a re-run, not several


# --------------------------------------------------------------------------------- eval_ artifact


def test_the_points_eval_artifact_whole() -> None:
    mine = art(eval_artifact_name(POINT, "node-a", FP + "ff"), 4, "2026-07-01")
    arts = [art(f"bmk_{STEM}_node-a", 1), art(f"eval_server_logs_{STEM}_node-a", 2), mine]
    with capture_logs() as logs:
        sel = select_eval_artifact(arts, POINT)
    assert sel == EvalSelection(
        mine,
        EvalName(mine["name"], f"{STEM}_node-a_recipe-{FP}", STEM, "node-a", FP),
        f"artifact {mine['name']} (node node-a)",
    )
    assert sel.found
    assert logs == [
        {"event": "eval_artifact_chosen", "log_level": "info", "artifact": mine["name"], "node": "node-a"}
    ]


def test_a_multinode_eval_artifact_has_no_exp_name() -> None:
    assert eval_head(MULTI) == "eval_"
    assert eval_head(POINT) == "eval_mm3_8k1k_"
    mine = art(f"eval_{MULTI_STEM}_gb200-nv_0", 1)
    sel = select_eval_artifact([art(f"eval_mm3_8k1k_{MULTI_STEM}_gb200-nv_0", 2), mine], MULTI)
    assert sel.artifact is mine
    assert sel.name == EvalName(mine["name"], f"{MULTI_STEM}_gb200-nv_0", MULTI_STEM, "gb200-nv_0", None)


def test_an_agentic_eval_may_carry_the_default_parallelism_stem() -> None:
    default_stem = AGENTIC_STEM.replace("-pp2-", "-pp1-")
    mine = art(f"eval_mm3_8k1k_{default_stem}_node-a", 1)
    sel = select_eval_artifact([mine], AGENTIC)
    assert sel.name == EvalName(mine["name"], f"{default_stem}_node-a", default_stem, "node-a", None)
    own = art(f"eval_mm3_8k1k_{AGENTIC_STEM}_node-b", 2)
    assert select_eval_artifact([own], AGENTIC).name == EvalName(
        own["name"], f"{AGENTIC_STEM}_node-b", AGENTIC_STEM, "node-b", None
    )


def test_no_eval_artifact_names_the_runs_evals_but_not_their_logs() -> None:
    arts = [
        art("eval_zz_other_conc1_node-a", 1),
        art(f"eval_server_logs_{STEM}_node-a", 2),
        art(f"eval_gpu_metrics_{STEM}_node-a", 3),
        art(f"bmk_{STEM}_node-a", 4),
        art("eval_aa_other_conc1_node-a", 5),
        {"id": 6},
    ]
    with capture_logs() as logs:
        sel = select_eval_artifact(arts, POINT)
    assert sel == EvalSelection(
        None,
        None,
        f"no artifact eval_mm3_8k1k_{STEM}_<node>[_recipe-<16 hex>] in the run "
        "(its eval_ artifacts: eval_aa_other_conc1_node-a, eval_zz_other_conc1_node-a)",
    )
    assert not sel.found
    assert logs == [{"event": "eval_artifact_missing", "log_level": "info", "stem": STEM, "artifacts": 6}]
    assert select_eval_artifact([], POINT).reason.endswith("(its eval_ artifacts: none)")


def test_eval_uploads_expired_newest_and_undated() -> None:
    name = f"eval_mm3_8k1k_{STEM}_node-a"
    old, new = art(name, 1, "2026-07-01"), art(name, 2, "2026-07-02", expired=True)
    assert select_eval_artifact([new, old], POINT).artifact is old
    other = art(f"eval_mm3_8k1k_{STEM}_node-b", 3, "2026-07-03", expired=True)
    with capture_logs() as logs:
        gone = select_eval_artifact([other, new], POINT)
    assert gone == EvalSelection(
        None,
        EvalName(other["name"], f"{STEM}_node-b", STEM, "node-b", None),
        f"artifact {other['name']} has expired",
    )
    assert logs == []
    low, high, undated = art(name, 1, "2026-07-01"), art(name, 2, "2026-07-01"), art(name, 99)
    assert select_eval_artifact([low, high, undated], POINT).artifact is high
    assert select_eval_artifact([undated, high, low], POINT).artifact is high
    one, no_id = art(name, 1, "2026-07-01"), art(name, None, "2026-07-01")
    assert select_eval_artifact([no_id, one], POINT).artifact is one  # no id counts as 0
    assert select_eval_artifact([one, no_id], POINT).artifact is one
    zero = art(name, 0, "2026-07-01")
    assert select_eval_artifact([zero, no_id], POINT).artifact is zero
    assert select_eval_artifact([no_id, zero], POINT).artifact is no_id
