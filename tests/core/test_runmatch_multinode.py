"""Multi-node job names (benchmark-multinode-tmpl.yml), recognised by app.core.runmatch.

The callers' names and the inputs they pass are read from the real workflow files
(tests/fixtures/inferencex/workflows/, InferenceX 843c6254); the rows are the repo's own multi-node
keys (tests/fixtures/inferencex/nvidia-master.*.head.yaml). The template itself is not among the
fixtures: the names below are written as its name expression folds them (the runmatch docstring
says where the format was read).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from app.core.recipes import expand_points, parse_master
from app.core.runmatch import assign_jobs, job_matches_point, parse_job_name
from sim.runs import job_name, multinode_job_name, point_dict
from tests.recipe_helpers import fixture_text

MULTINODE_TMPL = "./.github/workflows/benchmark-multinode-tmpl.yml"


def _multinode_callers(workflow: str) -> dict[str, dict[str, Any]]:
    """The jobs of a real workflow that call benchmark-multinode-tmpl.yml: job name -> `with:`."""
    doc = yaml.safe_load(fixture_text(f"workflows/{workflow}"))
    return {
        str(job["name"]): dict(job.get("with") or {})
        for job in doc["jobs"].values()
        if job.get("uses") == MULTINODE_TMPL
    }


def _rows(fixture: str, key: str) -> list[dict[str, Any]]:
    master = parse_master(fixture_text(fixture))
    return [point_dict(p) for p in expand_points(master, key)]


DSV4 = _rows("nvidia-master.dsv4-gb300-trt-mtp.head.yaml", "dsv4-fp4-gb300-dynamo-trt-mtp")
QWEN = _rows("nvidia-master.tail.head.yaml", "qwen3.5-fp8-gb300-dynamo-sglang-mtp")
KIMI_AGG = _rows("nvidia-master.tail.head.yaml", "kimik3-fp4-gb300-dynamo-vllm-agentic-mooncake-dcp8-agg")


def test_the_real_workflows_call_the_multinode_template_with_the_named_fields() -> None:
    e2e, sweep = _multinode_callers("e2e-tests.yml"), _multinode_callers("run-sweep.yml")
    assert set(e2e) == {
        "multi-node /",
        "multi-node eval /",
        "multi-node agentic /",
        "multi-node agentic eval /",
    }
    assert {"multi-node 1k1k /", "multi-node 8k1k /", "multi-node eval /"} <= set(sweep)
    for caller, inputs in (*e2e.items(), *sweep.items()):
        # every field the job name shows is passed, and a whole conc list per job
        for field in ("priority", "model-prefix", "precision", "runner", "framework", "disagg"):
            assert field in inputs, (caller, field)
        for role in ("prefill", "decode"):
            for field in ("num-worker", "tp", "pp", "dcp-size", "pcp-size", "ep", "dp-attn"):
                assert f"{role}-{field}" in inputs, (caller, role, field)
        assert inputs["conc-list"] == "${{ toJson(matrix.config.conc) }}", caller
    assert e2e["multi-node /"]["run-eval"] is False
    assert (e2e["multi-node eval /"]["run-eval"], e2e["multi-node eval /"]["eval-only"]) == (True, True)


def test_a_disaggregated_row_by_its_name() -> None:
    row = DSV4[0]
    name = "multi-node / p37 | dsv4 fp4 gb300-nv dynamo-trt 1P (TP4/EP4/DPA) x 4D (TP8/EP8) mtp   c8"
    job = parse_job_name(name)
    assert job is not None and job.caller == "multi-node /" and job.concs == (8,)
    assert job.prefill is not None and (job.prefill.num, job.prefill.ep, job.prefill.dpa) == (1, 4, True)
    assert job.decode is not None and (job.decode.num, job.decode.tp, job.decode.dpa) == (4, 8, False)
    assert job_matches_point(job, row)
    # the other rows of the key differ in their decode workers or conc
    assert [job_matches_point(job, r) for r in DSV4].count(True) == 1
    # its eval-only job is not its throughput job, and is an eval-only point's
    ev = parse_job_name(f"multi-node eval / {name.split(' / ', 1)[1]} | eval-only")
    assert ev is not None and ev.eval == "eval-only"
    assert not job_matches_point(ev, row) and job_matches_point(ev, row, eval_job=True)
    assert job_matches_point(ev, row | {"run-eval": True, "eval-only": True, "eval-conc": 8})


def test_a_conc_list_and_an_aggregated_row() -> None:
    row = next(r for r in QWEN if len(r["conc"]) > 1)
    job = parse_job_name(multinode_job_name("multi-node 8k1k /", row))
    assert job is not None and job.concs == tuple(row["conc"]) and job.conc == max(row["conc"])
    assert job_matches_point(job, row)
    assert not job_matches_point(job, row | {"conc": row["conc"][:-1]})
    agg = KIMI_AGG[0]
    assert agg["disagg"] is False
    # not disaggregated: only the prefill side's parallelism, no worker counts, no decode part
    # one concurrency per agentic allocation: the job name carries that one conc
    name = (
        "multi-node agentic / p5 | kimik3 fp4 cluster:gb300-nv dynamo-vllm (TP8/DCP8)  dram KV offload"
        f" mooncake c{agg['conc'][0]}"
    )
    parsed = parse_job_name(name)
    assert parsed is not None and parsed.decode is None and parsed.prefill is not None
    assert (parsed.prefill.num, parsed.prefill.dcp, parsed.concs) == (None, 8, tuple(agg["conc"]))
    assert job_matches_point(parsed, agg)
    # the same topology without its offload words is another job (a GPU-resident row's)
    resident = parse_job_name(name.replace(" dram KV offload mooncake", ""))
    assert resident is not None and not job_matches_point(resident, agg)


@pytest.mark.parametrize("rows", [DSV4, QWEN, KIMI_AGG], ids=["dsv4", "qwen", "kimi-agg"])
def test_the_simulators_names_are_the_bots_jobs(rows: list[dict[str, Any]]) -> None:
    """Every row's sim-rendered job (and eval job) is assigned to that row and no other."""
    # e2e-tests.yml calls the template under `multi-node agentic /` for agentic-coding rows
    agentic = rows[0].get("scenario-type") == "agentic-coding"
    caller, eval_caller = (
        ("multi-node agentic /", "multi-node agentic eval /")
        if agentic
        else ("multi-node /", "multi-node eval /")
    )
    wf_jobs = [{"id": 1, "name": "get-jobs"}]
    wf_jobs += [{"id": 10 + i, "name": job_name(caller, r)} for i, r in enumerate(rows)]
    got = assign_jobs(wf_jobs, rows)
    assert {i: j["id"] for i, j in got.items()} == {i: 10 + i for i in range(len(rows))}
    evals = [r | {"run-eval": True, "eval-only": True} for r in rows]
    eval_jobs: list[dict[str, Any]] = [
        {"id": 100 + i, "name": job_name(eval_caller, r)} for i, r in enumerate(evals)
    ]
    assert all(j["name"].endswith(" | eval-only") for j in eval_jobs)
    got = assign_jobs(wf_jobs + eval_jobs, evals)
    assert {i: j["id"] for i, j in got.items()} == {i: 100 + i for i in range(len(rows))}
