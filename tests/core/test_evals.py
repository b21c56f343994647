"""Eval results: parsing lm-eval files (real bytes) and eval artifacts, and the accuracy verdict."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.core.accuracy import (
    NOT_ENOUGH,
    NOT_WORSE,
    WORSE,
    AccuracyRow,
    RefAccuracy,
    accuracy_notes,
    accuracy_verdict,
    compare_accuracy,
    overall_verdict_line,
    render_accuracy_table,
)
from app.core.artifacts import eval_artifact_name, parse_eval_name, select_eval_artifact
from app.core.artifactzip import safe_json_members
from app.core.evals import EvalFileError, parse_eval_artifact, parse_lm_eval, parse_meta_env
from app.core.gap import compute_gap
from app.core.references import load_reference, shipped_reference
from tests.conftest import FIXTURES
from tests.evals_helpers import SEED_POINT, eval_zip, gsm8k_results, meta_env

REAL = FIXTURES / "lm-eval" / "rwkv7-0.1B-g1.results_2025-03-11T00-18-59.369059.json"
ATOM = load_reference(FIXTURES / "references" / "atom-minimaxm3-mxfp4-mi355x-tp4-8k1k.yaml")


def test_a_real_result_file_parses_with_scores_stderr_and_counts() -> None:
    got = parse_lm_eval(REAL.read_bytes(), REAL.name)
    by = {s.label: s for s in got.scores}
    assert set(by) == {"perplexity,none", "acc,none"}
    acc = by["acc,none"]
    assert acc.task == "lambada_openai" and acc.score == pytest.approx(0.49117019212109453)
    assert acc.stderr == pytest.approx(0.006964891360529504)
    assert (acc.n, acc.n_original, acc.limit, acc.num_fewshot) == (5153, 5153, None, 0)
    assert got.model == "fla-hub/rwkv7-0.1B-g1" and got.lm_eval_version is None


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.pop("results"), "results"),
        (
            lambda d: d["results"]["lambada_openai"].update({"acc,none": "high"}),
            "results.lambada_openai.acc,none",
        ),
        (lambda d: d["results"]["lambada_openai"].update({"acc,none": float("nan")}), "acc,none"),
        (lambda d: d["results"]["lambada_openai"].update({"acc_stderr,none": -1}), "acc_stderr,none"),
        (lambda d: d["n-samples"]["lambada_openai"].update({"effective": -3}), "effective"),
        (lambda d: d["config"].update({"limit": 10}), "n-samples.lambada_openai.effective"),
        (lambda d: d["config"].update({"limit": "all"}), "config.limit"),
        (lambda d: d.update({"results": {"t": {"alias": "t"}}}), "results"),
    ],
)
def test_malformed_result_files_are_refused_with_the_field(
    mutate: Callable[[Any], object], field: str
) -> None:
    doc = json.loads(REAL.read_text())
    mutate(doc)
    with pytest.raises(EvalFileError, match="field") as err:
        parse_lm_eval(json.dumps(doc), "results_x.json")
    assert field in str(err.value)
    with pytest.raises(EvalFileError, match="not valid JSON"):
        parse_lm_eval(b"{", "results_x.json")


def test_na_stderr_is_no_stderr() -> None:
    doc = gsm8k_results(0.95)
    doc["results"]["gsm8k"]["exact_match_stderr,strict-match"] = "N/A"
    scores = {s.filter: s for s in parse_lm_eval(json.dumps(doc), "r.json").scores}
    assert scores["strict-match"].stderr is None and scores["flexible-extract"].stderr is not None


def test_meta_env_as_the_benchmark_script_writes_it() -> None:
    meta = parse_meta_env(json.dumps(meta_env(hw="unknown")))
    assert (meta.framework, meta.model, meta.tp, meta.conc, meta.isl, meta.osl) == (
        "vllm",
        "amd/MiniMax-M3-MXFP4",
        4,
        32,
        8192,
        1024,
    )
    assert meta.hw is None  # the script writes "unknown" when it does not know


def test_eval_artifact_names_follow_the_template() -> None:
    name = eval_artifact_name(SEED_POINT, "mi355x-amds_03")
    assert name == (
        "eval_minimaxm3_8k1k_minimaxm3_8k1k_fp4_vllm_tp4-pp1-dcp1-pcp1-ep1-dpafalse_disagg-false"
        "_spec-none_conc32_mi355x-amds_03"
    )
    assert parse_eval_name(name, SEED_POINT) is not None
    other = {**SEED_POINT, "conc": 64}
    artifacts = [
        {"id": 1, "name": name.replace("conc32", "conc64")},
        {"id": 2, "name": "eval_server_logs_" + name.split("_", 3)[3]},
        {"id": 3, "name": name.replace("eval_", "bmk_", 1)},
        {"id": 4, "name": name, "created_at": "2026-12-01T09:00:00Z"},
        {"id": 5, "name": name, "created_at": "2026-12-01T10:00:00Z"},  # a re-run: newest wins
    ]
    assert select_eval_artifact(artifacts, SEED_POINT).artifact == artifacts[4]
    assert select_eval_artifact(artifacts, other).artifact == artifacts[0]
    missing = select_eval_artifact(artifacts[1:3], SEED_POINT)
    assert not missing.found and "no artifact eval_minimaxm3_8k1k_" in missing.reason


def test_an_eval_artifact_parses_or_is_refused_whole() -> None:
    good = parse_eval_artifact(safe_json_members(eval_zip(gsm8k_results(0.95), meta_env())), SEED_POINT)
    assert good.meta.conc == 32 and {s.filter for s in good.result.scores} == {
        "strict-match",
        "flexible-extract",
    }
    cases = [
        (eval_zip(gsm8k_results(0.95), None), "meta_env.json: field '<document>': missing"),
        (eval_zip(None, meta_env()), "no lm-eval result file"),
        (eval_zip(gsm8k_results(0.95), meta_env(conc=64)), "conc is 64 but the job's point has 32"),
        (eval_zip(gsm8k_results(0.95), meta_env(framework="sglang")), "framework is 'sglang'"),
        (
            eval_zip(gsm8k_results(0.95), meta_env(), {"results_2026-12-01T10-00-00.json": "{}"}),
            "2 result files",
        ),
        (eval_zip({"results": {}}, meta_env()), "missing or empty"),
    ]
    for blob, message in cases:
        with pytest.raises(EvalFileError) as err:
            parse_eval_artifact(safe_json_members(blob), SEED_POINT)
        assert message in str(err.value)


def test_batched_evals_pick_the_points_own_conc_file() -> None:
    blob = eval_zip(
        None,
        meta_env(),
        {
            "results_a_conc16.json": json.dumps(gsm8k_results(0.5)),
            "results_a_conc32.json": json.dumps(gsm8k_results(0.95)),
        },
    )
    got = parse_eval_artifact(safe_json_members(blob), SEED_POINT)
    assert got.result.file_name.endswith("_conc32.json") and got.result.scores[0].score == 0.95


# ----------------------------------------------------------------------------- the verdict


def _rows(results: dict[str, Any]) -> list[AccuracyRow]:
    scores = parse_lm_eval(json.dumps(results), "results_x.json").scores
    return compare_accuracy(scores, ATOM.accuracy)


def test_seed_case_095_at_limit_100_is_not_worse_with_a_wide_interval() -> None:
    rows = _rows(gsm8k_results(0.95))
    flex = next(r for r in rows if r.filter == "flexible-extract")
    assert flex.reference == 0.9363 and flex.verdict == NOT_WORSE
    assert flex.stderr == pytest.approx(math.sqrt(0.95 * 0.05 / 99))  # 0.0219
    table = render_accuracy_table(rows)
    assert (
        "| gsm8k | flexible-extract | — | 0.9500 ± 0.0219 (n=100, limit 100) | 0.9363 | +1.37 pts "
        "| not worse |" in table
    )
    notes = " ".join(accuracy_notes(rows))
    assert "gsm8k at limit 100 (n=100) has a wide interval: ±4.3 points at 95%" in notes
    assert "not that the recipe is more accurate" in notes


def test_080_is_worse_and_a_file_without_stderr_is_not_enough_data() -> None:
    assert {r.verdict for r in _rows(gsm8k_results(0.80))} == {WORSE}
    assert {r.verdict for r in _rows(gsm8k_results(0.95, stderr=False))} == {NOT_ENOUGH}
    assert "no standard error or sample count" in " ".join(
        accuracy_notes(_rows(gsm8k_results(0.9, stderr=False)))
    )


def test_the_verdict_uses_the_stderr_of_the_difference_or_the_tolerance() -> None:
    # 0.92 vs 0.9363: 1.6 points short; stderr 0.027 at n=100 covers it, 0.0075 at n=1319 does not
    assert accuracy_verdict(0.92, 0.0271, 100, 0.9363)[0] == NOT_WORSE
    assert accuracy_verdict(0.92, 0.0075, 1319, 0.9363)[0] == WORSE
    assert accuracy_verdict(0.92, 0.0075, 1319, 0.9363, tolerance=0.02)[0] == NOT_WORSE
    assert accuracy_verdict(0.92, 0.0075, 1319, 0.9363, reference_stderr=0.015)[0] == NOT_WORSE
    assert accuracy_verdict(0.92, None, 1319, 0.9363)[0] == NOT_ENOUGH
    assert accuracy_verdict(0.92, 0.01, None, 0.9363)[0] == NOT_ENOUGH


def test_the_overall_line_covers_latency_and_accuracy() -> None:
    latency = compute_gap({32: [17.9], 64: [25.13]}, {32: 16.74, 64: 25.00})
    assert overall_verdict_line(latency, _rows(gsm8k_results(0.95))) == (
        "latency: behind at conc 32, matched at conc 64; accuracy: not worse on gsm8k"
    )
    assert overall_verdict_line(latency, _rows(gsm8k_results(0.80))).endswith("accuracy: worse on gsm8k")
    assert overall_verdict_line([], []) == "latency: no verdict yet; accuracy: no eval result yet"


def test_reference_tables_carry_accuracy_with_provenance() -> None:
    shipped = shipped_reference("atom-minimaxm3-mxfp4-mi355x-tp4-8k1k")
    assert shipped is not None
    assert [(a.task, a.filter, a.score, a.num_fewshot) for a in shipped.accuracy] == [
        ("gsm8k", "flexible-extract", 0.9363, 5),
        ("gsm8k", "strict-match", 0.9371, 5),
    ]
    assert shipped.accuracy_source and "ROCm/ATOM" in shipped.accuracy_source
    # the transcribed fixture's short form reads the same
    assert [(a.filter, a.score) for a in ATOM.accuracy] == [
        ("flexible-extract", 0.9363),
        ("strict-match", 0.9371),
    ]
    assert [RefAccuracy("gsm8k", "strict-match", 0.9371, num_fewshot=5).filter] == ["strict-match"]


def test_gap_cli_reads_eval_files_and_artifact_zips(tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from app.cli.report import gap_command

    app = typer.Typer()
    app.command("gap")(gap_command)
    app.command("noop")(lambda: None)
    ref = str(FIXTURES / "references" / "atom-minimaxm3-mxfp4-mi355x-tp4-8k1k.yaml")
    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / "results_2026-12-01T09-00-00.json").write_text(json.dumps(gsm8k_results(0.95)))
    (loose / "meta_env.json").write_text(json.dumps(meta_env()))
    got = CliRunner().invoke(app, ["gap", "--results", str(loose), "--reference", ref])
    assert got.exit_code == 0, got.output
    assert "| gsm8k | flexible-extract | 32 | 0.9500 ± 0.0219 (n=100, limit 100) | 0.9363 |" in got.output
    assert "wide interval" in got.output
    assert got.output.rstrip().endswith("Verdict: latency: no verdict yet; accuracy: not worse on gsm8k")
    zipped = tmp_path / "zipped"
    zipped.mkdir()
    (zipped / "eval_x.zip").write_bytes(eval_zip(gsm8k_results(0.80), meta_env()))
    got = CliRunner().invoke(app, ["gap", "--results", str(zipped), "--reference", ref])
    assert got.exit_code == 0 and "accuracy: worse on gsm8k" in got.output
    (zipped / "eval_y.zip").write_bytes(eval_zip(None, meta_env()))
    got = CliRunner().invoke(app, ["gap", "--results", str(zipped), "--reference", ref])
    assert got.exit_code == 2 and "no lm-eval result file" in got.output
