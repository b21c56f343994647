"""Reading the benchmark repo: runner capacity (runners.yaml), the dispatch workflow's matrix jobs
GitHub never expands, and the accuracy gate. Master configs are ``app.flows.repo.recipe_files``'s."""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

import structlog

from app.core.recipes import runner_capacity
from app.core.recipes.errors import RecipeError
from app.core.recipes.runners import hardware_table
from app.core.routing import TransientError
from app.core.thresholds import THRESHOLDS_PATH, ThresholdsError, parse_thresholds
from app.core.unexpanded_workflow import unexpanded_findings
from app.core.workflows import workflow_path
from app.settings import Settings, get_settings

log = structlog.get_logger(__name__)

DEFAULT_CAPACITY = 1  # unknown label: one job at a time never oversubscribes a scarce fleet
CAPACITY_CACHE_SECONDS = 600.0
RUNNERS_YAML_PATHS = (".github/configs/runners.yaml", "configs/runners.yaml")


class FileReader(Protocol):
    def get_file(self, repo: str, path: str, ref: str | None = None) -> tuple[str, str] | None: ...


class RepoFiles(Protocol):
    """The gateway methods that read the repo's files."""

    def get_repo(self, repo: str) -> dict[str, Any]: ...
    def get_file(self, repo: str, path: str, ref: str | None = None) -> tuple[str, str] | None: ...
    def list_dir(self, repo: str, path: str, ref: str | None = None) -> list[dict[str, Any]]: ...


def runners_hardware_at(
    gw: FileReader, repo: str, ref: str, master_path: str
) -> dict[str, dict[str, object]] | None:
    """runners.yaml's `hardware:` at ``ref``, as the dispatched generator reads it (its
    `--runner-config` default `configs/runners.yaml`, else the runners.yaml beside the master
    file): what sizes a DRAM-offload point's `total-cpu-dram-gb`. None when there is none."""
    beside = master_path.rsplit("/", 1)[0] + "/runners.yaml" if "/" in master_path else "runners.yaml"
    for path in dict.fromkeys(("configs/runners.yaml", beside)):
        got = gw.get_file(repo, path, ref=ref)
        if got is None:
            continue
        try:
            return hardware_table(got[0])
        except RecipeError as exc:
            log.warning("runners_yaml_unreadable", repo=repo, path=path, error=str(exc))
            return None
    return None


_capacity_cache: dict[str, tuple[float, dict[str, int]]] = {}


_capacity_lock = threading.Lock()


def _runners_yaml_capacity(gw: RepoFiles, repo: str) -> dict[str, int]:
    with _capacity_lock:
        hit = _capacity_cache.get(repo)
        if hit is not None and time.monotonic() - hit[0] < CAPACITY_CACHE_SECONDS:
            return hit[1]
    counts: dict[str, int] = {}
    try:
        default_branch = str(gw.get_repo(repo).get("default_branch") or "main")
        for path in RUNNERS_YAML_PATHS:
            got = gw.get_file(repo, path, ref=default_branch)
            if got is not None:
                counts = runner_capacity(got[0])
                break
    except (TransientError, ValueError) as exc:
        log.warning("runners_yaml_unreadable", repo=repo, error=str(exc))
        return {}  # not cached: try again next tick
    with _capacity_lock:
        _capacity_cache[repo] = (time.monotonic(), counts)
    return counts


def clear_capacity_cache() -> None:
    with _capacity_lock:
        _capacity_cache.clear()


def label_capacity(
    gw: RepoFiles | None, label: str, repo: str | None, settings: Settings | None = None
) -> tuple[int, str]:
    """Capacity of a runner label and where it came from: settings, the repo's runners.yaml, or default."""
    settings = settings or get_settings()
    if label in settings.runner_capacity:
        return settings.runner_capacity[label], "settings"
    if repo is not None and gw is not None:
        counts = _runners_yaml_capacity(gw, repo)
        if label in counts:
            return counts[label], f"runners.yaml of {repo}"
    return DEFAULT_CAPACITY, "default"


def workflow_prediction_at(
    gw: FileReader, repo: str, ref: str, settings: Settings | None = None
) -> dict[str, Any] | None:
    """What the dispatch workflow's file at ``ref`` says of its matrix jobs GitHub never expands
    (app.core.unexpanded_workflow.unexpanded_jobs): ``{"ref", "file", "callers": {name: {...}}}``, stored on
    the sweep so a run's never-created jobs are concluded without reading GitHub
    (app.flows.scheduler.unexpanded). None when the file cannot be read (nothing is predicted)."""
    settings = settings or get_settings()
    path = workflow_path(settings.dispatch_workflow)
    try:
        got = gw.get_file(repo, path, ref=ref)
    except TransientError:
        raise
    except Exception as exc:  # an unreadable file costs idle runners, never a sweep
        log.warning("workflow_unreadable", repo=repo, ref=ref, error=str(exc))
        return None
    if got is None:
        return None
    callers = {
        found["name"]: {"job": job_id, "output": found["output"], "variable": found["variable"]}
        for job_id, found in unexpanded_findings(got[0]).items()
    }
    return {"ref": ref, "file": path, "callers": callers}


def callers_of(prediction: dict[str, Any] | None) -> frozenset[str]:
    """The callers a prediction (``workflow_prediction_at``) names: their jobs hold no runner (a
    dispatch's slots leave them out; an unread file predicts none: too many slots keep runners
    idle, too few would oversubscribe them)."""
    return frozenset((prediction or {}).get("callers") or {})


def eval_thresholds_at(gw: FileReader, repo: str, ref: str) -> dict[str, Any] | None:
    """The repo's accuracy gate (``utils/evals/thresholds.yaml``) at ``ref``, the checkout the
    sweep's eval jobs run ``validate_scores.py`` in; stored on the sweep so the report judges scores
    as that run did. ``{"missing": path}`` when the repo has no such file, ``{"error": why}`` when it
    cannot be used; None when it could not be read now (the report then says so)."""
    try:
        got = gw.get_file(repo, THRESHOLDS_PATH, ref=ref)
    except TransientError:
        raise
    except Exception as exc:  # an unreadable file costs the threshold verdict, never a sweep
        log.warning("thresholds_unreadable", repo=repo, ref=ref, error=str(exc))
        return None
    if got is None:
        return {"missing": THRESHOLDS_PATH, "ref": ref}
    try:
        return parse_thresholds(got[0], ref=ref).as_json()
    except ThresholdsError as exc:
        log.warning("thresholds_invalid", repo=repo, ref=ref, error=str(exc))
        return {"error": str(exc), "path": THRESHOLDS_PATH, "ref": ref}
