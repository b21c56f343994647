"""Jain's index of runner-time across PRs in contended hours, as the issue defines it, per class of
runner, and the best any schedule could reach on the issue's definition (bench/scheduler.py).

- ``jain``: the mean, over the hours in which at least two PRs each had a job queued from the hour's
  start to its end, of Jain's index of the runner-time (node-time) those PRs got in the hour, both
  classes of runner together (the issue's figure).
- ``jain_by_class``: the same per class (single-node runners, the multi-node pool): over the hours
  in which at least two PRs each had a job *of that class* queued all hour, Jain's index of that
  class's runner-time; the mean over every (hour, class) counted. Only PRs with multi-node jobs can
  use the pool, so the issue's figure mixes a PR that has the pool to itself (nobody else can use
  it) with PRs that share the single-node runners.
- ``jain_bound``: per contended hour, the highest index any division of the same runner-time could
  reach: the single-node and pool runner-time that hour's backlogged PRs got, divided max-min fairly
  among them, each PR taking only from the classes it had work for in the hour. Jain's index of a
  fixed total is highest at the most equal division, which for two shared resources is that one.
  The mean over the contended hours: no schedule that keeps the runners as busy gets more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.labelsim import World

HOUR = 3600.0


def _index(xs: list[float]) -> float | None:
    total, squares = sum(xs), sum(x * x for x in xs)
    return total * total / (len(xs) * squares) if squares > 0 else None


def _hours(w: World) -> list[tuple[float, float]]:
    end = max((j.end or 0.0) for j in w.jobs.values())
    t, out = 0.0, []
    while t < end:
        out.append((t, t + HOUR))
        t += HOUR
    return out


def _backlogged(w: World, lo: float, hi: float, pool: bool | None = None) -> set[int]:
    end = hi + 1.0
    return {
        j.pr
        for j in w.jobs.values()
        if j.created <= lo and (j.start or j.end or end) >= hi and (pool is None or (j.nodes > 1) == pool)
    }


def _got(w: World, prs: set[int], lo: float, hi: float, pool: bool | None = None) -> dict[int, float]:
    got = dict.fromkeys(prs, 0.0)
    for s, e, pr, nodes in w.intervals:
        if pr in got and (pool is None or (nodes > 1) == pool):
            got[pr] += max(0.0, min(e, hi) - max(s, lo)) * nodes
    return got


def jain(w: World) -> tuple[float | None, int]:
    """The issue's figure and how many contended hours; None when there was none (not 1.0)."""
    scores = []
    for lo, hi in _hours(w):
        prs = _backlogged(w, lo, hi)
        if len(prs) >= 2:
            x = _index(list(_got(w, prs, lo, hi).values()))
            if x is not None:
                scores.append(x)
    return (sum(scores) / len(scores) if scores else None), len(scores)


def jain_by_class(w: World) -> tuple[float | None, int]:
    scores = []
    for lo, hi in _hours(w):
        for pool in (False, True):
            prs = _backlogged(w, lo, hi, pool)
            if len(prs) >= 2:
                x = _index(list(_got(w, prs, lo, hi, pool).values()))
                if x is not None:
                    scores.append(x)
    return (sum(scores) / len(scores) if scores else None), len(scores)


def _wanted(w: World, prs: set[int], lo: float, hi: float, pool: bool) -> set[int]:
    """The PRs that had work of that class queued or running at some time in the hour."""
    end = hi + 1.0
    return {
        j.pr
        for j in w.jobs.values()
        if j.pr in prs and (j.nodes > 1) == pool and j.created < hi and (j.end or end) > lo
    }


def fairest(single: float, pool: float, only_single: int, only_pool: int, both: int) -> list[float]:
    """The max-min fair division of two resources among PRs that can use one or both of them."""
    n = only_single + only_pool + both
    level = (single + pool) / n
    rest = only_pool + both
    if rest and only_single * level > single * (1 + 1e-9):  # single-only PRs share those runners
        return [single / only_single] * only_single + [pool / rest] * rest
    rest = only_single + both
    if rest and only_pool * level > pool * (1 + 1e-9):
        return [pool / only_pool] * only_pool + [single / rest] * rest
    return [level] * n


def jain_bound(w: World) -> float | None:
    scores = []
    for lo, hi in _hours(w):
        prs = _backlogged(w, lo, hi)
        if len(prs) < 2 or not sum(_got(w, prs, lo, hi).values()):
            continue
        single = sum(_got(w, prs, lo, hi, False).values())
        pool = sum(_got(w, prs, lo, hi, True).values())
        s, p = _wanted(w, prs, lo, hi, False), _wanted(w, prs, lo, hi, True)
        # a backlogged PR has work of some class; one with neither counted (none) takes from both
        both = len(s & p) + len(prs - s - p)
        x = _index(fairest(single, pool, len(s - p), len(p - s), both))
        if x is not None:
            scores.append(x)
    return sum(scores) / len(scores) if scores else None
