"""The bot against the real InferenceX workflow files and CLI documentation (tests/fixtures/)."""

from __future__ import annotations

import re

import pytest

from app.core.runmatch import assign_jobs, classify_failure, job_matches_point, match_run, parse_job_name
from app.core.sweepcli import CliGrammarError, parse_command, render_test_config
from app.core.workflows import (
    DispatchInputError,
    WorkflowSpec,
    dispatch_problems,
    dispatch_title,
    parse_workflow,
    validate_dispatch,
)
from tests.recipe_helpers import SEED_KEY, fixture_text


def _workflow(name: str) -> WorkflowSpec:
    return parse_workflow(fixture_text(f"workflows/{name}"), f".github/workflows/{name}")


def _doc_commands() -> list[str]:
    """Every example command in the repo's workflows README (fenced blocks after **...:**)."""
    text = fixture_text("docs/workflows-README.md")
    blocks = re.findall(r"```\n((?:test-config|full-sweep)[^\n]*)\n```", text)
    assert len(blocks) >= 14
    return blocks


@pytest.mark.parametrize("command", _doc_commands())
def test_every_documented_example_parses(command: str) -> None:
    parsed = parse_command(command)
    assert parsed.command in ("test-config", "full-sweep") and parsed.config_files


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("test-config --config-keys K --seq-lens 8k1k --conc 64", "--config-files"),
        ("test-config --config-files configs/amd-master.yaml --config-keys K --tp 4", "unrecognized"),
        (
            "test-config --config-files configs/amd-master.yaml --config-keys K --seq-lens 8k1k",
            "unrecognized",
        ),
        ("full-sweep --config-files configs/amd-master.yaml --seq-lens 4k1k", "invalid choice"),
        ("test-config --config-files f.yaml", "--config-keys"),
        ("test-config --config-files f.yaml --config-keys K --no-evals --all-evals", "cannot be combined"),
        ("test-config --config-files f.yaml --config-keys K --no-evals --evals-only", "not allowed with"),
        ("test-config --config-files f.yaml --config-keys K --conc 0", "positive"),
        ("tune --config-files f.yaml", "invalid choice"),
        ("test-config --config-files f.yaml --config-keys 'K'", "plain words"),
        ("", "empty"),
    ],
)
def test_what_the_real_cli_refuses(command: str, why: str) -> None:
    with pytest.raises(CliGrammarError, match=re.escape(why)):
        parse_command(command)


def test_the_bots_command_is_a_valid_test_config_for_the_keys_own_file() -> None:
    text = render_test_config("configs/amd-master.yaml", [SEED_KEY], [64])
    parsed = parse_command(text)
    assert parsed.config_files == ("configs/amd-master.yaml",) and parsed.config_keys == (SEED_KEY,)
    assert parsed.conc == (64,) and parsed.evals == "none"
    with pytest.raises(CliGrammarError, match="plain path"):
        render_test_config("../etc/passwd", [SEED_KEY])


def test_e2e_dispatch_inputs_and_title() -> None:
    e2e = _workflow("e2e-tests.yml")
    assert e2e.dispatchable and "generate-cli-command" in e2e.inputs and "test-name" in e2e.inputs
    inputs = {
        "generate-cli-command": render_test_config("configs/amd-master.yaml", [SEED_KEY], [64]),
        "ref": "a" * 40,
        "test-name": "sweepbot-3-17",
    }
    assert dispatch_problems(e2e, inputs) == []
    assert dispatch_title(e2e, inputs) == "e2e Test - sweepbot-3-17"
    assert dispatch_title(e2e, {"generate-cli-command": "x"}) == "e2e Test - x"
    with pytest.raises(DispatchInputError, match="tp not declared"):
        validate_dispatch(e2e, inputs | {"tp": "4"})
    with pytest.raises(DispatchInputError, match="boolean"):
        validate_dispatch(e2e, inputs | {"trim-conc": "yes"})


def test_workflows_without_dispatch_or_with_required_inputs() -> None:
    run_sweep = _workflow("run-sweep.yml")
    assert not run_sweep.dispatchable
    assert "no workflow_dispatch trigger" in dispatch_problems(run_sweep, {})[0]
    assert set(run_sweep.triggers) == {"push", "pull_request"}
    assert not _workflow("benchmark-tmpl.yml").dispatchable  # workflow_call only
    spec = parse_workflow(
        "on:\n  workflow_dispatch:\n    inputs:\n      key:\n        required: true\n", "w.yml"
    )
    assert "required input key is missing" in dispatch_problems(spec, {})[0]


POINT = {
    "model-prefix": "minimaxm3",
    "precision": "fp4",
    "runner": "mi355x",
    "framework": "vllm",
    "tp": 4,
    "pp": 1,
    "dcp-size": 1,
    "pcp-size": 1,
    "ep": 1,
    "dp-attn": False,
    "spec-decoding": "none",
    "conc": 64,
    "exp-name": "minimaxm3_8k1k",
}


def test_job_names_in_the_templates_format() -> None:
    # benchmark-tmpl.yml's `name: >-` folds to one line; empty expressions leave extra spaces.
    name = "single-node 8k1k / p37 | minimaxm3 fp4 mi355x vllm TP4     c64"
    job = parse_job_name(name)
    assert job is not None and (job.priority, job.tp, job.conc, job.caller) == (
        37,
        4,
        64,
        "single-node 8k1k /",
    )
    assert job_matches_point(job, POINT)
    assert not job_matches_point(job, POINT | {"exp-name": "minimaxm3_1k1k"})  # caller says 8k1k
    assert not job_matches_point(job, POINT | {"conc": 6})
    ev = parse_job_name("eval / p1 | minimaxm3 fp4 mi355x vllm TP4 c64 | eval-only")
    assert ev is not None and ev.eval == "eval-only" and not job_matches_point(ev, POINT)
    sgl = parse_job_name("p1 | dsr1 fp8 b200 sgl TP8/EP8/DPA mtp c128 | eval")
    assert sgl is not None and (sgl.ep, sgl.dpa, sgl.extras, sgl.eval) == (8, True, ("mtp",), "eval")
    assert job_matches_point(
        sgl,
        POINT
        | {
            "model-prefix": "dsr1",
            "precision": "fp8",
            "runner": "b200",
            "framework": "sglang",
            "tp": 8,
            "ep": 8,
            "dp-attn": True,
            "spec-decoding": "mtp",
            "conc": 128,
        },
    )
    assert parse_job_name("get-jobs") is None and parse_job_name("collect-results / collect") is None


def test_assign_jobs_in_matrix_order_for_names_without_seq() -> None:
    jobs = [{"id": 1, "name": "get-jobs"}] + [
        {"id": i, "name": f"single-node / p5 | minimaxm3 fp4 mi355x vllm TP4 c{c}"}
        for i, c in ((2, 64), (3, 64), (4, 32))
    ]
    points = [POINT | {"exp-name": "minimaxm3_1k1k"}, POINT, POINT | {"conc": 32}]
    got = assign_jobs(jobs, points)
    assert {k: v["id"] for k, v in got.items()} == {0: 2, 1: 3, 2: 4}


def test_runs_match_by_id_then_display_title() -> None:
    runs = [
        {"id": 10, "name": "End-to-End Tests", "display_title": "e2e Test - sweepbot-1-2", "head_sha": "a"},
        {"id": 12, "name": "End-to-End Tests", "display_title": "e2e Test - sweepbot-1-2", "head_sha": "b"},
    ]
    assert match_run(runs, run_id=10).how == "id"
    by_title = match_run(runs, display_title="e2e Test - sweepbot-1-2")
    assert by_title.how == "display_title" and by_title.run is runs[1]
    assert match_run(runs, display_title="e2e Test - sweepbot-1-2", head_sha="a").run is runs[0]
    assert match_run(runs, display_title="sweepbot-1-2").run is None  # `name` never matches


def test_failures_from_annotations() -> None:
    lost = classify_failure(
        [
            {
                "annotation_level": "failure",
                "message": "The self-hosted runner: mi355x-amds_03 lost communication with the server. "
                "Verify the machine is running and has a healthy network connection.",
            }
        ],
        conclusion="failure",
    )
    assert lost.infrastructure and "mi355x-amds_03" in lost.message
    bench = classify_failure(
        [{"annotation_level": "failure", "message": "Process completed with exit code 1."}],
        conclusion="failure",
        steps=[{"name": "Launch job script", "conclusion": "failure"}],
    )
    assert not bench.infrastructure and bench.message == (
        "failed in step 'Launch job script': Process completed with exit code 1."
    )
    # a step named like a lost runner is not what GitHub reports; only annotations count
    step_only = classify_failure(
        [],
        conclusion="failure",
        steps=[{"name": "lost communication with the server", "conclusion": "failure"}],
    )
    assert not step_only.infrastructure
