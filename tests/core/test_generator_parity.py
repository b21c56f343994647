"""`sweepbot recipe plan FILE --all-keys --json` equals the repo's own generator, key by key.

Ground truth: tests/fixtures/inferencex/expected-plans/<file>.<mode>.json, what InferenceX's
`generate_sweep_configs.py test-config --config-keys KEY [mode flag]` prints at 843c6254 for every
key of both master files (208 keys: 77 single-node fixed-seq-len, 37 single-node agentic,
56 multi-node fixed-seq-len, 38 multi-node agentic). Every row is compared field for field, in
order, eval marks included.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from typing import Any
from unittest import mock

import pytest
import typer
import typer.testing
from typer.testing import CliRunner

from app.cli.recipe import recipe_app
from app.core.recipes import parse_master
from tests.conftest import FIXTURES

INFERENCEX = FIXTURES / "inferencex"
MASTERS = ("amd-master", "nvidia-master")
MODES = {
    "default": (),
    "no-evals": ("--no-evals",),
    "evals-only": ("--evals-only",),
    "all-evals": ("--all-evals",),
}
FAMILY_SIZES = {"single-fixed": 77, "single-agentic": 37, "multi-fixed": 56, "multi-agentic": 38}

_app = typer.Typer()
_app.add_typer(recipe_app, name="recipe")
_COMMAND = typer.main.get_command(_app)


def family(entry: dict[str, Any]) -> str:
    nodes = "multi" if entry.get("multinode") else "single"
    return f"{nodes}-{'agentic' if 'agentic-coding' in entry['scenarios'] else 'fixed'}"


@cache
def master(name: str) -> dict[str, Any]:
    return parse_master((INFERENCEX / "configs" / f"{name}.yaml").read_text(encoding="utf-8"))


def expected(name: str, mode: str) -> dict[str, Any]:
    return json.loads((INFERENCEX / "expected-plans" / f"{name}.{mode}.json").read_text(encoding="utf-8"))


def plan_all(name: str, *flags: str) -> dict[str, Any]:
    """The CLI's --all-keys JSON; the runners.yaml one level above configs/ gives the DRAM budgets."""
    path = INFERENCEX / "configs" / f"{name}.yaml"
    with mock.patch.object(typer.testing, "_get_command", lambda _app: _COMMAND):
        result = CliRunner().invoke(_app, ["recipe", "plan", str(path), "--all-keys", "--json", *flags])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("mode", list(MODES))
def test_every_key_of_both_files_equals_the_generator(mode: str) -> None:
    passed: Counter[str] = Counter()
    total: Counter[str] = Counter()
    first_miss: dict[str, Any] = {}
    for name in MASTERS:
        got, want = plan_all(name, *MODES[mode]), expected(name, mode)
        assert set(got) == set(want), f"{name}: keys differ"
        for key, rows in want.items():
            fam = family(master(name)[key])
            total[fam] += 1
            if got[key] == rows:
                passed[fam] += 1
            else:
                first_miss.setdefault(fam, {"key": key, "got": got[key], "want": rows})
    print(f"\n{mode}: " + ", ".join(f"{fam} {passed[fam]}/{total[fam]}" for fam in FAMILY_SIZES))
    assert dict(total) == FAMILY_SIZES
    assert first_miss == {}
    assert sum(passed.values()) == 208
