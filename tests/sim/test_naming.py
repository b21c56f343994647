"""The simulator's job and artifact names (sim.naming, written by hand) against the templates'
own expressions (tests/sim/ghexpr.py evaluates them): for every row of both master files in the
default, evals-only and all-evals modes, each e2e-tests.yml caller's `with:` is evaluated on the
row, the template's inputs typed as it declares them, and then its job `name:`, the
``RESULT_FILENAME_BASE`` of its launch step and the name of every `upload-artifact` step whose
`if:` holds on a successful job."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim import naming
from sim.matrix import test_config
from sim.matrix_evals import EvalMode
from sim.runs import e2e_families
from tests.sim.ghexpr import condition, interpolate, to_str

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "inferencex"
WF = FIX / "workflows"
NODE = "mi355x-amds_03"
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
RESULTS = ("bmk_", "eval_", "power_audit_")


@functools.cache
def _workflow(name: str) -> dict[str, Any]:
    doc = yaml.load((WF / name).read_text(), Loader=LOADER)
    doc["on"] = doc.get("on", doc.get(True))
    return doc


def _caller(name: str) -> dict[str, Any]:
    jobs = _workflow("e2e-tests.yml")["jobs"]
    return next(j for j in jobs.values() if j.get("name") == name)


def _typed(value: Any, spec: dict[str, Any]) -> Any:
    kind = spec.get("type", "string")
    if kind == "boolean":
        return value if isinstance(value, bool) else to_str(value).lower() == "true"
    if kind == "number":
        return float(value) if value not in (None, "") else None
    return to_str(value)


def _template_inputs(caller: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    # get-jobs' score_matrix adds each row's priority (utils/ci_priority.py); the sim's is fixed
    config = {**row, "priority": naming.SIM_PRIORITY}
    context = {"matrix": {"config": config}, "inputs": {}, "github": {"event": {"inputs": {}}}}
    given = {k: interpolate(v, context) for k, v in (caller.get("with") or {}).items()}
    declared = _workflow(caller["uses"].rsplit("/", 1)[-1])["on"]["workflow_call"]["inputs"]
    return {
        k: _typed(given[k] if k in given else spec.get("default", ""), spec or {})
        for k, spec in declared.items()
    }


def _env(block: dict[str, Any] | None, context: dict[str, Any]) -> dict[str, str]:
    return {k: to_str(interpolate(v, context)) for k, v in (block or {}).items()}


def play(caller_name: str, row: dict[str, Any]) -> tuple[str, str, set[str]]:
    """(job name, RESULT_FILENAME, uploaded artifact names) as the template makes them."""
    caller = _caller(caller_name)
    template = _workflow(caller["uses"].rsplit("/", 1)[-1])
    job = template["jobs"]["benchmark"]
    context: dict[str, Any] = {"inputs": _template_inputs(caller, row), "runner": {"name": NODE}}
    context["env"] = _env(template.get("env"), context)
    context["env"] |= _env(job.get("env"), context)
    name = to_str(interpolate(job["name"], context))
    launch = next(s for s in job["steps"] if "RESULT_FILENAME_BASE" in (s.get("env") or {}))
    rf = to_str(interpolate(launch["env"]["RESULT_FILENAME_BASE"], context))
    context["env"] = {**context["env"], "RESULT_FILENAME": rf}
    uploads = {
        to_str(interpolate(step["with"]["name"], context))
        for step in job["steps"]
        if str(step.get("uses", "")).startswith("actions/upload-artifact")
        and condition(step.get("if"), context)
    }
    return name, rf, uploads


@functools.cache
def _jobs(file: str, mode: EvalMode) -> list[tuple[str, dict[str, Any]]]:
    master = yaml.load((FIX / "configs" / f"{file}.yaml").read_text(), Loader=LOADER)
    runners = yaml.load((FIX / "runners.yaml").read_text(), Loader=LOADER)
    return e2e_families(test_config(master, list(master), runners, mode))


@pytest.mark.parametrize("mode", [EvalMode.DEFAULT, EvalMode.ONLY, EvalMode.ALL], ids=lambda m: m.value)
@pytest.mark.parametrize("file", ["amd-master", "nvidia-master"])
def test_names_are_the_templates(file: str, mode: EvalMode) -> None:
    jobs = _jobs(file, mode)
    callers = {c for c, _ in jobs}
    assert len(callers) >= (4 if mode is EvalMode.DEFAULT else 3), callers
    wrong: list[str] = []
    for caller, row in jobs:
        name, rf, uploads = play(caller, row)
        if row.get("eval-only"):
            # an eval-only job writes no throughput file (EVALS.md: run_benchmark_serving is
            # skipped), so the agentic result steps, whose `if:` still holds, find nothing to upload
            uploads = {n for n in uploads if not n.startswith(("bmk_", "power_audit_", "agentic_"))}
        sim_rf = naming.result_filename(row, NODE)
        sim_names = set(naming.uploads(row, sim_rf, lambda c: {}, dict))
        if naming.job_name(caller, row) != f"{caller} {name}":
            wrong.append(f"name {naming.job_name(caller, row)!r} != {caller} {name!r}")
        if sim_rf != rf:
            wrong.append(f"RESULT_FILENAME {sim_rf!r} != {rf!r}")
        if {n for n in sim_names if n.startswith(RESULTS)} != {n for n in uploads if n.startswith(RESULTS)}:
            wrong.append(f"uploads {sorted(sim_names)} != {sorted(uploads)}")
        elif not sim_names <= uploads:
            wrong.append(f"uploads {sorted(sim_names - uploads)} not in the template's {sorted(uploads)}")
    assert not wrong, f"{len(wrong)} of {len(jobs)} jobs: {wrong[:3]}"


def test_a_multinode_job_holds_one_agg_file_per_concurrency() -> None:
    caller, row = next((c, r) for c, r in _jobs("amd-master", EvalMode.DEFAULT) if c == "multi-node /")
    rf = naming.result_filename(row, NODE)
    made = naming.uploads(row, rf, lambda c: {"conc": c}, dict)
    assert sorted(made[f"bmk_{rf}"]) == sorted(f"agg_{rf}_conc{c}.json" for c in row["conc"])
    assert "_prefill-tp" in rf and "-nw" in rf and f"_conc{'x'.join(map(str, row['conc']))}_{NODE}" in rf
