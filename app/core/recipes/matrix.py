"""A config key's matrix rows exactly as the benchmark repo's generator prints them (pure).

The benchmark repo (SemiAnalysisAI/InferenceX at 843c6254) runs `utils/matrix_logic/
generate_sweep_configs.py test-config --config-keys KEY [--conc ...] [--seq-lens ...]` to build
the matrix its workflows fan out. The rules below were read from that command and checked row by
row against what it prints for every key of both master files
(tests/fixtures/inferencex/expected-plans/, tests/core/test_generator_parity.py):

* Key fields on every row: image, model, model-prefix, precision, framework, runner.
* Conc values of a search-space item: `conc-list` as given, or `conc-start` doubling, clamped to
  `conc-end`. `--conc` keeps only listed values; an item left with none is skipped.
* **Single-node fixed-seq-len**: one row per conc with tp, pp/dcp-size/pcp-size (1), ep (1),
  dp-attn (false), spec-decoding (`none`), `max-model-len` = isl + osl + 256,
  `exp-name` = `<prefix>_<seq>` (`1k1k`, `8k1k`, else `<isl>_<osl>`), disagg, run-eval false.
* **Multi-node fixed-seq-len**: one row per search-space item holding the whole conc list;
  `prefill`/`decode` are the item's workers with pp/dcp-size/pcp-size defaulted to 1.
* **Agentic single-node**: one row per conc; `exp-name` =
  `<prefix>_tp<tp>_conc<c>_<kv>[_spec-<mode>]` where `<kv>` is `kvnone` or
  `kv<mode>-<backend name>`; duration 3600 (an older file's scenario `duration` kept);
  `total-cpu-dram-gb` (below). No run-eval field.
* **Agentic multi-node**: one row per concurrency (one conc per allocation), `conc` a one-value
  list, `exp-name` = `<prefix>_p<n>x<tp>[ep<ep>][dpa]_d<n>x<tp>[ep<ep>][dpa]_conc<c>[_<kv>]`
  (the kv suffix only when offloading).
* `router` and `kv-p2p-transfer`: from the search-space item, else from the entry, when set.
* `total-cpu-dram-gb` (None when no runners.yaml `hardware:` is given) for `kv-offloading: dram`:
  the runner's available CPU DRAM (runners.yaml
  `hardware:`, capped at 2,861,022 MiB) x dram-utilization x the share of the node's GPUs one
  server uses (tp*pp*pcp single-node; the prefill worker's per-node share multi-node), in whole
  decimal GB rounded down; 0 otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from app.core.recipes.errors import EmptyPlanError, InvalidRecipeError, UnsupportedScenarioError
from app.core.recipes.master import (
    AGENTIC_CODING,
    FIXED_SEQ_LEN,
    SPEC_MODES,
    get_entry,
    is_multinode,
    positive_int,
)
from app.core.recipes.points import MAX_MODEL_LEN_SLACK
from app.core.recipes.topology import (
    AGENTIC_ITEM_FIELDS,
    AGENTIC_SCENARIO_FIELDS,
    FIXED_SCENARIO_FIELDS,
    MULTINODE_ITEM_FIELDS,
    OFFLOAD_FIELDS,
    SINGLE_ITEM_FIELDS,
    WORKER_FIELDS,
    check_fields,
)
from app.core.seqlen import seq_name

AGENTIC_DURATION = 3600
CONC_STEP = 2
DRAM_CAP_MIB = 2_861_022
MIB = 1024 * 1024
GB = 1_000_000_000
KEY_FIELDS = ("image", "model", "model-prefix", "precision", "framework", "runner")
COMPONENT_FIELDS = ("router", "kv-p2p-transfer")  # in this order, as the generator adds them
WORKER_DEFAULTS = (("pp", 1), ("dcp-size", 1), ("pcp-size", 1))

Hardware = Mapping[str, Mapping[str, Any]]


def conc_values(item: dict[str, Any], key: str = "?") -> list[int]:
    """The conc values of one search-space item: `conc-list` as given, or the doubling range."""
    has_list = item.get("conc-list") is not None
    has_range = item.get("conc-start") is not None or item.get("conc-end") is not None
    if has_list and has_range:
        raise InvalidRecipeError(
            f"config key '{key}': a search-space item has both `conc-list` and `conc-start`/`conc-end`; "
            "use one of them (the benchmark repo rejects both)"
        )
    if has_list:
        values = item["conc-list"]
        if (
            not isinstance(values, list)
            or not values
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)
        ):
            raise InvalidRecipeError(
                f"config key '{key}': `conc-list` must be a non-empty list of positive integers, "
                f"got {values!r}"
            )
        return list(values)
    start = positive_int(item, key, "conc-start", None)
    end = positive_int(item, key, "conc-end", None)
    if start is None or end is None:
        raise InvalidRecipeError(
            f"config key '{key}': a search-space item needs `conc-list` or both `conc-start` and `conc-end`"
        )
    if start > end:
        raise InvalidRecipeError(
            f"config key '{key}': conc-start {start} is greater than conc-end {end}; swap them"
        )
    out: list[int] = []
    conc = start
    while True:
        out.append(conc)
        if conc == end:
            return out
        conc = min(conc * CONC_STEP, end)


def _is_pos_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _spec(item: Mapping[str, Any], key: str) -> str:
    spec = item.get("spec-decoding", "none")
    if spec not in SPEC_MODES:
        raise InvalidRecipeError(
            f"config key '{key}': `spec-decoding` must be one of {', '.join(SPEC_MODES)}, got {spec!r}"
        )
    return str(spec)


def _worker(raw: Any, key: str, role: str) -> dict[str, Any]:
    if not isinstance(raw, dict) or not all(n in raw for n in ("num-worker", "tp")):
        raise InvalidRecipeError(
            f"config key '{key}': `{role}` must be a worker mapping with `num-worker` and `tp`"
        )
    check_fields(key, f"`{role}` worker", raw, WORKER_FIELDS)
    return {**raw, **{name: raw.get(name, default) for name, default in WORKER_DEFAULTS}}


def _components(item: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for name in COMPONENT_FIELDS:
        value = item.get(name, entry.get(name))
        if value is not None:
            out[name] = value
    return out


def _key_fields(entry: Mapping[str, Any], key: str) -> dict[str, Any]:
    out = {}
    for name in KEY_FIELDS:
        value = entry.get(name)
        if not isinstance(value, str) or not value:
            raise InvalidRecipeError(f"config key '{key}' has no `{name}`; add it to the entry")
        out[name] = value
    return out


def _gpu_share(workers: tuple[int, int, int], gpus_per_node: int, key: str) -> int:
    """GPUs one server occupies on one node (a multi-node replica fills whole nodes)."""
    tp, pp, pcp = workers
    used = tp * pp * pcp
    if used > gpus_per_node:
        if used % gpus_per_node:
            raise InvalidRecipeError(
                f"config key '{key}': a {used}-GPU worker spans nodes of {gpus_per_node} GPUs unevenly"
            )
        return gpus_per_node
    if gpus_per_node % used:
        raise InvalidRecipeError(
            f"config key '{key}': a {used}-GPU worker does not divide a {gpus_per_node}-GPU node"
        )
    return used


def dram_offload_gb(
    scenario: Mapping[str, Any], item: Mapping[str, Any], runner: str, hardware: Hardware | None, key: str
) -> int | None:
    """`total-cpu-dram-gb` of an agentic row (0 unless `kv-offloading: dram`; None when the
    caller has no runners.yaml ``hardware`` to size it with)."""
    if item.get("kv-offloading", item.get("offloading", "none")) != "dram":
        return 0
    if hardware is None:
        return None
    facts = hardware.get(runner)
    if not facts or "available-cpu-dram-mib" not in facts or "gpus-per-node" not in facts:
        raise InvalidRecipeError(
            f"config key '{key}': runner '{runner}' has no `hardware:` entry with available-cpu-dram-mib "
            "and gpus-per-node in runners.yaml; a DRAM-offload point needs it for its budget"
        )
    gpn = int(facts["gpus-per-node"])
    if "prefill" in item:
        p = item["prefill"]
        share = _gpu_share((p["tp"], p.get("pp", 1), p.get("pcp-size", 1)), gpn, key)
    else:
        share = item["tp"] * item.get("pp", 1) * item.get("pcp-size", 1)
        if share > gpn:
            raise InvalidRecipeError(f"config key '{key}': tp {item['tp']} needs more than {gpn} GPUs")
    available = min(int(facts["available-cpu-dram-mib"]), DRAM_CAP_MIB)
    raw = scenario.get("dram-utilization")
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0 <= raw <= 1:
        raise InvalidRecipeError(
            f"config key '{key}': a `kv-offloading: dram` scenario needs `dram-utilization` "
            f"from 0 to 1, got {raw!r}"
        )
    util = Fraction(str(raw))
    return int(available * MIB * util * share / gpn / GB)


def kv_suffix(mode: str, backend: Any) -> str:
    if mode == "none":
        return "kvnone"
    name = backend.get("name") if isinstance(backend, dict) else None
    if not name:
        raise InvalidRecipeError(f"`kv-offloading: {mode}` needs `kv-offload-backend: {{name: ...}}`")
    return f"kv{mode}-{name}"


def _offload(item: Mapping[str, Any], key: str, multinode: bool) -> tuple[str, Any, str]:
    """(kv-offloading mode, backend, exp-name suffix). Older files (f8f9b66) spell the field
    `offloading` with modes of their time (`cpu`, `hicache`) and no backend: taken verbatim,
    suffix `kv<mode>`."""
    backend = item.get("kv-offload-backend")
    if "kv-offloading" not in item and "offloading" in item:
        mode = str(item["offloading"])
        return mode, backend, ("kvnone" if mode == "none" else f"kv{mode}")
    if not multinode and "kv-offloading" not in item:
        raise InvalidRecipeError(f"config key '{key}': a single-node agentic item needs `kv-offloading`")
    mode = str(item.get("kv-offloading", "none"))
    try:
        return mode, backend, kv_suffix(mode, backend)
    except InvalidRecipeError as exc:
        raise InvalidRecipeError(f"config key '{key}': {exc}") from exc


def _worker_tag(w: Mapping[str, Any], role: str) -> str:
    tag = f"{role}{w['num-worker']}x{w['tp']}"
    if w.get("ep", 1) != 1:
        tag += f"ep{w['ep']}"
    return tag + ("dpa" if w.get("dp-attn", False) else "")


def _fixed_rows(
    entry: dict[str, Any], key: str, scenario: dict[str, Any], conc: set[int] | None
) -> list[dict[str, Any]]:
    isl, osl = scenario.get("isl"), scenario.get("osl")
    if not isinstance(isl, int) or not isinstance(osl, int) or not _is_pos_int(isl) or not _is_pos_int(osl):
        raise InvalidRecipeError(f"config key '{key}': a fixed-seq-len item needs integer `isl` and `osl`")
    base = {**_key_fields(entry, key), "isl": isl, "osl": osl}
    exp = f"{entry['model-prefix']}_{seq_name(isl, osl)}"
    disagg = bool(entry.get("disagg", False))
    rows: list[dict[str, Any]] = []
    for item in _space(scenario, key, FIXED_SEQ_LEN, is_multinode(entry)):
        concs = [c for c in conc_values(item, key) if conc is None or c in conc]
        if not concs:
            continue
        tail = {"max-model-len": isl + osl + MAX_MODEL_LEN_SLACK, "exp-name": exp, "disagg": disagg}
        if is_multinode(entry):
            if "prefill" not in item or "decode" not in item:
                raise InvalidRecipeError(
                    f"config key '{key}' is multinode: each item needs `prefill` and `decode`"
                )
            row = {
                **base,
                "spec-decoding": _spec(item, key),
                "prefill": _worker(item["prefill"], key, "prefill"),
                "decode": _worker(item["decode"], key, "decode"),
                "conc": concs,
                **tail,
                "run-eval": False,
            }
            rows.append({**row, **_components(item, entry)})
            continue
        par = _single_parallelism(item, key)
        for value in concs:
            row = {**base, **par, "conc": value, **tail, "run-eval": False}
            rows.append({**row, **_components(item, entry)})
    return rows


def _single_parallelism(item: Mapping[str, Any], key: str) -> dict[str, Any]:
    if not _is_pos_int(item.get("tp")):
        raise InvalidRecipeError(f"config key '{key}': a search-space item has no integer `tp`")
    ep, dp_attn = item.get("ep"), item.get("dp-attn")
    return {
        "tp": item["tp"],
        "pp": item.get("pp", 1),
        "dcp-size": item.get("dcp-size", 1),
        "pcp-size": item.get("pcp-size", 1),
        "ep": ep if ep is not None else 1,
        "dp-attn": dp_attn if dp_attn is not None else False,
        "spec-decoding": _spec(item, key),
    }


def _space(scenario: Mapping[str, Any], key: str, kind: str, multinode: bool) -> list[dict[str, Any]]:
    """A scenario's search space, every field of the scenario and of its items checked."""
    agentic = kind == AGENTIC_CODING
    check_fields(
        key, f"`{kind}` scenario", scenario, AGENTIC_SCENARIO_FIELDS if agentic else FIXED_SCENARIO_FIELDS
    )
    space = scenario.get("search-space")
    if not isinstance(space, list) or not space or not all(isinstance(i, dict) for i in space):
        raise InvalidRecipeError(
            f"config key '{key}': a scenario needs a non-empty `search-space` list of mappings"
        )
    if multinode:
        allowed = MULTINODE_ITEM_FIELDS | (OFFLOAD_FIELDS if agentic else frozenset())
    else:
        allowed = AGENTIC_ITEM_FIELDS if agentic else SINGLE_ITEM_FIELDS
    where = f"{'multi-node' if multinode else 'single-node'} {kind} search-space"
    for item in space:
        check_fields(key, where, item, allowed)
    return space


def _agentic_rows(
    entry: dict[str, Any],
    key: str,
    scenario: dict[str, Any],
    conc: set[int] | None,
    hardware: Hardware | None,
) -> list[dict[str, Any]]:
    base = _key_fields(entry, key)
    prefix, multinode = entry["model-prefix"], is_multinode(entry)
    rows: list[dict[str, Any]] = []
    for item in _space(scenario, key, AGENTIC_CODING, multinode):
        concs = [c for c in conc_values(item, key) if conc is None or c in conc]
        if not concs:
            continue
        mode, backend, suffix = _offload(item, key, multinode)
        spec = _spec(item, key)
        agentic = {
            "kv-offloading": mode,
            "total-cpu-dram-gb": dram_offload_gb(scenario, item, entry["runner"], hardware, key),
            "duration": scenario.get("duration", AGENTIC_DURATION),
        }
        extra = {"kv-offload-backend": backend} if backend is not None else {}
        extra.update(_components(item, entry))
        if multinode:
            prefill = _worker(item.get("prefill"), key, "prefill")
            decode = _worker(item.get("decode"), key, "decode")
            topo = f"{prefix}_{_worker_tag(prefill, 'p')}_{_worker_tag(decode, 'd')}"
            tail = "" if mode == "none" else f"_{suffix}"
            for value in concs:
                head = {**base, "spec-decoding": spec, "prefill": prefill, "decode": decode, "conc": [value]}
                rows.append(
                    {
                        **head,
                        **agentic,
                        "exp-name": f"{topo}_conc{value}{tail}",
                        "disagg": bool(entry.get("disagg", False)),
                        "scenario-type": AGENTIC_CODING,
                        **extra,
                    }
                )
            continue
        par = _single_parallelism(item, key)
        spec_tag = f"_spec-{spec}" if spec != "none" else ""
        for value in concs:
            exp = f"{prefix}_tp{par['tp']}_conc{value}_{suffix}{spec_tag}"
            row = {**base, **par, "conc": value, **agentic, "exp-name": exp, "scenario-type": AGENTIC_CODING}
            rows.append({**row, **extra})
    return rows


def matrix_rows(
    master: dict[str, Any],
    key: str,
    *,
    conc: list[int] | None = None,
    seq: tuple[int, int] | None = None,
    hardware: Hardware | None = None,
) -> list[dict[str, Any]]:
    """`test-config --config-keys key [--conc ...] [--seq-lens ...]`'s rows before eval marking.

    `seq` keeps fixed-seq-len items of that (isl, osl) only (agentic items have no shape and
    stay, as with the repo's `--seq-lens`); `hardware` is runners.yaml's `hardware:` mapping.
    """
    entry = get_entry(master, key)
    scenarios = entry.get("scenarios")
    if not isinstance(scenarios, dict) or not scenarios:
        raise InvalidRecipeError(f"config key '{key}' has no `scenarios` mapping")
    unknown = sorted(str(k) for k in scenarios if k not in (FIXED_SEQ_LEN, AGENTIC_CODING))
    if unknown:
        raise UnsupportedScenarioError(
            f"config key '{key}': scenario type {', '.join(unknown)} is not one the repo's generator knows "
            "(fixed-seq-len, agentic-coding)"
        )
    wanted = set(conc) if conc else None
    rows: list[dict[str, Any]] = []
    for scenario in scenarios.get(FIXED_SEQ_LEN) or []:
        if seq is not None and (scenario.get("isl"), scenario.get("osl")) != seq:
            continue
        rows += _fixed_rows(entry, key, scenario, wanted)
    for scenario in scenarios.get(AGENTIC_CODING) or []:
        rows += _agentic_rows(entry, key, scenario, wanted, hardware)
    return rows


def require_rows(rows: list[dict[str, Any]], key: str, conc: list[int] | None) -> list[dict[str, Any]]:
    """The rows, or EmptyPlanError when a filter left none (a typo never plans zero jobs)."""
    if not rows:
        what = f"conc {', '.join(map(str, conc))}" if conc else "that filter"
        raise EmptyPlanError(f"config key '{key}': {what} matches no point of its search space")
    return rows
