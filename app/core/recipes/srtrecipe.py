"""Multi-node srt-slurm recipes of a master config key, and their ``model.container`` pin (pure).

InferenceX's ``AGENTS.md``: "Multi-node srt-slurm changes update the recipe YAML and matching
master config together. For image bumps, ``model.container`` must equal ``image``." A multi-node
key names its recipes in its workers' ``additional-settings`` as ``CONFIG_FILE=<path>`` (and
``EVAL_CONFIG_FILE=<path>``), optionally followed by an override selector
(``recipes/b200-fp4/8k1k.yaml:override_stp_tp4``). At 843c6254 the path is either the in-repo
file itself (``benchmarks/multi_node/srt-slurm-recipes/...``) or ``recipes/<rest>``, which the
launchers resolve in their srt-slurm checkout after copying the repo's
``benchmarks/multi_node/srt-slurm-recipes/<rest>`` over it; a ``recipes/`` path the repo does not
hold is one of the srt-slurm project's own recipes, outside the repo (nothing to edit here).

``set_container`` is the same byte-preserving one-line edit as the master config's pin
(``app.core.recipes.pin``): only the ``model.container`` scalar's characters change, verified by
re-parsing.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from yaml.events import AliasEvent, DocumentStartEvent, MappingStartEvent, ScalarEvent

from app.core.recipes.errors import EditError, InvalidYamlError, NoImageError
from app.core.recipes.pin import (
    _end,
    _events,
    _mapping_pairs,
    _resolves_to_str,
    _scalar_is,
    _start,
    replace_scalar,
    validate_image,
)

RECIPES_DIR = "benchmarks/multi_node/srt-slurm-recipes"
LAUNCHER_PREFIX = "recipes/"  # the launchers' checkout path of the same tree
SETTINGS = ("CONFIG_FILE=", "EVAL_CONFIG_FILE=")


@dataclass(frozen=True)
class RecipeRef:
    setting: str  # as written in the master config, e.g. CONFIG_FILE=recipes/...yaml:override
    path: str  # the file in the benchmark repo
    in_repo_path: bool  # the setting names the repo path itself (so the file must be there)


def _settings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _settings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _settings(v)]
    if isinstance(value, str) and value.startswith(SETTINGS):
        return [value]
    return []


def _file_of(value: str) -> str:
    """The recipe file of a setting's value, without an override selector after ``.yaml:``."""
    for ext in (".yaml:", ".yml:"):
        at = value.find(ext)
        if at >= 0:
            return value[: at + len(ext) - 1]
    return value


def _safe(path: str) -> bool:
    if not path or path.startswith("/") or "\\" in path or any(ord(c) < 32 for c in path):
        return False
    return ".." not in path.split("/") and posixpath.normpath(path) == path


def recipe_refs(entry: Mapping[str, Any]) -> list[RecipeRef]:
    """The srt-slurm recipe files a multi-node key names (each once, in the order written); empty
    for a single-node key. Paths outside the recipes tree or with ``..`` are not followed."""
    if not entry.get("multinode"):
        return []
    out: dict[str, RecipeRef] = {}
    for setting in _settings(entry):
        file = _file_of(setting.split("=", 1)[1].strip())
        if file.startswith(LAUNCHER_PREFIX):
            path, direct = f"{RECIPES_DIR}/{file.removeprefix(LAUNCHER_PREFIX)}", False
        elif file.startswith(f"{RECIPES_DIR}/"):
            path, direct = file, True
        else:
            continue
        if _safe(path) and path not in out:
            out[path] = RecipeRef(setting, path, direct)
    return list(out.values())


def _locate_container(text: str, pure: bool) -> int:
    """Index of the ``model.container`` value's ScalarEvent in ``_events(text, pure)``."""
    try:
        events = _events(text, pure)
    except InvalidYamlError as exc:
        raise InvalidYamlError(str(exc).replace("the master config", "the srt-slurm recipe")) from exc
    if sum(1 for ev in events if isinstance(ev, DocumentStartEvent)) != 1 or not isinstance(
        events[2], MappingStartEvent
    ):
        raise InvalidYamlError("the srt-slurm recipe is not one YAML mapping")
    models = [v for k, v in _mapping_pairs(events, 2) if _scalar_is(events[k], "model")]
    if len(models) != 1 or not isinstance(events[models[0]], MappingStartEvent):
        raise NoImageError("the srt-slurm recipe has no `model:` mapping (one) to carry `container:`")
    found = [v for k, v in _mapping_pairs(events, models[0]) if _scalar_is(events[k], "container")]
    if len(found) != 1:
        raise NoImageError(
            "the srt-slurm recipe's `model:` has "
            + ("no `container:`" if not found else "`container:` twice")
            + "; it must name the image (AGENTS.md: `model.container` must equal `image`)"
        )
    ev = events[found[0]]
    if isinstance(ev, AliasEvent) or not isinstance(ev, ScalarEvent) or ev.anchor or ev.tag:
        raise EditError("the recipe's `model.container` is an alias, anchor or tag; edit it by hand")
    if not _resolves_to_str(ev) or (ev.style or "") in ("|", ">") or _start(ev).line != _end(ev).line:
        raise EditError("the recipe's `model.container` is not a one-line string; edit it by hand")
    return found[0]


def current_container(text: str) -> str:
    ev = _events(text)[_locate_container(text, False)]
    assert isinstance(ev, ScalarEvent)
    return str(ev.value)


def set_container(text: str, image: str) -> str:
    """``text`` with ``model.container`` set to ``image``, one line changed (unchanged when it
    already is). Raises a RecipeError saying what to fix."""
    validate_image(image)
    _locate_container(text, False)  # the recipe's own errors first (worded for a recipe)
    return replace_scalar(
        text,
        lambda pure: _locate_container(text, pure),
        image,
        "the recipe's `model.container`",
        master=False,
    )
