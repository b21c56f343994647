"""Eval results: lm-evaluation-harness result files and a job's eval artifact (pure: bytes in, typed out).

What a job's eval artifact holds (InferenceX `benchmark-tmpl.yml`, "Upload eval results"; its
`utils/evals/EVALS.md`): ``meta_env.json`` (what ran: ``framework``, ``precision``, ``tp``,
``conc``, ``ep``, ``dp_attention``, ``spec_decoding``, ``model``, ``infmax_model_prefix``, ``hw``,
``isl``, ``osl``, written by the benchmark script) and the harness's ``results*.json`` (a batched
multi-conc eval stages one per point with a ``_conc<N>`` suffix), plus ``sample*.jsonl`` and agent
files that are not read here.

An lm-eval result file (real ones in tests/fixtures/lm-eval/): ``results.<task>`` maps
``<metric>,<filter>`` to a score and ``<metric>_stderr,<filter>`` to its standard error (the text
``"N/A"`` when the harness could not compute one); ``n-samples.<task>.effective`` is the number of
samples scored (``original`` the split's size); ``config.limit`` the ``--limit`` given (null for the
whole split); ``n-shot.<task>`` the few-shot count; ``lm_eval_version`` the harness version (newer
versions only). GSM8K reports ``exact_match,strict-match`` and ``exact_match,flexible-extract``.

Every refusal names the file and the field and says what was expected; a caller stores nothing from
an artifact that fails (parse everything first, then write).
"""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.core import safejson
from app.core.thresholds import is_gated

MAX_TASKS = 500  # a results file with more tasks than this is not one eval job's output
_CONC_SUFFIX = re.compile(r"_conc(\d+)\.json$")


class EvalFileError(ValueError):
    """An eval file cannot be used; the message names the file and the field and says why."""

    def __init__(self, file_name: str, field_name: str, problem: str) -> None:
        super().__init__(f"{file_name}: field {field_name!r}: {problem}")
        self.file_name = file_name
        self.field_name = field_name


@dataclass(frozen=True)
class EvalScore:
    task: str
    metric: str  # exact_match, acc ...
    filter: str  # strict-match, flexible-extract, none ...
    score: float
    stderr: float | None  # None: the file has none (or "N/A")
    n: int | None  # effective samples scored
    n_original: int | None
    limit: float | None  # config.limit (None: the whole split)
    num_fewshot: int | None
    # the repo's validate_scores.py checks this score against its threshold: the metric is one the
    # task's ``configs.<task>.metric_list`` declares, or exact_match when it declares none
    gated: bool = True

    @property
    def label(self) -> str:
        return f"{self.metric},{self.filter}"


@dataclass(frozen=True)
class EvalFile:
    file_name: str
    lm_eval_version: str | None
    model: str | None
    limit: float | None
    scores: tuple[EvalScore, ...]

    def tasks(self) -> list[str]:
        return list(dict.fromkeys(s.task for s in self.scores))


@dataclass(frozen=True)
class MetaEnv:
    framework: str | None
    precision: str | None
    model: str | None
    model_prefix: str | None
    hw: str | None
    tp: int | None
    ep: int | None
    conc: int | None
    isl: int | None
    osl: int | None
    spec_decoding: str | None
    dp_attention: bool | None


@dataclass(frozen=True)
class EvalArtifact:
    meta: MetaEnv
    result: EvalFile


def _load(body: bytes | str, file_name: str) -> dict[str, Any]:
    try:
        # The shared hostile-JSON limits (nesting, giant integers); the harness's json.dump may
        # write NaN, which parses here and is then refused field by field.
        data = safejson.loads(body, max_int_digits=safejson.MAX_INT_DIGITS, allow_nan=True)
    except safejson.JSONLimitError as exc:
        raise EvalFileError(file_name, "<document>", f"refused: {exc}") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise EvalFileError(file_name, "<document>", f"not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise EvalFileError(file_name, "<document>", f"expected a JSON object, got {type(data).__name__}")
    return data


def _finite(file_name: str, field_name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise EvalFileError(file_name, field_name, f"expected a finite number, got {value!r}")
    return float(value)


def _count(file_name: str, field_name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise EvalFileError(file_name, field_name, f"expected a non-negative integer, got {value!r}")
    return value


def _model_of(data: Mapping[str, Any]) -> str | None:
    config: Mapping[str, Any] = data["config"] if isinstance(data.get("config"), dict) else {}
    args = config.get("model_args")
    if isinstance(args, dict):
        for key in ("pretrained", "model"):
            if isinstance(args.get(key), str) and args[key]:
                return str(args[key])
    elif isinstance(args, str):
        for part in args.split(","):
            name, _, value = part.partition("=")
            if name.strip() in ("pretrained", "model") and value.strip():
                return value.strip()
    top = data.get("model_name")
    return top if isinstance(top, str) and top else None


def _metric_values(
    file_name: str, where: str, metrics: Mapping[str, Any]
) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], float | None]]:
    """A task's ``<metric>,<filter>`` scores and their standard errors (None: "N/A")."""
    values: dict[tuple[str, str], float] = {}
    errors: dict[tuple[str, str], float | None] = {}
    for key, value in metrics.items():
        if not isinstance(key, str) or "," not in key:
            continue  # "alias", "name", "sample_len" ...
        metric, _, filt = key.partition(",")
        if metric.endswith("_stderr"):
            base = metric.removesuffix("_stderr")
            if value is None or value == "N/A":
                errors[(base, filt)] = None
                continue
            stderr = _finite(file_name, f"{where}.{key}", value)
            if stderr < 0:
                raise EvalFileError(
                    file_name, f"{where}.{key}", f"a standard error cannot be negative ({value!r})"
                )
            errors[(base, filt)] = stderr
            continue
        values[(metric, filt)] = _finite(file_name, f"{where}.{key}", value)
    return values, errors


def declared_metrics(task_config: Any) -> tuple[str, ...]:
    """The metric names a task's harness config declares (``metric_list[].metric``), in order."""
    items = task_config.get("metric_list") if isinstance(task_config, dict) else None
    if not isinstance(items, list):
        return ()
    return tuple(
        str(i["metric"])
        for i in items
        if isinstance(i, dict) and isinstance(i.get("metric"), str) and i["metric"]
    )


def parse_lm_eval(body: bytes | str, file_name: str) -> EvalFile:
    """One lm-evaluation-harness result file; refused with the field when anything is malformed."""
    data = _load(body, file_name)
    results = data.get("results")
    if not isinstance(results, dict) or not results:
        raise EvalFileError(
            file_name, "results", "missing or empty; an lm-eval result file maps each task to its metrics"
        )
    if len(results) > MAX_TASKS:
        raise EvalFileError(file_name, "results", f"{len(results)} tasks, over the limit of {MAX_TASKS}")
    config = data.get("config")
    if config is not None and not isinstance(config, dict):
        raise EvalFileError(file_name, "config", f"expected an object, got {type(config).__name__}")
    limit_raw = (config or {}).get("limit")
    limit = None if limit_raw is None else _finite(file_name, "config.limit", limit_raw)
    if limit is not None and limit < 0:
        raise EvalFileError(file_name, "config.limit", f"must not be negative, got {limit_raw!r}")
    samples: dict[str, Any] = data["n-samples"] if isinstance(data.get("n-samples"), dict) else {}
    shots: dict[str, Any] = data["n-shot"] if isinstance(data.get("n-shot"), dict) else {}
    version = data.get("lm_eval_version")
    if version is not None and not isinstance(version, str):
        raise EvalFileError(file_name, "lm_eval_version", f"expected text, got {version!r}")
    scores: list[EvalScore] = []
    configs: dict[str, Any] = data["configs"] if isinstance(data.get("configs"), dict) else {}
    for task, metrics in results.items():
        where = f"results.{task}"
        if not isinstance(metrics, dict):
            raise EvalFileError(
                file_name, where, f"expected an object of metrics, got {type(metrics).__name__}"
            )
        counts: dict[str, Any] = samples[task] if isinstance(samples.get(task), dict) else {}
        n = _count(file_name, f"n-samples.{task}.effective", counts.get("effective"))
        n_original = _count(file_name, f"n-samples.{task}.original", counts.get("original"))
        if n is not None and limit is not None and limit >= 1 and n > limit:
            raise EvalFileError(
                file_name,
                f"n-samples.{task}.effective",
                f"{n} samples scored but config.limit is {limit:g}: the file contradicts itself",
            )
        declared = declared_metrics(configs.get(task))
        fewshot = shots.get(task)
        num_fewshot = fewshot if isinstance(fewshot, int) and not isinstance(fewshot, bool) else None
        values, errors = _metric_values(file_name, where, metrics)
        for (metric, filt), score in values.items():
            scores.append(
                EvalScore(
                    task=str(task),
                    metric=metric,
                    filter=filt,
                    score=score,
                    stderr=errors.get((metric, filt)),
                    n=n,
                    n_original=n_original,
                    limit=limit,
                    num_fewshot=num_fewshot,
                    gated=is_gated(metric, filt, declared),
                )
            )
    if not scores:
        raise EvalFileError(
            file_name, "results", "no `<metric>,<filter>` score in any task (e.g. `exact_match,strict-match`)"
        )
    return EvalFile(file_name, version, _model_of(data), limit, tuple(scores))


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return None if text in ("", "unknown") else text


def _int_field(file_name: str, name: str, value: Any) -> int | None:
    if value is None or value == "" or value == "unknown":
        return None
    if isinstance(value, bool):
        raise EvalFileError(file_name, name, f"expected an integer, got {value!r}")
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():  # not "١٢"
        return int(value.strip())  # the script writes isl/osl as strings
    if isinstance(value, int):
        return value
    raise EvalFileError(file_name, name, f"expected an integer, got {value!r}")


def parse_meta_env(body: bytes | str, file_name: str = "meta_env.json") -> MetaEnv:
    data = _load(body, file_name)
    dpa = data.get("dp_attention")
    if dpa is not None and not isinstance(dpa, bool):
        raise EvalFileError(file_name, "dp_attention", f"expected true or false, got {dpa!r}")
    return MetaEnv(
        framework=_text(data.get("framework")),
        precision=_text(data.get("precision")),
        model=_text(data.get("model")),
        model_prefix=_text(data.get("infmax_model_prefix")),
        hw=_text(data.get("hw")),
        tp=_int_field(file_name, "tp", data.get("tp")),
        ep=_int_field(file_name, "ep", data.get("ep")),
        conc=_int_field(file_name, "conc", data.get("conc")),
        isl=_int_field(file_name, "isl", data.get("isl")),
        osl=_int_field(file_name, "osl", data.get("osl")),
        spec_decoding=_text(data.get("spec_decoding")),
        dp_attention=dpa,
    )


def meta_mismatches(meta: MetaEnv, point: Mapping[str, Any]) -> list[str]:
    """What ``meta_env.json`` says ran that differs from the job's point (empty: it is that point)."""
    checks = (
        ("framework", meta.framework, point.get("framework")),
        ("precision", meta.precision, point.get("precision")),
        ("infmax_model_prefix", meta.model_prefix, point.get("model-prefix")),
        ("model", meta.model, point.get("model")),
        ("tp", meta.tp, point.get("tp")),
        ("ep", meta.ep, point.get("ep")),
        ("conc", meta.conc, point.get("eval-conc", point.get("conc"))),
        ("isl", meta.isl, point.get("isl")),
        ("osl", meta.osl, point.get("osl")),
        ("spec_decoding", meta.spec_decoding, point.get("spec-decoding")),
    )
    out = []
    for name, got, want in checks:
        if got is None or want is None or isinstance(want, list | dict):
            continue  # not recorded on one side: nothing to compare
        if str(got).lower() != str(want).lower():
            out.append(f"{name} is {got!r} but the job's point has {want!r}")
    return out


def results_member(members: Mapping[str, bytes], conc: int | None) -> tuple[str, bytes]:
    files = {n: b for n, b in members.items() if posixpath.basename(n).startswith("results")}
    if conc is not None:
        own = [n for n in files if (m := _CONC_SUFFIX.search(n)) and int(m.group(1)) == conc]
        if len(own) == 1:
            return own[0], files[own[0]]
    unsuffixed = [n for n in files if not _CONC_SUFFIX.search(n)]
    if len(unsuffixed) == 1 and len(files) == 1:
        return unsuffixed[0], files[unsuffixed[0]]
    held = ", ".join(sorted(members)) or "nothing"
    if not files:
        raise EvalFileError(
            "<artifact>", "results*.json", f"no lm-eval result file in the eval artifact (it holds: {held})"
        )
    raise EvalFileError(
        "<artifact>",
        "results*.json",
        f"{len(files)} result files ({', '.join(sorted(files))}) and none is this point's "
        f"(expected one file, or one ending _conc{conc}.json)",
    )


def parse_eval_artifact(members: Mapping[str, bytes], point: Mapping[str, Any]) -> EvalArtifact:
    """A job's eval artifact (its JSON members, from ``results.safe_json_members``) for ``point``.

    Refused, with the file and field, when ``meta_env.json`` is missing or malformed or describes
    another point, or when the results file is missing, ambiguous or malformed.
    """
    metas = [n for n in members if posixpath.basename(n) == "meta_env.json"]
    if len(metas) != 1:
        held = ", ".join(sorted(members)) or "nothing"
        problem = "missing" if not metas else f"{len(metas)} copies"
        raise EvalFileError(
            "meta_env.json", "<document>", f"{problem} in the eval artifact (it holds: {held})"
        )
    meta = parse_meta_env(members[metas[0]], metas[0])
    wrong = meta_mismatches(meta, point)
    if wrong:
        raise EvalFileError(
            metas[0], wrong[0].split(" ", 1)[0], "; ".join(wrong) + ": the artifact is another point's"
        )
    conc = point.get("eval-conc", point.get("conc"))
    name, body = results_member(members, conc if isinstance(conc, int) else None)
    return EvalArtifact(meta, parse_lm_eval(body, name))
