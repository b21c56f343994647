"""Which workflow dispatches a sweep of a key would make, offline and pure (`sweepbot recipe dispatch`).

The same grouping and rendering the scheduler uses (``group_fields``, ``render_dispatch``, the
sweep's point order): one dispatch per group of points the repo's CLI selects together, with its
workflow, ref and inputs, and the runner slots it occupies (every job its run has: every point the
command expands to, the ones the filters left out too, and their eval jobs; app/core/dispatchjobs.py).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core.dispatchjobs import plan_dispatch_jobs
from app.core.recipes.evals import parse_eval_mode, plan_with_evals
from app.core.sweepspec import (
    DispatchSettings,
    dispatch_eval_flags,
    group_fields,
    point_order,
    render_dispatch,
)
from app.core.sweepspec import group_key as _group_key
from app.core.sweepspec import point_seq as _point_seq

PLACEHOLDER_SHA = "0" * 40  # shown as <head-sha> when the caller gives none


@dataclass
class PlannedDispatch:
    workflow: str
    ref: str
    inputs: dict[str, str]
    run_name: str
    points: list[str] = field(default_factory=list)  # result names, in release order
    slots: int = 0
    title: str | None = None  # the run's display_title, when the workflow file is known

    def to_json(self) -> dict[str, Any]:
        return {
            "workflow": self.workflow,
            "ref": self.ref,
            "inputs": self.inputs,
            "run_name": self.run_name,
            "display_title": self.title,
            "points": self.points,
            "slots": self.slots,
        }


def plan_dispatches(
    settings: DispatchSettings,
    master: dict[str, Any],
    key: str,
    config_file: str,
    *,
    seq: str | None = None,
    conc: Sequence[int] | None = None,
    head_ref: str = "main",
    head_sha: str = PLACEHOLDER_SHA,
    base_ref: str = "main",
    pr: int = 0,
    sweep_id: int = 0,
    evals: str = "default",
    unexpanded: Collection[str] = (),
) -> list[PlannedDispatch]:
    """Every dispatch of a sweep of ``key`` (``config_file`` is its repo path), in release order.

    Run names use ``sweep_id`` and the 1-based job number in the repo's order, standing in for
    the ids the database would give. ``unexpanded``: the workflow's matrix jobs GitHub never
    expands (app.core.unexpanded_workflow), left out of the slots.
    """
    # the points with the repo's default eval marks, as /sweep plans them
    mode = parse_eval_mode(evals)
    points = plan_with_evals(master, key, seq=seq, conc=list(conc) if conc else None, mode=mode)
    fields = group_fields(settings)
    slots = plan_dispatch_jobs(master, key, points, fields, mode.value, unexpanded).slots
    positions = point_order(points)
    order = sorted(range(len(points)), key=lambda i: positions[i])
    out: dict[str, PlannedDispatch] = {}
    for index in order:
        point = points[index]
        gk = _group_key(point, fields)
        if gk not in out:
            group = [p for p in points if _group_key(p, fields) == gk]
            group_ids = [i + 1 for i, p in enumerate(points) if _group_key(p, fields) == gk]
            run_name = f"sweepbot-{sweep_id}-{min(group_ids)}"
            lists = [p["conc"] for p in group if isinstance(p["conc"], list)]
            workflow, ref, inputs = render_dispatch(
                settings,
                key=key,
                seq=_point_seq(point),
                conc=max(lists[0]) if lists else int(point["conc"]),
                tp=int(point["tp"]) if "tp" in point else int(point["decode"]["tp"]),
                evals=dispatch_eval_flags(group, mode.value),
                concs=sorted({int(c) for lst in lists for c in lst}) or None,
                head_sha=head_sha,
                head_ref=head_ref,
                base_ref=base_ref,
                run_name=run_name,
                pr=pr,
                config_file=config_file,
            )
            out[gk] = PlannedDispatch(workflow, ref, inputs, run_name, slots=slots.get(gk, 1))
        out[gk].points.append(str(point["result-name"]))
    return list(out.values())
