"""The job name a generated row gets (app.core.runmatch.point_job_name), field by field and with
every default: the rows are shaped as the generator emits them for the repo's master configs
(tests/fixtures/inferencex/nvidia-master.tail.head.yaml: a disaggregated qwen3.5 row, an
aggregated kimik3 agentic row with DRAM offload), trimmed to the fields a name reads. The slow
generator-parity check of the same function is tests/core/test_dispatch_jobs.py."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from app.core.runmatch import (
    JobName,
    Worker,
    _extras,
    _offload_words,
    _row_worker,
    parse_job_name,
    point_job_name,
)
from sim.runs import job_name

SINGLE: dict[str, Any] = {
    "model-prefix": "dsr1",
    "precision": "fp8",
    "runner": "mi355x",
    "framework": "sglang",
    "spec-decoding": "mtp",
    "tp": 8,
    "pp": 2,
    "dcp-size": 3,
    "pcp-size": 4,
    "ep": 5,
    "dp-attn": True,
    "conc": 64,
    "isl": 8192,
    "osl": 1024,
}
DISAGG: dict[str, Any] = {  # qwen3.5-fp8-gb300-dynamo-sglang-mtp's first row
    "model-prefix": "qwen3.5",
    "precision": "fp8",
    "framework": "dynamo-sglang",
    "runner": "gb300",
    "isl": 8192,
    "osl": 1024,
    "spec-decoding": "mtp",
    "prefill": {"num-worker": 1, "tp": 4, "ep": 1, "dp-attn": False, "pp": 1, "dcp-size": 1, "pcp-size": 1},
    "decode": {"num-worker": 2, "tp": 8, "ep": 8, "dp-attn": True, "pp": 1, "dcp-size": 1, "pcp-size": 1},
    "conc": [1, 8, 2],
    "disagg": True,
}
AGENTIC_AGG: dict[str, Any] = {  # kimik3-fp4-gb300-dynamo-vllm-agentic-mooncake-dcp8-agg
    "model-prefix": "kimik3",
    "precision": "fp4",
    "framework": "dynamo-vllm",
    "runner": "cluster:gb300-nv",
    "spec-decoding": "none",
    "prefill": {"num-worker": 1, "tp": 8, "dcp-size": 8, "ep": 1, "dp-attn": False, "pp": 1, "pcp-size": 1},
    "decode": {"num-worker": 0, "tp": 8, "dcp-size": 8, "ep": 1, "dp-attn": False, "pp": 1, "pcp-size": 1},
    "conc": [48],
    "kv-offloading": "dram",
    "disagg": False,
    "scenario-type": "agentic-coding",
    "kv-offload-backend": {"name": "mooncake", "version": "0.3.12.post1"},
}


def test_a_single_node_rows_name_field_by_field() -> None:
    assert point_job_name(SINGLE) == JobName(
        caller="",
        priority=0,
        model_prefix="dsr1",
        precision="fp8",
        runner="mi355x",
        framework="sgl",
        tp=8,
        pp=2,
        dcp=3,
        pcp=4,
        ep=5,
        dpa=True,
        extras=("mtp",),
        conc=64,
        eval="",
    )


def test_a_single_node_rows_eval_job() -> None:
    job = point_job_name(SINGLE, eval_job=True)
    assert job.eval == "eval-only" and job.conc == 64 and job.prefill is None


def test_the_defaults_of_a_single_node_row() -> None:
    row = {"model-prefix": "m", "precision": "p", "runner": "r", "framework": "vllm"}
    assert point_job_name(row) == JobName(
        caller="",
        priority=0,
        model_prefix="m",
        precision="p",
        runner="r",
        framework="vllm",
        tp=0,
        pp=1,
        dcp=1,
        pcp=1,
        ep=1,
        dpa=False,
        extras=(),
        conc=0,
        eval="",
    )


@pytest.mark.parametrize(
    ("framework", "short"),
    [
        ("sglang", "sgl"),
        ("dynamo-sglang", "dyn-sgl"),
        ("sglang-disagg", "sgl-disagg"),
        ("vllm", "vllm"),
        ("dynamo-trt", "dynamo-trt"),
    ],
)
def test_the_framework_is_written_short(framework: str, short: str) -> None:
    assert point_job_name(SINGLE | {"framework": framework}).framework == short


def test_a_row_without_the_recipe_fields_names_them_none() -> None:
    job = point_job_name({})
    assert (job.model_prefix, job.precision, job.runner, job.framework) == ("None", "None", "None", "None")


def test_a_disaggregated_rows_name() -> None:
    assert point_job_name(DISAGG) == JobName(
        caller="",
        priority=0,
        model_prefix="qwen3.5",
        precision="fp8",
        runner="gb300",
        framework="dyn-sgl",
        tp=4,
        pp=1,
        dcp=1,
        pcp=1,
        ep=1,
        dpa=False,
        extras=("mtp",),
        conc=8,  # the highest of its concs
        eval="",
        prefill=Worker(1, 4, 1, 1, 1, 1, False),
        decode=Worker(2, 8, 1, 1, 1, 8, True),
        concs=(1, 8, 2),
    )
    assert point_job_name(DISAGG, eval_job=True).eval == "eval-only"


def test_an_aggregated_agentic_rows_name() -> None:
    assert point_job_name(AGENTIC_AGG) == JobName(
        caller="",
        priority=0,
        model_prefix="kimik3",
        precision="fp4",
        runner="cluster:gb300-nv",
        framework="dynamo-vllm",
        tp=8,
        pp=1,
        dcp=8,
        pcp=1,
        ep=1,
        dpa=False,
        extras=("dram", "KV", "offload", "mooncake"),
        conc=48,
        eval="",
        prefill=Worker(None, 8, 1, 8, 1, 1, False),  # no counts, no decode part: not disaggregated
        decode=None,
        concs=(48,),
    )


def test_a_multinode_row_with_one_conc_not_in_a_list() -> None:
    job = point_job_name(AGENTIC_AGG | {"conc": "16"})
    assert (job.conc, job.concs) == (16, (16,))


def test_a_multinode_row_without_disagg_is_aggregated() -> None:
    row = {k: v for k, v in DISAGG.items() if k != "disagg"}
    job = point_job_name(row)
    assert job.decode is None and job.prefill == Worker(None, 4, 1, 1, 1, 1, False)


def test_a_worker_fields_by_name() -> None:
    worker = {"num-worker": 3, "tp": 4, "pp": 5, "dcp-size": 6, "pcp-size": 7, "ep": 8, "dp-attn": True}
    assert _row_worker(worker, counted=True) == Worker(3, 4, 5, 6, 7, 8, True)
    assert _row_worker(worker, counted=False) == Worker(None, 4, 5, 6, 7, 8, True)


def test_a_workers_defaults() -> None:
    assert _row_worker({}, counted=True) == Worker(0, 0, 1, 1, 1, 1, False)
    zeros = {"num-worker": 0, "tp": 0, "pp": 0, "dcp-size": 0, "pcp-size": 0, "ep": 0, "dp-attn": 0}
    assert _row_worker(zeros, counted=True) == Worker(0, 0, 1, 1, 1, 1, False)


# ------------------------------------------------------------------ the words before the conc


@pytest.mark.parametrize(
    ("row", "words"),
    [
        ({"spec-decoding": "mtp"}, ("mtp",)),
        ({"spec-decoding": "none"}, ()),
        ({"spec-decoding": None}, ()),
        ({}, ()),
        (AGENTIC_AGG, ("dram", "KV", "offload", "mooncake")),
        (AGENTIC_AGG | {"spec-decoding": "mtp"}, ("mtp", "dram", "KV", "offload", "mooncake")),
    ],
)
def test_extras(row: dict[str, Any], words: tuple[str, ...]) -> None:
    assert _extras(row) == words


AGENTIC = {"scenario-type": "agentic-coding"}


@pytest.mark.parametrize(
    ("row", "words"),
    [
        ({"kv-offloading": "dram", "kv-offload-backend": {"name": "lmcache"}}, ()),  # not agentic
        (AGENTIC, ()),
        (AGENTIC | {"kv-offloading": "none", "kv-offload-backend": None}, ()),
        (AGENTIC | {"kv-offloading": "dram"}, ("dram", "KV", "offload")),
        (AGENTIC | {"kv-offloading": "dram", "kv-offload-backend": "default"}, ("dram", "KV", "offload")),
        (AGENTIC | {"kv-offloading": "dram", "kv-offload-backend": "none"}, ("dram", "KV", "offload")),
        (AGENTIC | {"kv-offloading": "dram", "kv-offload-backend": {}}, ("dram", "KV", "offload")),
        (
            AGENTIC | {"kv-offloading": "dram", "kv-offload-backend": {"name": None}},
            ("dram", "KV", "offload"),
        ),
        (
            AGENTIC | {"kv-offloading": "ssd", "kv-offload-backend": "lmcache"},
            ("ssd", "KV", "offload", "lmcache"),
        ),
        (
            AGENTIC | {"kv-offloading": "dram", "kv-offload-backend": {"name": "mooncake", "version": "1"}},
            ("dram", "KV", "offload", "mooncake"),
        ),
        (AGENTIC | {"kv-offload-backend": "mooncake"}, ("mooncake",)),  # a backend without a mode
    ],
)
def test_offload_words(row: dict[str, Any], words: tuple[str, ...]) -> None:
    assert _offload_words(row) == words


@pytest.mark.parametrize("row", [SINGLE, DISAGG, AGENTIC_AGG], ids=["single", "disagg", "agentic-agg"])
def test_the_rows_above_are_named_so_by_the_templates(row: dict[str, Any]) -> None:
    """The simulator renders the templates' name expressions (sim.runs.job_name): the hand-made rows
    are named as the workflow names them."""
    caller = "multi-node /" if "prefill" in row else "single-node /"
    parsed = parse_job_name(job_name(caller, row))
    assert parsed is not None
    assert dataclasses.replace(parsed, caller="", priority=0) == point_job_name(row)
