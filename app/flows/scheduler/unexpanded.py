"""Points whose job GitHub never created: the caller's matrix did not evaluate (a workflow defect).

Concluded when a run we follow completes without success (``app.flows.scheduler.run_tracking``), in one of
two ways. Foreseen (``foreseen``): the sweep stored what the dispatch workflow's file said when it
was planned (``Sweep.unexpanded``: at InferenceX 843c6254 `eval /` never expands), every point
still waiting on the run waits on a job of such a caller, and the run's workflow_job events showed
no job of it (``DispatchRun.callers_seen``): the defect is built from the file, with no GitHub call.
Otherwise (a defect nobody foresaw, a sweep or run stored before the prediction, a label sweep):
the run's failed caller jobs that ran no step are asked for their check-run annotations, and
GitHub's "Error when evaluating 'strategy' for job ..." becomes a ``MatrixDefect``
(``app.core.unexpanded_jobs``, pure). A point whose eval job that caller would have run keeps its
throughput result and says why it has no eval; a point with no job left to run ends failed with the
reason. Neither is retried.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import structlog
from sqlalchemy.orm import Session

from app.core.routing import TransientError
from app.core.unexpanded_jobs import (
    MatrixDefect,
    covering,
    defect_of,
    not_run_reason,
    predicted_defects,
    unexpanded_candidates,
)
from app.flows.sweeps.job_finish import finish_job
from app.models.sweeps import JobState, Sweep, SweepJob
from app.store.audit import record
from app.store.dispatchruns import callers_seen
from app.store.reports import mark_report_dirty

log = structlog.get_logger(__name__)

BOT = "sweepbot"


class AnnotationGateway(Protocol):
    def list_check_run_annotations(self, repo: str, check_run_id: int) -> list[dict[str, Any]]: ...


def run_defects(gw: AnnotationGateway, repo: str, wf_jobs: Sequence[Mapping[str, Any]]) -> list[MatrixDefect]:
    """The matrix defects of a completed run: one annotation read per failed caller job that ran
    no step (at InferenceX 843c6254, ``eval /`` in every run)."""
    out: list[MatrixDefect] = []
    for wf_job in unexpanded_candidates(wf_jobs):
        try:
            notes = gw.list_check_run_annotations(repo, int(wf_job["id"]))
        except TransientError:
            raise
        except Exception as exc:  # unreadable: the points fall back to "no job for this point"
            log.warning("annotations_unreadable", job=wf_job.get("id"), error=str(exc))
            continue
        defect = defect_of(wf_job, notes)
        if defect is not None:
            log.warning(
                "workflow_defect",
                caller=defect.caller,
                job=defect.job_id,
                file=defect.file,
                run=wf_job.get("run_id"),
            )
            out.append(defect)
    return out


def foreseen(
    session: Session, run_id: int, waiting: Sequence[tuple[SweepJob, bool]]
) -> list[tuple[SweepJob, MatrixDefect]] | None:
    """Each waiting job with the foreseen defect that explains it, or None when one is not
    explained (the run is then read). ``waiting``: the jobs still waiting on the completed run,
    each with whether its throughput succeeded and it waits on its eval job (else on its own job,
    which never came)."""
    seen = callers_seen(session, run_id)
    if seen is None or not waiting or len({job.sweep_id for job, _ in waiting}) != 1:
        return None
    sweep = session.get(Sweep, waiting[0][0].sweep_id)
    defects = [d for d in predicted_defects(sweep.unexpanded if sweep else None) if d.caller not in seen]
    out = []
    for job, on_eval in waiting:
        if not on_eval and job.run_conclusion is not None:
            return None  # its own job was heard of: not one GitHub never created
        eval_job = on_eval or bool((job.point or {}).get("eval-only"))
        defect = covering(defects, job.point, eval_job=eval_job)
        if defect is None:
            return None
        out.append((job, defect))
    log.info("workflow_defect_foreseen", run=run_id, callers=sorted({d.caller for _, d in out}))
    return out


def _audit(session: Session, job: SweepJob, defect: MatrixDefect) -> None:
    record(
        session,
        actor=BOT,
        action="sweep.workflow_defect",
        target=job.run_name,
        detail={"job": job.id, "run_id": job.run_id, "caller": defect.caller, "workflow_job": defect.job_id},
    )


def note_eval_not_run(session: Session, job: SweepJob, defect: MatrixDefect) -> None:
    """A point whose throughput ran but whose eval job was never created: it is collected without
    its eval (``app.flows.results.collect`` reads the reason), and says why."""
    _audit(session, job, defect)
    job.reason = not_run_reason(defect, eval_job=True)
    mark_report_dirty(session, job.sweep_id)


def end_not_run(session: Session, job: SweepJob, defect: MatrixDefect) -> None:
    """A point whose only job was never created: failed with the reason, not retried."""
    _audit(session, job, defect)
    eval_job = bool((job.point or {}).get("eval-only"))
    finish_job(session, job.id, JobState.FAILED, reason=not_run_reason(defect, eval_job=eval_job))
