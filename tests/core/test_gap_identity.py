"""`sweepbot gap` refuses results measured on another model, TP or ISL/OSL than the reference
table's, naming the mismatch (it compared GLM-4.7 1k1k with MiniMax-M3 8k1k: "+590% behind")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from app.core.gap import RunIdentity, identity_mismatch, run_identity, same_model
from app.core.references import load_reference

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "app/core/references/atom-minimaxm3-mxfp4-mi355x-tp4-8k1k.yaml"
GLM = ROOT / "tests/fixtures/vllm-bench"  # zai-org/GLM-4.7, 1024 in / 1024 out (its README)


def _cli() -> typer.Typer:
    from app.cli.report import gap_command

    app = typer.Typer()
    app.command("gap")(gap_command)
    app.command("noop")(lambda: None)
    return app


def _gap(results: Path) -> tuple[int, str]:
    out = CliRunner().invoke(_cli(), ["gap", "--results", str(results), "--reference", str(SHIPPED)])
    return out.exit_code, out.output


def test_glm_1k1k_against_minimax_8k1k_is_refused_naming_the_model() -> None:
    code, output = _gap(GLM)
    assert code == 2, output
    assert "zai-org/GLM-4.7" in output and "amd/MiniMax-M3-MXFP4" in output
    assert "behind" not in output and "%" not in output


def test_the_same_files_renamed_to_the_model_are_refused_on_their_input_lengths(tmp_path: Path) -> None:
    results = tmp_path / "r"
    shutil.copytree(GLM, results, ignore=shutil.ignore_patterns("*.md"))
    for path in results.glob("*.json"):
        doc = json.loads(path.read_text())
        doc["model_id"] = "amd/MiniMax-M3-MXFP4"
        path.write_text(json.dumps(doc))
    code, output = _gap(results)
    assert code == 2, output
    assert "1024 input tokens per request" in output and "ISL 8192 / OSL 1024" in output


@pytest.mark.parametrize(
    ("run", "names"),
    [
        (RunIdentity("a.json", tp=8), "TP8"),
        (RunIdentity("a.json", isl=1024, osl=1024), "ISL 1024 / OSL 1024"),
        (RunIdentity("a.json", isl=8192, osl=128), "OSL 128"),
        (RunIdentity("a.json", mean_output=2000.0), "2000 output tokens"),
        (RunIdentity("a.json", model="MiniMaxAI/MiniMax-M2.5"), "MiniMax-M2.5"),
    ],
)
def test_each_kind_of_mismatch_is_named(run: RunIdentity, names: str) -> None:
    why = identity_mismatch(load_reference(SHIPPED), run)
    assert why is not None and names in why and "a.json" in why


def test_a_run_of_the_reference_workload_is_compared() -> None:
    ref = load_reference(SHIPPED)
    # ATOM's prompts: between 0.8 x ISL and ISL; outputs may stop early.
    for run in (
        RunIdentity("a.json", model="MiniMaxAI/MiniMax-M3", tp=4, mean_input=7400.0, mean_output=900.0),
        RunIdentity("b.json", model="amd/MiniMax-M3-MXFP4", isl=8192, osl=1024),
        RunIdentity("c.json"),  # says nothing: nothing held against it
    ):
        assert identity_mismatch(ref, run) is None


def test_identity_read_from_inferencex_files_and_names() -> None:
    named = run_identity({"model_id": "m/x"}, "bmk.zip:minimax_m25_vllm_tep8_isl1024_osl128_conc8.json")
    assert (named.isl, named.osl, named.model) == (1024, 128, "m/x")
    agg = run_identity({"model": "amd/MiniMax-M3-MXFP4", "tp": 4, "conc": 32}, "agg_x.json")
    assert (agg.model, agg.tp, agg.isl) == ("amd/MiniMax-M3-MXFP4", 4, None)
    raw = run_identity({"completed": 10, "total_input_tokens": 10240, "total_output_tokens": 6739}, "r.json")
    assert raw.mean_input == 1024.0 and raw.mean_output == pytest.approx(673.9)


def test_same_model_reads_names_word_by_word() -> None:
    assert same_model("amd/MiniMax-M3-MXFP4", "MiniMaxAI/MiniMax-M3")
    assert not same_model("zai-org/GLM-4.7", "amd/MiniMax-M3-MXFP4")
    assert not same_model("MiniMaxAI/MiniMax-M2.5", "MiniMaxAI/MiniMax-M3")
    assert not same_model("MiniMaxAI/MiniMax-M35", "MiniMaxAI/MiniMax-M3")
