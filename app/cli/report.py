"""``sweepbot report SWEEP_ID`` and ``sweepbot gap --results DIR --reference FILE`` (offline)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from app.core.accuracy import (
    AccuracyRow,
    accuracy_notes,
    compare_accuracy,
    overall_verdict_line,
    render_accuracy_table,
)
from app.core.artifacts import AGENTIC_BMK_PREFIX, AGG_PREFIX, BMK_PREFIX, EVAL_PREFIX
from app.core.artifactzip import ArtifactError, safe_json_members
from app.core.evals import EvalFileError, parse_lm_eval, parse_meta_env, results_member
from app.core.gap import (
    GapRow,
    gap_table,
    identity_mismatch,
    render_gap_table,
    render_tput_table,
    run_identity,
    tput_gap_at_equal_interactivity,
)
from app.core.references import Reference, ReferenceError, load_reference, metric_field
from app.core.resultfile import ResultFileError, parse_result
from app.core.thresholds import (
    ThresholdsError,
    gate_summary,
    judge,
    model_prefix,
    outcome_text,
    parse_thresholds,
    task_outcomes,
)


def report_command(sweep_id: Annotated[int, typer.Argument(help="The sweep's id.")]) -> None:
    """Print the markdown of the sweep's report comment, as the bot would post it."""
    from app.db import session_scope  # lazy: `gap`, registered with it, is offline (bench/cli.py)
    from app.flows.results.reports import render_report  # lazy: as above

    with session_scope() as session:
        try:
            body = render_report(session, sweep_id)
        except LookupError as exc:
            typer.echo(str(exc), err=True)
            raise typer.Exit(2) from exc
    typer.echo(body)


def _is_lm_eval(path: Path, body: bytes) -> bool:
    """An lm-eval result file: named ``results*.json``, or shaped like one (``results`` + ``n-samples``)."""
    if path.name.startswith("results") and path.suffix == ".json":
        return True
    head = body[:65536]
    return b'"results"' in head and (b'"n-samples"' in head or b'"lm_eval_version"' in head)


def _eval_scores_from_zip(path: Path) -> list[Any]:
    """Scores of an eval artifact zip (``eval_*.zip`` as downloaded), tagged with meta_env's conc."""
    members = safe_json_members(path.read_bytes())
    metas = [n for n in members if n.rsplit("/", 1)[-1] == "meta_env.json"]
    meta = parse_meta_env(members[metas[0]], f"{path.name}:{metas[0]}") if metas else None
    name, body = results_member(members, meta.conc if meta else None)
    parsed = parse_lm_eval(body, f"{path.name}:{name}")
    return [_WithConc(s, meta.conc if meta else None) for s in parsed.scores]


class _WithConc:
    """An ``EvalScore`` plus the conc its eval ran at (from meta_env.json), for the table."""

    def __init__(self, score: Any, conc: int | None) -> None:
        self._score, self.conc = score, conc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._score, name)


_EVAL_LOGS = ("eval_server_logs_", "eval_gpu_metrics_")  # an eval-only job's logs, not its scores


def _bmk_results(path: Path) -> list[tuple[str, bytes]]:
    """The result files of a downloaded ``bmk_<RF>.zip``, as collection reads them: ``agg_<RF>.json``
    (single-node) or ``agg_<RF>_*.json`` (multi-node, one per concurrency); a renamed download
    falls back to its ``agg_*.json`` files."""
    members = safe_json_members(path.read_bytes())
    rf = path.name[len(BMK_PREFIX) : -len(".zip")]
    base = {n: n.rsplit("/", 1)[-1] for n in members}
    own = [n for n, b in base.items() if b == f"{AGG_PREFIX}{rf}.json" or b.startswith(f"{AGG_PREFIX}{rf}_")]
    own = own or [n for n, b in base.items() if b.startswith(AGG_PREFIX)]
    if not own:
        held = ", ".join(sorted(members)) or "no JSON files"
        raise ValueError(f"{path.name}: no agg_*.json result file in the artifact (it holds: {held})")
    return [(f"{path.name}:{n}", members[n]) for n in sorted(own)]


def _read_dir(results: Path) -> tuple[list[tuple[str, bytes]], list[Any]]:
    """(latency files as (name, body), eval scores) of a folder of files and artifact zips."""
    files = sorted(p for p in results.iterdir() if p.is_file() and p.suffix.lower() in (".json", ".zip"))
    if not files:
        raise ValueError(
            f"{results}: no .json or .zip result files found (expected benchmark_serving or agg_*.json "
            "files, lm-eval results*.json files, or downloaded bmk_/eval_ artifact zips)"
        )
    latency: list[tuple[str, bytes]] = []
    eval_files: list[tuple[str, bytes]] = []
    eval_scores: list[Any] = []
    meta_conc: int | None = None
    for path in files:
        if path.suffix.lower() == ".zip":
            if path.name.startswith(EVAL_PREFIX) and not path.name.startswith(_EVAL_LOGS):
                eval_scores += _eval_scores_from_zip(path)
            elif path.name.startswith(BMK_PREFIX) and not path.name.startswith(AGENTIC_BMK_PREFIX):
                latency += _bmk_results(path)
            # any other zip a job uploads (power_audit_, server_logs_, gpu_metrics_, agentic ...)
            # holds no result of its own: power_audit_ copies the bmk_ files, read it and every
            # concurrency would count twice
            continue
        body = path.read_bytes()
        if path.name == "meta_env.json":
            meta_conc = parse_meta_env(body, path.name).conc
        elif _is_lm_eval(path, body):
            eval_files.append((path.name, body))
        else:
            latency.append((path.name, body))
    for name, body in eval_files:
        eval_scores += [_WithConc(s, meta_conc) for s in parse_lm_eval(body, name).scores]
    return latency, eval_scores


def _record(body: bytes) -> dict[str, object]:
    """The top-level record of a result file parse_result has accepted (a one-record list or not)."""
    data = json.loads(body)
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    return data if isinstance(data, dict) else {}


def _latency_part(
    latency: list[tuple[str, bytes]], ref: Reference, reference_file: Path, field: str
) -> tuple[list[str], list[GapRow]]:
    runs = []
    for name, body in latency:
        parsed = parse_result(body, name, tp=ref.tp)
        mismatch = identity_mismatch(ref, run_identity(_record(body), name))
        if mismatch:
            raise ValueError(
                f"not comparable with {reference_file.name}: {mismatch}; pass the results of that "
                "model, TP and sequence lengths, or a --reference table for what these measured"
            )
        if parsed.conc is None:
            raise ValueError(
                f"{name}: field 'max_concurrency': missing, so the file cannot be placed on "
                'the curve; add "max_concurrency": N'
            )
        if parsed.metrics().get(field) is None:
            raise ValueError(
                f"{name}: field {field!r}: missing; pick another --metric "
                f"(the reference publishes {', '.join(sorted(next(iter(ref.points.values()))))})"
            )
        runs.append((parsed.conc, parsed))
    table = gap_table(runs, ref, tp=ref.tp, metric=field)
    if not table.reference:
        raise ValueError(f"{reference_file}: the reference publishes no {field!r}; pick another --metric")
    out = [
        f"Gap on {field} against {ref.name} ({ref.engine or 'reference'}); lower is better"
        if field.endswith("_ms")
        else f"Gap on {field} against {ref.name}; higher is better"
    ]
    if ref.source:
        out.append(f"Reference source: {ref.source}")
    if ref.caveat:
        out.append(f"Caveat: {ref.caveat}")
    out += ["", render_gap_table(table.rows, metric=field, reference_label=ref.label())]
    ref_curve = ref.tput_curve()
    if ref_curve:
        out += [
            "",
            "Throughput per GPU at equal interactivity:",
            "",
            render_tput_table(
                tput_gap_at_equal_interactivity(table.curve, ref_curve), reference_label=ref.label()
            ),
        ]
    return out, table.rows


def _accuracy_part(eval_scores: list[Any], ref: Reference) -> tuple[list[str], list[AccuracyRow]]:
    rows = compare_accuracy(eval_scores, ref.accuracy)
    where = ref.accuracy_source or ref.source or ref.name
    out = [
        f"Accuracy against {ref.name} ({where if ref.accuracy else 'it publishes no accuracy'}); "
        "not worse = at most one standard error below the reference",
        "",
        render_accuracy_table(rows, reference_label=ref.label()),
    ]
    notes = accuracy_notes(rows)
    if notes:
        out += [""] + [f"Note: {n}" for n in notes]
    return out, rows


def _threshold_part(
    eval_scores: list[Any], thresholds_file: Path, prefix: str | None
) -> tuple[list[str], str | None]:
    """The repo gate's verdict per task (``utils/evals/thresholds.yaml`` as validate_scores.py
    applies it), and the verdict line's part."""
    gate = parse_thresholds(thresholds_file.read_text(), path=str(thresholds_file))
    outcomes = task_outcomes(judge(eval_scores, gate, model_prefix(prefix)))
    model = f"model prefix {prefix}" if model_prefix(prefix) else "no model prefix"
    out = [f"Against the repo's thresholds ({thresholds_file}, {model}):", ""]
    out += [f"- {task}: {outcome_text(v).replace('**', '')}" for task, v in outcomes.items()]
    if not outcomes:
        out.append("- no score validate_scores.py checks (none of the declared metrics, else exact_match)")
    return out, gate_summary(outcomes)


def gap_table_for_dir(
    results: Path,
    reference_file: Path,
    metric: str,
    thresholds_file: Path | None = None,
    prefix: str | None = None,
) -> str:
    """The gap report for a folder of result files against a reference file (pure but for reads).

    The folder may hold benchmark result JSON (either schema), lm-eval result files
    (``results*.json``, with an optional ``meta_env.json`` beside them) and downloaded artifact
    zips (``bmk_*.zip``, ``eval_*.zip``); latency files give the latency table, eval files the
    accuracy table, and the last line is the verdict over both.
    """
    ref = load_reference(reference_file)
    field = metric_field(metric)
    latency, eval_scores = _read_dir(results)
    out: list[str] = []
    rows: list[GapRow] = []
    if latency:
        out, rows = _latency_part(latency, ref, reference_file, field)
    accuracy_rows: list[AccuracyRow] = []
    if eval_scores:
        if out:
            out.append("")
        part, accuracy_rows = _accuracy_part(eval_scores, ref)
        out += part
    verdict = overall_verdict_line(rows, accuracy_rows)
    if thresholds_file is not None and eval_scores:
        part, summary = _threshold_part(eval_scores, thresholds_file, prefix or _meta_prefix(results))
        out += ["", *part]
        verdict += f"; {summary}" if summary else ""
    out += ["", f"Verdict: {verdict}"]
    return "\n".join(out)


def _meta_prefix(results: Path) -> str | None:
    """``infmax_model_prefix`` of the folder's meta_env.json, as validate_scores.py reads it."""
    meta = results / "meta_env.json"
    return parse_meta_env(meta.read_bytes(), meta.name).model_prefix if meta.is_file() else None


def gap_command(
    results: Annotated[
        Path,
        typer.Option(
            "--results",
            help="Folder of result files: benchmark JSON, lm-eval results*.json, artifact zips.",
            exists=True,
            file_okay=False,
            dir_okay=True,
        ),
    ],
    reference: Annotated[
        Path,
        typer.Option(
            "--reference",
            help="Reference table (YAML, as app/core/references/).",
            exists=True,
            dir_okay=False,
        ),
    ],
    metric: Annotated[
        str, typer.Option("--metric", help="Metric to compare, e.g. mean_tpot, p99_tpot.")
    ] = "mean_tpot",
    thresholds: Annotated[
        Path | None,
        typer.Option(
            "--thresholds",
            help="The benchmark repo's utils/evals/thresholds.yaml: also judge accuracy as its "
            "validate_scores.py does.",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    model_prefix_opt: Annotated[
        str | None,
        typer.Option(
            "--model-prefix",
            help="The model prefix for per-model thresholds (default: meta_env.json's infmax_model_prefix).",
        ),
    ] = None,
) -> None:
    """Print the per-concurrency gap and the accuracy table of a folder of results, offline."""
    try:
        typer.echo(gap_table_for_dir(results, reference, metric, thresholds, model_prefix_opt))
    except (
        ValueError,
        ReferenceError,
        ResultFileError,
        EvalFileError,
        ArtifactError,
        ThresholdsError,
    ) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
