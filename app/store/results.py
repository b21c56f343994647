"""Stored results and eval scores: the rows collection writes and the lookups that read them back.

``find_reusable``/``find_reusable_eval`` answer the scheduler's reuse question (same point, image
and recipe fingerprint); the rest serve collection, the report and the sibling reference.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from app.core.evals import EvalArtifact
from app.core.resultfile import ParsedResult, as_int
from app.models.results import EvalResult, Result
from app.store import resultpoints as _resultpoints  # noqa: F401  (registers the index upkeep)


def find_reusable(session: Session, *, image: str, fingerprint: str, result_name: str) -> Result | None:
    """The newest stored result of the same point on the same image and recipe fingerprint."""
    stmt = (
        select(Result)
        .where(Result.image == image, Result.fingerprint == fingerprint, Result.result_name == result_name)
        .order_by(Result.id.desc())
        .limit(1)
    )
    return session.scalars(stmt).first()


def find_reusable_eval(
    session: Session, *, image: str, fingerprint: str, result_name: str
) -> EvalResult | None:
    """The newest stored eval score of the same point on the same image and recipe fingerprint."""
    stmt = (
        select(EvalResult)
        .where(
            EvalResult.image == image,
            EvalResult.fingerprint == fingerprint,
            EvalResult.result_name == result_name,
        )
        .order_by(EvalResult.id.desc())
        .limit(1)
    )
    return session.scalars(stmt).first()


ReuseKey = tuple[str, str, str]  # (image, fingerprint, result name): what a reuse lookup matches
REUSE_CHUNK = 200  # keys per query (bound parameters stay well under SQLite's limit)


def newest_reusable(
    session: Session, keys: Collection[ReuseKey], *, evals: bool = False
) -> dict[ReuseKey, Result | EvalResult]:
    """``find_reusable`` (or ``find_reusable_eval``) of many points in one query per 200 keys: the
    newest stored row of each key that has one."""
    wanted = sorted(set(keys))
    found: dict[ReuseKey, Result | EvalResult] = {}
    for start in range(0, len(wanted), REUSE_CHUNK):
        chunk = wanted[start : start + REUSE_CHUNK]
        # `image IN (...)` too: SQLite finds the rows by the reuse index's first column with it,
        # where the row-value IN alone scans every stored result (a year of history).
        images = sorted({key[0] for key in chunk})
        rows: Sequence[Result | EvalResult] = (
            session.scalars(
                select(EvalResult)
                .where(
                    EvalResult.image.in_(images),
                    tuple_(EvalResult.image, EvalResult.fingerprint, EvalResult.result_name).in_(chunk),
                )
                .order_by(EvalResult.id.desc())
            ).all()
            if evals
            else session.scalars(
                select(Result)
                .where(
                    Result.image.in_(images),
                    tuple_(Result.image, Result.fingerprint, Result.result_name).in_(chunk),
                )
                .order_by(Result.id.desc())
            ).all()
        )
        for row in rows:
            found.setdefault((row.image, row.fingerprint, row.result_name), row)
    return found


def stored_point_columns(point: Mapping[str, Any], *, image: str, fingerprint: str) -> dict[str, Any]:
    """The columns a stored throughput result and a stored eval score share: which point they measure."""
    return {
        "result_name": str(point.get("result-name") or ""),
        "config_key": str(point.get("config-key") or ""),
        "image": image,
        "fingerprint": fingerprint,
        "model": point.get("model"),
        "framework": point.get("framework"),
        "precision": point.get("precision"),
        "runner": point.get("runner"),
        "isl": point.get("isl"),
        "osl": point.get("osl"),
    }


PROVENANCE = ("job_id", "sweep_id", "repo", "run_id", "run_url", "artifact_id", "artifact_name", "file_name")


def provenance_columns(provenance: Mapping[str, Any], **override: Any) -> dict[str, Any]:
    """Where a stored figure came from (job, run, artifact, file): the columns results and eval
    scores share."""
    return {name: override.get(name, provenance.get(name)) for name in PROVENANCE}


def store_result(
    session: Session,
    parsed: ParsedResult,
    *,
    point: Mapping[str, Any],
    image: str,
    fingerprint: str,
    provenance: Mapping[str, Any],
) -> Result:
    row = Result(
        **stored_point_columns(point, image=image, fingerprint=fingerprint),
        conc=as_int(point.get("conc"), parsed.conc or 0),
        tp=as_int(point.get("tp"), parsed.tp or 1),
        pp=as_int(point.get("pp"), 1),
        ep=as_int(point.get("ep"), 1),
        **{k: v for k, v in parsed.metrics().items() if k not in ("conc", "tp")},
        **provenance_columns(provenance),
    )
    session.add(row)
    session.flush()
    return row


def store_eval(
    session: Session,
    parsed: EvalArtifact,
    *,
    point: Mapping[str, Any],
    image: str,
    fingerprint: str,
    provenance: Mapping[str, Any],
) -> list[EvalResult]:
    """One ``eval_results`` row per score of a parsed eval artifact (``app.core.evals.EvalArtifact``)."""
    conc = point.get("eval-conc", point.get("conc"))
    rows = [
        EvalResult(
            **stored_point_columns(point, image=image, fingerprint=fingerprint),
            conc=as_int(conc, parsed.meta.conc or 0),
            tp=as_int(point.get("tp"), parsed.meta.tp or 1),
            task=score.task,
            metric=score.metric,
            filter=score.filter,
            score=score.score,
            stderr=score.stderr,
            n=score.n,
            n_original=score.n_original,
            limit=score.limit,
            num_fewshot=score.num_fewshot,
            gated=score.gated,
            lm_eval_version=parsed.result.lm_eval_version,
            meta_model=parsed.meta.model,
            meta_framework=parsed.meta.framework,
            **provenance_columns(provenance, file_name=parsed.result.file_name),
        )
        for score in parsed.result.scores
    ]
    session.add_all(rows)
    session.flush()
    return rows


def collected_for_job(session: Session, job_id: int) -> Result | EvalResult | None:
    """What collection already stored for a job: its result, or (an eval-only job) an eval score."""
    existing: Result | EvalResult | None = session.scalars(
        select(Result).where(Result.job_id == job_id).limit(1)
    ).first()
    if existing is None:  # an eval-only job stores only eval rows
        existing = session.scalars(select(EvalResult).where(EvalResult.job_id == job_id).limit(1)).first()
    return existing


def sweep_results(session: Session, sweep_id: int) -> dict[str, list[Result]]:
    """A sweep's stored results by result name, oldest first."""
    results: dict[str, list[Result]] = {}
    for row in session.scalars(select(Result).where(Result.sweep_id == sweep_id).order_by(Result.id)):
        results.setdefault(row.result_name, []).append(row)
    return results


def sweep_evals(session: Session, sweep_id: int) -> list[EvalResult]:
    """A sweep's stored eval scores, oldest first."""
    return list(
        session.scalars(select(EvalResult).where(EvalResult.sweep_id == sweep_id).order_by(EvalResult.id))
    )


def point_evals(session: Session, *, image: str, fingerprint: str, result_name: str) -> list[EvalResult]:
    """Every stored eval score of a point on an image and recipe fingerprint (what a reused job shows)."""
    return list(
        session.scalars(
            select(EvalResult)
            .where(
                EvalResult.image == image,
                EvalResult.fingerprint == fingerprint,
                EvalResult.result_name == result_name,
            )
            .order_by(EvalResult.id)
        )
    )


def key_results(
    session: Session, config_key: str, *, isl: int | None, osl: int | None, tp: int | None
) -> Sequence[Result]:
    """Every stored result of a config key (the sibling reference's rows), narrowed where given."""
    stmt = select(Result).where(Result.config_key == config_key)
    if isl is not None:
        stmt = stmt.where(Result.isl == isl)
    if osl is not None:
        stmt = stmt.where(Result.osl == osl)
    if tp is not None:
        stmt = stmt.where(Result.tp == tp)
    return session.scalars(stmt).all()


def key_evals(session: Session, config_key: str, *, tp: int | None) -> Sequence[EvalResult]:
    """Every stored eval score of a config key (the sibling's accuracy), at ``tp`` when given."""
    stmt = select(EvalResult).where(EvalResult.config_key == config_key)
    if tp is not None:
        stmt = stmt.where(EvalResult.tp == tp)
    return session.scalars(stmt).all()
