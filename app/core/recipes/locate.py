"""Finding a config key among the benchmark repo's master-config files.

The repo moved its configs from `.github/configs/` to `configs/` (InferenceX #1992) and archives
retired keys under `configs/deprecated/`, which sweep generation no longer reads. A key found
only there must get a clear explanation, never an edit of the archived copy.
"""

from __future__ import annotations

import difflib
import fnmatch
from dataclasses import dataclass
from typing import Literal

from app.core.recipes.errors import AmbiguousKeyError, RecipeError
from app.core.recipes.master import parse_master

# Directories that hold master configs, newest layout first.
MASTER_CONFIG_DIRS: tuple[str, ...] = ("configs/", ".github/configs/")
MASTER_CONFIG_GLOBS: tuple[str, ...] = (
    "configs/*-master.yaml",
    "configs/*-master.yml",
    ".github/configs/*-master.yaml",
    ".github/configs/*-master.yml",
    "configs/deprecated/*.yaml",
    "configs/deprecated/*.yml",
    ".github/configs/deprecated/*.yaml",
    ".github/configs/deprecated/*.yml",
)


def is_master_config_path(path: str) -> bool:
    """True for a path the benchmark repo uses for (active or archived) master configs."""
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in MASTER_CONFIG_GLOBS)


def is_archived_path(path: str) -> bool:
    return "deprecated" in path.split("/")[:-1]


@dataclass(frozen=True)
class KeyLocation:
    """Where a config key lives: `found` (active file), `archived` (under deprecated/), `missing`."""

    key: str
    status: Literal["found", "archived", "missing"]
    path: str | None
    reason: str

    @property
    def found(self) -> bool:
        return self.status == "found"

    @property
    def archived(self) -> bool:
        return self.status == "archived"

    @property
    def missing(self) -> bool:
        return self.status == "missing"


def _order(path: str) -> tuple[int, str]:
    for rank, prefix in enumerate(MASTER_CONFIG_DIRS):
        if path.startswith(prefix):
            return rank, path
    return len(MASTER_CONFIG_DIRS), path


def locate_key(files: dict[str, str], key: str) -> KeyLocation:
    """Locate `key` in candidate master-config files given as {repo path: text}.

    Every file given is searched; a path with a `deprecated` directory counts as archived.
    Raises AmbiguousKeyError when two active files define the key (the bot must not guess).
    """
    active: list[str] = []
    archived: list[str] = []
    broken: list[str] = []
    names: list[str] = []
    for path in sorted(files, key=_order):
        try:
            data = parse_master(files[path])
        except RecipeError as exc:
            broken.append(f"{path} ({exc})")
            continue
        names.extend(str(k) for k in data)
        if key in data:
            (archived if is_archived_path(path) else active).append(path)
    if len(active) > 1:
        raise AmbiguousKeyError(
            f"config key '{key}' is defined in {' and '.join(active)}; keep it in one active master config"
        )
    if active:
        note = f" (an archived copy also exists in {archived[0]})" if archived else ""
        return KeyLocation(key, "found", active[0], f"config key '{key}' is in {active[0]}{note}")
    if archived:
        return KeyLocation(
            key,
            "archived",
            archived[0],
            f"config key '{key}' was archived to {archived[0]}, which sweep generation no longer reads; "
            "restore it to an active master config or use a current key",
        )
    searched = ", ".join(sorted(files, key=_order)) or "no files"
    close = difflib.get_close_matches(key, names, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    unreadable = f"; unreadable: {'; '.join(broken)}" if broken else ""
    return KeyLocation(key, "missing", None, f"config key '{key}' is not in {searched}{hint}{unreadable}")
