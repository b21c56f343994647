"""Shared helpers for the recipe tests: fixture files and an independent reference expansion."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.conftest import FIXTURES

INFERENCEX = FIXTURES / "inferencex"
MASTER_FILES = (
    "amd-master.f8f9b66.yaml",
    "amd-master.b4cec7f.yaml",
    "amd-master.head.yaml",
    "amd-minimaxm3-8k1k-master.deprecated.head.yaml",
    # Exact excerpts of configs/nvidia-master.yaml at HEAD (enroot pins, multi-node agentic keys).
    "nvidia-master.tail.head.yaml",
    "nvidia-master.dsv4-gb300-trt-mtp.head.yaml",
)
AMD_FILES = tuple(name for name in MASTER_FILES if name.startswith("amd-"))
SEED_KEY = "minimaxm3-fp4-mi355x-vllm"
BUMPED_IMAGE = "vllm/vllm-openai-rocm:nightly-69715823df89b11ee684b84066390cbb9092d5c1"


def fixture_text(name: str) -> str:
    return (INFERENCEX / name).read_bytes().decode("utf-8")


def fixture_path(name: str) -> Path:
    return INFERENCEX / name


def is_single_node_fixed(entry: dict[str, Any]) -> bool:
    return not entry.get("multinode", False) and set(entry.get("scenarios", {})) == {"fixed-seq-len"}


def reference_points(key: str, entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Written from the rule in the brief, independently of app.core.recipes."""
    rows = []
    for scenario in entry["scenarios"]["fixed-seq-len"]:
        isl, osl = scenario["isl"], scenario["osl"]
        seq = {(1024, 1024): "1k1k", (8192, 1024): "8k1k"}.get((isl, osl), f"{isl}_{osl}")
        for item in scenario["search-space"]:
            if "conc-list" in item:
                concs = list(item["conc-list"])
            else:
                concs, c = [], item["conc-start"]
                while c < item["conc-end"]:
                    concs.append(c)
                    c *= 2
                concs.append(item["conc-end"])
            for conc in concs:
                row = {
                    "config-key": key,
                    "image": entry["image"],
                    "model": entry["model"],
                    "model-prefix": entry["model-prefix"],
                    "precision": entry["precision"],
                    "framework": entry["framework"],
                    "runner": entry["runner"],
                    "isl": isl,
                    "osl": osl,
                    "tp": item["tp"],
                    "pp": item.get("pp", 1),
                    "dcp-size": item.get("dcp-size", 1),
                    "pcp-size": item.get("pcp-size", 1),
                    "ep": item.get("ep", 1),
                    "dp-attn": item.get("dp-attn", False),
                    "spec-decoding": item.get("spec-decoding", "none"),
                    "conc": conc,
                    "max-model-len": isl + osl + 256,
                    "exp-name": f"{entry['model-prefix']}_{seq}",
                    "disagg": bool(entry.get("disagg", False)),
                }
                dpa = "true" if row["dp-attn"] else "false"
                disagg = "true" if entry.get("disagg", False) else "false"
                row["result-name"] = (
                    f"{row['exp-name']}_{row['precision']}_{row['framework']}_tp{row['tp']}-pp{row['pp']}"
                    f"-dcp{row['dcp-size']}-pcp{row['pcp-size']}-ep{row['ep']}-dpa{dpa}_disagg-{disagg}"
                    f"_spec-{row['spec-decoding']}_conc{conc}_{row['runner']}"
                )
                rows.append(row)
    return rows


def event_values(text: str) -> list[tuple[str, object]]:
    """(event type, scalar value) per event: an independent check that data did not change."""
    return [
        (type(ev).__name__, getattr(ev, "value", None))
        for ev in yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    ]


def reference_eval_marks(rows: list[dict[str, Any]]) -> list[bool]:
    """The generator's default eval selection for single-node fixed-seq-len rows, written apart
    from app.core.recipes.evals (checked against tests/fixtures/inferencex/expected-plans/):
    8k1k only, concurrencies below 16 ignored, grouped across TPs by model / runner / framework /
    precision / isl / osl / spec-decoding / dp-attn; every row of a group at its highest or its
    (upper) median eligible concurrency is marked."""
    import statistics

    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, row in enumerate(rows):
        if (row["isl"], row["osl"]) != (8192, 1024) or row["conc"] < 16:
            continue
        fields = ("model", "runner", "framework", "precision", "isl", "osl", "spec-decoding", "dp-attn")
        groups.setdefault(tuple(row[f] for f in fields), []).append(i)
    marks = [False] * len(rows)
    for members in groups.values():
        concs = sorted({rows[i]["conc"] for i in members})
        wanted = {max(concs), statistics.median_high(concs)}
        for i in members:
            marks[i] = marks[i] or rows[i]["conc"] in wanted
    return marks


def reference_plan(key: str, entry: dict[str, Any], mode: str = "default") -> list[dict[str, Any]]:
    """reference_points plus the generator's marks for an eval mode: `default` marks every row,
    `none` leaves run-eval false, `only` keeps the marked rows, `all` every 8k1k row (eval-only)."""
    rows = reference_points(key, entry)
    marks = reference_eval_marks(rows)
    out = []
    for row, selected in zip(rows, marks, strict=True):
        if mode == "default":
            out.append({**row, "run-eval": selected})
        elif mode == "none":
            out.append({**row, "run-eval": False})
        elif mode == "only" and selected or mode == "all" and (row["isl"], row["osl"]) == (8192, 1024):
            out.append({**row, "run-eval": True, "eval-only": True})
    return out


def _concs(item: dict[str, Any]) -> list[int]:
    if "conc-list" in item:
        return list(item["conc-list"])
    out, c = [], item["conc-start"]
    while c < item["conc-end"]:
        out.append(c)
        c *= 2
    return out + [item["conc-end"]]


def _worker(w: dict[str, Any]) -> dict[str, Any]:
    out = {
        "num-worker": w["num-worker"], "tp": w["tp"], "pp": w.get("pp", 1), "dcp-size": w.get("dcp-size", 1),
        "pcp-size": w.get("pcp-size", 1), "ep": w["ep"], "dp-attn": w.get("dp-attn", False),
    }  # fmt: skip
    if "additional-settings" in w:  # the generator passes a worker's fields through as written
        out["additional-settings"] = list(w["additional-settings"])
    return out


def reference_rows(key: str, entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Multi-node and agentic rows from the generator's rules (app/core/recipes/matrix.py docstring),
    written independently: (kind, seq or None, topology, conc or conc list) per row, in file order."""
    rows: list[dict[str, Any]] = []
    multinode = bool(entry.get("multinode"))
    for kind, scenarios in entry["scenarios"].items():
        for scenario in scenarios:
            for item in scenario["search-space"]:
                concs = _concs(item)
                base = {
                    "kind": kind,
                    "isl": scenario.get("isl"),
                    "osl": scenario.get("osl"),
                    "spec-decoding": item.get("spec-decoding", "none"),
                }
                if kind == "agentic-coding":
                    base["kv-offloading"] = item.get("kv-offloading", item.get("offloading", "none"))
                    base["duration"] = scenario.get("duration", 3600)
                if multinode:
                    workers = {"prefill": _worker(item["prefill"]), "decode": _worker(item["decode"])}
                    # fixed-seq-len: one row holds the whole list; agentic: one row per conc
                    batches = [concs] if kind == "fixed-seq-len" else [[c] for c in concs]
                    rows += [{**base, **workers, "conc": batch} for batch in batches]
                elif kind == "agentic-coding":
                    for c in concs:
                        rows.append(
                            {
                                **base,
                                "tp": item["tp"],
                                "ep": item.get("ep", 1),
                                "dp-attn": item.get("dp-attn", False),
                                "conc": c,
                            }
                        )
                else:
                    single = {
                        "tp": item["tp"],
                        "ep": item.get("ep", 1),
                        "dp-attn": item.get("dp-attn", False),
                    }
                    rows += [{**base, **single, "conc": c} for c in concs]
    return rows


def summarize_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same view of planned rows, for comparison with reference_rows."""
    out = []
    for r in rows:
        kind = r.get("scenario-type", "fixed-seq-len")
        row = {"kind": kind, "isl": r.get("isl"), "osl": r.get("osl"), "spec-decoding": r["spec-decoding"]}
        if kind == "agentic-coding":
            row["kv-offloading"] = r["kv-offloading"]
            row["duration"] = r["duration"]
        if "prefill" in r:
            for role in ("prefill", "decode"):
                row[role] = {k: r[role][k] for k in _worker(r[role])}
            row["conc"] = r["conc"]
        else:
            row.update({"tp": r["tp"], "ep": r["ep"], "dp-attn": r["dp-attn"], "conc": r["conc"]})
        out.append(row)
    return out
