"""``full-sweep``: every key of the master files that the filters keep (the simulator's reading of
the repo's generator; ``sim.matrix`` has the expansion).

Key filters: ``--model-prefix`` (the key starts with one), ``--precision``, ``--framework``,
``--runner-type`` (each must be a runner label of runners.yaml). ``--single-node`` /
``--multi-node`` (neither: both) choose by the key's ``multinode``. Per search-space entry,
concurrencies step by ``--step-size``:

- single-node range: ``--min-conc`` drops an entry whose end is below it and else starts there;
  ``--max-conc`` caps the end (an entry starting above it runs at exactly ``--max-conc``);
  single-node list and multi-node: values below ``--min-conc`` dropped (none left: entry
  dropped), values above ``--max-conc`` dropped (none left: ``[--max-conc]``);
- ``--max-tp`` drops single-node entries with a larger tp; ``--max-ep`` caps ep;
- agentic: values outside [min, max] dropped, an entry left with none dropped.
"""

from __future__ import annotations

from typing import Any

from sim.matrix import Pick, concurrencies, doubling, key_rows
from sim.matrix_evals import EvalMode, apply_eval_mode


class FilterError(ValueError):
    pass


def _bounded(values: list[int], low: int | None, high: int | None) -> list[int] | None:
    if low is not None:
        values = [c for c in values if c >= low]
        if not values:
            return None
    if high is not None:
        kept = [c for c in values if c <= high]
        values = kept or [high]
    return values


def _single_range(bmk: dict[str, Any], low: int | None, high: int | None, step: int) -> list[int] | None:
    start, end = int(bmk["conc-start"]), int(bmk["conc-end"])
    if low is not None:
        if end < low:
            return None
        start = max(start, low)
    if high is not None:
        start, end = (high, high) if start > high else (start, min(end, high))
    return doubling(start, end, step)


def full_pick(opts: dict[str, Any]) -> Pick:
    step, low, high = int(opts["step_size"]), opts.get("min_conc"), opts.get("max_conc")
    max_tp, max_ep = opts.get("max_tp"), opts.get("max_ep")

    def listed(bmk: dict[str, Any]) -> list[int]:
        return concurrencies(bmk, step)

    def pick(bmk: dict[str, Any], kind: str) -> tuple[dict[str, Any], list[int]] | None:
        if any(v is not None and v <= 0 for v in (low, high)) and kind != "agentic":
            return None
        if kind == "agentic":
            values = [c for c in listed(bmk) if (low is None or c >= low) and (high is None or c <= high)]
            return (bmk, values) if values else None
        if kind == "multi":
            concs = _bounded(listed(bmk), low, high)
            return (bmk, concs) if concs else None
        if max_tp is not None and (max_tp <= 0 or int(bmk["tp"]) > max_tp):
            return None
        if max_ep is not None:
            if max_ep <= 0:
                return None
            if bmk.get("ep") is not None and int(bmk["ep"]) > max_ep:
                bmk = {**bmk, "ep": max_ep}
        concs = (
            _bounded(listed(bmk), low, high) if bmk.get("conc-list") else _single_range(bmk, low, high, step)
        )
        return (bmk, concs) if concs else None

    return pick


def _keeps(key: str, config: dict[str, Any], opts: dict[str, Any]) -> bool:
    prefixes = opts.get("model_prefix")
    if prefixes and not any(key.startswith(p) for p in prefixes):
        return False
    for opt, field in (("precision", "precision"), ("framework", "framework"), ("runner_type", "runner")):
        if opts.get(opt) and config.get(field) not in opts[opt]:
            return False
    return bool(opts["multi_node"] if config.get("multinode") else opts["single_node"])


def full_sweep(
    masters: dict[str, Any], runners: dict[str, Any], opts: dict[str, Any], mode: EvalMode
) -> list[dict[str, Any]]:
    labels = set((runners.get("labels") or {}).keys())
    unknown = sorted(set(opts.get("runner_type") or ()) - labels)
    if unknown:
        raise FilterError(
            f"Invalid runner type(s): {set(unknown)}. Valid runner types are: {', '.join(sorted(labels))}"
        )
    pick = full_pick(opts)
    rows: list[dict[str, Any]] = []
    for key, config in masters.items():
        if _keeps(key, config, opts):
            rows += key_rows(
                config, runners, pick, opts.get("seq_lens") or (), opts.get("scenario_type") or ()
            )
    return apply_eval_mode(rows, mode)
