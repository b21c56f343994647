"""Which workflow job is which point's (app.core.runmatch): a parsed job name against a plan point,
field by field with every default, the multi-node workers, the seq-len of run-sweep.yml's callers,
and the assignment of a run's jobs to points in matrix order (with and without ranks).

Names are written as the real templates render them (tests/fixtures/inferencex/workflows/,
InferenceX 843c6254; the multi-node format as app.core.runmatch's docstring says)."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.runmatch import (
    JobName,
    Worker,
    _seq_of,
    _worker_is,
    _workers_match,
    assign_jobs,
    job_matches_point,
    parse_job_name,
)

POINT: dict[str, Any] = {
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
NAME = "single-node / p50 | dsr1 fp8 mi355x sgl TP8/PP2/DCP3/PCP4/EP5/DPA mtp c64"


def job(name: str) -> JobName:
    parsed = parse_job_name(name)
    assert parsed is not None, name
    return parsed


def matches(name: str, point: dict[str, Any], **kw: Any) -> bool:
    return job_matches_point(job(name), point, **kw)


# ------------------------------------------------------------------------- single node


def test_a_single_node_name_parsed() -> None:
    assert job(NAME + " | eval") == JobName(
        caller="single-node /",
        priority=50,
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
        eval="eval",
    )
    assert parse_job_name("collect-results") is None and parse_job_name("get-jobs / get-jobs") is None


def test_the_points_own_job_matches() -> None:
    assert matches(NAME, POINT)


@pytest.mark.parametrize(
    ("name", "point"),
    [
        (NAME.replace("dsr1", "dsv4"), POINT),
        (NAME.replace("fp8", "fp4"), POINT),
        (NAME.replace("mi355x", "mi300x"), POINT),
        (NAME.replace("sgl", "vllm"), POINT),
        (NAME.replace(" sgl ", " sglang "), POINT),  # the name carries the short form
        (NAME.replace(" mtp", ""), POINT),
        (NAME.replace(" mtp", " mtp dram"), POINT),
        (NAME.replace("TP8", "TP4"), POINT),
        (NAME.replace("c64", "c32"), POINT),
        (NAME.replace("/DPA", ""), POINT),
        (NAME.replace("/EP5", "/EP6"), POINT),
        (NAME.replace("/PCP4", "/PCP2"), POINT),
        (NAME.replace("/DCP3", "/DCP2"), POINT),
        (NAME.replace("/PP2", "/PP3"), POINT),
    ],
)
def test_any_field_that_differs_is_another_points_job(name: str, point: dict[str, Any]) -> None:
    assert not matches(name, point)


@pytest.mark.parametrize("framework", ["dynamo-sglang", "vllm"])
def test_the_framework_short_forms_both_ways(framework: str) -> None:
    short = {"dynamo-sglang": "dyn-sgl"}.get(framework, framework)
    assert matches(NAME.replace(" sgl ", f" {short} "), POINT | {"framework": framework})


BARE = "p1 | m p r vllm TP{tp}{par} c{conc}"
BARE_POINT: dict[str, Any] = {"model-prefix": "m", "precision": "p", "runner": "r", "framework": "vllm"}


@pytest.mark.parametrize(
    ("missing", "default_name", "other_name"),
    [
        ("tp", BARE.format(tp=0, par="", conc=1), BARE.format(tp=1, par="", conc=1)),
        ("conc", BARE.format(tp=1, par="", conc=0), BARE.format(tp=1, par="", conc=1)),
        ("pp", BARE.format(tp=1, par="", conc=1), BARE.format(tp=1, par="/PP2", conc=1)),
        ("dcp-size", BARE.format(tp=1, par="", conc=1), BARE.format(tp=1, par="/DCP2", conc=1)),
        ("pcp-size", BARE.format(tp=1, par="", conc=1), BARE.format(tp=1, par="/PCP2", conc=1)),
        ("ep", BARE.format(tp=1, par="", conc=1), BARE.format(tp=1, par="/EP2", conc=1)),
        ("dp-attn", BARE.format(tp=1, par="", conc=1), BARE.format(tp=1, par="/DPA", conc=1)),
    ],
)
def test_a_field_the_point_lacks_takes_its_default(missing: str, default_name: str, other_name: str) -> None:
    full = BARE_POINT | {"tp": 1, "conc": 1, "pp": 1, "dcp-size": 1, "pcp-size": 1, "ep": 1, "dp-attn": False}
    point = {k: v for k, v in full.items() if k != missing}
    assert matches(default_name, point)
    assert not matches(other_name, point)


# ----------------------------------------------------------------------------- eval jobs


def test_an_eval_only_job_is_the_eval_job_of_the_point() -> None:
    eval_name = f"eval / {NAME.split(' / ', 1)[1]} | eval-only"
    assert not matches(eval_name, POINT)
    assert matches(eval_name, POINT, eval_job=True)
    assert not matches(NAME, POINT, eval_job=True)
    assert matches(NAME, POINT, eval_job=False)
    # an eval-only point runs as its eval job by default
    assert matches(eval_name, POINT | {"eval-only": True})
    assert not matches(NAME, POINT | {"eval-only": True})
    # `| eval` (throughput with its eval in the same job) is the throughput job
    assert matches(NAME + " | eval", POINT)


# ------------------------------------------------------------------ seq-len and agentic


@pytest.mark.parametrize(
    ("caller", "point", "ok"),
    [
        ("single-node 8k1k /", POINT, True),
        ("single-node 1k1k /", POINT, False),
        ("single-node /", POINT | {"isl": 1024}, True),  # e2e-tests.yml: no seq-len in the caller
        ("single-node 1k1k /", POINT | {"isl": 1024}, True),
        ("single-node 8k1k /", POINT | {"isl": 1024}, False),
        ("single-node 8k1k /", {k: v for k, v in POINT.items() if k not in ("isl", "osl")}, True),
        ("", POINT, True),
    ],
)
def test_run_sweeps_callers_carry_the_seq_len(caller: str, point: dict[str, Any], ok: bool) -> None:
    name = NAME.replace("single-node /", caller).strip()
    assert matches(name, point) is ok


AGENTIC_NAME = "p5 | kimik3 fp4 b200 vllm TP8 c4"
AGENTIC_POINT: dict[str, Any] = {
    "model-prefix": "kimik3",
    "precision": "fp4",
    "runner": "b200",
    "framework": "vllm",
    "tp": 8,
    "conc": 4,
    "scenario-type": "agentic-coding",
}


@pytest.mark.parametrize(
    ("caller", "agentic", "ok"),
    [
        ("agentic /", True, True),
        ("agentic eval /", True, True),
        ("single-node /", True, False),
        ("agentic /", False, False),
        ("single-node /", False, True),
        ("", True, True),  # no caller (point_job_name's): the caller does not decide
        ("", False, True),
    ],
)
def test_the_agentic_callers_hold_the_agentic_points(caller: str, agentic: bool, ok: bool) -> None:
    point = AGENTIC_POINT if agentic else {k: v for k, v in AGENTIC_POINT.items() if k != "scenario-type"}
    assert matches(f"{caller} {AGENTIC_NAME}".strip(), point) is ok


# ------------------------------------------------------------------------------ seq names


@pytest.mark.parametrize(
    ("point", "seq"),
    [
        ({"isl": 1024, "osl": 1024}, "1k1k"),
        ({"isl": 8192, "osl": 1024}, "8k1k"),
        ({"isl": 2048, "osl": 128}, "2048_128"),
        ({"isl": 1024, "osl": 1024, "exp-name": "dsr1_8k1k"}, "1k1k"),  # isl/osl first
        ({"isl": 1024, "exp-name": "dsr1_8k1k"}, "8k1k"),  # no osl: the exp-name's tail
        ({"osl": 1024, "isl": None, "exp-name": "dsr1_8k1k"}, "8k1k"),
        ({"exp-name": "dsr1_fp8_1k1k"}, "1k1k"),
        ({"exp-name": "8k1k"}, "8k1k"),
        ({"exp-name": "dsr1_8k1kx"}, ""),
        ({"exp-name": "kimik3_p1x8_d0x8_conc1"}, ""),
        ({"exp-name": None}, ""),
        ({}, ""),
    ],
)
def test_seq_of(point: dict[str, Any], seq: str) -> None:
    assert _seq_of(point) == seq


# ------------------------------------------------------------------------------ multi-node

DISAGG_NAME = (
    "multi-node 8k1k / p37 | dsv4 fp4 gb300-nv dynamo-trt 1P (TP4/EP4/DPA) x 4D (TP8/EP8) mtp   c8x16x4"
)
DISAGG_POINT: dict[str, Any] = {
    "model-prefix": "dsv4",
    "precision": "fp4",
    "runner": "gb300-nv",
    "framework": "dynamo-trt",
    "spec-decoding": "mtp",
    "isl": 8192,
    "osl": 1024,
    "disagg": True,
    "prefill": {"num-worker": 1, "tp": 4, "pp": 1, "dcp-size": 1, "pcp-size": 1, "ep": 4, "dp-attn": True},
    "decode": {"num-worker": 4, "tp": 8, "pp": 1, "dcp-size": 1, "pcp-size": 1, "ep": 8, "dp-attn": False},
    "conc": [8, 16, 4],
}
AGG_NAME = "multi-node / p5 | kimik3 fp4 cluster:gb300-nv dynamo-vllm (TP8/DCP8)  c48"
AGG_POINT: dict[str, Any] = {
    "model-prefix": "kimik3",
    "precision": "fp4",
    "runner": "cluster:gb300-nv",
    "framework": "dynamo-vllm",
    "disagg": False,
    "prefill": {"num-worker": 1, "tp": 8, "dcp-size": 8},
    "decode": {"num-worker": 0, "tp": 8, "dcp-size": 8},
    "conc": [48],
}


def test_a_disaggregated_name_parsed() -> None:
    assert job(DISAGG_NAME + " | eval-only") == JobName(
        caller="multi-node 8k1k /",
        priority=37,
        model_prefix="dsv4",
        precision="fp4",
        runner="gb300-nv",
        framework="dynamo-trt",
        tp=4,
        pp=1,
        dcp=1,
        pcp=1,
        ep=4,
        dpa=True,
        extras=("mtp",),
        conc=16,
        eval="eval-only",
        prefill=Worker(1, 4, 1, 1, 1, 4, True),
        decode=Worker(4, 8, 1, 1, 1, 8, False),
        concs=(8, 16, 4),
    )


def test_an_aggregated_name_parsed() -> None:
    assert job("p-3 | m p r dyn (TP2/PP3/DCP4/PCP5/EP6/DPA) c7") == JobName(
        caller="",
        priority=-3,
        model_prefix="m",
        precision="p",
        runner="r",
        framework="dyn",
        tp=2,
        pp=3,
        dcp=4,
        pcp=5,
        ep=6,
        dpa=True,
        extras=(),
        conc=7,
        eval="",
        prefill=Worker(None, 2, 3, 4, 5, 6, True),
        decode=None,
        concs=(7,),
    )


def test_multinode_points_match_their_jobs() -> None:
    assert matches(DISAGG_NAME, DISAGG_POINT)
    assert matches(AGG_NAME, AGG_POINT)
    assert matches(AGG_NAME, AGG_POINT | {"conc": 48})  # one conc, not in a list
    assert not matches(AGG_NAME.replace("vllm", "sglang"), AGG_POINT)  # the recipe first


@pytest.mark.parametrize(
    ("name", "point"),
    [
        (DISAGG_NAME.replace("c8x16x4", "c8x16"), DISAGG_POINT),
        (DISAGG_NAME.replace("c8x16x4", "c16x8x4"), DISAGG_POINT),  # the list in order
        (DISAGG_NAME.replace("1P", "2P"), DISAGG_POINT),
        (DISAGG_NAME.replace("4D", "3D"), DISAGG_POINT),
        (DISAGG_NAME.replace("(TP8/EP8)", "(TP8/EP4)"), DISAGG_POINT),
        (DISAGG_NAME.replace("/DPA", ""), DISAGG_POINT),
        (DISAGG_NAME, DISAGG_POINT | {"disagg": False}),
        (DISAGG_NAME, {k: v for k, v in DISAGG_POINT.items() if k != "disagg"}),
        (DISAGG_NAME, DISAGG_POINT | {"decode": None}),
        (AGG_NAME, AGG_POINT | {"disagg": True}),
        (AGG_NAME.replace("c48", "c4"), AGG_POINT),
        (AGG_NAME.replace("TP8/DCP8", "TP8"), AGG_POINT),
    ],
)
def test_multinode_points_differ_by_workers_and_concs(name: str, point: dict[str, Any]) -> None:
    assert not matches(name, point)


def test_multinode_and_single_node_never_cross() -> None:
    single_point = {k: v for k, v in AGG_POINT.items() if k not in ("prefill", "decode", "disagg")}
    assert not matches(AGG_NAME, single_point | {"tp": 8, "dcp-size": 8, "conc": 48})
    assert not matches("p5 | kimik3 fp4 cluster:gb300-nv dynamo-vllm TP8/DCP8 c48", AGG_POINT)


def test_a_point_with_workers_is_judged_by_its_workers_alone() -> None:
    """Even when it also carries the single-node fields a single-node job would match."""
    point = AGG_POINT | {"conc": 48, "tp": 8, "dcp-size": 8}
    assert not matches("p5 | kimik3 fp4 cluster:gb300-nv dynamo-vllm TP8/DCP8 c48", point)
    assert matches(AGG_NAME, point)


def test_workers_match_reads_conc_defaults() -> None:
    zero = job("p1 | m p r f (TP1) c0")
    assert _workers_match(zero, {"prefill": {"tp": 1}})  # no conc: 0, no disagg: aggregated
    assert not _workers_match(zero, {"prefill": {"tp": 1}, "conc": 1})
    assert _workers_match(job("p1 | m p r f (TP1) c3x1"), {"prefill": {"tp": 1}, "conc": (3, 1)})


def test_workers_match_counts_only_when_disaggregated() -> None:
    agg = job("p1 | m p r f (TP1) c1")
    assert _workers_match(agg, {"prefill": {"tp": 1, "num-worker": 9}, "conc": 1})
    disagg = job("p1 | m p r f 2P (TP1) x 3D (TP2) c1")
    point = {
        "disagg": True,
        "prefill": {"tp": 1, "num-worker": 2},
        "decode": {"tp": 2, "num-worker": 3},
        "conc": 1,
    }
    assert _workers_match(disagg, point)
    assert not _workers_match(disagg, point | {"prefill": {"tp": 1, "num-worker": 1}})
    assert not _workers_match(disagg, point | {"decode": {"tp": 2, "num-worker": 1}})
    assert not _workers_match(disagg, point | {"decode": {"tp": 1, "num-worker": 3}})
    assert not _workers_match(disagg, point | {"conc": 2})


WORKER = Worker(3, 4, 5, 6, 7, 8, True)
WANT: dict[str, Any] = {
    "num-worker": 3,
    "tp": 4,
    "pp": 5,
    "dcp-size": 6,
    "pcp-size": 7,
    "ep": 8,
    "dp-attn": True,
}


def test_worker_is_field_by_field() -> None:
    assert _worker_is(WORKER, WANT, counted=True)
    for field, other in (
        ("tp", 1),
        ("pp", 1),
        ("dcp-size", 1),
        ("pcp-size", 1),
        ("ep", 1),
        ("dp-attn", False),
    ):
        assert not _worker_is(WORKER, WANT | {field: other}, counted=True), field
        assert not _worker_is(WORKER, WANT | {field: other}, counted=False), field
    assert not _worker_is(WORKER, WANT | {"num-worker": 2}, counted=True)
    assert _worker_is(WORKER, WANT | {"num-worker": 2}, counted=False)


def test_worker_is_defaults_and_absent_sides() -> None:
    assert _worker_is(Worker(0, 0, 1, 1, 1, 1, False), {}, counted=True)
    assert not _worker_is(Worker(1, 0, 1, 1, 1, 1, False), {}, counted=True)
    assert not _worker_is(Worker(0, 1, 1, 1, 1, 1, False), {}, counted=True)
    assert not _worker_is(Worker(0, 0, 2, 1, 1, 1, False), {}, counted=True)
    assert not _worker_is(Worker(0, 0, 1, 2, 1, 1, False), {}, counted=True)
    assert not _worker_is(Worker(0, 0, 1, 1, 2, 1, False), {}, counted=True)
    assert not _worker_is(Worker(0, 0, 1, 1, 1, 2, False), {}, counted=True)
    assert not _worker_is(Worker(0, 0, 1, 1, 1, 1, True), {}, counted=True)
    assert not _worker_is(None, WANT, counted=False)
    assert not _worker_is(WORKER, None, counted=False)
    assert not _worker_is(WORKER, [WANT], counted=False)


# ------------------------------------------------------------------------------ assign_jobs


def _jobs(*names: str) -> list[dict[str, Any]]:
    return [{"id": 100 + i, "name": n} for i, n in enumerate(names)]


ONE_K = POINT | {"isl": 1024}  # the same name as POINT in e2e-tests.yml (no seq-len in the caller)


def test_points_sharing_a_name_take_the_jobs_in_matrix_order() -> None:
    wf_jobs: list[dict[str, Any]] = [
        {"id": 1, "name": "get-jobs"},
        {"id": 2},
        *_jobs(NAME, NAME, "single-node / p50 | other"),
    ]
    got = assign_jobs(wf_jobs, [POINT, ONE_K, POINT | {"conc": 1}])
    assert {i: j["id"] for i, j in got.items()} == {0: 100, 1: 101}


def test_a_ranked_point_takes_the_rank_th_job_of_its_name() -> None:
    wf_jobs = _jobs(NAME, NAME, NAME)
    got = assign_jobs(wf_jobs, [POINT, ONE_K], ranks=[2, 0])
    assert {i: j["id"] for i, j in got.items()} == {0: 102, 1: 100}


def test_ranked_points_go_first_and_the_unranked_take_what_is_left() -> None:
    wf_jobs = _jobs(NAME, NAME, NAME)
    got = assign_jobs(wf_jobs, [POINT, ONE_K, POINT], ranks=[None, 0, None])
    assert {i: j["id"] for i, j in got.items()} == {0: 101, 1: 100, 2: 102}
    got = assign_jobs(wf_jobs, [POINT, ONE_K], ranks=[0, None])
    assert {i: j["id"] for i, j in got.items()} == {0: 100, 1: 101}


def test_a_rank_counts_only_the_jobs_of_the_points_name() -> None:
    other = NAME.replace("c64", "c8")
    wf_jobs = _jobs(other, NAME, other, NAME)
    got = assign_jobs(wf_jobs, [POINT], ranks=[0])
    assert {i: j["id"] for i, j in got.items()} == {0: 101}
    got = assign_jobs(wf_jobs, [POINT], ranks=[1])
    assert {i: j["id"] for i, j in got.items()} == {0: 103}


def test_a_rank_past_the_jobs_of_its_name_gets_none() -> None:
    wf_jobs = _jobs(NAME, NAME)
    assert assign_jobs(wf_jobs, [POINT], ranks=[2]) == {}
    assert {i: j["id"] for i, j in assign_jobs(wf_jobs, [POINT], ranks=[1]).items()} == {0: 101}


def test_no_job_for_a_point_leaves_it_out() -> None:
    assert assign_jobs(_jobs("get-jobs", NAME.replace("c64", "c8")), [POINT]) == {}
    assert assign_jobs([], [POINT], ranks=[None]) == {}
    assert assign_jobs(_jobs(NAME), []) == {}
