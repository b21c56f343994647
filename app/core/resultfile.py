"""Result files of a benchmark run, parsed and normalised (pure: bytes in, values out).

``parse_result`` turns either result schema into a ``ParsedResult``:

- benchmark_serving's raw form: ``{mean,median,std,p99}_{ttft,tpot,itl,e2el}_ms``, throughputs in
  tok/s, ``max_concurrency`` (also the InferenceX fork with its ``"request_goodput:"`` typo);
- the aggregated form: the same latencies in seconds without ``_ms`` (``median_tpot``), optional
  ``*_intvty`` (tok/s/user) and ``tput_per_gpu``.

Keys are normalized before lookup (case, spaces, dashes, trailing colons), unknown keys are
ignored, and a value that is present but not a finite non-negative JSON number (text such as
``"64"`` and booleans included) fails the file with a reason naming the file and the field.
``point_identity`` reads the point a job measures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from app.core import safejson

RESULT_MAX_DEPTH = 16  # result files are flat records (depth 1-2); deeper is not a result file
MAX_COUNT = 2**31 - 1  # counts (conc, completed) are stored in 32-bit integer columns
MAX_TP = 1024


class ResultFileError(ValueError):
    """A result file cannot be understood; the message names the file and the field."""

    def __init__(self, file_name: str, field_name: str, problem: str) -> None:
        super().__init__(f"{file_name}: field {field_name!r}: {problem}")
        self.file_name = file_name
        self.field_name = field_name


@dataclass
class ParsedResult:
    schema: str  # "raw" | "aggregated"
    conc: int | None
    mean_tpot_ms: float | None = None
    median_tpot_ms: float | None = None
    p99_tpot_ms: float | None = None
    std_tpot_ms: float | None = None
    mean_ttft_ms: float | None = None
    median_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    mean_itl_ms: float | None = None
    median_itl_ms: float | None = None
    p99_itl_ms: float | None = None
    mean_e2el_ms: float | None = None
    median_e2el_ms: float | None = None
    p99_e2el_ms: float | None = None
    output_tput: float | None = None
    total_tput: float | None = None
    tput_per_gpu: float | None = None
    interactivity: float | None = None
    completed: int | None = None
    duration_s: float | None = None
    tp: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def metrics(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("extra")
        return data


_LAT_METRICS = ("tpot", "ttft", "itl", "e2el")
_STATS = ("mean", "median", "p99", "std")
_CONC_KEYS = ("max_concurrency", "conc", "concurrency", "max_concurrent_requests")
_OUTPUT_KEYS = ("output_throughput", "output_tput", "output_token_throughput")
_TOTAL_KEYS = ("total_token_throughput", "total_tput", "tput", "total_throughput")
_INPUT_KEYS = ("input_throughput", "input_tput")


def _norm_key(key: str) -> str:
    # "request_goodput:" (a typo in the script that writes it), "Mean TPOT (ms)", "p99-tpot-ms" ...
    k = key.strip().rstrip(":").strip().lower()
    for ch in (" ", "-", "."):
        k = k.replace(ch, "_")
    k = k.replace("(ms)", "ms").replace("(s)", "s")
    while "__" in k:
        k = k.replace("__", "_")
    return k.strip("_")


def _number(file_name: str, key: str, value: Any) -> float | None:
    """A JSON number, finite and non-negative; anything else fails the file.

    Text is refused however numeric it looks (``"64"``: the writer of that file is not the
    benchmark script, whose numbers are JSON numbers), and so are ``true``/``false``, which
    Python would take as the integers 1 and 0.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ResultFileError(file_name, key, f"expected a number, got {_kind(value)}")
    try:
        f = float(value)
    except OverflowError:
        raise ResultFileError(file_name, key, "the number is too large to be a measurement") from None
    if not math.isfinite(f) or f < 0:
        raise ResultFileError(file_name, key, f"expected a finite non-negative number, got {value!r}")
    return f


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the text {value[:40]!r} (a number is written without quotes)"
    if isinstance(value, dict):
        return "an object"
    return "a list" if isinstance(value, list) else type(value).__name__


_Keys = dict[str, tuple[str, Any]]  # normalized key -> (the file's own key, its value)


def _document(body: bytes | str, file_name: str) -> _Keys:
    """The file's top-level record, keyed by normalized key (the first spelling of a key wins)."""
    try:
        # Limits first: a 400-digit integer or 1,000 levels of nesting is an attack, not a result.
        data = safejson.loads(
            body, max_depth=RESULT_MAX_DEPTH, max_int_digits=safejson.MAX_INT_DIGITS, allow_nan=True
        )
    except safejson.JSONLimitError as exc:
        raise ResultFileError(file_name, "<document>", f"refused: {exc}") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise ResultFileError(file_name, "<document>", f"not valid JSON ({exc})") from exc
    if isinstance(data, list) and len(data) == 1 and isinstance(data[0], dict):
        data = data[0]  # aggregated files are sometimes a one-record list
    if not isinstance(data, dict):
        raise ResultFileError(file_name, "<document>", f"expected a JSON object, got {type(data).__name__}")
    keys: _Keys = {}
    for raw_key, value in data.items():
        if isinstance(raw_key, str):
            keys.setdefault(_norm_key(raw_key), (raw_key, value))
    return keys


class _Reader:
    """Numbers of one result file by normalized key, failing the file on a bad value."""

    def __init__(self, keys: _Keys, file_name: str) -> None:
        self.keys, self.file_name = keys, file_name

    def num(self, *names: str) -> float | None:
        for name in names:
            if name in self.keys:
                original, value = self.keys[name]
                got = _number(self.file_name, original, value)
                if got is not None:
                    return got
        return None


def _latencies(r: _Reader, out: ParsedResult) -> None:
    """Every ``<stat>_<metric>_ms`` of ``out`` from the file (seconds converted in the aggregated form)."""
    for metric in _LAT_METRICS:
        for stat_name in _STATS:
            if out.schema == "raw":
                value = r.num(f"{stat_name}_{metric}_ms")
            else:
                seconds = r.num(f"{stat_name}_{metric}")
                value = seconds * 1000.0 if seconds is not None else None
            setattr(out, f"{stat_name}_{metric}_ms", value)
    if out.mean_tpot_ms is None and out.median_tpot_ms is None:
        wanted = "mean_tpot_ms" if out.schema == "raw" else "mean_tpot"
        raise ResultFileError(r.file_name, wanted, "no TPOT value (neither mean nor median is present)")


def _shape(r: _Reader, out: ParsedResult, tp: int | None) -> None:
    """Concurrency and tensor-parallel size: whole numbers in range, or the file fails."""
    conc = r.num(*_CONC_KEYS)
    if conc is not None:
        if conc != int(conc) or conc < 1 or conc > MAX_COUNT:
            raise ResultFileError(
                r.file_name,
                r.keys[next(k for k in _CONC_KEYS if k in r.keys)][0],
                f"expected a positive integer concurrency, got {conc}",
            )
        out.conc = int(conc)
    file_tp = r.num("tp", "tensor_parallel_size")
    if file_tp is not None and (file_tp != int(file_tp) or not 1 <= file_tp <= MAX_TP):
        raise ResultFileError(
            r.file_name, "tp", f"expected a tensor-parallel size from 1 to {MAX_TP}, got {file_tp}"
        )
    out.tp = int(file_tp) if file_tp is not None else tp


def _throughputs(r: _Reader, out: ParsedResult, gpus: int | None) -> None:
    """Throughputs, per GPU (derived from ``gpus`` or tp when absent) and interactivity."""
    out.output_tput = r.num(*_OUTPUT_KEYS)
    out.total_tput = r.num(*_TOTAL_KEYS)
    if out.total_tput is None:
        inp = r.num(*_INPUT_KEYS)
        if inp is not None and out.output_tput is not None:
            out.total_tput = inp + out.output_tput
    out.tput_per_gpu = r.num("tput_per_gpu", "total_tput_per_gpu")
    n_gpus = gpus or out.tp
    if out.tput_per_gpu is None and out.total_tput is not None and n_gpus:
        out.tput_per_gpu = out.total_tput / n_gpus
    out.interactivity = r.num("mean_intvty", "intvty", "interactivity")
    if out.interactivity is None:
        base = out.mean_tpot_ms if out.mean_tpot_ms is not None else out.median_tpot_ms
        out.interactivity = 1000.0 / base if base else None


def parse_result(
    body: bytes | str, file_name: str, *, tp: int | None = None, gpus: int | None = None
) -> ParsedResult:
    """Parse one result file of either schema; ``gpus`` (tp*pp*pcp) derives throughput per GPU."""
    keys = _document(body, file_name)
    has_ms = any(f"{s}_{m}_ms" in keys for s in _STATS for m in _LAT_METRICS)
    has_s = any(f"{s}_{m}" in keys for s in _STATS for m in _LAT_METRICS)
    if not has_ms and not has_s:
        raise ResultFileError(
            file_name,
            "mean_tpot_ms",
            "no latency fields found (expected benchmark_serving keys like mean_tpot_ms, "
            "or aggregated keys in seconds like median_tpot)",
        )
    r = _Reader(keys, file_name)
    out = ParsedResult(schema="raw" if has_ms else "aggregated", conc=None)
    _latencies(r, out)
    _shape(r, out, tp)
    _throughputs(r, out, gpus)
    completed = r.num("completed")
    if completed is not None and completed > MAX_COUNT:
        raise ResultFileError(file_name, "completed", f"{completed:g} requests is more than any run makes")
    if completed is not None and completed != int(completed):
        raise ResultFileError(
            file_name, "completed", f"expected a whole number of requests, got {completed:g}"
        )
    out.completed = int(completed) if completed is not None else None
    out.duration_s = r.num("duration")
    for name in ("model_id", "backend", "date", "framework", "hw", "precision"):
        if name in keys and isinstance(keys[name][1], str | int | float):
            out.extra[name] = keys[name][1]
    return out


# ---------------------------------------------------------------------------------------- points


def point_identity(job: Any) -> dict[str, Any]:
    """The point a job measures, as the plan's JSON keys (``result-name``, ``conc``, ``tp`` ...).

    Jobs carry their point either as a dict (``job.point``) or as columns; both are read.
    """
    point: dict[str, Any] = {}
    raw = getattr(job, "point", None)
    if isinstance(raw, Mapping):
        point.update(raw)
    elif raw is not None and hasattr(raw, "__dict__"):
        point.update({k.replace("_", "-"): v for k, v in vars(raw).items()})
    for attr in (
        "result_name",
        "config_key",
        "conc",
        "tp",
        "pp",
        "ep",
        "isl",
        "osl",
        "framework",
        "precision",
        "runner",
        "model",
        "image",
        "fingerprint",
    ):
        value = getattr(job, attr, None)
        if value is not None:
            point.setdefault(attr.replace("_", "-"), value)
    return point


def as_int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
