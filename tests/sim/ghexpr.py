"""A small evaluator of GitHub Actions expressions (``${{ ... }}``), for tests that read the
benchmark repo's templates themselves: literals, context paths (``inputs.model-prefix``,
``matrix.config['kv-p2p-transfer']``), ``! == != < <= > >= && ||`` and the functions the
templates' names, `if:`s and `with:`s use (format, join, fromJson, toJson, contains,
startsWith, always, success, failure, cancelled), with GitHub's rules: ``&&``/``||`` return an
operand, falsy is false/0/''/null, values of different types compare as numbers, strings
case-insensitively (docs.github.com, "Evaluate expressions in workflows and actions").

Test code only: the simulator has its own hand-written naming, which tests/sim/test_naming.py
checks against what this evaluator makes of the templates.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<op>==|!=|<=|>=|&&|\|\||[!<>()\[\],.])"
    r"|(?P<id>[A-Za-z_][A-Za-z0-9_-]*))"
)
_EMBED = re.compile(r"\$\{\{(.*?)\}\}", re.S)


def to_str(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        return json.dumps(value, indent=2)
    return str(value)


def truthy(value: Any) -> bool:
    if isinstance(value, float) and math.isnan(value):
        return False
    return value not in (None, False, 0, "")


def _number(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value) if value.strip() else 0.0
        except ValueError:
            return math.nan
    return math.nan


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    if type(a) is type(b):
        return bool(a == b)
    return _number(a) == _number(b)


def _format(template: str, *args: Any) -> str:
    out = template.replace("{{", "\0").replace("}}", "\1")
    for i, arg in enumerate(args):
        out = out.replace(f"{{{i}}}", to_str(arg))
    return out.replace("\0", "{").replace("\1", "}")


FUNCTIONS: dict[str, Any] = {
    "format": _format,
    "join": lambda items, sep=",": to_str(sep).join(
        to_str(i) for i in (items if isinstance(items, list) else [items])
    ),
    "fromjson": lambda text: json.loads(to_str(text)),
    "tojson": lambda value: json.dumps(value, indent=2),
    "contains": lambda hay, needle: (
        any(_equal(i, needle) for i in hay)
        if isinstance(hay, list)
        else to_str(needle).lower() in to_str(hay).lower()
    ),
    "startswith": lambda s, p: to_str(s).lower().startswith(to_str(p).lower()),
    "always": lambda: True,
    "success": lambda: True,
    "failure": lambda: False,
    "cancelled": lambda: False,
}


@functools.lru_cache(maxsize=4096)
def _tokens(text: str) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    pos, text = 0, text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"cannot read {text[pos:]!r}")
        kind = str(m.lastgroup)
        out.append((kind, str(m.group(kind))))
        pos = m.end()
    return tuple(out)


class _Parser:
    def __init__(self, text: str, context: dict[str, Any]) -> None:
        self.tokens = _tokens(text)
        self.i, self.context = 0, context

    def peek(self) -> str | None:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else None

    def take(self, want: str | None = None) -> tuple[str, str]:
        tok = self.tokens[self.i]
        if want is not None and tok[1] != want:
            raise ValueError(f"expected {want!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def expr(self) -> Any:
        left = self.conj()
        while self.peek() == "||":
            self.take()
            right = self.conj()
            left = left if truthy(left) else right
        return left

    def conj(self) -> Any:
        left = self.compare()
        while self.peek() == "&&":
            self.take()
            right = self.compare()
            left = right if truthy(left) else left
        return left

    def compare(self) -> Any:
        left = self.unary()
        op = self.peek()
        if op in ("==", "!=", "<", "<=", ">", ">="):
            self.take()
            right = self.unary()
            if op in ("==", "!="):
                return _equal(left, right) == (op == "==")
            a, b = _number(left), _number(right)
            return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[str(op)]
        return left

    def unary(self) -> Any:
        if self.peek() == "!":
            self.take()
            return not truthy(self.unary())
        return self.postfix()

    def postfix(self) -> Any:
        value = self.primary()
        while self.peek() in (".", "["):
            if self.take()[1] == ".":
                name = self.take()[1]
                value = value.get(name) if isinstance(value, dict) else None
            else:
                key = self.expr()
                self.take("]")
                value = value.get(to_str(key)) if isinstance(value, dict) else None
        return value

    def primary(self) -> Any:
        kind, text = self.take()
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text)
        if text == "(":
            value = self.expr()
            self.take(")")
            return value
        if kind != "id":
            raise ValueError(f"unexpected {text!r}")
        if text in ("true", "false"):
            return text == "true"
        if text == "null":
            return None
        if self.peek() == "(":
            self.take("(")
            args = []
            while self.peek() != ")":
                args.append(self.expr())
                if self.peek() == ",":
                    self.take(",")
            self.take(")")
            return FUNCTIONS[text.lower()](*args)
        return self.context.get(text)


def evaluate(expression: str, context: dict[str, Any]) -> Any:
    """One expression (without ``${{ }}``)."""
    parser = _Parser(expression, context)
    value = parser.expr()
    if parser.peek() is not None:
        raise ValueError(f"trailing {parser.peek()!r} in {expression!r}")
    return value


def interpolate(text: Any, context: dict[str, Any]) -> Any:
    """A workflow value: a whole ``${{ x }}`` gives x's value, embedded ones their strings."""
    if not isinstance(text, str):
        return text
    whole = _EMBED.fullmatch(text.strip()) if text.count("${{") == 1 else None
    if whole:
        return evaluate(whole.group(1), context)
    return _EMBED.sub(lambda m: to_str(evaluate(m.group(1), context)), text)


def condition(text: Any, context: dict[str, Any]) -> bool:
    """An `if:`: with or without ``${{ }}``; none means success()."""
    if text is None:
        return True
    if isinstance(text, bool):
        return text
    inner = _EMBED.fullmatch(str(text).strip()) if str(text).count("${{") == 1 else None
    return truthy(evaluate(inner.group(1) if inner else str(text), context))
