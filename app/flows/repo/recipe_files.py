"""Reading the benchmark repo's recipe files through the gateway: master configs in the configured
directories, where a config key lives, and which keys a recipe PR is about.

``read_master_configs`` is the one master-config reader: the sweep path (``sweeps.request``, the
nightly canary) and the tracking path (``locate_config``, ``target_keys``, the bump) both find
files with it, by ``app.core.recipes.is_master_config_path``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import structlog

from app.adapters.registry import parse_image
from app.core.bot_config import BotConfig
from app.core.deprefs import parse_config_keys
from app.core.payloads import DELETED_FORK, head_of
from app.core.recipes import (
    KeyLocation,
    RecipeError,
    current_image,
    is_archived_path,
    is_master_config_path,
    keys_changed,
    keys_for_paths,
    locate_key,
    parse_master,
)
from app.core.recipes.srtrecipe import recipe_refs
from app.core.sweepspec import SweepError
from app.flows.repo.bench_repo import RepoFiles

log = structlog.get_logger(__name__)

# Where master configs live unless `.github/sweepbot.yml` says otherwise (``bump.config-dirs``).
MASTER_DIRS: tuple[str, ...] = tuple(BotConfig().bump.config_dirs)


class RecipeReader(RepoFiles, Protocol):
    """Reading recipe files: master configs in their directories, a PR's changed files."""

    def list_pull_files(self, repo: str, number: int) -> list[dict[str, Any]]: ...

    def get_ref(self, repo: str, ref: str) -> dict[str, Any] | None: ...


def read_master_configs(
    gw: RepoFiles, repo: str, ref: str | None, dirs: Sequence[str] = MASTER_DIRS, *, archived: bool = False
) -> dict[str, str]:
    """Master configs ({path: text}) in ``dirs`` (``.github/configs``, ``configs``; with
    ``archived``, their ``deprecated/``): every file ``is_master_config_path`` accepts."""
    files: dict[str, str] = {}
    dirs = [d.rstrip("/") for d in dirs]
    if archived:
        dirs = [f"{d}/deprecated" for d in dirs]
    for directory in dirs:
        for entry in gw.list_dir(repo, directory, ref=ref):
            path = str(entry.get("path") or f"{directory}/{entry.get('name')}")
            if entry.get("type") == "file" and is_master_config_path(path):
                got = gw.get_file(repo, path, ref=ref)
                if got is not None:
                    files[path] = got[0]
    return files


def locate(files: dict[str, str], key: str) -> str:
    """The path of the active master config holding ``key`` among ``files``; SweepError saying
    why when none does (archived, missing, ambiguous)."""
    found = locate_key(files, key)
    if not found.found or found.path is None:
        raise SweepError(found.reason)
    return str(found.path)


def locate_config(
    gw: RecipeReader, repo: str, ref: str | None, key: str, cfg: BotConfig, hint: str | None = None
) -> tuple[KeyLocation, str | None]:
    """(KeyLocation, text of the file holding ``key``); the last known path is tried first."""
    if hint:
        got = gw.get_file(repo, hint, ref=ref)
        if got is not None:
            loc = locate_key({hint: got[0]}, key)
            if loc.found:
                return loc, got[0]
    files = read_master_configs(gw, repo, ref, cfg.bump.config_dirs)
    loc = locate_key(files, key)
    if loc.found and loc.path:
        return loc, files[loc.path]
    # Only now look at the archive: it explains a missing key instead of editing a dead copy.
    archived = read_master_configs(gw, repo, ref, cfg.bump.config_dirs, archived=True)
    if archived:
        loc = locate_key({**files, **archived}, key)
    return loc, None


def default_image_repo(gw: RecipeReader, repo: str, key: str, cfg: BotConfig, hint: str | None) -> str | None:
    """The image repository ``key`` pins on the default branch (None: not there, or no readable pin)."""
    branch = str(gw.get_repo(repo).get("default_branch") or "main")
    ref = gw.get_ref(repo, f"heads/{branch}")
    sha = str((ref or {}).get("object", {}).get("sha") or "") or None
    try:
        loc, text = locate_config(gw, repo, sha, key, cfg, hint=hint)
        image = current_image(text, key) if text is not None and loc.found else None
        return parse_image(image).image_repo if image else None
    except (RecipeError, ValueError) as exc:
        log.info("default_pin_unreadable", repo=repo, key=key, error=str(exc))
        return None


def read_recipes(
    gw: RecipeReader, repo: str, ref: str, master_text: str, key: str
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The srt-slurm recipe files a multi-node key names, at ``ref`` ({path: text}), and those it
    names by their repo path that the repo does not hold. A ``recipes/`` path the repo does not
    hold is the srt-slurm project's own recipe (outside the repo): neither."""
    try:
        entry = parse_master(master_text).get(key)
    except RecipeError:
        return {}, ()
    found: dict[str, str] = {}
    missing: list[str] = []
    for r in recipe_refs(entry) if isinstance(entry, dict) else []:
        got = gw.get_file(repo, r.path, ref=ref)
        if got is not None:
            found[r.path] = got[0]
        elif r.in_repo_path:
            missing.append(r.path)
    return found, tuple(missing)


def _parsed(texts: dict[str, str]) -> dict[str, Any]:
    masters: dict[str, Any] = {}
    for text in texts.values():
        try:
            masters.update(parse_master(text))
        except RecipeError:
            continue
    return masters


def _changed_keys(
    gw: RecipeReader, repo: str, head_repo: str, head_sha: str, base_sha: str, paths: list[str]
) -> tuple[list[str], dict[str, Any]]:
    """Keys a PR changes in active master configs, and those configs parsed at the head."""
    keys: list[str] = []
    masters: dict[str, Any] = {}
    for path in paths:
        if not is_master_config_path(path) or is_archived_path(path):
            continue
        got = gw.get_file(head_repo, path, ref=head_sha)
        if got is None:
            continue
        old = gw.get_file(repo, path, ref=base_sha) if base_sha else None
        try:
            changed = keys_changed(old[0] if old else "", got[0])
            masters.update(parse_master(got[0]))
        except RecipeError as exc:
            log.warning("master_unreadable", path=path, error=str(exc))
            continue
        keys += sorted(k for k in changed if k in masters and k not in keys)
    return keys, masters


def target_keys(gw: RecipeReader, repo: str, pull: dict[str, Any], cfg: BotConfig) -> list[str]:
    """The config keys a recipe PR is about: named in its body, or touched in a master config, or
    whose benchmark script it touches."""
    explicit = parse_config_keys(str(pull.get("body") or ""))
    if explicit:
        return explicit
    number = int(pull["number"])
    head = head_of(pull, repo)
    if not head.readable:
        log.info("pr_keys_unreadable", repo=repo, number=number, reason=DELETED_FORK)
        return []
    head_repo, head_sha = str(head.repo), head.sha
    base_sha = str((pull.get("base") or {}).get("sha") or "")
    paths = [str(f.get("filename")) for f in gw.list_pull_files(repo, number)]
    keys, masters = _changed_keys(gw, repo, head_repo, head_sha, base_sha, paths)
    scripts = [p for p in paths if p.startswith("benchmarks/")]
    if scripts:
        if not masters:
            masters = _parsed(read_master_configs(gw, head_repo, head_sha, cfg.bump.config_dirs))
        found = keys_for_paths(scripts, masters)
        if not found:
            # A script of a key archived to configs/deprecated/: watch it anyway, so the PR gets
            # the clear "archived" explanation instead of silence.
            found = keys_for_paths(
                scripts,
                _parsed(read_master_configs(gw, head_repo, head_sha, cfg.bump.config_dirs, archived=True)),
            )
        keys += sorted(k for k in found if k not in keys)
    log.info("pr_target_keys", repo=repo, number=number, keys=keys, why="changed master entries and scripts")
    return keys
