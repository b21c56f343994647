"""Which planned rows also run an accuracy eval, and the eval modes (pure: dicts in, dicts out).

The rules of the benchmark repo's generator (InferenceX 843c6254, `generate_sweep_configs.py`,
applied after `test-config` built its rows, so after its `--conc` filter), checked against what it
prints for every key of both master files in every mode (tests/core/test_generator_parity.py):

* **Single-node fixed-seq-len:** 8k1k rows only, concurrencies below 16 ignored. Rows are grouped
  by (model, runner, framework, precision, isl, osl, spec-decoding, dp-attn), across TPs; in each
  group the highest and the median of the distinct eligible concurrencies are chosen (the median
  of an even count is the upper one, index ``len // 2``) and *every* row of the group at a chosen
  concurrency runs an eval.
* **Multi-node fixed-seq-len:** 8k1k only. Rows that differ only in concurrency (and exp-name)
  share a topology; per topology the row holding the highest concurrency >= 16 runs the eval at
  that concurrency (``eval-conc``). A topology whose concurrencies are all below 16 gets none.
* **Agentic** evals are opt-in (`--evals-only` / `--all-evals`, never the default mode):
  single-node, the first row at the highest concurrency per (model, runner, framework,
  precision); multi-node as multi-node fixed-seq-len.
* ``default``: every row, ``run-eval`` marked. ``none`` (`--no-evals`): no marking (fixed-seq-len
  rows keep ``run-eval: false``, agentic rows have none). ``only`` (`--evals-only`): the marked
  rows, each ``eval-only: true``. ``all`` (`--all-evals`, alone or with `--evals-only`): every
  8k1k fixed-seq-len row and every single-node agentic row evaluated; the multi-node rows of one
  topology merged into one row with the sorted union of their concurrencies (fixed-seq-len:
  ``eval-all-concs: true``; agentic: ``eval-conc`` = the highest); eval-only rows only.
* Changelog entries say `evals-only: true` / `all-evals: true` (the latter implies eval-only).

A dict is multi-node when it carries ``prefill`` (the repo's own test), agentic when
``scenario-type`` is ``agentic-coding``. Bot-only fields (``config-key``, ``result-name``,
``multinode``) are ignored by the grouping.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from app.core.recipes.errors import EmptyPlanError, RecipeError
from app.core.recipes.expand import plan_dicts, tp_filter
from app.core.recipes.matrix import Hardware

RUN_EVAL = "run-eval"
EVAL_ONLY = "eval-only"
EVAL_CONC = "eval-conc"
EVAL_ALL_CONCS = "eval-all-concs"
EVAL_SEQ = (8192, 1024)  # 8k1k, the only fixed shape evaluated
MIN_EVAL_CONC = 16  # concurrencies below this never run an eval
AGENTIC = "agentic-coding"
# Bot-only fields of a plan dict (not the generator's): never part of a topology.
BOT_FIELDS = frozenset({"config-key", "result-name", "multinode"})
# Fields a multi-node topology ignores: the concurrency, what derives from it, the marks.
_NOT_TOPOLOGY = frozenset({"conc", "exp-name", RUN_EVAL, EVAL_ONLY, EVAL_CONC, EVAL_ALL_CONCS}) | BOT_FIELDS


class EvalMode(StrEnum):
    DEFAULT = "default"
    NONE = "none"
    ONLY = "only"
    ALL = "all"


class EvalModeError(RecipeError):
    """An impossible combination of eval flags, or an unknown mode name."""


# `/sweep evals=` accepts the mode names and the repo's own flag spellings.
_MODE_NAMES = {
    "default": EvalMode.DEFAULT,
    "none": EvalMode.NONE,
    "no": EvalMode.NONE,
    "no-evals": EvalMode.NONE,
    "only": EvalMode.ONLY,
    "evals-only": EvalMode.ONLY,
    "all": EvalMode.ALL,
    "all-evals": EvalMode.ALL,
}


def parse_eval_mode(text: str) -> EvalMode:
    """``default`` / ``none`` / ``only`` / ``all`` (also ``no-evals``, ``evals-only``, ``all-evals``)."""
    mode = _MODE_NAMES.get(text.strip().lower())
    if mode is None:
        raise EvalModeError(f"evals={text!r} is not an eval mode; use evals=default, none, only or all")
    return mode


def eval_mode_from_flags(
    *, no_evals: bool = False, evals_only: bool = False, all_evals: bool = False
) -> EvalMode:
    """The generator's flags as a mode; `--no-evals` with `--evals-only`/`--all-evals` is refused."""
    if no_evals and (evals_only or all_evals):
        other = "--all-evals" if all_evals else "--evals-only"
        raise EvalModeError(f"--no-evals cannot be combined with {other}; pick one")
    if all_evals:
        return EvalMode.ALL
    if evals_only:
        return EvalMode.ONLY
    if no_evals:
        return EvalMode.NONE
    return EvalMode.DEFAULT


def eval_mode_from_changelog(entry: Mapping[str, Any]) -> EvalMode:
    """A perf-changelog entry's mode: `all-evals: true` (implies eval-only), `evals-only: true`,
    or `no-evals: true` (a field the repo's changelog gate also accepts); default otherwise."""
    for name in ("evals-only", "all-evals", "no-evals"):
        value = entry.get(name)
        if value is not None and not isinstance(value, bool):
            raise EvalModeError(f"changelog field `{name}` must be true or false, got {value!r}")
    return eval_mode_from_flags(
        no_evals=bool(entry.get("no-evals")),
        evals_only=bool(entry.get("evals-only")),
        all_evals=bool(entry.get("all-evals")),
    )


def cli_flags(mode: EvalMode) -> str:
    """The `test-config` flags that ask the repo's generator for ``mode`` (empty for default)."""
    return {
        EvalMode.DEFAULT: "",
        EvalMode.NONE: "--no-evals",
        EvalMode.ONLY: "--evals-only",
        EvalMode.ALL: "--evals-only --all-evals",
    }[mode]


# ---------------------------------------------------------------------------------------------
# point kinds


def is_multinode_point(point: Mapping[str, Any]) -> bool:
    return "prefill" in point or bool(point.get("multinode"))


def is_agentic_point(point: Mapping[str, Any]) -> bool:
    return point.get("scenario-type") == AGENTIC


def _concs(point: Mapping[str, Any]) -> list[int]:
    raw = point.get("conc")
    values = raw if isinstance(raw, list | tuple) else [raw]
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise EvalModeError(
            f"point {point.get('result-name') or point!r}: conc {raw!r} is not an integer (list)"
        )
    return list(values)


def _eligible(point: Mapping[str, Any]) -> list[int]:
    return sorted(c for c in _concs(point) if c >= MIN_EVAL_CONC)


def _is_8k1k(point: Mapping[str, Any]) -> bool:
    return (point.get("isl"), point.get("osl")) == EVAL_SEQ


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def topology_key(point: Mapping[str, Any]) -> Any:
    """A multi-node row's topology: every field but its concurrency, exp-name and eval marks."""
    return _freeze({k: v for k, v in point.items() if k not in _NOT_TOPOLOGY})


_SINGLE_GROUP = ("model", "runner", "framework", "precision", "isl", "osl", "spec-decoding", "dp-attn")
_AGENTIC_GROUP = ("model", "runner", "framework", "precision")


def upper_median(values: Sequence[int]) -> int:
    ordered = sorted(set(values))
    return ordered[len(ordered) // 2]


def _highest_per_group(
    groups: Mapping[Any, list[tuple[int, int]]], chosen: dict[int, int | None], mn: bool
) -> None:
    """Per group of (row index, conc), the first row at the highest conc (multi-node: eval-conc)."""
    for members in groups.values():
        best, conc = max(members, key=lambda m: m[1])
        chosen[best] = conc if mn else None


def select_evals(points: Sequence[Mapping[str, Any]], include_agentic: bool = False) -> dict[int, int | None]:
    """Row index -> its ``eval-conc`` (multi-node) or None (single-node), for every row that runs an
    eval under the default selection (module docstring); agentic rows only with ``include_agentic``."""
    chosen: dict[int, int | None] = {}
    single: dict[Any, list[int]] = {}
    multi: dict[Any, list[tuple[int, int]]] = {}
    ag_single: dict[Any, list[tuple[int, int]]] = {}
    ag_multi: dict[Any, list[tuple[int, int]]] = {}
    for i, p in enumerate(points):
        if is_agentic_point(p):
            if not include_agentic:
                continue
            if "prefill" in p:
                if eligible := _eligible(p):
                    ag_multi.setdefault(topology_key(p), []).append((i, eligible[-1]))
            else:
                ag_single.setdefault(tuple(p.get(k) for k in _AGENTIC_GROUP), []).append((i, max(_concs(p))))
            continue
        if not _is_8k1k(p) or not (eligible := _eligible(p)):
            continue
        if "tp" in p:
            single.setdefault(tuple(p.get(k) for k in _SINGLE_GROUP), []).append(i)
        elif "prefill" in p:
            multi.setdefault(topology_key(p), []).append((i, eligible[-1]))
    for members in single.values():
        concs = sorted({_concs(points[i])[0] for i in members})
        wanted = {concs[-1], upper_median(concs)}
        chosen.update({i: None for i in members if _concs(points[i])[0] in wanted})
    _highest_per_group(multi, chosen, True)
    _highest_per_group(ag_single, chosen, False)
    _highest_per_group(ag_multi, chosen, True)
    return chosen


def default_selection(points: Sequence[Mapping[str, Any]]) -> list[int | None]:
    """For each row, the conc its eval runs at when the default selection picks it, else None."""
    chosen = select_evals(points)
    return [
        (chosen[i] if chosen[i] is not None else max(_concs(p))) if i in chosen else None
        for i, p in enumerate(points)
    ]


def _mark(points: Sequence[Mapping[str, Any]], include_agentic: bool) -> list[dict[str, Any]]:
    chosen = select_evals(points, include_agentic)
    out = []
    for i, p in enumerate(points):
        row = dict(p)
        row[RUN_EVAL] = i in chosen
        if chosen.get(i) is not None:
            row[EVAL_CONC] = chosen[i]
        out.append(row)
    return out


def _merge_all(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`--all-evals`: every 8k1k fixed and single-node agentic row evaluated, multi-node rows of
    one topology merged (module docstring)."""
    out: list[dict[str, Any]] = []
    merged: dict[Any, int] = {}
    for row in rows:
        agentic = is_agentic_point(row)
        if not agentic and not _is_8k1k(row):
            out.append(row)
            continue
        if "prefill" not in row:
            out.append({**row, RUN_EVAL: True})
            continue
        key = (agentic, topology_key(row))
        if key in merged:
            into = out[merged[key]]
            into["conc"] = sorted(set(into["conc"]) | set(_concs(row)))
            if agentic:
                into[EVAL_CONC] = max(into["conc"])
            continue
        new = {**row, "conc": sorted(set(_concs(row))), RUN_EVAL: True}
        if agentic:
            new[EVAL_CONC] = max(new["conc"])
        else:
            new.pop(EVAL_CONC, None)
            new[EVAL_ALL_CONCS] = True
        merged[key] = len(out)
        out.append(new)
    return out


def plan_evals(
    points: Sequence[Mapping[str, Any]], mode: EvalMode = EvalMode.DEFAULT
) -> list[dict[str, Any]]:
    """The rows one generator command prints under ``mode``, marked as it marks them.

    ``points`` are the command's rows (after its `--conc` filter): the selection is made on them.
    """
    if mode == EvalMode.NONE:
        return [dict(p) for p in points]
    rows = _mark(points, include_agentic=mode != EvalMode.DEFAULT)
    if mode == EvalMode.ALL:
        rows = _merge_all(rows)
    if mode == EvalMode.DEFAULT:
        return rows
    return [{**r, EVAL_ONLY: True} for r in rows if r.get(RUN_EVAL)]


def plan_with_evals(
    master: dict[str, Any],
    key: str,
    *,
    seq: str | None = None,
    conc: list[int] | None = None,
    tp: int | None = None,
    mode: EvalMode = EvalMode.DEFAULT,
    hardware: Hardware | None = None,
) -> list[dict[str, Any]]:
    """``key``'s rows as `test-config --config-keys key [--conc ...]` prints them under ``mode``
    (the marks are made after the `--conc` filter, as the repo makes them), plus the bot's
    identity fields. ``seq`` narrows to one shape; ``tp`` (which the generator has no flag for)
    narrows after the marks, so they stay those of the command the repo runs."""
    marked = plan_evals(plan_dicts(master, key, seq=seq, conc=conc, hardware=hardware), mode)
    if tp is not None:
        marked = tp_filter(marked, key, tp)
    if not marked:
        # Only `only` can drop every row: the filters left none that the selection evaluates.
        raise EmptyPlanError(
            f"config key '{key}': no point of this plan runs an eval under the default selection "
            "(8k1k only, conc >= 16: the highest and median per group; multi-node the highest per "
            "topology; agentic only in evals=only/all); use evals=all to evaluate every point"
        )
    return marked


def generator_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A plan dict without the bot's own fields: what the repo's generator prints for it."""
    return {k: v for k, v in row.items() if k not in BOT_FIELDS}


def plan_all_keys(
    master: dict[str, Any], mode: EvalMode = EvalMode.DEFAULT, hardware: Hardware | None = None
) -> dict[str, list[dict[str, Any]] | dict[str, str]]:
    """Every key of a master file -> the rows `test-config --config-keys KEY` prints under ``mode``
    (generator fields only; ``[]`` when the mode leaves none), or ``{"error": why}`` for a key the
    bot cannot plan."""
    out: dict[str, list[dict[str, Any]] | dict[str, str]] = {}
    for key in master:
        try:
            rows = plan_evals(plan_dicts(master, str(key), hardware=hardware), mode)
        except RecipeError as exc:
            out[str(key)] = {"error": str(exc)}
            continue
        out[str(key)] = [generator_row(r) for r in rows]
    return out
