"""Which generated rows the benchmark repo's generator marks for an accuracy eval (EVALS.md,
"Selection"; the simulator's own reading, checked against expected-plans/).

Marks are taken over the rows the command generated (after ``--conc``), never the whole key:

- single-node fixed-seq-len, 8k1k only: rows grouped by (model, runner, framework, precision,
  isl, osl, spec-decoding, dp-attn) across TPs; concurrencies below 16 are not eligible; every
  row at the group's highest and at its median eligible concurrency (the upper median of the
  sorted distinct values) is marked;
- multi-node fixed-seq-len, 8k1k only: rows grouped by topology (every field but the
  concurrency, the eval fields and exp-name); the row holding the group's highest eligible
  concurrency (the first on a tie) is marked, with ``eval-conc`` that concurrency; a row whose
  concurrencies are all below 16 gets none;
- agentic rows only when evals are asked for (``--evals-only`` / ``--all-evals``): single-node
  the highest concurrency per (model, runner, framework, precision); multi-node as multi-node
  fixed-seq-len.

``--all-evals`` then widens the marks: every 8k1k single-node row and every single-node agentic
row; multi-node rows of one topology merged into one row with the sorted union of concurrencies
(fixed-seq-len: ``eval-all-concs: true``, no ``eval-conc``; agentic: ``eval-conc`` the highest);
other seq-lens pass through. ``--evals-only`` and ``--all-evals`` keep only marked rows, each
``eval-only: true``; ``--no-evals`` leaves the rows unmarked (agentic rows carry no ``run-eval``).
"""

from __future__ import annotations

import enum
from collections import defaultdict
from typing import Any

MIN_EVAL_CONC = 16
EVAL_SEQ = (8192, 1024)
AGENTIC = "agentic-coding"
_NOT_TOPOLOGY = {"conc", "run-eval", "eval-only", "eval-conc", "eval-all-concs", "exp-name"}


class EvalMode(enum.Enum):
    DEFAULT = "default"
    NONE = "no-evals"
    ONLY = "evals-only"
    ALL = "all-evals"


def _frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def topology(row: dict[str, Any]) -> tuple[Any, ...]:
    """A multi-node row's identity apart from its concurrencies and eval fields."""
    return tuple(sorted((k, _frozen(v)) for k, v in row.items() if k not in _NOT_TOPOLOGY))


def _concs(row: dict[str, Any]) -> list[int]:
    conc = row["conc"]
    return list(conc) if isinstance(conc, list) else [conc]


def _eligible(row: dict[str, Any]) -> list[int]:
    return sorted(c for c in _concs(row) if c >= MIN_EVAL_CONC)


def _is_eval_seq(row: dict[str, Any]) -> bool:
    return (row.get("isl"), row.get("osl")) == EVAL_SEQ


def _single_node_picks(rows: list[dict[str, Any]]) -> set[int]:
    groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        if "tp" in r and _is_eval_seq(r) and _eligible(r):
            fields = ("model", "runner", "framework", "precision", "isl", "osl", "spec-decoding", "dp-attn")
            groups[tuple(r[f] for f in fields)].append(i)
    picks: set[int] = set()
    for members in groups.values():
        values = sorted({rows[i]["conc"] for i in members})
        targets = {values[-1], values[len(values) // 2]}
        picks.update(i for i in members if rows[i]["conc"] in targets)
    return picks


def _topology_picks(rows: list[dict[str, Any]], *, agentic: bool) -> dict[int, int]:
    groups: dict[tuple[Any, ...], list[tuple[int, int]]] = defaultdict(list)
    for i, r in enumerate(rows):
        if "tp" in r or "prefill" not in r or (r.get("scenario-type") == AGENTIC) != agentic:
            continue
        if not agentic and not _is_eval_seq(r):
            continue
        eligible = _eligible(r)
        if eligible:
            groups[topology(r)].append((i, eligible[-1]))
    return dict(max(members, key=lambda m: m[1]) for members in groups.values())


def _agentic_single_picks(rows: list[dict[str, Any]]) -> set[int]:
    best: dict[tuple[Any, ...], tuple[int, int]] = {}
    for i, r in enumerate(rows):
        if r.get("scenario-type") != AGENTIC or "prefill" in r:
            continue
        key = (r["model"], r["runner"], r["framework"], r["precision"])
        conc = max(_concs(r))
        if key not in best or conc > best[key][1]:
            best[key] = (i, conc)
    return {i for i, _ in best.values()}


def mark_evals(rows: list[dict[str, Any]], *, include_agentic: bool) -> list[dict[str, Any]]:
    """The default selection: ``run-eval`` on every row, ``eval-conc`` on marked multi-node rows."""
    picks = _single_node_picks(rows)
    conc_of = _topology_picks(rows, agentic=False)
    if include_agentic:
        picks |= _agentic_single_picks(rows)
        conc_of |= _topology_picks(rows, agentic=True)
    picks |= set(conc_of)
    out = []
    for i, r in enumerate(rows):
        row = {**r, "run-eval": i in picks}
        if i in conc_of:
            row["eval-conc"] = conc_of[i]
        out.append(row)
    return out


def mark_all_evals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``--all-evals``' widening of the marks (merging multi-node rows of one topology)."""
    out: list[dict[str, Any]] = []
    merged: dict[tuple[bool, tuple[Any, ...]], int] = {}
    for r in rows:
        agentic = r.get("scenario-type") == AGENTIC
        if not agentic and not _is_eval_seq(r):
            out.append(r)
            continue
        if "prefill" not in r:
            out.append({**r, "run-eval": True})
            continue
        key = (agentic, topology(r))
        if key in merged:
            row = out[merged[key]]
            row["conc"] = sorted(set(row["conc"]) | set(_concs(r)))
            if agentic:
                row["eval-conc"] = max(row["conc"])
            continue
        row = {**r, "conc": sorted(set(_concs(r))), "run-eval": True}
        if agentic:
            row["eval-conc"] = max(row["conc"])
        else:
            row["eval-all-concs"] = True
            row.pop("eval-conc", None)
        merged[key] = len(out)
        out.append(row)
    return out


def apply_eval_mode(rows: list[dict[str, Any]], mode: EvalMode) -> list[dict[str, Any]]:
    if mode is EvalMode.NONE:
        return rows
    marked = mark_evals(rows, include_agentic=mode is not EvalMode.DEFAULT)
    if mode is EvalMode.DEFAULT:
        return marked
    if mode is EvalMode.ALL:
        marked = mark_all_evals(marked)
    return [{**r, "eval-only": True} for r in marked if r.get("run-eval")]
