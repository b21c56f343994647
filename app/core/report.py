"""The sticky report's text (pure: a sweep's jobs, stored rows and reference in, markdown out).

``render_report_data`` renders a ``ReportData`` (loaded by ``app.flows.results.reports.load_report_data``):
progress, the verdict over latency and accuracy, one gap table per (seq, tp) group
(``app.core.gap.gap_table``), a chart, throughput at equal interactivity, the accuracy table and
the runs. The hidden marker makes the comment findable for edits in place.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.core.accuracy import (
    AccuracyRow,
    accuracy_notes,
    compare_accuracy,
    overall_verdict_line,
    render_accuracy_table,
    task_verdicts,
)
from app.core.gap import (
    GapRow,
    GapTable,
    Run,
    gap_table,
    render_gap_table,
    render_tput_table,
    tput_gap_at_equal_interactivity,
)
from app.core.references import Reference
from app.core.reusereport import reuse_section
from app.core.thresholds import (
    ThresholdVerdict,
    gate_summary,
    judge,
    model_prefix,
    outcome_text,
    task_outcomes,
    thresholds_from_json,
)
from app.core.unexpanded_jobs import eval_not_run

FINAL_JOB_STATES = ("succeeded", "failed", "cancelled", "reused")
_ENGINE_LABELS = {"vllm": "vLLM", "sglang": "SGLang", "atom": "ATOM", "trt": "TRT-LLM"}


def report_marker(config_key: str) -> str:
    return f"<!-- sweepbot:report key={config_key} -->"


class StoredRun(Run, Protocol):
    """A stored result as the report reads it (``app.models.results.Result``)."""

    @property
    def framework(self) -> str | None: ...


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
    results: Mapping[str, Sequence[StoredRun]]  # result_name -> stored rows
    reference: Reference | None
    superseded_by: int | None = None
    notes: list[str] = field(default_factory=list)
    evals: list[Any] = field(default_factory=list)  # the sweep's accuracy scores (EvalResult rows)
    accuracy_tolerance: float = 0.0
    mode: str = "dispatch"  # how the sweep reached the runners (.github/sweepbot.yml sweep.mode)
    # the repo's accuracy gate as the sweep recorded it (Sweep.eval_thresholds); None: not read
    eval_thresholds: Mapping[str, Any] | None = None
    merge: Mapping[str, Any] = field(default_factory=dict)  # reuse at merge, main's run (reusereport)


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


def _recipe_label(data: ReportData, recipe_label: str | None) -> str:
    framework = None
    for stored in data.results.values():
        framework = stored[0].framework or framework
    return recipe_label or _ENGINE_LABELS.get((framework or "").lower(), framework or "recipe")


def _header(data: ReportData, label: str, ref_label: str) -> list[str]:
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
    return out + [
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


def _gap_explanation(table: GapTable, ref: Reference | None, label: str, ref_label: str) -> list[str]:
    if ref is None:
        return [
            "No reference applies to this config key (configure one under `references:` in "
            "`.github/sweepbot.yml`).",
            "",
        ]
    if not table.applies:
        return [f"The reference {ref.name} is for a different tp or sequence length; no gap shown.", ""]
    direction = "lower is better" if table.metric.endswith("_ms") else "higher is better"
    return [
        f"Gap = ({label} − {ref_label}) / {ref_label} on `{table.metric}` ({direction}); *matched* means "
        "inside the noise (2σ of repeated runs, or 1% for a single run).",
        "",
    ]


def _chart(table: GapTable, label: str, ref_label: str) -> list[str]:
    concs = [r.conc for r in table.rows]
    by_conc, ref_values = table.recipe, table.reference
    both = [c for c in concs if by_conc.get(c) and c in ref_values]
    only = [c for c in concs if by_conc.get(c)]
    if len(both) >= 2:
        recipe = [statistics.fmean(by_conc[c]) for c in both]
        return [_mermaid(both, recipe, [ref_values[c] for c in both], label, ref_label), ""]
    if len(only) >= 2:
        return [_mermaid(only, [statistics.fmean(by_conc[c]) for c in only], None, label, ref_label), ""]
    return []


def _tput_section(table: GapTable, ref: Reference | None, label: str, ref_label: str) -> list[str]:
    if not (table.applies and table.curve and ref is not None):
        return []
    ref_curve = ref.tput_curve()
    if not ref_curve:
        return []
    return [
        "<details><summary>Throughput per GPU at equal interactivity</summary>",
        "",
        render_tput_table(
            tput_gap_at_equal_interactivity(table.curve, ref_curve),
            recipe_label=label,
            reference_label=ref_label,
        ),
        "",
        "</details>",
        "",
    ]


def _latency_sections(data: ReportData, label: str, ref_label: str) -> tuple[list[str], list[GapRow]]:
    """One gap table (with its note, chart and throughput table) per (seq, tp) group, and all rows."""
    ref = data.reference
    out: list[str] = []
    latency_rows: list[GapRow] = []
    # One table per (seq, tp) group; the common case is a single group.
    groups: dict[tuple[str, int], list[JobView]] = {}
    for j in data.jobs:
        groups.setdefault((j.seq, j.tp), []).append(j)
    for (seq, tp), jobs in groups.items():
        runs = [(j.conc, row) for j in jobs for row in data.results.get(j.result_name, [])]
        table = gap_table(runs, ref, tp=tp, seq=seq, planned=[j.conc for j in jobs])
        latency_rows += table.rows
        if len(groups) > 1:
            out += [f"#### {seq}, tp {tp}", ""]
        out += [
            render_gap_table(
                table.rows, metric=table.metric, recipe_label=label, reference_label=ref_label, icons=True
            ),
            "",
        ]
        out += _gap_explanation(table, ref, label, ref_label)
        out += _chart(table, label, ref_label)
        out += _tput_section(table, ref, label, ref_label)
    return out, latency_rows


def _footer(data: ReportData) -> list[str]:
    ref = data.reference
    out: list[str] = []
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
    return out + ["", report_marker(data.config_key)]


def render_report_data(data: ReportData, *, recipe_label: str | None = None) -> str:
    label = _recipe_label(data, recipe_label)
    ref_label = data.reference.label() if data.reference is not None else "reference"
    out = _header(data, label, ref_label)
    verdict_at = len(out)  # the overall verdict line goes here once both tables are known
    latency, latency_rows = _latency_sections(data, label, ref_label)
    out += latency
    accuracy_rows, gate = _accuracy_section(data, out, label, ref_label)
    gate_text = gate_summary(gate or {})
    verdict = overall_verdict_line(latency_rows, accuracy_rows) + (f"; {gate_text}" if gate_text else "")
    out[verdict_at:verdict_at] = [f"**Verdict** — {verdict}", ""]
    return "\n".join(out + reuse_section(data.merge) + _footer(data))


def _not_run_warnings(planned: Sequence[JobView]) -> list[str]:
    """One warning per distinct reason an eval point's eval was never run (the workflow's defect,
    ``app.core.unexpanded_jobs``; GitHub's words in it are already inert)."""
    not_run = [j.reason for j in planned if j.reason and eval_not_run(j.reason)]
    out: list[str] = []
    for reason in dict.fromkeys(not_run):
        count = sum(1 for r in not_run if r == reason)
        out += [f"> [!WARNING]\n> {count} of {len(planned)} eval points: {reason}", ""]
    return out


def _sweep_model_prefix(data: ReportData) -> str | None:
    """The ``model-prefix`` of the sweep's points (the eval artifact's ``infmax_model_prefix`` is
    checked equal to it when collected)."""
    for j in data.jobs:
        found = model_prefix((j.point or {}).get("model-prefix"))
        if found:
            return found
    return None


def _gate(data: ReportData) -> tuple[dict[str, ThresholdVerdict] | None, list[str]]:
    """Per task, the repo gate's verdict, and the lines that say which gate it is (or why none)."""
    stored = data.eval_thresholds
    if stored is None:
        return None, [
            "Repo threshold: not read for this sweep (`utils/evals/thresholds.yaml`), no verdict.",
            "",
        ]
    if "missing" in stored or "error" in stored:
        why = (
            f"the repo has no `{stored.get('missing')}`"
            if "missing" in stored
            else f"the file cannot be used: {stored.get('error')}"
        )
        return None, [f"Repo threshold: {why}; no threshold verdict.", ""]
    gate = thresholds_from_json(stored)
    prefix = _sweep_model_prefix(data)
    outcomes = task_outcomes(judge(data.evals, gate, prefix))
    at = f" at `{str(gate.ref)[:7]}`" if gate.ref else ""
    model = f"model prefix `{prefix}`" if prefix else "no model prefix"
    lines = [
        f"Against the repo's own gate: `{gate.path}`{at}, as `utils/evals/validate_scores.py` applies it "
        f"({model}; the lowest gated score of each task decides).",
        "",
    ]
    return outcomes, lines


def _both_verdicts(
    rows: Sequence[AccuracyRow], gate: Mapping[str, ThresholdVerdict] | None, ref_label: str
) -> list[str]:
    """One line per task: the verdict against the reference (with its interval) and the repo gate's."""
    verdicts = task_verdicts(rows)
    out = []
    for task in dict.fromkeys(r.task for r in rows):
        decided = verdicts.get(task)
        # the row that decides the task: the largest drop below the reference among its verdict's
        candidates = [r for r in rows if r.task == task and r.verdict == decided and r.shortfall is not None]
        row = max(candidates, key=lambda r: r.shortfall or 0.0, default=None)
        if row is not None and row.reference is not None:
            hw = f" ±{row.half_width * 100:.1f} pts at 95%" if row.half_width is not None else ""
            against = f"{row.score:.4f}{hw} vs {ref_label} {row.reference:.4f}: {row.verdict}"
            if row.allowed is not None and row.shortfall is not None:
                against += (
                    f" ({-row.shortfall * 100:+.2f} pts; a drop of up to {row.allowed * 100:.2f} pts "
                    "is within the noise)"
                )
        else:
            against = f"no reference accuracy for {task}"
        judged = gate.get(task) if gate is not None else None
        if judged is not None:
            against += f"; {outcome_text(judged)}"
        elif gate is not None:
            against += "; no gated score (validate_scores.py checks none of its metrics)"
        out.append(f"- **{task}**: {against}")
    return out + [""] if out else []


def _accuracy_section(
    data: ReportData, out: list[str], label: str, ref_label: str
) -> tuple[list[AccuracyRow], dict[str, ThresholdVerdict] | None]:
    """Append the accuracy table (beside the latency table) to ``out``; return its rows and the
    repo gate's verdict per task."""
    planned = [j for j in data.jobs if (j.point or {}).get("run-eval")]
    if not data.evals and not planned:
        return [], None
    ref = data.reference
    refs = list(ref.accuracy) if ref is not None else []
    rows = compare_accuracy(data.evals, refs, tolerance=data.accuracy_tolerance)
    out += ["#### Accuracy", ""]
    out += _not_run_warnings(planned)
    if not rows:
        waiting = sum(1 for j in planned if j.state not in FINAL_JOB_STATES)
        if waiting:
            out += [f"No eval result yet: {waiting} of {len(planned)} eval points not finished.", ""]
        else:
            out += [f"No eval result was stored for the {len(planned)} eval points (see the runs below).", ""]
        return rows, None
    gate, gate_lines = _gate(data)
    out += _both_verdicts(rows, gate, ref_label)
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
    out += gate_lines
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
    return rows, gate
