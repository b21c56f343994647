"""Matrix jobs GitHub failed unexpanded, and the points they would have run; pure.

When a job's ``strategy.matrix`` cannot be evaluated, GitHub creates none of its matrix jobs. The
run's job list then holds one job under the caller's ``name:`` (``eval /``), ``completed`` /
``failure``, with no steps and no runner, and the only word on why is its check run's annotation,
for an empty output (``fromJson('')``):

    Error when evaluating 'strategy' for job 'test-sweep-evals'. .github/workflows/e2e-tests.yml
    (Line: 636, Col: 25): Error parsing fromJson,... Error reading JToken from JsonReader. Path '',
    line 0, position 0.,... Unexpected value ''

That is the real e2e-tests.yml at InferenceX 843c6254: its get-jobs writes ``eval-config=$EVALS``
and never sets ``EVALS``, so ``test-sweep-evals`` (``if: ... != '[]'``: ``''`` passes) runs with
an empty matrix in every run, and no single-node eval ever runs. The message's form is GitHub's
as quoted in quarkusio/quarkus#46708 (an empty output), github/docs#33721 and
bittide/bittide-hardware#265 (other bad JSON); the job's shape (no steps, no runner, the reason in
the annotation only) is inferred from jobs GitHub fails before a runner (docs/benchmarks.md
"Evals at 843c6254" says what is known and what is not).

It is a defect of the workflow: not of a machine (a retry re-runs the whole dispatch on scarce
runners and fails the same way) nor of the benchmark. The points whose jobs that caller would have
run end with ``not_run_reason``, not retried; a point that also ran its throughput keeps it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.inert import code
from app.core.runmatch import EVALUATION_ERROR, parse_job_name
from app.core.seqlen import seq_name

EVAL_NOT_RUN = "eval not run: "
NOT_RUN = "not run: "
MAX_SAID = 500  # characters of GitHub's annotation quoted (the 843c6254 one is about 380)
_WHERE = re.compile(r"\.\s*(?P<file>\S+?) \(Line: (?P<line>\d+), Col: \d+\)")
_SEQ = re.compile(r"^\d+k\d+k$")
# What is known to make a job's matrix empty, by (workflow file name, job id).
KNOWN_CAUSES = {
    ("e2e-tests.yml", "test-sweep-evals"): (
        "at InferenceX 843c6254 get-jobs writes `eval-config=$EVALS` and never sets `EVALS`"
    ),
}


@dataclass(frozen=True)
class MatrixDefect:
    """A caller job GitHub failed unexpanded, from its check-run annotation."""

    caller: str  # the failed job's name, e.g. "eval /"
    job_id: str  # the workflow's job id, e.g. "test-sweep-evals"
    section: str  # what did not evaluate, e.g. "strategy"
    file: str  # the workflow file as GitHub names it ("" when it does not)
    said: str  # GitHub's annotation, or what the file analysis found (``read_at``)
    read_at: str = ""  # the ref whose workflow file showed it when the sweep was planned (no annotation read)


def predicted_defects(prediction: Mapping[str, Any] | None) -> list[MatrixDefect]:
    """The defects a sweep's stored prediction names (``Sweep.unexpanded``: the workflow file at
    the dispatched ref, read by app.core.unexpanded_workflow.unexpanded_jobs when the sweep was planned)."""
    if not isinstance(prediction, Mapping):
        return []
    file, ref = str(prediction.get("file") or ""), str(prediction.get("ref") or "")
    out = []
    for caller, found in dict(prediction.get("callers") or {}).items():
        output, var = str(found.get("output") or ""), str(found.get("variable") or "")
        said = f"get-jobs writes `{output}=${var}` and never sets `{var}`, so its matrix value is empty"
        out.append(MatrixDefect(str(caller), str(found.get("job") or ""), "strategy", file, said, ref or "?"))
    return out


def unexpanded_candidates(wf_jobs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Jobs of a run that may be matrix jobs GitHub failed unexpanded: failed before any step,
    under a name that is no benchmark job's (a caller's name, ``eval /``)."""
    return [
        j
        for j in wf_jobs
        if j.get("status") == "completed"
        and j.get("conclusion") == "failure"
        and not j.get("steps")
        and parse_job_name(str(j.get("name") or "")) is None
        and str(j.get("name") or "").strip()
    ]


def defect_of(wf_job: Mapping[str, Any], annotations: Sequence[Mapping[str, Any]]) -> MatrixDefect | None:
    """The defect a candidate's annotations report, or None when they say something else."""
    for note in annotations:
        message = str(note.get("message") or "")
        m = EVALUATION_ERROR.search(message)
        if m is None:
            continue
        where = _WHERE.search(message, m.end() - 1)
        file = where.group("file").split("@", 1)[0] if where else ""
        return MatrixDefect(
            str(wf_job.get("name") or "").strip(), m.group("job"), m.group("section"), file, message
        )
    return None


def caller_of(point: Mapping[str, Any], *, eval_job: bool) -> str:
    """The e2e-tests.yml caller whose matrix runs ``point``'s throughput job or, with ``eval_job``,
    its eval-only job (``single-node /``, ``eval /``, ``multi-node eval /``, ``agentic eval /`` ...)."""
    multi = "prefill" in point
    agentic = point.get("scenario-type") == "agentic-coding"
    family = (
        "multi-node agentic" if multi and agentic else "multi-node" if multi else "agentic" if agentic else ""
    )
    if eval_job:
        return f"{family} eval /".strip()
    return f"{family or 'single-node'} /"


def _point_seq(point: Mapping[str, Any]) -> str:
    try:
        return seq_name(int(point["isl"]), int(point["osl"]))
    except (KeyError, TypeError, ValueError):
        return ""


def covering(
    defects: Sequence[MatrixDefect], point: Mapping[str, Any], *, eval_job: bool
) -> MatrixDefect | None:
    """The defect whose caller would have run ``point``'s job (run-sweep.yml's callers carry a
    seq-len, ``single-node 8k1k /``: it must be the point's)."""
    want = caller_of(point, eval_job=eval_job).split()
    for defect in defects:
        words = defect.caller.split()
        seqs = [w for w in words if _SEQ.match(w)]
        if [w for w in words if not _SEQ.match(w)] == want and all(s == _point_seq(point) for s in seqs):
            return defect
    return None


def not_run_reason(defect: MatrixDefect, *, eval_job: bool) -> str:
    """What a point whose job was never created ends with: what was wrong, how to fix it, and
    GitHub's annotation (rendered inert: it is text from GitHub) or, for a defect the workflow file
    showed (``read_at``), where it was read."""
    name = defect.file.rsplit("/", 1)[-1]
    where = f"{name}'s" if name else "the workflow's"
    what = "matrix" if defect.section == "strategy" else f"`{defect.section}`"
    known = KNOWN_CAUSES.get((name, defect.job_id))
    empty = "Unexpected value ''" in defect.said
    cause = f"; {known}" if known and empty else "; its matrix value was empty" if empty else ""
    if defect.read_at:
        cause = f"; {defect.said}"  # our own words: names the file's regexes matched (\w, -)
    fix = "fix the workflow or sweep without evals (`/sweep evals=none`)" if eval_job else "fix the workflow"
    said = (
        f"Read from {defect.file or 'the workflow file'} at {code(defect.read_at[:12], 40)} when the "
        "sweep was planned (no job of it appeared in the run; GitHub's annotation was not read)."
        if defect.read_at
        else f"GitHub said: {code(defect.said, MAX_SAID)}"
    )
    return (
        f"{EVAL_NOT_RUN if eval_job else NOT_RUN}{where} `{defect.caller}` job could not evaluate its "
        f"{what}, so GitHub created none of its jobs{cause}. A workflow defect, not retried (every run "
        f"fails the same way): {fix}. {said}"
    )


def eval_not_run(reason: str | None) -> bool:
    """Whether a job's reason says its eval was never run (its throughput may still be collected)."""
    return bool(reason) and str(reason).startswith(EVAL_NOT_RUN)
