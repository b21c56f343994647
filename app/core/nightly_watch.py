"""Nightly regression watch, the pure part: which nightlies to measure, what the series say, the issue.

No Session and no gateway: inputs are small value types, outputs are decisions and text. The I/O
(registry, sweeps, GitHub issues) is ``app.flows.nightly.watch``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import structlog

from app.core.changepoint import Detection, DetectorSettings, detect
from app.core.githubtext import regression_chinese, regression_title

log = structlog.get_logger(__name__)

# metric column -> (label, unit, +1 when a higher value is worse / -1 when lower is worse)
METRICS: dict[str, tuple[str, str, int]] = {
    "mean_tpot_ms": ("TPOT", "ms", 1),
    "mean_ttft_ms": ("TTFT", "ms", 1),
    "tput_per_gpu": ("throughput per GPU", "tok/s/GPU", -1),
}
MAX_COMMITS_SHOWN = 50
_PR_IN_TITLE = re.compile(r"\(#(\d{1,7})\)\s*$")
_MERGE_PR = re.compile(r"^Merge pull request #(\d{1,7}) ")


@dataclass(frozen=True)
class Nightly:
    """One nightly of the key's image repository, oldest first in any list of them."""

    tag: str
    commit_sha: str | None
    measured: bool = False  # every canary point has a result
    retained: bool = True  # still in the registry
    planned: bool = False  # a canary for it is queued or running


@dataclass(frozen=True)
class NewNightlyPlan:
    measure: list[str]  # tags to canary now
    skip: list[str]  # tags recorded but not measured now (bisection may measure them later)
    reason: str


def plan_new_nightlies(known: set[str], present: Sequence[str], *, first_run: bool) -> NewNightlyPlan:
    """Which of the registry's nightlies (``present``, oldest first) get a canary now.

    The newest nightly not seen before is measured. Older unseen ones that arrived in the same poll
    (the bot was down, a burst of builds) are recorded as skipped: measuring them all would spend
    the week's budget on history; bisection measures them if a change lands between them. On the
    first run only the newest is measured (no backfill of the retained history).
    """
    unseen = [t for t in present if t not in known]
    if not unseen:
        return NewNightlyPlan([], [], "no new nightly")
    newest = unseen[-1]
    skip = unseen[:-1]
    if first_run:
        return NewNightlyPlan([newest], skip, f"first run: measuring the newest nightly {newest}")
    reason = f"new nightly {newest}" + (f"; {len(skip)} older new one(s) left for bisection" if skip else "")
    return NewNightlyPlan([newest], skip, reason)


@dataclass(frozen=True)
class Finding:
    """One series that changed for the worse between two measured nightlies."""

    result_name: str
    metric: str
    last_good_tag: str
    first_bad_tag: str
    before: float
    after: float
    change: float  # relative, signed as measured
    p_value: float

    def to_json(self) -> dict[str, Any]:
        return {
            "result_name": self.result_name,
            "metric": self.metric,
            "last_good": self.last_good_tag,
            "first_bad": self.first_bad_tag,
            "before": round(self.before, 4),
            "after": round(self.after, 4),
            "change": round(self.change, 5),
            "p": round(self.p_value, 5),
        }


@dataclass
class Analysis:
    findings: list[Finding] = field(default_factory=list)
    not_enough_data: list[str] = field(default_factory=list)  # "result_name metric: reason"


SeriesKey = tuple[str, str]  # (result_name, metric)


@lru_cache(maxsize=1024)
def _detect(values: tuple[float, ...], settings: DetectorSettings) -> Detection:
    # detect() is pure and seeded: a series no new nightly has changed since the last pass (the
    # common case, every few minutes) gets the same answer without its permutation test again.
    return detect(values, settings)


def analyze(series: Mapping[SeriesKey, Sequence[tuple[str, float]]], settings: DetectorSettings) -> Analysis:
    """Run the detector on every series (``[(tag, value)]`` oldest first); keep the regressions."""
    out = Analysis()
    for (result_name, metric), points in sorted(series.items()):
        direction = METRICS[metric][2]
        got = _detect(tuple(v for _, v in points), settings)
        if not got.enough_data:
            out.not_enough_data.append(f"{result_name} {metric}: {got.reason}")
            continue
        for cp in got.change_points:
            if cp.relative_change * direction <= 0:
                continue  # an improvement (or a recovery): not a regression
            out.findings.append(
                Finding(
                    result_name=result_name,
                    metric=metric,
                    last_good_tag=points[cp.index - 1][0],
                    first_bad_tag=points[cp.index][0],
                    before=cp.before,
                    after=cp.after,
                    change=cp.relative_change,
                    p_value=cp.p_value,
                )
            )
    log.info(
        "nightly_analysis", series=len(series), findings=len(out.findings), short=len(out.not_enough_data)
    )
    return out


def group_by_bracket(findings: Sequence[Finding]) -> dict[tuple[str, str], list[Finding]]:
    """One regression per (last good, first bad) pair: every series that moved there."""
    out: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        out.setdefault((f.last_good_tag, f.first_bad_tag), []).append(f)
    return out


def order_index(nightlies: Sequence[Nightly]) -> dict[str, int]:
    return {n.tag: i for i, n in enumerate(nightlies)}


def within(nightlies: Sequence[Nightly], outer: tuple[str, str], inner: tuple[str, str]) -> bool:
    """Does the bracket ``inner`` lie inside ``outer`` (both inclusive, by nightly order)?"""
    idx = order_index(nightlies)
    if any(t not in idx for t in (*outer, *inner)):
        return outer == inner
    return idx[outer[0]] <= idx[inner[0]] < idx[inner[1]] <= idx[outer[1]]


@dataclass(frozen=True)
class NarrowStep:
    done: bool  # no retained, unmeasured nightly is left between the two: the bracket is final
    measure: str | None  # the nightly to canary next (bisection), when not done
    reason: str


def narrow_step(
    nightlies: Sequence[Nightly], last_good: str, first_bad: str, *, runs_left: int
) -> NarrowStep:
    """The next nightly to measure between ``last_good`` and ``first_bad``: the middle retained one.

    Binary search over the retained nightlies between the two: each measurement halves the range,
    so at most ceil(log2(n + 1)) canaries name the first bad nightly of n candidates.
    """
    idx = order_index(nightlies)
    if last_good not in idx or first_bad not in idx:
        return NarrowStep(True, None, "a bracketing nightly is unknown; the bracket stays as measured")
    between = nightlies[idx[last_good] + 1 : idx[first_bad]]
    if any(n.planned for n in between):
        planned = next(n.tag for n in between if n.planned)
        return NarrowStep(False, None, f"waiting for the canary of {planned}")
    candidates = [n for n in between if n.retained and not n.measured]
    if not candidates:
        gone = sum(1 for n in between if not n.retained)
        why = (
            "adjacent nightlies"
            if not between
            else f"{gone} nightly(ies) between are no longer in the registry"
        )
        return NarrowStep(True, None, f"first bad nightly is {first_bad} ({why})")
    if runs_left <= 0:
        return NarrowStep(
            True, None, f"bisection budget spent; {len(candidates)} nightly(ies) left unmeasured"
        )
    middle = candidates[len(candidates) // 2]
    return NarrowStep(
        False, middle.tag, f"bisecting {len(candidates)} retained nightly(ies): measuring {middle.tag}"
    )


def recovered_at(
    points: Sequence[tuple[str, float]], first_bad: str, before: float, after: float, *, min_run: int
) -> str | None:
    """The first nightly of a final run of at least ``min_run`` nightlies back at the old level.

    "Back" means closer to the level before the regression than to the level after it.
    """
    tags = [t for t, _ in points]
    if first_bad not in tags:
        return None
    start = tags.index(first_bad) + 1
    run_start: int | None = None
    for i in range(start, len(points)):
        value = points[i][1]
        if abs(value - before) < abs(value - after):
            run_start = i if run_start is None else run_start
        else:
            run_start = None
    if run_start is None or len(points) - run_start < min_run:
        return None
    return tags[run_start]


def pulls_in(commits: Sequence[Mapping[str, Any]]) -> list[int]:
    """Merged PR numbers named by the commits (squash titles end "(#N)"; merge commits say so)."""
    out: list[int] = []
    for c in commits:
        title = str(c.get("title") or "")
        m = _PR_IN_TITLE.search(title) or _MERGE_PR.match(title)
        if m and int(m.group(1)) not in out:
            out.append(int(m.group(1)))
    return out


def merged_pulls(
    commits: Sequence[Mapping[str, Any]], associated: Mapping[str, Sequence[Mapping[str, Any]]]
) -> list[int]:
    """Merged PRs in a commit range, in commit order.

    ``associated``: the commits' associated-pulls answers (``GET .../commits/{sha}/pulls``: for a
    commit on the default branch, the merged PR that introduced it), for the commits looked up;
    only merged ones count (``merged_at`` set). A commit not looked up (the range was longer than
    the lookups allowed) falls back to the PR number its title names ("(#N)", "Merge pull request #N").
    """
    out: list[int] = []
    for c in commits:
        sha = str(c.get("sha") or "")
        if sha in associated:
            found = [
                int(p["number"])
                for p in associated[sha]
                if p.get("merged_at") and isinstance(p.get("number"), int)
            ]
        else:
            found = pulls_in([c])
        out += [n for n in found if n not in out]
    return out


REFRESH_WINDOW = 10  # nightlies on each side of a fixed bracket that its levels are taken from


def refresh_findings(
    series: Mapping[SeriesKey, Sequence[tuple[str, float]]],
    last_good: str,
    first_bad: str,
    listed: Sequence[Mapping[str, Any]],
    found: Sequence[Finding],
    *,
    min_run: int = 3,
) -> list[dict[str, Any]]:
    """The series an open regression lists, measured again at its fixed bracket.

    Every series listed before stays (a series does not silently drop out of the issue); a series
    this pass's detector found moving in an overlapping bracket joins. Each one's levels are the
    medians of up to ``REFRESH_WINDOW`` nightlies up to the last good one and from the first bad one
    (up to where it is back at the old level); ``p`` is the newest detector answer for that series.
    A series whose bracket is no longer in its measured points keeps its entry as it was.
    """
    old = {(str(f["result_name"]), str(f["metric"])): f for f in listed}
    newest = {(f.result_name, f.metric): f for f in found}
    out: list[dict[str, Any]] = []
    for key in [*old, *(k for k in newest if k not in old)]:
        points = list(series.get(key, ()))
        tags = [t for t, _ in points]
        if last_good not in tags or first_bad not in tags or tags.index(first_bad) <= tags.index(last_good):
            if key in old:
                out.append(dict(old[key]))
            continue
        good_at, bad_at = tags.index(last_good), tags.index(first_bad)
        end = bad_at + REFRESH_WINDOW
        if key in old:
            back = recovered_at(
                points, first_bad, float(old[key]["before"]), float(old[key]["after"]), min_run=min_run
            )
            end = min(end, tags.index(back)) if back is not None else end
        before = _median([v for _, v in points[max(0, good_at + 1 - REFRESH_WINDOW) : good_at + 1]])
        after = _median([v for _, v in points[bad_at:end]])
        p = newest[key].p_value if key in newest else float(old[key].get("p") or 1.0)
        change = (after - before) / before if before else 0.0
        out.append(Finding(key[0], key[1], last_good, first_bad, before, after, change, p).to_json())
    return out


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def issue_marker(repo: str, config_key: str, first_bad_tag: str) -> str:
    return f"<!-- sweepbot:nightly-regression:{repo}:{config_key}:{first_bad_tag} -->"


def _short(tag: str) -> str:
    m = re.search(r"[0-9a-f]{40}", tag)
    return tag.replace(m.group(0), m.group(0)[:10]) if m else tag


def _inert(text: str) -> str:
    # Upstream commit titles are user text: no mentions, no HTML, no markdown links or code fences.
    text = text.replace("@", "@\u200b").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"[`\[\]|]", lambda m: "\\" + m.group(0), text)[:200]


def series_chart(title: str, points: Sequence[tuple[str, float]], unit: str) -> str:
    """A Mermaid ``xychart-beta`` line of one series (GitHub renders it)."""
    if not points:
        return ""
    labels = ", ".join(f'"{_short(t)[-10:]}"' for t, _ in points)
    values = ", ".join(f"{v:.3f}" for _, v in points)
    lo = min(v for _, v in points)
    hi = max(v for _, v in points)
    pad = (hi - lo) * 0.2 or abs(hi) * 0.05 or 1.0
    return (
        "```mermaid\nxychart-beta\n"
        f'    title "{title}"\n'
        f"    x-axis [{labels}]\n"
        f'    y-axis "{unit}" {lo - pad:.3f} --> {hi + pad:.3f}\n'
        f"    line [{values}]\n```"
    )


@dataclass(frozen=True)
class IssueView:
    repo: str
    config_key: str
    image_repo: str
    last_good_tag: str
    first_bad_tag: str
    findings: Sequence[Mapping[str, Any]]
    chart_points: Sequence[tuple[str, float]]  # the most affected series, oldest first
    chart_metric: str
    chart_point: str
    narrowing: str  # how the first bad nightly was established
    source_repo: str | None = None
    compare_url: str | None = None
    commits: Sequence[Mapping[str, Any]] = ()
    commits_total: int | None = None  # the compare API's total_commits (more than read: truncated)
    pulls: Sequence[int] = ()
    recovered_tag: str | None = None
    watch_notes: Sequence[str] = ()


def issue_title(view: IssueView) -> str:
    worst = max(view.findings, key=lambda f: abs(float(f["change"])), default=None)
    what = ""
    if worst is not None:
        label = METRICS.get(str(worst["metric"]), (str(worst["metric"]), "", 1))[0]
        what = f" {label} {float(worst['change']):+.1%}"
    english = f"Nightly regression: {view.config_key}{what} from {_short(view.first_bad_tag)}"
    # the repo's policy: `<English> / <中文>` (app.core.githubtext)
    return regression_title(english, view.config_key, _short(view.first_bad_tag))


def render_issue(view: IssueView) -> str:
    """The regression issue's body (the marker first, so it is found and updated in place)."""
    lines = [issue_marker(view.repo, view.config_key, view.first_bad_tag)]
    if view.recovered_tag:
        lines += [
            f"**Recovered** in `{view.image_repo}:{view.recovered_tag}`: the series are back at the "
            "level before the regression, so this issue is closed.",
            "",
        ]
    lines += [
        f"sweepbot's nightly canaries of `{view.config_key}` measured a regression in `{view.image_repo}`.",
        "",
        f"- last good nightly: `{view.last_good_tag}`",
        f"- **first bad nightly: `{view.first_bad_tag}`**",
        f"- how it was narrowed: {view.narrowing}",
        "",
        "| point | metric | before | after | change | p |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for f in view.findings:
        label, unit, _ = METRICS.get(str(f["metric"]), (str(f["metric"]), "", 1))
        lines.append(
            f"| `{f['result_name']}` | {label} ({unit}) | {float(f['before']):.2f} | {float(f['after']):.2f} "
            f"| {float(f['change']):+.1%} | {float(f['p']):.3f} |"
        )
    label, unit, _ = METRICS.get(view.chart_metric, (view.chart_metric, "", 1))
    lines += ["", series_chart(f"{label} of {view.chart_point} by nightly", view.chart_points, unit), ""]
    if view.source_repo:
        lines.append(f"### Upstream commits in the range ({view.source_repo})")
        if view.compare_url:
            lines.append(f"Compare: {view.compare_url}")
        lines.append("")
        if view.pulls:
            lines.append("Merged PRs: " + ", ".join(f"{view.source_repo}#{n}" for n in view.pulls))
            lines.append("")
        shown = list(view.commits)[:MAX_COMMITS_SHOWN]
        for c in shown:
            lines.append(f"- `{str(c.get('sha', ''))[:10]}` {_inert(str(c.get('title') or ''))}")
        if len(view.commits) > len(shown):
            lines.append(f"- ... and {len(view.commits) - len(shown)} more (see the compare link)")
        total = view.commits_total or 0
        if total > len(view.commits):
            lines.append(
                f"- **truncated**: the range has {total} commits and sweepbot read the first "
                f"{len(view.commits)}; the PRs above are from those (see the compare link for the rest)"
            )
        if not view.commits:
            lines.append("- (no commits between the two nightlies' source commits)")
        lines.append("")
    if view.watch_notes:
        lines.append("### Pins at or after the first bad nightly")
        lines += [f"- {n}" for n in view.watch_notes]
        lines.append("")
    lines.append("_Kept up to date by sweepbot; it closes this issue when a later nightly recovers._")
    lines += [
        "",
        regression_chinese(
            key=view.config_key,
            image_repo=view.image_repo,
            last_good=view.last_good_tag,
            first_bad=view.first_bad_tag,
            recovered_tag=view.recovered_tag,
            source_repo=view.source_repo,
            watch_notes=bool(view.watch_notes),
        ),
    ]
    return "\n".join(lines)


def watch_note(marker_id: int, view: IssueView, issue_url: str | None) -> str:
    where = f" ({issue_url})" if issue_url else ""
    return (
        f"<!-- sweepbot:regression-note:{marker_id} -->\n"
        f"Heads-up from the nightly regression watch: this pin is at or after `{view.first_bad_tag}`, the "
        f"first nightly of `{view.image_repo}` where `{view.config_key}` got slower{where}. "
        f"The last good nightly is `{view.last_good_tag}`."
    )
