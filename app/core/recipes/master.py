"""A master config (`<vendor>-master.yaml`) parsed, and its entries read and checked.

Each config key maps to an entry (`image`, `model`, `model-prefix`, `precision`, `framework`,
`runner`, `multinode`, `scenarios`). Expanding an entry into points is app/core/recipes/expand.py;
editing the file is pin.py and changelog.py.
"""

from __future__ import annotations

import difflib
import functools
import pickle
from typing import Any

from app.core.recipes.errors import (
    InvalidRecipeError,
    InvalidYamlError,
    UnknownKeyError,
    UnsupportedScenarioError,
)
from app.core.recipes.yamlutil import load_yaml

FIXED_SEQ_LEN = "fixed-seq-len"
FIXED_SCENARIO = FIXED_SEQ_LEN
AGENTIC_CODING = "agentic-coding"
SPEC_MODES = ("none", "mtp", "draft_model")


@functools.lru_cache(maxsize=16)
def _parsed_pickle(text: str) -> bytes:
    return pickle.dumps(load_yaml(text, "the master config"), protocol=pickle.HIGHEST_PROTOCOL)


def parse_master(text: str) -> dict[str, Any]:
    """Parse a master config (`<vendor>-master.yaml`): a mapping of config key -> entry.

    Returns a fresh object on every call (callers may mutate it); repeated parses of the same
    text are served from a small cache because the real files take ~50 ms to load.
    """
    data = pickle.loads(_parsed_pickle(text))
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise InvalidYamlError(
            f"the master config is {kind}, not a mapping of config keys; "
            "it must look like `<config-key>: {image: ..., model: ..., scenarios: ...}`"
        )
    return data


def keys_changed(old_text: str, new_text: str) -> set[str]:
    """Keys whose entry differs between two versions of a master config (added/removed included).

    An empty old text stands for a file that did not exist yet.
    """
    old = parse_master(old_text) if old_text.strip() else {}
    new = parse_master(new_text) if new_text.strip() else {}
    return {str(k) for k in set(old) | set(new) if old.get(k) != new.get(k)}


def get_entry(master: dict[str, Any], key: str) -> dict[str, Any]:
    """The entry of `key`, or UnknownKeyError with close matches."""
    if key not in master:
        close = difflib.get_close_matches(key, [str(k) for k in master], n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else "; check the key and the file"
        raise UnknownKeyError(f"config key '{key}' is not in this master config{hint}")
    entry = master[key]
    if not isinstance(entry, dict):
        raise InvalidRecipeError(
            f"config key '{key}' is not a mapping (got {type(entry).__name__}); "
            "each key must map to `image`, `model`, ... `scenarios`"
        )
    return entry


def required_field(entry: dict[str, Any], key: str, name: str, kind: type | tuple[type, ...]) -> Any:
    if name not in entry:
        raise InvalidRecipeError(f"config key '{key}' has no `{name}`; add it to the entry")
    value = entry[name]
    # bool is an int subclass; an int field must not accept true/false.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        want = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise InvalidRecipeError(f"config key '{key}': `{name}` must be a {want}, got {value!r}")
    return value


def positive_int(item: dict[str, Any], key: str, name: str, default: int | None) -> int | None:
    if name not in item or item[name] is None:
        return default
    value = item[name]
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise InvalidRecipeError(
            f"config key '{key}': search-space `{name}` must be a positive integer, got {value!r}"
        )
    return value


def is_multinode(entry: dict[str, Any]) -> bool:
    return bool(entry.get("multinode", False))


def scenario_kinds(entry: dict[str, Any]) -> frozenset[str]:
    scenarios = entry.get("scenarios")
    return frozenset(str(k) for k in scenarios) if isinstance(scenarios, dict) else frozenset()


def is_single_node_fixed(entry: dict[str, Any]) -> bool:
    return not is_multinode(entry) and scenario_kinds(entry) == {FIXED_SEQ_LEN}


def require_single_node_fixed(key: str, entry: dict[str, Any]) -> list[Any]:
    """The `fixed-seq-len` list of a single-node key, or UnsupportedScenarioError saying why not."""
    if is_multinode(entry):
        raise UnsupportedScenarioError(
            f"config key '{key}' is multinode (`multinode: true`); sweep planning is not supported "
            "for multinode configs, only single-node fixed-seq-len ones"
        )
    scenarios = entry.get("scenarios")
    if not isinstance(scenarios, dict) or not scenarios:
        raise InvalidRecipeError(
            f"config key '{key}' has no `scenarios` mapping; add `scenarios: {{fixed-seq-len: [...]}}`"
        )
    other = sorted(str(k) for k in scenarios if k != FIXED_SEQ_LEN)
    if other:
        raise UnsupportedScenarioError(
            f"config key '{key}' has {', '.join(other)} scenarios; sweep planning is not supported "
            "for them, only single-node fixed-seq-len configs"
        )
    fixed = scenarios.get(FIXED_SEQ_LEN)
    if not isinstance(fixed, list) or not fixed:
        raise InvalidRecipeError(
            f"config key '{key}': `scenarios.fixed-seq-len` must be a non-empty list of "
            "{isl, osl, search-space} items"
        )
    return fixed


def plannable_keys(master: dict[str, Any]) -> list[str]:
    """Keys whose scenarios expand_points knows (fixed-seq-len, agentic-coding), in file order."""
    out = []
    for key, entry in master.items():
        if not isinstance(entry, dict):
            continue
        kinds = scenario_kinds(entry)
        if kinds and kinds <= {FIXED_SEQ_LEN, AGENTIC_CODING}:
            out.append(str(key))
    return out


def spec_modes(entry: dict[str, Any]) -> frozenset[str]:
    """The spec-decoding modes used by the entry's search-space items (all scenario kinds)."""
    modes: set[str] = set()
    scenarios = entry.get("scenarios")
    if not isinstance(scenarios, dict):
        return frozenset()
    for items in scenarios.values():
        for seq_item in items if isinstance(items, list) else []:
            space = seq_item.get("search-space") if isinstance(seq_item, dict) else None
            for item in space if isinstance(space, list) else []:
                if isinstance(item, dict):
                    modes.add(str(item.get("spec-decoding", "none")))
    return frozenset(modes)
