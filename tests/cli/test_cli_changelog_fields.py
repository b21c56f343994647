"""sweepbot recipe changelog takes each gate field as an option of the same name (console script)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from app.core.recipes import (
    EntryFlags,
)
from tests.core.test_recipes_changelog_fields import _revisions_ending_in_whitespace_only_line
from tests.recipe_helpers import fixture_text

LINK = "https://github.com/SemiAnalysisAI/InferenceX/pull/2710"
EVERY_FIELD = EntryFlags(
    scenario_type=("fixed-seq-len", "agentic-coding"),
    evals_only=True,
    all_evals=True,
    eval_min_prefill_ep=8,
)
# The gate forbids mixing these with eval selection, so they get their own entry.
THROUGHPUT_ONLY = EntryFlags(scenario_type=("agentic-coding",), no_evals=True, append_only=True)


def test_cli_takes_each_field_as_an_option_of_the_same_name(tmp_path: Path) -> None:
    path = tmp_path / "perf-changelog.yaml"
    revision = _revisions_ending_in_whitespace_only_line(fixture_text("perf-changelog.head-tail.yaml"))[0]
    path.write_bytes(revision.encode("utf-8"))
    args = [
        sys.executable, "-m", "app", "recipe", "changelog", str(path), "--key", "k", "--description", "d",
        "--pr-link", "XXX", "--scenario-type", "fixed-seq-len", "--scenario-type", "agentic-coding",
        "--evals-only", "--all-evals", "--eval-min-prefill-ep", "8", "--in-place",
    ]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    new = path.read_text(encoding="utf-8")
    assert new.startswith(revision)
    assert yaml.safe_load(new)[-1] == {
        "config-keys": ["k"],
        "description": ["d"],
        "pr-link": "XXX",
        **EVERY_FIELD.as_fields(),
    }
    bad = subprocess.run(
        [*args[:10], "--no-evals", "--evals-only"], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2 and "no-evals cannot be combined" in bad.stderr
