"""An agentic row's ``total-cpu-dram-gb``: the CPU DRAM (decimal GB) its server may offload KV
cache to, as the benchmark repo's generator sizes it from ``configs/runners.yaml``.

Zero unless the entry offloads to ``dram``. Otherwise the runner's ``available-cpu-dram-mib``
(capped at 3 TB decimal, 2,861,022 MiB) times the scenario's ``dram-utilization`` times the share
of the node's GPUs one server replica uses: the replica's tp * pp * pcp GPUs on one node (a
single-node entry must fit the node; a multi-node replica must tile the node evenly or fill whole
nodes, then the share is 1). A multi-node entry is sized by its prefill worker (aggregated: its
worker), the role that offloads. Exact decimal arithmetic, truncated to whole GB.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

DRAM_CAP_MIB = 2_861_022
MIB = 1024 * 1024
GB = 1_000_000_000


class DramError(ValueError):
    """The runner or the topology does not allow the requested offload."""


def _hardware(runner: str, runners: dict[str, Any], field: str) -> int:
    value = ((runners.get("hardware") or {}).get(runner) or {}).get(field)
    if value is None:
        raise DramError(f"Runner '{runner}' requires '{field}' in runner hardware metadata")
    return int(value)


def _gpus(worker: dict[str, Any]) -> int:
    return int(worker["tp"]) * int(worker.get("pp", 1)) * int(worker.get("pcp-size", 1))


def replica_gpus_on_node(worker: dict[str, Any], per_node: int) -> int:
    """GPUs one multi-node replica occupies on one node."""
    gpus = _gpus(worker)
    if gpus > per_node:
        if gpus % per_node:
            raise DramError(f"worker of {gpus} GPUs spans nodes of {per_node} but does not fill them")
        return per_node
    if per_node % gpus:
        raise DramError(f"worker of {gpus} GPUs does not divide a node of {per_node} evenly")
    return gpus


def dram_offload_gb(
    scenario: dict[str, Any], bmk: dict[str, Any], runner: str, runners: dict[str, Any]
) -> int:
    if bmk.get("kv-offloading", bmk.get("offloading", "none")) != "dram":
        return 0
    available = min(_hardware(runner, runners, "available-cpu-dram-mib"), DRAM_CAP_MIB)
    per_node = _hardware(runner, runners, "gpus-per-node")
    if "worker" in bmk or "prefill" in bmk:
        used = replica_gpus_on_node(bmk.get("worker") or bmk["prefill"], per_node)
    else:
        used = _gpus(bmk)
        if used > per_node:
            raise DramError(f"tp={bmk['tp']} needs {used} GPUs, more than the {per_node} of '{runner}'")
    utilization = Decimal(str(scenario["dram-utilization"]))
    return int(Decimal(available) * MIB * utilization * used / per_node / GB)
