"""A lower bound on the longest wait of any job, for the work a label-contract run executed.

For a set of jobs that arrived in ``[a, t]``: every one of them has started by ``t + W`` (``W`` the
longest wait), so by then at most the jobs still running are unfinished, and they hold at most the
class's runners: single-node, the ``m`` longest jobs of the set; a pool, the longest jobs' node-time
filling its ``m`` nodes (a fractional knapsack: more than any real set of running jobs). The rest of
the set's work was done in ``[a, t + W]`` on the class's online runners, so
``capacity(a, t + W) >= work(a, t) - running``, and ``W >= tau - t`` where ``tau`` is the earliest
time that capacity reaches it. The bound is the largest over the PRs' arrival times taken as ``a``
and ``t`` (every attempt, re-runs included, counted with the work the run gave it, as the makespan
bound does), per class. No schedule of that work on that fleet waits less.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.labelsim import World


def _overlap(lo: float, hi: float, off: float, on: float) -> float:
    return max(0.0, min(hi, on) - max(lo, off))


def _reach(a: float, need: float, m: int, outage: tuple[float, float] | None) -> float:
    """The earliest tau with m runners' time in [a, tau] (less one runner's outage) >= need."""
    tau = a + need / m
    if outage is None:
        return tau
    for _ in range(30):  # a fixed point: the outage adds at most its length, divided by m
        nxt = a + (need + _overlap(a, tau, *outage)) / m
        if abs(nxt - tau) < 1e-6:
            break
        tau = nxt
    return tau


def _running(jobs: list[tuple[float, float, int]], m: int, pool: bool) -> float:
    """Most work the jobs still running at the end can hold: m longest, or m nodes' longest."""
    if not pool:
        return sum(heapq.nlargest(m, (w / n for _, w, n in jobs)))
    left, held = m, 0.0
    for _, work, nodes in sorted(jobs, key=lambda x: -x[1] / x[2]):
        take = min(left, nodes)
        held += take * work / nodes
        left -= take
        if left == 0:
            break
    return held


def wait_bound(w: World) -> float:
    """The lower bound (seconds) on the longest wait, over both classes of runner."""
    from bench.labelsim import OUTAGE, POOL

    rid, off, on = OUTAGE
    best = 0.0
    arrivals = sorted({j.created for j in w.jobs.values() if j.attempt == 1})
    for pool, m in ((False, w.cfg.runners), (True, w.cfg.pool)):
        jobs = sorted(
            (j.created, (j.end - j.work_start) * j.nodes, j.nodes)
            for j in w.jobs.values()
            if j.work_start is not None and j.end is not None and (POOL in j.labels) == pool
        )
        if not jobs:
            continue
        times = [x[0] for x in jobs]
        outage = None if pool or POOL in w.runners[rid].base else (off, on)
        prefix = [0.0]
        for _, work, _ in jobs:
            prefix.append(prefix[-1] + work)
        for i, a in enumerate(arrivals):
            lo = bisect_left(times, a)
            for t in arrivals[i:]:
                hi = bisect_right(times, t)
                if hi <= lo:
                    continue
                need = prefix[hi] - prefix[lo] - _running(jobs[lo:hi], m, pool)
                if need > 0:
                    best = max(best, _reach(a, need, m, outage) - t)
    return best
