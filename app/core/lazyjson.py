"""Validate an untrusted JSON object and read a few strings from it, without building it in Python.

The webhook edge needs a delivery's body checked (valid JSON, an object, nested at most
``safejson.MAX_DEPTH``) and two of its strings (``action``, ``repository.full_name``); it stores the
bytes as they came. ``orjson.loads`` builds every object of a 17 KB GitHub payload only to drop
it again: about 19 us per delivery. simdjson validates into its own tape and hands out only what
is asked for: about 5 us (``bench/ingest.py``; docs/benchmarks.md).

What is accepted is exactly what orjson accepts, so the worker (which parses with
``safejson.loads``) never meets a body the edge let through and it refuses, and the edge refuses no
body orjson takes. The two differ in two places, found by a differential fuzz
(tests/core/test_lazyjson.py): simdjson refuses integers past 64 bits, which orjson reads (as
floats), and simdjson skips a leading UTF-8 byte-order mark, which orjson refuses. A document
simdjson refuses, and one with a BOM, is therefore decided by orjson.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
import simdjson

from app.core import safejson

Path = tuple[str, ...]
_BOM = b"\xef\xbb\xbf"
# One parser reused: simdjson keeps its buffers between documents. It refuses (RuntimeError) to
# parse again while a value of the last document is still referenced (an exception's traceback
# can hold one); a fresh parser (~2 us more) serves that call.
_parser = simdjson.Parser()


class NotAnObject(ValueError):
    """Valid JSON whose top level is not an object."""


def object_strings(
    raw: bytes, paths: Sequence[Path], max_depth: int = safejson.MAX_DEPTH
) -> list[str | None]:
    """The string at each path of the JSON object ``raw`` (None where there is none, or not a string).

    Raises ``orjson.JSONDecodeError`` (a ``ValueError``) for what orjson would not parse,
    ``safejson.JSONLimitError`` for a document nested deeper than ``max_depth``, and
    ``NotAnObject`` for valid JSON that is not an object, in that order of precedence.
    """
    doc = None if raw.startswith(_BOM) else _simd(raw)
    if doc is None:  # orjson decides, and its own error says what is wrong
        value = orjson.loads(raw)
        safejson.check_depth(raw, value, max_depth)
        if not isinstance(value, dict):
            raise NotAnObject("payload must be a JSON object")
        return [_dig(value, path) for path in paths]
    safejson.check_depth(raw, doc, max_depth)
    if not isinstance(doc, simdjson.Object):
        raise NotAnObject("payload must be a JSON object")
    return [_dig(doc, path) for path in paths]


def _simd(raw: bytes) -> Any:
    """simdjson's document for ``raw``, or None when simdjson refuses it."""
    try:
        return _parser.parse(raw)
    except ValueError:  # invalid for simdjson (UnicodeDecodeError included): orjson decides
        return None
    except RuntimeError:  # a value of the last document is alive, or an integer past 64 bits
        pass
    try:
        return simdjson.Parser().parse(raw)
    except (ValueError, RuntimeError):
        return None


def _dig(node: Any, path: Path) -> str | None:
    for key in path:
        if not isinstance(node, (dict, simdjson.Object)):
            return None
        node = node.get(key)
    return node if isinstance(node, str) else None
