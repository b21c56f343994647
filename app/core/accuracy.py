"""Accuracy against a reference, respecting sampling error (pure: scores in, rows and text out).

- The difference that matters is one-sided: how far the recipe's score falls *below* the
  reference, ``shortfall = reference - score``.
- Verdict: **not worse** when the shortfall is within the standard error of the difference
  (``sqrt(stderr² + reference_stderr²)``; a published figure without a stderr counts as exact) or
  within a configured tolerance, whichever is larger; **worse** otherwise; **not enough data**
  when the recipe's result has no standard error or no sample count; **no reference** when the
  reference publishes nothing for that task and filter.
- "Not worse" is not "better": a score above the reference inside the noise is reported as not
  worse, with its interval, and small samples say so (GSM8K at ``--limit 100`` has a 95% interval
  of about ±4 points at 95%).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

NOT_WORSE = "not worse"
WORSE = "worse"
NOT_ENOUGH = "not enough data"
NO_REFERENCE = "no reference"
Z95 = 1.96
# A 95% half-width above this (in score units) is called wide: small enough samples that a real
# drop of a couple of points would go unseen.
WIDE_HALF_WIDTH = 0.02

# Reference spellings of a filter (`gsm8k_5shot_flexible`) -> the harness's filter names.
FILTER_ALIASES = {
    "flexible": "flexible-extract",
    "flexible-extract": "flexible-extract",
    "strict": "strict-match",
    "strict-match": "strict-match",
    "none": "none",
}


@dataclass(frozen=True)
class RefAccuracy:
    """A reference's accuracy on one task and filter, with where it comes from."""

    task: str
    filter: str
    score: float
    stderr: float | None = None
    n: int | None = None
    num_fewshot: int | None = None
    metric: str = "exact_match"
    source: str | None = None


@dataclass(frozen=True)
class AccuracyRow:
    task: str
    filter: str
    metric: str
    conc: int | None
    score: float
    stderr: float | None
    n: int | None
    limit: float | None
    reference: float | None
    reference_stderr: float | None
    shortfall: float | None  # reference - score (positive: below the reference)
    allowed: float | None  # the shortfall that still counts as not worse
    verdict: str

    @property
    def half_width(self) -> float | None:
        return Z95 * self.stderr if self.stderr is not None else None

    @property
    def wide(self) -> bool:
        hw = self.half_width
        return hw is not None and hw > WIDE_HALF_WIDTH


def accuracy_verdict(
    score: float,
    stderr: float | None,
    n: int | None,
    reference: float | None,
    *,
    reference_stderr: float | None = None,
    tolerance: float = 0.0,
) -> tuple[str, float | None]:
    """(verdict, allowed shortfall) for one score against one reference figure."""
    if reference is None:
        return NO_REFERENCE, None
    if stderr is None or n is None or n <= 0:
        return NOT_ENOUGH, None
    allowed = max(math.hypot(stderr, reference_stderr or 0.0), tolerance)
    shortfall = reference - score
    return (NOT_WORSE if shortfall <= allowed + 1e-12 else WORSE), allowed


def _norm_filter(name: str) -> str:
    return FILTER_ALIASES.get(name.strip().lower(), name.strip().lower())


def compare_accuracy(
    scores: Iterable[Any], references: Sequence[RefAccuracy], *, tolerance: float = 0.0
) -> list[AccuracyRow]:
    """One row per recipe score (``task``, ``metric``, ``filter``, ``score``, ``stderr``, ``n``,
    ``limit``, optional ``conc``), against the reference figure for the same task and filter."""
    by_key = {(r.task.lower(), _norm_filter(r.filter)): r for r in references}
    rows = []
    for s in scores:
        ref = by_key.get((str(s.task).lower(), _norm_filter(str(s.filter))))
        ref_score = ref.score if ref is not None else None
        ref_err = ref.stderr if ref is not None else None
        verdict, allowed = accuracy_verdict(
            s.score, s.stderr, s.n, ref_score, reference_stderr=ref_err, tolerance=tolerance
        )
        rows.append(
            AccuracyRow(
                task=str(s.task),
                filter=str(s.filter),
                metric=str(s.metric),
                conc=getattr(s, "conc", None),
                score=float(s.score),
                stderr=s.stderr,
                n=s.n,
                limit=s.limit,
                reference=ref_score,
                reference_stderr=ref_err,
                shortfall=(ref_score - s.score) if ref_score is not None else None,
                allowed=allowed,
                verdict=verdict,
            )
        )
    return rows


def task_verdicts(rows: Sequence[AccuracyRow]) -> dict[str, str]:
    """The verdict per task: worse if any row is worse, else not enough data if any lacks it."""
    order = {WORSE: 0, NOT_ENOUGH: 1, NOT_WORSE: 2}
    out: dict[str, str] = {}
    for row in rows:
        if row.verdict == NO_REFERENCE:
            continue
        cur = out.get(row.task)
        if cur is None or order[row.verdict] < order[cur]:
            out[row.task] = row.verdict
    return out


# ------------------------------------------------------------------------------------ formatting


def fmt_score(row: AccuracyRow) -> str:
    text = f"{row.score:.4f}"
    if row.stderr is not None:
        text += f" ± {row.stderr:.4f}"
    parts = []
    if row.n is not None:
        parts.append(f"n={row.n}")
    if row.limit is not None:
        parts.append(f"limit {row.limit:g}")
    return f"{text} ({', '.join(parts)})" if parts else text


def _fmt_points(value: float | None) -> str:
    if value is None:
        return "—"
    pts = round(value * 100, 2)
    return "0.00 pts" if pts == 0 else f"{pts:+.2f} pts"


_ICON = {NOT_WORSE: "🟢 not worse", WORSE: "🔴 worse", NOT_ENOUGH: "⚪ not enough data"}


def render_accuracy_table(
    rows: Sequence[AccuracyRow],
    *,
    recipe_label: str = "vLLM",
    reference_label: str = "ATOM ref",
    icons: bool = False,
) -> str:
    """Markdown ``task | filter | conc | vLLM (± stderr, n) | ATOM ref | diff | verdict``."""
    lines = [
        f"| task | filter | conc | {recipe_label} (± stderr, n) | {reference_label} | diff | verdict |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        ref = f"{r.reference:.4f}" if r.reference is not None else "—"
        diff = _fmt_points(-r.shortfall if r.shortfall is not None else None)
        shown = _ICON.get(r.verdict, r.verdict) if icons else r.verdict
        conc = str(r.conc) if r.conc is not None else "—"
        lines.append(f"| {r.task} | {r.filter} | {conc} | {fmt_score(r)} | {ref} | {diff} | {shown} |")
    return "\n".join(lines)


def accuracy_notes(rows: Sequence[AccuracyRow]) -> list[str]:
    """What the reader must know to not over-read the table (wide intervals, missing stderr)."""
    notes = []
    for task in dict.fromkeys(r.task for r in rows):
        wide = [r for r in rows if r.task == task and r.wide]
        if wide:
            r = max(wide, key=lambda x: x.half_width or 0.0)
            limit = f" at limit {r.limit:g}" if r.limit is not None else ""
            assert r.half_width is not None
            notes.append(
                f"{task}{limit} (n={r.n}) has a wide interval: ±{r.half_width * 100:.1f} points at 95%. "
                f"*Not worse* here means no drop larger than the noise was seen, not that the recipe "
                "is more accurate; run the full split to tighten it."
            )
        if any(r.task == task and r.verdict == NOT_ENOUGH for r in rows):
            notes.append(
                f"{task}: the result file has no standard error or sample count, so no verdict is "
                "drawn (*not enough data*)."
            )
    return notes


def _concs(values: Iterable[int]) -> str:
    return ", ".join(str(c) for c in sorted(values))


def latency_summary(latency_rows: Sequence[Any]) -> str | None:
    """``matched at conc 64, behind at 32`` from ``app.core.gap.GapRow``s (None without verdicts)."""
    groups: dict[str, list[int]] = {}
    for row in latency_rows:
        if row.verdict in ("behind", "matched", "ahead"):
            groups.setdefault(row.verdict, []).append(row.conc)
    if not groups:
        return None
    parts = [f"{v} at conc {_concs(groups[v])}" for v in ("behind", "matched", "ahead") if v in groups]
    return ", ".join(parts)


def accuracy_summary(rows: Sequence[AccuracyRow]) -> str | None:
    """``not worse on gsm8k`` / ``worse on gsm8k`` / ``not enough data on gsm8k``."""
    verdicts = task_verdicts(rows)
    if not verdicts:
        return None
    by_verdict: dict[str, list[str]] = {}
    for task, verdict in verdicts.items():
        by_verdict.setdefault(verdict, []).append(task)
    return ", ".join(
        f"{v} on {', '.join(by_verdict[v])}" for v in (WORSE, NOT_ENOUGH, NOT_WORSE) if v in by_verdict
    )


def overall_verdict_line(latency_rows: Sequence[Any], accuracy_rows: Sequence[AccuracyRow]) -> str:
    """``latency: matched at conc 64, behind at 32; accuracy: not worse on gsm8k``."""
    lat = latency_summary(latency_rows) or "no verdict yet"
    acc = accuracy_summary(accuracy_rows)
    if acc is None:
        acc = "no eval result yet" if not accuracy_rows else "no reference accuracy"
    return f"latency: {lat}; accuracy: {acc}"
