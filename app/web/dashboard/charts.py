"""Line charts as SVG text, rendered on the server (pure functions, no I/O, no JavaScript).

Readable without colour: every series has its own marker shape and dash pattern, is named in a
legend that shows both, and is labelled directly at its last point. Every point carries a
``<title>`` (hover text, read by screen readers) and ``data-x``/``data-y`` attributes, and callers
always render the same numbers as a table beside the chart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from app.core.nightly_watch import METRICS

# Okabe-Ito colours (distinguishable with the common colour-vision deficiencies), each paired
# with a marker and a dash pattern so colour is never the only cue.
STYLES: tuple[tuple[str, str, str], ...] = (
    ("#0072B2", "circle", ""),
    ("#D55E00", "square", "7 4"),
    ("#009E73", "triangle", "2 3"),
    ("#CC79A7", "diamond", "9 3 2 3"),
    ("#E69F00", "cross", "4 2"),
    ("#56B4E9", "circle-open", "1 2"),
)


@dataclass(frozen=True)
class Series:
    name: str
    points: Sequence[tuple[float, float]]
    style: int | None = None  # index into STYLES; defaults to the series' position


@dataclass(frozen=True)
class Axis:
    label: str
    log2: bool = False  # concurrency doubles: equal spacing per doubling
    ticks: Sequence[tuple[float, str]] | None = None  # explicit ticks (value, label)
    zero: bool = False  # include 0 in a linear axis


@dataclass
class _Frame:
    width: int
    height: int
    left: int = 64
    right: int = 120  # room for direct labels
    top: int = 44
    bottom: int = 52
    lo_x: float = 0.0
    hi_x: float = 1.0
    lo_y: float = 0.0
    hi_y: float = 1.0
    log_x: bool = False
    log_y: bool = False
    extra: dict[str, float] = field(default_factory=dict)

    def _t(self, v: float, log: bool) -> float:
        return math.log2(v) if log else v

    def px(self, x: float) -> float:
        a, b = self._t(self.lo_x, self.log_x), self._t(self.hi_x, self.log_x)
        span = (b - a) or 1.0
        return self.left + (self._t(x, self.log_x) - a) / span * (self.width - self.left - self.right)

    def py(self, y: float) -> float:
        a, b = self._t(self.lo_y, self.log_y), self._t(self.hi_y, self.log_y)
        span = (b - a) or 1.0
        return (
            self.height
            - self.bottom
            - (self._t(y, self.log_y) - a) / span * (self.height - self.top - self.bottom)
        )


def fmt(value: float) -> str:
    """A short human number: 17.21, 1024, 0.0581, 1.2e+06."""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1e6 or magnitude < 1e-3:
        return f"{value:.3g}"
    if magnitude >= 100 or float(value).is_integer():
        return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"
    return f"{value:.4g}"


def nice_ticks(lo: float, hi: float, target: int = 5) -> list[float]:
    """Round tick values (1, 2, 5 x 10^n steps) covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"axis bounds must be finite, got {lo!r}..{hi!r}")
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(1, target)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks: list[float] = []
    value = start
    while value <= hi + step * 1e-9 and len(ticks) < 50:
        ticks.append(round(value, 12))
        value += step
    if ticks[-1] < hi:
        ticks.append(round(value, 12))
    return ticks


def _log2_ticks(lo: float, hi: float, values: Sequence[float]) -> list[tuple[float, str]]:
    distinct = sorted(set(values))
    if 0 < len(distinct) <= 12:
        return [(v, fmt(v)) for v in distinct]
    first, last = math.floor(math.log2(lo)), math.ceil(math.log2(hi))
    step = max(1, math.ceil((last - first) / 10))
    return [(2.0**e, fmt(2.0**e)) for e in range(first, last + 1, step)]


def _marker(shape: str, x: float, y: float, colour: str) -> str:
    r = 4.5
    if shape == "square":
        side = 2 * r
        return (
            f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{side:.1f}" height="{side:.1f}" fill="{colour}"/>'
        )
    if shape == "triangle":
        pts = f"{x:.1f},{y - r - 1:.1f} {x - r - 0.5:.1f},{y + r:.1f} {x + r + 0.5:.1f},{y + r:.1f}"
        return f'<polygon points="{pts}" fill="{colour}"/>'
    if shape == "diamond":
        pts = (
            f"{x:.1f},{y - r - 1:.1f} {x + r + 1:.1f},{y:.1f} {x:.1f},{y + r + 1:.1f} {x - r - 1:.1f},{y:.1f}"
        )
        return f'<polygon points="{pts}" fill="{colour}"/>'
    if shape == "cross":
        return (
            f'<path d="M{x - r:.1f},{y - r:.1f}L{x + r:.1f},{y + r:.1f}M{x - r:.1f},{y + r:.1f}'
            f'L{x + r:.1f},{y - r:.1f}" stroke="{colour}" stroke-width="2.5"/>'
        )
    if shape == "circle-open":
        return (
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="#fff" stroke="{colour}" stroke-width="2"/>'
        )
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{colour}"/>'


def _svg_head(title: str, series: Sequence[Series], width: int, height: int, chart_id: str) -> str:
    desc = f"{title}. " + "; ".join(f"{s.name}: {len(s.points)} points" for s in series)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{escape(chart_id)}" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-labelledby="{escape(chart_id)}-title {escape(chart_id)}-desc">'
        f'<title id="{escape(chart_id)}-title">{escape(title)}</title>'
        f'<desc id="{escape(chart_id)}-desc">{escape(desc)}</desc>'
        f'<rect width="{width}" height="{height}" fill="#fff"/>'
    )


def _scale(
    frame: _Frame, points: Sequence[tuple[float, float]], x: Axis, y: Axis
) -> tuple[list[tuple[float, str]], list[float]]:
    """Set the frame's ranges from the points; the x ticks (value, label) and the y tick values."""
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    if x.ticks:
        x_ticks = list(x.ticks)
        frame.lo_x = min(min(xs), min(t[0] for t in x_ticks))
        frame.hi_x = max(max(xs), max(t[0] for t in x_ticks))
    elif x.log2:
        frame.lo_x, frame.hi_x = min(xs), max(xs)
        if frame.lo_x == frame.hi_x:
            frame.lo_x, frame.hi_x = frame.lo_x / 2, frame.hi_x * 2
        x_ticks = _log2_ticks(frame.lo_x, frame.hi_x, xs)
    else:
        values = nice_ticks(min(xs + ([0.0] if x.zero else [])), max(xs))
        frame.lo_x, frame.hi_x = values[0], values[-1]
        x_ticks = [(v, fmt(v)) for v in values]
    y_values = nice_ticks(min(ys + ([0.0] if y.zero else [])), max(ys))
    frame.lo_y, frame.hi_y = y_values[0], y_values[-1]
    return x_ticks, y_values


def _axes(
    frame: _Frame, x: Axis, y: Axis, x_ticks: list[tuple[float, str]], y_values: list[float]
) -> list[str]:
    """Grid, ticks, both axes and their labels."""
    plot_w = frame.width - frame.left - frame.right
    out = ['<g class="axis" font-size="11" fill="#333">']
    for value in y_values:
        yy = frame.py(value)
        out.append(
            f'<line x1="{frame.left}" x2="{frame.left + plot_w}" y1="{yy:.1f}" y2="{yy:.1f}" '
            f'stroke="#e3e3e3"/>'
        )
        out.append(
            f'<text x="{frame.left - 6}" y="{yy + 4:.1f}" text-anchor="end">{escape(fmt(value))}</text>'
        )
    base_y = frame.height - frame.bottom
    for value, label in x_ticks:
        xx = frame.px(value)
        out.append(f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{frame.top}" y2="{base_y}" stroke="#f0f0f0"/>')
        out.append(f'<text x="{xx:.1f}" y="{base_y + 16}" text-anchor="middle">{escape(label)}</text>')
    out.append(
        f'<line x1="{frame.left}" x2="{frame.left + plot_w}" y1="{base_y}" y2="{base_y}" stroke="#444"/>'
    )
    out.append(f'<line x1="{frame.left}" x2="{frame.left}" y1="{frame.top}" y2="{base_y}" stroke="#444"/>')
    out.append(
        f'<text x="{frame.left + plot_w / 2:.1f}" y="{frame.height - 10}" text-anchor="middle" '
        f'font-size="12">{escape(x.label)}</text>'
    )
    out.append(
        f'<text transform="translate(14 {(frame.top + base_y) / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle" font-size="12">{escape(y.label)}</text>'
    )
    out.append("</g>")
    return out


def _style(s: Series, index: int) -> tuple[str, str, str]:
    return STYLES[(s.style if s.style is not None else index) % len(STYLES)]


def _legend(frame: _Frame, series: Sequence[Series]) -> list[str]:
    """A line sample with its dash and marker, then the name, per series."""
    out: list[str] = []
    legend_x = frame.left
    for index, s in enumerate(series):
        colour, shape, dash = _style(s, index)
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        ly = 34
        out.append(
            f'<g class="legend-item"><line x1="{legend_x}" x2="{legend_x + 26}" y1="{ly}" y2="{ly}" '
            f'stroke="{colour}" stroke-width="2.5"{dash_attr}/>'
            f"{_marker(shape, legend_x + 13, ly, colour)}"
            f'<text x="{legend_x + 32}" y="{ly + 4}" font-size="12">{escape(s.name)}</text></g>'
        )
        legend_x += 44 + 7 * len(s.name)
    return out


def _series(frame: _Frame, s: Series, index: int, x: Axis, y: Axis) -> list[str]:
    """One series: its line, markers (with their numbers), a direct label at the last point."""
    colour, shape, dash = _style(s, index)
    pts = sorted((p for p in s.points if math.isfinite(p[0]) and math.isfinite(p[1])), key=lambda p: p[0])
    if not pts:
        return []
    dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
    path = " ".join(
        f"{'M' if i == 0 else 'L'}{frame.px(px_):.1f},{frame.py(py_):.1f}" for i, (px_, py_) in enumerate(pts)
    )
    out = [f'<g class="series" data-series="{escape(s.name)}">']
    out.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash_attr}/>')
    for px_, py_ in pts:
        cx, cy = frame.px(px_), frame.py(py_)
        out.append(
            f'<g class="pt" data-x="{px_:g}" data-y="{py_:g}">{_marker(shape, cx, cy, colour)}'
            f"<title>{escape(s.name)}: {escape(x.label)} {escape(fmt(px_))}, "
            f"{escape(y.label)} {escape(fmt(py_))}</title></g>"
        )
    last_x, last_y = pts[-1]
    out.append(
        f'<text class="direct-label" x="{frame.px(last_x) + 8:.1f}" y="{frame.py(last_y) + 4:.1f}" '
        f'font-size="11" fill="#111">{escape(s.name)}</text>'
    )
    out.append("</g>")
    return out


def line_chart(
    series: Sequence[Series],
    *,
    title: str,
    x: Axis,
    y: Axis,
    width: int = 640,
    height: int = 360,
    chart_id: str = "chart",
) -> str:
    """An SVG line chart of ``series``; points with a non-positive x on a log axis are rejected."""
    points = [
        (px_, py_) for s in series for px_, py_ in s.points if math.isfinite(px_) and math.isfinite(py_)
    ]
    head = _svg_head(title, series, width, height, chart_id)
    if not points:
        return (
            head + f'<text x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle" '
            f'font-size="14" fill="#555">{escape(title)}: no data yet</text></svg>'
        )
    if x.log2 and any(p[0] <= 0 for p in points):
        raise ValueError("a log2 x axis needs positive x values (concurrency starts at 1)")
    frame = _Frame(width, height, log_x=x.log2)
    x_ticks, y_values = _scale(frame, points, x, y)
    out = [head]
    out.append(
        f'<text x="{frame.left}" y="20" font-size="15" font-weight="600" fill="#111">{escape(title)}</text>'
    )
    out += _axes(frame, x, y, x_ticks, y_values)
    out += _legend(frame, series)
    for index, s in enumerate(series):
        out += _series(frame, s, index, x, y)
    out.append("</svg>")
    return "".join(out)


# ---------------------------------------------------------------------- the results page's charts


def short_image(image: str) -> str:
    """``vllm/vllm-openai-rocm:nightly-<40 hex>`` -> ``nightly-1a2b3c4``: enough to tell nightlies apart."""
    tag = image.rsplit(":", 1)[-1]
    head, sep, tail = tag.rpartition("-")
    if sep and len(tail) >= 12 and all(c in "0123456789abcdef" for c in tail.lower()):
        return f"{head}-{tail[:7]}"
    return tag if len(tag) <= 24 else tag[:21] + "..."


def _curves(data: Any, get: Callable[[Any], tuple[float | None, float | None]]) -> list[Series]:
    """The recipe's curve and, when there is one, the reference's (``get`` picks x and y)."""

    def pts(points: Sequence[Any]) -> list[tuple[float, float]]:
        return [(px_, py_) for p in points for px_, py_ in [get(p)] if px_ is not None and py_ is not None]

    out = [Series("recipe", pts(data.points), 0)]
    if data.reference_points:
        out.append(Series(data.reference_name or "reference", pts(data.reference_points), 1))
    return out


def _over_time(data: Any) -> tuple[list[Series], list[str]]:
    """x is the image's position (oldest first), one series per conc (at most five)."""
    order: list[str] = []
    for p in data.images:
        if p.image not in order:
            order.append(p.image)
    concs = sorted({p.conc for p in data.images})
    if len(concs) > 5:
        step = (len(concs) - 1) / 4
        concs = sorted({concs[round(i * step)] for i in range(5)})
    series = [
        Series(
            f"conc {c}",
            [
                (order.index(p.image) + 1, p.mean_tpot_ms)
                for p in data.images
                if p.conc == c and p.mean_tpot_ms is not None
            ],
            i,
        )
        for i, c in enumerate(concs)
    ]
    return series, order


def results_charts(data: Any) -> dict[str, str]:
    """The three charts of a config key (``data`` is a ``schemas.ResultsKeyOut``)."""
    tpot = _curves(data, lambda p: (p.conc, p.mean_tpot_ms))
    tput = _curves(data, lambda p: (p.interactivity, p.tput_per_gpu))
    over_time, order = _over_time(data)
    ticks = [(i + 1, short_image(img)) for i, img in enumerate(order)]
    return {
        "tpot": line_chart(
            tpot,
            title=f"{data.config_key}: mean TPOT vs concurrency",
            x=Axis("concurrency", log2=True),
            y=Axis("mean TPOT (ms)", zero=True),
            chart_id="chart-tpot",
        ),
        "tput": line_chart(
            tput,
            title="throughput per GPU vs interactivity",
            x=Axis("interactivity (tok/s/user)", zero=True),
            y=Axis("tok/s/GPU", zero=True),
            chart_id="chart-tput",
        ),
        "images": line_chart(
            over_time,
            title="mean TPOT per image, oldest to newest",
            x=Axis("image", ticks=ticks),
            y=Axis("mean TPOT (ms)", zero=True),
            chart_id="chart-images",
            width=max(640, 90 * len(order) + 200),
        ),
    }


# ---------------------------------------------------------------------- the nightly-series page


def nightly_charts(view: dict[str, Any]) -> list[dict[str, Any]]:
    """One chart per metric of a watched key: a line per canary point, one x step per nightly."""
    tags = [n["tag"] for n in view["nightlies"] if n["state"] == "measured"]
    index = {t: i + 1 for i, t in enumerate(tags)}
    out: list[dict[str, Any]] = []
    for metric, (label, unit, direction) in METRICS.items():
        rows = [s for s in view["series"] if s["metric"] == metric]
        if not rows:
            continue
        series = []
        points: list[dict[str, Any]] = []
        for row in rows:
            name = (
                row["result_name"].rsplit("_", 2)[-2] if "_conc" in row["result_name"] else row["result_name"]
            )
            series.append(
                Series(
                    name,
                    [(float(index[p["tag"]]), float(p["value"])) for p in row["points"] if p["tag"] in index],
                )
            )
            points.extend(row["points"])
        title = f"{label} ({unit}) by nightly, {'lower' if direction > 0 else 'higher'} is better"
        svg = line_chart(
            series,
            title=title,
            x=Axis("nightly (oldest first)"),
            y=Axis(f"{label} ({unit})"),
            chart_id=f"nightly-{metric}",
        )
        out.append({"metric": metric, "title": title, "svg": svg, "points": points})
    return out
