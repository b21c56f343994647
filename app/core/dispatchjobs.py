"""The jobs one dispatch's run really holds, pure: what e2e-tests.yml runs for a dispatched group.

The bot dispatches `test-config --config-keys K --conc C [eval flags]` (app/core/sweepspec.py), and
the repo's generator (InferenceX 843c6254, `generate_sweep_configs.py`):

* selects by key and conc only: the run has every point of the key at C, at every seq-len and tp,
  the ones a sweep's filters left out too (a multi-node row keeps the listed concs it has);
* marks its evals on the rows it generated, in the command's eval mode: with no flag, every group
  the selection (app/core/recipes/evals.py) finds in that slice, whose highest conc is C, so every
  8k1k TP group at C gets its eval job, not only the TPs whose own highest or median conc is C;
  `--evals-only` keeps those eval rows alone; `--no-evals` none.

get-jobs then splits the rows into e2e-tests.yml's families (`matrix_jobs`): a fixed-seq-len row
is a throughput job unless eval-only, plus an `eval /` (`multi-node eval /`) job when it runs an
eval; an agentic row is one job, its eval job when it runs an eval, else its throughput job.

A matrix job whose rows GitHub cannot evaluate (an output get-jobs never assigns: at 843c6254 the
`eval /` job; app/core/unexpanded_workflow.py) has none of its jobs created: it holds no runner.

So a dispatch occupies ``len`` of its matrix (``DispatchJobs.slots``), and a job of its run is one
of ours only at its place among the matrix jobs of the same name (``MatrixRank``): e2e-tests.yml's
names carry no seq-len, so the 1k1k and 8k1k points of one tp and conc share a name, and a sweep
filtered to 8k1k still has the 1k1k job in its run, first in matrix order.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core.recipes.evals import (
    EVAL_ALL_CONCS,
    EVAL_CONC,
    EVAL_ONLY,
    RUN_EVAL,
    is_agentic_point,
    is_multinode_point,
    plan_evals,
)
from app.core.recipes.expand import plan_dicts
from app.core.recipes.matrix import Hardware
from app.core.runmatch import job_matches_point, point_job_name
from app.core.sweepspec import dispatch_eval_mode, group_key, point_conc, row_concs


@dataclass(frozen=True)
class MatrixJob:
    """One job of a dispatch's run: the generated row (with the generator's eval marks) and
    whether it is the row's separate eval job (``eval-only: true``) or its throughput job."""

    row: Mapping[str, Any]
    eval_job: bool


@dataclass(frozen=True)
class MatrixRank:
    """Where a point's own job sits among its run's jobs of the same name, in matrix order: the
    ``rank``-th of ``twins`` (1: the name is the point's alone)."""

    rank: int
    twins: int


@dataclass
class DispatchJobs:
    """What a sweep's dispatches hold: runners per group, and each point's place (by result name)."""

    slots: dict[str, int] = field(default_factory=dict)
    ranks: dict[str, MatrixRank] = field(default_factory=dict)
    # result name -> the eval marks the generator gives the point in its own dispatch's command
    marks: dict[str, dict[str, Any]] = field(default_factory=dict)


EVAL_MARKS = (RUN_EVAL, EVAL_ONLY, EVAL_CONC, EVAL_ALL_CONCS)


def with_dispatch_marks(planned: Sequence[Mapping[str, Any]], jobs: DispatchJobs) -> list[dict[str, Any]]:
    """The planned points with the eval marks their own dispatch's command gets from the
    generator (it marks after its `--conc` filter, so a per-conc dispatch's picks are that slice's,
    not the whole key's): what the sweep tracks and collects. A point its dispatch's rows do not
    hold under its name keeps its planned marks."""
    out = []
    for point in planned:
        marks = jobs.marks.get(str(point.get("result-name")))
        if marks is None:
            out.append(dict(point))
            continue
        row = {k: v for k, v in point.items() if k not in EVAL_MARKS}
        out.append({**row, **marks})
    return out


# e2e-tests.yml's matrix jobs, in the file's order: (multi-node, agentic) rows, and the `name:`
# GitHub prefixes their jobs with, for the throughput family and the eval family
FAMILIES = (
    (True, False, "multi-node /", "multi-node eval /"),
    (False, True, "agentic /", "agentic eval /"),
    (True, True, "multi-node agentic /", "multi-node agentic eval /"),
    (False, False, "single-node /", "eval /"),
)


def matrix_jobs(rows: Sequence[Mapping[str, Any]], unexpanded: Collection[str] = ()) -> list[MatrixJob]:
    """e2e-tests.yml's jobs for generated rows, in the file's job order (each family in row order).

    ``unexpanded``: the callers GitHub fails with an empty matrix (app/core/unexpanded_workflow.py): no job
    of theirs exists, none holds a runner.
    """
    out: list[MatrixJob] = []
    for multi, agentic, throughput, evals in FAMILIES:
        members = [r for r in rows if is_multinode_point(r) == multi and is_agentic_point(r) == agentic]
        if throughput not in unexpanded:
            if agentic:  # `agentic /` takes the rows without an eval, `agentic eval /` the others
                out += [MatrixJob(r, False) for r in members if not r.get("run-eval")]
            else:  # throughput for every row but eval-only ones
                out += [MatrixJob(r, False) for r in members if not r.get("eval-only")]
        if evals not in unexpanded:
            out += [MatrixJob(r, True) for r in members if r.get("run-eval")]
    return out


def dispatch_rows(
    master: dict[str, Any],
    key: str,
    group: Sequence[Mapping[str, Any]],
    fields: Sequence[str],
    sweep_mode: str = "default",
    hardware: Hardware | None = None,
) -> list[dict[str, Any]]:
    """The rows the dispatch of ``group`` (one group's planned points) makes the generator emit,
    with the generator's eval marks (module docstring); ``hardware``: runners.yaml's, for the
    DRAM-offload rows' `total-cpu-dram-gb`."""
    concs = row_concs(group) or sorted({point_conc(p) for p in group})
    wanted = group_key(dict(group[0]), fields)
    rows = plan_dicts(master, key, conc=concs, hardware=hardware)
    # a template that also narrows by {seq} or {tp} narrows the selection as it narrows the group
    rows = [r for r in rows if group_key(r, fields) == wanted]
    return plan_evals(rows, dispatch_eval_mode(group, sweep_mode))


def plan_dispatch_jobs(
    master: dict[str, Any],
    key: str,
    planned: Sequence[Mapping[str, Any]],
    fields: Sequence[str],
    sweep_mode: str = "default",
    unexpanded: Collection[str] = (),
    hardware: Hardware | None = None,
) -> DispatchJobs:
    """Every group's runners (its matrix's jobs) and every planned point's place in its matrix;
    ``unexpanded``: the workflow's callers GitHub never expands (``matrix_jobs``); ``hardware``:
    runners.yaml's (``dispatch_rows``)."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for point in planned:
        groups.setdefault(group_key(dict(point), fields), []).append(point)
    out = DispatchJobs()
    for gk, group in groups.items():
        jobs = matrix_jobs(dispatch_rows(master, key, group, fields, sweep_mode, hardware), unexpanded)
        out.slots[gk] = len(jobs)
        for job in jobs:
            marks = {k: job.row[k] for k in EVAL_MARKS if k in job.row}
            out.marks.setdefault(str(job.row.get("result-name")), marks)
        for point in group:
            rank = matrix_rank(jobs, point)
            if rank is not None:
                out.ranks[str(point["result-name"])] = rank
    return out


def matrix_rank(jobs: Sequence[MatrixJob], point: Mapping[str, Any]) -> MatrixRank | None:
    """``point``'s own job among the matrix jobs its name matches (``runmatch.job_matches_point``);
    None when the matrix does not hold it."""
    own = bool(point.get("eval-only"))
    named = [
        j
        for j in jobs
        if j.eval_job == own and job_matches_point(point_job_name(j.row, eval_job=own), point, eval_job=own)
    ]
    for index, job in enumerate(named):
        if job.row.get("result-name") == point.get("result-name"):
            return MatrixRank(index, len(named))
    return None
