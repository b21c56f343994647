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
