"""collect-results.yml and collect-evals.yml: the aggregate artifacts a sweep run uploads once its
benchmark jobs are done (the simulator's reading of both templates at 843c6254).

e2e-tests.yml and run-sweep.yml call collect-results with ``result-prefix: bmk`` when any
throughput job ran (``always()``, so after failures too): it downloads every ``bmk_*`` artifact
of the run (agentic ``bmk_agentic_*`` included), aggregates them and uploads ``results_bmk``
holding ``agg_bmk.json``. They call collect-evals with no prefix when any eval job ran: it
downloads every ``eval_*`` artifact and uploads ``eval_results_all`` holding
``agg_eval_all.json``. The aggregation scripts are not played: the simulator's aggregate is the
list of every JSON member it downloaded, in upload order, each with the artifact it came from.
The collect jobs themselves are not listed among the run's jobs.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterable
from typing import Any

from sim.models import Artifact, Job, Run


def _is_eval_job(job: Job) -> bool:
    """Whether the job's caller (its name up to the first `` /``) is an eval family's."""
    return job.name.split(" /", 1)[0].endswith("eval")


def _members(art: Artifact) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with zipfile.ZipFile(io.BytesIO(art.data)) as zf:
        for member in zf.namelist():
            if member.endswith(".json"):
                try:
                    out.append({"artifact": art.name, "file": member, "data": json.loads(zf.read(member))})
                except ValueError:
                    continue
    return out


def _aggregate(arts: list[Artifact], prefix: str) -> str:
    return json.dumps([m for a in arts if a.name.startswith(prefix) for m in _members(a)], indent=2)


def aggregates(run: Run, jobs: list[Job], artifacts: Iterable[Artifact]) -> dict[str, dict[str, str]]:
    """Name -> zip members of the aggregate artifacts the run's collect jobs upload."""
    mine = sorted((a for a in artifacts if a.run_id == run.id), key=lambda a: a.id)
    benchmark = [j for j in jobs if j.point and not _is_eval_job(j)]
    evals = [j for j in jobs if j.point and _is_eval_job(j)]
    out: dict[str, dict[str, str]] = {}
    if benchmark:
        out["results_bmk"] = {"agg_bmk.json": _aggregate(mine, "bmk_")}
    if evals:
        out["eval_results_all"] = {"agg_eval_all.json": _aggregate(mine, "eval_")}
    return out
