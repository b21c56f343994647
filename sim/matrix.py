"""The rows the benchmark repo's sweep generator prints, written for the simulator from the rules.

What e2e-tests.yml's `get-jobs` step runs is ``generate_sweep_configs.py $GENERATE_COMMAND``
(``test-config`` or ``full-sweep``, grammar in ``sim.gencli``); this module is the simulator's
own reading of what that prints, from the repo's documented rules (workflows README, EVALS.md)
and its generator at 843c6254, checked row for row against what the real generator printed for
every key of both master files in every eval mode (tests/sim/test_matrix.py over
tests/fixtures/inferencex/expected-plans/). It shares nothing with the bot's planner on purpose:
the simulator is the second opinion that catches the bot's planning mistakes.

Expansion, per master-config key (every field the real rows carry, nothing more):

- concurrencies: ``conc-list`` as given, else ``conc-start`` doubling up to ``conc-end`` (the last
  step capped at the end); ``--conc`` keeps only the listed values (a search-space entry left
  with none is dropped);
- fixed-seq-len single-node: one row per concurrency, ``exp-name`` ``<prefix>_<seq>`` (``1k1k``,
  ``8k1k`` or ``<isl>_<osl>``), ``max-model-len`` isl + osl + 256, ``ep``/``dp-attn``/``pp``/
  ``dcp-size``/``pcp-size`` defaulted to 1/false/1/1/1;
- fixed-seq-len multi-node: one row per search-space entry with the whole concurrency list;
  ``prefill``/``decode`` workers get ``pp``/``dcp-size``/``pcp-size`` defaults; an aggregated
  entry (``worker:``) becomes prefill = the worker with ``num-worker: 1`` and decode = the worker
  with ``num-worker: 0`` and no ``additional-settings``;
- agentic-coding: ``duration`` 3600, ``total-cpu-dram-gb`` from the runner's DRAM
  (``sim.matrix_dram``); single-node one row per concurrency, ``exp-name``
  ``<prefix>_tp<tp>_conc<c>_<kv>[_spec-<spec>]``; multi-node one row per concurrency (one
  concurrency per allocation), ``exp-name`` ``<prefix>_p<n>x<tp>[ep<ep>][dpa]_d…_conc<c>[_<kv>]``;
- ``router`` and ``kv-p2p-transfer``: the search-space entry's, else the key's.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sim.matrix_dram import dram_offload_gb
from sim.matrix_evals import EvalMode, apply_eval_mode

SEQ_NAMES = {(1024, 1024): "1k1k", (8192, 1024): "8k1k"}
SEQ_BY_NAME = {name: pair for pair, name in SEQ_NAMES.items()}
AGENTIC_DURATION = 3600
AGENTIC = "agentic-coding"
_COMPONENTS = ("router", "kv-p2p-transfer")


class MatrixError(ValueError):
    """The generator refuses the command (get-jobs fails with this message)."""


def seq_name(isl: int, osl: int) -> str:
    return SEQ_NAMES.get((isl, osl), f"{isl}_{osl}")


def doubling(start: int, end: int, step: int = 2) -> list[int]:
    """``start``, times ``step`` each time, the last capped at ``end`` (which is always included)."""
    out, conc = [], start
    while conc <= end:
        out.append(conc)
        if conc == end:
            break
        conc = min(conc * step, end)
    return out


def concurrencies(bmk: dict[str, Any], step: int = 2) -> list[int]:
    """A search-space entry's concurrencies: its list, or its doubling range."""
    if bmk.get("conc-list"):
        return [int(c) for c in bmk["conc-list"]]
    return doubling(int(bmk["conc-start"]), int(bmk["conc-end"]), step)


def resolve_keys(patterns: Sequence[str], available: Iterable[str]) -> list[str]:
    """``--config-keys``: exact keys must exist; ``*``/``?`` patterns must match at least one;
    duplicates dropped, first mention kept."""
    names = list(available)
    out: dict[str, None] = {}
    for pattern in patterns:
        if "*" in pattern or "?" in pattern:
            hits = fnmatch.filter(names, pattern)
            if not hits:
                raise MatrixError(f"Pattern '{pattern}' matched no config keys.")
            out.update(dict.fromkeys(hits))
        elif pattern not in names:
            raise MatrixError(f"Config key(s) not found: {pattern}.")
        else:
            out[pattern] = None
    return list(out)


def _with_defaults(worker: dict[str, Any]) -> dict[str, Any]:
    return {
        **worker,
        "pp": worker.get("pp", 1),
        "dcp-size": worker.get("dcp-size", 1),
        "pcp-size": worker.get("pcp-size", 1),
    }


def workers(bmk: dict[str, Any], disagg: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The row's (prefill, decode) for a multi-node search-space entry."""
    if disagg or "worker" not in bmk:
        return _with_defaults(bmk["prefill"]), _with_defaults(bmk["decode"])
    worker = _with_defaults(bmk["worker"])
    decode = {k: v for k, v in worker.items() if k not in ("num-worker", "additional-settings")}
    return {"num-worker": 1, **worker}, {"num-worker": 0, **decode}


def _components(bmk: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    return {f: bmk.get(f, config.get(f)) for f in _COMPONENTS if bmk.get(f, config.get(f)) is not None}


def _base(config: dict[str, Any]) -> dict[str, Any]:
    return {
        "image": config["image"],
        "model": config["model"],
        "model-prefix": config["model-prefix"],
        "precision": config["precision"],
        "framework": config["framework"],
        "runner": config["runner"],
    }


def _single_shape(bmk: dict[str, Any]) -> dict[str, Any]:
    return {
        "tp": bmk["tp"],
        "pp": bmk.get("pp", 1),
        "dcp-size": bmk.get("dcp-size", 1),
        "pcp-size": bmk.get("pcp-size", 1),
        "ep": bmk["ep"] if bmk.get("ep") is not None else 1,
        "dp-attn": bmk["dp-attn"] if bmk.get("dp-attn") is not None else False,
        "spec-decoding": bmk.get("spec-decoding", "none"),
    }


def fixed_rows(
    config: dict[str, Any], seq: dict[str, Any], bmk: dict[str, Any], concs: list[int]
) -> list[dict[str, Any]]:
    """The fixed-seq-len rows of one search-space entry (its concurrencies already filtered)."""
    isl, osl = int(seq["isl"]), int(seq["osl"])
    disagg = bool(config.get("disagg", False))
    common = {
        **_base(config),
        "isl": isl,
        "osl": osl,
        "max-model-len": isl + osl + 256,
        "exp-name": f"{config['model-prefix']}_{seq_name(isl, osl)}",
        "disagg": disagg,
        "run-eval": False,
    }
    extra = _components(bmk, config)
    if config.get("multinode"):
        prefill, decode = workers(bmk, disagg)
        shape = {"spec-decoding": bmk.get("spec-decoding", "none"), "prefill": prefill, "decode": decode}
        return [{**common, **shape, "conc": list(concs), **extra}]
    return [{**common, **_single_shape(bmk), "conc": c, **extra} for c in concs]


def offload_mode(bmk: dict[str, Any]) -> str:
    """An agentic entry's KV-offload mode. Master files before the `kv-offloading` field
    (f8f9b66's `kimik2.5-fp4-mi355x-vllm-agentic`) spell it `offloading` (`none`, `cpu`) with no
    backend: the repo ran those entries, one job per item, so the field is read, not dropped (a
    generator that dropped it would emit the `none` and the `cpu` item as two identical rows, whose
    jobs upload the same `bmk_agentic_<RESULT_FILENAME>` in one run)."""
    return str(bmk.get("kv-offloading", bmk.get("offloading", "none")))


def kv_suffix(bmk: dict[str, Any]) -> str:
    mode = offload_mode(bmk)
    if mode == "none":
        return "kvnone"
    backend = bmk.get("kv-offload-backend")
    return f"kv{mode}-{backend['name']}" if backend is not None else f"kv{mode}"


def _worker_tag(worker: dict[str, Any], role: str) -> str:
    tag = f"{role}{worker['num-worker']}x{worker['tp']}"
    if worker.get("ep", 1) != 1:
        tag += f"ep{worker['ep']}"
    return tag + ("dpa" if worker.get("dp-attn", False) else "")


def agentic_rows(
    config: dict[str, Any],
    scenario: dict[str, Any],
    bmk: dict[str, Any],
    concs: list[int],
    runners: dict[str, Any],
) -> list[dict[str, Any]]:
    """The agentic-coding rows of one search-space entry: one per concurrency."""
    prefix = str(config["model-prefix"])
    spec = bmk.get("spec-decoding", "none")
    common = {
        **_base(config),
        "spec-decoding": spec,
        "kv-offloading": offload_mode(bmk),
        "total-cpu-dram-gb": dram_offload_gb(scenario, bmk, str(config["runner"]), runners),
        "duration": AGENTIC_DURATION,
        "scenario-type": AGENTIC,
    }
    if bmk.get("kv-offload-backend") is not None:
        common["kv-offload-backend"] = bmk["kv-offload-backend"]
    extra = _components(bmk, config)
    rows: list[dict[str, Any]] = []
    if config.get("multinode"):
        disagg = bool(config.get("disagg", False))
        prefill, decode = workers(bmk, disagg)
        kv = "" if common["kv-offloading"] == "none" else f"_{kv_suffix(bmk)}"
        tags = f"{prefix}_{_worker_tag(prefill, 'p')}_{_worker_tag(decode, 'd')}"
        for c in concs:
            shape = {"prefill": prefill, "decode": decode, "conc": [c], "disagg": disagg}
            rows.append({**common, **shape, "exp-name": f"{tags}_conc{c}{kv}", **extra})
        return rows
    shape = _single_shape(bmk)
    spec_tag = f"_spec-{spec}" if spec != "none" else ""
    for c in concs:
        name = f"{prefix}_tp{bmk['tp']}_conc{c}_{kv_suffix(bmk)}{spec_tag}"
        rows.append({**common, **shape, "conc": c, "exp-name": name, **extra})
    return rows


Pick = Callable[[dict[str, Any], str], "tuple[dict[str, Any], list[int]] | None"]


def conc_pick(conc: Sequence[int]) -> Pick:
    """test-config's choice: every concurrency, or only those ``--conc`` lists."""

    def pick(bmk: dict[str, Any], kind: str) -> tuple[dict[str, Any], list[int]] | None:
        concs = [c for c in concurrencies(bmk) if not conc or c in conc]
        return (bmk, concs) if concs else None

    return pick


def key_rows(
    config: dict[str, Any],
    runners: dict[str, Any],
    pick: Pick,
    seq_lens: Sequence[str] = (),
    scenarios: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Every row one key expands into, before the eval marks; ``pick`` gives each search-space
    entry (kind ``single``, ``multi`` or ``agentic``) as the command sees it and its
    concurrencies, or None to leave it out."""
    wanted = {SEQ_BY_NAME[s] for s in seq_lens}
    kinds = set(scenarios) or {"fixed-seq-len", AGENTIC}
    rows: list[dict[str, Any]] = []
    spaces = config.get("scenarios") or {}
    fixed_kind = "multi" if config.get("multinode") else "single"
    for seq in spaces.get("fixed-seq-len", []) if "fixed-seq-len" in kinds else []:
        if wanted and (int(seq["isl"]), int(seq["osl"])) not in wanted:
            continue
        for bmk in seq["search-space"]:
            picked = pick(bmk, fixed_kind)
            if picked:
                rows += fixed_rows(config, seq, *picked)
    for scenario in spaces.get(AGENTIC, []) if AGENTIC in kinds else []:
        for bmk in scenario["search-space"]:
            picked = pick(bmk, "agentic")
            if picked:
                rows += agentic_rows(config, scenario, picked[0], picked[1], runners)
    return rows


def test_config(
    masters: dict[str, Any],
    keys: Sequence[str],
    runners: dict[str, Any],
    mode: EvalMode = EvalMode.DEFAULT,
    *,
    conc: Sequence[int] = (),
    seq_lens: Sequence[str] = (),
    scenarios: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """What ``test-config --config-keys KEYS`` prints over the merged master files (a key in two
    files: the later file's), eval marks applied after the ``--conc`` filter."""
    rows: list[dict[str, Any]] = []
    for key in resolve_keys(keys, masters):
        rows += key_rows(masters[key], runners, conc_pick(conc), seq_lens, scenarios)
    return apply_eval_mode(rows, mode)


test_config.__test__ = False  # type: ignore[attr-defined]  # pytest: not a test function
