"""Jobs and result artifacts found for every family, as the real templates name them.

For every key of both master files at 843c6254 (tests/fixtures/inferencex/configs/), one run holds
what e2e-tests.yml makes of the key's rows: a throughput job per row (`single-node /`,
`multi-node /`, `agentic /`, `multi-node agentic /`) and an eval-only job per evaluated row
(`eval /`, `multi-node eval /`, `agentic eval /`, `multi-node agentic eval /`), each uploading what
its template uploads. The job names and RESULT_FILENAME are rendered here from the templates'
expressions (benchmark-tmpl.yml, benchmark-multinode-tmpl.yml), written apart from app.core;
`test_the_renderers_follow_the_templates` pins the template text they were written from.
"""

from __future__ import annotations

from collections import Counter
from functools import cache
from typing import Any

import pytest

from app.core.artifacts import select_bmk_artifact, select_eval_artifact
from app.core.recipes import parse_master
from app.core.recipes.evals import EvalMode, plan_evals
from app.core.recipes.expand import plan_dicts
from app.core.runmatch import assign_jobs
from tests.conftest import FIXTURES

INFERENCEX = FIXTURES / "inferencex"
WORKFLOWS = INFERENCEX / "workflows"
NODE = "gpu-node_07"
SHORT = {"sglang": "sgl", "dynamo-sglang": "dyn-sgl", "sglang-disagg": "sgl-disagg"}


def _b(value: Any) -> str:
    return "true" if value else "false"


def _par(w: dict[str, Any], *, tp_key: str = "tp") -> str:
    out = f"TP{w[tp_key]}"
    for field, tag in (("pp", "PP"), ("dcp-size", "DCP"), ("pcp-size", "PCP"), ("ep", "EP")):
        if str(w.get(field, 1)) != "1":
            out += f"/{tag}{w[field]}"
    return out + ("/DPA" if w.get("dp-attn") else "")


def _words(row: dict[str, Any]) -> str:
    spec = row["spec-decoding"] if row["spec-decoding"] != "none" else ""
    kv = row.get("kv-offloading", "")
    kv_words = f"{kv} KV offload" if kv not in ("", "none") else ""
    backend = (row.get("kv-offload-backend") or {}).get("name", "")
    return f"{spec} {kv_words} {backend if backend not in ('none', 'default') else ''}"


def job_name(caller: str, row: dict[str, Any], *, eval_job: bool) -> str:
    """The `name:` of benchmark-tmpl.yml / benchmark-multinode-tmpl.yml (folded, `>-`)."""
    framework = SHORT.get(row["framework"], row["framework"])
    head = f"{caller} p0 | {row['model-prefix']} {row['precision']} {row['runner']} {framework}"
    mark = " | eval-only" if eval_job else ""
    if "prefill" in row:
        p, d = row["prefill"], row["decode"]
        disagg = row["disagg"]
        pre = f"{p['num-worker']}P " if disagg else ""
        dec = f"x {d['num-worker']}D ({_par(d)})" if disagg else ""
        concs = "x".join(str(c) for c in row["conc"])
        return f"{head}\n{pre}({_par(p)})\n{dec}\n{_words(row)}\nc{concs}{mark}"
    return f"{head}\n{_par(row)}\n{_words(row)}\nc{row['conc']}{mark}"


def result_filename(row: dict[str, Any], *, eval_job: bool = False) -> str:
    """RESULT_FILENAME_BASE from the inputs e2e-tests.yml passes (agentic: disagg 'false'; its
    `agentic eval /` job passes no pp/dcp-size/pcp-size, so the template defaults '1' name it)."""
    head = f"{row['exp-name']}_{row['precision']}_{row['framework']}"
    if "prefill" in row:

        def worker(w: dict[str, Any]) -> str:
            return (
                f"tp{w['tp']}-pp{w['pp']}-dcp{w['dcp-size']}-pcp{w['pcp-size']}-ep{w['ep']}"
                f"-dp{_b(w['dp-attn'])}-nw{w['num-worker']}"
            )

        concs = "x".join(str(c) for c in row["conc"])
        return (
            f"{head}_prefill-{worker(row['prefill'])}_decode-{worker(row['decode'])}_disagg-{_b(row['disagg'])}"
            f"_spec-{row['spec-decoding']}_conc{concs}_{NODE}"
        )
    agentic = row.get("scenario-type") == "agentic-coding"
    pp, dcp, pcp = ("1", "1", "1") if agentic and eval_job else (row["pp"], row["dcp-size"], row["pcp-size"])
    disagg = "false" if agentic else _b(row["disagg"])
    return (
        f"{head}_tp{row['tp']}-pp{pp}-dcp{dcp}-pcp{pcp}-ep{row['ep']}-dpa{_b(row['dp-attn'])}"
        f"_disagg-{disagg}_spec-{row['spec-decoding']}_conc{row['conc']}_{NODE}"
    )


def uploads(row: dict[str, Any], *, eval_job: bool) -> list[str]:
    """The artifact names one job uploads (the templates' upload-artifact steps)."""
    multi, agentic = "prefill" in row, row.get("scenario-type") == "agentic-coding"
    rf = result_filename(row, eval_job=eval_job)
    if eval_job:
        logs = [] if multi else [f"eval_server_logs_{rf}", f"eval_gpu_metrics_{rf}"]
        return [f"eval_{rf}" if multi else f"eval_{row['exp-name']}_{rf}", *logs]
    if agentic:
        return [f"bmk_agentic_{rf}", f"agentic_{rf}"] + ([] if multi else [f"server_logs_{rf}"])
    if multi:
        return [f"bmk_{rf}", f"power_audit_{rf}", f"multinode_server_logs_{rf}"]
    return [f"bmk_{rf}", f"server_logs_{rf}", f"gpu_metrics_{rf}", f"power_audit_{rf}"]


def family(row: dict[str, Any]) -> str:
    nodes = "multi-node" if "prefill" in row else "single-node"
    return f"{nodes} {'agentic' if row.get('scenario-type') == 'agentic-coding' else 'fixed'}"


def _caller(row: dict[str, Any], eval_job: bool) -> str:
    multi, agentic = "prefill" in row, row.get("scenario-type") == "agentic-coding"
    base = {(False, False): "single-node", (True, False): "multi-node", (False, True): "agentic"}.get(
        (multi, agentic), "multi-node agentic"
    )
    if eval_job:
        return {"single-node": "eval /"}.get(base, f"{base} eval /")
    return f"{base} /"


@cache
def _keys() -> list[tuple[dict[str, Any], str]]:
    out = []
    for name in ("amd-master", "nvidia-master"):
        master = parse_master((INFERENCEX / "configs" / f"{name}.yaml").read_text(encoding="utf-8"))
        out += [(master, str(k)) for k in master]
    return out


def _run(
    master: dict[str, Any], key: str, mode: EvalMode
) -> tuple[list[dict[str, Any]], list[dict], list[dict]]:
    """(the key's rows under ``mode``, the run's jobs, the run's artifacts)."""
    rows = plan_evals(plan_dicts(master, key), mode)
    jobs: list[dict[str, Any]] = [{"id": 1, "name": "get-jobs"}]
    artifacts: list[dict[str, Any]] = []
    for row in rows:
        for eval_job in (False, True):
            if eval_job != bool(row.get("eval-only")) and not (eval_job and row.get("run-eval")):
                continue
            jobs.append(
                {"id": len(jobs) + 1, "name": job_name(_caller(row, eval_job), row, eval_job=eval_job)}
            )
            artifacts += [{"id": len(artifacts) + 1, "name": n} for n in uploads(row, eval_job=eval_job)]
    return rows, jobs, artifacts


@pytest.mark.parametrize("mode", [EvalMode.DEFAULT, EvalMode.ONLY])
def test_every_row_finds_its_own_job_and_artifacts(mode: EvalMode) -> None:
    found: Counter[str] = Counter()
    total: Counter[str] = Counter()
    twins: Counter[str] = Counter()
    misses: list[str] = []
    for master, key in _keys():
        rows, jobs, artifacts = _run(master, key, mode)
        names = Counter(result_filename(r) for r in rows)
        assigned = assign_jobs(jobs, rows)
        for i, row in enumerate(rows):
            fam = family(row) + (" eval" if row.get("eval-only") else "")
            total[fam] += 1
            want_job = job_name(
                _caller(row, bool(row.get("eval-only"))), row, eval_job=bool(row.get("eval-only"))
            )
            ok = i in assigned and " ".join(assigned[i]["name"].split()) == " ".join(want_job.split())
            if row.get("eval-only"):
                got = select_eval_artifact(artifacts, row)
                want = uploads(row, eval_job=True)[0]
                ok = ok and got.artifact is not None and got.artifact["name"] == want
            else:
                chosen = select_bmk_artifact(artifacts, row)
                want = uploads(row, eval_job=False)[0]
                ok = ok and chosen.artifact is not None and chosen.artifact["name"] == want
                if ok and row.get("run-eval"):
                    ev = select_eval_artifact(artifacts, row)
                    ok = ev.artifact is not None and ev.artifact["name"] == uploads(row, eval_job=True)[0]
            if ok:
                found[fam] += 1
            elif names[result_filename(row)] > 1:
                twins[fam] += 1  # rows the repo itself names alike (same job name and file name)
            else:
                misses.append(f"{key}: {fam} {result_filename(row)}")
    print(
        f"\n{mode.value}: "
        + ", ".join(f"{f} {found[f]}/{total[f]} (twins {twins[f]})" for f in sorted(total))
    )
    assert misses == []
    assert sum(total.values()) > 1000 if mode == EvalMode.DEFAULT else sum(total.values()) > 300


def test_result_files_inside_the_artifact_per_family() -> None:
    master, key = next((m, k) for m, k in _keys() if k == "dsr1-fp4-b200-dynamo-sglang")
    row = plan_evals(plan_dicts(master, key))[0]
    rf = result_filename(row)
    chosen = select_bmk_artifact(
        [{"id": 1, "name": f"bmk_{rf}"}, {"id": 2, "name": f"power_audit_{rf}"}], row
    )
    assert chosen.name is not None
    members = [f"agg_{rf}_conc{c}_gpus_12_ctx_4_gen_8.json" for c in row["conc"]] + [f"{rf}_conc1.json"]
    assert chosen.name.members(members) == sorted(members[:-1])  # one agg_ file per conc, never the raw
    agentic_master, agentic_key = next(
        (m, k) for m, k in _keys() if k.startswith("qwen3.5") and "agentic" in k
    )
    arow = plan_evals(plan_dicts(agentic_master, agentic_key))[0]
    arf = result_filename(arow)
    pick = select_bmk_artifact(
        [{"id": 1, "name": f"agentic_{arf}"}, {"id": 2, "name": f"bmk_agentic_{arf}"}], arow
    )
    assert pick.artifact is not None and pick.artifact["id"] == 2
    assert pick.name is not None and pick.name.members([f"{arf}.json", f"agg_{arf}.json"]) == [f"{arf}.json"]


def test_ties_are_broken_by_the_jobs_own_fields() -> None:
    """A `spec-decoding: none` row and an `mtp` row of one topology, a GPU-resident agentic row and
    its KV-offload twin: each finds its own job whatever the order of the run's jobs."""
    base = {
        "model-prefix": "m", "precision": "fp4", "runner": "b200", "framework": "vllm", "tp": 8, "pp": 1,
        "dcp-size": 1, "pcp-size": 1, "ep": 1, "dp-attn": False, "conc": 32, "isl": 8192, "osl": 1024,
        "exp-name": "m_8k1k", "disagg": False,
    }  # fmt: skip
    rows = [{**base, "spec-decoding": "none"}, {**base, "spec-decoding": "mtp"}]
    agentic = {k: v for k, v in base.items() if k not in ("isl", "osl", "disagg")}
    agentic.update(
        {"scenario-type": "agentic-coding", "spec-decoding": "none", "exp-name": "m_tp8_conc32_kvnone"}
    )
    offload = {**agentic, "kv-offloading": "dram", "kv-offload-backend": {"name": "lmcache"}}
    rows += [{**agentic, "kv-offloading": "none"}, offload]
    # a fixed-seq-len row and an agentic row can share a name but never a caller (`single-node /`
    # vs `agentic /`): the caller decides
    for order in (rows, rows[::-1]):
        jobs = [
            {"id": i, "name": job_name(_caller(r, False), r, eval_job=False)} for i, r in enumerate(order)
        ]
        got = assign_jobs(jobs, rows)
        assert {i: order[j["id"]] for i, j in got.items()} == dict(enumerate(rows))


def test_the_renderers_follow_the_templates() -> None:
    single = (WORKFLOWS / "benchmark-tmpl.yml").read_text(encoding="utf-8")
    multi = (WORKFLOWS / "benchmark-multinode-tmpl.yml").read_text(encoding="utf-8")
    assert (
        "_tp${{ env.TP }}-pp${{ env.PP_SIZE }}-dcp${{ env.DCP_SIZE }}-pcp${{ env.PCP_SIZE }}"
        "-ep${{ env.EP_SIZE }}-dpa${{ env.DP_ATTENTION }}_disagg-${{ env.DISAGG }}"
        "_spec-${{ env.SPEC_DECODING }}_conc${{ env.CONC }}"
    ) in single
    assert "name: bmk_agentic_${{ env.RESULT_FILENAME }}" in single
    assert "name: eval_${{ env.EXP_NAME }}_${{ env.RESULT_FILENAME }}" in single
    assert (
        "_prefill-tp${{ env.PREFILL_TP }}-pp${{ env.PREFILL_PP_SIZE }}-dcp${{ env.PREFILL_DCP_SIZE }}"
        "-pcp${{ env.PREFILL_PCP_SIZE }}-ep${{ env.PREFILL_EP }}-dp${{ env.PREFILL_DP_ATTN }}"
        "-nw${{ env.PREFILL_NUM_WORKERS }}_decode-tp"
    ) in multi
    assert "_conc${{ join(fromJson(inputs.conc-list), 'x') }}_${{ runner.name }}" in multi
    assert "name: eval_${{ env.RESULT_FILENAME }}" in multi
    assert "path: agg_${{ env.RESULT_FILENAME }}_*.json" in multi
    assert (
        "format('{0} KV offload', inputs.kv-offloading)" in single
        and "format('{0}P ', inputs.prefill-num-worker)" in multi
    )
