"""``sweepbot report SWEEP_ID`` and ``sweepbot gap --results DIR --reference FILE`` (offline)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def report_command(sweep_id: Annotated[int, typer.Argument(help="The sweep's id.")]) -> None:
    """Print the markdown of the sweep's report comment, as the bot would post it."""
    from app.db import session_scope
    from app.reports import render_report

    with session_scope() as session:
        try:
            body = render_report(session, sweep_id)
        except LookupError as exc:
            typer.echo(str(exc), err=True)
            raise typer.Exit(2) from exc
    typer.echo(body)


def gap_table_for_dir(results: Path, reference_file: Path, metric: str) -> str:
    """The gap report for a folder of result JSON files against a reference file (pure but for reads)."""
    from app.gap import compute_gap, render_gap_table, render_tput_table, tput_gap_at_equal_interactivity
    from app.references import load_reference, metric_field
    from app.results import parse_result

    ref = load_reference(reference_file)
    field = metric_field(metric)
    files = sorted(p for p in results.iterdir() if p.is_file() and p.suffix.lower() == ".json")
    if not files:
        raise ValueError(
            f"{results}: no .json result files found (expected benchmark_serving or agg_*.json files)"
        )
    by_conc: dict[int, list[float]] = {}
    curve: list[tuple[float, float]] = []
    for path in files:
        parsed = parse_result(path.read_bytes(), path.name, tp=ref.tp)
        if parsed.conc is None:
            raise ValueError(
                f"{path.name}: field 'max_concurrency': missing, so the file cannot be placed on "
                'the curve; add "max_concurrency": N'
            )
        value = parsed.metrics().get(field)
        if value is None:
            raise ValueError(
                f"{path.name}: field {field!r}: missing; pick another --metric "
                f"(the reference publishes {', '.join(sorted(next(iter(ref.points.values()))))})"
            )
        by_conc.setdefault(parsed.conc, []).append(float(value))
        if parsed.interactivity is not None and parsed.tput_per_gpu is not None:
            curve.append((parsed.interactivity, parsed.tput_per_gpu))
    ref_values = {c: v[field] for c, v in ref.points.items() if field in v}
    if not ref_values:
        raise ValueError(f"{reference_file}: the reference publishes no {field!r}; pick another --metric")
    rows = compute_gap(by_conc, ref_values, metric=field)
    out = [
        f"Gap on {field} against {ref.name} ({ref.engine or 'reference'}); lower is better"
        if field.endswith("_ms")
        else f"Gap on {field} against {ref.name}; higher is better"
    ]
    if ref.source:
        out.append(f"Reference source: {ref.source}")
    if ref.caveat:
        out.append(f"Caveat: {ref.caveat}")
    out += ["", render_gap_table(rows, metric=field, reference_label=ref.label())]
    ref_curve = ref.tput_curve()
    if ref_curve:
        out += [
            "",
            "Throughput per GPU at equal interactivity:",
            "",
            render_tput_table(tput_gap_at_equal_interactivity(curve, ref_curve), reference_label=ref.label()),
        ]
    return "\n".join(out)


def gap_command(
    results: Annotated[
        Path,
        typer.Option(
            "--results",
            help="Folder of result JSON files (either schema).",
            exists=True,
            file_okay=False,
            dir_okay=True,
        ),
    ],
    reference: Annotated[
        Path,
        typer.Option(
            "--reference", help="Reference table (YAML, as app/references/).", exists=True, dir_okay=False
        ),
    ],
    metric: Annotated[
        str, typer.Option("--metric", help="Metric to compare, e.g. mean_tpot, p99_tpot.")
    ] = "mean_tpot",
) -> None:
    """Print the per-concurrency gap of a folder of results against a reference, offline."""
    from app.references import ReferenceError
    from app.results import ResultFileError

    try:
        typer.echo(gap_table_for_dir(results, reference, metric))
    except (ValueError, ReferenceError, ResultFileError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
