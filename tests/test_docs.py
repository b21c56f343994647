"""The docs a newcomer reads stay true to the code."""

from __future__ import annotations

import re

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
    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(((?:docs/)?[\w./-]+\.(?:md|yml))\)", readme):
        assert (ROOT / target).exists(), target


# A path the docs name: `app/...`, `tests/...`, etc., in backticks, up to a space or a backtick.
_NAMED_PATH = re.compile(r"`((?:app|workers|sim|tests|bench|migrations|docs|\.ci)/[\w./<>*{}-]*)")


def _named_paths(text: str) -> set[str]:
    found = set()
    for raw in _NAMED_PATH.findall(text):
        path = raw.rstrip(".,:;)")
        if "<" in path or "*" in path or "{" in path:
            continue  # a pattern (`workers/tasks_<domain>.py`), not a path
        found.add(path)
    return found


def test_every_path_the_docs_name_exists() -> None:
    """README.md and docs/*.md: every repository path they name in backticks exists."""
    missing = {}
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        gone = sorted(p for p in _named_paths(doc.read_text()) if not (ROOT / p).exists())
        if gone:
            missing[doc.name] = gone
    assert not missing, f"the docs name paths that do not exist (fix the doc or the path): {missing}"


def test_the_path_check_sees_a_missing_path() -> None:
    assert _named_paths("see `app/core/gap.py`, `app/nowhere.py`. and `workers/tasks_<domain>.py`") == {
        "app/core/gap.py",
        "app/nowhere.py",
    }
