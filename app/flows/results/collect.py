"""Collect: a finished job's artifact -> one normalized result row per point, then finish the job.

The flow: list the run's artifacts through the gateway, pick the point's ``bmk_`` artifact
(``app.core.artifacts``), download it under a size cap, read it defensively
(``app.core.artifactzip``), parse it (``app.core.resultfile``; an eval artifact with
``app.core.evals``), store the rows (``app.store.results``) and finish the job through
``app.flows.sweeps.job_finish.finish_job``. A file that cannot be understood fails *that job* with the
reason; GitHub outages raise ``TransientError`` so the task is retried.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from sqlalchemy.orm import Session

from app.adapters.github.errors import GitHubError
from app.core.artifacts import select_bmk_artifact, select_eval_artifact
from app.core.artifactzip import MAX_ARTIFACT_BYTES, ArtifactError, safe_json_members
from app.core.evals import EvalArtifact, EvalFileError, parse_eval_artifact
from app.core.resultfile import ParsedResult, ResultFileError, as_int, parse_result, point_identity
from app.core.unexpanded_jobs import eval_not_run
from app.flows.sweeps.job_finish import finish_job
from app.models.sweeps import Sweep, SweepJob
from app.store.reports import mark_report_dirty
from app.store.results import collected_for_job, store_eval, store_result

log = structlog.get_logger(__name__)

Artifact = Mapping[str, Any]  # one entry of GitHub's "list workflow run artifacts" answer


class ArtifactGateway(Protocol):
    """The two gateway calls collection makes (``app.adapters.github.GitHubGateway`` has them)."""

    def list_run_artifacts(self, repo: str, run_id: int) -> list[dict[str, Any]]: ...

    def download_artifact(self, repo: str, artifact_id: int, max_bytes: int) -> bytes: ...


@dataclass
class CollectOutcome:
    job_id: int
    state: str  # "succeeded" | "failed" | "skipped"
    reason: str | None = None
    result_id: int | None = None
    eval_ids: list[int] = field(default_factory=list)  # stored eval_results rows


@dataclass
class _Job:
    """What collecting one job needs to know about it."""

    job: SweepJob
    sweep: Sweep | None
    point: dict[str, Any]
    repo: str
    run_id: int | None
    run_url: str | None
    image: str
    fingerprint: str

    def provenance(self, artifact: Artifact | None = None, file_name: str | None = None) -> dict[str, Any]:
        prov: dict[str, Any] = {
            "job_id": self.job.id,
            "sweep_id": self.job.sweep_id,
            "repo": self.repo,
            "run_id": self.run_id,
            "run_url": self.run_url,
        }
        if artifact is not None:
            prov |= {"artifact_id": int(artifact["id"]), "artifact_name": artifact.get("name")}
        if file_name is not None:
            prov["file_name"] = file_name
        return prov


def _load(session: Session, job_id: int) -> _Job:
    # Row lock (PostgreSQL): a second collect of the same job (the repair poll re-rings collection
    # while a slow one runs, a redelivered completion) waits here, then sees the stored result
    # instead of storing a duplicate that would pose as a repeated run in the gap's noise.
    job = session.get(SweepJob, job_id, with_for_update=True)
    if job is None:
        raise LookupError(f"job {job_id} does not exist")
    sweep = session.get(Sweep, job.sweep_id)
    point = point_identity(job)
    run_id = getattr(job, "run_id", None) or getattr(job, "workflow_run_id", None)
    fingerprint = (
        point.get("fingerprint")
        or getattr(sweep, "fingerprint", None)
        or getattr(sweep, "recipe_fingerprint", "")
        or ""
    )
    return _Job(
        job=job,
        sweep=sweep,
        point=point,
        repo=str(getattr(sweep, "repo", None) or getattr(job, "repo", "")),
        run_id=int(run_id) if run_id is not None else None,
        run_url=getattr(job, "run_url", None) or getattr(job, "html_url", None),
        image=str(point.get("image") or getattr(sweep, "image", "") or ""),
        fingerprint=str(fingerprint),
    )


def _finish(session: Session, j: _Job, state: str, reason: str | None = None) -> None:
    finish_job(session, j.job.id, state, reason=reason, result_url=j.run_url)
    mark_report_dirty(session, j.job.sweep_id)


def _download(gw: ArtifactGateway, repo: str, artifact: Artifact, max_bytes: int) -> bytes | str:
    """The artifact's zip, or why it cannot be had (over the cap); other GitHub errors propagate."""
    declared = int(artifact.get("size_in_bytes") or 0)
    if declared > max_bytes:
        return f"artifact {artifact.get('name')} is {declared} bytes, over the {max_bytes}-byte cap"
    try:
        return gw.download_artifact(repo, int(artifact["id"]), max_bytes)
    except GitHubError as exc:
        if exc.status == 413:
            return str(exc)
        raise


def fetch_eval(
    gw: ArtifactGateway,
    repo: str,
    run_id: int,
    artifacts: Sequence[Artifact],
    point: Mapping[str, Any],
    max_bytes: int,
    *,
    required: bool = True,
) -> tuple[Artifact, EvalArtifact] | str | None:
    """(artifact, parsed ``app.core.evals.EvalArtifact``) of the point's eval, or the reason it failed;
    None when ``required`` is false and the run uploaded no eval artifact for the point."""
    try:
        chosen = select_eval_artifact(artifacts, point)
    except (KeyError, TypeError, ValueError) as exc:
        return f"the job's point lacks a field its eval artifact name is made of: {exc}"
    if chosen.artifact is None:
        if not required:
            log.info("eval_missing", run_id=run_id, reason=chosen.reason)
            return None
        return f"run {run_id}: {chosen.reason}"
    artifact = chosen.artifact
    blob = _download(gw, repo, artifact, max_bytes)
    if isinstance(blob, str):
        return blob
    try:
        parsed = parse_eval_artifact(safe_json_members(blob), point)
    except (ArtifactError, EvalFileError) as exc:
        return f"eval artifact {artifact.get('name')}: {exc}"
    log.info(
        "eval_collected",
        artifact=artifact.get("name"),
        tasks=parsed.result.tasks(),
        file=parsed.result.file_name,
        limit=parsed.result.limit,
    )
    return artifact, parsed


def _fetch_result(
    gw: ArtifactGateway, j: _Job, artifacts: Sequence[Artifact], max_bytes: int
) -> tuple[Artifact, list[tuple[str, ParsedResult]]] | str:
    """(artifact, its (file name, parsed result) per concurrency) of the point's result artifact
    (app.core.artifacts: ``bmk_``/``bmk_agentic_``), or why there is none. A single-node job has
    one result file; a multi-node job one per concurrency of its row."""
    point = j.point
    try:
        chosen = select_bmk_artifact(artifacts, point)
    except (KeyError, TypeError, ValueError) as exc:
        return f"the job's point lacks a field its result name is made of: {exc}"
    if chosen.artifact is None or chosen.name is None:
        return f"run {j.run_id}: {chosen.reason}"
    blob = _download(gw, j.repo, chosen.artifact, max_bytes)
    if isinstance(blob, str):
        return blob
    tp = as_int(point.get("tp"), 0) or None
    gpus = (tp or 1) * as_int(point.get("pp"), 1) * as_int(point.get("pcp-size"), 1) if tp else None
    want = point.get("conc")
    wanted = {int(c) for c in want} if isinstance(want, list) else ({int(want)} if want is not None else None)
    try:
        every = safe_json_members(blob)
        names = chosen.name.members(every)
        if not names and len(every) == 1:
            names = list(every)  # a differently named single result file is fine
        if not names:
            held = ", ".join(sorted(every)) or "no JSON files"
            raise ArtifactError(
                f"missing result file {chosen.name.member} in the artifact (it holds: {held})"
            )
        out = []
        for file_name in names:
            parsed = parse_result(every[file_name], file_name, tp=tp, gpus=gpus)
            if wanted is not None and parsed.conc is not None and parsed.conc not in wanted:
                raise ResultFileError(
                    file_name,
                    "max_concurrency",
                    f"the file measured conc {parsed.conc} but the job's point is conc "
                    f"{', '.join(map(str, sorted(wanted)))}",
                )
            out.append((file_name, parsed))
    except (ArtifactError, ResultFileError) as exc:
        return str(exc)
    return chosen.artifact, out


def _store_eval(session: Session, j: _Job, evaluation: tuple[Artifact, EvalArtifact]) -> list[int]:
    artifact, parsed = evaluation
    rows = store_eval(
        session,
        parsed,
        point=j.point,
        image=j.image,
        fingerprint=j.fingerprint,
        provenance=j.provenance(artifact),
    )
    return [r.id for r in rows]


def _already_done(session: Session, j: _Job) -> CollectOutcome | None:
    """The outcome when there is nothing to collect: stored before (converge) or the job is final."""
    existing = collected_for_job(session, j.job.id)
    if existing is not None:  # a second delivery of the same completion: converge, don't repeat
        if j.job.state != "succeeded":
            finish_job(session, j.job.id, "succeeded", result_url=existing.run_url)
        return CollectOutcome(j.job.id, "skipped", "already collected", existing.id)
    if j.job.state in ("succeeded", "failed", "cancelled", "reused"):
        return CollectOutcome(j.job.id, "skipped", f"job is already {j.job.state}")
    return None


def _fail(session: Session, j: _Job, reason: str) -> CollectOutcome:
    log.warning("collect_failed", job_id=j.job.id, reason=reason)
    _finish(session, j, "failed", reason)
    return CollectOutcome(j.job.id, "failed", reason)


def collect_job(
    session: Session, gw: ArtifactGateway, job_id: int, *, max_bytes: int = MAX_ARTIFACT_BYTES
) -> CollectOutcome:
    """Download, check and parse a finished job's artifact; store its result; finish the job."""
    j = _load(session, job_id)
    done = _already_done(session, j)
    if done is not None:
        return done
    if j.run_id is None:
        return _fail(session, j, "the job has no workflow run to collect from")
    artifacts = gw.list_run_artifacts(j.repo, j.run_id)
    if j.point.get("eval-only"):
        # An eval-only job uploads no bmk_ artifact: its eval is the whole result.
        got = fetch_eval(gw, j.repo, j.run_id, artifacts, j.point, max_bytes)
        if not isinstance(got, tuple):
            return _fail(session, j, got or f"run {j.run_id}: no eval artifact")
        eval_ids = _store_eval(session, j, got)
        _finish(session, j, "succeeded")
        return CollectOutcome(job_id, "succeeded", None, None, eval_ids)
    fetched = _fetch_result(gw, j, artifacts, max_bytes)
    if isinstance(fetched, str):
        return _fail(session, j, fetched)
    artifact, results = fetched
    evaluation: tuple[Artifact, EvalArtifact] | str | None = None
    if j.point.get("run-eval"):
        # Parsed before anything is stored: a bad eval file fails the job with nothing half-stored.
        # In label mode the repo's own run-sweep.yml run decides which points it evaluates, so a
        # run with no eval artifact keeps its throughput result (the report says no eval was
        # stored); in dispatch mode the bot asked for the eval, and its absence fails the job,
        # unless GitHub never created the eval job (run tracking put why in the job's reason).
        mode = str((getattr(j.sweep, "filters", None) or {}).get("mode") or "dispatch")
        required = mode != "label" and not eval_not_run(j.job.reason)
        evaluation = fetch_eval(gw, j.repo, j.run_id, artifacts, j.point, max_bytes, required=required)
        if isinstance(evaluation, str):
            return _fail(session, j, evaluation)
    rows = [
        store_result(
            session,
            parsed,
            point=j.point if not isinstance(j.point.get("conc"), list) else {**j.point, "conc": parsed.conc},
            image=j.image,
            fingerprint=j.fingerprint,
            provenance=j.provenance(artifact, file_name),
        )
        for file_name, parsed in results
    ]
    row = rows[0]
    eval_ids = _store_eval(session, j, evaluation) if isinstance(evaluation, tuple) else []
    _finish(session, j, "succeeded")
    return CollectOutcome(job_id, "succeeded", None, row.id, eval_ids)
