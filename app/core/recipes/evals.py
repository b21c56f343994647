"""Which planned points also run an accuracy eval, and the eval modes (pure: dicts in, dicts out).

Written from the benchmark repo's documentation (InferenceX `utils/evals/EVALS.md`, and
`.github/workflows/README.md` for the `test-config` flags), not from its code:

* **Single-node fixed-seq-len:** 8k1k only; in every group of points sharing model, runner,
  framework, precision, TP and decoding (spec-decoding) configuration, the highest and the
  median concurrency. The documentation does not say which value is the median of an even
  number of concurrencies; we take the upper one (index ``len // 2`` of the sorted distinct
  values), so 1..512 (ten values) selects 32 and 512. When items that differ only in ep or
  dp-attn share a TP, each chosen concurrency is evaluated once, on the first such point in the
  repo's order.
* **Multi-node fixed-seq-len:** 8k1k only, one eval per parallelism topology at its highest
  concurrency; rows differing only by concurrency share a topology.
* **Agentic (single-node):** the highest-concurrency point per model, runner, framework and
  precision. **Agentic multi-node:** as multi-node (highest per topology).
* Modes: ``default`` (throughput for every point plus the selected evals), ``none``
  (`--no-evals`: throughput only), ``only`` (`--evals-only`: the selected evals, no throughput),
  ``all`` (`--all-evals`, the same as `--evals-only --all-evals`: every point as an eval only;
  agentic points included). `--no-evals` cannot be combined with `--all-evals`. Changelog
  entries say `evals-only: true` / `all-evals: true` (the latter implies eval-only).

The selection works over plan dicts (the keys of ``sweepbot recipe plan --json``), so it applies
to any point kind planning produces: a dict is multi-node when it carries ``prefill``/``decode``
(the repo's own matrix test) or ``multinode: true``, agentic when ``scenario-type`` is
``agentic-coding``. Its ``conc`` may be one value or, for multi-node rows, a list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any

from app.core.recipes.errors import EmptyPlanError, RecipeError
from app.core.recipes.expand import expand_points

RUN_EVAL = "run-eval"
EVAL_ONLY = "eval-only"
EVAL_SEQ = (8192, 1024)  # 8k1k, the only fixed shape the default selection evaluates

# Fields of a plan dict that are not part of a point's topology (identity derived from others,
# or the marks this module adds).
_NOT_TOPOLOGY = frozenset(
    {"conc", "result-name", "exp-name", "max-model-len", "image", RUN_EVAL, EVAL_ONLY, "eval-conc"}
)


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
    return "prefill" in point or "decode" in point or bool(point.get("multinode"))


def is_agentic_point(point: Mapping[str, Any]) -> bool:
    return point.get("scenario-type") == "agentic-coding"


def _concs(point: Mapping[str, Any]) -> list[int]:
    raw = point.get("conc")
    values = raw if isinstance(raw, list | tuple) else [raw]
    out = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int):
            raise EvalModeError(
                f"point {point.get('result-name') or point!r}: conc {raw!r} is not an integer"
            )
        out.append(value)
    if not out:
        raise EvalModeError(f"point {point.get('result-name') or point!r} has an empty conc list")
    return out


def _is_8k1k(point: Mapping[str, Any]) -> bool:
    return (point.get("isl"), point.get("osl")) == EVAL_SEQ


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _topology(point: Mapping[str, Any]) -> Any:
    return _freeze({k: v for k, v in point.items() if k not in _NOT_TOPOLOGY})


def _single_group(point: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(
        point.get(k)
        for k in ("model-prefix", "model", "runner", "framework", "precision", "tp", "spec-decoding")
    )


def _agentic_group(point: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(point.get(k) for k in ("model-prefix", "model", "runner", "framework", "precision"))


def upper_median(values: Iterable[int]) -> int:
    ordered = sorted(set(values))
    return ordered[len(ordered) // 2]


def default_selection(points: Sequence[Mapping[str, Any]]) -> list[int | None]:
    """For each point, the conc its eval runs at when the default selection picks it, else None.

    Single-node points have one conc, so the value is that conc; a multi-node row carrying a conc
    list gets its highest value.
    """
    chosen: list[int | None] = [None] * len(points)
    groups: dict[tuple[str, Any], list[int]] = {}
    for i, point in enumerate(points):
        multinode, agentic = is_multinode_point(point), is_agentic_point(point)
        if not agentic and not _is_8k1k(point):
            continue  # fixed-seq-len evals are 8k1k only
        if multinode:
            key: tuple[str, Any] = ("topology", _topology(point))
        elif agentic:
            key = ("agentic", _agentic_group(point))
        else:
            key = ("single", _single_group(point))
        groups.setdefault(key, []).append(i)
    for (kind, _group), members in groups.items():
        concs = sorted({c for i in members for c in _concs(points[i])})
        wanted = {concs[-1]} if kind != "single" else {concs[-1], upper_median(concs)}
        if kind == "single":
            # One eval per chosen conc: a group may hold that conc twice (items that differ in
            # ep or dp-attn share a TP); the first such point in the repo's order runs it.
            for i in members:
                value = _concs(points[i])[0]
                if value in wanted:
                    chosen[i] = value
                    wanted.discard(value)
            continue
        # One eval per topology / agentic group: the first row that holds the highest conc.
        top = concs[-1]
        for i in members:
            if top in _concs(points[i]):
                chosen[i] = top
                break
    return chosen


def plan_evals(
    points: Sequence[Mapping[str, Any]], mode: EvalMode = EvalMode.DEFAULT
) -> list[dict[str, Any]]:
    """The points a sweep runs under ``mode``, each with ``run-eval`` and ``eval-only`` set.

    ``default``: every point, ``run-eval`` on the selected ones. ``none``: every point, no eval.
    ``only``: the selected points only, eval-only. ``all``: every point, eval-only. Multi-node rows
    that run an eval also get ``eval-conc`` (the concurrency, or under ``all`` the whole list,
    their eval runs at).
    """
    selection = default_selection(points) if mode in (EvalMode.DEFAULT, EvalMode.ONLY) else None
    out: list[dict[str, Any]] = []
    for i, point in enumerate(points):
        row = dict(point)
        if mode == EvalMode.NONE:
            row[RUN_EVAL], row[EVAL_ONLY] = False, False
        elif mode == EvalMode.ALL:
            row[RUN_EVAL], row[EVAL_ONLY] = True, True
            if is_multinode_point(point):
                row["eval-conc"] = _concs(point)  # all conc-list values, one engine
        else:
            assert selection is not None
            picked = selection[i]
            if mode == EvalMode.ONLY and picked is None:
                continue
            row[RUN_EVAL], row[EVAL_ONLY] = picked is not None, mode == EvalMode.ONLY
            if picked is not None and is_multinode_point(point):
                row["eval-conc"] = picked
        out.append(row)
    return out


def plan_with_evals(
    master: dict[str, Any],
    key: str,
    *,
    seq: str | None = None,
    conc: list[int] | None = None,
    tp: int | None = None,
    mode: EvalMode = EvalMode.DEFAULT,
) -> list[dict[str, Any]]:
    """``key``'s plan dicts with eval marks, as ``sweepbot recipe plan`` and ``/sweep`` use them.

    The selection is made on the key's search space before the ``conc`` filter: a filter narrows
    which points run, it does not move the eval points (so `conc=64` alone runs no eval when the
    key's evals are at 32 and 512). ``seq`` and ``tp`` do not change the selection (it is per TP
    and 8k1k only), so they are applied first.
    """
    rows = [p.to_json() for p in expand_points(master, key, seq=seq, tp=tp)]
    if conc:
        expand_points(master, key, seq=seq, tp=tp, conc=conc)  # same "not in its search space" errors
    marked = plan_evals(rows, mode)
    if conc:
        wanted = set(conc)
        marked = [r for r in marked if wanted & set(_concs(r))]
    if not marked:
        # Only `only` can drop every point: the filters left none that the default selection evaluates.
        raise EmptyPlanError(
            f"config key '{key}': no point of this plan runs an eval under the default selection "
            "(8k1k only, the highest and median conc per TP); use evals=all to evaluate every point"
        )
    return marked
