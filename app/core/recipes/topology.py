"""The master-config fields sweep planning knows, per place, and the CLI's summary of a row.

The repo's own validation (`utils/matrix_logic/validation.py` at 843c6254) forbids fields its
models do not declare; planning does the same, so a field the rules (app/core/recipes/matrix.py)
do not cover is one UnsupportedScenarioError naming it and where it is, never an approximate point.
The sets hold every field the real master files use (tests/fixtures/inferencex/configs/).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from app.core.recipes.errors import UnsupportedScenarioError

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
CONC_FIELDS = frozenset({"conc-list", "conc-start", "conc-end"})
COMPONENT_FIELDS = frozenset({"router", "kv-p2p-transfer"})
SINGLE_ITEM_FIELDS = (
    frozenset({"tp", "pp", "dcp-size", "pcp-size", "ep", "dp-attn", "spec-decoding"})
    | CONC_FIELDS
    | COMPONENT_FIELDS
    | frozenset(
        {"srt-recipe", "attn-dp-size", "num-speculative-tokens", "max-num-batched-tokens", "moe-backend"}
    )
)
OFFLOAD_FIELDS = frozenset({"kv-offloading", "offloading", "kv-offload-backend"})
MULTINODE_ITEM_FIELDS = frozenset({"spec-decoding", "prefill", "decode"}) | CONC_FIELDS | COMPONENT_FIELDS
AGENTIC_ITEM_FIELDS = SINGLE_ITEM_FIELDS | OFFLOAD_FIELDS
FIXED_SCENARIO_FIELDS = frozenset({"isl", "osl", "search-space"})
AGENTIC_SCENARIO_FIELDS = frozenset({"search-space", "dram-utilization", "trace-source", "duration"})


def check_fields(key: str, where: str, data: Mapping[str, Any], allowed: Iterable[str]) -> None:
    """UnsupportedScenarioError naming every field of ``data`` not in ``allowed``."""
    extra = set(data) - set(allowed)
    if extra:
        names = ", ".join(f"`{f}`" for f in sorted(extra))
        raise UnsupportedScenarioError(
            f"config key '{key}': {where} field {names} cannot be expanded into sweep points "
            "(not in the benchmark repo's schema); remove it or plan this key by hand"
        )


def point_summary(row: dict[str, Any]) -> dict[str, str]:
    """Display columns for any point kind (the CLI table)."""
    if "prefill" in row:
        p, d = row["prefill"], row["decode"]
        prefill = f"P{p['num-worker']}xTP{p['tp']}/EP{p.get('ep', 1)}"
        topo = f"{prefill} D{d['num-worker']}xTP{d['tp']}/EP{d.get('ep', 1)}"
        conc = ",".join(str(c) for c in row["conc"])
    else:
        topo = f"TP{row['tp']}/EP{row['ep']}" + (" dp-attn" if row.get("dp-attn") else "")
        conc = str(row["conc"])
    seq = row.get("scenario-type") or (f"{row['isl']}/{row['osl']}" if "isl" in row else "")
    return {"seq": str(seq), "topology": topo, "spec": str(row.get("spec-decoding")), "conc": conc}
