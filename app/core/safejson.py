"""JSON from untrusted sources, parsed with limits (pure: bytes in, value or ``JSONLimitError`` out).

Python's ``json`` recurses once per nesting level and gives up near ``sys.getrecursionlimit()``
(1000) with a ``RecursionError``; orjson allows 1024 levels. A document nested 1,000-1,023 deep
therefore passed the edge (orjson) and failed the worker (json). A huge integer parses fine but
overflows the moment it is turned into a float. Every reader of hostile JSON (the webhook edge,
the worker, result artifacts) uses the same checks here, so a document is either refused up
front with a reason or safe to walk everywhere.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

MAX_DEPTH = 64  # real GitHub payloads nest about 10 deep; result files 2
MAX_INT_DIGITS = 30  # an int64 has 19 digits; a 400-digit integer is not a measurement


class JSONLimitError(ValueError):
    """The document is valid JSON (or not) but over a limit; the message says which and how."""


def check_depth(raw: bytes, value: Any, limit: int = MAX_DEPTH) -> None:
    """Refuse ``value`` (parsed from ``raw``) when it nests deeper than ``limit``.

    The depth is read from the bytes, not by walking the parsed value: for a real 17 KB GitHub
    payload the walk cost about 55 us, ``nesting_over`` about 24 us (and counting brackets first,
    to skip it for documents with few, cost 12 us and skipped nothing a webhook sends).
    """
    if nesting_over(raw, limit):
        raise JSONLimitError(f"JSON nests deeper than {limit} levels; flatten the document")


_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_STRING = re.compile(rb'"[^"]*"')
_NOT_STRUCTURE = bytes(range(256)).translate(None, b'{}[]"')
_BRACKETS = bytes.maketrans(b"{}[]", b"()()")


def nesting_over(raw: bytes, limit: int) -> bool:
    """True when the valid JSON document ``raw`` nests deeper than ``limit`` (C-speed byte passes).

    Escapes go first (so every quote left opens or closes a string), then everything but quotes
    and brackets; strings go (the rare ones holding brackets with a regex), brackets become ``()``,
    and each ``replace("()", "")`` pass removes exactly the innermost level: the number of passes
    until nothing is left is the depth. Only for text a JSON parser has accepted.
    """
    text = _ESCAPE.sub(b"", raw) if b"\\" in raw else raw
    # Two adjacent quotes hold no bracket between them, whichever of open/close they are.
    shape = text.translate(None, _NOT_STRUCTURE).replace(b'""', b"")
    if b'"' in shape:
        shape = _STRING.sub(b"", shape)
    shape = shape.translate(_BRACKETS)
    level = 0
    while shape:
        shape = shape.replace(b"()", b"")
        level += 1
        if level > limit:
            return True
    return False


def loads(
    raw: bytes | str,
    *,
    max_depth: int = MAX_DEPTH,
    max_int_digits: int | None = None,
    allow_nan: bool = False,
) -> Any:
    """Parse ``raw`` refusing deep nesting (and, when asked, integers longer than ``max_int_digits``).

    Raises ``JSONLimitError`` for a limit and ``ValueError`` (orjson's ``JSONDecodeError``) for
    JSON that does not parse. orjson reads an integer past 64 bits as a float and refuses one
    past a double's range ("number is infinity"); ``max_int_digits`` turns that into a reason.
    ``allow_nan`` accepts Python's ``NaN``/``Infinity`` tokens (``json.dump`` writes them, so
    benchmark scripts do), which orjson refuses.
    """
    data = raw.encode() if isinstance(raw, str) else raw
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if max_int_digits is not None and _long_integer(data, max_int_digits):
            raise JSONLimitError(
                f"JSON holds an integer longer than {max_int_digits} digits; write it as a float or text"
            ) from exc
        if "depth limit" in str(exc).lower():
            raise JSONLimitError(f"JSON nests deeper than {max_depth} levels; flatten the document") from exc
        if not (allow_nan and (b"NaN" in data or b"Infinity" in data)):
            raise
        try:
            value = json.loads(data)
        except RecursionError:
            raise JSONLimitError(f"JSON nests deeper than {max_depth} levels; flatten the document") from None
    check_depth(data, value, max_depth)
    return value


def _long_integer(data: bytes, limit: int) -> bool:
    """Whether ``data`` has a run of more than ``limit`` digits (only asked after a parse failure)."""
    run = 0
    for byte in data:
        if 48 <= byte <= 57:
            run += 1
            if run > limit:
                return True
        else:
            run = 0
    return False
