"""The simulator's own sweep generator against what the repo's generator printed
(tests/fixtures/inferencex/expected-plans/, 843c6254): every key of both master files, in each of
the four eval modes, row for row (every field, eval marks included)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.matrix import MatrixError, test_config
from sim.matrix_evals import EvalMode

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "inferencex"
FILES = ("amd-master", "nvidia-master")
KEYS = {"amd-master": 56, "nvidia-master": 152}


@functools.cache
def _load(name: str) -> dict[str, Any]:
    text = (FIX / "configs" / f"{name}.yaml").read_text()
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


RUNNERS = yaml.safe_load((FIX / "runners.yaml").read_text())


@pytest.mark.parametrize("mode", list(EvalMode), ids=lambda m: m.value)
@pytest.mark.parametrize("name", FILES)
def test_every_key_equals_the_repos_generator(name: str, mode: EvalMode) -> None:
    master = _load(name)
    expected = json.loads((FIX / "expected-plans" / f"{name}.{mode.value}.json").read_text())
    assert len(expected) == KEYS[name]
    wrong = [k for k, rows in expected.items() if test_config(master, [k], RUNNERS, mode) != rows]
    assert not wrong, f"{len(expected) - len(wrong)}/{len(expected)} keys agree; first wrong: {wrong[:5]}"


def test_evals_are_picked_after_the_conc_filter() -> None:
    """A key dispatched conc by conc gets the picks the repo makes for that command: one
    eligible concurrency is both the highest and the median of its group."""
    master = _load("amd-master")
    whole = test_config(master, ["dsr1-fp4-mi355x-sglang"], RUNNERS)
    assert sorted({r["conc"] for r in whole if r["run-eval"]}) == [32, 64]
    one = test_config(master, ["dsr1-fp4-mi355x-sglang"], RUNNERS, conc=[16])
    assert one and all(r["run-eval"] for r in one)


def test_agentic_evals_are_opt_in_and_multinode_agentic_is_one_row_per_conc() -> None:
    master = _load("nvidia-master")
    rows = test_config(master, ["kimik3-fp4-h200-vllm-agentic"], RUNNERS)
    assert len(rows) == 35 and all(len(r["conc"]) == 1 for r in rows)
    assert not any(r["run-eval"] for r in rows)


def test_a_pattern_matching_nothing_is_refused() -> None:
    with pytest.raises(MatrixError, match="matched no config keys"):
        test_config(_load("amd-master"), ["nope-*"], RUNNERS)


def test_an_older_files_offloading_field_makes_its_own_rows() -> None:
    """f8f9b66's `kimik2.5-fp4-mi355x-vllm-agentic` spells KV offload `offloading: none|cpu` (the
    field before `kv-offloading`), no backend: at conc 32 each tp has a `kvnone` and a `kvcpu`
    row, never two identical rows (whose jobs would upload one `bmk_agentic_<RF>` twice)."""
    master = yaml.safe_load((FIX / "amd-master.f8f9b66.yaml").read_text())
    rows = test_config(master, ["kimik2.5-fp4-mi355x-vllm-agentic"], RUNNERS, conc=[32])
    got = sorted((r["tp"], r["kv-offloading"], r["exp-name"], r["total-cpu-dram-gb"]) for r in rows)
    assert got == [
        (4, "cpu", "kimik2.5_tp4_conc32_kvcpu", 0),
        (4, "none", "kimik2.5_tp4_conc32_kvnone", 0),
        (8, "cpu", "kimik2.5_tp8_conc32_kvcpu", 0),
        (8, "none", "kimik2.5_tp8_conc32_kvnone", 0),
    ]
