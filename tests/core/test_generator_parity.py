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


def _cli(*args: str) -> Any:
    with mock.patch.object(typer.testing, "_get_command", lambda _app: _COMMAND):
        return CliRunner().invoke(_app, ["recipe", "plan", *args])


def test_the_keys_refused_before_are_planned_with_their_component_fields() -> None:
    """`router` / `kv-p2p-transfer` on a multi-node search-space item (three keys the bot used to
    refuse): planned, the item's value on every row, as the generator prints them."""
    want = expected("nvidia-master", "default")
    got = plan_all("nvidia-master")
    for key, field in (
        ("dsr1-fp8-b200-dynamo-sglang", "router"),
        ("dsr1-fp8-b200-dynamo-sglang-mtp", "router"),
        ("qwen3.5-fp4-gb300-dynamo-sglang", "kv-p2p-transfer"),
    ):
        assert got[key] == want[key] and all(field in row for row in got[key]), key


def test_all_keys_reports_an_unplannable_key_and_takes_no_filters(tmp_path: Any) -> None:
    path = tmp_path / "master.yaml"
    entry = (
        "  image: a/b:1\n  model: m\n  model-prefix: k\n  runner: mi355x\n  precision: fp4\n"
        "  framework: vllm\n  multinode: false\n  scenarios:\n    fixed-seq-len:\n"
        "    - isl: 8192\n      osl: 1024\n      search-space:\n"
    )
    path.write_text(
        f"good:\n{entry}      - {{ tp: 4, conc-start: 16, conc-end: 64 }}\n"
        f"bad:\n{entry}      - {{ tp: 4, conc-list: [16], warp-drive: true }}\n"
    )
    done = _cli(str(path), "--all-keys", "--json")
    assert done.exit_code == 0, done.output
    plans = json.loads(done.stdout)
    assert [r["conc"] for r in plans["good"] if r["run-eval"]] == [32, 64]
    assert set(plans["bad"]) == {"error"} and "`warp-drive`" in plans["bad"]["error"]
    for args in ((str(path), "--all-keys", "--conc", "16"), (str(path), "good", "--all-keys"), (str(path),)):
        refused = _cli(*args)
        assert refused.exit_code == 2 and "error:" in refused.output, args


def test_dram_budgets_need_the_runners_file(tmp_path: Any) -> None:
    """A DRAM-offload row's `total-cpu-dram-gb` comes from runners.yaml's `hardware:`: without one
    it is unknown (null), with a file that has none the command says so."""
    path = INFERENCEX / "configs" / "amd-master.yaml"
    key = next(
        k
        for k, rows in expected("amd-master", "no-evals").items()
        if rows and rows[0].get("total-cpu-dram-gb")
    )
    with_file = json.loads(_cli(str(path), key, "--json", "--no-evals").stdout)
    assert (
        with_file[0]["total-cpu-dram-gb"] == expected("amd-master", "no-evals")[key][0]["total-cpu-dram-gb"]
    )
    no_hardware = _cli(str(path), key, "--json", "--runners", str(INFERENCEX / "configs" / "amd-master.yaml"))
    assert no_hardware.exit_code == 2 and "no `hardware:` mapping" in no_hardware.output
    alone = tmp_path / "configs" / "amd-master.yaml"  # no runners.yaml beside it or above it
    alone.parent.mkdir()
    alone.write_bytes(path.read_bytes())
    unknown = json.loads(_cli(str(alone), key, "--json", "--no-evals").stdout)
    assert unknown[0]["total-cpu-dram-gb"] is None
