"""A recipe's identity: the fingerprint that gates result reuse, and the sibling key a reference
engine's results come from (the same config but for the framework)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from app.core.recipes.master import get_entry, is_multinode, scenario_kinds, spec_modes


def recipe_fingerprint(entry: dict[str, Any], script_text: str | None = None) -> str:
    """sha256 hex over the key's entry without `image` (canonical JSON) plus the benchmark script.

    Why: a stored result may be reused for a new request only when it was produced by the same
    image, the same point and the same recipe. The image and the point are compared separately,
    so the fingerprint deliberately leaves `image` out (a pin bump changes the image, not the
    recipe); everything else that shapes how the server is launched (search space, passthrough
    knobs, the launch script's flags/env) is in it, so editing any of it invalidates reuse.
    """
    body = {k: v for k, v in entry.items() if k != "image"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    digest = hashlib.sha256()
    digest.update(b"sweepbot-recipe-v1\0")
    digest.update(canonical.encode("utf-8"))
    # Distinguish "no script known" from an empty script.
    if script_text is None:
        digest.update(b"\0noscript")
    else:
        digest.update(b"\0script\0")
        digest.update(script_text.encode("utf-8"))
    return digest.hexdigest()


def _variant(entry: dict[str, Any]) -> tuple[Any, ...]:
    """Everything a reference sibling must share except the framework."""
    return (
        entry.get("model-prefix"),
        entry.get("precision"),
        entry.get("runner"),
        is_multinode(entry),
        scenario_kinds(entry),
        spec_modes(entry),
    )


def sibling_key(master: dict[str, Any], key: str, framework: str = "atom") -> str | None:
    """The config that differs from `key` only by framework (the reference engine's recipe).

    Same model-prefix, precision, runner, multinode flag, scenario kinds and spec-decoding modes
    (so a plain key never pairs with an `-mtp`, `-agentic` or `-disagg` variant unless it is one).
    The key with the framework segment swapped (`...-vllm` -> `...-atom`) wins when it qualifies;
    otherwise a unique qualifying key; None when there is none or the choice would be a guess.
    """
    entry = get_entry(master, key)
    if entry.get("framework") == framework:
        return None
    want = _variant(entry)
    candidates = [
        str(k)
        for k, v in master.items()
        if k != key and isinstance(v, dict) and v.get("framework") == framework and _variant(v) == want
    ]
    own = entry.get("framework")
    if isinstance(own, str) and f"-{own}" in key:
        head, _, tail = key.rpartition(f"-{own}")
        # Only a whole segment (`-vllm` followed by end or `-`) is the framework.
        if tail == "" or tail.startswith("-"):
            swapped = f"{head}-{framework}{tail}"
            if swapped in candidates:
                return swapped
    return candidates[0] if len(candidates) == 1 else None
