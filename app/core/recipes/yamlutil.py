"""Small YAML helpers shared by the recipe modules (libyaml when available, one-line errors)."""

from __future__ import annotations

from typing import Any

import yaml

from app.core.recipes.errors import InvalidYamlError

# libyaml is ~10x faster on the 3000-line master configs; the pure-Python loader is the fallback.
SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# A PR branch's file is untrusted: libyaml bounds nesting itself (about 1,000 levels) but not what
# aliases stand for, and a few hundred bytes of "billion laughs" load in milliseconds as shared
# objects that every later walk (planning, json.dumps) expands to ~10^9 values. The repo's files
# use no anchors; the biggest master config is ~20,000 values.
MAX_EXPANDED_VALUES = 1_000_000


def yaml_error_summary(exc: yaml.YAMLError) -> str:
    """One line for a PyYAML error: the problem and where it is (1-based line/column)."""
    if isinstance(exc, yaml.MarkedYAMLError):
        problem = exc.problem or exc.context or "invalid YAML"
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"{problem}{where}"
    return " ".join(str(exc).split()) or "invalid YAML"


def load_yaml(text: str, what: str) -> Any:
    """safe_load with a one-line InvalidYamlError naming the file kind (`what`)."""
    try:
        value = yaml.load(text, Loader=SafeLoader)
    except yaml.YAMLError as exc:
        raise InvalidYamlError(
            f"{what} is not valid YAML: {yaml_error_summary(exc)}; fix the syntax and retry"
        ) from exc
    if "&" in text:  # aliases need anchors; without an '&' nothing is shared and the walk is skipped
        problem = alias_problem(value, MAX_EXPANDED_VALUES)
        if problem:
            raise InvalidYamlError(f"{what} is refused: {problem}")
    return value


def alias_problem(value: Any, limit: int) -> str | None:
    """Why a loaded value cannot be walked safely (a container inside itself, or more than `limit`
    values once shared containers are counted each time they appear), or None.

    Counts each distinct container once (memoised by identity), so the check costs the size of
    the text, not of its expansion; iterative, so depth costs no recursion.
    """
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        node, children_done = stack.pop()
        if not isinstance(node, (dict, list)):
            continue
        ident = id(node)
        if children_done:
            on_path.discard(ident)
            size = 1 + sum(sizes.get(id(c), 1) for c in _children(node))
            if size > limit:
                return (
                    f"it stands for more than {limit:,} values once its aliases are expanded; "
                    "write the values out or use fewer aliases"
                )
            sizes[ident] = size
            continue
        if ident in sizes:
            continue
        if ident in on_path:
            return "an alias refers to the list or mapping it is inside; remove the self-reference"
        on_path.add(ident)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node))
    return None


def _children(node: dict[Any, Any] | list[Any]) -> list[Any]:
    if isinstance(node, dict):
        return [*node.keys(), *node.values()]
    return node


def parse_events(text: str, what: str) -> list[yaml.Event]:
    """The full event stream of `text` (used for byte-exact edits and their verification)."""
    try:
        return list(yaml.parse(text, Loader=SafeLoader))
    except yaml.YAMLError as exc:
        raise InvalidYamlError(
            f"{what} is not valid YAML: {yaml_error_summary(exc)}; fix the syntax and retry"
        ) from exc
