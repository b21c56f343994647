"""The edge's JSON check accepts exactly what orjson (the worker's parser) accepts and reads the same."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest
import simdjson
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core import lazyjson, safejson

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "github" / "webhooks"
PATHS = (("action",), ("repository", "full_name"))


def expected(raw: bytes) -> Any:
    """What orjson, the depth limit and the object rule make of ``raw``: strings, or the error class."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return orjson.JSONDecodeError
    try:
        safejson.check_depth(raw, value)
    except safejson.JSONLimitError:
        return safejson.JSONLimitError
    if not isinstance(value, dict):
        return lazyjson.NotAnObject
    repo = value.get("repository")
    action = value.get("action")
    full_name = repo.get("full_name") if isinstance(repo, dict) else None
    return [action if isinstance(action, str) else None, full_name if isinstance(full_name, str) else None]


def outcome(raw: bytes) -> Any:
    try:
        return lazyjson.object_strings(raw, PATHS)
    except safejson.JSONLimitError:
        return safejson.JSONLimitError
    except lazyjson.NotAnObject:
        return lazyjson.NotAnObject
    except orjson.JSONDecodeError:
        return orjson.JSONDecodeError


def test_real_payloads_read_as_orjson_reads_them() -> None:
    bodies = sorted(FIXTURES.glob("*/*.json"))
    assert len(bodies) >= 20
    for path in bodies:
        raw = path.read_bytes()
        assert outcome(raw) == expected(raw), path.name
    pr = (FIXTURES / "pull_request").glob("*.json")
    assert any(outcome(p.read_bytes())[1] for p in pr)  # a real repository.full_name is read


@pytest.mark.parametrize(
    ("raw", "result"),
    [
        # where simdjson alone would differ from orjson
        (
            b'{"n": 18446744073709551616, "action": "opened"}',
            ["opened", None],
        ),  # past 64 bits: orjson reads it
        (b'{"n": -9223372036854775809}', [None, None]),
        (b'\xef\xbb\xbf{"action": "opened"}', orjson.JSONDecodeError),  # a BOM: orjson refuses it
        # refused alike
        (b'{"a": "\xff"}', orjson.JSONDecodeError),  # invalid UTF-8
        (b'{"a": "\\ud800"}', orjson.JSONDecodeError),  # a lone surrogate
        (b'{"a": 1e999}', orjson.JSONDecodeError),  # past a double
        (b'{"a": NaN}', orjson.JSONDecodeError),
        (b'{"a": 1,}', orjson.JSONDecodeError),
        (b"", orjson.JSONDecodeError),
        (b'{"a": 1} x', orjson.JSONDecodeError),
        # the limits and the shape
        (b'{"a": ' + b"[" * 63 + b"]" * 63 + b"}", [None, None]),  # 64 levels
        (b'{"a": ' + b"[" * 64 + b"]" * 64 + b"}", safejson.JSONLimitError),  # 65
        (
            b'{"a": ' + b"[" * 2000 + b"]" * 2000 + b"}",
            orjson.JSONDecodeError,
        ),  # past both parsers' own limit
        (b"[1, 2]", lazyjson.NotAnObject),
        (b'"text"', lazyjson.NotAnObject),
        (b'{"action": 3, "repository": "a/b"}', [None, None]),  # not strings
        (b'{"action": "x", "repository": {"full_name": "o/r"}}', ["x", "o/r"]),
    ],
)
def test_edge_cases(raw: bytes, result: Any) -> None:
    assert expected(raw) == result  # the oracle itself says so
    assert outcome(raw) == result


def test_a_value_of_the_last_document_still_alive_does_not_break_the_next_check() -> None:
    held = lazyjson._parser.parse(b'{"keep": {"me": 1}}')  # an exception's traceback can hold one
    assert lazyjson.object_strings(b'{"action": "opened"}', PATHS) == ["opened", None]
    assert isinstance(held, simdjson.Object)
    keep = held["keep"]
    assert isinstance(keep, simdjson.Object) and keep["me"] == 1  # the held document is untouched


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)
ALPHABET = b'{}[]",:0123456789.eE+-tfnul\\ \t\r\n\x00\xff\xef\xbb\xbf\xc3\xa9/\xed\xa0\x80\x7f'


@settings(max_examples=600, deadline=None)
@given(
    value=json_values,
    edits=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 10**6), st.integers(0, 10**6))),
)
def test_mutated_json_is_accepted_exactly_when_orjson_accepts_it(
    value: Any, edits: list[tuple[int, int, int]]
) -> None:
    doc = bytearray(orjson.dumps({"action": "opened", "repository": {"full_name": "o/r"}, "v": value}))
    for op, at, byte in edits[:4]:
        pos = at % (len(doc) + 1)
        if op == 0:
            doc.insert(pos, ALPHABET[byte % len(ALPHABET)])
        elif doc and op == 1:
            del doc[min(pos, len(doc) - 1)]
        elif doc:
            doc[min(pos, len(doc) - 1)] = ALPHABET[byte % len(ALPHABET)]
    raw = bytes(doc)
    assert outcome(raw) == expected(raw), raw


def test_random_mutations_of_real_payloads_agree_with_orjson() -> None:
    """A bounded, seeded sweep over real payload prefixes (the shapes GitHub sends)."""
    bodies = [p.read_bytes() for p in sorted(FIXTURES.glob("*/*.json"))]
    rnd = random.Random(19)
    for _ in range(3000):
        doc = bytearray(rnd.choice(bodies))
        for _ in range(rnd.randint(1, 3)):
            pos = rnd.randrange(len(doc))
            doc[pos] = rnd.choice(ALPHABET)
        raw = bytes(doc)
        assert outcome(raw) == expected(raw), raw[:200]
