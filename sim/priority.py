"""The benchmark repo's CI priority contract as the simulator plays it (its own code, no `app`).

- ``score(entry, policy, ...)``: the rules of ``configs/ci-priority.yaml`` as the repo's
  ``utils/ci_priority.py`` documents them: ``base-score``, plus the event's adjustment, plus
  ``multi-node`` for a row with ``prefill``, ``agentic`` for ``scenario-type: agentic-coding``,
  ``eval-only``, the precision and spec-decoding values, the first framework prefix that matches
  (``vllm`` matches ``vllm`` and ``vllm-…``), the model prefix (exact), and
  ``ci-checklist-complete``; a patchwork PR label forces the patchwork score unless waived.
  Three decimals, half up (``ci-job-<score>-…`` labels print it so).
- ``queue_token(entry, namespace, path)``: the first 32 hex digits of SHA-256 over
  ``<namespace>:<path joined by />:<entry as sorted compact JSON>``.
- ``runs_on(expression, context)``: evaluates a ``runs-on: ${{ … }}`` expression of the real
  templates (``benchmark-tmpl.yml``, ``benchmark-multinode-tmpl.yml``): literals, ``a.b`` context
  paths, ``== != && || !``, parentheses, ``format``, ``toJSON``, ``fromJSON``.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

QUANTUM = Decimal("0.001")


def _d(value: Any) -> Decimal:
    return Decimal(str(value))


def _prefix_match(value: str, table: dict[str, Any]) -> Decimal:
    for prefix, adjustment in table.items():
        if value == prefix or value.startswith(prefix + "-"):
            return _d(adjustment)
    return Decimal(0)


def score(
    entry: dict[str, Any], policy: dict[str, Any], *, event: str = "", pr_labels: frozenset[str] = frozenset()
) -> str:
    labels = policy.get("labels", {})
    patch = labels.get("patchwork", {})
    if pr_labels & set(patch.get("names", [])) and not pr_labels & set(patch.get("waived-by", [])):
        return f"{_d(patch['score']).quantize(QUANTUM, ROUND_HALF_UP):.3f}"
    adj = policy.get("adjustments", {})
    total = _d(policy.get("base-score", 0)) + _d(adj.get("event", {}).get(event, 0))
    if entry.get("prefill") is not None:
        total += _d(adj.get("multi-node", 0))
    if entry.get("scenario-type") == "agentic-coding":
        total += _d(adj.get("agentic", 0))
    if entry.get("eval-only") is True:
        total += _d(adj.get("eval-only", 0))
    total += _d(adj.get("precision", {}).get(str(entry.get("precision", "")), 0))
    total += _d(adj.get("spec-decoding", {}).get(str(entry.get("spec-decoding", "")), 0))
    total += _prefix_match(str(entry.get("framework", "")), adj.get("framework-prefix", {}))
    total += _d(adj.get("model-prefix", {}).get(str(entry.get("model-prefix", "")), 0))
    checklist = labels.get("checklist-complete", {})
    if pr_labels & set(checklist.get("names", [])):
        total += _d(checklist.get("adjustment", 0))
    return f"{total.quantize(QUANTUM, ROUND_HALF_UP):.3f}"


def queue_token(entry: dict[str, Any], namespace: str, path: tuple[str, ...]) -> str:
    canonical = json.dumps(entry, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{namespace}:{'/'.join(path)}:{canonical}".encode()).hexdigest()[:32]


# ------------------------------------------------------------------ expressions

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||[!(),.\[\]])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*))"
)


class ExpressionError(ValueError):
    pass


@dataclass
class _Parser:
    tokens: list[tuple[str, str]]
    context: dict[str, Any]
    i: int = 0

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.i] if self.i < len(self.tokens) else ("end", "")

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if value is not None and tok[1] != value:
            raise ExpressionError(f"expected {value!r}, found {tok[1]!r}")
        self.i += 1
        return tok

    def expr(self) -> Any:
        left = self.conj()
        while self.peek()[1] == "||":
            self.take()
            right = self.conj()
            left = left if _truthy(left) else right
        return left

    def conj(self) -> Any:
        left = self.comparison()
        while self.peek()[1] == "&&":
            self.take()
            right = self.comparison()
            left = right if _truthy(left) else left
        return left

    def comparison(self) -> Any:
        left = self.unary()
        while self.peek()[1] in ("==", "!="):
            op = self.take()[1]
            right = self.unary()
            same = _loose(left) == _loose(right)
            left = same if op == "==" else not same
        return left

    def unary(self) -> Any:
        if self.peek()[1] == "!":
            self.take()
            return not _truthy(self.unary())
        return self.primary()

    def primary(self) -> Any:
        kind, value = self.take()
        if kind == "str":
            return value[1:-1].replace("''", "'")
        if kind == "num":
            return float(value)
        if value == "(":
            inner = self.expr()
            self.take(")")
            return inner
        if kind != "name":
            raise ExpressionError(f"unexpected {value!r}")
        if value in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[value]
        if self.peek()[1] == "(":
            return self.call(value)
        node: Any = self.context.get(value)
        while self.peek()[1] == ".":
            self.take()
            key = self.take()[1]
            node = node.get(key) if isinstance(node, dict) else None
        return node

    def call(self, name: str) -> Any:
        self.take("(")
        args = []
        while self.peek()[1] != ")":
            args.append(self.expr())
            if self.peek()[1] == ",":
                self.take()
        self.take(")")
        fn = name.lower()
        if fn == "format":
            return _format(str(args[0]), args[1:])
        if fn == "tojson":
            return json.dumps(args[0])
        if fn == "fromjson":
            return json.loads(str(args[0]))
        raise ExpressionError(f"function {name} is not played by the simulator")


def _truthy(value: Any) -> bool:
    return value not in (None, False, 0, 0.0, "")


def _loose(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _format(template: str, args: list[Any]) -> str:
    def one(m: re.Match[str]) -> str:
        if m.group(0) in ("{{", "}}"):
            return m.group(0)[0]
        value = args[int(m.group(1))]
        if isinstance(value, bool):
            return "true" if value else "false"
        return "" if value is None else str(value)

    return re.sub(r"\{\{|\}\}|\{(\d+)\}", one, template)


def evaluate(expression: str, context: dict[str, Any]) -> Any:
    pos, tokens = 0, []
    text = expression.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ExpressionError(f"cannot read {text[pos : pos + 20]!r}")
        kind = m.lastgroup or ""
        tokens.append((kind, m.group(kind)))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    parser = _Parser(tokens, context)
    value = parser.expr()
    if parser.i != len(tokens):
        raise ExpressionError(f"unexpected {tokens[parser.i][1]!r}")
    return value


def runs_on(value: str, context: dict[str, Any]) -> list[str]:
    """A job's ``runs-on`` (``${{ expr }}`` or plain labels) as the labels GitHub queues it with."""
    m = re.fullmatch(r"\s*\$\{\{(.*)\}\}\s*", value, re.S)
    result: Any = evaluate(m.group(1), context) if m else value.strip()
    if isinstance(result, str):
        return [result]
    if not isinstance(result, list) or not all(isinstance(x, str) for x in result):
        raise ExpressionError(f"runs-on evaluated to {result!r}, not labels")
    return result
