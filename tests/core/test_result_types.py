"""Every number a result file gives is a JSON number: text (``"64"``), booleans (Python's ``True``
is the integer 1), lists and objects fail the file naming the field, like any wrong type; and the
same audit for the other files whose numbers the bot reads (references, an eval's meta_env)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.core.evals import EvalFileError, parse_meta_env
from app.core.references import ReferenceError, parse_reference
from app.core.resultfile import ResultFileError, parse_result

RAW = {"mean_tpot_ms": 10.0, "max_concurrency": 64}
AGGREGATED = {"median_tpot": 0.01, "conc": 64}
# (the document a field is read from, the field): every numeric field parse_result reads.
FIELDS = [
    (RAW, "max_concurrency"),
    (AGGREGATED, "conc"),
    (RAW, "tp"),
    (RAW, "tensor_parallel_size"),
    (RAW, "completed"),
    (RAW, "duration"),
    (RAW, "mean_tpot_ms"),
    (RAW, "p99_ttft_ms"),
    (AGGREGATED, "median_tpot"),
    (AGGREGATED, "mean_e2el"),
    (RAW, "output_throughput"),
    (RAW, "total_token_throughput"),
    (RAW, "input_throughput"),
    (AGGREGATED, "tput_per_gpu"),
    (AGGREGATED, "mean_intvty"),
]
WRONG = ["64", "64.0", " 8 ", True, False, [64], {"value": 64}]


@pytest.mark.parametrize(("base", "field"), FIELDS, ids=[f for _, f in FIELDS])
@pytest.mark.parametrize("value", WRONG, ids=[repr(v) for v in WRONG])
def test_a_number_of_the_wrong_type_fails_the_file_naming_the_field(
    base: dict[str, Any], field: str, value: Any
) -> None:
    with pytest.raises(ResultFileError) as info:
        parse_result(json.dumps({**base, field: value}), "r.json")
    assert info.value.field_name == field, str(info.value)
    assert "expected a number" in str(info.value)


@pytest.mark.parametrize(("base", "field"), FIELDS, ids=[f for _, f in FIELDS])
def test_the_same_field_as_a_json_number_is_read(base: dict[str, Any], field: str) -> None:
    # The control: each field above is one the parser reads, and 8 is a good value for it.
    parse_result(json.dumps({**base, field: 8}), "r.json")


def test_the_string_64_was_the_reported_case() -> None:
    with pytest.raises(ResultFileError) as info:
        parse_result(b'{"mean_tpot_ms": 10.0, "max_concurrency": "64"}', "bmk.json")
    assert str(info.value) == (
        "bmk.json: field 'max_concurrency': expected a number, got the text '64' "
        "(a number is written without quotes)"
    )
    assert parse_result(b'{"mean_tpot_ms": 10.0, "max_concurrency": 64}', "bmk.json").conc == 64


def test_a_fractional_request_count_is_refused() -> None:
    with pytest.raises(ResultFileError) as info:
        parse_result(json.dumps({**RAW, "completed": 3.5}), "r.json")
    assert info.value.field_name == "completed"


REFERENCE = (
    "name: t\nengine: atom\ntp: {tp}\npoints:\n  - {{conc: {conc}, mean_tpot_ms: 10.0, total_tput: 800}}\n"
)


@pytest.mark.parametrize("conc", ["true", "'4'", "0"])
def test_a_reference_point_needs_an_integer_conc(conc: str) -> None:
    with pytest.raises(ReferenceError, match="integer 'conc'"):
        parse_reference(REFERENCE.format(tp=8, conc=conc), "t.yaml")


def test_a_reference_tp_of_true_is_no_tp() -> None:
    ref = parse_reference(REFERENCE.format(tp="true", conc=4), "t.yaml")
    assert ref.tp is None and "tput_per_gpu" not in ref.points[4]
    assert parse_reference(REFERENCE.format(tp=8, conc=4), "t.yaml").points[4]["tput_per_gpu"] == 100.0


@pytest.mark.parametrize(
    ("isl", "ok"), [("1024", True), (1024, True), ("١٠٢٤", False), (True, False), ("1k", False)]
)
def test_meta_env_lengths_are_ascii_digits_or_integers(isl: Any, ok: bool) -> None:
    body = json.dumps({"isl": isl, "osl": 1024})
    if ok:
        assert parse_meta_env(body).isl == 1024
    else:
        with pytest.raises(EvalFileError):
            parse_meta_env(body)
