"""The gap between a recipe and its reference, per concurrency (pure: values in, rows out).

- Gap = (recipe - reference) / reference on the metric the reference publishes (mean TPOT for
  the ATOM table: mean compared with mean, never median with mean).
- Verdict: a difference inside the measured noise is ``matched``; the noise is two sample
  standard deviations of the recipe's runs at that conc relative to their mean, or 1% when there
  is a single run. For latencies lower is better (a positive gap is ``behind``); for throughput
  and interactivity higher is better.
- Missing data is said, not guessed: "no result" (reference but no recipe run), "no reference at
  this conc" (run but no reference point).
- ``gap_table`` is the one derivation of a gap table from stored runs and a reference (which
  reference values apply, which concs are listed): the sticky report and the dashboard both call it.
- Throughput per GPU at equal interactivity: at each reference point's interactivity, the
  recipe's throughput per GPU is interpolated linearly between its two neighbouring points, only
  where the recipe's curve covers that interactivity; otherwise "not enough data".
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from app.core.references import Reference
from app.core.seqlen import seq_name

SINGLE_RUN_TOLERANCE = 0.01
NO_RESULT = "no result"
NO_REFERENCE = "no reference at this conc"
NOT_ENOUGH = "not enough data"


def lower_is_better(metric: str) -> bool:
    return metric.endswith("_ms")


@dataclass(frozen=True)
class GapRow:
    conc: int
    recipe: float | None  # mean over the recipe's runs at this conc
    runs: int
    reference: float | None
    gap: float | None  # (recipe - reference) / reference
    tolerance: float | None  # relative noise band used for the verdict
    verdict: str  # behind | matched | ahead | no result | no reference at this conc


@dataclass(frozen=True)
class TputGapRow:
    interactivity: float  # tok/s/user, the reference point's
    reference_conc: int
    reference: float  # reference throughput per GPU
    recipe: float | None  # interpolated recipe throughput per GPU
    gap: float | None
    note: str  # "" or "not enough data"


def noise_tolerance(values: Sequence[float]) -> float:
    if len(values) < 2:
        return SINGLE_RUN_TOLERANCE
    mean = statistics.fmean(values)
    if mean == 0:
        return SINGLE_RUN_TOLERANCE
    return 2.0 * statistics.stdev(values) / abs(mean)


def verdict(gap: float, tolerance: float, *, lower_better: bool) -> str:
    if abs(gap) <= tolerance + 1e-12:
        return "matched"
    worse = gap > 0 if lower_better else gap < 0
    return "behind" if worse else "ahead"


def compute_gap(
    recipe: Mapping[int, Sequence[float]],
    reference: Mapping[int, float],
    *,
    metric: str = "mean_tpot_ms",
    concs: Iterable[int] | None = None,
) -> list[GapRow]:
    """One row per conc in ``concs`` (default: every conc that has a result or a reference point)."""
    lower = lower_is_better(metric)
    wanted = sorted(set(concs) if concs is not None else set(recipe) | set(reference))
    rows: list[GapRow] = []
    for conc in wanted:
        values = [v for v in recipe.get(conc, ()) if v is not None and math.isfinite(v)]
        ref = reference.get(conc)
        mean = statistics.fmean(values) if values else None
        if mean is None:
            rows.append(GapRow(conc, None, 0, ref, None, None, NO_RESULT))
            continue
        if ref is None or ref == 0:
            rows.append(GapRow(conc, mean, len(values), None, None, None, NO_REFERENCE))
            continue
        gap = (mean - ref) / ref
        tol = noise_tolerance(values)
        rows.append(GapRow(conc, mean, len(values), ref, gap, tol, verdict(gap, tol, lower_better=lower)))
    return rows


def reference_applies(reference: Reference | None, *, tp: int | None, seq: str | None) -> bool:
    """A reference speaks for runs at ``tp`` and sequence lengths ``seq`` (``8k1k`` or ``<isl>_<osl>``)
    when it names no tp or the same one, and no sequence lengths or the same ones (``seq`` None: not
    checked)."""
    if reference is None or reference.tp not in (None, tp):
        return False
    if seq is None or reference.isl is None or reference.osl is None:
        return True
    return seq == seq_name(reference.isl, reference.osl)


class Run(Protocol):
    """One measured run as the gap reads it: a stored result or a parsed result file. The compared
    metric is read by its field name (``mean_tpot_ms`` ...)."""

    @property
    def interactivity(self) -> float | None: ...

    @property
    def tput_per_gpu(self) -> float | None: ...


@dataclass(frozen=True)
class GapTable:
    metric: str  # the result field compared (by default the reference's headline metric)
    applies: bool  # there is a reference and it is for these runs' tp and sequence lengths
    recipe: dict[int, list[float]]  # conc -> the metric of every run at that conc
    reference: dict[int, float]  # conc -> the reference's value (empty when it does not apply)
    curve: list[tuple[float, float]]  # (interactivity, throughput per GPU) of every run that has both
    rows: list[GapRow]


def gap_table(
    runs: Iterable[tuple[int, Run]],
    reference: Reference | None,
    *,
    tp: int | None,
    seq: str | None = None,
    planned: Iterable[int] | None = None,
    metric: str | None = None,
) -> GapTable:
    """The gap table of one group of runs (one tp and sequence length) against ``reference``.

    ``runs``: (conc, stored result) pairs, a result read by metric name (``mean_tpot_ms`` ...).
    ``planned``: the concs the table lists (a sweep's points), plus the reference's once any run
    has a value; without it, every conc that has a run or a reference point. ``metric``: the
    result field compared (default: the reference's headline metric, else ``mean_tpot_ms``).
    """
    if metric is None:
        metric = reference.metric if reference is not None else "mean_tpot_ms"
    by_conc: dict[int, list[float]] = {}
    curve: list[tuple[float, float]] = []
    for conc, row in runs:
        value = getattr(row, metric, None)
        if value is not None:
            by_conc.setdefault(conc, []).append(float(value))
        if row.interactivity is not None and row.tput_per_gpu is not None:
            curve.append((row.interactivity, row.tput_per_gpu))
    applies = reference_applies(reference, tp=tp, seq=seq)
    ref_values: dict[int, float] = {}
    if applies and reference is not None:
        ref_values = {c: v[metric] for c, v in reference.points.items() if metric in v}
    concs = None
    if planned is not None:
        concs = sorted(set(planned) | (set(ref_values) if by_conc else set()))
    rows = compute_gap(by_conc, ref_values, metric=metric, concs=concs)
    return GapTable(metric, applies, by_conc, ref_values, curve, rows)


def interpolate(curve: Sequence[tuple[float, float]], x: float) -> float | None:
    """Linear interpolation of ``y`` at ``x`` on ``curve`` (x, y); None outside it (no extrapolation)."""
    by_x: dict[float, list[float]] = {}
    for cx, cy in curve:
        by_x.setdefault(cx, []).append(cy)
    pts = sorted((cx, statistics.fmean(ys)) for cx, ys in by_x.items())
    if len(pts) < 2 or x < pts[0][0] or x > pts[-1][0]:
        if len(pts) == 1 and math.isclose(pts[0][0], x, rel_tol=1e-9):
            return pts[0][1]
        return None
    for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
        if x0 <= x <= x1:
            if x1 == x0:
                return y0
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return None


def tput_gap_at_equal_interactivity(
    recipe_curve: Sequence[tuple[float, float]],
    reference_points: Mapping[int, tuple[float, float]],
) -> list[TputGapRow]:
    """``recipe_curve``: (interactivity, tput/GPU) per run; ``reference_points``: conc -> the same."""
    rows: list[TputGapRow] = []
    for conc in sorted(reference_points):
        x, ref = reference_points[conc]
        got = interpolate(recipe_curve, x)
        if got is None or ref == 0:
            rows.append(TputGapRow(x, conc, ref, None, None, NOT_ENOUGH))
        else:
            rows.append(TputGapRow(x, conc, ref, got, (got - ref) / ref, ""))
    return rows


# ------------------------------------------------------------------------------------ formatting


def fmt_pct(gap: float | None) -> str:
    if gap is None:
        return "—"
    pct = round(gap * 100, 1)
    if pct == 0:
        return "0.0%"
    return f"{pct:+.1f}%"


def fmt_value(value: float | None, metric: str) -> str:
    if value is None:
        return "—"
    if metric.endswith("_ms"):
        return f"{value:.2f} ms"
    return f"{value:,.1f}"


_VERDICT_ICON = {"behind": "🔴 behind", "matched": "🟢 matched", "ahead": "🔵 ahead"}


def render_gap_table(
    rows: Sequence[GapRow],
    *,
    metric: str,
    recipe_label: str = "vLLM",
    reference_label: str = "ATOM ref",
    icons: bool = False,
) -> str:
    """Markdown table ``conc | vLLM | ATOM ref | gap | verdict``."""
    lines = [
        f"| conc | {recipe_label} | {reference_label} | gap | verdict |",
        "| ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        recipe = fmt_value(r.recipe, metric)
        if r.runs > 1:
            recipe += f" (n={r.runs})"
        shown = _VERDICT_ICON.get(r.verdict, r.verdict) if icons else r.verdict
        lines.append(
            f"| {r.conc} | {recipe} | {fmt_value(r.reference, metric)} | {fmt_pct(r.gap)} | {shown} |"
        )
    return "\n".join(lines)


def render_tput_table(
    rows: Sequence[TputGapRow], *, recipe_label: str = "vLLM", reference_label: str = "ATOM ref"
) -> str:
    lines = [
        f"| interactivity (tok/s/user) | {recipe_label} tok/s/GPU | {reference_label} tok/s/GPU | gap |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        recipe = f"{r.recipe:,.1f}" if r.recipe is not None else r.note
        lines.append(
            f"| {r.interactivity:.1f} (ref conc {r.reference_conc}) | {recipe} | {r.reference:,.1f} | "
            f"{fmt_pct(r.gap)} |"
        )
    return "\n".join(lines)


# ------------------------------------------------------------------ what a result was measured on


@dataclass(frozen=True)
class RunIdentity:
    """What one result file says it measured (None: the file does not say)."""

    file: str
    model: str | None = None
    tp: int | None = None
    isl: int | None = None  # declared (a field, or isl<N> in the file name)
    osl: int | None = None
    mean_input: float | None = None  # input tokens per request, where the file counts them
    mean_output: float | None = None


_ISL_OSL_IN_NAME = re.compile(r"(?:^|[_\-.])isl(\d+)[_\-.]osl(\d+)(?:[_\-.]|$)", re.IGNORECASE)


def _whole(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value) or value < 1:
        return None
    return int(value)


def _count(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def run_identity(doc: Mapping[str, object], file_name: str) -> RunIdentity:
    """The model, tp and sequence lengths a result document names: InferenceX's aggregated files
    (``model``, ``tp``), benchmark_serving's raw ones (``model_id``, token totals), and the
    ``isl<N>_osl<M>`` of InferenceX's result file names."""
    model = next((v for k in ("model", "model_id") if isinstance(v := doc.get(k), str) and v), None)
    isl = next((w for k in ("isl", "random_input_len", "input_len") if (w := _whole(doc.get(k)))), None)
    osl = next((w for k in ("osl", "random_output_len", "output_len") if (w := _whole(doc.get(k)))), None)
    named = _ISL_OSL_IN_NAME.search(file_name.rsplit("/", 1)[-1].rsplit(":", 1)[-1])
    if named and isl is None and osl is None:
        isl, osl = int(named.group(1)), int(named.group(2))
    requests = _count(doc.get("completed")) or _count(doc.get("num_prompts"))
    inputs, outputs = _count(doc.get("total_input_tokens")), _count(doc.get("total_output_tokens"))
    return RunIdentity(
        file=file_name,
        model=model,
        tp=_whole(doc.get("tp")),
        isl=isl,
        osl=osl,
        mean_input=inputs / requests if requests and inputs is not None else None,
        mean_output=outputs / requests if requests and outputs is not None else None,
    )


def _model_tokens(name: str) -> list[str]:
    return [t for t in re.split(r"[^a-z0-9]+", name.rsplit("/", 1)[-1].lower()) if t]


def same_model(a: str, b: str) -> bool:
    """One model, however it is published: the name after the org, compared word by word, where
    one may add words (a quantization: ``amd/MiniMax-M3-MXFP4`` is ``MiniMaxAI/MiniMax-M3``);
    ``GLM-4.7`` is not ``MiniMax-M3``, nor ``MiniMax-M2.5`` ``MiniMax-M3``."""
    ta, tb = _model_tokens(a), _model_tokens(b)
    shorter, longer = (ta, tb) if len(ta) <= len(tb) else (tb, ta)
    return bool(shorter) and longer[: len(shorter)] == shorter


# Random prompts are drawn between ISL x range ratio and ISL (ATOM's table: ratio 0.8): a mean below
# half the ISL, or above it, is another workload. Outputs may stop early, never run past the OSL.
MIN_INPUT_SHARE = 0.5
TOKEN_SLACK = 1.05


def identity_mismatch(reference: Reference, run: RunIdentity) -> str | None:
    """Why ``run`` cannot be compared with ``reference`` (model, tp, ISL or OSL differ), or None.

    What the file does not say is not held against it; what it says must agree."""
    ref_seq = f"ISL {reference.isl} / OSL {reference.osl}"
    if reference.model and run.model and not same_model(reference.model, run.model):
        return f"{run.file} measured model {run.model}, the reference {reference.model}"
    if reference.tp is not None and run.tp is not None and run.tp != reference.tp:
        return f"{run.file} ran at TP{run.tp}, the reference at TP{reference.tp}"
    if reference.isl is not None and run.isl is not None and run.isl != reference.isl:
        return f"{run.file} ran ISL {run.isl} / OSL {run.osl}, the reference {ref_seq}"
    if reference.osl is not None and run.osl is not None and run.osl != reference.osl:
        return f"{run.file} ran ISL {run.isl} / OSL {run.osl}, the reference {ref_seq}"
    isl, osl = reference.isl, reference.osl
    sent, got = run.mean_input, run.mean_output
    if (
        isl is not None
        and run.isl is None
        and sent is not None
        and not isl * MIN_INPUT_SHARE <= sent <= isl * TOKEN_SLACK
    ):
        return f"{run.file} sent {sent:.0f} input tokens per request, not the reference's {ref_seq}"
    if osl is not None and run.osl is None and got is not None and got > osl * TOKEN_SLACK:
        return (
            f"{run.file} generated {got:.0f} output tokens per request, more than the reference's {ref_seq}"
        )
    return None
