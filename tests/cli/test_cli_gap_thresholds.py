"""`sweepbot gap --thresholds`: the offline accuracy table also judged against the repo's own
utils/evals/thresholds.yaml (the real file at 843c6254), as its validate_scores.py applies it."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from app.cli.report import gap_command
from tests.evals_helpers import gsm8k_results, meta_env

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_gap_cli_also_judges_against_the_repos_thresholds(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command("gap")(gap_command)
    app.command("noop")(lambda: None)
    ref = str(FIXTURES / "references" / "atom-minimaxm3-mxfp4-mi355x-tp4-8k1k.yaml")
    gate = str(FIXTURES / "inferencex/evals/thresholds.yaml")
    (tmp_path / "results_2026-12-01T09-00-00.json").write_text(json.dumps(gsm8k_results(0.91)))
    (tmp_path / "meta_env.json").write_text(json.dumps(meta_env(infmax_model_prefix="minimaxm2.5")))
    args = ["gap", "--results", str(tmp_path), "--reference", ref, "--thresholds", gate]
    got = CliRunner().invoke(app, args)
    assert got.exit_code == 0, got.output
    # meta_env's model prefix: minimaxm2.5's own gsm8k threshold 0.92
    assert "- gsm8k: threshold 0.92 (models.minimaxm2.5.gsm8k): fail" in got.output
    assert got.output.rstrip().endswith("; repo threshold: fail on gsm8k")
    got = CliRunner().invoke(app, [*args, "--model-prefix", "minimaxm3"])
    assert "- gsm8k: threshold 0.9 (default.gsm8k): pass" in got.output
    (tmp_path / "bad.yaml").write_text("default: {gsm8k: high}\n")
    got = CliRunner().invoke(app, [*args[:-1], str(tmp_path / "bad.yaml")])
    assert got.exit_code == 2 and "a threshold is a number" in got.output
