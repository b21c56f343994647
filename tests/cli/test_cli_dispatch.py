"""`sweepbot recipe dispatch`: every dispatch of a sweep, checked against the real e2e-tests.yml."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli.recipe import recipe_app
from app.core.sweepcli import parse_command
from app.core.workflows import parse_workflow
from tests.recipe_helpers import SEED_KEY, fixture_path, fixture_text

runner = CliRunner()


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / "configs").mkdir()
    shutil.copy(fixture_path("workflows/e2e-tests.yml"), tmp_path / ".github" / "workflows" / "e2e-tests.yml")
    shutil.copy(fixture_path("amd-master.b4cec7f.yaml"), tmp_path / "configs" / "amd-master.yaml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_dispatch_is_valid_for_the_real_workflow_and_cli(checkout: Path, settings_env: object) -> None:
    got = runner.invoke(
        recipe_app, ["dispatch", "configs/amd-master.yaml", SEED_KEY, "--json", "--head-ref", "recipe"]
    )
    assert got.exit_code == 0, got.output
    items = json.loads(got.output)
    declared = set(parse_workflow(fixture_text("workflows/e2e-tests.yml"), "e2e-tests.yml").inputs)
    concs = []
    for item in items:
        assert item["workflow"] == "e2e-tests.yml" and item["ref"] == "recipe"
        assert set(item["inputs"]) <= declared
        cmd = parse_command(item["inputs"]["generate-cli-command"])
        assert cmd.command == "test-config" and cmd.config_files == ("configs/amd-master.yaml",)
        assert cmd.config_keys == (SEED_KEY,) and len(cmd.conc) == 1
        assert item["display_title"] == f"e2e Test - {item['run_name']}"
        concs.append(cmd.conc[0])
    assert concs == sorted(concs, reverse=True) and len(concs) == len(set(concs))  # largest conc first
    assert items[0]["inputs"]["ref"] == "<head-sha>"
    one = json.loads(
        runner.invoke(
            recipe_app, ["dispatch", "configs/amd-master.yaml", SEED_KEY, "--conc", "64", "--json"]
        ).output
    )
    assert len(one) == 1 and one[0]["points"][0].endswith("_conc64_mi355x")


def test_inputs_the_workflow_does_not_declare_are_refused(
    checkout: Path, settings_env: pytest.MonkeyPatch
) -> None:
    from app.settings import reset_settings_cache

    settings_env.setenv(
        "SWEEPBOT_DISPATCH_INPUTS",
        '{"generate-cli-command": "test-config --config-files {config_file} --config-keys {key}'
        ' --conc {conc}",'
        ' "tp": "{tp}", "test-name": "{run_name}"}',
    )
    reset_settings_cache()
    got = runner.invoke(recipe_app, ["dispatch", "configs/amd-master.yaml", SEED_KEY, "--conc", "64"])
    assert got.exit_code == 2 and "tp not declared" in got.output
    settings_env.setenv(
        "SWEEPBOT_DISPATCH_INPUTS",
        '{"generate-cli-command": "test-config --config-keys {key} --conc {conc}"}',
    )
    reset_settings_cache()
    got = runner.invoke(recipe_app, ["dispatch", "configs/amd-master.yaml", SEED_KEY, "--conc", "64"])
    assert got.exit_code == 2 and "--config-files" in got.output


def test_without_a_workflow_file_it_says_so(checkout: Path, settings_env: object) -> None:
    (checkout / ".github" / "workflows" / "e2e-tests.yml").unlink()
    got = runner.invoke(recipe_app, ["dispatch", "configs/amd-master.yaml", SEED_KEY, "--conc", "64"])
    assert got.exit_code == 0 and "not checked" in got.output


@pytest.mark.parametrize(
    "env",
    [
        {},  # every default
        {"SWEEPBOT_DISPATCH_WORKFLOW": "bench.yml"},
        {"SWEEPBOT_DISPATCH_REF": "refs/pull/{pr}/head", "SWEEPBOT_DISPATCH_INPUTS": '{"a": "{key}"}'},
        {"sweepbot_dispatch_workflow": "lower.yml", "SWEEPBOT_DISPATCH_REF": ""},  # any case; "" is set
        {"DISPATCH_WORKFLOW": "no-prefix.yml", "SWEEPBOT_DISPATCH_WORKFLOWS": "other.yml"},  # not theirs
    ],
)
def test_recipe_dispatch_reads_the_templates_the_settings_read(
    settings_env: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    # `recipe dispatch` reads SWEEPBOT_DISPATCH_* without building the settings (bench/cli.py):
    # both must read the same values, defaults included.
    import os

    from app.core.sweepspec import DispatchTemplates
    from app.settings import Settings

    for name, value in env.items():
        settings_env.setenv(name, value)
    settings = Settings()
    light = DispatchTemplates.from_environ(os.environ)
    read = (settings.dispatch_workflow, settings.dispatch_ref, settings.dispatch_inputs)
    assert light == DispatchTemplates(*read)
