"""Eval planning: the generator's selection on every real single-node key, and the modes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.core.recipes import EmptyPlanError, expand_points, parse_master
from app.core.recipes.evals import (
    EvalMode,
    EvalModeError,
    cli_flags,
    default_selection,
    eval_mode_from_changelog,
    eval_mode_from_flags,
    parse_eval_mode,
    plan_evals,
    plan_with_evals,
)
from tests.recipe_helpers import (
    AMD_FILES,
    SEED_KEY,
    fixture_text,
    is_single_node_fixed,
    reference_plan,
)


def _keys(name: str) -> list[tuple[str, dict[str, Any]]]:
    master = parse_master(fixture_text(name))
    return [(k, e) for k, e in master.items() if is_single_node_fixed(e)]


# The AMD files: the NVIDIA excerpts hold no single-node fixed-seq-len key.
@pytest.mark.parametrize("name", AMD_FILES)
@pytest.mark.parametrize("mode", ["default", "none", "only", "all"])
def test_every_single_node_key_marks_the_documented_selection(name: str, mode: str) -> None:
    master = parse_master(fixture_text(name))
    checked = with_evals = 0
    for key, entry in _keys(name):
        want = reference_plan(key, entry, mode)
        if mode == "only" and not want:
            with pytest.raises(EmptyPlanError, match="no point of this plan runs an eval"):
                plan_with_evals(master, key, mode=EvalMode(mode))
            continue
        got = plan_with_evals(master, key, mode=EvalMode(mode))
        assert got == want, key
        checked += 1
        with_evals += any(p["run-eval"] for p in got)
    assert checked >= 10
    if mode != "none":
        assert with_evals >= 5  # the fixtures hold many 8k1k keys
    else:
        assert with_evals == 0


def test_seed_key_evaluates_the_median_and_highest_conc_of_16_and_up() -> None:
    master = parse_master(fixture_text("amd-master.b4cec7f.yaml"))
    points = plan_with_evals(master, SEED_KEY)
    # 1..512: concurrencies below 16 are dropped first, so 16..512 -> median 128, highest 512
    assert [p["conc"] for p in points if p["run-eval"]] == [128, 512]
    assert not any("eval-only" in p for p in points)  # the default mode prints no eval-only field
    only = plan_with_evals(master, SEED_KEY, mode=EvalMode.ONLY)
    assert [(p["conc"], p["eval-only"]) for p in only] == [(128, True), (512, True)]
    # The marks are made after the conc filter, as the repo's `test-config --conc 32 64` makes them.
    assert [p["run-eval"] for p in plan_with_evals(master, SEED_KEY, conc=[32, 64])] == [False, True]
    assert [p["conc"] for p in plan_with_evals(master, SEED_KEY, conc=[64], mode=EvalMode.ONLY)] == [64]
    with pytest.raises(EmptyPlanError, match="evals=all"):
        plan_with_evals(master, SEED_KEY, conc=[8], mode=EvalMode.ONLY)  # below 16: no eval


def test_1k1k_never_runs_evals_not_even_under_all_evals() -> None:
    master = parse_master(fixture_text("amd-master.f8f9b66.yaml"))
    one_k = plan_with_evals(master, SEED_KEY, seq="1k1k")
    assert one_k and not any(p["run-eval"] for p in one_k)
    with pytest.raises(EmptyPlanError):
        plan_with_evals(master, SEED_KEY, seq="1k1k", mode=EvalMode.ALL)
    every = plan_with_evals(master, SEED_KEY, mode=EvalMode.ALL)
    assert every and all(p["isl"] == 8192 and p["run-eval"] and p["eval-only"] for p in every)


def test_groups_span_tps_split_by_dp_attn_and_mark_every_row_at_a_chosen_conc() -> None:
    # f8f9b66's 8k1k space: tp4, tp8, tp8+ep8 (dp-attn false) and tp8+ep8+dp-attn items.
    master = parse_master(fixture_text("amd-master.f8f9b66.yaml"))
    marked = [
        (p["tp"], p["ep"], p["dp-attn"], p["conc"])
        for p in plan_with_evals(master, SEED_KEY, seq="8k1k")
        if p["run-eval"]
    ]
    # dp-attn false: one group across tp4 and tp8 (16..512 -> 128 and 512), both tp4 and tp8ep8
    # rows at 128 marked; dp-attn true: its own group (256 and 512)
    assert marked == [
        (8, 8, False, 128),
        (8, 8, False, 512),
        (4, 1, False, 128),
        (8, 8, True, 256),
        (8, 8, True, 512),
    ]


def test_multinode_and_agentic_rows_follow_their_own_rules() -> None:
    base = {"model": "m", "model-prefix": "p", "runner": "mi355x", "framework": "sglang", "precision": "fp8"}
    topo = {**base, "isl": 8192, "osl": 1024, "prefill": {"tp": 4}, "decode": {"tp": 8}}
    agentic = {**base, "scenario-type": "agentic-coding"}
    rows = [
        {**topo, "conc": [16, 32]},
        {**topo, "conc": [64, 128]},  # same topology: only the row with the highest conc
        {**topo, "decode": {"tp": 16}, "conc": [4, 8]},  # every conc below 16: no eval
        {**topo, "isl": 1024, "conc": [512]},  # multi-node evals are 8k1k only
        {**agentic, "tp": 8, "conc": 4},
        {**agentic, "tp": 8, "conc": 16},
        {**agentic, "tp": 4, "conc": 8},  # same group (no TP in it); no 16 floor for agentic
    ]
    assert default_selection(rows) == [None, 128, None, None, None, None, None]  # agentic: opt-in
    planned = plan_evals(rows, EvalMode.DEFAULT)
    assert [p.get("eval-conc") for p in planned] == [None, 128, None, None, None, None, None]
    only = plan_evals(rows, EvalMode.ONLY)
    assert [(r["conc"], r.get("eval-conc")) for r in only] == [([64, 128], 128), (16, None)]
    every = plan_evals(rows, EvalMode.ALL)
    # one topology merged into one row holding every conc, marked eval-all-concs
    assert every[0]["conc"] == [16, 32, 64, 128] and every[0]["eval-all-concs"] is True
    assert "eval-conc" not in every[0] and all(p["eval-only"] for p in every)
    assert [r["conc"] for r in every] == [[16, 32, 64, 128], [4, 8], 4, 16, 8]


def test_modes_from_flags_changelog_and_command() -> None:
    assert eval_mode_from_flags() is EvalMode.DEFAULT
    assert eval_mode_from_flags(no_evals=True) is EvalMode.NONE
    assert eval_mode_from_flags(evals_only=True) is EvalMode.ONLY
    assert eval_mode_from_flags(all_evals=True) is EvalMode.ALL
    assert eval_mode_from_flags(evals_only=True, all_evals=True) is EvalMode.ALL
    with pytest.raises(EvalModeError, match="--no-evals cannot be combined with --all-evals"):
        eval_mode_from_flags(no_evals=True, all_evals=True)
    assert eval_mode_from_changelog({"config-keys": ["k"]}) is EvalMode.DEFAULT
    assert eval_mode_from_changelog({"evals-only": True}) is EvalMode.ONLY
    assert eval_mode_from_changelog({"all-evals": True}) is EvalMode.ALL  # implies eval-only
    assert eval_mode_from_changelog({"no-evals": True}) is EvalMode.NONE
    with pytest.raises(EvalModeError, match="true or false"):
        eval_mode_from_changelog({"evals-only": "yes"})
    # every entry of the real perf-changelog tail is a default-mode entry (none sets a flag)
    from app.core.recipes.yamlutil import load_yaml

    entries = load_yaml(fixture_text("perf-changelog.tail.yaml"), "perf-changelog")
    assert len(entries) == 35 and {eval_mode_from_changelog(e) for e in entries} == {EvalMode.DEFAULT}
    assert [parse_eval_mode(t) for t in ("default", "none", "only", "ALL", "evals-only")] == [
        EvalMode.DEFAULT,
        EvalMode.NONE,
        EvalMode.ONLY,
        EvalMode.ALL,
        EvalMode.ONLY,
    ]
    with pytest.raises(EvalModeError, match="evals=default, none, only or all"):
        parse_eval_mode("some")
    assert [cli_flags(m) for m in EvalMode] == ["", "--no-evals", "--evals-only", "--evals-only --all-evals"]


def test_cli_plan_takes_the_three_flags() -> None:
    import typer
    from typer.testing import CliRunner

    from app.cli.recipe import recipe_app

    cli = typer.Typer()
    cli.add_typer(recipe_app, name="recipe")

    path = "tests/fixtures/inferencex/amd-master.b4cec7f.yaml"
    runner = CliRunner()
    got = runner.invoke(cli, ["recipe", "plan", path, SEED_KEY, "--json", "--evals-only"])
    assert got.exit_code == 0, got.output
    assert [p["conc"] for p in json.loads(got.stdout)] == [128, 512]
    got = runner.invoke(cli, ["recipe", "plan", path, SEED_KEY, "--no-evals", "--all-evals"])
    assert got.exit_code == 2 and "cannot be combined" in got.output
    got = runner.invoke(cli, ["recipe", "plan", path, SEED_KEY, "--all-evals"])
    assert got.exit_code == 0 and got.stdout.count("eval only") == 10


def test_plan_dicts_round_trip_through_the_selection_unchanged() -> None:
    master = parse_master(fixture_text("amd-master.b4cec7f.yaml"))
    rows = [p.to_json() for p in expand_points(master, SEED_KEY)]
    planned = plan_evals(rows)
    assert [{k: v for k, v in p.items() if k not in ("run-eval", "eval-only")} for p in planned] == rows


@pytest.mark.parametrize("name", AMD_FILES)
def test_multinode_and_agentic_keys_of_the_fixtures_follow_the_generators_rules(name: str) -> None:
    """Default mode on every multi-node and agentic key of the AMD files: agentic rows never run
    an eval; each multi-node 8k1k topology evaluates its highest conc >= 16 once."""
    master = parse_master(fixture_text(name))
    seen = 0
    for key, entry in master.items():
        if is_single_node_fixed(entry):
            continue
        rows = plan_with_evals(master, key)
        seen += 1
        assert not any(r["run-eval"] for r in rows if r.get("scenario-type") == "agentic-coding"), key
        topologies: dict[str, list[dict[str, Any]]] = {}
        skip = ("conc", "result-name", "exp-name", "run-eval", "eval-conc")
        for r in rows:
            if "prefill" not in r or r.get("scenario-type") == "agentic-coding":
                continue
            if (r["isl"], r["osl"]) != (8192, 1024):
                assert not r["run-eval"], key
                continue
            ident = json.dumps({k: v for k, v in r.items() if k not in skip}, sort_keys=True)
            topologies.setdefault(ident, []).append(r)
        for members in topologies.values():
            eligible = [c for r in members for c in r["conc"] if c >= 16]
            marked = [r for r in members if r["run-eval"]]
            assert len(marked) == (1 if eligible else 0), key
            if eligible:
                assert marked[0]["eval-conc"] == max(eligible), key
    assert seen >= 1, name  # every AMD master file has multi-node or agentic keys (the test is not vacuous)
