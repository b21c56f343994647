"""The repo's accuracy gate, over its real `utils/evals/thresholds.yaml` (843c6254), applied the way
its `utils/evals/validate_scores.py` applies it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.core.evals import parse_lm_eval
from app.core.thresholds import (
    FAIL,
    FALLBACK_MIN_SCORE,
    NOT_GATED,
    PASS,
    SOURCE_DEFAULT,
    SOURCE_FALLBACK,
    SOURCE_MODEL,
    ThresholdsError,
    judge,
    model_prefix,
    outcome_text,
    parse_thresholds,
    resolve,
    task_outcomes,
    thresholds_from_json,
)
from tests.evals_helpers import gsm8k_results

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REAL = (FIXTURES / "inferencex/evals/thresholds.yaml").read_text()


@dataclass
class Score:
    task: str
    score: float
    metric: str = "exact_match"
    filter: str = "flexible-extract"
    n: int | None = 100
    conc: int | None = None
    gated: bool | None = None


@pytest.mark.parametrize(
    ("prefix", "task", "minimum", "source"),
    [
        ("dsv4", "gsm8k", 0.91, SOURCE_MODEL),  # models.dsv4.gsm8k
        ("glm5", "gsm8k", 0.94, SOURCE_MODEL),
        ("glm5.1", "gsm8k", 0.93, SOURCE_MODEL),  # its own entry: no prefix matching with glm5
        ("glm5.2", "gsm8k", 0.90, SOURCE_DEFAULT),  # not glm5's 0.94: exact lookup only
        ("minimaxm2.5", "gsm8k", 0.92, SOURCE_MODEL),
        ("minimaxm3", "gsm8k", 0.90, SOURCE_DEFAULT),  # the seed's model: no override
        ("dsv4", "gpqa_diamond_cot_n_shot", 0.30, SOURCE_DEFAULT),  # the model overrides gsm8k only
        (None, "gsm8k", 0.90, SOURCE_DEFAULT),
        (None, "swebench_lite", 0.50, SOURCE_DEFAULT),
        ("dsv4", "aime26", FALLBACK_MIN_SCORE, SOURCE_FALLBACK),  # unknown task: --min-score 0.85
    ],
)
def test_the_threshold_of_a_task_most_specific_first(
    prefix: str | None, task: str, minimum: float, source: str
) -> None:
    got = resolve(parse_thresholds(REAL), prefix, task)
    assert (got.minimum, got.source) == (minimum, source)


@pytest.mark.parametrize(
    ("score", "n", "verdict"),
    [
        (0.95, 100, PASS),
        (0.90, 100, PASS),  # equal passes: the script fails only `score < min`
        (0.8999, 100, FAIL),
        (0.95, 0, FAIL),  # an effective sample count of 0 fails whatever the score
    ],
)
def test_the_comparison(score: float, n: int, verdict: str) -> None:
    [v] = judge([Score("gsm8k", score, n=n)], parse_thresholds(REAL), "minimaxm3")
    assert v.verdict == verdict


def test_only_the_metrics_the_script_checks_are_gated() -> None:
    gate = parse_thresholds(REAL)
    rows = [
        Score("gsm8k", 0.95),
        Score("gsm8k", 0.10, metric="acc", filter="none"),  # not exact_match, nothing declared
        Score("lambada", 0.10, metric="acc", filter="none", gated=True),  # declared (stored flag)
    ]
    verdicts = judge(rows, gate, None)
    assert [v.verdict for v in verdicts] == [PASS, NOT_GATED, FAIL]
    assert verdicts[2].threshold is not None and verdicts[2].threshold.source == SOURCE_FALLBACK


def test_a_results_files_declared_metric_list_decides_what_is_gated() -> None:
    data = gsm8k_results(0.95)
    data["configs"] = {"gsm8k": {"metric_list": [{"metric": "exact_match"}]}}
    declared = {s.label: s.gated for s in parse_lm_eval(json.dumps(data), "results.json").scores}
    assert declared == {"exact_match,strict-match": True, "exact_match,flexible-extract": True}
    real = (FIXTURES / "lm-eval/rwkv7-0.1B-g1.results_2025-03-11T00-18-59.369059.json").read_text()
    gated = {s.label: s.gated for s in parse_lm_eval(real, "results.json").scores}
    # lambada_openai declares perplexity and acc: both are checked (at the 0.85 fallback)
    assert gated == {"perplexity,none": True, "acc,none": True}


def test_the_task_outcome_is_its_worst_gated_score() -> None:
    rows = [Score("gsm8k", 0.95, filter="strict-match"), Score("gsm8k", 0.93), Score("gsm8k", 0.89, conc=64)]
    outcome = task_outcomes(judge(rows, parse_thresholds(REAL), "minimaxm3"))["gsm8k"]
    assert outcome.verdict == FAIL and outcome.conc == 64
    passing = task_outcomes(judge(rows[:2], parse_thresholds(REAL), "minimaxm3"))["gsm8k"]
    assert passing.verdict == PASS and passing.score == 0.93


def test_the_text_says_where_the_number_comes_from() -> None:
    gate = parse_thresholds(REAL)
    [own] = judge([Score("gsm8k", 0.95)], gate, "dsv4")
    assert outcome_text(own) == "threshold 0.91 (models.dsv4.gsm8k): **pass**"
    [fallback] = judge([Score("aime26", 0.95)], gate, "dsv4")
    assert "no threshold for this task in utils/evals/thresholds.yaml" in outcome_text(fallback)
    assert "--min-score fallback 0.85" in outcome_text(fallback)
    [failed] = judge([Score("gsm8k", 0.8)], gate, None)
    assert outcome_text(failed).startswith("threshold 0.9 (default.gsm8k): **fail** — 0.8000 < 0.9")


def test_the_legacy_flat_form_and_a_stored_copy() -> None:
    flat = parse_thresholds("gsm8k: 0.85\n")
    assert flat.default == {"gsm8k": 0.85} and flat.models == {}
    real = parse_thresholds(REAL, ref="843c6254")
    assert thresholds_from_json(json.loads(json.dumps(real.as_json()))) == real


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("- 1\n", "must be a mapping"),
        ("default: {gsm8k: high}\n", "default.gsm8k is 'high'; a threshold is a number"),
        ("default: {gsm8k: true}\n", "a threshold is a number"),
        ("models: [dsv4]\n", "`models` must map model prefixes"),
        ("default: [1\n", "not valid YAML"),
    ],
)
def test_a_bad_file_is_refused_with_what_to_fix(text: str, said: str) -> None:
    with pytest.raises(ThresholdsError, match=None) as err:
        parse_thresholds(text)
    assert said in str(err.value)


@pytest.mark.parametrize(("value", "want"), [("dsv4", "dsv4"), ("unknown", None), ("", None), (None, None)])
def test_model_prefix_as_the_script_reads_it(value: object, want: str | None) -> None:
    assert model_prefix(value) == want
