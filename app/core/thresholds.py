"""The benchmark repo's own accuracy gate: ``utils/evals/thresholds.yaml`` as its
``utils/evals/validate_scores.py`` applies it (pure: file text and scores in, verdicts out).

Read from InferenceX at 843c6254 (the script's rules, not its code):

- **The file**: a mapping ``default: {task: min}`` plus ``models: {model-prefix: {task: min}}``;
  a mapping with neither key is the legacy flat form (the whole mapping is ``default``).
- **The model**: ``meta_env.json``'s ``infmax_model_prefix`` (the master config's
  ``model-prefix``: ``dsv4``, ``glm5.1`` ...), looked up **exactly** in ``models`` (``glm5`` does
  not cover ``glm5.1``); ``unknown`` or absent means no model.
- **The threshold of a task**, most specific first: ``models[prefix][task]``, then
  ``default[task]``, then the script's ``--min-score`` fallback, 0.85, which the repo's workflows
  never override (``benchmark-tmpl.yml`` runs the script with no arguments). A task the file does
  not name is therefore still gated, at 0.85, and the report says that the number is the script's
  fallback, not a threshold the repo chose.
- **Which scores**: the metrics the result file's ``configs.<task>.metric_list`` declares (every
  filter of each), else ``exact_match``; standard errors are never gated.
- **The comparison**: ``score < min`` fails; equal passes. An effective sample count of 0 fails.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from app.core.recipes.yamlutil import SafeLoader, yaml_error_summary

THRESHOLDS_PATH = "utils/evals/thresholds.yaml"
FALLBACK_MIN_SCORE = 0.85  # validate_scores.py --min-score default
DEFAULT_METRIC = "exact_match"  # what the script gates when the task declares no metric_list
MAX_THRESHOLDS_BYTES = 256 * 1024

PASS = "pass"
FAIL = "fail"
NOT_GATED = "not gated"  # a metric the script does not check (not declared for the task)

SOURCE_MODEL = "model"
SOURCE_DEFAULT = "default"
SOURCE_FALLBACK = "fallback"


class ThresholdsError(ValueError):
    """The thresholds file cannot be used; the message says what was wrong and how to fix it."""


@dataclass(frozen=True)
class Thresholds:
    """A parsed thresholds file: per-task defaults and per-model overrides."""

    default: Mapping[str, float]
    models: Mapping[str, Mapping[str, float]]
    path: str = THRESHOLDS_PATH
    ref: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "ref": self.ref,
            "default": dict(self.default),
            "models": {m: dict(t) for m, t in self.models.items()},
        }


@dataclass(frozen=True)
class Threshold:
    minimum: float
    source: str  # model | default | fallback
    model_prefix: str | None

    @property
    def where(self) -> str:
        """``models.dsv4.gsm8k`` / ``default.gsm8k`` / the fallback, as a reader finds it."""
        if self.source == SOURCE_MODEL:
            return f"models.{self.model_prefix}"
        if self.source == SOURCE_DEFAULT:
            return "default"
        return "validate_scores.py --min-score fallback"


@dataclass(frozen=True)
class ThresholdVerdict:
    task: str
    metric: str
    filter: str
    conc: int | None
    score: float
    threshold: Threshold | None
    verdict: str  # pass | fail | not gated
    why: str


def _number(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ThresholdsError(
            f"{where} is {value!r}; a threshold is a number such as 0.9 (validate_scores.py compares "
            "scores with it)"
        )
    return float(value)


def _task_map(where: str, value: Any) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ThresholdsError(f"{where} is a {type(value).__name__}; it must map task names to numbers")
    return {str(task): _number(f"{where}.{task}", v) for task, v in value.items()}


def parse_thresholds(text: str, *, path: str = THRESHOLDS_PATH, ref: str | None = None) -> Thresholds:
    """The thresholds file, normalised to ``default`` + ``models`` (the legacy flat form accepted)."""
    if len(text.encode("utf-8", "replace")) > MAX_THRESHOLDS_BYTES:
        raise ThresholdsError(f"{path} is over {MAX_THRESHOLDS_BYTES} bytes; it is not a thresholds file")
    try:
        data = yaml.load(text, Loader=SafeLoader)
    except yaml.YAMLError as exc:
        raise ThresholdsError(f"{path} is not valid YAML: {yaml_error_summary(exc)}") from exc
    if not isinstance(data, dict):
        raise ThresholdsError(
            f"{path} must be a mapping (`default:` per task, `models:` per model prefix), "
            f"not a {type(data).__name__}"
        )
    if "default" not in data and "models" not in data:
        return Thresholds(_task_map(path, data), {}, path, ref)
    models_raw = data.get("models")
    if models_raw is not None and not isinstance(models_raw, dict):
        raise ThresholdsError(f"{path}: `models` must map model prefixes to task thresholds")
    models = {str(m): _task_map(f"{path}: models.{m}", t) for m, t in (models_raw or {}).items()}
    return Thresholds(_task_map(f"{path}: default", data.get("default")), models, path, ref)


def thresholds_from_json(data: Mapping[str, Any]) -> Thresholds:
    """A stored ``Thresholds.as_json()`` back (what a sweep recorded when it was planned)."""
    models = data.get("models") or {}
    return Thresholds(
        {str(k): float(v) for k, v in (data.get("default") or {}).items()},
        {str(m): {str(k): float(v) for k, v in (t or {}).items()} for m, t in models.items()},
        str(data.get("path") or THRESHOLDS_PATH),
        data.get("ref"),
    )


def model_prefix(value: object) -> str | None:
    """The model prefix as the script reads it: ``unknown`` and blanks are no model."""
    text = str(value).strip() if value is not None else ""
    return text if text and text != "unknown" else None


def resolve(thresholds: Thresholds, prefix: str | None, task: str) -> Threshold:
    """The minimum for ``task``: the model's own, the task default, else the script's fallback."""
    own = thresholds.models.get(prefix) if prefix else None
    if own is not None and task in own:
        return Threshold(own[task], SOURCE_MODEL, prefix)
    if task in thresholds.default:
        return Threshold(thresholds.default[task], SOURCE_DEFAULT, prefix)
    return Threshold(FALLBACK_MIN_SCORE, SOURCE_FALLBACK, prefix)


def is_gated(metric: str, filt: str, declared: Sequence[str] | None) -> bool:
    """Whether the script checks ``<metric>,<filter>`` (declared metrics, else exact_match)."""
    names = tuple(declared) if declared else (DEFAULT_METRIC,)
    label = f"{metric},{filt}"
    return metric in names and "stderr" not in label


def judge(
    scores: Iterable[Any],
    thresholds: Thresholds,
    prefix: str | None,
    declared: Mapping[str, Sequence[str]] | None = None,
) -> list[ThresholdVerdict]:
    """One verdict per score (``task``, ``metric``, ``filter``, ``score``, ``n``, optional ``conc``
    and ``gated``: a stored row says whether the script gates it; else ``declared`` or exact_match)."""
    out = []
    for s in scores:
        task, metric, filt = str(s.task), str(s.metric), str(s.filter)
        conc = getattr(s, "conc", None)
        gated = getattr(s, "gated", None)
        if gated is None:
            gated = is_gated(metric, filt, (declared or {}).get(task))
        if not gated:
            out.append(
                ThresholdVerdict(
                    task,
                    metric,
                    filt,
                    conc,
                    float(s.score),
                    None,
                    NOT_GATED,
                    f"validate_scores.py does not check {metric} for {task}",
                )
            )
            continue
        limit = resolve(thresholds, prefix, task)
        n = getattr(s, "n", None)
        if n is not None and n <= 0:
            verdict, why = FAIL, f"effective sample count {n}: validate_scores.py fails the task"
        elif float(s.score) < limit.minimum:
            verdict, why = FAIL, f"{float(s.score):.4f} < {limit.minimum:g} ({limit.where})"
        else:
            verdict, why = PASS, f"{float(s.score):.4f} >= {limit.minimum:g} ({limit.where})"
        out.append(ThresholdVerdict(task, metric, filt, conc, float(s.score), limit, verdict, why))
    return out


def task_outcomes(verdicts: Sequence[ThresholdVerdict]) -> dict[str, ThresholdVerdict]:
    """Per task, the verdict that decides it: the first failing score, else the lowest passing one."""
    out: dict[str, ThresholdVerdict] = {}
    for v in verdicts:
        if v.verdict == NOT_GATED:
            continue
        cur = out.get(v.task)
        first_fail = v.verdict == FAIL and (cur is None or cur.verdict != FAIL)
        lower_pass = v.verdict == PASS and (cur is None or (cur.verdict == PASS and v.score < cur.score))
        if first_fail or lower_pass:
            out[v.task] = v
    return out


def outcome_text(v: ThresholdVerdict) -> str:
    """``threshold 0.9 (default): pass`` — with the fallback said, never passed off as the repo's."""
    assert v.threshold is not None
    t = v.threshold
    if t.source == SOURCE_FALLBACK:
        where = (
            f"no threshold for this task in {THRESHOLDS_PATH}; validate_scores.py's --min-score "
            f"fallback {t.minimum:g} applies"
        )
    else:
        where = f"threshold {t.minimum:g} ({t.where}.{v.task})"
    return f"{where}: **{v.verdict}**" + (f" — {v.why}" if v.verdict == FAIL else "")


def gate_summary(outcomes: Mapping[str, ThresholdVerdict]) -> str | None:
    """``repo threshold: fail on gpqa, pass on gsm8k`` (None without a gated task)."""
    if not outcomes:
        return None
    failed = [t for t, v in outcomes.items() if v.verdict == FAIL]
    passed = [t for t, v in outcomes.items() if v.verdict != FAIL]
    parts = ([f"fail on {', '.join(failed)}"] if failed else []) + (
        [f"pass on {', '.join(passed)}"] if passed else []
    )
    return f"repo threshold: {', '.join(parts)}"
