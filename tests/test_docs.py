"""The docs a newcomer reads stay true to the code."""

from __future__ import annotations

from app.settings import Settings
from tests.conftest import ROOT


def test_every_setting_is_documented_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    missing = [name for name in Settings.model_fields if f"SWEEPBOT_{name.upper()}" not in readme]
    assert not missing, f"document these settings in README.md's Configuration table: {missing}"


def test_readme_quick_start_is_two_commands_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make up", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    assert "\nup:" in makefile and "\ntest:" in makefile


def test_ci_runs_the_readme_test_command() -> None:
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_docs_linked_from_the_readme_exist() -> None:
    import re

    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(((?:docs/)?[\w./-]+\.(?:md|yml))\)", readme):
        assert (ROOT / target).exists(), target
