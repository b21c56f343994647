"""Performance model of amd/MiniMax-M3-MXFP4 on 4x MI355X, 8k1k, for simulated benchmark runs.

Pure and seeded. Calibrated to the published ATOM table (fixtures/references/atom-...yaml):
piecewise power law through the published points (linear in log-log space), extrapolated with
the end segments' slopes for conc 1, 2 and 128..512. vLLM is the ATOM curve times a factor that
is a few percent at low concurrency and shrinks to ~0.5% near conc 64, which reproduces the seed's
quoted vLLM figures (17.21 ms at 32, 25.13 ms at 64) within the noise.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# ATOM published points: conc -> (mean_ttft, p99_ttft, mean_tpot, p99_tpot)
_ATOM: dict[int, tuple[float, float, float, float]] = {
    4: (260.77, 791.33, 7.50, 8.33),
    8: (295.52, 1144.91, 8.78, 9.29),
    16: (383.04, 2200.03, 11.73, 12.84),
    32: (512.32, 4477.16, 16.74, 19.12),
    64: (831.98, 8566.28, 25.00, 29.83),
}
# vLLM relative slowdown vs ATOM by conc (interpolated in log2(conc), flat outside)
_VLLM_GAP: dict[int, float] = {1: 0.060, 4: 0.060, 8: 0.050, 16: 0.042, 32: 0.028, 64: 0.005, 512: 0.005}
# other frameworks: a flat factor so they still produce plausible numbers
_FRAMEWORK_FACTOR = {"atom": 0.0, "sglang": 0.03, "trt": 0.02}

NOISE_SIGMA = 0.003  # relative; keeps run-to-run noise well under 1%
STARTUP_SECONDS = 240.0  # model load + warmup before the benchmark starts


def _loglog(points: dict[int, float], conc: float) -> float:
    xs = sorted(points)
    lx = math.log(conc)
    if conc <= xs[0]:
        a, b = xs[0], xs[1]
    elif conc >= xs[-1]:
        a, b = xs[-2], xs[-1]
    else:
        a = max(x for x in xs if x <= conc)
        b = min(x for x in xs if x > conc)
    la, lb = math.log(a), math.log(b)
    ya, yb = math.log(points[a]), math.log(points[b])
    return math.exp(ya + (yb - ya) * (lx - la) / (lb - la))


def _lin_log2(points: dict[int, float], conc: float) -> float:
    xs = sorted(points)
    if conc <= xs[0]:
        return points[xs[0]]
    if conc >= xs[-1]:
        return points[xs[-1]]
    a = max(x for x in xs if x <= conc)
    b = min(x for x in xs if x > conc)
    t = (math.log2(conc) - math.log2(a)) / (math.log2(b) - math.log2(a))
    return points[a] + (points[b] - points[a]) * t


def framework_factor(framework: str, conc: int) -> float:
    if framework == "vllm":
        return 1.0 + _lin_log2(_VLLM_GAP, conc)
    return 1.0 + _FRAMEWORK_FACTOR.get(framework, 0.04)


def _rng(seed: int, *parts: object) -> random.Random:
    digest = hashlib.sha256(repr((seed,) + parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


@dataclass(frozen=True)
class PerfInput:
    framework: str
    conc: int
    isl: int = 8192
    osl: int = 1024
    tp: int = 4
    model: str = "amd/MiniMax-M3-MXFP4"
    image: str = ""
    # Injected slowdowns of this image (``slowdown``): "tpot" / "ttft" -> relative factor, e.g. 0.04.
    slowdown_by: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Regression:
    """A performance change injected at an upstream commit: images built from a commit that contains
    ``commit`` (and not ``fixed_by``) are ``factor`` slower in ``metric`` (tpot: decode, ttft: prefill)."""

    repo: str
    commit: str
    factor: float
    fixed_by: str | None = None
    metric: str = "tpot"


_NIGHTLY_SHA = re.compile(r":nightly-(?P<sha>[0-9a-f]{40})$")


def image_commit(image: str) -> str | None:
    """The upstream commit of a ``...:nightly-<40-hex>`` image, or None."""
    m = _NIGHTLY_SHA.search(image)
    return m.group("sha") if m else None


def slowdown(regressions: Sequence[Regression], contains: Callable[[str, str], bool]) -> dict[str, float]:
    """Sum of the active regressions per metric; ``contains(repo, commit)``: the image has the commit."""
    out: dict[str, float] = {}
    for reg in regressions:
        if contains(reg.repo, reg.commit) and not (reg.fixed_by and contains(reg.repo, reg.fixed_by)):
            out[reg.metric] = out.get(reg.metric, 0.0) + reg.factor
    return out


def expected_mean_tpot_ms(framework: str, conc: int) -> float:
    """The noise-free mean TPOT the model predicts."""
    return _loglog({c: v[2] for c, v in _ATOM.items()}, conc) * framework_factor(framework, conc)


def benchmark_result(p: PerfInput, seed: int, attempt: int = 0) -> dict[str, object]:
    """One benchmark_serving raw result (keys as in vllm-bench JSON, latencies in ms)."""
    if p.conc < 1:
        raise ValueError(f"concurrency must be >= 1, got {p.conc}")
    rng = _rng(seed, p.framework, p.conc, p.isl, p.osl, p.tp, p.model, p.image, attempt)

    def noisy(x: float, sigma: float = NOISE_SIGMA) -> float:
        return x * (1.0 + max(-3 * sigma, min(3 * sigma, rng.gauss(0.0, sigma))))

    f = framework_factor(p.framework, p.conc)
    # sequence-length scaling relative to the 8k1k calibration: prefill cost ~ isl, decode ~ weak
    ttft_scale = p.isl / 8192
    tpot_scale = 1.0 + 0.1 * (p.isl + p.osl - 9216) / 9216
    tp_scale = 4 / p.tp if p.tp else 1.0

    def curve(idx: int) -> float:
        return _loglog({c: v[idx] for c, v in _ATOM.items()}, p.conc)

    slow_tpot = 1.0 + p.slowdown_by.get("tpot", 0.0)
    slow_ttft = 1.0 + p.slowdown_by.get("ttft", 0.0)
    mean_tpot = noisy(curve(2) * f * tpot_scale * tp_scale**0.5 * slow_tpot)
    p99_tpot = noisy(curve(3) * f * tpot_scale * tp_scale**0.5 * slow_tpot, 0.006)
    median_tpot = noisy(mean_tpot * 0.995)
    mean_ttft = noisy(curve(0) * f * ttft_scale * tp_scale * slow_ttft, 0.01)
    p99_ttft = noisy(curve(1) * f * ttft_scale * tp_scale * slow_ttft, 0.02)
    median_ttft = noisy(mean_ttft * 0.8, 0.01)

    num_prompts = 10 * p.conc
    mean_out = 0.9 * p.osl  # random range ratio 0.8: lengths uniform in [0.8, 1.0] x osl
    mean_in = 0.9 * p.isl
    e2el = mean_ttft + mean_tpot * (mean_out - 1)
    duration_s = num_prompts / p.conc * e2el / 1000.0
    total_in = int(num_prompts * mean_in)
    total_out = int(num_prompts * mean_out)
    return {
        "date": "20260701-000000",
        "backend": p.framework,
        "model_id": p.model,
        "tokenizer_id": p.model,
        "best_of": 1,
        "num_prompts": num_prompts,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": p.conc,
        "duration": duration_s,
        "completed": num_prompts,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": num_prompts / duration_s,
        "output_throughput": total_out / duration_s,
        "total_token_throughput": (total_in + total_out) / duration_s,
        "mean_ttft_ms": mean_ttft,
        "median_ttft_ms": median_ttft,
        "std_ttft_ms": mean_ttft * 0.6,
        "p99_ttft_ms": p99_ttft,
        "mean_tpot_ms": mean_tpot,
        "median_tpot_ms": median_tpot,
        "std_tpot_ms": mean_tpot * 0.04,
        "p99_tpot_ms": p99_tpot,
        "mean_itl_ms": mean_tpot * 0.998,
        "median_itl_ms": median_tpot * 0.97,
        "std_itl_ms": mean_tpot * 0.25,
        "p99_itl_ms": p99_tpot * 2.4,
        "mean_e2el_ms": e2el,
        "median_e2el_ms": e2el * 0.99,
        "std_e2el_ms": e2el * 0.08,
        "p99_e2el_ms": e2el * 1.25,
    }


def job_seconds(result: dict[str, object]) -> float:
    """Simulated wall time of a benchmark job: startup plus the benchmark's own duration."""
    duration = result["duration"]
    assert isinstance(duration, float)
    return STARTUP_SECONDS + duration


# ------------------------------------------------------------------------------------- accuracy

# Configured GSM8K accuracy per engine (the probability that one question is answered right), by
# lm-eval filter. ATOM: its recipe's published 5-shot figures (fixtures/references/atom-...yaml);
# vLLM serves the same MXFP4 checkpoint, so the same true accuracy (the seed's 0.95 at limit 100
# is one draw of 100 around it). Other engines: slightly lower, still plausible.
ENGINE_ACCURACY: dict[str, dict[str, float]] = {
    "atom": {"flexible-extract": 0.9363, "strict-match": 0.9371},
    "vllm": {"flexible-extract": 0.9363, "strict-match": 0.9371},
}
DEFAULT_ACCURACY = {"flexible-extract": 0.93, "strict-match": 0.93}
GSM8K_TEST_SIZE = 1319  # the split lm-eval's gsm8k task scores


def eval_result(
    p: PerfInput,
    seed: int,
    attempt: int = 0,
    *,
    limit: int | None = None,
    accuracy: dict[str, float] | None = None,
    date: float = 1_780_000_000.0,
) -> dict[str, object]:
    """An lm-evaluation-harness result file (`results_<time>.json`) for GSM8K, 5-shot.

    Each of the ``n`` questions is answered right with the engine's configured probability (one
    draw per filter, strict-match never above flexible-extract), so the score is a binomial
    proportion and its stderr the harness's sample standard error, sqrt(p(1-p)/(n-1)).
    """
    rng = _rng(seed, "eval", p.framework, p.conc, p.tp, p.model, p.image, attempt, limit)
    n = min(limit, GSM8K_TEST_SIZE) if limit else GSM8K_TEST_SIZE
    probs = accuracy or ENGINE_ACCURACY.get(p.framework, DEFAULT_ACCURACY)
    flexible = [rng.random() < probs["flexible-extract"] for _ in range(n)]
    # strict needs the `#### N` format on top of the right number: a subset of the flexible hits
    strict_ratio = min(1.0, probs["strict-match"] / max(probs["flexible-extract"], 1e-9))
    strict = [hit and rng.random() < strict_ratio for hit in flexible]

    def stat(hits: list[bool]) -> tuple[float, float]:
        score = sum(hits) / n
        return score, math.sqrt(score * (1 - score) / (n - 1)) if n > 1 else 0.0

    s_score, s_err = stat(strict)
    f_score, f_err = stat(flexible)
    return {
        "results": {
            "gsm8k": {
                "alias": "gsm8k",
                "exact_match,strict-match": s_score,
                "exact_match_stderr,strict-match": s_err,
                "exact_match,flexible-extract": f_score,
                "exact_match_stderr,flexible-extract": f_err,
            }
        },
        "group_subtasks": {"gsm8k": []},
        "versions": {"gsm8k": 3.0},
        "n-shot": {"gsm8k": 5},
        "higher_is_better": {"gsm8k": {"exact_match": True}},
        "n-samples": {"gsm8k": {"original": GSM8K_TEST_SIZE, "effective": n}},
        "config": {
            "model": "local-chat-completions",
            "model_args": f"model={p.model},base_url=http://0.0.0.0:8888/v1/chat/completions",
            "batch_size": 1,
            "limit": float(limit) if limit else None,
            "bootstrap_iters": 100000,
            "gen_kwargs": {"temperature": 0.0},
        },
        "git_hash": None,
        "date": date,
        "lm_eval_version": "0.4.9.1",
        "model_source": "local-chat-completions",
        "model_name": p.model,
        "total_evaluation_time_seconds": str(60.0 + 0.5 * n),
    }


def eval_concs(point: dict[str, Any]) -> list[int]:
    """The concs an eval runs at: a multi-node row's `eval-conc` (one value, or under all-evals
    its whole list), else the highest of its concs; a single-node point's conc."""
    raw = point.get("eval-conc", point.get("conc"))
    values = raw if isinstance(raw, list) else [raw]
    if "eval-conc" not in point and isinstance(raw, list):
        values = [max(raw)]
    return [int(v) for v in values if v is not None]


def meta_env(point: dict[str, Any], runner_type: str) -> dict[str, object]:
    """`meta_env.json` as the benchmark script writes it (strings for isl/osl, as it does).

    A multi-node row has no single TP (EVALS.md): its workers' fields instead, and the eval's conc.
    """
    concs = eval_concs(point)
    env: dict[str, object] = {
        "framework": point.get("framework"),
        "precision": point.get("precision"),
        "spec_decoding": point.get("spec-decoding", "none"),
        "tp": point.get("tp"),
        "conc": concs[0] if len(concs) == 1 else " ".join(str(c) for c in concs),
        "ep": point.get("ep", 1),
        "dp_attention": bool(point.get("dp-attn", False)),
        "model": point.get("model"),
        "infmax_model_prefix": point.get("model-prefix"),
        "hw": runner_type,
        "isl": str(point.get("isl")),
        "osl": str(point.get("osl")),
    }
    if "prefill" in point:
        del env["tp"], env["ep"], env["dp_attention"]
        for role in ("prefill", "decode"):
            w = point[role]
            env |= {
                f"{role}_tp": w.get("tp"),
                f"{role}_ep": w.get("ep"),
                f"{role}_num_workers": w.get("num-worker"),
                f"{role}_dp_attention": bool(w.get("dp-attn", False)),
            }
    return env
