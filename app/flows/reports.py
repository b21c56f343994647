"""The sticky report comment: one per PR and config key, created once, edited in place, debounced.

Every job state change calls ``mark_report_dirty(session, sweep_id)``, which bumps the report's
``version``; ``flush_reports`` (beat, every ``report_debounce_seconds``) renders and upserts each
report whose ``version`` is ahead of ``flushed_version`` and that was not flushed within the
debounce interval. A report stays dirty until a flush lands, so the final state always lands.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.routing import TransientError
from app.models.results import EvalResult, ReportState, Result

log = structlog.get_logger(__name__)

FINAL_JOB_STATES = ("succeeded", "failed", "cancelled", "reused")


def report_marker(config_key: str) -> str:
    return f"<!-- sweepbot:report key={config_key} -->"


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(dt: datetime | None) -> datetime | None:
    if dt is not None and dt.tzinfo is None:
        return dt.replace(tzinfo=UTC)  # SQLite returns naive datetimes
    return dt


# ------------------------------------------------------------------------------------ dirty / flush


def mark_report_dirty(session: Session, sweep_id: int) -> None:
    from app.models.sweeps import Sweep

    sweep = session.get(Sweep, sweep_id)
    if sweep is None or sweep.reason == "canary":  # canaries have no PR: the nightly watch reports them
        return
    stmt = select(ReportState).where(
        ReportState.repo == sweep.repo,
        ReportState.pr_number == sweep.pr_number,
        ReportState.config_key == sweep.config_key,
    )
    state = session.scalars(stmt).first()
    if state is None:
        try:
            with session.begin_nested():
                state = ReportState(
                    repo=sweep.repo,
                    pr_number=sweep.pr_number,
                    config_key=sweep.config_key,
                    sweep_id=sweep_id,
                    version=0,
                    flushed_version=0,
                )
                session.add(state)
        except IntegrityError:  # another worker created it first
            state = session.scalars(stmt).one()
    if sweep_id > state.sweep_id:
        state.sweep_id = sweep_id  # the newest sweep is the one shown
    # Incremented in SQL, not read-modify-write: two workers marking at once must both count, or a
    # flush that saw the first mark would settle the report without the second change.
    state.version = ReportState.version + 1
    state.marked_at = _now()
    session.flush()


def flush_reports(
    session_factory: Callable[[], Session],
    gw_factory: Callable[[Session], Any],
    *,
    debounce_seconds: float | None = None,
    now: datetime | None = None,
) -> int:
    """Upsert every dirty report not flushed within the debounce interval; return how many landed."""
    if debounce_seconds is None:
        from app.settings import get_settings

        debounce_seconds = get_settings().report_debounce_seconds
    moment = now or _now()
    with session_factory() as session:
        ids = list(
            session.scalars(select(ReportState.id).where(ReportState.version > ReportState.flushed_version))
        )
    landed = 0
    for state_id in ids:
        with session_factory() as session:
            state = session.get(ReportState, state_id)
            if state is None or state.version <= state.flushed_version:
                continue
            flushed_at = _aware(state.flushed_at)
            if flushed_at is not None and (moment - flushed_at).total_seconds() < debounce_seconds:
                continue  # edited recently: the next flush lands it
            seen = state.version
            try:
                body = render_report(session, state.sweep_id)
                gw = gw_factory(session)
                comment = gw.upsert_comment(
                    state.repo, state.pr_number, report_marker(state.config_key), body
                )
            except TransientError as exc:
                session.rollback()
                log.warning("report_flush_failed", report=state_id, error=str(exc))
                continue
            except Exception as exc:
                # One report that cannot land (sweep gone, PR locked, comment refused) must not
                # stop every report after it: record why (the dashboard lists it) and go on.
                session.rollback()
                log.exception("report_flush_error", report=state_id)
                failed = session.get(ReportState, state_id)
                if failed is not None:
                    failed.last_error = f"{exc.__class__.__name__}: {exc}"[:2000]
                    session.commit()
                continue
            state = session.get(ReportState, state_id)
            assert state is not None
            state.comment_id = int(comment["id"]) if isinstance(comment, dict) and "id" in comment else None
            state.flushed_version = seen  # a mark that raced with us keeps it dirty
            state.flushed_at = moment
            state.last_error = None
            session.commit()
            landed += 1
    return landed


# ------------------------------------------------------------------------------------ the data


@dataclass
class JobView:
    id: int
    conc: int
    seq: str
    tp: int
    state: str
    run_url: str | None
    reason: str | None
    result_name: str
    point: dict[str, Any] | None = None


@dataclass
class ReportData:
    sweep_id: int
    repo: str
    pr_number: int
    config_key: str
    image: str
    fingerprint: str
    head_sha: str
    requested_by: str
    sweep_state: str
    jobs: list[JobView]
    results: dict[str, list[Result]]  # result_name -> rows
    reference: Any | None  # app.core.references.Reference
    superseded_by: int | None = None
    notes: list[str] = field(default_factory=list)
    evals: list[EvalResult] = field(default_factory=list)  # the sweep's accuracy scores
    accuracy_tolerance: float = 0.0
    mode: str = "dispatch"  # how the sweep reached the runners (.github/sweepbot.yml sweep.mode)


def load_report_data(session: Session, sweep_id: int) -> ReportData:
    from app.core.references import ReferenceError, choose_reference
    from app.flows.results import find_reusable
    from app.models.sweeps import Sweep, SweepJob

    sweep = session.get(Sweep, sweep_id)
    if sweep is None:
        raise LookupError(f"sweep {sweep_id} does not exist (see `sweepbot queue` for open sweeps)")
    from app.flows.scheduler import display_key

    # Points as a curve is read (ascending conc per seq-len and tp), not in release order.
    jobs = sorted(session.scalars(select(SweepJob).where(SweepJob.sweep_id == sweep_id)), key=display_key)
    views = [
        JobView(j.id, j.conc, j.seq, j.tp, j.state, j.run_url, j.reason, j.result_name, dict(j.point or {}))
        for j in jobs
    ]
    results: dict[str, list[Result]] = {}
    for row in session.scalars(select(Result).where(Result.sweep_id == sweep_id).order_by(Result.id)):
        results.setdefault(row.result_name, []).append(row)
    for j in jobs:
        if j.state == "reused" and j.result_name not in results:
            hit = find_reusable(
                session, image=sweep.image, fingerprint=sweep.fingerprint, result_name=j.result_name
            )
            if hit is not None:
                results[j.result_name] = [hit]
    newer = session.scalars(
        select(Sweep.id)
        .where(
            Sweep.repo == sweep.repo,
            Sweep.pr_number == sweep.pr_number,
            Sweep.config_key == sweep.config_key,
            Sweep.id > sweep.id,
        )
        .order_by(Sweep.id.desc())
        .limit(1)
    ).first()
    evals = list(
        session.scalars(select(EvalResult).where(EvalResult.sweep_id == sweep_id).order_by(EvalResult.id))
    )
    have_eval = {e.result_name for e in evals}
    for j in jobs:
        if j.state == "reused" and (j.point or {}).get("run-eval") and j.result_name not in have_eval:
            evals += list(
                session.scalars(
                    select(EvalResult)
                    .where(
                        EvalResult.image == sweep.image,
                        EvalResult.fingerprint == sweep.fingerprint,
                        EvalResult.result_name == j.result_name,
                    )
                    .order_by(EvalResult.id)
                )
            )
    superseded = sweep.superseded_by or newer
    point = dict(jobs[0].point) if jobs else {}
    notes: list[str] = []
    reference = None
    try:
        reference = choose_reference(
            session,
            config_key=sweep.config_key,
            model=point.get("model"),
            hardware=point.get("runner"),
            tp=point.get("tp"),
            isl=point.get("isl"),
            osl=point.get("osl"),
            configured=_configured_references(session, sweep.repo),
        )
    except ReferenceError as exc:
        notes.append(f"Reference configuration problem: {exc}")
    return ReportData(
        sweep.id,
        sweep.repo,
        sweep.pr_number,
        sweep.config_key,
        sweep.image,
        sweep.fingerprint,
        sweep.head_sha,
        sweep.requested_by,
        sweep.state,
        views,
        results,
        reference,
        superseded,
        notes,
        evals,
        _accuracy_tolerance(),
        str((sweep.filters or {}).get("mode") or "dispatch"),
    )


def _accuracy_tolerance() -> float:
    from app.settings import get_settings

    return float(get_settings().accuracy_tolerance)


def _configured_references(session: Session, repo: str) -> dict[str, str] | None:
    """``references:`` of the repo's bot config (config key -> table name | sibling | none), if any."""
    try:
        from app.flows.botconfig import stored_config
    except ImportError:
        return None
    cfg = stored_config(session, repo)
    refs = getattr(cfg, "references", None) if cfg is not None else None
    return dict(refs) if isinstance(refs, dict) else None


# ------------------------------------------------------------------------------------ rendering


def progress_bar(done: int, total: int, width: int = 20) -> str:
    filled = round(width * done / total) if total else width
    return "█" * filled + "░" * (width - filled)


def _mermaid(
    concs: Sequence[int],
    recipe: Sequence[float],
    ref: Sequence[float] | None,
    recipe_label: str,
    ref_label: str,
) -> str:
    top = max([*recipe, *(ref or [])]) * 1.15
    title = f"Mean TPOT (ms) vs conc: {recipe_label} (1st line)" + (
        f" vs {ref_label} (2nd line)" if ref else ""
    )
    lines = [
        "```mermaid",
        "xychart-beta",
        f'    title "{title}"',
        f'    x-axis "conc" [{", ".join(str(c) for c in concs)}]',
        f'    y-axis "mean TPOT (ms)" 0 --> {top:.0f}',
        f"    line [{', '.join(f'{v:.2f}' for v in recipe)}]",
    ]
    if ref:
        lines.append(f"    line [{', '.join(f'{v:.2f}' for v in ref)}]")
    lines.append("```")
    return "\n".join(lines)


def render_report_data(data: ReportData, *, recipe_label: str | None = None) -> str:
    from app.core.gap import compute_gap, render_gap_table, render_tput_table, tput_gap_at_equal_interactivity

    framework = None
    for stored in data.results.values():
        framework = stored[0].framework or framework
    label = recipe_label or {"vllm": "vLLM", "sglang": "SGLang", "atom": "ATOM", "trt": "TRT-LLM"}.get(
        (framework or "").lower(), framework or "recipe"
    )
    ref = data.reference
    ref_label = ref.label() if ref is not None else "reference"
    metric = ref.metric if ref is not None else "mean_tpot_ms"
    total = len(data.jobs)
    done = sum(1 for j in data.jobs if j.state in FINAL_JOB_STATES)
    counts: dict[str, int] = {}
    for j in data.jobs:
        counts[j.state] = counts.get(j.state, 0) + 1
    out = [f"### sweepbot: `{data.config_key}` — {label} vs {ref_label}", ""]
    if data.superseded_by:
        out += [
            f"> [!NOTE]\n> Superseded by sweep #{data.superseded_by}: a newer sweep of this config key "
            "replaces these results.",
            "",
        ]
    state_text = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    if done < total:
        out.append(f"**Running** `{progress_bar(done, total)}` {done}/{total} points done ({state_text})")
    else:
        out.append(f"**Finished**: {total} points ({state_text})")
    out += [
        "",
        f"Image `{data.image}` · recipe fingerprint `{data.fingerprint[:12]}` · head `{data.head_sha[:7]}` · "
        f"sweep #{data.sweep_id} requested by @{data.requested_by}",
        "",
        "Sweep mode: "
        + (
            "**label** — the repo's own sweep run (run-sweep.yml, started by its sweep label), "
            "followed by the bot"
            if data.mode == "label"
            else "**dispatch** — the bot's queue, one e2e-tests.yml run per concurrency"
        ),
        "",
    ]
    verdict_at = len(out)  # the overall verdict line goes here once both tables are known
    latency_rows: list[Any] = []

    # One table per (seq, tp) group; the common case is a single group.
    groups: dict[tuple[str, int], list[JobView]] = {}
    for j in data.jobs:
        groups.setdefault((j.seq, j.tp), []).append(j)
    for (seq, tp), jobs in groups.items():
        by_conc: dict[int, list[float]] = {}
        curve: list[tuple[float, float]] = []
        for j in jobs:
            for row in data.results.get(j.result_name, []):
                value = getattr(row, metric, None)
                if value is not None:
                    by_conc.setdefault(j.conc, []).append(float(value))
                if row.interactivity is not None and row.tput_per_gpu is not None:
                    curve.append((row.interactivity, row.tput_per_gpu))
        ref_values: dict[int, float] = {}
        applies = ref is not None and (ref.tp in (None, tp)) and _seq_matches(ref, seq)
        if applies and ref is not None:
            ref_values = {c: v[metric] for c, v in ref.points.items() if metric in v}
        concs = sorted({j.conc for j in jobs} | (set(ref_values) if by_conc else set()))
        rows = compute_gap(by_conc, ref_values, metric=metric, concs=concs)
        latency_rows += rows
        if len(groups) > 1:
            out += [f"#### {seq}, tp {tp}", ""]
        out += [
            render_gap_table(rows, metric=metric, recipe_label=label, reference_label=ref_label, icons=True),
            "",
        ]
        if ref is None:
            out += [
                "No reference applies to this config key (configure one under `references:` in "
                "`.github/sweepbot.yml`).",
                "",
            ]
        elif not applies:
            out += [f"The reference {ref.name} is for a different tp or sequence length; no gap shown.", ""]
        else:
            direction = "lower is better" if metric.endswith("_ms") else "higher is better"
            out += [
                f"Gap = ({label} − {ref_label}) / {ref_label} on `{metric}` ({direction}); *matched* means "
                "inside the noise (2σ of repeated runs, or 1% for a single run).",
                "",
            ]
        both = [c for c in concs if by_conc.get(c) and c in ref_values]
        only = [c for c in concs if by_conc.get(c)]
        if len(both) >= 2:
            out += [
                _mermaid(
                    both,
                    [statistics.fmean(by_conc[c]) for c in both],
                    [ref_values[c] for c in both],
                    label,
                    ref_label,
                ),
                "",
            ]
        elif len(only) >= 2:
            out += [_mermaid(only, [statistics.fmean(by_conc[c]) for c in only], None, label, ref_label), ""]
        if applies and curve and ref is not None:
            ref_curve = ref.tput_curve()
            if ref_curve:
                out += [
                    "<details><summary>Throughput per GPU at equal interactivity</summary>",
                    "",
                    render_tput_table(
                        tput_gap_at_equal_interactivity(curve, ref_curve),
                        recipe_label=label,
                        reference_label=ref_label,
                    ),
                    "",
                    "</details>",
                    "",
                ]
    accuracy_rows = _accuracy_section(data, out, label, ref_label)
    from app.core.accuracy import overall_verdict_line

    out[verdict_at:verdict_at] = [f"**Verdict** — {overall_verdict_line(latency_rows, accuracy_rows)}", ""]
    if ref is not None:
        src = f"[{ref.name}]({ref.source})" if ref.source else ref.name
        commit = f" @ `{ref.commit[:10]}`" if ref.commit else ""
        out.append(f"Reference: {src}{commit}.")
        if ref.caveat:
            out.append(f"\n> [!CAUTION]\n> {ref.caveat}")
        out.append("")
    out += [
        "<details><summary>Runs</summary>",
        "",
        "| conc | seq | tp | state | run | note |",
        "| ---: | --- | ---: | --- | --- | --- |",
    ]
    for j in data.jobs:
        run = f"[run]({j.run_url})" if j.run_url else "—"
        note = (j.reason or "").replace("|", "\\|").replace("\n", " ")[:200]
        out.append(f"| {j.conc} | {j.seq} | {j.tp} | {j.state} | {run} | {note} |")
    out += ["", "</details>"]
    out += [f"\n{n}" for n in data.notes]
    out += ["", report_marker(data.config_key)]
    return "\n".join(out)


def _accuracy_section(data: ReportData, out: list[str], label: str, ref_label: str) -> list[Any]:
    """Append the accuracy table (beside the latency table) to ``out``; return its rows."""
    from app.core.accuracy import accuracy_notes, compare_accuracy, render_accuracy_table

    planned = [j for j in data.jobs if (j.point or {}).get("run-eval")]
    if not data.evals and not planned:
        return []
    ref = data.reference
    refs = list(ref.accuracy) if ref is not None else []
    rows = compare_accuracy(data.evals, refs, tolerance=data.accuracy_tolerance)
    out += ["#### Accuracy", ""]
    if not rows:
        waiting = sum(1 for j in planned if j.state not in FINAL_JOB_STATES)
        if waiting:
            out += [f"No eval result yet: {waiting} of {len(planned)} eval points not finished.", ""]
        else:
            out += [f"No eval result was stored for the {len(planned)} eval points (see the runs below).", ""]
        return rows
    out += [render_accuracy_table(rows, recipe_label=label, reference_label=ref_label, icons=True), ""]
    out += [
        "*Not worse* = the score is at most one standard error of the difference below the reference"
        + (
            f" (or within the configured tolerance of {data.accuracy_tolerance * 100:g} points)"
            if data.accuracy_tolerance
            else ""
        )
        + "; diff in percentage points.",
        "",
    ]
    out += [f"> [!NOTE]\n> {note}\n" for note in accuracy_notes(rows)]
    if ref is not None and ref.accuracy:
        where = ref.accuracy_source or ref.source or ref.name
        shown = f"[{ref.name}]({where})" if where.startswith("https://") else where
        exact = all(a.stderr is None for a in ref.accuracy)
        out += [
            f"Reference accuracy: {shown}"
            + (" (published figures without a standard error, counted as exact)." if exact else "."),
            "",
        ]
    elif rows:
        out += [
            "No reference accuracy applies (the reference table publishes none and the sibling has no eval).",
            "",
        ]
    return rows


def _seq_matches(ref: Any, seq: str) -> bool:
    if ref.isl is None or ref.osl is None:
        return True
    names = {f"{ref.isl}_{ref.osl}"}
    if ref.isl % 1024 == 0 and ref.osl % 1024 == 0:
        names.add(f"{ref.isl // 1024}k{ref.osl // 1024}k")
    return seq in names


def render_report(session: Session, sweep_id: int) -> str:
    return render_report_data(load_report_data(session, sweep_id))


def pr_status_text(session: Session, *, repo: str, pr_number: int) -> str:
    """``/sweep status``: the newest sweep per config key of this PR, with progress."""
    from app.models.sweeps import Sweep, SweepJob

    sweeps = list(
        session.scalars(
            select(Sweep).where(Sweep.repo == repo, Sweep.pr_number == pr_number).order_by(Sweep.id.desc())
        )
    )
    if not sweeps:
        return "No sweep has been requested on this PR yet. Start one with `/sweep`."
    seen: set[str] = set()
    lines = ["| config key | sweep | state | progress |", "| --- | ---: | --- | --- |"]
    for sweep in sweeps:
        if sweep.config_key in seen:
            continue
        seen.add(sweep.config_key)
        states = list(session.scalars(select(SweepJob.state).where(SweepJob.sweep_id == sweep.id)))
        done = sum(1 for s in states if s in FINAL_JOB_STATES)
        lines.append(
            f"| `{sweep.config_key}` | #{sweep.id} | {sweep.state} | "
            f"`{progress_bar(done, len(states), 10)}` {done}/{len(states)} |"
        )
    return "\n".join(lines)
