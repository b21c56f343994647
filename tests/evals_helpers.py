"""Eval artifacts for tests, in the layout the benchmark repo uploads (benchmark-tmpl.yml).

The lm-eval file shape is that of the real files in tests/fixtures/lm-eval/ (results.<task> with
`<metric>,<filter>` and `<metric>_stderr,<filter>`, n-samples, config.limit); the GSM8K values are
built here (no real GSM8K result file with a limit was found to copy) and say so.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from typing import Any

SEED_POINT: dict[str, Any] = {
    "config-key": "minimaxm3-fp4-mi355x-vllm",
    "image": "vllm/vllm-openai-rocm:nightly-69715823df89b11ee684b84066390cbb9092d5c1",
    "model": "amd/MiniMax-M3-MXFP4",
    "model-prefix": "minimaxm3",
    "precision": "fp4",
    "framework": "vllm",
    "runner": "mi355x",
    "isl": 8192,
    "osl": 1024,
    "tp": 4,
    "pp": 1,
    "dcp-size": 1,
    "pcp-size": 1,
    "ep": 1,
    "dp-attn": False,
    "spec-decoding": "none",
    "conc": 32,
    "max-model-len": 9472,
    "exp-name": "minimaxm3_8k1k",
    "result-name": (
        "minimaxm3_8k1k_fp4_vllm_tp4-pp1-dcp1-pcp1-ep1-dpafalse_disagg-false_spec-none_conc32_mi355x"
    ),
    "run-eval": True,
    "eval-only": False,
}


def binomial_stderr(score: float, n: int) -> float:
    """The harness's stderr of a mean of 0/1 scores (sample standard deviation / sqrt(n))."""
    return math.sqrt(score * (1 - score) / (n - 1))


def gsm8k_results(
    flexible: float,
    strict: float | None = None,
    *,
    n: int = 100,
    limit: int | None = 100,
    stderr: bool = True,
) -> dict[str, Any]:
    strict = flexible if strict is None else strict
    task: dict[str, Any] = {"alias": "gsm8k", "exact_match,strict-match": strict}
    if stderr:
        task["exact_match_stderr,strict-match"] = binomial_stderr(strict, n)
    task["exact_match,flexible-extract"] = flexible
    if stderr:
        task["exact_match_stderr,flexible-extract"] = binomial_stderr(flexible, n)
    return {
        "results": {"gsm8k": task},
        "group_subtasks": {"gsm8k": []},
        "n-shot": {"gsm8k": 5},
        "n-samples": {"gsm8k": {"original": 1319, "effective": n}},
        "config": {
            "model": "local-chat-completions",
            "model_args": "model=amd/MiniMax-M3-MXFP4",
            "limit": limit,
        },
        "lm_eval_version": "0.4.9.1",
    }


def meta_env(point: dict[str, Any] = SEED_POINT, **over: Any) -> dict[str, Any]:
    meta = {
        "framework": point["framework"],
        "precision": point["precision"],
        "spec_decoding": point["spec-decoding"],
        "tp": point["tp"],
        "conc": point["conc"],
        "ep": point["ep"],
        "dp_attention": point["dp-attn"],
        "model": point["model"],
        "infmax_model_prefix": point.get("model-prefix", "minimaxm3"),
        "hw": point["runner"],
        "isl": str(point["isl"]),
        "osl": str(point["osl"]),
    }
    meta.update(over)
    return meta


def eval_zip(
    results: dict[str, Any] | None, meta: dict[str, Any] | None, extra: dict[str, str] | None = None
) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        if meta is not None:
            zf.writestr("meta_env.json", json.dumps(meta))
        if results is not None:
            zf.writestr("results_2026-12-01T09-00-00.000000.json", json.dumps(results, indent=2))
        zf.writestr("samples_gsm8k_2026-12-01T09-00-00.000000.jsonl", '{"doc_id": 0}\n')
        for name, text in (extra or {}).items():
            zf.writestr(name, text)
    return buf.getvalue()
