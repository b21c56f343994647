"""Change points in a nightly series: E-divisive with means, a permutation test, a minimum effect.

Pure: a list of floats in, a small typed answer out. No Session, no gateway.

The method is the energy-statistic divisive search of Matteson & James ("A Nonparametric Approach
for Multiple Change Point Analysis of Multivariate Data", 2014; R's ``ecp::e.divisive``, MongoDB's
signal-processing-algorithms and Bencher describe the same idea). For a segment split at ``tau``
into ``X`` (left, ``m`` values) and ``Y`` (right, ``k`` values)::

    E(tau) = 2/(m k) sum|x - y| - sum_{i<j}|x_i - x_j| / C(m, 2) - sum_{i<j}|y_i - y_j| / C(k, 2)
    q(tau) = m k / (m + k) * E(tau)

The best split is the ``tau`` maximising ``q``. Its significance is a permutation test: shuffle the
segment's values ``permutations`` times (a seeded generator, so the answer is reproducible) and
count how often the shuffled maximum reaches the observed one; ``p = (count + 1) / (R + 1)``. A
significant split divides the segment and the search repeats on the pieces (hierarchical
bisection) until no split is significant.

Noise tolerance: the statistic compares distances between and within the pieces, so a single
outlier moves it little; and a significant split whose effect (relative change of the medians on
either side) is below ``min_effect`` is not reported, because a statistically real 0.3% shift is
not a regression anyone should be paged for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import structlog

log = structlog.get_logger(__name__)

DEFAULT_P_VALUE = 0.01
DEFAULT_PERMUTATIONS = 299  # (0 + 1) / 300 < 0.01: enough resolution for the default level
DEFAULT_MIN_EFFECT = 0.015  # relative change of the medians; below this nothing is reported
DEFAULT_MIN_POINTS = 8  # fewer nightlies than this: "not enough data"
DEFAULT_MIN_SIZE = 3  # nightlies on each side of a change point


@dataclass(frozen=True)
class DetectorSettings:
    p_value: float = DEFAULT_P_VALUE
    permutations: int = DEFAULT_PERMUTATIONS
    min_effect: float = DEFAULT_MIN_EFFECT
    min_points: int = DEFAULT_MIN_POINTS
    min_size: int = DEFAULT_MIN_SIZE
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.p_value < 1:
            raise ValueError(f"p_value must be between 0 and 1, got {self.p_value}")
        if self.permutations < 1:
            raise ValueError(f"permutations must be at least 1, got {self.permutations}")
        if self.min_size < 2:
            raise ValueError(
                f"min_size must be at least 2 (a within-pair distance needs two), got {self.min_size}"
            )
        if self.min_points < 2 * self.min_size:
            raise ValueError(
                f"min_points ({self.min_points}) must be at least 2 x min_size ({2 * self.min_size}): "
                "a change point needs min_size values on each side"
            )
        if self.min_effect < 0:
            raise ValueError(f"min_effect must be >= 0, got {self.min_effect}")


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first value of the new regime (series[index] is the first "after" value)
    p_value: float
    q: float
    before: float  # median of the segment left of the change
    after: float  # median of the segment right of the change
    relative_change: float  # (after - before) / before


@dataclass(frozen=True)
class Detection:
    status: str  # "ok" | "not_enough_data"
    change_points: list[ChangePoint] = field(default_factory=list)
    reason: str = ""
    rejected: list[ChangePoint] = field(default_factory=list)  # significant but below min_effect
    order_found: list[int] = field(default_factory=list)  # indices, most significant split first

    @property
    def enough_data(self) -> bool:
        return self.status == "ok"


def _q_values(values: np.ndarray, min_size: int) -> np.ndarray:
    """q(tau) for every admissible tau of one segment (index 0 is tau = min_size); O(n^2)."""
    n = len(values)
    dist = np.abs(values[:, None] - values[None, :])
    upper = np.triu(dist, 1)
    col = upper.sum(axis=0)  # col[j] = sum_{i<j} d(i, j)
    row = upper.sum(axis=1)  # row[i] = sum_{j>i} d(i, j)
    within_left = np.concatenate(([0.0], np.cumsum(col)))  # [tau] = pairs inside [0, tau)
    within_right = np.concatenate((np.cumsum(row[::-1])[::-1], [0.0]))  # [tau] = pairs inside [tau, n)
    total = within_left[n]
    taus = np.arange(min_size, n - min_size + 1)
    m = taus.astype(float)
    k = (n - taus).astype(float)
    wl = within_left[taus]
    wr = within_right[taus]
    cross = total - wl - wr
    energy = 2.0 * cross / (m * k) - wl / (m * (m - 1) / 2.0) - wr / (k * (k - 1) / 2.0)
    return np.asarray(m * k / (m + k) * energy)


def _best_split(values: np.ndarray, min_size: int) -> tuple[int, float]:
    q = _q_values(values, min_size)
    best = int(np.argmax(q))
    return best + min_size, float(q[best])


def _p_value(values: np.ndarray, observed: float, cfg: DetectorSettings, rng: np.random.Generator) -> float:
    # Stop as soon as the count of shuffles reaching the observed value rules significance out:
    # pure noise (the common case) then costs a handful of shuffles, not hundreds.
    limit = cfg.p_value * (cfg.permutations + 1) - 1
    reached = 0
    done = 0
    for _ in range(cfg.permutations):
        shuffled = rng.permutation(values)
        done += 1
        if _best_split(shuffled, cfg.min_size)[1] >= observed:
            reached += 1
            if reached > limit:
                break
    return (reached + 1) / (done + 1) if reached > limit else (reached + 1) / (cfg.permutations + 1)


def detect(series: Sequence[float], settings: DetectorSettings | None = None) -> Detection:
    """Change points of ``series`` (ordered oldest nightly first), most significant found first.

    Returned change points are sorted by index. Non-finite values are refused: a missing
    measurement must be left out of the series by the caller, not passed as NaN.
    """
    cfg = settings or DetectorSettings()
    values = np.asarray([float(v) for v in series], dtype=float)
    if not np.all(np.isfinite(values)):
        raise ValueError("the series has a NaN or infinite value: leave missing nightlies out instead")
    if len(values) < cfg.min_points:
        reason = f"not enough data: {len(values)} nightlies, at least {cfg.min_points} needed"
        log.info("changepoint_not_enough_data", points=len(values), needed=cfg.min_points)
        return Detection("not_enough_data", reason=reason)
    rng = np.random.default_rng(cfg.seed)
    bounds = [0, len(values)]
    found: list[tuple[int, float, float]] = []  # (index, p, q)
    while True:
        best: tuple[float, int, int, int] | None = None  # (q, tau, seg_start, seg_end)
        for start, end in zip(bounds, bounds[1:], strict=False):
            if end - start < 2 * cfg.min_size:
                continue
            tau, q = _best_split(values[start:end], cfg.min_size)
            if best is None or q > best[0]:
                best = (q, start + tau, start, end)
        if best is None:
            break
        q, index, start, end = best
        p = _p_value(values[start:end], q, cfg, rng)
        if p > cfg.p_value:
            log.info("changepoint_search_done", candidate=index, p=round(p, 4), level=cfg.p_value)
            break
        found.append((index, p, q))
        bounds = sorted({*bounds, index})
    kept: list[ChangePoint] = []
    rejected: list[ChangePoint] = []
    edges = sorted({0, len(values), *(i for i, _, _ in found)})
    for index, p, q in sorted(found):
        left = edges[edges.index(index) - 1]
        right = edges[edges.index(index) + 1]
        before = float(np.median(values[left:index]))
        after = float(np.median(values[index:right]))
        rel = (after - before) / before if before else float("inf")
        cp = ChangePoint(index=index, p_value=p, q=q, before=before, after=after, relative_change=rel)
        (kept if abs(rel) >= cfg.min_effect else rejected).append(cp)
    reason = f"{len(kept)} change point(s) at p <= {cfg.p_value} with effect >= {cfg.min_effect:.1%}" + (
        f"; {len(rejected)} significant but smaller than the minimum effect" if rejected else ""
    )
    log.info(
        "changepoint_detected", points=len(values), found=[c.index for c in kept], rejected=len(rejected)
    )
    return Detection("ok", kept, reason, rejected, [i for i, _, _ in found])
