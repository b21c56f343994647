"""Job names and artifact names as the benchmark repo's templates write them (the simulator's own
reading of benchmark-tmpl.yml and benchmark-multinode-tmpl.yml at 843c6254; tests/sim/
test_naming.py evaluates the templates' own expressions and compares).

Job names (`name: >-`, folded lines joined by one space, an empty expression leaving its space):
single-node ``p<priority> | <prefix> <precision> <runner> <fw>``, ``TP<tp>[/PP..][/DCP..][/PCP..]
[/EP..][/DPA]``, the spec method unless none, ``<mode> KV offload`` and the offload backend
(agentic), ``c<conc>`` with `` | eval-only`` or `` | eval``; multi-node the same with
``[<n>P ](TP..)`` for prefill, ``x <n>D (TP..)`` for decode (disaggregated only) and
``c<c1>x<c2>..``. The frameworks ``sglang``, ``dynamo-sglang``, ``sglang-disagg`` are shortened.

``RESULT_FILENAME`` (the "Launch job script" step, on runner ``<node>``):

- single-node: ``<exp>_<precision>_<fw>_tp<tp>-pp<pp>-dcp<dcp>-pcp<pcp>-ep<ep>-dpa<bool>_disagg-
  <bool>_spec-<spec>_conc<conc>_<node>``;
- multi-node: ``<exp>_<precision>_<fw>_prefill-tp..-pp..-dcp..-pcp..-ep..-dp<bool>-nw<n>_decode-
  (same)_disagg-<bool>_spec-<spec>_conc<c1>x<c2>.._<node>``;

both with ``_recipe-<first 16 of the recipe fingerprint>`` when the row has one. Uploads (each
step's `if:`): single-node throughput ``bmk_<RF>`` (``agg_<RF>.json``) and ``power_audit_<RF>``;
agentic ``bmk_agentic_<RF>`` and ``agentic_<RF>`` (no power audit); an eval
``eval_<exp>_<RF>`` single-node, ``eval_<RF>`` multi-node; logs ``server_logs_<RF>`` /
``gpu_metrics_<RF>`` (``eval_`` prefixed for an eval-only job), multi-node
``multinode_server_logs_<RF>``. A multi-node throughput job's ``bmk_<RF>`` holds one
``agg_<RF>_conc<c>.json`` per concurrency (the processing loop runs once per ``<RF>_*.json``
raw file the launcher wrote; the simulator names them ``_conc<c>``, as the agentic glob does).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

SIM_PRIORITY = 50  # what utils/ci_priority.py would score; any number, the bot must not care
FW_SHORT = {"sglang": "sgl", "dynamo-sglang": "dyn-sgl", "sglang-disagg": "sgl-disagg"}
AGENTIC = "agentic-coding"
Members = dict[str, str]


def flag(value: Any) -> str:
    """A boolean as a workflow input carries it (``true``/``false``)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value).lower()


def concs(point: dict[str, Any]) -> list[int]:
    conc = point["conc"]
    return [int(c) for c in conc] if isinstance(conc, list) else [int(conc)]


def is_multinode(point: dict[str, Any]) -> bool:
    return "prefill" in point


def is_agentic(point: dict[str, Any]) -> bool:
    return point.get("scenario-type") == AGENTIC


def _eval_suffix(point: dict[str, Any]) -> str:
    return " | eval-only" if point.get("eval-only") else (" | eval" if point.get("run-eval") else "")


def parallel(w: dict[str, Any]) -> str:
    par = "".join(
        f"/{tag}{w.get(k)}"
        for tag, k in (("PP", "pp"), ("DCP", "dcp-size"), ("PCP", "pcp-size"), ("EP", "ep"))
        if str(w.get(k, 1)) not in ("", "1")
    )
    return f"TP{w['tp']}{par}{'/DPA' if flag(w.get('dp-attn', False)) == 'true' else ''}"


def _offload_words(point: dict[str, Any]) -> tuple[str, str]:
    if not is_agentic(point):
        return "", ""
    mode = str(point.get("kv-offloading") or "")
    backend = point.get("kv-offload-backend")
    name = str(backend.get("name") or "") if isinstance(backend, dict) else str(backend or "")
    return (
        f"{mode} KV offload" if mode not in ("", "none") else "",
        name if name not in ("", "none", "default") else "",
    )


def job_name(caller: str, point: dict[str, Any], priority: int = SIM_PRIORITY) -> str:
    """The job's name behind the caller's (``single-node /``, ``multi-node eval /``, ...)."""
    fw = str(point["framework"])
    head = (
        f"p{priority} | {point['model-prefix']} {point['precision']} {point['runner']} {FW_SHORT.get(fw, fw)}"
    )
    spec = str(point.get("spec-decoding") or "none")
    if is_multinode(point):
        pre, dec = point["prefill"], point["decode"]
        disagg = flag(point.get("disagg", False)) == "true"
        shape = [
            (f"{pre['num-worker']}P " if disagg else "") + f"({parallel(pre)})",
            f"x {dec['num-worker']}D ({parallel(dec)})" if disagg else "",
        ]
    else:
        shape = [parallel(point)]
    tail = f"c{'x'.join(str(c) for c in concs(point))}{_eval_suffix(point)}"
    lines = [head, *shape, spec if spec != "none" else "", *_offload_words(point), tail]
    return f"{caller} {' '.join(lines)}"


def _worker(w: dict[str, Any]) -> str:
    return (
        f"tp{w['tp']}-pp{w.get('pp', 1)}-dcp{w.get('dcp-size', 1)}-pcp{w.get('pcp-size', 1)}"
        f"-ep{w.get('ep', 1)}-dp{flag(w.get('dp-attn', False))}-nw{w['num-worker']}"
    )


def result_filename(point: dict[str, Any], node: str, recipe_fingerprint: str = "") -> str:
    """``RESULT_FILENAME`` as the row's template exports it on ``node``."""
    head = f"{point['exp-name']}_{point['precision']}_{point['framework']}"
    # an agentic single-node job is called with disagg 'false'; the others pass the row's
    disagg = "false" if is_agentic(point) and not is_multinode(point) else flag(point.get("disagg", False))
    spec = point.get("spec-decoding", "none")
    if is_multinode(point):
        shape = f"prefill-{_worker(point['prefill'])}_decode-{_worker(point['decode'])}"
    else:
        shape = (
            f"tp{point['tp']}-pp{point.get('pp', 1)}-dcp{point.get('dcp-size', 1)}"
            f"-pcp{point.get('pcp-size', 1)}-ep{point.get('ep', 1)}-dpa{flag(point.get('dp-attn', False))}"
        )
    conc = "x".join(str(c) for c in concs(point))
    base = f"{head}_{shape}_disagg-{disagg}_spec-{spec}_conc{conc}_{node}"
    return f"{base}_recipe-{recipe_fingerprint[:16]}" if recipe_fingerprint else base


def point_identity(point: dict[str, Any]) -> str:
    """What makes two jobs the same benchmark point, from the row's own fields: its RESULT_FILENAME
    with the runner label in the node's place (a retry on another node is the same point)."""
    try:
        return result_filename(point, str(point.get("runner", "")))
    except KeyError:  # a row without the template's fields (a test's hand-made point): itself
        return json.dumps(point, sort_keys=True, default=str)


def eval_artifact(point: dict[str, Any], rf: str) -> str:
    """The eval upload's name: single-node templates prefix the exp-name, multi-node do not."""
    return f"eval_{rf}" if is_multinode(point) else f"eval_{point['exp-name']}_{rf}"


def log_artifacts(point: dict[str, Any], rf: str) -> list[str]:
    if is_multinode(point):
        return [f"multinode_server_logs_{rf}"]
    logs = "eval_" if point.get("eval-only") else ""
    return [f"{logs}server_logs_{rf}", f"{logs}gpu_metrics_{rf}"]


def _logs(point: dict[str, Any], rf: str) -> dict[str, Members]:
    out: dict[str, Members] = {}
    for name in log_artifacts(point, rf):
        if "gpu_metrics" in name:
            out[name] = {"gpu_metrics.csv": "timestamp,gpu,power_w\n0,0,750\n"}
        else:
            out[name] = {"server.log": "INFO: Started server process\n"}
    return out


def _throughput(
    point: dict[str, Any], rf: str, result_at: Callable[[int], dict[str, Any]]
) -> dict[str, Members]:
    if is_agentic(point):
        raw = {
            f"{rf}_conc{c}.json" if is_multinode(point) else f"{rf}.json": json.dumps(result_at(c))
            for c in concs(point)
        }
        return {f"bmk_agentic_{rf}": raw, f"agentic_{rf}": dict(raw)}
    if is_multinode(point):
        aggs = {f"agg_{rf}_conc{c}.json": json.dumps(result_at(c), indent=2) for c in concs(point)}
        raws = {name.removeprefix("agg_"): text for name, text in aggs.items()}
        return {f"bmk_{rf}": aggs, f"power_audit_{rf}": {**raws, **aggs}}
    agg = json.dumps(result_at(concs(point)[0]), indent=2)
    return {
        f"bmk_{rf}": {f"agg_{rf}.json": agg},
        f"power_audit_{rf}": {f"{rf}.json": agg, f"agg_{rf}.json": agg},
    }


def uploads(
    point: dict[str, Any],
    rf: str,
    result_at: Callable[[int], dict[str, Any]] | None,
    eval_members: Callable[[], Members],
) -> dict[str, Members]:
    """Every artifact one job uploads, name -> zip members; ``result_at`` None: the benchmark
    failed (only the `always()` log steps upload)."""
    out = _logs(point, rf)
    if result_at is None:
        return out
    if not point.get("eval-only"):
        out |= _throughput(point, rf, result_at)
    if point.get("run-eval") or point.get("eval-only"):
        out[eval_artifact(point, rf)] = eval_members()
    return out


multinode_job_name = job_name  # one reading for both templates; the old name kept for its callers
