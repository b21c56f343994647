"""Planning multi-node and agentic-coding keys into points, with the benchmark repo's expansion rules.

Pure: a master entry in, plan dicts (the keys of `sweepbot recipe plan --json`) out. Written from
the repo's documentation (`configs/CONFIGS.md`, `.github/workflows/README.md`,
`benchmarks/single_node/agentic/README.md`, the matrix-entry models its validation documents)
and from how the real files are shaped (tests/fixtures/inferencex/):

* **Multi-node fixed-seq-len** (`multinode: true`): one row per `fixed-seq-len` item x
  `search-space` item, in file order, carrying the *whole* concurrency list ("each multi-node
  topology runs all conc-list values on one engine"): `conc-list` as given, or the doubling range
  `conc-start`..`conc-end` clamped to the end, as for single-node keys. `prefill` and `decode` are
  worker topologies (`num-worker`, `tp`, `ep`, `dp-attn`, optional `pp`/`dcp-size`/`pcp-size`
  defaulting to 1, `additional-settings` defaulting to []); `spec-decoding` defaults to `none`;
  `max-model-len` = isl + osl + 256 and `exp-name` = `<model-prefix>_<seq>`, as single-node.
* **Agentic-coding, single-node**: one point per `agentic-coding` item x `search-space` item x conc
  (like fixed-seq-len, but no isl/osl). Item fields: `tp`, `ep` (default 1), `dp-attn` (false),
  `pp`/`dcp-size`/`pcp-size` (1), `spec-decoding` (`none`), `kv-offloading` (`none` or `dram`;
  `kv-offload-backend` with a `name` is required when it is `dram`), `router`, `srt-recipe`.
  Scenario-level: `dram-utilization` (kept on the point; the DRAM budget is derived by the
  workflow from runners.yaml), `trace-source`, and `duration` (only in older files; the
  documented default is 3600 seconds).
* **Agentic-coding, multi-node**: as multi-node fixed-seq-len (one row per item, whole conc list,
  prefill/decode workers), plus the agentic fields.

Where the documentation is silent (assumptions, said here so they can be checked):
* The agentic `exp-name` is `<model-prefix>_agentic`: agentic jobs have no sequence shape.
* `kv-offloading` absent means `none` (kimik3-fp4-b200-dynamo-vllm-agentic at HEAD omits it).
* Older files (f8f9b66) spell it `offloading` with the values of the time (`cpu`, `hicache`);
  they are kept verbatim as the point's `kv-offloading`.
* Result identity (the job's name for tracking): single-node keys keep the repo's RESULT_FILENAME
  form; multi-node and agentic rows use the same pattern with each worker's topology
  (`p<n>tp..` / `d<n>tp..`) and, for agentic rows, the offload mode, so every row of a key has a
  distinct, stable name.

A field the rules do not cover raises UnsupportedScenarioError naming that field and where it
is, never an approximate point.
"""

from __future__ import annotations

from typing import Any

from app.core.recipes.errors import InvalidRecipeError, UnsupportedScenarioError
from app.core.recipes.master import AGENTIC_CODING, SPEC_MODES
from app.core.recipes.points import MAX_MODEL_LEN_SLACK
from app.core.seqlen import seq_name

DEFAULT_AGENTIC_DURATION = 3600
KV_OFFLOADING = ("none", "dram")

WORKER_FIELDS = frozenset(
    {
        "num-worker",
        "tp",
        "pp",
        "dcp-size",
        "pcp-size",
        "ep",
        "dp-attn",
        "attn-dp-size",
        "hardware",
        "additional-settings",
        "batch-size",
        "max-num-tokens",
    }
)
_CONC_FIELDS = frozenset({"conc-list", "conc-start", "conc-end"})
MULTINODE_ITEM_FIELDS = frozenset({"spec-decoding", "prefill", "decode"}) | _CONC_FIELDS
AGENTIC_EXTRA_FIELDS = frozenset({"kv-offloading", "offloading", "kv-offload-backend", "router"})
AGENTIC_ITEM_FIELDS = (
    frozenset(
        {"tp", "pp", "dcp-size", "pcp-size", "ep", "dp-attn", "attn-dp-size", "spec-decoding", "srt-recipe"}
    )
    | _CONC_FIELDS
    | AGENTIC_EXTRA_FIELDS
)
AGENTIC_SCENARIO_FIELDS = frozenset({"search-space", "dram-utilization", "trace-source", "duration"})
FIXED_SCENARIO_FIELDS = frozenset({"isl", "osl", "search-space"})


def _bool(value: bool) -> str:
    return "true" if value else "false"


def unsupported_fields(key: str, where: str, fields: set[str]) -> UnsupportedScenarioError:
    names = ", ".join(f"`{f}`" for f in sorted(fields))
    return UnsupportedScenarioError(
        f"config key '{key}': {where} field {names} cannot be expanded into sweep points "
        "(not in the benchmark repo's documented schema); remove it or plan this key by hand"
    )


def _pos_int(value: Any, key: str, name: str, default: int | None, *, zero_ok: bool = False) -> int:
    if value is None:
        if default is None:
            raise InvalidRecipeError(f"config key '{key}': `{name}` is required")
        return default
    low = 0 if zero_ok else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidRecipeError(f"config key '{key}': `{name}` must be an integer >= {low}, got {value!r}")
    return value


def _flag(value: Any, key: str, name: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidRecipeError(f"config key '{key}': `{name}` must be true or false, got {value!r}")
    return value


def _spec(item: dict[str, Any], key: str) -> str:
    spec = item.get("spec-decoding", "none")
    if spec not in SPEC_MODES:
        raise InvalidRecipeError(
            f"config key '{key}': `spec-decoding` must be one of {', '.join(SPEC_MODES)}, got {spec!r}"
        )
    return str(spec)


def worker(raw: Any, key: str, role: str) -> dict[str, Any]:
    """A prefill/decode worker with the schema's defaults filled in, in a fixed field order."""
    if not isinstance(raw, dict):
        raise InvalidRecipeError(f"config key '{key}': `{role}` must be a mapping of worker fields")
    unknown = set(raw) - WORKER_FIELDS
    if unknown:
        raise unsupported_fields(key, f"`{role}` worker", unknown)
    settings = raw.get("additional-settings") or []
    if not isinstance(settings, list) or not all(isinstance(s, str) for s in settings):
        raise InvalidRecipeError(
            f"config key '{key}': `{role}.additional-settings` must be a list of strings"
        )
    out: dict[str, Any] = {
        "num-worker": _pos_int(raw.get("num-worker"), key, f"{role}.num-worker", None, zero_ok=True),
        "tp": _pos_int(raw.get("tp"), key, f"{role}.tp", None),
        "pp": _pos_int(raw.get("pp"), key, f"{role}.pp", 1),
        "dcp-size": _pos_int(raw.get("dcp-size"), key, f"{role}.dcp-size", 1),
        "pcp-size": _pos_int(raw.get("pcp-size"), key, f"{role}.pcp-size", 1),
        "ep": _pos_int(raw.get("ep"), key, f"{role}.ep", None),
        "dp-attn": _flag(raw.get("dp-attn"), key, f"{role}.dp-attn"),
        "additional-settings": list(settings),
    }
    for name in ("attn-dp-size", "hardware", "batch-size", "max-num-tokens"):
        if raw.get(name) is not None:
            out[name] = raw[name]
    return out


def _worker_tag(w: dict[str, Any], role: str) -> str:
    return (
        f"{role}{w['num-worker']}tp{w['tp']}-pp{w['pp']}-dcp{w['dcp-size']}-pcp{w['pcp-size']}"
        f"-ep{w['ep']}-dpa{_bool(w['dp-attn'])}"
    )


def _offload(item: dict[str, Any], key: str) -> tuple[str, Any]:
    """(kv-offloading mode, backend). Absent means `none` (a HEAD key omits it on a GPU-resident
    item). The older field `offloading` (f8f9b66: `none`, `cpu`, `hicache`, no backend) is taken
    verbatim: its vocabulary predates the `none`/`dram` + backend split."""
    if "kv-offloading" not in item and "offloading" in item:
        legacy = item["offloading"]
        if not isinstance(legacy, str) or not legacy:
            raise InvalidRecipeError(f"config key '{key}': `offloading` must be a mode name, got {legacy!r}")
        return legacy, item.get("kv-offload-backend")
    mode = item.get("kv-offloading", "none")
    if mode not in KV_OFFLOADING:
        raise InvalidRecipeError(f"config key '{key}': `kv-offloading` must be none or dram, got {mode!r}")
    backend = item.get("kv-offload-backend")
    if mode == "dram" and not (isinstance(backend, dict) and backend.get("name")):
        raise InvalidRecipeError(
            f"config key '{key}': `kv-offloading: dram` needs `kv-offload-backend: {{ name: ... }}`"
        )
    return str(mode), backend


def _common(entry: dict[str, Any], key: str) -> dict[str, Any]:
    """The entry-level fields every point of the key carries."""
    out: dict[str, Any] = {"config-key": key}
    for name in ("image", "model", "model-prefix", "precision", "framework", "runner"):
        value = entry.get(name)
        if not isinstance(value, str) or not value:
            raise InvalidRecipeError(f"config key '{key}' has no `{name}`; add it to the entry")
        out[name] = value
    return out


def _entry_extras(entry: dict[str, Any]) -> dict[str, Any]:
    return {n: entry[n] for n in ("router", "kv-p2p-transfer", "hardware") if entry.get(n) is not None}


def multinode_row(
    entry: dict[str, Any],
    key: str,
    item: dict[str, Any],
    concs: list[int],
    *,
    isl: int | None,
    osl: int | None,
    agentic: dict[str, Any] | None,
) -> dict[str, Any]:
    """One multi-node row (fixed-seq-len when isl/osl are given, else agentic)."""
    allowed = MULTINODE_ITEM_FIELDS | (AGENTIC_EXTRA_FIELDS if agentic is not None else frozenset())
    unknown = set(item) - allowed
    if unknown:
        raise unsupported_fields(key, "multi-node search-space", unknown)
    if "prefill" not in item or "decode" not in item:
        raise InvalidRecipeError(
            f"config key '{key}' is multinode: each search-space item needs `prefill` and `decode` workers"
        )
    row = _common(entry, key)
    prefill, decode = worker(item["prefill"], key, "prefill"), worker(item["decode"], key, "decode")
    spec = _spec(item, key)
    disagg = bool(entry.get("disagg", False))
    row.update({"spec-decoding": spec, "prefill": prefill, "decode": decode, "conc": list(concs)})
    topo = f"{_worker_tag(prefill, 'p')}_{_worker_tag(decode, 'd')}"
    conc_tag = "x".join(str(c) for c in concs)
    if agentic is None:
        assert isl is not None and osl is not None
        exp = f"{entry['model-prefix']}_{seq_name(isl, osl)}"
        row.update(
            {"isl": isl, "osl": osl, "max-model-len": isl + osl + MAX_MODEL_LEN_SLACK, "exp-name": exp}
        )
        offload_tag = ""
    else:
        mode, backend = _offload(item, key)
        exp = f"{entry['model-prefix']}_agentic"
        row.update({"scenario-type": AGENTIC_CODING, "kv-offloading": mode, "exp-name": exp, **agentic})
        if backend is not None:
            row["kv-offload-backend"] = backend
        if item.get("router") is not None:
            row["router"] = item["router"]
        offload_tag = f"_kv-{mode}"
    row["disagg"] = disagg
    row["multinode"] = True
    row.update({k: v for k, v in _entry_extras(entry).items() if k not in row})
    row["result-name"] = (
        f"{exp}_{row['precision']}_{row['framework']}_{topo}_disagg-{_bool(disagg)}_spec-{spec}"
        f"{offload_tag}_conc{conc_tag}_{row['runner']}"
    )
    return row


def agentic_points(
    entry: dict[str, Any], key: str, item: dict[str, Any], concs: list[int], scenario: dict[str, Any]
) -> list[dict[str, Any]]:
    """Single-node agentic points: one per conc of one search-space item."""
    unknown = set(item) - AGENTIC_ITEM_FIELDS
    if unknown:
        raise unsupported_fields(key, "agentic search-space", unknown)
    tp = _pos_int(item.get("tp"), key, "tp", None)
    pp = _pos_int(item.get("pp"), key, "pp", 1)
    dcp = _pos_int(item.get("dcp-size"), key, "dcp-size", 1)
    pcp = _pos_int(item.get("pcp-size"), key, "pcp-size", 1)
    ep = _pos_int(item.get("ep"), key, "ep", 1)
    dp_attn = _flag(item.get("dp-attn"), key, "dp-attn")
    spec = _spec(item, key)
    mode, backend = _offload(item, key)
    exp = f"{entry['model-prefix']}_agentic"
    out = []
    for conc in concs:
        row = _common(entry, key)
        row.update(
            {
                "scenario-type": AGENTIC_CODING,
                "tp": tp,
                "pp": pp,
                "dcp-size": dcp,
                "pcp-size": pcp,
                "ep": ep,
                "dp-attn": dp_attn,
                "spec-decoding": spec,
                "kv-offloading": mode,
                "conc": conc,
                "exp-name": exp,
                **scenario,
            }
        )
        if backend is not None:
            row["kv-offload-backend"] = backend
        for name in ("router", "srt-recipe", "attn-dp-size"):
            if item.get(name) is not None:
                row[name] = item[name]
        row["result-name"] = (
            f"{exp}_{row['precision']}_{row['framework']}_tp{tp}-pp{pp}-dcp{dcp}-pcp{pcp}-ep{ep}"
            f"-dpa{_bool(dp_attn)}_disagg-false_spec-{spec}_kv-{mode}_conc{conc}_{row['runner']}"
        )
        out.append(row)
    return out


def agentic_scenario_fields(raw: dict[str, Any], key: str) -> dict[str, Any]:
    """Scenario-level agentic fields as they go on each point (duration defaulted)."""
    unknown = set(raw) - AGENTIC_SCENARIO_FIELDS
    if unknown:
        raise unsupported_fields(key, "agentic-coding scenario", unknown)
    out: dict[str, Any] = {
        "duration": _pos_int(raw.get("duration"), key, "duration", DEFAULT_AGENTIC_DURATION)
    }
    util = raw.get("dram-utilization")
    if util is not None:
        if isinstance(util, bool) or not isinstance(util, int | float) or not 0 <= util <= 1:
            raise InvalidRecipeError(
                f"config key '{key}': `dram-utilization` must be a number from 0 to 1, got {util!r}"
            )
        out["dram-utilization"] = util
    if raw.get("trace-source") is not None:
        out["trace-source"] = raw["trace-source"]
    return out


def point_summary(row: dict[str, Any]) -> dict[str, str]:
    """Display columns for any point kind (the CLI table)."""
    if "prefill" in row:
        p, d = row["prefill"], row["decode"]
        topo = f"P{p['num-worker']}xTP{p['tp']}/EP{p['ep']} D{d['num-worker']}xTP{d['tp']}/EP{d['ep']}"
        conc = ",".join(str(c) for c in row["conc"])
    else:
        topo = f"TP{row['tp']}/EP{row['ep']}" + (" dp-attn" if row.get("dp-attn") else "")
        conc = str(row["conc"])
    seq = row.get("scenario-type") or (f"{row['isl']}/{row['osl']}" if "isl" in row else "")
    return {"seq": str(seq), "topology": topo, "spec": str(row.get("spec-decoding")), "conc": conc}
