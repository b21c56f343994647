"""Small YAML helpers shared by the recipe modules (libyaml when available, one-line errors)."""

from __future__ import annotations

from typing import Any

import yaml

from app.core.recipes.errors import InvalidYamlError

# libyaml is ~10x faster on the 3000-line master configs; the pure-Python loader is the fallback.
SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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
        return yaml.load(text, Loader=SafeLoader)
    except yaml.YAMLError as exc:
        raise InvalidYamlError(
            f"{what} is not valid YAML: {yaml_error_summary(exc)}; fix the syntax and retry"
        ) from exc


def parse_events(text: str, what: str) -> list[yaml.Event]:
    """The full event stream of `text` (used for byte-exact edits and their verification)."""
    try:
        return list(yaml.parse(text, Loader=SafeLoader))
    except yaml.YAMLError as exc:
        raise InvalidYamlError(
            f"{what} is not valid YAML: {yaml_error_summary(exc)}; fix the syntax and retry"
        ) from exc
