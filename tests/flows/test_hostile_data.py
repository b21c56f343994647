"""Regression tests: hostile artifacts and comment values end in a clear refusal, nothing stored half."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from sqlalchemy.orm import Session

from app.core.artifactzip import ArtifactError, safe_json_members
from app.core.resultfile import ResultFileError, parse_result
from tests.flows.test_results import RESULT_NAME, RUN_URL, FakeArtifacts, _job, _raw, _zip, recorded

MEMBER = f"{RESULT_NAME}.json"


def _corrupt(method: int) -> bytes:
    """A zip whose one member's compressed stream is garbage (headers, sizes and CRC intact)."""
    body = _raw()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as zf:
        zf.writestr(MEMBER, body)
    data = bytearray(buf.getvalue())
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).infolist()[0]
    name_len = int.from_bytes(data[26:28], "little")
    extra_len = int.from_bytes(data[28:30], "little")
    start = info.header_offset + 30 + name_len + extra_len
    skip = 9 if method == zipfile.ZIP_LZMA else 0  # keep zipfile's LZMA properties header
    for i in range(start + skip, start + info.compress_size):
        data[i] = 0xFF  # deflate block type 3 is reserved; 0xFF is no valid LZMA range-coder start
    return bytes(data)


def _stored_deep(depth: int) -> bytes:
    doc = b'{"mean_tpot_ms": 1.0, "x": ' + b"[" * depth + b"]" * depth + b"}"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr(MEMBER, doc)
    return buf.getvalue()


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_LZMA])
def test_corrupt_compressed_stream_is_an_artifact_error(method: int) -> None:
    with pytest.raises(ArtifactError) as info:
        safe_json_members(_corrupt(method))
    assert MEMBER in str(info.value) and "cannot be read" in str(info.value)


def test_huge_integer_is_refused_with_the_file_named() -> None:
    doc = b'{"max_concurrency": ' + b"7" * 400 + b', "mean_tpot_ms": 10.0}'
    with pytest.raises(ResultFileError) as info:
        parse_result(doc, MEMBER)
    assert MEMBER in str(info.value) and "integer longer than 30 digits" in str(info.value)


@pytest.mark.parametrize("depth", [17, 990, 1010, 1023])
def test_deep_nesting_is_refused_with_a_reason(depth: int) -> None:
    members = safe_json_members(_stored_deep(depth))  # stored uncompressed: no ratio to catch it
    with pytest.raises(ResultFileError) as info:
        parse_result(members[MEMBER], MEMBER)
    assert "nests deeper than 16 levels" in str(info.value)


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (b'{"mean_tpot_ms": 1.0, "completed": 1e30}', "completed"),
        (b'{"mean_tpot_ms": 1.0, "tp": 1e9}', "tp"),
        (b'{"mean_tpot_ms": 1.0, "max_concurrency": 1e12}', "max_concurrency"),
    ],
)
def test_numbers_too_big_for_their_columns_are_refused(doc: bytes, field: str) -> None:
    with pytest.raises(ResultFileError) as info:
        parse_result(doc, MEMBER)
    assert info.value.field_name == field


def test_nan_written_by_python_json_is_still_read() -> None:
    doc = json.dumps({"mean_tpot_ms": 12.5, "max_concurrency": 32, "unrelated": float("nan")}).encode()
    assert b"NaN" in doc
    assert parse_result(doc, MEMBER).mean_tpot_ms == 12.5


@pytest.mark.parametrize(
    ("blob", "reason"),
    [
        (_corrupt(zipfile.ZIP_DEFLATED), "cannot be read"),
        (_corrupt(zipfile.ZIP_LZMA), "cannot be read"),
        (_stored_deep(1020), "nests deeper"),
        (_zip({MEMBER: b'{"max_concurrency": 32, "mean_tpot_ms": ' + b"1" * 400 + b"}"}), "integer longer"),
    ],
    ids=["deflate", "lzma", "deep", "400-digits"],
)
def test_collect_refuses_hostile_artifacts_and_stores_nothing(
    db_session: Session, blob: bytes, reason: str
) -> None:
    from app.flows.results.collect import collect_job
    from app.models.results import Result

    job_id = _job(db_session)
    out = collect_job(db_session, FakeArtifacts(blob), job_id)
    assert out.state == "failed" and reason in (out.reason or ""), out.reason
    assert recorded(db_session, job_id) == ("failed", out.reason, RUN_URL, "done")
    assert db_session.query(Result).count() == 0


@pytest.mark.parametrize("option", ["conc", "tp"])
def test_a_conc_of_5000_digits_is_a_syntax_error_not_a_crash(option: str) -> None:
    from app.core.commands import parse_commands

    for value in ("9" * 5000, "1.." + "9" * 5000, "1," + "9" * 5000):
        if option == "tp" and not value.isdigit():
            continue
        (cmd,) = parse_commands(f"/sweep {option}={value}")
        assert cmd.error is not None and "9" * 100 not in cmd.error, cmd.error
