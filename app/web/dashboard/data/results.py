"""Results of a config key: its curve, the reference, the gap, accuracy, and TPOT per image.

The gap table and the verdicts are the sticky report's (``app.core.gap.gap_table``,
``app.core.accuracy``), with the same reference choice (``app.store.references.choose_reference``
over the repo's stored bot config) and the same accuracy tolerance; sequence lengths are named by
the one rule, ``app.core.seqlen.seq_name``.
"""

from __future__ import annotations

import structlog
from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from app.core.accuracy import accuracy_notes, compare_accuracy, overall_verdict_line
from app.core.gap import gap_table
from app.core.references import Reference, ReferenceError
from app.core.seqlen import seq_name
from app.models.results import NO_SHAPE, EvalResult, ReportState, Result, ResultPoint
from app.models.sweeps import CANARY_REASON, Sweep
from app.store.bot_configs import stored_config
from app.store.references import choose_reference
from app.store.resultpoints import shape_of
from app.web.dashboard import schemas as S
from app.web.dashboard.data.common import aware

log = structlog.get_logger(__name__)


def result_keys(session: Session, *, limit: int = 200) -> list[S.KeySummary]:
    # The index (one row per point), not every stored result: the cost follows the points.
    rows = session.execute(
        select(ResultPoint.config_key, func.sum(ResultPoint.runs), func.max(ResultPoint.last_at))
        .group_by(ResultPoint.config_key)
        .order_by(func.max(ResultPoint.latest_id).desc())
        .limit(limit)
    )
    return [S.KeySummary(config_key=k, results=int(n), last_at=aware(at)) for k, n, at in rows]


def shape_name(isl: int | None, osl: int | None) -> str | None:
    """``seq_name`` of a stored result's shape (None when it has none, e.g. agentic coding)."""
    return seq_name(isl, osl) if isl is not None and osl is not None else None


def _point(r: Result) -> S.ResultPoint:
    return S.ResultPoint(
        conc=r.conc,
        mean_tpot_ms=r.mean_tpot_ms,
        median_tpot_ms=r.median_tpot_ms,
        mean_ttft_ms=r.mean_ttft_ms,
        tput_per_gpu=r.tput_per_gpu,
        interactivity=r.interactivity,
        output_tput=r.output_tput,
        run_url=r.run_url,
    )


def _configured_references(session: Session, repo: str | None) -> dict[str, str] | None:
    """``references:`` of the repo's stored bot config, as the report reads it."""
    cfg = stored_config(session, repo) if repo else None
    refs = getattr(cfg, "references", None) if cfg is not None else None
    return dict(refs) if isinstance(refs, dict) else None


def _empty(config_key: str, image: str | None, seq: str | None) -> S.ResultsKeyOut:
    return S.ResultsKeyOut(
        config_key=config_key,
        seq=seq,
        image=image,
        points=[],
        reference_name=None,
        reference_source=None,
        reference_caveat=None,
        reference_points=[],
        reference_metric=None,
        gap=[],
        images=[],
    )


def _shape(session: Session, config_key: str, seq: str) -> tuple[int | None, int | None] | None:
    """The (isl, osl) of the key's results that ``seq`` names."""
    found = session.execute(
        select(ResultPoint.isl, ResultPoint.osl)
        .where(ResultPoint.config_key == config_key)
        .group_by(ResultPoint.isl, ResultPoint.osl)
    ).all()
    shapes = [(shape_of(a), shape_of(b)) for a, b in found]
    match = [(a, b) for a, b in shapes if shape_name(a, b) == seq]
    return match[0] if match else None


def _reference(
    session: Session, config_key: str, sample: Result | None, isl: int | None, osl: int | None
) -> Reference | None:
    try:
        return choose_reference(
            session,
            config_key=config_key,
            model=sample.model if sample else None,
            hardware=sample.runner if sample else None,
            tp=sample.tp if sample else None,
            isl=isl,
            osl=osl,
            configured=_configured_references(session, sample.repo if sample else None),
        )
    except ReferenceError as exc:
        log.warning("reference_unusable", config_key=config_key, error=str(exc))
        return None


def _gap(rows: list[Result], ref: Reference, seq: str | None) -> list[S.GapRow]:
    # A tp4 table says nothing about tp8 runs: only runs at the reference's tp are compared.
    table = gap_table(
        [(r.conc, r) for r in rows if ref.tp is None or r.tp == ref.tp], ref, tp=ref.tp, seq=seq
    )
    return [
        S.GapRow(
            conc=g.conc,
            recipe=g.recipe,
            runs=g.runs,
            reference=g.reference,
            gap_pct=None if g.gap is None else round(g.gap * 100, 2),
            tolerance_pct=None if g.tolerance is None else round(g.tolerance * 100, 2),
            verdict=g.verdict,
        )
        for g in table.rows
    ]


def _reference_points(ref: Reference) -> list[S.ResultPoint]:
    return [
        S.ResultPoint(
            conc=conc,
            mean_tpot_ms=v.get("mean_tpot_ms"),
            median_tpot_ms=v.get("median_tpot_ms"),
            mean_ttft_ms=v.get("mean_ttft_ms"),
            tput_per_gpu=v.get("tput_per_gpu"),
            interactivity=v.get("interactivity"),
            output_tput=v.get("output_tput"),
            run_url=next(iter(ref.runs.get(conc) or []), None),
        )
        for conc, v in sorted(ref.points.items())
    ]


def _images(
    session: Session, config_key: str, isl: int | None, osl: int | None, max_images: int
) -> list[S.ImagePoint]:
    """Mean TPOT per (image, conc), the newest ``max_images`` images, ordered by their first result."""
    tpot_n = func.sum(ResultPoint.tpot_n)
    per_image = session.execute(
        select(
            ResultPoint.image,
            ResultPoint.conc,
            case((tpot_n > 0, func.sum(ResultPoint.tpot_sum) / tpot_n), else_=None),
            func.min(ResultPoint.first_at),
            func.min(ResultPoint.first_id),
        )
        .where(
            ResultPoint.config_key == config_key,
            ResultPoint.isl == (NO_SHAPE if isl is None else isl),
            ResultPoint.osl == (NO_SHAPE if osl is None else osl),
        )
        .group_by(ResultPoint.image, ResultPoint.conc)
    ).all()
    first_id: dict[str, int] = {}
    for img, _conc, _avg, _at, min_id in per_image:
        first_id[img] = min(first_id.get(img, min_id), min_id)
    keep = set(sorted(first_id, key=lambda i: first_id[i])[-max_images:])
    return sorted(
        (
            S.ImagePoint(
                image=img, first_at=aware(at), conc=conc, mean_tpot_ms=None if avg is None else float(avg)
            )
            for img, conc, avg, at, _min in per_image
            if img in keep
        ),
        key=lambda p: (first_id[p.image], p.conc),
    )


def _accuracy(
    session: Session,
    config_key: str,
    image: str | None,
    shape: tuple[int | None, int | None],
    ref: Reference | None,
    gap_rows: list[S.GapRow],
    tolerance: float,
) -> tuple[list[S.AccuracyRowOut], list[str], str]:
    """The key's newest eval score per conc, task and filter on ``image``, against the reference."""
    isl, osl = shape
    stmt = select(EvalResult).where(EvalResult.config_key == config_key)
    if image:
        stmt = stmt.where(EvalResult.image == image)
    if isl is not None and osl is not None:
        stmt = stmt.where(EvalResult.isl == isl, EvalResult.osl == osl)
    newest: dict[tuple[int, str, str], EvalResult] = {}
    for row in session.scalars(stmt.order_by(EvalResult.id)):
        newest[(row.conc, row.task, row.filter)] = row
    scores = [newest[k] for k in sorted(newest)]
    rows = compare_accuracy(scores, list(ref.accuracy) if ref is not None else [], tolerance=tolerance)
    out = [
        S.AccuracyRowOut(
            task=r.task,
            filter=r.filter,
            conc=r.conc,
            score=r.score,
            stderr=r.stderr,
            n=r.n,
            limit=r.limit,
            reference=r.reference,
            diff_pts=None if r.shortfall is None else round(-r.shortfall * 100, 2),
            half_width_pts=None if r.half_width is None else round(r.half_width * 100, 2),
            verdict=r.verdict,
            run_url=src.run_url,
        )
        for r, src in zip(rows, scores, strict=True)
    ]
    return out, accuracy_notes(rows), overall_verdict_line(gap_rows, rows)


def _newest(session: Session, config_key: str, image: str | None) -> tuple[str, int, int] | None:
    """The image and stored shape (isl, osl) of the key's newest result (on ``image`` when given)."""
    stmt = select(ResultPoint.image, ResultPoint.isl, ResultPoint.osl).where(
        ResultPoint.config_key == config_key
    )
    if image:
        stmt = stmt.where(ResultPoint.image == image)
    row = session.execute(stmt.order_by(ResultPoint.latest_id.desc()).limit(1)).first()
    return (row[0], row[1], row[2]) if row is not None else None


def report_sweep(session: Session, config_key: str) -> Sweep | None:
    """The sweep a PR's report of ``config_key`` discusses (the newest report), else the newest
    sweep of the key that stored results; never a nightly canary (it measures a nightly, not the
    PR's image)."""
    reported = session.scalars(
        select(Sweep)
        .join(ReportState, ReportState.sweep_id == Sweep.id)
        .where(ReportState.config_key == config_key, Sweep.reason != CANARY_REASON)
        .order_by(ReportState.id.desc())
        .limit(1)
    ).first()
    if reported is not None:
        return reported
    return session.scalars(
        select(Sweep)
        .join(Result, Result.sweep_id == Sweep.id)
        .where(Result.config_key == config_key, Sweep.reason != CANARY_REASON)
        .order_by(Result.id.desc())
        .limit(1)
    ).first()


def results_for_key(
    session: Session,
    config_key: str,
    *,
    image: str | None = None,
    seq: str | None = None,
    max_images: int = 10,
    accuracy_tolerance: float = 0.0,
) -> S.ResultsKeyOut:
    """The results page of ``config_key`` (on ``image`` and shape ``seq``; default: the image of the
    sweep the PR report discusses, ``report_sweep``, else the newest)."""
    shown = None if image else report_sweep(session, config_key)
    newest = _newest(session, config_key, image or (shown.image if shown is not None else None))
    if newest is None and shown is not None:  # the report's sweep stored nothing yet
        shown, newest = None, _newest(session, config_key, None)
    if newest is None:
        return _empty(config_key, image, seq)
    isl, osl = shape_of(newest[1]), shape_of(newest[2])
    if seq:
        shape = _shape(session, config_key, seq)
        if shape is None:
            return _empty(config_key, image, seq)
        isl, osl = shape
    chosen_image = image or newest[0]
    rows = list(
        session.scalars(
            select(Result)
            .where(
                Result.config_key == config_key,
                Result.image == chosen_image,
                Result.isl == isl,
                Result.osl == osl,
            )
            .order_by(Result.conc, Result.id)
        )
    )
    # The chart shows the newest run per conc; the gap uses every run (its spread is the noise).
    latest: dict[int, Result] = {r.conc: r for r in rows}
    ref = _reference(session, config_key, rows[-1] if rows else None, isl, osl)
    gap_rows = _gap(rows, ref, shape_name(isl, osl)) if ref is not None else []
    accuracy, notes, verdict = _accuracy(
        session, config_key, chosen_image, (isl, osl), ref, gap_rows, accuracy_tolerance
    )
    return S.ResultsKeyOut(
        accuracy=accuracy,
        accuracy_source=(ref.accuracy_source or ref.source) if ref is not None and ref.accuracy else None,
        accuracy_notes=notes,
        verdict=verdict,
        config_key=config_key,
        seq=shape_name(isl, osl),
        image=chosen_image,
        sweep_id=shown.id if shown is not None else None,
        sweep_pr=f"{shown.repo}#{shown.pr_number}" if shown is not None else None,
        points=[_point(r) for _c, r in sorted(latest.items())],
        reference_name=ref.name if ref else None,
        reference_source=ref.source if ref else None,
        reference_caveat=ref.caveat if ref else None,
        reference_points=_reference_points(ref) if ref is not None else [],
        reference_metric=ref.metric if ref is not None else None,
        gap=gap_rows,
        images=_images(session, config_key, isl, osl, max_images),
    )
